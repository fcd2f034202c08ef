//! `information_schema`: MySQL 8.0's views with their column names and types, filled from the
//! catalog of the position a session reads at. Views TiDB has nothing for (routines, triggers,
//! events, files) exist and are empty, as on a MySQL server without such objects.
//!
//! Schema and table names compare case-sensitively (`lower_case_table_names = 0`); column and
//! index names case-insensitively, as MySQL compares them.

use std::sync::OnceLock;

use tibinlog_protocol::value::Value;

use super::catalog::{CatalogSnapshot, TableEstimate, TableKind, TableMeta, TableStats};
use super::charset::{self, CHARSETS, COLLATIONS};
use super::types::{SqlType, TypeKind};

/// The name of the schema, as MySQL spells it.
pub const INFORMATION_SCHEMA: &str = "information_schema";

/// Collation of schema and table names (case-sensitive).
const NAME_BIN: u16 = 83;

/// True for `information_schema` (any case).
pub fn is_schema(db: &str) -> bool {
    db.eq_ignore_ascii_case(INFORMATION_SCHEMA)
}

/// The schema's canonical name.
pub fn schema_name(_db: &str) -> &'static str {
    INFORMATION_SCHEMA
}

/// One session, for `PROCESSLIST`.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    pub id: u64,
    pub user: String,
    pub host: String,
    pub db: Option<String>,
    pub command: String,
    pub time: i64,
    pub state: String,
    pub info: Option<String>,
}

/// Server facts the views show besides the catalog.
#[derive(Debug, Clone, Default)]
pub struct ServerFacts {
    pub processlist: Vec<ProcessInfo>,
}

/// Column-value equalities a query's WHERE imposes, to narrow what a view generates.
#[derive(Debug, Clone, Default)]
pub struct Pushdown {
    /// (upper-case column name, value).
    pub eq: Vec<(String, String)>,
}

impl Pushdown {
    fn get(&self, col: &str) -> Option<&str> {
        self.eq
            .iter()
            .find(|(c, _)| c == col)
            .map(|(_, v)| v.as_str())
    }

    /// False if the pushed-down equality on `col` (a case-sensitive name) excludes `value`.
    fn admits(&self, col: &str, value: &str) -> bool {
        self.get(col).is_none_or(|v| v == value)
    }
}

/// One view: its MySQL name and columns.
#[derive(Debug)]
pub struct InfoTable {
    pub name: &'static str,
    pub columns: Vec<(&'static str, SqlType)>,
}

fn name() -> SqlType {
    SqlType::varchar(64, NAME_BIN).not_null()
}
fn nname() -> SqlType {
    SqlType::varchar(64, NAME_BIN)
}
fn vc(n: u32) -> SqlType {
    SqlType::varchar(n, charset::UTF8MB3_GENERAL_CI).not_null()
}
fn nvc(n: u32) -> SqlType {
    SqlType::varchar(n, charset::UTF8MB3_GENERAL_CI)
}
fn text() -> SqlType {
    SqlType::new(TypeKind::Text { max_bytes: 65_535 }).with_collation(charset::UTF8MB3_GENERAL_CI)
}
fn longtext() -> SqlType {
    SqlType::longtext(charset::UTF8MB3_GENERAL_CI)
}
fn u64t() -> SqlType {
    SqlType::ubigint()
}
fn i64t() -> SqlType {
    SqlType::bigint()
}
fn u32t() -> SqlType {
    SqlType::new(TypeKind::Int { bytes: 4 }).unsigned()
}
fn i32t() -> SqlType {
    SqlType::int()
}
fn ts() -> SqlType {
    SqlType::new(TypeKind::Timestamp { fsp: 0 })
}
fn dt() -> SqlType {
    SqlType::datetime(0)
}
fn en(members: &[&str]) -> SqlType {
    SqlType::new(TypeKind::Enum {
        members: members.iter().map(|m| m.as_bytes().to_vec()).collect(),
    })
    .with_collation(charset::UTF8MB3_GENERAL_CI)
    .not_null()
}
fn bin0() -> SqlType {
    SqlType::new(TypeKind::Char { chars: 0 })
}

/// The name columns MySQL 8.0 keeps in `utf8mb3_tolower_ci` (the others are `utf8mb3_bin`).
const TOLOWER_NAMES: &[(&str, &str)] = &[
    ("CHECK_CONSTRAINTS", "CONSTRAINT_NAME"),
    ("COLUMNS", "COLUMN_NAME"),
    ("KEY_COLUMN_USAGE", "COLUMN_NAME"),
    ("KEY_COLUMN_USAGE", "CONSTRAINT_NAME"),
    ("KEY_COLUMN_USAGE", "REFERENCED_COLUMN_NAME"),
    ("PARTITIONS", "PARTITION_NAME"),
    ("PARTITIONS", "SUBPARTITION_NAME"),
    ("REFERENTIAL_CONSTRAINTS", "CONSTRAINT_NAME"),
    ("REFERENTIAL_CONSTRAINTS", "UNIQUE_CONSTRAINT_NAME"),
    ("STATISTICS", "COLUMN_NAME"),
    ("STATISTICS", "INDEX_NAME"),
    ("TABLE_CONSTRAINTS", "CONSTRAINT_NAME"),
];

fn tables() -> &'static [InfoTable] {
    static TABLES: OnceLock<Vec<InfoTable>> = OnceLock::new();
    TABLES.get_or_init(|| {
        let t = |name, columns| InfoTable { name, columns };
        let mut all = vec![
            t(
                "CHARACTER_SETS",
                vec![
                    ("CHARACTER_SET_NAME", vc(64)),
                    ("DEFAULT_COLLATE_NAME", vc(64)),
                    ("DESCRIPTION", vc(2048)),
                    ("MAXLEN", u32t().not_null()),
                ],
            ),
            t(
                "CHECK_CONSTRAINTS",
                vec![
                    ("CONSTRAINT_CATALOG", name()),
                    ("CONSTRAINT_SCHEMA", name()),
                    ("CONSTRAINT_NAME", name()),
                    ("CHECK_CLAUSE", longtext().not_null()),
                ],
            ),
            t(
                "COLLATIONS",
                vec![
                    ("COLLATION_NAME", vc(64)),
                    ("CHARACTER_SET_NAME", vc(64)),
                    ("ID", u64t().not_null()),
                    ("IS_DEFAULT", vc(3)),
                    ("IS_COMPILED", vc(3)),
                    ("SORTLEN", u32t().not_null()),
                    ("PAD_ATTRIBUTE", en(&["PAD SPACE", "NO PAD"])),
                ],
            ),
            t(
                "COLLATION_CHARACTER_SET_APPLICABILITY",
                vec![("COLLATION_NAME", vc(64)), ("CHARACTER_SET_NAME", vc(64))],
            ),
            t(
                "COLUMNS",
                vec![
                    ("TABLE_CATALOG", name()),
                    ("TABLE_SCHEMA", name()),
                    ("TABLE_NAME", name()),
                    ("COLUMN_NAME", nvc(64)),
                    ("ORDINAL_POSITION", u32t().not_null()),
                    ("COLUMN_DEFAULT", text()),
                    ("IS_NULLABLE", vc(3)),
                    ("DATA_TYPE", longtext()),
                    ("CHARACTER_MAXIMUM_LENGTH", i64t()),
                    ("CHARACTER_OCTET_LENGTH", i64t()),
                    ("NUMERIC_PRECISION", u64t()),
                    ("NUMERIC_SCALE", u64t()),
                    ("DATETIME_PRECISION", u32t()),
                    ("CHARACTER_SET_NAME", nvc(64)),
                    ("COLLATION_NAME", nvc(64)),
                    (
                        "COLUMN_TYPE",
                        SqlType::new(TypeKind::Text {
                            max_bytes: 16_777_215,
                        })
                        .with_collation(charset::UTF8MB3_GENERAL_CI)
                        .not_null(),
                    ),
                    ("COLUMN_KEY", en(&["", "PRI", "UNI", "MUL"])),
                    ("EXTRA", nvc(256)),
                    ("PRIVILEGES", nvc(154)),
                    ("COLUMN_COMMENT", text().not_null()),
                    ("GENERATION_EXPRESSION", longtext().not_null()),
                    ("SRS_ID", u32t()),
                ],
            ),
            t(
                "ENGINES",
                vec![
                    ("ENGINE", vc(64)),
                    ("SUPPORT", vc(8)),
                    ("COMMENT", vc(80)),
                    ("TRANSACTIONS", nvc(3)),
                    ("XA", nvc(3)),
                    ("SAVEPOINTS", nvc(3)),
                ],
            ),
            t(
                "EVENTS",
                vec![
                    ("EVENT_CATALOG", name()),
                    ("EVENT_SCHEMA", name()),
                    ("EVENT_NAME", name()),
                    ("DEFINER", vc(288)),
                    ("TIME_ZONE", vc(64)),
                    ("EVENT_BODY", vc(3)),
                    ("EVENT_DEFINITION", longtext().not_null()),
                    ("EVENT_TYPE", vc(9)),
                    ("EXECUTE_AT", dt()),
                    ("INTERVAL_VALUE", nvc(256)),
                    ("INTERVAL_FIELD", nvc(18)),
                    ("SQL_MODE", vc(520)),
                    ("STARTS", dt()),
                    ("ENDS", dt()),
                    ("STATUS", vc(18)),
                    ("ON_COMPLETION", vc(12)),
                    ("CREATED", ts().not_null()),
                    ("LAST_ALTERED", ts().not_null()),
                    ("LAST_EXECUTED", dt()),
                    ("EVENT_COMMENT", vc(2048)),
                    ("ORIGINATOR", u32t().not_null()),
                    ("CHARACTER_SET_CLIENT", vc(64)),
                    ("COLLATION_CONNECTION", vc(64)),
                    ("DATABASE_COLLATION", vc(64)),
                ],
            ),
            t(
                "FILES",
                vec![
                    ("FILE_ID", i64t()),
                    ("FILE_NAME", text()),
                    ("FILE_TYPE", nvc(256)),
                    ("TABLESPACE_NAME", vc(268)),
                    ("TABLE_CATALOG", bin0()),
                    ("TABLE_SCHEMA", bin0()),
                    ("TABLE_NAME", bin0()),
                    ("LOGFILE_GROUP_NAME", nvc(256)),
                    ("LOGFILE_GROUP_NUMBER", i64t()),
                    ("ENGINE", vc(64)),
                    ("FULLTEXT_KEYS", bin0()),
                    ("DELETED_ROWS", bin0()),
                    ("UPDATE_COUNT", bin0()),
                    ("FREE_EXTENTS", i64t()),
                    ("TOTAL_EXTENTS", i64t()),
                    ("EXTENT_SIZE", i64t()),
                    ("INITIAL_SIZE", i64t()),
                    ("MAXIMUM_SIZE", i64t()),
                    ("AUTOEXTEND_SIZE", i64t()),
                    ("CREATION_TIME", bin0()),
                    ("LAST_UPDATE_TIME", bin0()),
                    ("LAST_ACCESS_TIME", bin0()),
                    ("RECOVER_TIME", bin0()),
                    ("TRANSACTION_COUNTER", bin0()),
                    ("VERSION", i64t()),
                    ("ROW_FORMAT", nvc(256)),
                    ("TABLE_ROWS", bin0()),
                    ("AVG_ROW_LENGTH", bin0()),
                    ("DATA_LENGTH", bin0()),
                    ("MAX_DATA_LENGTH", bin0()),
                    ("INDEX_LENGTH", bin0()),
                    ("DATA_FREE", i64t()),
                    ("CREATE_TIME", bin0()),
                    ("UPDATE_TIME", bin0()),
                    ("CHECK_TIME", bin0()),
                    ("CHECKSUM", bin0()),
                    ("STATUS", nvc(256)),
                    ("EXTRA", nvc(256)),
                ],
            ),
            t(
                "KEY_COLUMN_USAGE",
                vec![
                    ("CONSTRAINT_CATALOG", name()),
                    ("CONSTRAINT_SCHEMA", name()),
                    ("CONSTRAINT_NAME", nname()),
                    ("TABLE_CATALOG", name()),
                    ("TABLE_SCHEMA", name()),
                    ("TABLE_NAME", name()),
                    ("COLUMN_NAME", nvc(64)),
                    ("ORDINAL_POSITION", u32t().not_null()),
                    ("POSITION_IN_UNIQUE_CONSTRAINT", u32t()),
                    ("REFERENCED_TABLE_SCHEMA", nname()),
                    ("REFERENCED_TABLE_NAME", nname()),
                    ("REFERENCED_COLUMN_NAME", nvc(64)),
                ],
            ),
            t(
                "PARTITIONS",
                vec![
                    ("TABLE_CATALOG", name()),
                    ("TABLE_SCHEMA", name()),
                    ("TABLE_NAME", name()),
                    ("PARTITION_NAME", nname()),
                    ("SUBPARTITION_NAME", nname()),
                    ("PARTITION_ORDINAL_POSITION", u32t()),
                    ("SUBPARTITION_ORDINAL_POSITION", u32t()),
                    ("PARTITION_METHOD", nvc(13)),
                    ("SUBPARTITION_METHOD", nvc(13)),
                    ("PARTITION_EXPRESSION", nvc(2048)),
                    ("SUBPARTITION_EXPRESSION", nvc(2048)),
                    ("PARTITION_DESCRIPTION", text()),
                    ("TABLE_ROWS", u64t()),
                    ("AVG_ROW_LENGTH", u64t()),
                    ("DATA_LENGTH", u64t()),
                    ("MAX_DATA_LENGTH", u64t()),
                    ("INDEX_LENGTH", u64t()),
                    ("DATA_FREE", u64t()),
                    ("CREATE_TIME", ts().not_null()),
                    ("UPDATE_TIME", dt()),
                    ("CHECK_TIME", dt()),
                    ("CHECKSUM", i64t()),
                    ("PARTITION_COMMENT", text().not_null()),
                    ("NODEGROUP", nvc(256)),
                    ("TABLESPACE_NAME", nvc(268)),
                ],
            ),
            t(
                "PROCESSLIST",
                vec![
                    ("ID", u64t().not_null()),
                    ("USER", vc(32)),
                    ("HOST", vc(261)),
                    ("DB", nvc(64)),
                    ("COMMAND", vc(16)),
                    ("TIME", i32t().not_null()),
                    ("STATE", nvc(64)),
                    ("INFO", longtext()),
                ],
            ),
            t(
                "REFERENTIAL_CONSTRAINTS",
                vec![
                    ("CONSTRAINT_CATALOG", name()),
                    ("CONSTRAINT_SCHEMA", name()),
                    ("CONSTRAINT_NAME", nname()),
                    ("UNIQUE_CONSTRAINT_CATALOG", name()),
                    ("UNIQUE_CONSTRAINT_SCHEMA", name()),
                    ("UNIQUE_CONSTRAINT_NAME", nname()),
                    ("MATCH_OPTION", en(&["NONE", "PARTIAL", "FULL"])),
                    (
                        "UPDATE_RULE",
                        en(&[
                            "NO ACTION",
                            "RESTRICT",
                            "CASCADE",
                            "SET NULL",
                            "SET DEFAULT",
                        ]),
                    ),
                    (
                        "DELETE_RULE",
                        en(&[
                            "NO ACTION",
                            "RESTRICT",
                            "CASCADE",
                            "SET NULL",
                            "SET DEFAULT",
                        ]),
                    ),
                    ("TABLE_NAME", name()),
                    ("REFERENCED_TABLE_NAME", name()),
                ],
            ),
            t(
                "ROUTINES",
                vec![
                    ("SPECIFIC_NAME", name()),
                    ("ROUTINE_CATALOG", name()),
                    ("ROUTINE_SCHEMA", name()),
                    ("ROUTINE_NAME", name()),
                    ("ROUTINE_TYPE", en(&["FUNCTION", "PROCEDURE"])),
                    ("DATA_TYPE", longtext()),
                    ("CHARACTER_MAXIMUM_LENGTH", i64t()),
                    ("CHARACTER_OCTET_LENGTH", i64t()),
                    ("NUMERIC_PRECISION", u32t()),
                    ("NUMERIC_SCALE", u32t()),
                    ("DATETIME_PRECISION", u32t()),
                    ("CHARACTER_SET_NAME", nvc(64)),
                    ("COLLATION_NAME", nvc(64)),
                    ("DTD_IDENTIFIER", longtext()),
                    ("ROUTINE_BODY", vc(8)),
                    ("ROUTINE_DEFINITION", longtext()),
                    ("EXTERNAL_NAME", nvc(64)),
                    ("EXTERNAL_LANGUAGE", vc(64)),
                    ("PARAMETER_STYLE", vc(3)),
                    ("IS_DETERMINISTIC", vc(3)),
                    ("SQL_DATA_ACCESS", vc(17)),
                    ("SQL_PATH", nvc(64)),
                    ("SECURITY_TYPE", vc(7)),
                    ("CREATED", ts().not_null()),
                    ("LAST_ALTERED", ts().not_null()),
                    ("SQL_MODE", vc(520)),
                    ("ROUTINE_COMMENT", text().not_null()),
                    ("DEFINER", vc(288)),
                    ("CHARACTER_SET_CLIENT", vc(64)),
                    ("COLLATION_CONNECTION", vc(64)),
                    ("DATABASE_COLLATION", vc(64)),
                ],
            ),
            t(
                "SCHEMATA",
                vec![
                    ("CATALOG_NAME", name()),
                    ("SCHEMA_NAME", name()),
                    ("DEFAULT_CHARACTER_SET_NAME", vc(64)),
                    ("DEFAULT_COLLATION_NAME", vc(64)),
                    ("SQL_PATH", bin0()),
                    ("DEFAULT_ENCRYPTION", en(&["NO", "YES"])),
                ],
            ),
            t(
                "STATISTICS",
                vec![
                    ("TABLE_CATALOG", name()),
                    ("TABLE_SCHEMA", name()),
                    ("TABLE_NAME", name()),
                    ("NON_UNIQUE", i32t().not_null()),
                    ("INDEX_SCHEMA", name()),
                    ("INDEX_NAME", nname()),
                    ("SEQ_IN_INDEX", u32t().not_null()),
                    ("COLUMN_NAME", nvc(64)),
                    ("COLLATION", nvc(1)),
                    ("CARDINALITY", i64t()),
                    ("SUB_PART", i64t()),
                    ("PACKED", bin0()),
                    ("NULLABLE", vc(3)),
                    ("INDEX_TYPE", vc(11)),
                    ("COMMENT", vc(8)),
                    ("INDEX_COMMENT", vc(2048)),
                    ("IS_VISIBLE", vc(3)),
                    ("EXPRESSION", longtext()),
                ],
            ),
            t(
                "TABLES",
                vec![
                    ("TABLE_CATALOG", name()),
                    ("TABLE_SCHEMA", name()),
                    ("TABLE_NAME", name()),
                    ("TABLE_TYPE", en(&["BASE TABLE", "VIEW", "SYSTEM VIEW"])),
                    ("ENGINE", nvc(64)),
                    ("VERSION", i32t()),
                    ("ROW_FORMAT", {
                        let mut t = en(&[
                            "Fixed",
                            "Dynamic",
                            "Compressed",
                            "Redundant",
                            "Compact",
                            "Paged",
                        ]);
                        t.nullable = true;
                        t
                    }),
                    ("TABLE_ROWS", u64t()),
                    ("AVG_ROW_LENGTH", u64t()),
                    ("DATA_LENGTH", u64t()),
                    ("MAX_DATA_LENGTH", u64t()),
                    ("INDEX_LENGTH", u64t()),
                    ("DATA_FREE", u64t()),
                    ("AUTO_INCREMENT", u64t()),
                    ("CREATE_TIME", ts().not_null()),
                    ("UPDATE_TIME", dt()),
                    ("CHECK_TIME", dt()),
                    ("TABLE_COLLATION", nvc(64)),
                    ("CHECKSUM", i64t()),
                    ("CREATE_OPTIONS", nvc(256)),
                    ("TABLE_COMMENT", text()),
                ],
            ),
            t(
                "TABLE_CONSTRAINTS",
                vec![
                    ("CONSTRAINT_CATALOG", name()),
                    ("CONSTRAINT_SCHEMA", name()),
                    ("CONSTRAINT_NAME", nname()),
                    ("TABLE_SCHEMA", name()),
                    ("TABLE_NAME", name()),
                    ("CONSTRAINT_TYPE", vc(11)),
                    ("ENFORCED", vc(3)),
                ],
            ),
            t(
                "TRIGGERS",
                vec![
                    ("TRIGGER_CATALOG", name()),
                    ("TRIGGER_SCHEMA", name()),
                    ("TRIGGER_NAME", name()),
                    ("EVENT_MANIPULATION", en(&["INSERT", "UPDATE", "DELETE"])),
                    ("EVENT_OBJECT_CATALOG", name()),
                    ("EVENT_OBJECT_SCHEMA", name()),
                    ("EVENT_OBJECT_TABLE", name()),
                    ("ACTION_ORDER", u32t().not_null()),
                    ("ACTION_CONDITION", bin0()),
                    ("ACTION_STATEMENT", longtext().not_null()),
                    ("ACTION_ORIENTATION", vc(3)),
                    ("ACTION_TIMING", en(&["BEFORE", "AFTER"])),
                    ("ACTION_REFERENCE_OLD_TABLE", bin0()),
                    ("ACTION_REFERENCE_NEW_TABLE", bin0()),
                    ("ACTION_REFERENCE_OLD_ROW", vc(3)),
                    ("ACTION_REFERENCE_NEW_ROW", vc(3)),
                    ("CREATED", ts().not_null()),
                    ("SQL_MODE", vc(520)),
                    ("DEFINER", vc(288)),
                    ("CHARACTER_SET_CLIENT", vc(64)),
                    ("COLLATION_CONNECTION", vc(64)),
                    ("DATABASE_COLLATION", vc(64)),
                ],
            ),
            t(
                "VIEWS",
                vec![
                    ("TABLE_CATALOG", name()),
                    ("TABLE_SCHEMA", name()),
                    ("TABLE_NAME", name()),
                    ("VIEW_DEFINITION", longtext()),
                    ("CHECK_OPTION", en(&["NONE", "LOCAL", "CASCADED"])),
                    ("IS_UPDATABLE", en(&["NO", "YES"])),
                    ("DEFINER", nvc(288)),
                    ("SECURITY_TYPE", nvc(7)),
                    ("CHARACTER_SET_CLIENT", vc(64)),
                    ("COLLATION_CONNECTION", vc(64)),
                ],
            ),
        ];
        // Names MySQL 8.0 compares and sorts case-insensitively (utf8mb3_tolower_ci).
        for t in &mut all {
            for (column, ty) in &mut t.columns {
                if TOLOWER_NAMES.contains(&(t.name, *column)) {
                    *ty = ty.clone().with_collation(charset::UTF8MB3_TOLOWER_CI);
                }
            }
        }
        all
    })
}

/// The view `db`.`name` (the schema must be information_schema; names in any case).
pub fn table(db: &str, name: &str) -> Option<&'static InfoTable> {
    if !is_schema(db) {
        return None;
    }
    tables().iter().find(|t| t.name.eq_ignore_ascii_case(name))
}

/// Every view, for `SHOW TABLES FROM information_schema`.
pub fn table_names() -> impl Iterator<Item = &'static str> {
    tables().iter().map(|t| t.name)
}

fn s(x: &str) -> Value {
    Value::Bytes(x.as_bytes().to_vec())
}

fn opt_s(x: Option<&str>) -> Value {
    x.map_or(Value::Null, s)
}

fn u(x: u64) -> Value {
    Value::UInt(x)
}

fn e(members: &[&str], x: &str) -> Value {
    match members.iter().position(|m| *m == x) {
        Some(i) => Value::Enum(i as u16 + 1),
        None => Value::Enum(0),
    }
}

/// The catalog's tables a push-down admits.
fn tables_in<'a>(
    catalog: &'a CatalogSnapshot,
    push: &'a Pushdown,
) -> impl Iterator<Item = &'a std::sync::Arc<TableMeta>> + 'a {
    catalog
        .tables
        .iter()
        .filter(move |t| push.admits("TABLE_SCHEMA", &t.db) && push.admits("TABLE_NAME", &t.name))
}

/// The rows of a view.
pub fn rows(
    def: &InfoTable,
    catalog: &CatalogSnapshot,
    facts: &ServerFacts,
    push: &Pushdown,
    stats: Option<&dyn TableStats>,
) -> Vec<Vec<Value>> {
    let def_members = |col: &str| -> Vec<String> {
        def.columns
            .iter()
            .find(|(n, _)| *n == col)
            .and_then(|(_, t)| match &t.kind {
                TypeKind::Enum { members } => Some(
                    members
                        .iter()
                        .map(|m| String::from_utf8_lossy(m).into_owned())
                        .collect(),
                ),
                _ => None,
            })
            .unwrap_or_default()
    };
    let en = |col: &str, x: &str| {
        let m = def_members(col);
        let refs: Vec<&str> = m.iter().map(String::as_str).collect();
        e(&refs, x)
    };
    let mut out = Vec::new();
    match def.name {
        "CHARACTER_SETS" => {
            for c in CHARSETS {
                out.push(vec![
                    s(c.name),
                    s(c.default_collation),
                    s(c.description),
                    u(u64::from(c.maxlen)),
                ]);
            }
        }
        "COLLATIONS" => {
            for c in COLLATIONS {
                out.push(vec![
                    s(c.name),
                    s(c.charset),
                    u(u64::from(c.id)),
                    s(if c.is_default { "Yes" } else { "" }),
                    s("Yes"),
                    u(u64::from(c.sortlen)),
                    en(
                        "PAD_ATTRIBUTE",
                        if c.pad_space { "PAD SPACE" } else { "NO PAD" },
                    ),
                ]);
            }
        }
        "COLLATION_CHARACTER_SET_APPLICABILITY" => {
            for c in COLLATIONS {
                out.push(vec![s(c.name), s(c.charset)]);
            }
        }
        "ENGINES" => {
            out.push(vec![
                s("InnoDB"),
                s("DEFAULT"),
                s("Supports transactions, row-level locking, and foreign keys"),
                s("YES"),
                s("YES"),
                s("YES"),
            ]);
        }
        "SCHEMATA" => {
            let mut dbs: Vec<(String, String, String)> = vec![(
                INFORMATION_SCHEMA.into(),
                "utf8mb3".into(),
                "utf8mb3_general_ci".into(),
            )];
            dbs.extend(
                catalog
                    .databases
                    .iter()
                    .map(|d| (d.name.clone(), d.charset.clone(), d.collation.clone())),
            );
            for (n, cs, coll) in dbs {
                if !push.admits("SCHEMA_NAME", &n) {
                    continue;
                }
                out.push(vec![
                    s("def"),
                    s(&n),
                    s(&cs),
                    s(&coll),
                    Value::Null,
                    en("DEFAULT_ENCRYPTION", "NO"),
                ]);
            }
        }
        "TABLES" => {
            if push.admits("TABLE_SCHEMA", INFORMATION_SCHEMA) {
                for t in tables() {
                    if !push.admits("TABLE_NAME", t.name) {
                        continue;
                    }
                    out.push(vec![
                        s("def"),
                        s(INFORMATION_SCHEMA),
                        s(t.name),
                        en("TABLE_TYPE", "SYSTEM VIEW"),
                        Value::Null,
                        i(10),
                        Value::Null,
                        u(0),
                        u(0),
                        u(0),
                        u(0),
                        u(0),
                        u(0),
                        Value::Null,
                        Value::Timestamp {
                            seconds: 0,
                            micros: 0,
                        },
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        s(""),
                        s(""),
                    ]);
                }
            }
            let est = estimates_of(stats, tables_in(catalog, push));
            for t in tables_in(catalog, push) {
                let view = t.is_view();
                let e = table_estimate(t, &est);
                out.push(vec![
                    s("def"),
                    s(&t.db),
                    s(&t.name),
                    en("TABLE_TYPE", if view { "VIEW" } else { "BASE TABLE" }),
                    if view { Value::Null } else { s("InnoDB") },
                    if view { Value::Null } else { i(10) },
                    if view {
                        Value::Null
                    } else {
                        en("ROW_FORMAT", "Dynamic")
                    },
                    if view { Value::Null } else { u(e.rows) },
                    if view {
                        Value::Null
                    } else {
                        u(e.avg_row_length())
                    },
                    if view { Value::Null } else { u(e.data_length) },
                    if view { Value::Null } else { u(0) },
                    if view { Value::Null } else { u(0) },
                    if view { Value::Null } else { u(0) },
                    t.auto_increment.map_or(Value::Null, u),
                    created(t),
                    Value::Null,
                    Value::Null,
                    if view { Value::Null } else { s(&t.collation) },
                    Value::Null,
                    if view {
                        Value::Null
                    } else {
                        s(&t.create_options)
                    },
                    s(if view { "VIEW" } else { &t.comment }),
                ]);
            }
        }
        "COLUMNS" => {
            for t in tables_in(catalog, push) {
                for (pos, c) in t.columns.iter().enumerate() {
                    if !push
                        .get("COLUMN_NAME")
                        .is_none_or(|n| n.eq_ignore_ascii_case(&c.name))
                    {
                        continue;
                    }
                    let generated = c.generated.as_ref();
                    out.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&t.name),
                        s(&c.name),
                        u(pos as u64 + 1),
                        opt_s(c.default.as_deref()),
                        s(if c.ty.nullable { "YES" } else { "NO" }),
                        s(&c.data_type),
                        c.char_max_len.map_or(Value::Null, |x| Value::Int(x as i64)),
                        c.char_octet_len
                            .map_or(Value::Null, |x| Value::Int(x as i64)),
                        c.numeric_precision.map_or(Value::Null, u),
                        c.numeric_scale.map_or(Value::Null, u),
                        c.datetime_precision.map_or(Value::Null, u),
                        opt_s(c.charset.as_deref()),
                        opt_s(c.collation.as_deref()),
                        s(&c.column_type),
                        en("COLUMN_KEY", &c.key),
                        s(&c.extra),
                        s("select"),
                        s(&c.comment),
                        s(generated.map_or("", |g| g.0.as_str())),
                        Value::Null,
                    ]);
                }
            }
        }
        "STATISTICS" => {
            for t in tables_in(catalog, push) {
                for ix in &t.indexes {
                    for (seq, (col, sub)) in ix.columns.iter().enumerate() {
                        // A key part that is an expression has no column (MySQL 8.0 shows
                        // NULL and the expression; its value may be NULL).
                        let expr = ix.expressions.get(seq).cloned().flatten();
                        let nullable =
                            expr.is_some() || t.column(col).is_some_and(|(_, c)| c.ty.nullable);
                        let col = if expr.is_some() { Value::Null } else { s(col) };
                        out.push(vec![
                            s("def"),
                            s(&t.db),
                            s(&t.name),
                            i(i64::from(!ix.unique)),
                            s(&t.db),
                            s(&ix.name),
                            u(seq as u64 + 1),
                            col,
                            s("A"),
                            Value::Int(0),
                            sub.map_or(Value::Null, |x| Value::Int(x as i64)),
                            Value::Null,
                            s(if nullable { "YES" } else { "" }),
                            s("BTREE"),
                            s(""),
                            s(&ix.comment),
                            s(if ix.visible { "YES" } else { "NO" }),
                            expr.map_or(Value::Null, |e| s(&e)),
                        ]);
                    }
                }
            }
        }
        "KEY_COLUMN_USAGE" => {
            for t in tables_in(catalog, push) {
                for ix in t.indexes.iter().filter(|ix| ix.unique) {
                    for (pos, (col, _)) in ix.columns.iter().enumerate() {
                        out.push(vec![
                            s("def"),
                            s(&t.db),
                            s(&ix.name),
                            s("def"),
                            s(&t.db),
                            s(&t.name),
                            s(col),
                            u(pos as u64 + 1),
                            Value::Null,
                            Value::Null,
                            Value::Null,
                            Value::Null,
                        ]);
                    }
                }
                for fk in &t.foreign_keys {
                    for (pos, (col, rcol)) in fk.columns.iter().zip(&fk.ref_columns).enumerate() {
                        out.push(vec![
                            s("def"),
                            s(&t.db),
                            s(&fk.name),
                            s("def"),
                            s(&t.db),
                            s(&t.name),
                            s(col),
                            u(pos as u64 + 1),
                            u(pos as u64 + 1),
                            s(&fk.ref_db),
                            s(&fk.ref_table),
                            s(rcol),
                        ]);
                    }
                }
            }
        }
        "TABLE_CONSTRAINTS" => {
            for t in tables_in(catalog, push) {
                for ix in t.indexes.iter().filter(|ix| ix.unique) {
                    out.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&ix.name),
                        s(&t.db),
                        s(&t.name),
                        s(if ix.primary { "PRIMARY KEY" } else { "UNIQUE" }),
                        s("YES"),
                    ]);
                }
                for fk in &t.foreign_keys {
                    out.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&fk.name),
                        s(&t.db),
                        s(&t.name),
                        s("FOREIGN KEY"),
                        s("YES"),
                    ]);
                }
                for ck in &t.checks {
                    out.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&ck.name),
                        s(&t.db),
                        s(&t.name),
                        s("CHECK"),
                        s(if ck.enforced { "YES" } else { "NO" }),
                    ]);
                }
            }
        }
        "REFERENTIAL_CONSTRAINTS" => {
            for t in catalog
                .tables
                .iter()
                .filter(|t| push.admits("CONSTRAINT_SCHEMA", &t.db))
            {
                for fk in &t.foreign_keys {
                    out.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&fk.name),
                        s("def"),
                        s(&fk.ref_db),
                        s("PRIMARY"),
                        en("MATCH_OPTION", "NONE"),
                        en("UPDATE_RULE", &fk.on_update),
                        en("DELETE_RULE", &fk.on_delete),
                        s(&t.name),
                        s(&fk.ref_table),
                    ]);
                }
            }
        }
        "CHECK_CONSTRAINTS" => {
            for t in catalog
                .tables
                .iter()
                .filter(|t| push.admits("CONSTRAINT_SCHEMA", &t.db))
            {
                for ck in &t.checks {
                    out.push(vec![s("def"), s(&t.db), s(&ck.name), s(&ck.clause)]);
                }
            }
        }
        "PARTITIONS" => {
            let est = estimates_of(stats, tables_in(catalog, push));
            for t in tables_in(catalog, push) {
                if t.partitions.is_empty() {
                    // A view's row shows zeros (MySQL 8.0 does).
                    let e = if t.is_view() {
                        TableEstimate::default()
                    } else {
                        table_estimate(t, &est)
                    };
                    out.push(partition_row(t, None, e));
                }
                for (pos, p) in t.partitions.iter().enumerate() {
                    let e = paged(est.get(&p.id).copied().unwrap_or_default());
                    out.push(partition_row(t, Some((pos, p)), e));
                }
            }
        }
        "VIEWS" => {
            for t in tables_in(catalog, push) {
                if let TableKind::View {
                    definition,
                    check_option,
                    updatable,
                    definer,
                    security,
                } = &t.kind
                {
                    out.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&t.name),
                        s(definition),
                        en("CHECK_OPTION", check_option),
                        en("IS_UPDATABLE", if *updatable { "YES" } else { "NO" }),
                        s(definer),
                        s(security),
                        s(&t.charset),
                        s(&t.collation),
                    ]);
                }
            }
        }
        "PROCESSLIST" => {
            for p in &facts.processlist {
                out.push(vec![
                    u(p.id),
                    s(&p.user),
                    s(&p.host),
                    opt_s(p.db.as_deref()),
                    s(&p.command),
                    Value::Int(p.time),
                    s(&p.state),
                    opt_s(p.info.as_deref()),
                ]);
            }
        }
        _ => {}
    }
    out
}

/// `CREATE_TIME` of a table (the zero timestamp when unknown).
fn created(t: &TableMeta) -> Value {
    Value::Timestamp {
        seconds: t
            .create_time
            .and_then(|x| u32::try_from(x).ok())
            .unwrap_or(0),
        micros: 0,
    }
}

fn i(x: i64) -> Value {
    Value::Int(x)
}

/// The physical tables holding `t`'s rows: its partitions, or itself (none for a view).
fn physical_ids(t: &TableMeta) -> Vec<i64> {
    if t.is_view() {
        Vec::new()
    } else if t.partitions.is_empty() {
        vec![t.id]
    } else {
        t.partitions.iter().map(|p| p.id).collect()
    }
}

/// Estimates of every physical table of `tables`, asked in one batch.
fn estimates_of<'a>(
    stats: Option<&dyn TableStats>,
    tables: impl Iterator<Item = &'a std::sync::Arc<TableMeta>>,
) -> std::collections::HashMap<i64, TableEstimate> {
    let Some(stats) = stats else {
        return Default::default();
    };
    let ids: Vec<i64> = tables.flat_map(|t| physical_ids(t)).collect();
    if ids.is_empty() {
        return Default::default();
    }
    stats.estimates(&ids)
}

/// A table's estimate: the sum over its physical tables. Without one the table shows what an
/// empty InnoDB table does (no rows, one 16 KiB page); a non-empty estimate never shows less.
fn table_estimate(
    t: &TableMeta,
    est: &std::collections::HashMap<i64, TableEstimate>,
) -> TableEstimate {
    paged(
        physical_ids(t)
            .iter()
            .filter_map(|id| est.get(id))
            .fold(TableEstimate::default(), |a, b| a.plus(*b)),
    )
}

/// At least one 16 KiB page of data, as InnoDB shows for an empty table or partition.
fn paged(mut e: TableEstimate) -> TableEstimate {
    e.data_length = e.data_length.max(16_384);
    e
}

fn partition_row(
    t: &TableMeta,
    p: Option<(usize, &super::catalog::PartitionMeta)>,
    e: TableEstimate,
) -> Vec<Value> {
    let (name, pos, method, expr, desc, comment) = match p {
        Some((pos, p)) => (
            s(&p.name),
            u(pos as u64 + 1),
            s(&p.method),
            s(&p.expression),
            opt_s(p.description.as_deref()),
            s(&p.comment),
        ),
        None => (
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            s(""),
        ),
    };
    vec![
        s("def"),
        s(&t.db),
        s(&t.name),
        name,
        Value::Null,
        pos,
        Value::Null,
        method,
        Value::Null,
        expr,
        Value::Null,
        desc,
        u(e.rows),
        u(e.avg_row_length()),
        u(e.data_length),
        u(0),
        u(0),
        u(0),
        created(t),
        Value::Null,
        Value::Null,
        Value::Null,
        comment,
        s("default"),
        Value::Null,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_its_view_s_width() {
        let mut t = TableMeta {
            db: "db".into(),
            name: "t".into(),
            id: 1,
            kind: TableKind::BaseTable,
            columns: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
            partitions: Vec::new(),
            handle: super::super::catalog::HandleKind::RowId,
            charset: "utf8mb4".into(),
            collation: "utf8mb4_bin".into(),
            comment: String::new(),
            auto_increment: None,
            create_time: None,
            create_options: String::new(),
            create_sql: String::new(),
            rows: None,
        };
        t.indexes.push(super::super::catalog::IndexMeta {
            name: "PRIMARY".into(),
            stored: None,
            primary: true,
            unique: true,
            columns: vec![("id".into(), None)],
            expressions: Vec::new(),
            comment: String::new(),
            visible: true,
        });
        let catalog = CatalogSnapshot::from_tables(vec![std::sync::Arc::new(t)], Vec::new());
        let facts = ServerFacts {
            processlist: vec![ProcessInfo::default()],
        };
        for def in tables() {
            for row in rows(def, &catalog, &facts, &Pushdown::default(), None) {
                assert_eq!(row.len(), def.columns.len(), "{}", def.name);
            }
        }
        let push = Pushdown {
            eq: vec![("TABLE_SCHEMA".into(), "other".into())],
        };
        let tables_def = table("INFORMATION_SCHEMA", "tables").expect("TABLES");
        assert!(rows(tables_def, &catalog, &facts, &push, None).is_empty());
    }
}

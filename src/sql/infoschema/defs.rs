//! A data table: information_schema's views as MySQL 8.0 defines them, each view's name and
//! its columns' names and types, in the order `SHOW TABLES` lists them. The code after the
//! table only turns its entries into [`SqlType`]s.

use std::sync::OnceLock;

use super::super::charset;
use super::super::types::{SqlType, TypeKind};

/// The name of the schema, as MySQL spells it.
pub const INFORMATION_SCHEMA: &str = "information_schema";

/// Collation of schema and table names (case-sensitive).
const NAME_BIN: u16 = 83;

/// One view: its MySQL name and columns.
#[derive(Debug)]
pub struct InfoTable {
    pub name: &'static str,
    pub columns: Vec<(&'static str, SqlType)>,
}

/// The type of a view's column, as the data table writes it.
#[derive(Debug, Clone, Copy)]
enum Col {
    /// A schema or table name, `VARCHAR(64) NOT NULL` in `utf8mb3_bin`.
    Name,
    /// A schema or table name that may be NULL.
    NullName,
    /// `VARCHAR(n) NOT NULL` in `utf8mb3_general_ci`.
    Vc(u32),
    /// `VARCHAR(n)` in `utf8mb3_general_ci`.
    NullVc(u32),
    /// `TEXT`.
    Text,
    /// `TEXT NOT NULL`.
    TextNotNull,
    /// `MEDIUMTEXT NOT NULL`.
    MediumTextNotNull,
    /// `LONGTEXT`.
    LongText,
    /// `LONGTEXT NOT NULL`.
    LongTextNotNull,
    /// `BIGINT UNSIGNED`.
    U64,
    /// `BIGINT UNSIGNED NOT NULL`.
    U64NotNull,
    /// `BIGINT`.
    I64,
    /// `INT UNSIGNED`.
    U32,
    /// `INT UNSIGNED NOT NULL`.
    U32NotNull,
    /// `INT`.
    I32,
    /// `INT NOT NULL`.
    I32NotNull,
    /// `TIMESTAMP NOT NULL`.
    TsNotNull,
    /// `DATETIME`.
    Dt,
    /// `ENUM(…) NOT NULL`.
    Enum(&'static [&'static str]),
    /// `ENUM(…)` that may be NULL.
    NullEnum(&'static [&'static str]),
    /// `CHAR(0)`: a column MySQL keeps for compatibility and always leaves NULL.
    Bin0,
}

use Col::*;

/// Every view and its columns.
static VIEWS: &[(&str, &[(&str, Col)])] = &[
    (
        "CHARACTER_SETS",
        &[
            ("CHARACTER_SET_NAME", Vc(64)),
            ("DEFAULT_COLLATE_NAME", Vc(64)),
            ("DESCRIPTION", Vc(2048)),
            ("MAXLEN", U32NotNull),
        ],
    ),
    (
        "CHECK_CONSTRAINTS",
        &[
            ("CONSTRAINT_CATALOG", Name),
            ("CONSTRAINT_SCHEMA", Name),
            ("CONSTRAINT_NAME", Name),
            ("CHECK_CLAUSE", LongTextNotNull),
        ],
    ),
    (
        "COLLATIONS",
        &[
            ("COLLATION_NAME", Vc(64)),
            ("CHARACTER_SET_NAME", Vc(64)),
            ("ID", U64NotNull),
            ("IS_DEFAULT", Vc(3)),
            ("IS_COMPILED", Vc(3)),
            ("SORTLEN", U32NotNull),
            ("PAD_ATTRIBUTE", Enum(&["PAD SPACE", "NO PAD"])),
        ],
    ),
    (
        "COLLATION_CHARACTER_SET_APPLICABILITY",
        &[("COLLATION_NAME", Vc(64)), ("CHARACTER_SET_NAME", Vc(64))],
    ),
    (
        "COLUMNS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("COLUMN_NAME", NullVc(64)),
            ("ORDINAL_POSITION", U32NotNull),
            ("COLUMN_DEFAULT", Text),
            ("IS_NULLABLE", Vc(3)),
            ("DATA_TYPE", LongText),
            ("CHARACTER_MAXIMUM_LENGTH", I64),
            ("CHARACTER_OCTET_LENGTH", I64),
            ("NUMERIC_PRECISION", U64),
            ("NUMERIC_SCALE", U64),
            ("DATETIME_PRECISION", U32),
            ("CHARACTER_SET_NAME", NullVc(64)),
            ("COLLATION_NAME", NullVc(64)),
            ("COLUMN_TYPE", MediumTextNotNull),
            ("COLUMN_KEY", Enum(&["", "PRI", "UNI", "MUL"])),
            ("EXTRA", NullVc(256)),
            ("PRIVILEGES", NullVc(154)),
            ("COLUMN_COMMENT", TextNotNull),
            ("GENERATION_EXPRESSION", LongTextNotNull),
            ("SRS_ID", U32),
        ],
    ),
    (
        "ENGINES",
        &[
            ("ENGINE", Vc(64)),
            ("SUPPORT", Vc(8)),
            ("COMMENT", Vc(80)),
            ("TRANSACTIONS", NullVc(3)),
            ("XA", NullVc(3)),
            ("SAVEPOINTS", NullVc(3)),
        ],
    ),
    (
        "EVENTS",
        &[
            ("EVENT_CATALOG", Name),
            ("EVENT_SCHEMA", Name),
            ("EVENT_NAME", Name),
            ("DEFINER", Vc(288)),
            ("TIME_ZONE", Vc(64)),
            ("EVENT_BODY", Vc(3)),
            ("EVENT_DEFINITION", LongTextNotNull),
            ("EVENT_TYPE", Vc(9)),
            ("EXECUTE_AT", Dt),
            ("INTERVAL_VALUE", NullVc(256)),
            ("INTERVAL_FIELD", NullVc(18)),
            ("SQL_MODE", Vc(520)),
            ("STARTS", Dt),
            ("ENDS", Dt),
            ("STATUS", Vc(18)),
            ("ON_COMPLETION", Vc(12)),
            ("CREATED", TsNotNull),
            ("LAST_ALTERED", TsNotNull),
            ("LAST_EXECUTED", Dt),
            ("EVENT_COMMENT", Vc(2048)),
            ("ORIGINATOR", U32NotNull),
            ("CHARACTER_SET_CLIENT", Vc(64)),
            ("COLLATION_CONNECTION", Vc(64)),
            ("DATABASE_COLLATION", Vc(64)),
        ],
    ),
    (
        "FILES",
        &[
            ("FILE_ID", I64),
            ("FILE_NAME", Text),
            ("FILE_TYPE", NullVc(256)),
            ("TABLESPACE_NAME", Vc(268)),
            ("TABLE_CATALOG", Bin0),
            ("TABLE_SCHEMA", Bin0),
            ("TABLE_NAME", Bin0),
            ("LOGFILE_GROUP_NAME", NullVc(256)),
            ("LOGFILE_GROUP_NUMBER", I64),
            ("ENGINE", Vc(64)),
            ("FULLTEXT_KEYS", Bin0),
            ("DELETED_ROWS", Bin0),
            ("UPDATE_COUNT", Bin0),
            ("FREE_EXTENTS", I64),
            ("TOTAL_EXTENTS", I64),
            ("EXTENT_SIZE", I64),
            ("INITIAL_SIZE", I64),
            ("MAXIMUM_SIZE", I64),
            ("AUTOEXTEND_SIZE", I64),
            ("CREATION_TIME", Bin0),
            ("LAST_UPDATE_TIME", Bin0),
            ("LAST_ACCESS_TIME", Bin0),
            ("RECOVER_TIME", Bin0),
            ("TRANSACTION_COUNTER", Bin0),
            ("VERSION", I64),
            ("ROW_FORMAT", NullVc(256)),
            ("TABLE_ROWS", Bin0),
            ("AVG_ROW_LENGTH", Bin0),
            ("DATA_LENGTH", Bin0),
            ("MAX_DATA_LENGTH", Bin0),
            ("INDEX_LENGTH", Bin0),
            ("DATA_FREE", I64),
            ("CREATE_TIME", Bin0),
            ("UPDATE_TIME", Bin0),
            ("CHECK_TIME", Bin0),
            ("CHECKSUM", Bin0),
            ("STATUS", NullVc(256)),
            ("EXTRA", NullVc(256)),
        ],
    ),
    (
        "KEY_COLUMN_USAGE",
        &[
            ("CONSTRAINT_CATALOG", Name),
            ("CONSTRAINT_SCHEMA", Name),
            ("CONSTRAINT_NAME", NullName),
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("COLUMN_NAME", NullVc(64)),
            ("ORDINAL_POSITION", U32NotNull),
            ("POSITION_IN_UNIQUE_CONSTRAINT", U32),
            ("REFERENCED_TABLE_SCHEMA", NullName),
            ("REFERENCED_TABLE_NAME", NullName),
            ("REFERENCED_COLUMN_NAME", NullVc(64)),
        ],
    ),
    (
        "PARTITIONS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("PARTITION_NAME", NullName),
            ("SUBPARTITION_NAME", NullName),
            ("PARTITION_ORDINAL_POSITION", U32),
            ("SUBPARTITION_ORDINAL_POSITION", U32),
            ("PARTITION_METHOD", NullVc(13)),
            ("SUBPARTITION_METHOD", NullVc(13)),
            ("PARTITION_EXPRESSION", NullVc(2048)),
            ("SUBPARTITION_EXPRESSION", NullVc(2048)),
            ("PARTITION_DESCRIPTION", Text),
            ("TABLE_ROWS", U64),
            ("AVG_ROW_LENGTH", U64),
            ("DATA_LENGTH", U64),
            ("MAX_DATA_LENGTH", U64),
            ("INDEX_LENGTH", U64),
            ("DATA_FREE", U64),
            ("CREATE_TIME", TsNotNull),
            ("UPDATE_TIME", Dt),
            ("CHECK_TIME", Dt),
            ("CHECKSUM", I64),
            ("PARTITION_COMMENT", TextNotNull),
            ("NODEGROUP", NullVc(256)),
            ("TABLESPACE_NAME", NullVc(268)),
        ],
    ),
    (
        "PROCESSLIST",
        &[
            ("ID", U64NotNull),
            ("USER", Vc(32)),
            ("HOST", Vc(261)),
            ("DB", NullVc(64)),
            ("COMMAND", Vc(16)),
            ("TIME", I32NotNull),
            ("STATE", NullVc(64)),
            ("INFO", LongText),
        ],
    ),
    (
        "REFERENTIAL_CONSTRAINTS",
        &[
            ("CONSTRAINT_CATALOG", Name),
            ("CONSTRAINT_SCHEMA", Name),
            ("CONSTRAINT_NAME", NullName),
            ("UNIQUE_CONSTRAINT_CATALOG", Name),
            ("UNIQUE_CONSTRAINT_SCHEMA", Name),
            ("UNIQUE_CONSTRAINT_NAME", NullName),
            ("MATCH_OPTION", Enum(&["NONE", "PARTIAL", "FULL"])),
            (
                "UPDATE_RULE",
                Enum(&[
                    "NO ACTION",
                    "RESTRICT",
                    "CASCADE",
                    "SET NULL",
                    "SET DEFAULT",
                ]),
            ),
            (
                "DELETE_RULE",
                Enum(&[
                    "NO ACTION",
                    "RESTRICT",
                    "CASCADE",
                    "SET NULL",
                    "SET DEFAULT",
                ]),
            ),
            ("TABLE_NAME", Name),
            ("REFERENCED_TABLE_NAME", Name),
        ],
    ),
    (
        "ROUTINES",
        &[
            ("SPECIFIC_NAME", Name),
            ("ROUTINE_CATALOG", Name),
            ("ROUTINE_SCHEMA", Name),
            ("ROUTINE_NAME", Name),
            ("ROUTINE_TYPE", Enum(&["FUNCTION", "PROCEDURE"])),
            ("DATA_TYPE", LongText),
            ("CHARACTER_MAXIMUM_LENGTH", I64),
            ("CHARACTER_OCTET_LENGTH", I64),
            ("NUMERIC_PRECISION", U32),
            ("NUMERIC_SCALE", U32),
            ("DATETIME_PRECISION", U32),
            ("CHARACTER_SET_NAME", NullVc(64)),
            ("COLLATION_NAME", NullVc(64)),
            ("DTD_IDENTIFIER", LongText),
            ("ROUTINE_BODY", Vc(8)),
            ("ROUTINE_DEFINITION", LongText),
            ("EXTERNAL_NAME", NullVc(64)),
            ("EXTERNAL_LANGUAGE", Vc(64)),
            ("PARAMETER_STYLE", Vc(3)),
            ("IS_DETERMINISTIC", Vc(3)),
            ("SQL_DATA_ACCESS", Vc(17)),
            ("SQL_PATH", NullVc(64)),
            ("SECURITY_TYPE", Vc(7)),
            ("CREATED", TsNotNull),
            ("LAST_ALTERED", TsNotNull),
            ("SQL_MODE", Vc(520)),
            ("ROUTINE_COMMENT", TextNotNull),
            ("DEFINER", Vc(288)),
            ("CHARACTER_SET_CLIENT", Vc(64)),
            ("COLLATION_CONNECTION", Vc(64)),
            ("DATABASE_COLLATION", Vc(64)),
        ],
    ),
    (
        "SCHEMATA",
        &[
            ("CATALOG_NAME", Name),
            ("SCHEMA_NAME", Name),
            ("DEFAULT_CHARACTER_SET_NAME", Vc(64)),
            ("DEFAULT_COLLATION_NAME", Vc(64)),
            ("SQL_PATH", Bin0),
            ("DEFAULT_ENCRYPTION", Enum(&["NO", "YES"])),
        ],
    ),
    (
        "STATISTICS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("NON_UNIQUE", I32NotNull),
            ("INDEX_SCHEMA", Name),
            ("INDEX_NAME", NullName),
            ("SEQ_IN_INDEX", U32NotNull),
            ("COLUMN_NAME", NullVc(64)),
            ("COLLATION", NullVc(1)),
            ("CARDINALITY", I64),
            ("SUB_PART", I64),
            ("PACKED", Bin0),
            ("NULLABLE", Vc(3)),
            ("INDEX_TYPE", Vc(11)),
            ("COMMENT", Vc(8)),
            ("INDEX_COMMENT", Vc(2048)),
            ("IS_VISIBLE", Vc(3)),
            ("EXPRESSION", LongText),
        ],
    ),
    (
        "TABLES",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("TABLE_TYPE", Enum(&["BASE TABLE", "VIEW", "SYSTEM VIEW"])),
            ("ENGINE", NullVc(64)),
            ("VERSION", I32),
            (
                "ROW_FORMAT",
                NullEnum(&[
                    "Fixed",
                    "Dynamic",
                    "Compressed",
                    "Redundant",
                    "Compact",
                    "Paged",
                ]),
            ),
            ("TABLE_ROWS", U64),
            ("AVG_ROW_LENGTH", U64),
            ("DATA_LENGTH", U64),
            ("MAX_DATA_LENGTH", U64),
            ("INDEX_LENGTH", U64),
            ("DATA_FREE", U64),
            ("AUTO_INCREMENT", U64),
            ("CREATE_TIME", TsNotNull),
            ("UPDATE_TIME", Dt),
            ("CHECK_TIME", Dt),
            ("TABLE_COLLATION", NullVc(64)),
            ("CHECKSUM", I64),
            ("CREATE_OPTIONS", NullVc(256)),
            ("TABLE_COMMENT", Text),
        ],
    ),
    (
        "TABLE_CONSTRAINTS",
        &[
            ("CONSTRAINT_CATALOG", Name),
            ("CONSTRAINT_SCHEMA", Name),
            ("CONSTRAINT_NAME", NullName),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("CONSTRAINT_TYPE", Vc(11)),
            ("ENFORCED", Vc(3)),
        ],
    ),
    (
        "TRIGGERS",
        &[
            ("TRIGGER_CATALOG", Name),
            ("TRIGGER_SCHEMA", Name),
            ("TRIGGER_NAME", Name),
            ("EVENT_MANIPULATION", Enum(&["INSERT", "UPDATE", "DELETE"])),
            ("EVENT_OBJECT_CATALOG", Name),
            ("EVENT_OBJECT_SCHEMA", Name),
            ("EVENT_OBJECT_TABLE", Name),
            ("ACTION_ORDER", U32NotNull),
            ("ACTION_CONDITION", Bin0),
            ("ACTION_STATEMENT", LongTextNotNull),
            ("ACTION_ORIENTATION", Vc(3)),
            ("ACTION_TIMING", Enum(&["BEFORE", "AFTER"])),
            ("ACTION_REFERENCE_OLD_TABLE", Bin0),
            ("ACTION_REFERENCE_NEW_TABLE", Bin0),
            ("ACTION_REFERENCE_OLD_ROW", Vc(3)),
            ("ACTION_REFERENCE_NEW_ROW", Vc(3)),
            ("CREATED", TsNotNull),
            ("SQL_MODE", Vc(520)),
            ("DEFINER", Vc(288)),
            ("CHARACTER_SET_CLIENT", Vc(64)),
            ("COLLATION_CONNECTION", Vc(64)),
            ("DATABASE_COLLATION", Vc(64)),
        ],
    ),
    (
        "VIEWS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("VIEW_DEFINITION", LongText),
            ("CHECK_OPTION", Enum(&["NONE", "LOCAL", "CASCADED"])),
            ("IS_UPDATABLE", Enum(&["NO", "YES"])),
            ("DEFINER", NullVc(288)),
            ("SECURITY_TYPE", NullVc(7)),
            ("CHARACTER_SET_CLIENT", Vc(64)),
            ("COLLATION_CONNECTION", Vc(64)),
        ],
    ),
];

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

/// The views, built from [`VIEWS`] once.
pub(super) fn tables() -> &'static [InfoTable] {
    static TABLES: OnceLock<Vec<InfoTable>> = OnceLock::new();
    TABLES.get_or_init(|| {
        VIEWS
            .iter()
            .map(|&(name, columns)| InfoTable {
                name,
                columns: columns
                    .iter()
                    .map(|&(column, col)| (column, column_type(name, column, col)))
                    .collect(),
            })
            .collect()
    })
}

/// The type of `view`.`column` written as `col`; the names MySQL 8.0 compares and sorts
/// case-insensitively get `utf8mb3_tolower_ci`.
fn column_type(view: &str, column: &str, col: Col) -> SqlType {
    let ty = sql_type(col);
    if TOLOWER_NAMES.contains(&(view, column)) {
        ty.with_collation(charset::UTF8MB3_TOLOWER_CI)
    } else {
        ty
    }
}

/// The SQL type a data-table entry stands for.
fn sql_type(col: Col) -> SqlType {
    match col {
        Name => name(),
        NullName => nname(),
        Vc(n) => vc(n),
        NullVc(n) => nvc(n),
        Text => text(),
        TextNotNull => text().not_null(),
        MediumTextNotNull => SqlType::new(TypeKind::Text {
            max_bytes: 16_777_215,
        })
        .with_collation(charset::UTF8MB3_GENERAL_CI)
        .not_null(),
        LongText => longtext(),
        LongTextNotNull => longtext().not_null(),
        U64 => u64t(),
        U64NotNull => u64t().not_null(),
        I64 => i64t(),
        U32 => u32t(),
        U32NotNull => u32t().not_null(),
        I32 => i32t(),
        I32NotNull => i32t().not_null(),
        TsNotNull => ts().not_null(),
        Dt => dt(),
        Enum(members) => en(members),
        NullEnum(members) => {
            let mut t = en(members);
            t.nullable = true;
            t
        }
        Bin0 => bin0(),
    }
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

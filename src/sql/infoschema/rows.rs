//! The rows of each information_schema view: one function per view, filled from the catalog,
//! the server's facts and the equalities a query's WHERE pushes down.

use std::collections::HashMap;
use std::sync::Arc;

use tibinlog_protocol::value::Value;

use super::super::catalog::{
    CatalogSnapshot, PartitionMeta, TableEstimate, TableKind, TableMeta, TableStats,
};
use super::super::charset::{CHARSETS, COLLATIONS};
use super::super::types::TypeKind;
use super::defs::{tables, InfoTable, INFORMATION_SCHEMA};

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
    /// The value the WHERE fixes for `col`, if any.
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

/// One row of a view.
type Row = Vec<Value>;

/// The rows of a view.
pub fn rows(
    def: &InfoTable,
    catalog: &CatalogSnapshot,
    facts: &ServerFacts,
    push: &Pushdown,
    stats: Option<&dyn TableStats>,
) -> Vec<Row> {
    let en = Enums(def);
    match def.name {
        "CHARACTER_SETS" => character_sets(),
        "COLLATIONS" => collations(&en),
        "COLLATION_CHARACTER_SET_APPLICABILITY" => applicability(),
        "ENGINES" => engines(),
        "SCHEMATA" => schemata(catalog, push, &en),
        "TABLES" => {
            let mut out = own_tables(push, &en);
            out.extend(catalog_tables(catalog, push, stats, &en));
            out
        }
        "COLUMNS" => columns(catalog, push, &en),
        "STATISTICS" => statistics(catalog, push),
        "KEY_COLUMN_USAGE" => key_column_usage(catalog, push),
        "TABLE_CONSTRAINTS" => table_constraints(catalog, push),
        "REFERENTIAL_CONSTRAINTS" => referential_constraints(catalog, push, &en),
        "CHECK_CONSTRAINTS" => check_constraints(catalog, push),
        "PARTITIONS" => partitions(catalog, push, stats),
        "VIEWS" => views(catalog, push, &en),
        "PROCESSLIST" => processlist(facts),
        _ => Vec::new(),
    }
}

/// The enum columns of a view: a member's value by the column's name.
struct Enums<'a>(&'a InfoTable);

impl Enums<'_> {
    /// The value of member `x` of the view's enum column `col` (0, the empty member, when
    /// `x` is not one).
    fn value(&self, col: &str, x: &str) -> Value {
        let members: Vec<String> = self
            .0
            .columns
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
            .unwrap_or_default();
        let refs: Vec<&str> = members.iter().map(String::as_str).collect();
        e(&refs, x)
    }
}

/// A string cell.
fn s(x: &str) -> Value {
    Value::Bytes(x.as_bytes().to_vec())
}

/// A string cell, NULL for `None`.
fn opt_s(x: Option<&str>) -> Value {
    x.map_or(Value::Null, s)
}

/// An unsigned integer cell.
fn u(x: u64) -> Value {
    Value::UInt(x)
}

/// A signed integer cell.
fn i(x: i64) -> Value {
    Value::Int(x)
}

/// The enum cell of `x` among `members` (0, the empty member, when it is not one).
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
) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
    catalog
        .tables
        .iter()
        .filter(move |t| push.admits("TABLE_SCHEMA", &t.db) && push.admits("TABLE_NAME", &t.name))
}

/// The catalog's tables whose constraint schema a push-down admits.
fn constraint_tables<'a>(
    catalog: &'a CatalogSnapshot,
    push: &'a Pushdown,
) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
    catalog
        .tables
        .iter()
        .filter(move |t| push.admits("CONSTRAINT_SCHEMA", &t.db))
}

/// `CHARACTER_SETS`: every character set the server knows.
fn character_sets() -> Vec<Row> {
    CHARSETS
        .iter()
        .map(|c| {
            vec![
                s(c.name),
                s(c.default_collation),
                s(c.description),
                u(u64::from(c.maxlen)),
            ]
        })
        .collect()
}

/// `COLLATIONS`: every collation the server knows.
fn collations(en: &Enums<'_>) -> Vec<Row> {
    COLLATIONS
        .iter()
        .map(|c| {
            vec![
                s(c.name),
                s(c.charset),
                u(u64::from(c.id)),
                s(if c.is_default { "Yes" } else { "" }),
                s("Yes"),
                u(u64::from(c.sortlen)),
                en.value(
                    "PAD_ATTRIBUTE",
                    if c.pad_space { "PAD SPACE" } else { "NO PAD" },
                ),
            ]
        })
        .collect()
}

/// `COLLATION_CHARACTER_SET_APPLICABILITY`: each collation and its character set.
fn applicability() -> Vec<Row> {
    COLLATIONS
        .iter()
        .map(|c| vec![s(c.name), s(c.charset)])
        .collect()
}

/// `ENGINES`: InnoDB, the engine every TiDB table shows.
fn engines() -> Vec<Row> {
    vec![vec![
        s("InnoDB"),
        s("DEFAULT"),
        s("Supports transactions, row-level locking, and foreign keys"),
        s("YES"),
        s("YES"),
        s("YES"),
    ]]
}

/// `SCHEMATA`: information_schema and the catalog's databases.
fn schemata(catalog: &CatalogSnapshot, push: &Pushdown, en: &Enums<'_>) -> Vec<Row> {
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
    dbs.into_iter()
        .filter(|(n, _, _)| push.admits("SCHEMA_NAME", n))
        .map(|(n, cs, coll)| {
            vec![
                s("def"),
                s(&n),
                s(&cs),
                s(&coll),
                Value::Null,
                en.value("DEFAULT_ENCRYPTION", "NO"),
            ]
        })
        .collect()
}

/// `TABLES`, the rows of information_schema's own views (system views).
fn own_tables(push: &Pushdown, en: &Enums<'_>) -> Vec<Row> {
    if !push.admits("TABLE_SCHEMA", INFORMATION_SCHEMA) {
        return Vec::new();
    }
    tables()
        .iter()
        .filter(|t| push.admits("TABLE_NAME", t.name))
        .map(|t| {
            vec![
                s("def"),
                s(INFORMATION_SCHEMA),
                s(t.name),
                en.value("TABLE_TYPE", "SYSTEM VIEW"),
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
            ]
        })
        .collect()
}

/// `TABLES`, the rows of the catalog's tables and views (sizes from the estimates).
fn catalog_tables(
    catalog: &CatalogSnapshot,
    push: &Pushdown,
    stats: Option<&dyn TableStats>,
    en: &Enums<'_>,
) -> Vec<Row> {
    let est = estimates_of(stats, tables_in(catalog, push));
    tables_in(catalog, push)
        .map(|t| {
            let view = t.is_view();
            let e = table_estimate(t, &est);
            vec![
                s("def"),
                s(&t.db),
                s(&t.name),
                en.value("TABLE_TYPE", if view { "VIEW" } else { "BASE TABLE" }),
                if view { Value::Null } else { s("InnoDB") },
                if view { Value::Null } else { i(10) },
                if view {
                    Value::Null
                } else {
                    en.value("ROW_FORMAT", "Dynamic")
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
            ]
        })
        .collect()
}

/// `COLUMNS`: every column of the admitted tables (and the one a WHERE names, in any case).
fn columns(catalog: &CatalogSnapshot, push: &Pushdown, en: &Enums<'_>) -> Vec<Row> {
    let mut out = Vec::new();
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
                en.value("COLUMN_KEY", &c.key),
                s(&c.extra),
                s("select"),
                s(&c.comment),
                s(generated.map_or("", |g| g.0.as_str())),
                Value::Null,
            ]);
        }
    }
    out
}

/// `STATISTICS`: one row per key part of every index of the admitted tables.
fn statistics(catalog: &CatalogSnapshot, push: &Pushdown) -> Vec<Row> {
    let mut out = Vec::new();
    for t in tables_in(catalog, push) {
        for ix in &t.indexes {
            for (seq, (col, sub)) in ix.columns.iter().enumerate() {
                // A key part that is an expression has no column (MySQL 8.0 shows
                // NULL and the expression; its value may be NULL).
                let expr = ix.expressions.get(seq).cloned().flatten();
                let nullable = expr.is_some() || t.column(col).is_some_and(|(_, c)| c.ty.nullable);
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
    out
}

/// `KEY_COLUMN_USAGE`: the columns of unique keys and foreign keys of the admitted tables.
fn key_column_usage(catalog: &CatalogSnapshot, push: &Pushdown) -> Vec<Row> {
    let mut out = Vec::new();
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
    out
}

/// `TABLE_CONSTRAINTS`: unique keys, foreign keys and checks of the admitted tables.
fn table_constraints(catalog: &CatalogSnapshot, push: &Pushdown) -> Vec<Row> {
    let mut out = Vec::new();
    for t in tables_in(catalog, push) {
        let row = |name: &str, kind: &str, enforced: &str| {
            vec![
                s("def"),
                s(&t.db),
                s(name),
                s(&t.db),
                s(&t.name),
                s(kind),
                s(enforced),
            ]
        };
        for ix in t.indexes.iter().filter(|ix| ix.unique) {
            let kind = if ix.primary { "PRIMARY KEY" } else { "UNIQUE" };
            out.push(row(&ix.name, kind, "YES"));
        }
        for fk in &t.foreign_keys {
            out.push(row(&fk.name, "FOREIGN KEY", "YES"));
        }
        for ck in &t.checks {
            out.push(row(
                &ck.name,
                "CHECK",
                if ck.enforced { "YES" } else { "NO" },
            ));
        }
    }
    out
}

/// `REFERENTIAL_CONSTRAINTS`: the foreign keys of the admitted constraint schemas.
fn referential_constraints(catalog: &CatalogSnapshot, push: &Pushdown, en: &Enums<'_>) -> Vec<Row> {
    let mut out = Vec::new();
    for t in constraint_tables(catalog, push) {
        for fk in &t.foreign_keys {
            out.push(vec![
                s("def"),
                s(&t.db),
                s(&fk.name),
                s("def"),
                s(&fk.ref_db),
                s("PRIMARY"),
                en.value("MATCH_OPTION", "NONE"),
                en.value("UPDATE_RULE", &fk.on_update),
                en.value("DELETE_RULE", &fk.on_delete),
                s(&t.name),
                s(&fk.ref_table),
            ]);
        }
    }
    out
}

/// `CHECK_CONSTRAINTS`: the checks of the admitted constraint schemas.
fn check_constraints(catalog: &CatalogSnapshot, push: &Pushdown) -> Vec<Row> {
    let mut out = Vec::new();
    for t in constraint_tables(catalog, push) {
        for ck in &t.checks {
            out.push(vec![s("def"), s(&t.db), s(&ck.name), s(&ck.clause)]);
        }
    }
    out
}

/// `PARTITIONS`: one row per partition, or one for an unpartitioned table or view.
fn partitions(
    catalog: &CatalogSnapshot,
    push: &Pushdown,
    stats: Option<&dyn TableStats>,
) -> Vec<Row> {
    let mut out = Vec::new();
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
    out
}

/// `VIEWS`: the catalog's views among the admitted tables.
fn views(catalog: &CatalogSnapshot, push: &Pushdown, en: &Enums<'_>) -> Vec<Row> {
    let mut out = Vec::new();
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
                en.value("CHECK_OPTION", check_option),
                en.value("IS_UPDATABLE", if *updatable { "YES" } else { "NO" }),
                s(definer),
                s(security),
                s(&t.charset),
                s(&t.collation),
            ]);
        }
    }
    out
}

/// `PROCESSLIST`: the server's sessions.
fn processlist(facts: &ServerFacts) -> Vec<Row> {
    facts
        .processlist
        .iter()
        .map(|p| {
            vec![
                u(p.id),
                s(&p.user),
                s(&p.host),
                opt_s(p.db.as_deref()),
                s(&p.command),
                Value::Int(p.time),
                s(&p.state),
                opt_s(p.info.as_deref()),
            ]
        })
        .collect()
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
    tables: impl Iterator<Item = &'a Arc<TableMeta>>,
) -> HashMap<i64, TableEstimate> {
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
fn table_estimate(t: &TableMeta, est: &HashMap<i64, TableEstimate>) -> TableEstimate {
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

/// The `PARTITIONS` row of partition `p` of `t` (its position and meta), or of the whole
/// table when `p` is `None`.
fn partition_row(t: &TableMeta, p: Option<(usize, &PartitionMeta)>, e: TableEstimate) -> Row {
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

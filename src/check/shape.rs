//! Which tables a check compares and how: the tables and columns of both sides as their
//! `information_schema` describes them at the aligned position, the columns they share (in the
//! source's order) and the key that orders and splits the rows. Tables or columns present on
//! one side only are differences of shape, reported as such rather than as rows.

use std::collections::{BTreeMap, BTreeSet};

use mysql_async::prelude::Queryable as _;

use super::sql::{Column, LiteralKind, TableShape};
use super::CheckError;

/// Databases never checked.
pub const SYSTEM_DATABASES: [&str; 4] =
    ["mysql", "information_schema", "performance_schema", "sys"];

/// One column as `information_schema.COLUMNS` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    pub name: String,
    pub data_type: String,
    pub column_type: String,
    pub extra: String,
    pub collation: Option<String>,
    pub nullable: bool,
}

/// A unique index: its name and columns (`None` for a prefix or an expression part).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqueIndex {
    pub name: String,
    pub columns: Vec<Option<String>>,
}

/// The base tables of one side: columns in order and unique indexes, by (db, table).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub tables: BTreeMap<(String, String), Vec<ColumnInfo>>,
    pub unique: BTreeMap<(String, String), Vec<UniqueIndex>>,
}

/// Which tables to check.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub databases: Vec<String>,
    pub tables: Vec<(String, String)>,
}

impl Filter {
    fn wants(&self, db: &str, t: &str) -> bool {
        if !self.tables.is_empty() {
            return self.tables.iter().any(|(d, n)| d == db && n == t);
        }
        if !self.databases.is_empty() {
            return self.databases.iter().any(|d| d == db);
        }
        !SYSTEM_DATABASES.contains(&db.to_ascii_lowercase().as_str())
    }
}

/// A table to check: its shape when both sides have it, and what differs in shape.
#[derive(Debug, Clone)]
pub struct TablePlan {
    pub db: String,
    pub table: String,
    pub shape: Option<TableShape>,
    pub notes: Vec<String>,
    /// Only the source has the table: `shape` is the source's, for a repair that creates the
    /// table and writes its rows.
    pub absent_on_target: bool,
}

/// The key of a table: the primary key, else the first unique index over NOT NULL whole
/// columns; indexes into `cols`.
fn key_of(cols: &[ColumnInfo], unique: &[UniqueIndex]) -> Vec<usize> {
    let usable = |ix: &UniqueIndex| -> Option<Vec<usize>> {
        ix.columns
            .iter()
            .map(|c| {
                let c = c.as_deref()?;
                let i = cols.iter().position(|x| x.name.eq_ignore_ascii_case(c))?;
                (!cols[i].nullable).then_some(i)
            })
            .collect()
    };
    let primary = unique.iter().find(|ix| ix.name == "PRIMARY");
    primary
        .into_iter()
        .chain(unique.iter().filter(|ix| ix.name != "PRIMARY"))
        .find_map(usable)
        .unwrap_or_default()
}

fn column(info: &ColumnInfo) -> Column {
    let extra = info.extra.to_ascii_uppercase();
    Column {
        name: info.name.clone(),
        column_type: info.column_type.clone(),
        kind: LiteralKind::of(&info.data_type),
        generated: extra.contains("GENERATED") || extra.contains("PERSISTENT"),
        collation: info.collation.clone(),
    }
}

/// The tables to check and their shapes (see the module's header). `tables` named by the
/// filter that neither side has are reported as missing on both.
pub fn plan(source: &Catalog, target: &Catalog, filter: &Filter) -> Vec<TablePlan> {
    let mut names: BTreeSet<(String, String)> = source
        .tables
        .keys()
        .filter(|(d, t)| filter.wants(d, t))
        .cloned()
        .collect();
    let source_dbs: BTreeSet<&String> = names.iter().map(|(d, _)| d).collect();
    // Target tables the source lacks, in the databases being checked.
    let extra: Vec<(String, String)> = target
        .tables
        .keys()
        .filter(|(d, t)| {
            filter.wants(d, t)
                && (!filter.tables.is_empty()
                    || !filter.databases.is_empty()
                    || source_dbs.contains(d))
        })
        .cloned()
        .collect();
    names.extend(extra);
    names.extend(filter.tables.iter().cloned());
    names
        .into_iter()
        .map(|(db, table)| {
            let key = (db.clone(), table.clone());
            let (src, tgt) = (source.tables.get(&key), target.tables.get(&key));
            let mut notes = Vec::new();
            let shape = match (src, tgt) {
                (Some(s), Some(t)) => Some(shared(&db, &table, s, t, source, &mut notes)),
                (Some(s), None) => {
                    notes.push("table missing on the target".into());
                    Some(shared(&db, &table, s, s, source, &mut Vec::new()))
                }
                (None, Some(_)) => {
                    notes.push("table missing on the source (only on the target)".into());
                    None
                }
                (None, None) => {
                    notes.push("table on neither side".into());
                    None
                }
            };
            TablePlan {
                absent_on_target: src.is_some() && tgt.is_none(),
                db,
                table,
                shape,
                notes,
            }
        })
        .collect()
}

fn shared(
    db: &str,
    table: &str,
    src: &[ColumnInfo],
    tgt: &[ColumnInfo],
    source: &Catalog,
    notes: &mut Vec<String>,
) -> TableShape {
    let on =
        |cols: &[ColumnInfo], name: &str| cols.iter().any(|c| c.name.eq_ignore_ascii_case(name));
    let common: Vec<ColumnInfo> = src.iter().filter(|c| on(tgt, &c.name)).cloned().collect();
    for c in src.iter().filter(|c| !on(tgt, &c.name)) {
        notes.push(format!("column `{}` missing on the target", c.name));
    }
    for c in tgt.iter().filter(|c| !on(src, &c.name)) {
        notes.push(format!("column `{}` only on the target", c.name));
    }
    let unique = source
        .unique
        .get(&(db.to_owned(), table.to_owned()))
        .map(Vec::as_slice)
        .unwrap_or_default();
    TableShape {
        db: db.to_owned(),
        table: table.to_owned(),
        key: key_of(&common, unique),
        columns: common.iter().map(column).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a side's catalog.

fn quoted_list(items: &BTreeSet<String>) -> String {
    items
        .iter()
        .map(|d| super::sql::text_literal(d))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The catalog of one side, for the databases `filter` can want (`side` names it in errors).
pub async fn read_catalog(
    conn: &mut mysql_async::Conn,
    filter: &Filter,
    side: &'static str,
) -> Result<Catalog, CheckError> {
    let err = |sql: &str, e: mysql_async::Error| {
        if side == "source" {
            CheckError::source(sql, e)
        } else {
            CheckError::target(sql, e)
        }
    };
    let dbs_sql = "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA";
    let dbs: Vec<String> = conn.query(dbs_sql).await.map_err(|e| err(dbs_sql, e))?;
    let dbs: BTreeSet<String> = dbs
        .into_iter()
        .filter(|d| {
            if !filter.tables.is_empty() {
                filter.tables.iter().any(|(x, _)| x == d)
            } else if !filter.databases.is_empty() {
                filter.databases.contains(d)
            } else {
                !SYSTEM_DATABASES.contains(&d.to_ascii_lowercase().as_str())
            }
        })
        .collect();
    let mut catalog = Catalog::default();
    if dbs.is_empty() {
        return Ok(catalog);
    }
    let list = quoted_list(&dbs);
    let sql = format!(
        "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.EXTRA, \
         c.COLLATION_NAME, c.IS_NULLABLE FROM information_schema.COLUMNS c JOIN \
         information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = \
         c.TABLE_NAME WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_SCHEMA IN ({list}) ORDER BY \
         c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION"
    );
    type ColRow = (
        String,
        String,
        String,
        String,
        String,
        String,
        Option<String>,
        String,
    );
    let rows: Vec<ColRow> = conn.query(&sql).await.map_err(|e| err(&sql, e))?;
    for (db, t, name, data_type, column_type, extra, collation, nullable) in rows {
        catalog.tables.entry((db, t)).or_default().push(ColumnInfo {
            name,
            data_type,
            column_type,
            extra,
            collation,
            nullable: nullable.eq_ignore_ascii_case("YES"),
        });
    }
    let sql = format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, COLUMN_NAME, SUB_PART FROM \
         information_schema.STATISTICS WHERE NON_UNIQUE = 0 AND TABLE_SCHEMA IN ({list}) ORDER BY \
         TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX"
    );
    type IxRow = (String, String, String, Option<String>, Option<u64>);
    let rows: Vec<IxRow> = conn.query(&sql).await.map_err(|e| err(&sql, e))?;
    for (db, t, index, column, sub_part) in rows {
        let list = catalog.unique.entry((db, t)).or_default();
        if list.last().is_none_or(|ix| ix.name != index) {
            list.push(UniqueIndex {
                name: index,
                columns: Vec::new(),
            });
        }
        let ix = list.last_mut().expect("pushed");
        ix.columns.push(column.filter(|_| sub_part.is_none()));
    }
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, nullable: bool) -> ColumnInfo {
        ColumnInfo {
            name: name.into(),
            data_type: "int".into(),
            column_type: "int".into(),
            extra: String::new(),
            collation: None,
            nullable,
        }
    }

    fn key(db: &str, t: &str) -> (String, String) {
        (db.into(), t.into())
    }

    #[test]
    fn keys_prefer_the_primary_then_a_unique_index_over_not_null_whole_columns() {
        let cols = vec![col("a", true), col("b", false), col("c", false)];
        let ix = |name: &str, cs: &[Option<&str>]| UniqueIndex {
            name: name.into(),
            columns: cs.iter().map(|c| c.map(str::to_owned)).collect(),
        };
        assert_eq!(
            key_of(
                &cols,
                &[
                    ix("u", &[Some("b")]),
                    ix("PRIMARY", &[Some("c"), Some("b")])
                ]
            ),
            vec![2, 1]
        );
        // A nullable column, a prefix part and a missing column make an index unusable.
        assert_eq!(
            key_of(
                &cols,
                &[
                    ix("u1", &[Some("a")]),
                    ix("u2", &[None]),
                    ix("u3", &[Some("zz")]),
                    ix("u4", &[Some("c")])
                ]
            ),
            vec![2]
        );
        assert_eq!(key_of(&cols, &[]), Vec::<usize>::new());
    }

    #[test]
    fn shape_differences_are_notes_and_shared_columns_are_compared() {
        let mut source = Catalog::default();
        let mut target = Catalog::default();
        source
            .tables
            .insert(key("d", "same"), vec![col("id", false), col("v", true)]);
        source.unique.insert(
            key("d", "same"),
            vec![UniqueIndex {
                name: "PRIMARY".into(),
                columns: vec![Some("id".into())],
            }],
        );
        target
            .tables
            .insert(key("d", "same"), vec![col("id", false), col("w", true)]);
        source
            .tables
            .insert(key("d", "gone"), vec![col("id", false)]);
        target
            .tables
            .insert(key("d", "new"), vec![col("id", false)]);
        target
            .tables
            .insert(key("other", "x"), vec![col("id", false)]);
        source
            .tables
            .insert(key("mysql", "user"), vec![col("id", false)]);
        let plans = plan(&source, &target, &Filter::default());
        let got: Vec<(String, Vec<String>, Option<usize>)> = plans
            .iter()
            .map(|p| {
                (
                    format!("{}.{}", p.db, p.table),
                    p.notes.clone(),
                    p.shape.as_ref().map(|s| s.columns.len()),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "d.gone".into(),
                    vec!["table missing on the target".into()],
                    Some(1)
                ),
                (
                    "d.new".into(),
                    vec!["table missing on the source (only on the target)".into()],
                    None
                ),
                (
                    "d.same".into(),
                    vec![
                        "column `v` missing on the target".into(),
                        "column `w` only on the target".into()
                    ],
                    Some(1)
                ),
            ]
        );
        assert_eq!(plans[2].shape.as_ref().expect("a shape").key, vec![0]);
        assert!(plans[0].absent_on_target && !plans[2].absent_on_target);
        let only = Filter {
            tables: vec![key("d", "same"), key("d", "nowhere")],
            ..Filter::default()
        };
        let names: Vec<String> = plan(&source, &target, &only)
            .iter()
            .map(|p| format!("{}.{}: {:?}", p.db, p.table, p.notes))
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[0].contains("neither"), "{names:?}");
    }
}

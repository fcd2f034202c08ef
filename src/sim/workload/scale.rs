//! The idle tables of `tibinlog sim --tables N`: many small tables whose regions a capture must
//! subscribe, initialize and keep resolving, with no row written to them.

use crate::sim::tidb::ddl::Ddl;
use crate::sim::tidb::types::{self as ty, ColumnDef, TableDef};
use crate::tidb::schema::mysql;

/// The database of the tables.
pub const DB: &str = "scale";
/// Tables per CREATE TABLES job.
pub const TABLES_PER_JOB: usize = 500;

/// The name of table `i` (from 1).
pub fn table_name(i: usize) -> String {
    format!("t{i:05}")
}

fn table(i: usize) -> TableDef {
    let mut id = ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false));
    id.nullable = false;
    TableDef {
        name: table_name(i),
        columns: vec![
            id,
            ColumnDef::new("n", ty::int(mysql::TYPE_LONG, false)),
            ColumnDef::new("s", ty::varchar(32)),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// The jobs that create `tables` tables: the database, then CREATE TABLES of
/// [`TABLES_PER_JOB`] tables each. Nothing when `tables` is 0.
pub fn ddls(tables: usize) -> Vec<Ddl> {
    if tables == 0 {
        return Vec::new();
    }
    let mut out = vec![Ddl::CreateDatabase { name: DB.into() }];
    let mut next = 1;
    while next <= tables {
        let last = (next + TABLES_PER_JOB - 1).min(tables);
        out.push(Ddl::CreateTables {
            db: DB.into(),
            tables: (next..=last).map(table).collect(),
        });
        next = last + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_cover_every_table_once() {
        assert!(ddls(0).is_empty());
        let jobs = ddls(1001);
        assert_eq!(jobs.len(), 1 + 3);
        let names: Vec<String> = jobs
            .iter()
            .filter_map(|d| match d {
                Ddl::CreateTables { tables, .. } => Some(tables.iter().map(|t| t.name.clone())),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(names.len(), 1001);
        assert_eq!(names[0], "t00001");
        assert_eq!(names[1000], "t01001");
    }
}

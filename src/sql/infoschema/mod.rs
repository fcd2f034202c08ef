//! `information_schema`: MySQL 8.0's views with their column names and types, filled from the
//! catalog of the position a session reads at. Views TiDB has nothing for (routines, triggers,
//! events, files) exist and are empty, as on a MySQL server without such objects.
//!
//! Schema and table names compare case-sensitively (`lower_case_table_names = 0`); column and
//! index names case-insensitively, as MySQL compares them.
//!
//! - `defs`: a data table of the views, their columns and types.
//! - `rows`: each view's rows, from the catalog, the server's facts and a WHERE's push-down.

mod defs;
mod rows;

pub use defs::{InfoTable, INFORMATION_SCHEMA};
pub use rows::{rows, ProcessInfo, Pushdown, ServerFacts};

use defs::tables;

/// True for `information_schema` (any case).
pub fn is_schema(db: &str) -> bool {
    db.eq_ignore_ascii_case(INFORMATION_SCHEMA)
}

/// The schema's canonical name.
pub fn schema_name(_db: &str) -> &'static str {
    INFORMATION_SCHEMA
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

#[cfg(test)]
mod tests {
    use super::super::catalog::{CatalogSnapshot, TableKind, TableMeta};
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

//! The part of `performance_schema` MySQL 8.0 answers `SHOW VARIABLES` and `SHOW STATUS` from:
//! `{global,session}_variables` and `{global,session}_status`, two columns each. Their rows are
//! the server's and the session's ([`Env::server_variables`]), read when a statement reads the
//! table; `SHOW [GLOBAL|SESSION] {VARIABLES|STATUS}` are queries over them (`show.rs`), so their
//! `LIKE` and `WHERE` are the engine's.
//!
//! [`Env::server_variables`]: super::expr::Env::server_variables

use std::sync::OnceLock;

use tibinlog_protocol::value::Value;

use super::charset::UTF8MB4_0900_AI_CI;
use super::infoschema::InfoTable;
use super::types::SqlType;

/// The schema's name, as MySQL spells it.
pub const PERFORMANCE_SCHEMA: &str = "performance_schema";

/// True for `performance_schema` (any case).
pub fn is_schema(db: &str) -> bool {
    db.eq_ignore_ascii_case(PERFORMANCE_SCHEMA)
}

/// Which name/value list a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarView {
    /// System variables.
    Variables { global: bool },
    /// Status variables.
    Status { global: bool },
}

/// The tables, with the list each holds.
const TABLES: [(&str, VarView); 4] = [
    ("global_variables", VarView::Variables { global: true }),
    ("session_variables", VarView::Variables { global: false }),
    ("global_status", VarView::Status { global: true }),
    ("session_status", VarView::Status { global: false }),
];

fn defs() -> &'static [InfoTable] {
    static DEFS: OnceLock<Vec<InfoTable>> = OnceLock::new();
    DEFS.get_or_init(|| {
        TABLES
            .iter()
            .map(|(name, _)| InfoTable {
                name,
                columns: vec![
                    (
                        "VARIABLE_NAME",
                        SqlType::varchar(64, UTF8MB4_0900_AI_CI).not_null(),
                    ),
                    ("VARIABLE_VALUE", SqlType::varchar(1024, UTF8MB4_0900_AI_CI)),
                ],
            })
            .collect()
    })
}

/// The table `name` (any case) and the list it holds.
pub fn table(name: &str) -> Option<(&'static InfoTable, VarView)> {
    let i = TABLES
        .iter()
        .position(|(n, _)| n.eq_ignore_ascii_case(name))?;
    Some((&defs()[i], TABLES[i].1))
}

/// Rows of a table from its name/value pairs, in name order (as MySQL lists them).
pub fn rows(mut pairs: Vec<(String, String)>) -> Vec<Vec<Value>> {
    pairs.sort_by_key(|(n, _)| n.to_ascii_lowercase());
    pairs
        .into_iter()
        .map(|(n, v)| vec![Value::Bytes(n.into_bytes()), Value::Bytes(v.into_bytes())])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_resolve_in_any_case() {
        let (def, view) = table("GLOBAL_Status").expect("global_status");
        assert_eq!(def.name, "global_status");
        assert_eq!(view, VarView::Status { global: true });
        assert_eq!(def.columns.len(), 2);
        assert!(table("threads").is_none());
        assert!(is_schema("Performance_Schema"));
    }

    #[test]
    fn rows_come_in_name_order_ignoring_case() {
        let r = rows(vec![
            ("b".into(), "2".into()),
            ("A".into(), "1".into()),
            ("c".into(), String::new()),
        ]);
        let names: Vec<&Value> = r.iter().map(|row| &row[0]).collect();
        assert_eq!(
            names,
            [
                &Value::Bytes(b"A".to_vec()),
                &Value::Bytes(b"b".to_vec()),
                &Value::Bytes(b"c".to_vec())
            ]
        );
    }
}

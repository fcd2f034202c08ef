//! A MariaDB replica's tables compared with the simulator's truth log: the [`Model`] replays
//! the log (rows and the DDL that moves them), [`assert_replica_equals_model`] reads every table
//! of the replica and compares value by value.

#![allow(dead_code)]

use std::collections::BTreeMap;

use mysql_async::prelude::*;
use serde_json::Value as Json;

use super::truth::{apply_effect, DdlReplay, RowEffect};

/// One row: column → MySQL text (`None` for NULL).
pub type RowText = BTreeMap<String, Option<String>>;
/// A table's rows keyed by their JSON text.
pub type TableRows = BTreeMap<String, RowText>;

/// Table contents after the truth log, by (database, table).
#[derive(Debug, Default)]
pub struct Model {
    pub tables: BTreeMap<(String, String), TableRows>,
    /// Partitioning and names as the DDL so far left them.
    pub ddl: DdlReplay,
}

/// The value of a `DEFAULT '…'` / `DEFAULT NULL` clause in a column definition.
fn default_of(column_sql: &str) -> Option<String> {
    let (_, rest) = column_sql.split_once(" DEFAULT ")?;
    let rest = rest.strip_prefix('\'')?;
    let mut out = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
                out.push('\'');
            } else {
                return Some(out);
            }
        } else {
            out.push(c);
        }
    }
    panic!("unterminated DEFAULT in {column_sql}")
}

/// "`db`.`t`" at the start of `s` → (db, t, rest).
fn table_name(s: &str) -> (String, String, &str) {
    let s = s.trim_start();
    let parts: Vec<&str> = s.splitn(3, '`').collect();
    let db = parts[1].to_owned();
    let rest = parts[2].strip_prefix(".`").expect("qualified table name");
    let (t, rest) = rest.split_once('`').expect("table name end");
    (db, t.to_owned(), rest)
}

fn row_key(r: &RowText) -> String {
    serde_json::to_string(r).expect("row json")
}

fn image(v: &Json) -> RowText {
    v.as_object()
        .expect("row image")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned)))
        .collect()
}

impl Model {
    pub fn apply(&mut self, txn: &Json) {
        if let Some(ddl) = txn["ddl"].as_str() {
            self.apply_ddl(ddl);
            return;
        }
        for r in txn["rows"].as_array().expect("rows") {
            let key = (
                r["db"].as_str().expect("db").to_owned(),
                r["table"].as_str().expect("table").to_owned(),
            );
            let rows = self
                .tables
                .get_mut(&key)
                .unwrap_or_else(|| panic!("rows of unknown table {key:?}"));
            if !r["before"].is_null() {
                let before = image(&r["before"]);
                assert!(
                    rows.remove(&row_key(&before)).is_some(),
                    "before image not in the model: {r}"
                );
            }
            if !r["after"].is_null() {
                let after = image(&r["after"]);
                rows.insert(row_key(&after), after);
            }
        }
    }

    fn apply_ddl(&mut self, ddl: &str) {
        if ddl.starts_with("CREATE DATABASE ") {
            return;
        }
        // Creation, truncation, renames, partition truncation and exchange: rows move or go
        // without row events.
        let effect = self.ddl.effect(ddl);
        if !matches!(effect, RowEffect::None) {
            if let RowEffect::Create(t) = &effect {
                self.tables.insert(t.clone(), BTreeMap::new());
            }
            apply_effect(&mut self.tables, &effect, |r: &RowText, c| {
                r.get(c).cloned().flatten()
            });
            return;
        }
        let rest = ddl
            .strip_prefix("ALTER TABLE ")
            .unwrap_or_else(|| panic!("DDL the model does not know: {ddl}"));
        let (db, t, action) = table_name(rest);
        let action = action.trim_start();
        let rows = self.tables.get_mut(&(db, t)).expect("table");
        let change = |rows: &mut TableRows, f: &dyn Fn(&mut RowText)| {
            let old = std::mem::take(rows);
            for (_, mut r) in old {
                f(&mut r);
                rows.insert(row_key(&r), r);
            }
        };
        if let Some(col) = action.strip_prefix("ADD COLUMN ") {
            // Rows written before the column existed read its default (TiDB's origin default).
            let name = col.split('`').nth(1).expect("column name").to_owned();
            let default = default_of(col);
            change(rows, &|r| {
                r.insert(name.clone(), default.clone());
            });
        } else if let Some(col) = action.strip_prefix("DROP COLUMN ") {
            let name = col.split('`').nth(1).expect("column name").to_owned();
            change(rows, &|r| {
                r.remove(&name);
            });
        } else if !(action.starts_with("MODIFY COLUMN ")
            || action.starts_with("ADD INDEX ")
            || action.starts_with("ADD UNIQUE INDEX "))
        {
            panic!("DDL the model does not know: {ddl}");
        }
    }
}

/// A value compared by what it means where its text can differ: FLOAT and DOUBLE by their
/// bits (MariaDB prints FLOAT with 6 digits, the truth log the shortest text), everything else
/// by MySQL text; bytes that are not UTF-8 as `0x` + hex, as the truth log writes them.
fn canonical(data_type: &str, text: Option<&str>) -> Option<String> {
    let t = text?;
    Some(match data_type {
        "float" => {
            let f: f32 = t.parse().unwrap_or_else(|_| panic!("FLOAT {t:?}"));
            format!("f32:{:08x}", f.to_bits())
        }
        "double" => {
            let f: f64 = t.parse().unwrap_or_else(|_| panic!("DOUBLE {t:?}"));
            format!("f64:{:016x}", f.to_bits())
        }
        _ => t.to_owned(),
    })
}

/// The replica's value as the truth log writes it (before [`canonical`]).
fn replica_text(data_type: &str, v: &mysql_async::Value) -> Option<String> {
    let b = match v {
        mysql_async::Value::NULL => return None,
        mysql_async::Value::Bytes(b) => b,
        other => panic!("text protocol value {other:?}"),
    };
    if data_type == "bit" {
        return Some(format!("0x{}", hex::encode_upper(b)));
    }
    Some(match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => format!("0x{}", hex::encode_upper(b)),
    })
}

/// Compares every table of the model with the replica, value by value. Returns the number
/// of values compared.
pub async fn assert_replica_equals_model(mut conn: mysql_async::Conn, model: &Model) -> u64 {
    conn.query_drop("SET time_zone = '+00:00'")
        .await
        .expect("set time zone");
    let mut compared = 0u64;
    let replica_tables: Vec<(String, String)> = conn
        .query(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'wl' ORDER BY TABLE_NAME",
        )
        .await
        .expect("list tables");
    let model_tables: Vec<(String, String)> = model.tables.keys().cloned().collect();
    assert_eq!(replica_tables, model_tables, "the replica has the tables");
    for ((schema, table), rows) in &model.tables {
        let cols: Vec<(String, String)> = conn
            .exec(
                "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (schema, table),
            )
            .await
            .expect("columns");
        // Partitioned as the DDL left it: partition DDL later in the binlog applies to it.
        let parts: Vec<String> = conn
            .exec(
                "SELECT PARTITION_NAME FROM information_schema.PARTITIONS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL \
                 ORDER BY PARTITION_ORDINAL_POSITION",
                (schema, table),
            )
            .await
            .expect("partitions");
        let key = (schema.clone(), table.clone());
        let want_parts = model.ddl.partitioning(&key).map(|p| p.names());
        assert_eq!(
            parts,
            want_parts.unwrap_or_default(),
            "`{schema}`.`{table}`: the replica's partitions"
        );
        let types: BTreeMap<&str, &str> =
            cols.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
        let select: Vec<String> = cols
            .iter()
            .map(|(n, t)| match t.as_str() {
                // FLOAT as DOUBLE: the exact value instead of 6 printed digits.
                "float" => format!("CAST(`{n}` AS DOUBLE)"),
                _ => format!("`{n}`"),
            })
            .collect();
        let got: Vec<mysql_async::Row> = conn
            .query(format!(
                "SELECT {} FROM `{schema}`.`{table}`",
                select.join(", ")
            ))
            .await
            .expect("select rows");
        let mut got: Vec<RowText> = got
            .iter()
            .map(|row| {
                cols.iter()
                    .enumerate()
                    .map(|(i, (n, t))| {
                        let v = row.as_ref(i).expect("value");
                        (n.clone(), canonical(t, replica_text(t, v).as_deref()))
                    })
                    .collect()
            })
            .collect();
        let mut want: Vec<RowText> = rows
            .values()
            .map(|r| {
                r.iter()
                    .map(|(n, v)| {
                        let t = types.get(n.as_str()).copied().unwrap_or("");
                        (n.clone(), canonical(t, v.as_deref()))
                    })
                    .collect()
            })
            .collect();
        got.sort_by_key(row_key);
        want.sort_by_key(row_key);
        let ctx = format!("`{schema}`.`{table}`");
        assert_eq!(got.len(), want.len(), "{ctx}: row count");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{ctx}: row");
            compared += g.len() as u64;
        }
    }
    let _ = conn.disconnect().await;
    compared
}

//! Mounted rows rendered the way the simulator's truth log renders them, and truth-log lines
//! normalised for comparison.

#![allow(dead_code)]

use serde_json::{json, Value as Json};
use tibinlog::mounter::ddl_sql::normalize_ddl;
use tibinlog::mounter::{RowChange, RowOp};
use tibinlog::tidb::text;
use tibinlog_protocol::value::Value;

/// One row image as `{column: MySQL text}` (`null` for a missing image).
pub fn image(c: &RowChange, cells: Option<&Vec<Value>>) -> Json {
    let Some(cells) = cells else {
        return Json::Null;
    };
    let cols = tibinlog::mounter::coltype::visible_columns(&c.table.info);
    assert_eq!(cols.len(), cells.len());
    let mut m = serde_json::Map::new();
    for (col, v) in cols.iter().zip(cells) {
        let s = text::render(v, &col.field_type);
        m.insert(col.name.o.clone(), s.map_or(Json::Null, Json::String));
    }
    Json::Object(m)
}

/// A row change as a truth-log row.
pub fn row_json(c: &RowChange) -> Json {
    let op = match c.op {
        RowOp::Insert => "insert",
        RowOp::Update => "update",
        RowOp::Delete => "delete",
    };
    json!({"db": c.table.schema(), "table": c.table.name(), "op": op,
           "before": image(c, c.before.as_ref()), "after": image(c, c.after.as_ref())})
}

/// Truth-log lines with rows sorted and DDL in the normalised MySQL dialect; transactions with
/// neither rows nor DDL are left out.
pub fn normalized(lines: &[String]) -> Vec<Json> {
    lines
        .iter()
        .map(|l| {
            let mut v: Json = serde_json::from_str(l).expect("truth json");
            if let Some(rows) = v.get_mut("rows").and_then(Json::as_array_mut) {
                rows.sort_by_key(|r| r.to_string());
            }
            if let Some(q) = v.get("ddl").and_then(Json::as_str) {
                v["ddl"] = json!(normalize_ddl(q));
            }
            v
        })
        .filter(|v| v["rows"].as_array().is_some_and(|r| !r.is_empty()) || !v["ddl"].is_null())
        .collect()
}

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

/// A table of the truth log: (database, table).
pub type TableId = (String, String);

/// How a table is partitioned, read from its `CREATE TABLE` text.
#[derive(Debug, Clone)]
pub struct Partitioning {
    column: String,
    /// RANGE: each partition's exclusive upper bound (`None` = MAXVALUE); HASH: their names.
    range: Vec<(String, Option<i64>)>,
    hash: Vec<String>,
}

impl Partitioning {
    /// From `… PARTITION BY RANGE (`c`) (PARTITION p0 VALUES LESS THAN (10), …)` or
    /// `… PARTITION BY HASH (`c`) PARTITIONS n`; None when the table is not partitioned.
    pub fn parse(create: &str) -> Option<Partitioning> {
        let (_, tail) = create.split_once(" PARTITION BY ")?;
        let column = idents(tail).into_iter().next().expect("partition column");
        if let Some(rest) = tail.strip_prefix("HASH ") {
            let n: usize = rest
                .rsplit_once("PARTITIONS ")
                .and_then(|(_, n)| n.trim().parse().ok())
                .expect("HASH partition count");
            let hash = (0..n).map(|i| format!("p{i}")).collect();
            return Some(Partitioning {
                column,
                range: Vec::new(),
                hash,
            });
        }
        let range = tail
            .split("PARTITION ")
            .skip(1)
            .map(|d| {
                let (name, bound) = d.split_once(" VALUES LESS THAN (").expect("range bound");
                let bound = bound.split(')').next().expect("bound end");
                (name.trim().trim_matches('`').to_owned(), bound.parse().ok())
            })
            .collect();
        Some(Partitioning {
            column,
            range,
            hash: Vec::new(),
        })
    }

    /// The partitions' names, in order.
    pub fn names(&self) -> Vec<String> {
        if self.hash.is_empty() {
            self.range.iter().map(|(n, _)| n.clone()).collect()
        } else {
            self.hash.clone()
        }
    }

    /// The partitioning column.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// The partition of a row whose partitioning column reads `text` (an integer).
    pub fn partition_of(&self, text: Option<&str>) -> String {
        let x: i64 = text
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("partition column value {text:?}"));
        if !self.hash.is_empty() {
            return self.hash[(x.unsigned_abs() % self.hash.len() as u64) as usize].clone();
        }
        self.range
            .iter()
            .find(|(_, b)| b.is_none_or(|b| x < b))
            .map(|(n, _)| n.clone())
            .unwrap_or_else(|| panic!("no partition for {x}"))
    }
}

/// The backquoted identifiers of `s`, in order (doubled backquotes unescaped).
pub fn idents(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (&mut cur, c) {
            (None, '`') => cur = Some(String::new()),
            (Some(id), '`') if chars.peek() == Some(&'`') => {
                chars.next();
                id.push('`');
            }
            (Some(_), '`') => out.extend(cur.take()),
            (Some(id), c) => id.push(c),
            (None, _) => {}
        }
    }
    out
}

/// What a DDL of the truth log does to the rows a replay of the log holds (the log shows no
/// row events for any of it).
#[derive(Debug)]
pub enum RowEffect {
    None,
    Create(TableId),
    /// TRUNCATE TABLE.
    Clear(TableId),
    /// TRUNCATE PARTITION: the table's rows in these partitions are gone.
    ClearPartitions {
        table: TableId,
        part: Partitioning,
        partitions: Vec<String>,
    },
    /// RENAME TABLE: each table's rows go with it to the new name, in statement order.
    Rename(Vec<(TableId, TableId)>),
    /// EXCHANGE PARTITION: the table's rows in `partition` and all rows of `with` trade places.
    Exchange {
        table: TableId,
        part: Partitioning,
        partition: String,
        with: TableId,
    },
}

/// Follows the truth log's DDL: which tables are partitioned, and how, under their current
/// names.
#[derive(Debug, Default)]
pub struct DdlReplay {
    parts: std::collections::BTreeMap<TableId, Partitioning>,
}

impl DdlReplay {
    /// How `table` is partitioned after the DDL so far (`None`: not partitioned).
    pub fn partitioning(&self, table: &TableId) -> Option<&Partitioning> {
        self.parts.get(table)
    }

    /// The effect of one DDL statement (as the truth log writes it) on the tables' rows.
    pub fn effect(&mut self, ddl: &str) -> RowEffect {
        let ids = idents(ddl);
        let table = || (ids[0].clone(), ids[1].clone());
        if ddl.starts_with("CREATE TABLE ") {
            match Partitioning::parse(ddl) {
                Some(p) => self.parts.insert(table(), p),
                None => self.parts.remove(&table()),
            };
            return RowEffect::Create(table());
        }
        if ddl.starts_with("TRUNCATE TABLE ") {
            return RowEffect::Clear(table());
        }
        if ddl.starts_with("RENAME TABLE ") {
            let pairs: Vec<(TableId, TableId)> = ids
                .chunks(4)
                .map(|c| ((c[0].clone(), c[1].clone()), (c[2].clone(), c[3].clone())))
                .collect();
            for (from, to) in &pairs {
                if let Some(p) = self.parts.remove(from) {
                    self.parts.insert(to.clone(), p);
                }
            }
            return RowEffect::Rename(pairs);
        }
        if ddl.starts_with("ALTER TABLE ") {
            let part = || {
                self.parts
                    .get(&table())
                    .cloned()
                    .unwrap_or_else(|| panic!("{ddl}: not a partitioned table of the log"))
            };
            if ddl.contains(" TRUNCATE PARTITION ") {
                return RowEffect::ClearPartitions {
                    table: table(),
                    part: part(),
                    partitions: ids[2..].to_vec(),
                };
            }
            if ddl.contains(" EXCHANGE PARTITION ") {
                return RowEffect::Exchange {
                    table: table(),
                    part: part(),
                    partition: ids[2].clone(),
                    with: (ids[3].clone(), ids[4].clone()),
                };
            }
        }
        RowEffect::None
    }
}

/// Applies `effect` to tables of rows keyed by anything; `cell` reads a row's column as text.
pub fn apply_effect<K: Ord, R>(
    tables: &mut std::collections::BTreeMap<TableId, std::collections::BTreeMap<K, R>>,
    effect: &RowEffect,
    cell: impl Fn(&R, &str) -> Option<String>,
) {
    match effect {
        RowEffect::None => {}
        RowEffect::Create(t) => {
            tables.entry(t.clone()).or_default();
        }
        RowEffect::Clear(t) => {
            tables.entry(t.clone()).or_default().clear();
        }
        RowEffect::ClearPartitions {
            table,
            part,
            partitions,
        } => {
            let rows = tables.entry(table.clone()).or_default();
            rows.retain(|_, r| {
                !partitions.contains(&part.partition_of(cell(r, part.column()).as_deref()))
            });
        }
        RowEffect::Rename(pairs) => {
            for (from, to) in pairs {
                let rows = tables.remove(from).unwrap_or_default();
                tables.insert(to.clone(), rows);
            }
        }
        RowEffect::Exchange {
            table,
            part,
            partition,
            with,
        } => {
            let pt = tables.remove(table).unwrap_or_default();
            let (moving, mut staying): (std::collections::BTreeMap<K, R>, _) =
                pt.into_iter().partition(|(_, r)| {
                    part.partition_of(cell(r, part.column()).as_deref()) == *partition
                });
            staying.extend(tables.remove(with).unwrap_or_default());
            tables.insert(table.clone(), staying);
            tables.insert(with.clone(), moving);
        }
    }
}

//! The truth log: what a correct binlog must contain, one JSON line per committed user
//! transaction in commit order (ascending `(commit_ts, start_ts)`).
//!
//! ```text
//! {"start_ts":1,"commit_ts":2,"rows":[{"db":"d","table":"t","op":"update",
//!   "before":{"id":"1","v":"a"},"after":{"id":"1","v":"b"}}],"ddl":null}
//! ```
//!
//! * Rows are the **net** change of each record key at commit, in the order the transaction
//!   first touched them: insert-then-update is one insert, insert-then-delete is nothing, and a
//!   primary-key change is a delete of the old key and an insert of the new one (what TiKV's
//!   change stream shows it).
//! * Values are MySQL's text form (`tidb::text::render`), `null` for NULL; column keys in
//!   column order. Tables are logical names (partitions are not visible).
//! * A DDL is one line with `"rows": []` and the job's query text; `commit_ts` is the commit
//!   ts of the transaction that made the job done (the DDL's `FinishedTS` for TiCDC).
//! * Internal transactions (DDL job bookkeeping, row id allocation, index backfill) are not
//!   logged: a binlog never shows them.
//!
//! The simulated TiDB commits one transaction at a time, so writing lines as transactions
//! commit already gives commit order.

use std::fmt::Write as _;
use std::io;
use std::sync::{Arc, Mutex};

use tibinlog_protocol::value::Value;

use crate::sim::Ts;
use crate::tidb::text;

use super::catalog::TableMeta;

/// Net operation on one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOp {
    Insert,
    Update,
    Delete,
}

impl RowOp {
    /// `insert` / `update` / `delete`.
    pub fn name(self) -> &'static str {
        match self {
            RowOp::Insert => "insert",
            RowOp::Update => "update",
            RowOp::Delete => "delete",
        }
    }
}

/// One row change of a committed transaction.
#[derive(Debug, Clone)]
pub struct TruthRow {
    /// Table (names and types are taken from it).
    pub table: Arc<TableMeta>,
    pub op: RowOp,
    pub before: Option<Vec<Value>>,
    pub after: Option<Vec<Value>>,
}

/// One committed user transaction or DDL.
#[derive(Debug, Clone, Default)]
pub struct TruthTxn {
    pub start_ts: Ts,
    pub commit_ts: Ts,
    pub rows: Vec<TruthRow>,
    pub ddl: Option<String>,
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn image(out: &mut String, t: &TableMeta, row: Option<&Vec<Value>>) {
    let Some(row) = row else {
        out.push_str("null");
        return;
    };
    out.push('{');
    for (i, ((name, ft), v)) in t.names.iter().zip(&t.types).zip(row).enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, name);
        out.push(':');
        match text::render(v, ft) {
            None => out.push_str("null"),
            Some(s) => json_str(out, &s),
        }
    }
    out.push('}');
}

impl TruthTxn {
    /// Appends the JSON line (without the newline) to `out`.
    pub fn write_json(&self, out: &mut String) {
        let _ = write!(
            out,
            "{{\"start_ts\":{},\"commit_ts\":{},\"rows\":[",
            self.start_ts.0, self.commit_ts.0
        );
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"db\":");
            json_str(out, &r.table.db_name);
            out.push_str(",\"table\":");
            json_str(out, r.table.name());
            let _ = write!(out, ",\"op\":\"{}\",\"before\":", r.op.name());
            image(out, &r.table, r.before.as_ref());
            out.push_str(",\"after\":");
            image(out, &r.table, r.after.as_ref());
            out.push('}');
        }
        out.push_str("],\"ddl\":");
        match &self.ddl {
            None => out.push_str("null"),
            Some(q) => json_str(out, q),
        }
        out.push('}');
    }

    /// The JSON line (without the newline).
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        self.write_json(&mut s);
        s
    }
}

/// Receives every committed user transaction, in commit order.
pub trait TruthSink: Send {
    /// Records one transaction.
    fn record(&mut self, txn: &TruthTxn) -> io::Result<()>;
}

/// Writes JSON lines to any writer.
#[derive(Debug)]
pub struct TruthLog<W: io::Write + Send> {
    out: W,
    line: String,
}

impl<W: io::Write + Send> TruthLog<W> {
    /// A log writing to `out`.
    pub fn new(out: W) -> Self {
        TruthLog {
            out,
            line: String::new(),
        }
    }
    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: io::Write + Send> TruthSink for TruthLog<W> {
    fn record(&mut self, txn: &TruthTxn) -> io::Result<()> {
        self.line.clear();
        txn.write_json(&mut self.line);
        self.line.push('\n');
        self.out.write_all(self.line.as_bytes())
    }
}

/// Keeps the JSON lines in memory; clones share the same lines (hand one clone to the
/// simulated TiDB and read the other).
#[derive(Debug, Clone, Default)]
pub struct TruthCollector(Arc<Mutex<Vec<String>>>);

impl TruthCollector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }
    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl TruthSink for TruthCollector {
    fn record(&mut self, txn: &TruthTxn) -> io::Result<()> {
        let line = txn.to_json();
        self.0
            .lock()
            .map_err(|_| io::Error::other("truth collector poisoned"))?
            .push(line);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tidb::types::{self as ty, ColumnDef, TableDef};
    use crate::tidb::schema::mysql;

    #[test]
    fn json_line_shape() {
        let def = TableDef {
            name: "t".into(),
            columns: vec![
                ColumnDef::new("id", ty::int(mysql::TYPE_LONG, true)).not_null(),
                ColumnDef::new("s", ty::varchar(8)),
            ],
            primary_key: vec!["id".into()],
            clustered: true,
            indexes: Vec::new(),
            partition: None,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        };
        let meta = Arc::new(TableMeta::new(
            2,
            "d",
            def.build("d", 5, &[], 0).expect("build"),
        ));
        let txn = TruthTxn {
            start_ts: Ts(10),
            commit_ts: Ts(11),
            rows: vec![TruthRow {
                table: meta,
                op: RowOp::Update,
                before: Some(vec![Value::UInt(1), Value::Null]),
                after: Some(vec![Value::UInt(1), Value::Bytes(b"a\"b".to_vec())]),
            }],
            ddl: None,
        };
        assert_eq!(
            txn.to_json(),
            r#"{"start_ts":10,"commit_ts":11,"rows":[{"db":"d","table":"t","op":"update","before":{"id":"1","s":null},"after":{"id":"1","s":"a\"b"}}],"ddl":null}"#
        );
        let mut log = TruthLog::new(Vec::new());
        log.record(&txn).expect("write");
        let out = log.into_inner();
        assert_eq!(out.last(), Some(&b'\n'));
        let c = TruthCollector::new();
        c.clone().record(&txn).expect("record");
        assert_eq!(c.lines().len(), 1);
    }
}

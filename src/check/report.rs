//! What a check found: per table its shape notes, row counts, the rows that differ (missing on
//! the target, extra on the target, or changed with both values of each differing column) and
//! the repair; as text for people and JSON for programs.

use std::io::Write;

use serde::Serialize;

use super::align::Point;
use super::plan::RowDiff;
use super::sql::{Cell, Row, TableShape};

/// A cell as the report shows it: text, `0x…` for bytes that are not UTF-8, `null` for NULL.
pub fn show(cell: &Cell) -> Option<String> {
    let v = cell.as_ref()?;
    Some(match std::str::from_utf8(v) {
        Ok(s) => s.to_owned(),
        Err(_) => format!("0x{}", hex::encode(v)),
    })
}

/// One differing column of a changed row.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ColumnDiff {
    pub column: String,
    pub source: Option<String>,
    pub target: Option<String>,
}

/// One differing row: `missing` (on the target), `extra` (on the target) or `changed`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RowReport {
    pub kind: &'static str,
    /// The key's columns and values (every column for a table without a key).
    pub key: Vec<(String, Option<String>)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnDiff>,
}

impl RowReport {
    pub fn new(shape: &TableShape, diff: &RowDiff) -> RowReport {
        let key_cols: Vec<usize> = if shape.key.is_empty() {
            (0..shape.columns.len()).collect()
        } else {
            shape.key.clone()
        };
        let key = |row: &Row| -> Vec<(String, Option<String>)> {
            key_cols
                .iter()
                .map(|&i| (shape.columns[i].name.clone(), show(&row[i])))
                .collect()
        };
        match diff {
            RowDiff::Missing { source } => RowReport {
                kind: "missing",
                key: key(source),
                columns: Vec::new(),
            },
            RowDiff::Extra { target } => RowReport {
                kind: "extra",
                key: key(target),
                columns: Vec::new(),
            },
            RowDiff::Changed {
                source,
                target,
                columns,
            } => RowReport {
                kind: "changed",
                key: key(source),
                columns: columns
                    .iter()
                    .map(|&c| ColumnDiff {
                        column: shape.columns[c].name.clone(),
                        source: show(&source[c]),
                        target: show(&target[c]),
                    })
                    .collect(),
            },
        }
    }
}

/// One table's result.
#[derive(Debug, Clone, Serialize, Default)]
pub struct TableReport {
    pub table: String,
    /// Differences of shape: a table or columns on one side only.
    pub shape: Vec<String>,
    pub chunks: u64,
    pub rows_source: u64,
    pub rows_target: u64,
    /// Every differing row, counted.
    pub differences: u64,
    /// The first `--max-listed` of them.
    pub rows: Vec<RowReport>,
    /// With `--repair`: the statements, one transaction per chunk (the first `--max-listed`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repair: Vec<String>,
    /// Every repair statement, counted.
    pub repair_statements: u64,
}

impl TableReport {
    pub fn equal(&self) -> bool {
        self.shape.is_empty() && self.differences == 0
    }
}

/// A whole check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where both sides were read.
    pub point: Point,
    pub equal: bool,
    pub tables: Vec<TableReport>,
    pub chunks: u64,
    pub rows_source: u64,
    pub rows_target: u64,
    pub differences: u64,
    /// Repair statements run on the target (`--apply`).
    pub repaired: u64,
    pub seconds: f64,
}

fn show_key(key: &[(String, Option<String>)]) -> String {
    key.iter()
        .map(|(c, v)| format!("{c}={}", shown(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn shown(v: &Option<String>) -> String {
    match v {
        None => "NULL".into(),
        Some(s) => format!("'{}'", s.replace('\'', "''")),
    }
}

impl Report {
    /// The differences, one per line, then the repair and a summary line.
    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        for t in &self.tables {
            for note in &t.shape {
                writeln!(out, "{}: {note}", t.table)?;
            }
            for r in &t.rows {
                let what = match r.kind {
                    "missing" => "missing on the target",
                    "extra" => "extra on the target",
                    _ => "changed",
                };
                write!(out, "{}: {what} ({})", t.table, show_key(&r.key))?;
                for c in &r.columns {
                    write!(
                        out,
                        "; {}: source {}, target {}",
                        c.column,
                        shown(&c.source),
                        shown(&c.target)
                    )?;
                }
                writeln!(out)?;
            }
            if t.differences > t.rows.len() as u64 {
                writeln!(
                    out,
                    "{}: … and {} more differing rows",
                    t.table,
                    t.differences - t.rows.len() as u64
                )?;
            }
        }
        let repairs: Vec<&String> = self.tables.iter().flat_map(|t| &t.repair).collect();
        if !repairs.is_empty() {
            let all: u64 = self.tables.iter().map(|t| t.repair_statements).sum();
            writeln!(out, "-- repair ({all} statements)")?;
            for s in &repairs {
                writeln!(out, "{s};")?;
            }
            if all > repairs.len() as u64 {
                writeln!(
                    out,
                    "-- … and {} more (--max-listed shows more; --apply runs them all)",
                    all - repairs.len() as u64
                )?;
            }
        }
        let differing = self.tables.iter().filter(|t| !t.equal()).count();
        writeln!(
            out,
            "checked {} tables ({} chunks, {} rows on the source, {} on the target) at {} \
             (TiDB ts {}, {}) in {:.1} s: {}",
            self.tables.len(),
            self.chunks,
            self.rows_source,
            self.rows_target,
            self.point.position,
            self.point.ts,
            self.point.how,
            self.seconds,
            if self.equal {
                "all equal".to_owned()
            } else {
                format!(
                    "{differing} tables differ, {} rows{}",
                    self.differences,
                    if self.repaired > 0 {
                        format!("; {} repair statements applied", self.repaired)
                    } else {
                        String::new()
                    }
                )
            }
        )
    }
}

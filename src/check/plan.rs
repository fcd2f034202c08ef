//! One chunk's check as a pure state machine: checksum the chunk on both sides; where the sums
//! differ, bisect at the middle key until each differing part is small, then read those rows
//! from both sides and name the differences. The shell asks what [`ChunkCheck::next_ask`] says and
//! feeds the answers back; the event-script tests below drive it without a server.
//!
//! A bisection reads the checksum of the lower half only: sums are XORs and counts add up, so
//! the upper half's sum is the whole's with the lower's taken out.

use std::collections::HashMap;

use super::sql::{Cell, KeyRange, LiteralKind, Row, TableShape};

/// A chunk's row count and XOR of row digests on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sum {
    pub count: u64,
    pub xor: u64,
}

impl Sum {
    fn minus(self, part: Sum) -> Sum {
        Sum {
            count: self.count.saturating_sub(part.count),
            xor: self.xor ^ part.xor,
        }
    }
}

/// Which side a key is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Source,
    Target,
}

/// What the shell must read next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// Both sides' [`Sum`] of the range ([`TableShape::checksum_query`]).
    Sums(KeyRange),
    /// The key `offset` rows into the range on `side` ([`TableShape::key_at_query`]).
    KeyAt {
        range: KeyRange,
        side: Side,
        offset: u64,
    },
    /// Both sides' rows of the range in key order ([`TableShape::rows_query`]).
    Rows(KeyRange),
}

/// One row that is not the same on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowDiff {
    /// On the source, not on the target.
    Missing { source: Row },
    /// On the target, not on the source.
    Extra { target: Row },
    /// The same key on both sides, other values: the columns (indexes) that differ.
    Changed {
        source: Row,
        target: Row,
        columns: Vec<usize>,
    },
}

#[derive(Debug)]
enum Work {
    /// Both sums of a range are to be read.
    Sums(KeyRange),
    /// Both sums of a range are known: decide.
    Known(KeyRange, Sum, Sum),
    /// A range to split at its middle key (sums known).
    Split(KeyRange, Sum, Sum),
    /// The lower half of a split: its sums are to be read; the upper half's follow.
    Halves {
        lower: KeyRange,
        upper: KeyRange,
        whole: (Sum, Sum),
    },
    Rows(KeyRange),
}

/// The check of one chunk (see the module's header).
#[derive(Debug)]
pub struct ChunkCheck {
    todo: Vec<Work>,
    asked: Option<Work>,
    /// A differing range with at most this many rows on each side is read row by row.
    rows_threshold: u64,
    keyless: bool,
    pub diffs: Vec<RowDiff>,
    /// Rows of the chunk on the source and on the target (from the first sums).
    pub rows: Option<(u64, u64)>,
    /// Rows read row by row from both sides.
    pub rows_read: u64,
    /// A table without a key differed but was too large to read whole: its rows are not
    /// listed.
    pub unlisted: bool,
}

/// A table without a usable key is compared row by row (as multisets, in memory) only up to
/// this many rows on a side.
pub const KEYLESS_ROWS_MAX: u64 = 200_000;

/// An answer that does not fit the question: a bug in the shell, or a side that changed
/// under a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chunk check: {0}")]
pub struct PlanError(pub String);

impl ChunkCheck {
    pub fn new(shape: &TableShape, range: KeyRange, rows_threshold: u64) -> ChunkCheck {
        ChunkCheck {
            todo: vec![Work::Sums(range)],
            asked: None,
            rows_threshold: rows_threshold.max(1),
            keyless: shape.key.is_empty(),
            diffs: Vec::new(),
            rows: None,
            rows_read: 0,
            unlisted: false,
        }
    }

    /// The next read, or `None` when the chunk is done.
    pub fn next_ask(&mut self) -> Option<Ask> {
        debug_assert!(self.asked.is_none(), "an answer is outstanding");
        while let Some(w) = self.todo.pop() {
            let ask = match &w {
                Work::Sums(r) => Ask::Sums(r.clone()),
                Work::Halves { lower, .. } => Ask::Sums(lower.clone()),
                Work::Rows(r) => Ask::Rows(r.clone()),
                Work::Split(r, s, t) => {
                    let (side, count) = if s.count >= t.count {
                        (Side::Source, s.count)
                    } else {
                        (Side::Target, t.count)
                    };
                    Ask::KeyAt {
                        range: r.clone(),
                        side,
                        offset: count / 2 - 1,
                    }
                }
                Work::Known(r, s, t) => {
                    let (r, s, t) = (r.clone(), *s, *t);
                    self.decide(r, s, t);
                    continue;
                }
            };
            self.asked = Some(w);
            return Some(ask);
        }
        None
    }

    fn decide(&mut self, range: KeyRange, s: Sum, t: Sum) {
        if s == t {
            return;
        }
        let most = s.count.max(t.count);
        if self.keyless && most > KEYLESS_ROWS_MAX {
            self.unlisted = true;
        } else if self.keyless || most <= self.rows_threshold {
            self.todo.push(Work::Rows(range));
        } else {
            self.todo.push(Work::Split(range, s, t));
        }
    }

    fn take(&mut self, what: &str) -> Result<Work, PlanError> {
        self.asked
            .take()
            .ok_or_else(|| PlanError(format!("{what} without a question")))
    }

    /// The answer to [`Ask::Sums`].
    pub fn on_sums(&mut self, source: Sum, target: Sum) -> Result<(), PlanError> {
        match self.take("sums")? {
            Work::Sums(range) => {
                self.rows.get_or_insert((source.count, target.count));
                self.decide(range, source, target);
            }
            Work::Halves {
                lower,
                upper,
                whole,
            } => {
                let (ws, wt) = whole;
                // Upper first on the stack: the lower half is looked at first.
                self.todo
                    .push(Work::Known(upper, ws.minus(source), wt.minus(target)));
                self.todo.push(Work::Known(lower, source, target));
            }
            w => return Err(PlanError(format!("sums answered for {w:?}"))),
        }
        Ok(())
    }

    /// The answer to [`Ask::KeyAt`]: the middle key, `None` if the side has no row there.
    pub fn on_key(&mut self, key: Option<Row>) -> Result<(), PlanError> {
        let Work::Split(range, s, t) = self.take("key")? else {
            return Err(PlanError("a key answered for another question".into()));
        };
        match key {
            // A range that cannot be split (its middle is its end) is read whole.
            Some(mid) if range.upper.as_ref() != Some(&mid) => {
                self.todo.push(Work::Halves {
                    lower: KeyRange {
                        lower: range.lower.clone(),
                        upper: Some(mid.clone()),
                    },
                    upper: KeyRange {
                        lower: Some(mid),
                        upper: range.upper,
                    },
                    whole: (s, t),
                });
            }
            _ => self.todo.push(Work::Rows(range)),
        }
        Ok(())
    }

    /// The answer to [`Ask::Rows`]: both sides' rows of the range, each in key order.
    pub fn on_rows(
        &mut self,
        shape: &TableShape,
        source: Vec<Row>,
        target: Vec<Row>,
    ) -> Result<(), PlanError> {
        if !matches!(self.take("rows")?, Work::Rows(_)) {
            return Err(PlanError("rows answered for another question".into()));
        }
        self.rows_read += (source.len() + target.len()) as u64;
        diff_rows(shape, source, target, &mut self.diffs);
        Ok(())
    }
}

/// A cell as its column's collation compares it: a case-insensitive collation folds case, a
/// PAD SPACE one ignores trailing spaces (MySQL 8's `utf8mb4_0900_*` collations are NO PAD).
fn folded(kind: LiteralKind, collation: Option<&str>, cell: &Cell) -> Cell {
    let (Some(v), LiteralKind::Text, Some(coll)) = (cell, kind, collation) else {
        return cell.clone();
    };
    let Ok(s) = std::str::from_utf8(v) else {
        return cell.clone();
    };
    let pad_space = !coll.contains("_0900_") && !coll.contains("nopad");
    let s = if pad_space {
        s.trim_end_matches(' ')
    } else {
        s
    };
    if coll.ends_with("_ci") {
        Some(s.to_lowercase().into_bytes())
    } else {
        Some(s.as_bytes().to_vec())
    }
}

fn fold_row(shape: &TableShape, cols: &[usize], row: &Row) -> Row {
    cols.iter()
        .map(|&i| {
            let c = &shape.columns[i];
            folded(c.kind, c.collation.as_deref(), &row[i])
        })
        .collect()
}

/// The differences between the rows of one range on both sides, matched by key (by every
/// column for a table without a key, as multisets), compared as each column's collation
/// compares. Source order first, then the target's extra rows in its order.
pub fn diff_rows(shape: &TableShape, source: Vec<Row>, target: Vec<Row>, out: &mut Vec<RowDiff>) {
    let all: Vec<usize> = (0..shape.columns.len()).collect();
    let key_cols = if shape.key.is_empty() {
        all.clone()
    } else {
        shape.key.clone()
    };
    let mut by_key: HashMap<Row, Vec<usize>> = HashMap::with_capacity(target.len());
    for (i, row) in target.iter().enumerate() {
        by_key
            .entry(fold_row(shape, &key_cols, row))
            .or_default()
            .push(i);
    }
    let mut matched = vec![false; target.len()];
    for row in source {
        let key = fold_row(shape, &key_cols, &row);
        let found = by_key.get_mut(&key).and_then(|v| v.pop());
        let Some(i) = found else {
            out.push(RowDiff::Missing { source: row });
            continue;
        };
        matched[i] = true;
        let columns: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&c| {
                let col = &shape.columns[c];
                let coll = col.collation.as_deref();
                folded(col.kind, coll, &row[c]) != folded(col.kind, coll, &target[i][c])
            })
            .collect();
        if !columns.is_empty() {
            out.push(RowDiff::Changed {
                source: row,
                target: target[i].clone(),
                columns,
            });
        }
    }
    for (row, m) in target.into_iter().zip(matched) {
        if !m {
            out.push(RowDiff::Extra { target: row });
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

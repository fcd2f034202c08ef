//! The memory tier: rows wait in the writer's buffer for their resolved ts, and resolved rows
//! travel to the reader as sorted runs, without passing through RocksDB.
//!
//! ```text
//!  rows ──► Buffer (unsorted, ≤ memory_run_bytes) ──resolved ts──► Run (sorted, deduplicated)
//!              │ outgrown                                              │ reader has too much
//!              ▼                                                       ▼ waiting
//!           RocksDB ◄──────────────────────────────────────────────────┘
//! ```
//!
//! Every row in the buffer has `commit_ts` above the applied resolved ts (later rows are
//! dropped as late before they get here), so a run taken at resolved ts `t` holds exactly the
//! buffered rows in `(previous resolved, t]`, and runs arrive in the reader in ts order.

use std::cmp::Ordering;

use super::key::{cmp_rows, encoded_len};
use crate::model::{RawRow, Ts};

/// Rows waiting in the writer for a resolved ts that covers them. Unsorted.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    rows: Vec<RawRow>,
    bytes: usize,
}

impl Buffer {
    /// Encoded bytes held (what RocksDB would store for these rows).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Takes ownership of `rows`.
    pub(crate) fn extend(&mut self, rows: Vec<RawRow>) {
        self.bytes += rows.iter().map(encoded_len).sum::<usize>();
        if self.rows.is_empty() {
            self.rows = rows;
        } else {
            self.rows.extend(rows);
        }
    }

    /// Empties the buffer, for a spill to RocksDB.
    pub(crate) fn take_all(&mut self) -> Vec<RawRow> {
        self.bytes = 0;
        std::mem::take(&mut self.rows)
    }

    /// Removes the rows with `commit_ts <= resolved` and returns them as a sorted run.
    pub(crate) fn take_resolved(&mut self, resolved: Ts) -> Run {
        let ready_count = self.rows.iter().filter(|r| r.commit_ts <= resolved).count();
        let mut ready = if ready_count == self.rows.len() {
            // The usual case: the resolved ts covers everything buffered.
            std::mem::take(&mut self.rows)
        } else if ready_count == 0 {
            Vec::new()
        } else {
            let mut ready = Vec::with_capacity(ready_count);
            let mut rest = Vec::with_capacity(self.rows.len() - ready_count);
            for r in self.rows.drain(..) {
                if r.commit_ts <= resolved {
                    ready.push(r);
                } else {
                    rest.push(r);
                }
            }
            self.rows = rest;
            ready
        };
        let taken: usize = ready.iter().map(encoded_len).sum();
        self.bytes = if self.rows.is_empty() {
            0
        } else {
            self.bytes.saturating_sub(taken)
        };
        // Stable, so copies of one row (TiKV resent it) stay in arrival order; the last one is
        // kept (they are equal).
        ready.sort_by(cmp_rows);
        let mut bytes = taken;
        ready.dedup_by(|later, kept| {
            if cmp_rows(later, kept) == Ordering::Equal {
                bytes -= encoded_len(kept);
                std::mem::swap(later, kept);
                true
            } else {
                false
            }
        });
        Run {
            upto: resolved,
            rows: ready,
            bytes,
        }
    }
}

/// Resolved rows in key order, handed to the reader with the resolved ts `upto`.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) upto: Ts,
    pub(crate) rows: Vec<RawRow>,
    pub(crate) bytes: usize,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{Op, RegionId};

    fn row(op: Op, handle: u8, start: u64, commit: u64) -> RawRow {
        let mut key = crate::tidb::key::record_prefix(1);
        key.push(handle);
        RawRow {
            op,
            key,
            value: vec![handle],
            old_value: Vec::new(),
            start_ts: Ts(start),
            commit_ts: Ts(commit),
            region_id: RegionId(1),
        }
    }

    #[test]
    fn take_resolved_sorts_dedups_and_keeps_the_rest() {
        let mut b = Buffer::default();
        b.extend(vec![
            row(Op::Put, 2, 5, 10),
            row(Op::Put, 1, 5, 10),
            row(Op::Put, 9, 20, 30),
            row(Op::Delete, 2, 5, 10),
        ]);
        let mut again = row(Op::Put, 1, 5, 10);
        again.value = vec![42];
        b.extend(vec![again, row(Op::Put, 3, 4, 10)]);
        let total = b.bytes();
        let run = b.take_resolved(Ts(10));
        let got: Vec<_> = run
            .rows
            .iter()
            .map(|r| (r.start_ts.0, r.op, r.key[r.key.len() - 1]))
            .collect();
        assert_eq!(
            got,
            vec![
                (4, Op::Put, 3),
                (5, Op::Delete, 2),
                (5, Op::Put, 1),
                (5, Op::Put, 2)
            ]
        );
        assert_eq!(run.upto, Ts(10));
        // Of the two copies of (5, Put, 1) the later one is kept.
        assert_eq!(run.rows[2].value, vec![42]);
        assert_eq!(b.rows.len(), 1);
        assert_eq!(b.bytes(), encoded_len(&row(Op::Put, 9, 20, 30)));
        // The duplicate of (5, Put, 1) is gone from the run's bytes too.
        assert_eq!(
            run.bytes + b.bytes() + encoded_len(&row(Op::Put, 1, 5, 10)),
            total
        );
        assert!(b.take_resolved(Ts(29)).rows.is_empty());
        assert_eq!(b.take_all().len(), 1);
        assert!(b.is_empty());
    }
}

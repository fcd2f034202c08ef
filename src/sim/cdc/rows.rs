//! Rows of the change stream: incremental-scan rows and realtime rows from an applied write
//! batch, with TiKV's old-value rule and txn_source filtering (docs/upstream-facts.md, "TiKV
//! EventFeed").

use std::collections::HashMap;

use tibinlog_proto::cdcpb::event::{row::OpType, LogType, Row};

use crate::sim::mvcc::{LockType, Modify, MvccStore, WriteBatch, WriteType};
use crate::sim::region::{encode_key, raw_lower_bound};
use crate::sim::ts::Ts;

/// Rows of one `Entries` event carry at most this many key+value+old_value bytes (32 KiB).
pub const MAX_ENTRIES_BYTES: usize = 32 * 1024;

/// Observed key range of a downstream, encoded: `[start, end)`, empty end = +∞.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRange {
    /// Inclusive encoded start.
    pub start: Vec<u8>,
    /// Exclusive encoded end; empty = unbounded.
    pub end: Vec<u8>,
}

impl KeyRange {
    /// Intersection of two ranges.
    pub fn intersect(&self, other: &KeyRange) -> KeyRange {
        let start = self.start.clone().max(other.start.clone());
        let end = match (self.end.is_empty(), other.end.is_empty()) {
            (true, _) => other.end.clone(),
            (_, true) => self.end.clone(),
            _ => self.end.clone().min(other.end.clone()),
        };
        KeyRange { start, end }
    }
    /// True if the encoded key is inside.
    pub fn contains(&self, encoded: &[u8]) -> bool {
        encoded >= self.start.as_slice() && (self.end.is_empty() || encoded < self.end.as_slice())
    }
}

/// Whether a row of a txn with `txn_source` reaches a downstream: bits ≥ 8 (lossy DDL reorg,
/// Lightning import) never do; bits 0–7 (CDC writes) are dropped when `filter_loop` is set.
pub fn passes_txn_source(txn_source: u64, filter_loop: bool) -> bool {
    if txn_source >> 8 != 0 {
        return false;
    }
    !(filter_loop && txn_source & 0xFF != 0)
}

/// Byte size of a row for chunking.
pub fn row_bytes(r: &Row) -> usize {
    r.key.len() + r.value.len() + r.old_value.len()
}

/// The INITIALIZED marker row (all other fields zero).
pub fn initialized_row() -> Row {
    Row {
        r#type: LogType::Initialized as i32,
        ..Default::default()
    }
}

fn old_value(mvcc: &MvccStore, key: &[u8], ts: Ts) -> Vec<u8> {
    mvcc.entry(key)
        .and_then(|e| e.committed_value_at(ts))
        .map(|(_, v)| v.to_vec())
        .unwrap_or_default()
}

/// The incremental scan over `range` at the current state: per key ascending, a PREWRITE for a
/// Put/Delete lock (any start_ts), then committed Put/Delete versions with
/// `commit_ts > checkpoint_ts`, newest first, as COMMITTED. No INITIALIZED row.
pub fn scan_rows(
    mvcc: &MvccStore,
    range: &KeyRange,
    checkpoint_ts: Ts,
    filter_loop: bool,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for (key, entry) in mvcc.entries_from(&raw_lower_bound(&range.start)) {
        let enc = encode_key(key);
        if !range.end.is_empty() && enc.as_slice() >= range.end.as_slice() {
            break;
        }
        if enc.as_slice() < range.start.as_slice() {
            continue;
        }
        if let Some(lock) = entry.lock() {
            let op = match lock.lock_type {
                LockType::Put => Some(OpType::Put),
                LockType::Delete => Some(OpType::Delete),
                LockType::Lock | LockType::Pessimistic => None,
            };
            if let Some(op) = op.filter(|_| passes_txn_source(lock.txn_source, filter_loop)) {
                let value = match op {
                    OpType::Put => entry
                        .value_of(lock.start_ts, lock.short_value.as_ref())
                        .unwrap_or_default()
                        .to_vec(),
                    _ => Vec::new(),
                };
                rows.push(Row {
                    start_ts: lock.start_ts.0,
                    r#type: LogType::Prewrite as i32,
                    op_type: op as i32,
                    key: key.to_vec(),
                    value,
                    old_value: old_value(mvcc, key, lock.start_ts.max(lock.for_update_ts)),
                    txn_source: lock.txn_source,
                    ..Default::default()
                });
            }
        }
        for (commit_ts, w) in entry.writes_newest_first() {
            if commit_ts <= checkpoint_ts {
                break;
            }
            let op = match w.write_type {
                WriteType::Put => OpType::Put,
                WriteType::Delete => OpType::Delete,
                WriteType::Lock | WriteType::Rollback => continue,
            };
            if !passes_txn_source(w.txn_source, filter_loop) {
                continue;
            }
            let value = match op {
                OpType::Put => entry
                    .value_of(w.start_ts, w.short_value.as_ref())
                    .unwrap_or_default()
                    .to_vec(),
                _ => Vec::new(),
            };
            rows.push(Row {
                start_ts: w.start_ts.0,
                commit_ts: commit_ts.0,
                r#type: LogType::Committed as i32,
                op_type: op as i32,
                key: key.to_vec(),
                value,
                old_value: old_value(mvcc, key, commit_ts.prev()),
                txn_source: w.txn_source,
                ..Default::default()
            });
        }
    }
    rows
}

/// A realtime row with what downstream filtering needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RealtimeRow {
    /// The row.
    pub row: Row,
    /// `EncodeBytes(row.key)`, for range filtering.
    pub encoded_key: Vec<u8>,
}

/// Converts one applied batch into rows. `mvcc` is the state after the batch.
///
/// * lock put Put/Delete → PREWRITE (value from the lock or the batch's default put, old value
///   at max(start_ts, for_update_ts)); a Put lock rewritten without any value is dropped.
/// * write put Put/Delete → COMMIT (short value only, no old value), or COMMITTED with value and
///   old value at commit_ts − 1 when the batch is 1PC.
/// * write put Rollback, or a data record flagged with an overlapped rollback → ROLLBACK.
/// * lock/pessimistic locks, Lock records, deletes and default CF alone → nothing.
pub fn realtime_rows(batch: &WriteBatch, mvcc: &MvccStore) -> Vec<RealtimeRow> {
    let mut defaults: HashMap<(&[u8], Ts), &Vec<u8>> = HashMap::new();
    for m in &batch.modifies {
        if let Modify::PutDefault {
            key,
            start_ts,
            value,
        } = m
        {
            defaults.insert((key.as_slice(), *start_ts), value);
        }
    }
    let mut out = Vec::new();
    for m in &batch.modifies {
        let row = match m {
            Modify::PutLock { key, lock } => {
                let op = match lock.lock_type {
                    LockType::Put => OpType::Put,
                    LockType::Delete => OpType::Delete,
                    LockType::Lock | LockType::Pessimistic => continue,
                };
                let value = match (op, &lock.short_value) {
                    (OpType::Delete, _) => Vec::new(),
                    (_, Some(v)) => v.clone(),
                    // A lock rewritten alone (heartbeat of a large txn, pushed min_commit_ts)
                    // carries no value: TiKV drops it rather than send a fake prewrite.
                    (_, None) => match defaults.get(&(key.as_slice(), lock.start_ts)) {
                        Some(v) => (*v).clone(),
                        None => continue,
                    },
                };
                Row {
                    start_ts: lock.start_ts.0,
                    r#type: LogType::Prewrite as i32,
                    op_type: op as i32,
                    key: key.clone(),
                    value,
                    old_value: old_value(mvcc, key, lock.start_ts.max(lock.for_update_ts)),
                    txn_source: lock.txn_source,
                    ..Default::default()
                }
            }
            Modify::PutWrite {
                key,
                commit_ts,
                write,
            } => {
                let op = match write.write_type {
                    WriteType::Put => OpType::Put,
                    WriteType::Delete => OpType::Delete,
                    WriteType::Lock => continue,
                    WriteType::Rollback => {
                        out.push(rollback_row(key, write.start_ts, write.txn_source));
                        continue;
                    }
                };
                if write.has_overlapped_rollback {
                    // Rewrite of an existing record: the rolled-back txn's start_ts is the key ts.
                    out.push(rollback_row(key, *commit_ts, 0));
                    continue;
                }
                let mut row = Row {
                    start_ts: write.start_ts.0,
                    commit_ts: commit_ts.0,
                    r#type: LogType::Commit as i32,
                    op_type: op as i32,
                    key: key.clone(),
                    value: write.short_value.clone().unwrap_or_default(),
                    txn_source: write.txn_source,
                    ..Default::default()
                };
                if batch.one_pc {
                    row.r#type = LogType::Committed as i32;
                    if op == OpType::Put && write.short_value.is_none() {
                        row.value = defaults
                            .get(&(key.as_slice(), write.start_ts))
                            .map(|v| (*v).clone())
                            .unwrap_or_default();
                    }
                    row.old_value = old_value(mvcc, key, commit_ts.prev());
                }
                row
            }
            _ => continue,
        };
        out.push(RealtimeRow {
            encoded_key: encode_key(&row.key),
            row,
        });
    }
    out
}

fn rollback_row(key: &[u8], start_ts: Ts, txn_source: u64) -> RealtimeRow {
    RealtimeRow {
        encoded_key: encode_key(key),
        row: Row {
            start_ts: start_ts.0,
            r#type: LogType::Rollback as i32,
            op_type: OpType::Unknown as i32,
            key: key.to_vec(),
            txn_source,
            ..Default::default()
        },
    }
}

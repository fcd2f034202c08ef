//! Snapshot reads (`KvGet`, `KvBatchGet`, `KvScan` under SI).
//!
//! A read at `ts` fails on a key whose Put/Delete lock has `start_ts ≤ ts`, unless the lock's
//! `min_commit_ts > ts` (its commit will be newer than the read) or the caller resolved it
//! (`bypass_locks`). Lock and Pessimistic locks never block reads. Every read raises `max_ts`.

use super::{KeyEntry, LockType, MvccStore};
use crate::sim::error::{Result, SimError};
use crate::sim::ts::Ts;

/// A found value and its commit ts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// The value.
    pub value: Vec<u8>,
    /// commit_ts of the version read (`need_commit_ts`).
    pub commit_ts: Ts,
}

/// One pair of a scan or batch get: a value, or the key error met on that key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvPair {
    /// Raw key.
    pub key: Vec<u8>,
    /// Value or the lock error.
    pub result: Result<ReadResult>,
}

impl MvccStore {
    fn check_read_ts(&mut self, ts: Ts) -> Result<()> {
        if ts < self.gc_safe_point {
            return Err(SimError::DataCompacted {
                read_ts: ts,
                safe_point: self.gc_safe_point,
            });
        }
        self.update_max_ts(ts);
        Ok(())
    }

    /// Point get at `ts`.
    pub fn get(&mut self, key: &[u8], ts: Ts, bypass_locks: &[Ts]) -> Result<Option<ReadResult>> {
        self.check_read_ts(ts)?;
        match self.entry(key) {
            Some(e) => read_entry(key, e, ts, bypass_locks),
            None => Ok(None),
        }
    }

    /// Batch get at `ts`: found keys only, each with its own lock error if locked.
    pub fn batch_get(
        &mut self,
        keys: &[Vec<u8>],
        ts: Ts,
        bypass_locks: &[Ts],
    ) -> Result<Vec<KvPair>> {
        self.check_read_ts(ts)?;
        let mut out = Vec::new();
        for key in keys {
            let Some(e) = self.entry(key) else { continue };
            match read_entry(key, e, ts, bypass_locks) {
                Ok(Some(r)) => out.push(KvPair {
                    key: key.clone(),
                    result: Ok(r),
                }),
                Ok(None) => {}
                Err(err) => out.push(KvPair {
                    key: key.clone(),
                    result: Err(err),
                }),
            }
        }
        Ok(out)
    }

    /// [`Self::scan`] without copies: `visit` gets each key with its value and commit ts, or
    /// the lock error met on it, in key order, and returns false to stop.
    pub fn scan_visit(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        ts: Ts,
        bypass_locks: &[Ts],
        mut visit: impl FnMut(&[u8], Result<(Ts, &[u8])>) -> bool,
    ) -> Result<()> {
        self.check_read_ts(ts)?;
        let mut n = 0;
        for (key, e) in self.entries_in(start, end) {
            if limit != 0 && n >= limit {
                break;
            }
            let found = match blocking_lock(key, e, ts, bypass_locks) {
                Some(err) => Err(err),
                None => match e.committed_value_at(ts) {
                    Some(v) => Ok(v),
                    None => continue,
                },
            };
            n += 1;
            if !visit(key, found) {
                break;
            }
        }
        Ok(())
    }

    /// Forward scan of raw keys in `[start, end)` (`end` empty = unbounded) at `ts`, at most
    /// `limit` pairs (0 = no limit). Locked keys appear as pairs carrying the lock error.
    pub fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        ts: Ts,
        key_only: bool,
        bypass_locks: &[Ts],
    ) -> Result<Vec<KvPair>> {
        self.check_read_ts(ts)?;
        let mut out = Vec::new();
        for (key, e) in self.entries_in(start, end) {
            if limit != 0 && out.len() >= limit {
                break;
            }
            push_read(&mut out, key, e, ts, key_only, bypass_locks);
        }
        Ok(out)
    }

    /// [`Self::scan`] downwards: keys in `[start, end)` from the highest, at most `limit` of
    /// them (0: no limit), as TiKV's reverse scan seeks to the end and steps back.
    pub fn scan_rev(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        ts: Ts,
        key_only: bool,
        bypass_locks: &[Ts],
    ) -> Result<Vec<KvPair>> {
        self.check_read_ts(ts)?;
        let mut out = Vec::new();
        for (key, e) in self.entries_below(end) {
            if key < start || (limit != 0 && out.len() >= limit) {
                break;
            }
            push_read(&mut out, key, e, ts, key_only, bypass_locks);
        }
        Ok(out)
    }
}

/// Appends what a read of `key` at `ts` finds: its value (emptied when `key_only`), nothing
/// for a key without a visible version, or the lock it meets.
fn push_read(
    out: &mut Vec<KvPair>,
    key: &[u8],
    e: &KeyEntry,
    ts: Ts,
    key_only: bool,
    bypass_locks: &[Ts],
) {
    match read_entry(key, e, ts, bypass_locks) {
        Ok(Some(mut r)) => {
            if key_only {
                r.value.clear();
            }
            out.push(KvPair {
                key: key.to_vec(),
                result: Ok(r),
            })
        }
        Ok(None) => {}
        Err(err) => out.push(KvPair {
            key: key.to_vec(),
            result: Err(err),
        }),
    }
}

/// The error a read at `ts` meets on `key`: its Put/Delete lock, unless resolved or newer.
fn blocking_lock(key: &[u8], e: &KeyEntry, ts: Ts, bypass_locks: &[Ts]) -> Option<SimError> {
    let lock = e.lock()?;
    let blocks = matches!(lock.lock_type, LockType::Put | LockType::Delete)
        && lock.start_ts <= ts
        && lock.min_commit_ts <= ts
        && !bypass_locks.contains(&lock.start_ts);
    blocks.then(|| SimError::KeyIsLocked {
        key: key.to_vec(),
        lock: Box::new(lock.clone()),
    })
}

fn read_entry(key: &[u8], e: &KeyEntry, ts: Ts, bypass_locks: &[Ts]) -> Result<Option<ReadResult>> {
    if let Some(err) = blocking_lock(key, e, ts, bypass_locks) {
        return Err(err);
    }
    Ok(e.committed_value_at(ts).map(|(commit_ts, v)| ReadResult {
        value: v.to_vec(),
        commit_ts,
    }))
}

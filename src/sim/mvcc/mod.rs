//! An in-memory MVCC store with TiKV's three column families, over raw (TiDB) keys.
//!
//! ```text
//! default CF  (key, start_ts)  -> value           values longer than SHORT_VALUE_MAX_LEN
//! lock CF     key              -> Lock            at most one per key
//! write CF    (key, commit_ts) -> Write           Put / Delete / Lock / Rollback (Rollback: commit_ts = start_ts)
//! ```
//!
//! Every mutation is first computed as a [`WriteBatch`] of column-family puts and deletes against
//! the current state, then applied atomically; the batch is returned so that the CDC observer sees
//! exactly what was applied, as TiKV's CDC observes raft apply batches.
//!
//! Keys stay raw here; region bounds (encoded) are compared in [`super::region`].

mod read;
mod size;
mod txn;

pub use size::RangeSize;

pub use super::lock::{Lock, LockType};

use std::collections::BTreeMap;

use super::ts::Ts;

pub use read::{KvPair, ReadResult};
pub use txn::{Mutation, PrewriteRequest, PrewriteResult, SecondaryLocks, TxnStatus};

/// Values up to this many bytes live inline in the lock and write records (TiKV's limit).
pub const SHORT_VALUE_MAX_LEN: usize = 255;

/// Kind of a write-CF record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteType {
    /// Committed put.
    Put,
    /// Committed delete.
    Delete,
    /// Committed `Op::Lock`: no data change.
    Lock,
    /// Rollback record (protects against a late prewrite); stored at commit_ts = start_ts.
    Rollback,
}

/// A write-CF record (TiKV `txn_types::Write`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Record kind.
    pub write_type: WriteType,
    /// start_ts of the transaction that wrote it.
    pub start_ts: Ts,
    /// Inline value of a Put of at most [`SHORT_VALUE_MAX_LEN`] bytes.
    pub short_value: Option<Vec<u8>>,
    /// Another txn with start_ts == this commit_ts was rolled back here (its Rollback record
    /// would have collided with this one, so the flag replaces it).
    pub has_overlapped_rollback: bool,
    /// Source tag of the writing transaction.
    pub txn_source: u64,
}

/// One column-family operation of a [`WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Modify {
    /// default CF put at `(key, start_ts)`.
    PutDefault {
        /// Raw key.
        key: Vec<u8>,
        /// Transaction start ts.
        start_ts: Ts,
        /// The (long) value.
        value: Vec<u8>,
    },
    /// default CF delete.
    DeleteDefault {
        /// Raw key.
        key: Vec<u8>,
        /// Transaction start ts.
        start_ts: Ts,
    },
    /// lock CF put.
    PutLock {
        /// Raw key.
        key: Vec<u8>,
        /// The lock.
        lock: Lock,
    },
    /// lock CF delete.
    DeleteLock {
        /// Raw key.
        key: Vec<u8>,
    },
    /// write CF put at `(key, commit_ts)`.
    PutWrite {
        /// Raw key.
        key: Vec<u8>,
        /// Commit ts (= start_ts for Rollback records).
        commit_ts: Ts,
        /// The record.
        write: Write,
    },
    /// write CF delete (GC).
    DeleteWrite {
        /// Raw key.
        key: Vec<u8>,
        /// Commit ts of the dropped record.
        commit_ts: Ts,
    },
}

impl Modify {
    /// The raw key this operation touches.
    pub fn key(&self) -> &[u8] {
        match self {
            Modify::PutDefault { key, .. }
            | Modify::DeleteDefault { key, .. }
            | Modify::PutLock { key, .. }
            | Modify::DeleteLock { key }
            | Modify::PutWrite { key, .. }
            | Modify::DeleteWrite { key, .. } => key,
        }
    }
}

/// An atomically applied set of CF operations: what a raft apply batch carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// Operations in application order.
    pub modifies: Vec<Modify>,
    /// Written by a 1PC transaction (TiKV marks such raft writes with the ONE_PC flag).
    pub one_pc: bool,
}

impl WriteBatch {
    /// True when the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.modifies.is_empty()
    }
}

/// The write column family of one key: its records by commit ts, ascending. Most keys hold
/// one or a few versions, so a sorted vector (one allocation, read in place) serves them.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteCf(Vec<(Ts, Write)>);

impl WriteCf {
    fn find(&self, commit_ts: Ts) -> std::result::Result<usize, usize> {
        self.0.binary_search_by_key(&commit_ts, |(t, _)| *t)
    }
    /// Adds or replaces the record at `commit_ts`.
    pub(crate) fn insert(&mut self, commit_ts: Ts, write: Write) {
        match self.find(commit_ts) {
            Ok(i) => self.0[i].1 = write,
            Err(i) => self.0.insert(i, (commit_ts, write)),
        }
    }
    pub(crate) fn remove(&mut self, commit_ts: &Ts) {
        if let Ok(i) = self.find(*commit_ts) {
            self.0.remove(i);
        }
    }
    pub(crate) fn get(&self, commit_ts: &Ts) -> Option<&Write> {
        self.find(*commit_ts).ok().map(|i| &self.0[i].1)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Records with commit ts ≤ `ts`, oldest first.
    pub(crate) fn up_to(&self, ts: Ts) -> &[(Ts, Write)] {
        &self.0[..self.0.partition_point(|(t, _)| *t <= ts)]
    }
    /// Records with commit ts ≥ `ts`, oldest first.
    pub(crate) fn since(&self, ts: Ts) -> &[(Ts, Write)] {
        &self.0[self.0.partition_point(|(t, _)| *t < ts)..]
    }
    pub(crate) fn all(&self) -> &[(Ts, Write)] {
        &self.0
    }
}

/// All column families of one key.
#[derive(Debug, Clone, Default)]
pub struct KeyEntry {
    lock: Option<Lock>,
    /// commit_ts -> record.
    writes: WriteCf,
    /// start_ts -> long value.
    defaults: BTreeMap<Ts, Vec<u8>>,
}

impl KeyEntry {
    /// The key's lock, if any.
    pub fn lock(&self) -> Option<&Lock> {
        self.lock.as_ref()
    }
    /// Write records with commit_ts ≤ `ts`, newest first.
    pub fn writes_at_or_before(&self, ts: Ts) -> impl Iterator<Item = (Ts, &Write)> {
        self.writes.up_to(ts).iter().rev().map(|(t, w)| (*t, w))
    }
    /// All write records, newest first.
    pub fn writes_newest_first(&self) -> impl Iterator<Item = (Ts, &Write)> {
        self.writes.all().iter().rev().map(|(t, w)| (*t, w))
    }
    /// The value written by `start_ts`: the inline short value, else the default CF entry.
    pub fn value_of<'a>(
        &'a self,
        start_ts: Ts,
        short_value: Option<&'a Vec<u8>>,
    ) -> Option<&'a [u8]> {
        match short_value {
            Some(v) => Some(v.as_slice()),
            None => self.defaults.get(&start_ts).map(Vec::as_slice),
        }
    }
    /// The committed value visible at `ts` (skipping Lock and Rollback records); `None` when
    /// the newest data record is a Delete or there is none. This is also TiKV's old-value rule.
    pub fn committed_value_at(&self, ts: Ts) -> Option<(Ts, &[u8])> {
        for (commit_ts, w) in self.writes_at_or_before(ts) {
            match w.write_type {
                WriteType::Put => {
                    return self
                        .value_of(w.start_ts, w.short_value.as_ref())
                        .map(|v| (commit_ts, v))
                }
                WriteType::Delete => return None,
                WriteType::Lock | WriteType::Rollback => {}
            }
        }
        None
    }
    fn is_empty(&self) -> bool {
        self.lock.is_none() && self.writes.is_empty() && self.defaults.is_empty()
    }
}

/// The store: raw key -> column families, plus the concurrency manager's `max_ts`.
#[derive(Debug, Default)]
pub struct MvccStore {
    keys: BTreeMap<Vec<u8>, KeyEntry>,
    /// Largest ts any reader (or the CDC min-ts task) has used; async commit and 1PC commit
    /// above it so that no reader or resolved ts is invalidated.
    max_ts: Ts,
    /// Versions at or below this were garbage-collected; reads below it fail.
    gc_safe_point: Ts,
    /// Keys by the commit ts of each write record added since GC last looked at them. Only a
    /// new record can make older ones garbage (or be garbage itself, a Delete, Lock or
    /// Rollback), and only once the safe point reaches it, so a GC pass visits the keys
    /// queued at or below its safe point instead of every key of the store.
    gc_pending: BTreeMap<Ts, Vec<Vec<u8>>>,
}

impl MvccStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The concurrency manager's max ts.
    pub fn max_ts(&self) -> Ts {
        self.max_ts
    }

    /// Raises max_ts (readers and the CDC resolved-ts task call this); never lowers it.
    pub fn update_max_ts(&mut self, ts: Ts) {
        if ts != Ts::MAX && ts > self.max_ts {
            self.max_ts = ts;
        }
    }

    /// The safe point of the last [`MvccStore::gc`].
    pub fn gc_safe_point(&self) -> Ts {
        self.gc_safe_point
    }

    /// The column families of `key`.
    pub fn entry(&self, key: &[u8]) -> Option<&KeyEntry> {
        self.keys.get(key)
    }

    /// Keys from `start` (inclusive) in ascending raw order.
    pub fn entries_from<'a>(
        &'a self,
        start: &[u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a KeyEntry)> + 'a {
        self.keys
            .range::<[u8], _>((std::ops::Bound::Included(start), std::ops::Bound::Unbounded))
            .map(|(k, e)| (k.as_slice(), e))
    }

    /// Keys in `[start, end)` (`end` empty: no bound) in ascending raw order; the end is
    /// found once, not compared with every key.
    pub fn entries_in<'a>(
        &'a self,
        start: &[u8],
        end: &[u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a KeyEntry)> + 'a {
        use std::ops::Bound;
        let upper = if end.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(end)
        };
        // An empty range (start at or past the end) is no keys, not a panic.
        let empty = !end.is_empty() && start >= end;
        (!empty)
            .then(|| self.keys.range::<[u8], _>((Bound::Included(start), upper)))
            .into_iter()
            .flatten()
            .map(|(k, e)| (k.as_slice(), e))
    }

    /// Keys below `end` (exclusive; empty: no bound) in descending raw order.
    pub fn entries_below<'a>(
        &'a self,
        end: &[u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a KeyEntry)> + 'a {
        let upper = if end.is_empty() {
            std::ops::Bound::Unbounded
        } else {
            std::ops::Bound::Excluded(end)
        };
        self.keys
            .range::<[u8], _>((std::ops::Bound::Unbounded, upper))
            .rev()
            .map(|(k, e)| (k.as_slice(), e))
    }

    /// Every lock in the store (key order).
    pub fn locks(&self) -> impl Iterator<Item = (&[u8], &Lock)> {
        self.keys
            .iter()
            .filter_map(|(k, e)| e.lock.as_ref().map(|l| (k.as_slice(), l)))
    }

    /// Number of keys with any record.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Applies a batch computed against the current state.
    pub fn apply(&mut self, batch: &WriteBatch) {
        for m in &batch.modifies {
            match m {
                Modify::PutDefault {
                    key,
                    start_ts,
                    value,
                } => {
                    self.slot(key).defaults.insert(*start_ts, value.clone());
                }
                Modify::PutLock { key, lock } => self.slot(key).lock = Some(lock.clone()),
                Modify::PutWrite {
                    key,
                    commit_ts,
                    write,
                } => {
                    self.slot(key).writes.insert(*commit_ts, write.clone());
                    self.gc_pending
                        .entry(*commit_ts)
                        .or_default()
                        .push(key.clone());
                }
                Modify::DeleteDefault { key, start_ts } => self.update_existing(key, |e| {
                    e.defaults.remove(start_ts);
                }),
                Modify::DeleteLock { key } => self.update_existing(key, |e| e.lock = None),
                Modify::DeleteWrite { key, commit_ts } => self.update_existing(key, |e| {
                    e.writes.remove(commit_ts);
                }),
            }
        }
    }

    fn slot(&mut self, key: &[u8]) -> &mut KeyEntry {
        // Look up by borrowed key first: copying the key is only needed for a new entry.
        if !self.keys.contains_key(key) {
            self.keys.insert(key.to_vec(), KeyEntry::default());
        }
        self.keys.get_mut(key).expect("entry just ensured")
    }

    fn update_existing(&mut self, key: &[u8], f: impl FnOnce(&mut KeyEntry)) {
        let now_empty = match self.keys.get_mut(key) {
            Some(e) => {
                f(e);
                e.is_empty()
            }
            None => false,
        };
        if now_empty {
            self.keys.remove(key);
        }
    }

    /// Removes every key in `[start, end)` with all its column families (TiKV's
    /// `UnsafeDestroyRange`). Returns the number of keys removed.
    pub fn destroy_range(&mut self, start: &[u8], end: &[u8]) -> usize {
        use std::ops::Bound::{Excluded, Included};
        let doomed: Vec<Vec<u8>> = self
            .keys
            .range::<[u8], _>((Included(start), Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &doomed {
            self.keys.remove(k);
        }
        doomed.len()
    }

    /// Garbage collection at `safe_point`: for each key keep every version newer than the safe
    /// point and, among older ones, only the newest data version if it is a Put. Deletes,
    /// Lock and Rollback records at or below the safe point go, and so do the default-CF values
    /// of dropped Puts. Locks are untouched. Returns the applied batch (CDC ignores deletes).
    ///
    /// Visits only the keys with a write record added at or below the safe point since their
    /// last visit: the cost follows the writes, not the size of the store.
    pub fn gc(&mut self, safe_point: Ts) -> WriteBatch {
        let mut batch = WriteBatch::default();
        if safe_point <= self.gc_safe_point {
            return batch;
        }
        let due = match safe_point.0.checked_add(1) {
            Some(above) => {
                let later = self.gc_pending.split_off(&Ts(above));
                std::mem::replace(&mut self.gc_pending, later)
            }
            None => std::mem::take(&mut self.gc_pending),
        };
        let mut keys: Vec<Vec<u8>> = due.into_values().flatten().collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let Some(entry) = self.keys.get(&key) else {
                continue;
            };
            let mut kept_data = false;
            for (commit_ts, w) in entry.writes_at_or_before(safe_point) {
                let keep = !kept_data && w.write_type == WriteType::Put;
                if matches!(w.write_type, WriteType::Put | WriteType::Delete) {
                    kept_data = true;
                }
                if keep {
                    continue;
                }
                batch.modifies.push(Modify::DeleteWrite {
                    key: key.clone(),
                    commit_ts,
                });
                if w.write_type == WriteType::Put
                    && w.short_value.is_none()
                    && entry.defaults.contains_key(&w.start_ts)
                {
                    batch.modifies.push(Modify::DeleteDefault {
                        key: key.clone(),
                        start_ts: w.start_ts,
                    });
                }
            }
        }
        self.apply(&batch);
        self.gc_safe_point = safe_point;
        batch
    }
}

/// Splits a value into (short value, default-CF put) by TiKV's inline limit.
fn split_value(key: &[u8], start_ts: Ts, value: &[u8], batch: &mut WriteBatch) -> Option<Vec<u8>> {
    if value.len() <= SHORT_VALUE_MAX_LEN {
        Some(value.to_vec())
    } else {
        batch.modifies.push(Modify::PutDefault {
            key: key.to_vec(),
            start_ts,
            value: value.to_vec(),
        });
        None
    }
}

#[cfg(test)]
mod tests;

//! PREWRITE / COMMIT / ROLLBACK matching for one region subscription.
//!
//! TiKV sends a 2PC transaction as a PREWRITE per key (value and old value) and later a COMMIT per
//! key (commit_ts, no old value, usually no value). The matcher keeps prewrites by
//! `(start_ts, key)` until their COMMIT arrives and then emits one complete [`RawRow`]
//! (TiCDC `logpuller/txn_matcher.go`).
//!
//! # Before and after INITIALIZED
//!
//! During the incremental scan, realtime rows interleave with scan rows, so a realtime COMMIT can
//! arrive before the scan's PREWRITE of the same `(start_ts, key)`. Such commits, and
//! ROLLBACKs, are cached and replayed at INITIALIZED. A cached commit that still has no prewrite
//! then is dropped: its lock was already gone when the scan's snapshot was taken, so the scan
//! emitted the version as a COMMITTED row. After INITIALIZED every COMMIT must match.
//!
//! A stored prewrite with an empty value (a "fake" prewrite from a lock rewrite on old TiKV) or a
//! pipelined-DML generation > 0 does not match before INITIALIZED: a better prewrite may still
//! come from the scan.
//!
//! # Memory
//!
//! Every prewrite, cached commit and cached rollback held in memory is counted in
//! [`Matcher::pending_bytes`]: its key/value/old-value bytes plus the fixed size of its record.
//! Hash-table slack is not counted. Without a spill store, storing past
//! [`MatcherConfig::pending_bytes_limit`] fails with [`CaptureError::PendingBytesExceeded`];
//! nothing is stored then. With one ([`MatcherConfig::spill`], see [`super::spill`]), prewrites
//! never fail for size: when this matcher passes its limit or all matchers together pass the
//! shared budget, whole transactions move to disk, the largest first, and their later
//! prewrites follow them there. Cached commits and rollbacks stay in memory and bounded.

use std::collections::HashMap;
use std::mem::size_of;

use tibinlog_proto::cdcpb::event::{row::OpType, LogType, Row};

use super::error::{CaptureError, Result};
use super::spill::{self, Spill, SpillError};
use crate::model::{Op, RawRow, RegionId, Ts};

/// Default bound of one region's pending bytes: 512 MiB, TiKV's default `sink-memory-quota`.
/// A region holding more than that in unmatched prewrites is a transaction far larger than
/// anything the downstream can buffer either, unless it spills.
pub const DEFAULT_PENDING_BYTES_LIMIT: usize = 512 << 20;

/// Bytes written to the spill store per batch when a transaction moves there.
const SPILL_BATCH_BYTES: usize = 4 << 20;

/// Default shared memory budget of prewrites before they spill: 128 MiB for all regions.
pub const DEFAULT_PREWRITE_MEMORY_BYTES: usize = 128 << 20;

/// Limits of one matcher.
#[derive(Debug, Clone)]
pub struct MatcherConfig {
    /// Most bytes this matcher holds in memory: prewrites plus cached commits and rollbacks.
    pub pending_bytes_limit: usize,
    /// Where prewrites go past the limits; `None` keeps them in memory (and fails past
    /// `pending_bytes_limit`).
    pub spill: Option<Spill>,
}

impl Default for MatcherConfig {
    fn default() -> Self {
        Self {
            pending_bytes_limit: DEFAULT_PENDING_BYTES_LIMIT,
            spill: None,
        }
    }
}

/// A PREWRITE row: a lock written by a 2PC (or async-commit, or pipelined) transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prewrite {
    pub start_ts: Ts,
    pub key: Vec<u8>,
    /// The lock's op; the COMMIT's op is the one emitted, as TiCDC does.
    pub op: Op,
    /// New row image; empty for a delete (and for a "fake" prewrite on old TiKV).
    pub value: Vec<u8>,
    pub old_value: Vec<u8>,
    /// Pipelined-DML flush generation; the highest wins.
    pub generation: u64,
}

/// A COMMIT row: the write record of a 2PC transaction; value only if TiKV stored it inline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub start_ts: Ts,
    pub commit_ts: Ts,
    pub key: Vec<u8>,
    pub op: Op,
    /// Short value carried by the write record, usually empty; the prewrite's value wins.
    pub value: Vec<u8>,
}

/// A ROLLBACK row: the transaction `start_ts` will never commit `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    pub start_ts: Ts,
    pub key: Vec<u8>,
}

/// One `cdcpb.Event.Row`, typed by its `LogType`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowEntry {
    Prewrite(Prewrite),
    Commit(Commit),
    /// Scan output or a 1PC write: complete, needs no matching.
    Committed(RawRow),
    Rollback(Rollback),
    /// End of the incremental scan.
    Initialized,
}

impl RowEntry {
    /// Types a wire row. Unknown log types, and data rows without PUT/DELETE, are protocol
    /// violations ([`CaptureError::UnknownRow`]).
    pub fn from_cdcpb(row: Row, region: RegionId) -> Result<RowEntry> {
        let unknown = |row: &Row| CaptureError::UnknownRow {
            region,
            log_type: row.r#type,
            op_type: row.op_type,
        };
        let op = match OpType::try_from(row.op_type) {
            Ok(OpType::Put) => Some(Op::Put),
            Ok(OpType::Delete) => Some(Op::Delete),
            _ => None,
        };
        let start_ts = Ts(row.start_ts);
        let entry = match LogType::try_from(row.r#type) {
            Ok(LogType::Prewrite) => RowEntry::Prewrite(Prewrite {
                start_ts,
                op: op.ok_or_else(|| unknown(&row))?,
                key: row.key,
                value: row.value,
                old_value: row.old_value,
                generation: row.generation,
            }),
            Ok(LogType::Commit) => RowEntry::Commit(Commit {
                start_ts,
                commit_ts: Ts(row.commit_ts),
                op: op.ok_or_else(|| unknown(&row))?,
                key: row.key,
                value: row.value,
            }),
            Ok(LogType::Committed) => RowEntry::Committed(RawRow {
                op: op.ok_or_else(|| unknown(&row))?,
                key: row.key,
                value: row.value,
                old_value: row.old_value,
                start_ts,
                commit_ts: Ts(row.commit_ts),
                region_id: region,
            }),
            // ROLLBACK rows carry op UNKNOWN.
            Ok(LogType::Rollback) => RowEntry::Rollback(Rollback {
                start_ts,
                key: row.key,
            }),
            Ok(LogType::Initialized) => RowEntry::Initialized,
            Ok(LogType::Unknown) | Err(_) => return Err(unknown(&row)),
        };
        Ok(entry)
    }

    /// The raw key of a data row; `None` for INITIALIZED.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            RowEntry::Prewrite(p) => Some(&p.key),
            RowEntry::Commit(c) => Some(&c.key),
            RowEntry::Committed(r) => Some(&r.key),
            RowEntry::Rollback(r) => Some(&r.key),
            RowEntry::Initialized => None,
        }
    }
}

/// A stored prewrite; the key lives in the map.
#[derive(Debug)]
struct Pending {
    value: Vec<u8>,
    old_value: Vec<u8>,
    generation: u64,
}

/// Bytes charged for a prewrite of a key, value and old value of these lengths.
fn prewrite_charge(key: usize, value: usize, old_value: usize) -> usize {
    size_of::<Vec<u8>>() + size_of::<Pending>() + key + value + old_value
}

impl Pending {
    /// Bytes charged for a prewrite of `key`.
    fn charge(&self, key: &[u8]) -> usize {
        prewrite_charge(key.len(), self.value.len(), self.old_value.len())
    }
}

fn commit_charge(c: &Commit) -> usize {
    size_of::<Commit>() + c.key.len() + c.value.len()
}

fn rollback_charge(r: &Rollback) -> usize {
    size_of::<Rollback>() + r.key.len()
}

/// The in-memory prewrites of one transaction.
#[derive(Debug, Default)]
struct TxnPrewrites {
    rows: HashMap<Vec<u8>, Pending>,
    /// Sum of the rows' charges.
    bytes: usize,
}

/// Matches COMMITs with their PREWRITEs for one region subscription.
///
/// Invariants: `pending_bytes` equals the sum of the charges of everything stored in memory;
/// `prewrite_bytes` (the part charged to the shared budget) the sum of the in-memory
/// prewrites' charges; a transaction's prewrites are all in memory or all spilled (`spilled`
/// counts the spilled ones of each spilled transaction).
#[derive(Debug)]
pub struct Matcher {
    region: RegionId,
    config: MatcherConfig,
    initialized: bool,
    /// start_ts → raw key → prewrite. Nested so a lookup by `(start_ts, &[u8])` allocates nothing.
    pending: HashMap<Ts, TxnPrewrites>,
    pending_prewrites: usize,
    /// Commits seen before INITIALIZED that had no usable prewrite yet.
    cached_commits: Vec<Commit>,
    /// Rollbacks seen before INITIALIZED; applied after the scan's prewrites are in.
    cached_rollbacks: Vec<Rollback>,
    pending_bytes: usize,
    prewrite_bytes: usize,
    /// Transactions whose prewrites are in the spill store, with how many there are.
    spilled: HashMap<Ts, usize>,
    /// This matcher's key prefix in the spill store.
    owner: u64,
    /// Something was written to the spill store (so dropping must clean up).
    used_store: bool,
    key_buf: Vec<u8>,
    rec_buf: Vec<u8>,
}

impl Drop for Matcher {
    fn drop(&mut self) {
        let Some(spill) = &self.config.spill else {
            return;
        };
        spill.budget.sub(self.prewrite_bytes);
        if self.used_store {
            let (from, to) = spill::owner_range(self.owner);
            if let Err(e) = spill.store.delete_range(&from, &to) {
                tracing::warn!(region = self.region.0, error = %e, "cannot delete spilled prewrites");
            }
        }
    }
}

impl Matcher {
    /// An empty matcher of a region whose scan has not finished.
    pub fn new(region: RegionId, config: MatcherConfig) -> Matcher {
        Matcher {
            region,
            config,
            initialized: false,
            pending: HashMap::new(),
            pending_prewrites: 0,
            cached_commits: Vec::new(),
            cached_rollbacks: Vec::new(),
            pending_bytes: 0,
            prewrite_bytes: 0,
            spilled: HashMap::new(),
            owner: spill::next_owner(),
            used_store: false,
            key_buf: Vec::new(),
            rec_buf: Vec::new(),
        }
    }

    /// True once INITIALIZED was seen.
    pub fn is_initialized(&self) -> bool {
        self.initialized
    }
    /// Bytes held in memory by prewrites, cached commits and cached rollbacks.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }
    /// Number of prewrites waiting for their COMMIT or ROLLBACK, in memory or spilled.
    pub fn pending_prewrites(&self) -> usize {
        self.pending_prewrites
    }
    /// Number of prewrites waiting in the spill store.
    pub fn spilled_prewrites(&self) -> usize {
        self.spilled.values().sum()
    }
    /// Number of commits cached until INITIALIZED.
    pub fn cached_commits(&self) -> usize {
        self.cached_commits.len()
    }

    fn charge(&mut self, add: usize, release: usize) -> Result<()> {
        let used = self.pending_bytes - release + add;
        if add > release && used > self.config.pending_bytes_limit {
            return Err(CaptureError::PendingBytesExceeded {
                region: self.region,
                used,
                limit: self.config.pending_bytes_limit,
            });
        }
        self.pending_bytes = used;
        Ok(())
    }

    /// Moves `n` bytes of in-memory prewrites in (`add`) or out of the shared budget.
    fn budget(&mut self, add: usize, release: usize) {
        self.prewrite_bytes = self.prewrite_bytes + add - release;
        if let Some(s) = &self.config.spill {
            s.budget.add(add);
            s.budget.sub(release);
        }
    }

    fn spill_err(&self, e: SpillError) -> CaptureError {
        CaptureError::Spill {
            region: self.region,
            message: e.0,
        }
    }

    /// True if `add` more bytes of prewrites in memory would pass a limit while a spill store
    /// could take them instead.
    fn over(&self, add: usize) -> bool {
        match &self.config.spill {
            Some(s) => {
                s.budget.would_exceed(add)
                    || self.pending_bytes + add > self.config.pending_bytes_limit
            }
            None => false,
        }
    }

    /// Stores a PREWRITE. A known `(start_ts, key)` is replaced only by a prewrite with a value
    /// and a generation at least as high (an empty one is a lock rewrite; pipelined DML writes a
    /// key again with a higher generation).
    pub fn on_prewrite(&mut self, p: Prewrite) -> Result<()> {
        if self.spilled.contains_key(&p.start_ts) {
            return self.spilled_prewrite(p);
        }
        let add = prewrite_charge(p.key.len(), p.value.len(), p.old_value.len());
        let old = self
            .pending
            .get(&p.start_ts)
            .and_then(|txn| txn.rows.get(p.key.as_slice()));
        let release = match old {
            Some(old) if p.value.is_empty() || p.generation < old.generation => {
                return Ok(());
            }
            Some(old) => old.charge(&p.key),
            None => 0,
        };
        if add > release && self.over(add - release) {
            self.make_room(p.start_ts, add)?;
            if self.spilled.contains_key(&p.start_ts) {
                return self.spilled_prewrite(p);
            }
        }
        self.charge(add, release)?;
        self.budget(add, release);
        if release == 0 {
            self.pending_prewrites += 1;
        }
        let txn = self.pending.entry(p.start_ts).or_default();
        txn.bytes = txn.bytes + add - release;
        txn.rows.insert(
            p.key,
            Pending {
                value: p.value,
                old_value: p.old_value,
                generation: p.generation,
            },
        );
        Ok(())
    }

    /// Spills this matcher's largest transaction if it is larger than the incoming one
    /// (`incoming` with `add` more bytes), and the incoming one too if that was not enough.
    fn make_room(&mut self, incoming: Ts, add: usize) -> Result<()> {
        let incoming_bytes = self.pending.get(&incoming).map_or(0, |t| t.bytes) + add;
        let largest = self
            .pending
            .iter()
            .filter(|(ts, _)| **ts != incoming)
            .max_by_key(|(_, t)| t.bytes)
            .map(|(ts, t)| (*ts, t.bytes));
        if let Some((ts, bytes)) = largest {
            if bytes > incoming_bytes {
                self.spill_txn(ts)?;
                if !self.over(add) {
                    return Ok(());
                }
            }
        }
        self.spill_txn(incoming)
    }

    /// Moves the in-memory prewrites of `start_ts` to the spill store; its later prewrites go
    /// there too.
    fn spill_txn(&mut self, start_ts: Ts) -> Result<()> {
        let Some(spill) = self.config.spill.clone() else {
            return Ok(());
        };
        self.used_store = true;
        let (mut rows, mut bytes) = (0, 0);
        if let Some(txn) = self.pending.remove(&start_ts) {
            // Written in batches, each prewrite freed once encoded, so moving a transaction
            // to disk never holds it twice.
            let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let mut batch_bytes = 0;
            let mut left = txn.rows.len();
            for (key, p) in txn.rows {
                let charge = p.charge(&key);
                let (mut k, mut v) = (Vec::new(), Vec::new());
                spill::encode_key(&mut k, self.owner, start_ts, &key);
                spill::encode_record(&mut v, p.generation, &p.value, &p.old_value);
                drop((key, p));
                batch_bytes += k.len() + v.len();
                batch.push((k, v));
                left -= 1;
                if batch_bytes >= SPILL_BATCH_BYTES || left == 0 {
                    spill.store.put_all(&batch).map_err(|e| self.spill_err(e))?;
                    batch.clear();
                    batch_bytes = 0;
                }
                rows += 1;
                bytes += charge;
                self.pending_bytes -= charge;
                self.budget(0, charge);
            }
        }
        spill.budget.count_spilled(rows as u64, bytes as u64);
        self.spilled.insert(start_ts, rows);
        tracing::info!(
            region = self.region.0,
            start_ts = start_ts.0,
            rows,
            bytes,
            memory = spill.budget.used(),
            budget = spill.budget.limit(),
            "prewrites of a large transaction spill to disk"
        );
        Ok(())
    }

    /// Stores a prewrite of a spilled transaction, with the same replacement rule.
    fn spilled_prewrite(&mut self, p: Prewrite) -> Result<()> {
        let Some(spill) = self.config.spill.as_ref() else {
            return Ok(());
        };
        spill::encode_key(&mut self.key_buf, self.owner, p.start_ts, &p.key);
        let old = spill
            .store
            .get(&self.key_buf)
            .map_err(|e| self.spill_err(e))?;
        if let Some(old) = &old {
            let (generation, _) = spill::peek_record(old).map_err(|e| self.spill_err(e))?;
            if p.value.is_empty() || p.generation < generation {
                return Ok(());
            }
        }
        spill::encode_record(&mut self.rec_buf, p.generation, &p.value, &p.old_value);
        spill
            .store
            .put(&self.key_buf, &self.rec_buf)
            .map_err(|e| self.spill_err(e))?;
        if old.is_none() {
            self.pending_prewrites += 1;
            *self.spilled.entry(p.start_ts).or_default() += 1;
        }
        let bytes = prewrite_charge(p.key.len(), p.value.len(), p.old_value.len());
        spill.budget.count_spilled(1, bytes as u64);
        Ok(())
    }

    /// Removes and returns the prewrite of `(start_ts, key)` if it may match now.
    fn take_match(&mut self, start_ts: Ts, key: &[u8]) -> Result<Option<Pending>> {
        if self.spilled.contains_key(&start_ts) {
            return self.take_spilled(start_ts, key, true);
        }
        let Some(txn) = self.pending.get_mut(&start_ts) else {
            return Ok(None);
        };
        let usable = txn
            .rows
            .get(key)
            .is_some_and(|p| self.initialized || (!p.value.is_empty() && p.generation == 0));
        if !usable {
            return Ok(None);
        }
        let Some(p) = txn.rows.remove(key) else {
            return Ok(None);
        };
        let charge = p.charge(key);
        txn.bytes -= charge;
        if txn.rows.is_empty() {
            self.pending.remove(&start_ts);
        }
        self.pending_prewrites -= 1;
        self.pending_bytes -= charge;
        self.budget(0, charge);
        Ok(Some(p))
    }

    /// Removes and returns a spilled prewrite; with `for_commit`, only one that may match now.
    fn take_spilled(
        &mut self,
        start_ts: Ts,
        key: &[u8],
        for_commit: bool,
    ) -> Result<Option<Pending>> {
        let Some(spill) = self.config.spill.as_ref() else {
            return Ok(None);
        };
        spill::encode_key(&mut self.key_buf, self.owner, start_ts, key);
        let Some(rec) = spill
            .store
            .get(&self.key_buf)
            .map_err(|e| self.spill_err(e))?
        else {
            return Ok(None);
        };
        let (generation, value, old_value) =
            spill::decode_record(&rec).map_err(|e| self.spill_err(e))?;
        let usable = self.initialized || (!value.is_empty() && generation == 0);
        if for_commit && !usable {
            return Ok(None);
        }
        spill
            .store
            .delete(&self.key_buf)
            .map_err(|e| self.spill_err(e))?;
        self.pending_prewrites -= 1;
        if let Some(n) = self.spilled.get_mut(&start_ts) {
            *n -= 1;
            if *n == 0 {
                self.spilled.remove(&start_ts);
            }
        }
        Ok(Some(Pending {
            value,
            old_value,
            generation,
        }))
    }

    fn complete(&self, c: Commit, p: Pending) -> RawRow {
        RawRow {
            op: c.op,
            // The prewrite's value is authoritative; a COMMIT may carry the short value itself.
            value: if p.value.is_empty() { c.value } else { p.value },
            old_value: p.old_value,
            key: c.key,
            start_ts: c.start_ts,
            commit_ts: c.commit_ts,
            region_id: self.region,
        }
    }

    /// Matches a COMMIT. Before INITIALIZED an unmatched commit is cached and `None` returned;
    /// after it, a commit without prewrite is [`CaptureError::PrewriteNotMatch`].
    pub fn on_commit(&mut self, c: Commit) -> Result<Option<RawRow>> {
        if let Some(p) = self.take_match(c.start_ts, &c.key)? {
            return Ok(Some(self.complete(c, p)));
        }
        if self.initialized {
            return Err(CaptureError::PrewriteNotMatch {
                region: self.region,
                start_ts: c.start_ts,
                commit_ts: c.commit_ts,
                key: c.key,
            });
        }
        self.charge(commit_charge(&c), 0)?;
        self.cached_commits.push(c);
        Ok(None)
    }

    /// Applies a ROLLBACK: forgets the prewrite of `(start_ts, key)` if any. Before INITIALIZED
    /// it is cached, since the scan's PREWRITE for it may still come.
    pub fn on_rollback(&mut self, r: Rollback) -> Result<()> {
        if !self.initialized {
            self.charge(rollback_charge(&r), 0)?;
            self.cached_rollbacks.push(r);
            return Ok(());
        }
        self.rollback(&r)
    }

    fn rollback(&mut self, r: &Rollback) -> Result<()> {
        if self.spilled.contains_key(&r.start_ts) {
            self.take_spilled(r.start_ts, &r.key, false)?;
            return Ok(());
        }
        let Some(txn) = self.pending.get_mut(&r.start_ts) else {
            return Ok(());
        };
        let mut released = 0;
        if let Some(p) = txn.rows.remove(r.key.as_slice()) {
            released = p.charge(&r.key);
            txn.bytes -= released;
            self.pending_prewrites -= 1;
            self.pending_bytes -= released;
        }
        if txn.rows.is_empty() {
            self.pending.remove(&r.start_ts);
        }
        self.budget(0, released);
        Ok(())
    }

    /// The scan finished: replays cached commits (matched rows are appended to `out`, in arrival
    /// order), drops those still unmatched, then applies cached rollbacks. Returns how many
    /// cached commits were dropped.
    pub fn on_initialized(&mut self, out: &mut Vec<RawRow>) -> Result<usize> {
        self.initialized = true;
        let mut dropped = 0;
        for c in std::mem::take(&mut self.cached_commits) {
            self.pending_bytes -= commit_charge(&c);
            match self.take_match(c.start_ts, &c.key)? {
                Some(p) => out.push(self.complete(c, p)),
                None => {
                    tracing::debug!(
                        start_ts = c.start_ts.0,
                        commit_ts = c.commit_ts.0,
                        "cached commit without a prewrite dropped at INITIALIZED"
                    );
                    dropped += 1;
                }
            }
        }
        for r in std::mem::take(&mut self.cached_rollbacks) {
            self.pending_bytes -= rollback_charge(&r);
            self.rollback(&r)?;
        }
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests;

//! PREWRITE / COMMIT / ROLLBACK matching for one region subscription.
//!
//! TiKV sends a 2PC transaction as a PREWRITE per key (value and old value) and later a COMMIT per
//! key (commit_ts, no old value, usually no value). The matcher keeps prewrites by
//! `(start_ts, key)` until their COMMIT arrives and then emits one complete [`RawRow`]
//! (upstream-wire-facts §1.9; TiCDC `logpuller/txn_matcher.go`).
//!
//! # Before and after INITIALIZED
//!
//! During the incremental scan, realtime rows interleave with scan rows, so a realtime COMMIT can
//! arrive before the scan's PREWRITE of the same `(start_ts, key)` (§8.3). Such commits, and
//! ROLLBACKs, are cached and replayed at INITIALIZED. A cached commit that still has no prewrite
//! then is dropped: its lock was already gone when the scan's snapshot was taken, so the scan
//! emitted the version as a COMMITTED row (§8.4). After INITIALIZED every COMMIT must match.
//!
//! A stored prewrite with an empty value (a "fake" prewrite from a lock rewrite on old TiKV) or a
//! pipelined-DML generation > 0 does not match before INITIALIZED: a better prewrite may still
//! come from the scan.
//!
//! # Memory
//!
//! Every stored prewrite, cached commit and cached rollback is counted in
//! [`Matcher::pending_bytes`]: its key/value/old-value bytes plus the fixed size of its record.
//! Hash-table slack is not counted. Storing past [`MatcherConfig::pending_bytes_limit`] fails
//! with [`CaptureError::PendingBytesExceeded`]; nothing is stored then.

use std::collections::HashMap;
use std::mem::size_of;

use tibinlog_proto::cdcpb::event::{row::OpType, LogType, Row};

use super::error::{CaptureError, Result};
use crate::model::{Op, RawRow, RegionId, Ts};

/// Default bound of one region's pending bytes: 512 MiB, TiKV's default `sink-memory-quota`.
/// A region holding more than that in unmatched prewrites is a transaction far larger than
/// anything the downstream can buffer either.
pub const DEFAULT_PENDING_BYTES_LIMIT: usize = 512 << 20;

/// Limits of one matcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatcherConfig {
    /// Most bytes of pending prewrites plus cached commits and rollbacks.
    pub pending_bytes_limit: usize,
}

impl Default for MatcherConfig {
    fn default() -> Self {
        Self {
            pending_bytes_limit: DEFAULT_PENDING_BYTES_LIMIT,
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

impl Pending {
    /// Bytes charged for a prewrite of `key`.
    fn charge(&self, key: &[u8]) -> usize {
        size_of::<Vec<u8>>()
            + size_of::<Pending>()
            + key.len()
            + self.value.len()
            + self.old_value.len()
    }
}

fn commit_charge(c: &Commit) -> usize {
    size_of::<Commit>() + c.key.len() + c.value.len()
}

fn rollback_charge(r: &Rollback) -> usize {
    size_of::<Rollback>() + r.key.len()
}

/// Matches COMMITs with their PREWRITEs for one region subscription.
///
/// Invariant: `pending_bytes` equals the sum of the charges of everything stored.
#[derive(Debug)]
pub struct Matcher {
    region: RegionId,
    config: MatcherConfig,
    initialized: bool,
    /// start_ts → raw key → prewrite. Nested so a lookup by `(start_ts, &[u8])` allocates nothing.
    pending: HashMap<Ts, HashMap<Vec<u8>, Pending>>,
    pending_prewrites: usize,
    /// Commits seen before INITIALIZED that had no usable prewrite yet.
    cached_commits: Vec<Commit>,
    /// Rollbacks seen before INITIALIZED; applied after the scan's prewrites are in.
    cached_rollbacks: Vec<Rollback>,
    pending_bytes: usize,
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
        }
    }

    /// True once INITIALIZED was seen.
    pub fn is_initialized(&self) -> bool {
        self.initialized
    }
    /// Bytes held by stored prewrites, cached commits and cached rollbacks.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }
    /// Number of prewrites waiting for their COMMIT or ROLLBACK.
    pub fn pending_prewrites(&self) -> usize {
        self.pending_prewrites
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

    /// Stores a PREWRITE. A known `(start_ts, key)` is replaced only by a prewrite with a value
    /// and a generation at least as high (§8.5, §1.7.3).
    pub fn on_prewrite(&mut self, p: Prewrite) -> Result<()> {
        let entry = Pending {
            value: p.value,
            old_value: p.old_value,
            generation: p.generation,
        };
        let add = entry.charge(&p.key);
        let old = self
            .pending
            .get(&p.start_ts)
            .and_then(|txn| txn.get(p.key.as_slice()));
        let release = match old {
            Some(old) if entry.value.is_empty() || entry.generation < old.generation => {
                return Ok(());
            }
            Some(old) => old.charge(&p.key),
            None => 0,
        };
        self.charge(add, release)?;
        if release == 0 {
            self.pending_prewrites += 1;
        }
        self.pending
            .entry(p.start_ts)
            .or_default()
            .insert(p.key, entry);
        Ok(())
    }

    /// Removes and returns the prewrite of `(start_ts, key)` if it may match now.
    fn take_match(&mut self, start_ts: Ts, key: &[u8]) -> Option<Pending> {
        let txn = self.pending.get_mut(&start_ts)?;
        let usable = txn
            .get(key)
            .is_some_and(|p| self.initialized || (!p.value.is_empty() && p.generation == 0));
        if !usable {
            return None;
        }
        let p = txn.remove(key)?;
        if txn.is_empty() {
            self.pending.remove(&start_ts);
        }
        self.pending_prewrites -= 1;
        self.pending_bytes -= p.charge(key);
        Some(p)
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
        if let Some(p) = self.take_match(c.start_ts, &c.key) {
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
        self.rollback(&r);
        Ok(())
    }

    fn rollback(&mut self, r: &Rollback) {
        let Some(txn) = self.pending.get_mut(&r.start_ts) else {
            return;
        };
        if let Some(p) = txn.remove(r.key.as_slice()) {
            self.pending_prewrites -= 1;
            self.pending_bytes -= p.charge(&r.key);
        }
        if txn.is_empty() {
            self.pending.remove(&r.start_ts);
        }
    }

    /// The scan finished: replays cached commits (matched rows are appended to `out`, in arrival
    /// order), drops those still unmatched, then applies cached rollbacks. Returns how many
    /// cached commits were dropped.
    pub fn on_initialized(&mut self, out: &mut Vec<RawRow>) -> usize {
        self.initialized = true;
        let mut dropped = 0;
        for c in std::mem::take(&mut self.cached_commits) {
            self.pending_bytes -= commit_charge(&c);
            match self.take_match(c.start_ts, &c.key) {
                Some(p) => out.push(self.complete(c, p)),
                None => dropped += 1,
            }
        }
        for r in std::mem::take(&mut self.cached_rollbacks) {
            self.pending_bytes -= rollback_charge(&r);
            self.rollback(&r);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// One step of a matcher script; the expectation is what the step emits.
    #[derive(Debug, Clone)]
    enum Step {
        /// Prewrite(start_ts, key, value, generation)
        Prewrite(u64, &'static str, &'static str, u64),
        /// Delete prewrite(start_ts, key, old value)
        PrewriteDel(u64, &'static str, &'static str),
        /// Commit(start_ts, commit_ts, key) -> expected (value, old_value) or None if cached
        Commit(u64, u64, &'static str, Option<(&'static str, &'static str)>),
        /// A commit after INITIALIZED that has no prewrite: an error.
        CommitFails(u64, u64, &'static str),
        Rollback(u64, &'static str),
        /// INITIALIZED -> expected replayed (start_ts, commit_ts, key, value), dropped count
        Initialized(Vec<(u64, u64, &'static str, &'static str)>, usize),
        /// Pending prewrites expected now.
        Pending(usize),
    }
    use Step::{Commit, CommitFails, Initialized, Pending, Prewrite, PrewriteDel, Rollback};

    fn put(start_ts: u64, key: &str, value: &str, generation: u64) -> super::Prewrite {
        super::Prewrite {
            start_ts: Ts(start_ts),
            key: key.as_bytes().to_vec(),
            op: Op::Put,
            value: value.as_bytes().to_vec(),
            old_value: format!("old-{key}").into_bytes(),
            generation,
        }
    }

    fn commit(start_ts: u64, commit_ts: u64, key: &str) -> super::Commit {
        super::Commit {
            start_ts: Ts(start_ts),
            commit_ts: Ts(commit_ts),
            key: key.as_bytes().to_vec(),
            op: Op::Put,
            value: Vec::new(),
        }
    }

    fn run(name: &str, script: Vec<Step>) {
        let mut m = Matcher::new(RegionId(1), MatcherConfig::default());
        for (i, step) in script.into_iter().enumerate() {
            let ctx = format!("{name} step {i}: {step:?}");
            match step {
                Prewrite(s, k, v, g) => m.on_prewrite(put(s, k, v, g)).expect(&ctx),
                PrewriteDel(s, k, old) => {
                    let mut p = put(s, k, "", 0);
                    p.op = Op::Delete;
                    p.old_value = old.as_bytes().to_vec();
                    m.on_prewrite(p).expect(&ctx)
                }
                Commit(s, c, k, want) => {
                    let got = m.on_commit(commit(s, c, k)).expect(&ctx);
                    let got = got.map(|r| (r.value, r.old_value));
                    let want = want.map(|(v, o)| (v.as_bytes().to_vec(), o.as_bytes().to_vec()));
                    assert_eq!(got, want, "{ctx}");
                }
                CommitFails(s, c, k) => {
                    let err = m.on_commit(commit(s, c, k)).expect_err(&ctx);
                    assert!(
                        matches!(err, CaptureError::PrewriteNotMatch { .. }),
                        "{ctx}"
                    );
                    assert!(!err.is_retryable(), "{ctx}");
                }
                Rollback(s, k) => m
                    .on_rollback(super::Rollback {
                        start_ts: Ts(s),
                        key: k.as_bytes().to_vec(),
                    })
                    .expect(&ctx),
                Initialized(want, want_dropped) => {
                    let mut out = Vec::new();
                    let dropped = m.on_initialized(&mut out);
                    let got: Vec<_> = out
                        .iter()
                        .map(|r| (r.start_ts.0, r.commit_ts.0, r.key.clone(), r.value.clone()))
                        .collect();
                    let want: Vec<_> = want
                        .iter()
                        .map(|(s, c, k, v)| (*s, *c, k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                        .collect();
                    assert_eq!(got, want, "{ctx}");
                    assert_eq!(dropped, want_dropped, "{ctx}");
                    assert_eq!(m.cached_commits(), 0, "{ctx}");
                }
                Pending(n) => assert_eq!(m.pending_prewrites(), n, "{ctx}"),
            }
        }
    }

    #[test]
    #[rustfmt::skip]
    fn scripts() {
        let cases: Vec<(&str, Vec<Step>)> = vec![
            ("prewrite then commit", vec![
                Prewrite(10, "a", "v", 0), Initialized(vec![], 0),
                Commit(10, 15, "a", Some(("v", "old-a"))), Pending(0)]),
            ("§8.3 commit before the scan's prewrite is cached and matched at INITIALIZED", vec![
                Commit(10, 15, "a", None), Prewrite(10, "a", "v", 0), Pending(1),
                Initialized(vec![(10, 15, "a", "v")], 0), Pending(0)]),
            ("§8.4 cached commit still unmatched at INITIALIZED is dropped", vec![
                Commit(10, 15, "a", None), Commit(11, 16, "b", None), Prewrite(11, "b", "w", 0),
                Initialized(vec![(11, 16, "b", "w")], 1)]),
            ("§8.3 commit without prewrite after INITIALIZED is a violation", vec![
                Initialized(vec![], 0), CommitFails(10, 15, "a")]),
            ("§8.5 empty prewrite does not overwrite", vec![
                Prewrite(10, "a", "v", 0), Prewrite(10, "a", "", 0),
                Commit(10, 15, "a", Some(("v", "old-a")))]),
            ("a fake (empty) prewrite alone does not match before INITIALIZED", vec![
                Prewrite(10, "a", "", 0), Commit(10, 15, "a", None), Prewrite(10, "a", "v", 0),
                Initialized(vec![(10, 15, "a", "v")], 0)]),
            ("a delete prewrite has no value and matches after INITIALIZED", vec![
                PrewriteDel(10, "a", "gone"), Commit(10, 15, "a", None),
                Initialized(vec![(10, 15, "a", "")], 0)]),
            ("delete prewrite matches directly after INITIALIZED", vec![
                Initialized(vec![], 0), PrewriteDel(10, "a", "gone"),
                Commit(10, 15, "a", Some(("", "gone")))]),
            ("§8.7 same commit_ts in two txns: matched by start_ts", vec![
                Initialized(vec![], 0), Prewrite(10, "a", "x", 0), Prewrite(11, "a", "y", 0),
                Commit(11, 20, "a", Some(("y", "old-a"))), Commit(10, 20, "a", Some(("x", "old-a"))),
                Pending(0)]),
            ("rollback forgets the prewrite", vec![
                Initialized(vec![], 0), Prewrite(10, "a", "v", 0), Rollback(10, "a"), Pending(0),
                CommitFails(10, 15, "a")]),
            ("rollback before INITIALIZED applies after the scan's prewrite", vec![
                Rollback(10, "a"), Prewrite(10, "a", "v", 0), Pending(1),
                Initialized(vec![], 0), Pending(0)]),
            ("rollback of an unknown key is harmless", vec![
                Initialized(vec![], 0), Rollback(9, "z"), Pending(0)]),
            ("§1.7.3 pipelined DML keeps the highest generation", vec![
                Prewrite(10, "a", "g1", 1), Prewrite(10, "a", "g3", 3), Prewrite(10, "a", "g2", 2),
                Initialized(vec![], 0), Commit(10, 15, "a", Some(("g3", "old-a")))]),
            ("pipelined prewrite does not match before INITIALIZED", vec![
                Prewrite(10, "a", "g1", 1), Commit(10, 15, "a", None), Prewrite(10, "a", "g2", 2),
                Initialized(vec![(10, 15, "a", "g2")], 0)]),
            ("duplicate prewrite with a value replaces (lock rewrite)", vec![
                Prewrite(10, "a", "v", 0), Prewrite(10, "a", "v", 0), Pending(1),
                Commit(10, 15, "a", Some(("v", "old-a"))), Pending(0)]),
        ];
        for (name, script) in cases {
            run(name, script);
        }
    }

    #[test]
    fn commit_short_value_used_when_prewrite_has_none() {
        let mut m = Matcher::new(RegionId(1), MatcherConfig::default());
        m.on_initialized(&mut Vec::new());
        m.on_prewrite(put(10, "a", "", 0)).expect("prewrite");
        let mut c = commit(10, 15, "a");
        c.value = b"short".to_vec();
        let row = m.on_commit(c).expect("commit").expect("matched");
        assert_eq!(row.value, b"short");
        assert_eq!(row.region_id, RegionId(1));
    }

    #[test]
    fn pending_bytes_are_accounted_and_bounded() {
        let one = super::Pending {
            value: b"v".to_vec(),
            old_value: b"old-a".to_vec(),
            generation: 0,
        }
        .charge(b"a");
        let limit = 2 * one;
        let mut m = Matcher::new(
            RegionId(3),
            MatcherConfig {
                pending_bytes_limit: limit,
            },
        );
        m.on_prewrite(put(10, "a", "v", 0)).expect("first");
        assert_eq!(m.pending_bytes(), one);
        m.on_prewrite(put(11, "a", "v", 0)).expect("second");
        assert_eq!(m.pending_bytes(), limit);
        let err = m
            .on_prewrite(put(12, "a", "v", 0))
            .expect_err("over the limit");
        assert!(matches!(
            err,
            CaptureError::PendingBytesExceeded { used, limit: l, .. } if used == 3 * one && l == limit
        ));
        assert!(!err.is_retryable());
        assert_eq!(m.pending_prewrites(), 2, "nothing stored on failure");
        // Replacing an entry with one of equal size is always allowed.
        m.on_prewrite(put(11, "a", "w", 0)).expect("replace");
        m.on_initialized(&mut Vec::new());
        m.on_commit(commit(10, 20, "a")).expect("commit");
        m.on_rollback(super::Rollback {
            start_ts: Ts(11),
            key: b"a".to_vec(),
        })
        .expect("rollback");
        assert_eq!(m.pending_bytes(), 0);
    }

    #[test]
    fn wire_rows_are_typed() {
        let row = |t: LogType, op: OpType| Row {
            start_ts: 1,
            commit_ts: 2,
            r#type: t as i32,
            op_type: op as i32,
            key: b"k".to_vec(),
            ..Default::default()
        };
        let r = RegionId(9);
        assert!(matches!(
            RowEntry::from_cdcpb(row(LogType::Rollback, OpType::Unknown), r),
            Ok(RowEntry::Rollback(_))
        ));
        assert_eq!(
            RowEntry::from_cdcpb(row(LogType::Initialized, OpType::Unknown), r).ok(),
            Some(RowEntry::Initialized)
        );
        match RowEntry::from_cdcpb(row(LogType::Committed, OpType::Delete), r) {
            Ok(RowEntry::Committed(raw)) => {
                assert_eq!(
                    (raw.op, raw.commit_ts, raw.region_id),
                    (Op::Delete, Ts(2), r)
                )
            }
            other => panic!("unexpected {other:?}"),
        }
        for bad in [
            row(LogType::Prewrite, OpType::Unknown),
            row(LogType::Commit, OpType::Unknown),
            row(LogType::Unknown, OpType::Put),
            Row {
                r#type: 42,
                ..row(LogType::Commit, OpType::Put)
            },
        ] {
            assert!(matches!(
                RowEntry::from_cdcpb(bad, r),
                Err(CaptureError::UnknownRow { .. })
            ));
        }
    }

    /// A transaction of the random model: keys it writes and whether it commits.
    #[derive(Debug, Clone)]
    struct Txn {
        start_ts: u64,
        keys: Vec<u8>,
        commit: bool,
    }

    /// Builds, per txn, the ordered list of its rows, then interleaves them by `picks`.
    fn interleave(txns: &[Txn], picks: &[usize]) -> Vec<RowEntry> {
        let mut queues: Vec<Vec<RowEntry>> = txns
            .iter()
            .map(|t| {
                let key = |k: &u8| vec![b'k', *k];
                let mut q: Vec<RowEntry> = t
                    .keys
                    .iter()
                    .map(|k| {
                        RowEntry::Prewrite(super::Prewrite {
                            start_ts: Ts(t.start_ts),
                            key: key(k),
                            op: Op::Put,
                            value: format!("v{}-{k}", t.start_ts).into_bytes(),
                            old_value: Vec::new(),
                            generation: 0,
                        })
                    })
                    .collect();
                for k in &t.keys {
                    q.push(if t.commit {
                        RowEntry::Commit(super::Commit {
                            start_ts: Ts(t.start_ts),
                            // Shared commit_ts on purpose: identity is start_ts.
                            commit_ts: Ts(1000),
                            key: key(k),
                            op: Op::Put,
                            value: Vec::new(),
                        })
                    } else {
                        RowEntry::Rollback(super::Rollback {
                            start_ts: Ts(t.start_ts),
                            key: key(k),
                        })
                    });
                }
                q.reverse();
                q
            })
            .collect();
        let mut out = Vec::new();
        let mut i = 0;
        while queues.iter().any(|q| !q.is_empty()) {
            let live: Vec<usize> = (0..queues.len())
                .filter(|&j| !queues[j].is_empty())
                .collect();
            let pick = live[picks.get(i).copied().unwrap_or(0) % live.len()];
            i += 1;
            if let Some(e) = queues[pick].pop() {
                out.push(e);
            }
        }
        out
    }

    fn txns() -> impl Strategy<Value = Vec<Txn>> {
        prop::collection::vec(
            (prop::collection::btree_set(0u8..6, 1..4), any::<bool>()),
            1..6,
        )
        .prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (keys, commit))| Txn {
                    start_ts: 10 + i as u64,
                    keys: keys.into_iter().collect(),
                    commit,
                })
                .collect()
        })
    }

    proptest! {
        /// Fed any interleaving (per txn: prewrites before its commits/rollbacks), the matcher
        /// emits every committed (start_ts, key) exactly once with its prewrite's value, nothing
        /// for rolled-back ones, and ends holding nothing.
        #[test]
        fn agrees_with_model(
            txns in txns(),
            picks in prop::collection::vec(0usize..8, 0..64),
        ) {
            let mut m = Matcher::new(RegionId(1), MatcherConfig::default());
            m.on_initialized(&mut Vec::new());
            let mut got: BTreeMap<(u64, Vec<u8>), Vec<u8>> = BTreeMap::new();
            for e in interleave(&txns, &picks) {
                match e {
                    RowEntry::Prewrite(p) => m.on_prewrite(p).expect("prewrite"),
                    RowEntry::Commit(c) => {
                        let row = m.on_commit(c).expect("commit matches").expect("emitted");
                        let dup = got.insert((row.start_ts.0, row.key), row.value);
                        prop_assert!(dup.is_none(), "emitted twice");
                    }
                    RowEntry::Rollback(r) => m.on_rollback(r).expect("rollback"),
                    _ => unreachable!(),
                }
            }
            let want: BTreeMap<(u64, Vec<u8>), Vec<u8>> = txns
                .iter()
                .filter(|t| t.commit)
                .flat_map(|t| t.keys.iter().map(move |k| {
                    ((t.start_ts, vec![b'k', *k]), format!("v{}-{k}", t.start_ts).into_bytes())
                }))
                .collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(m.pending_prewrites(), 0);
            prop_assert_eq!(m.pending_bytes(), 0);
        }

        /// During the scan, the scan's prewrites may come after realtime commits and rollbacks;
        /// after INITIALIZED everything committed has been emitted exactly once.
        #[test]
        fn scan_interleaving_agrees_with_model(
            txns in txns(),
            picks in prop::collection::vec(0usize..8, 0..64),
            late_prewrites in prop::collection::vec(any::<bool>(), 0..32),
        ) {
            let mut m = Matcher::new(RegionId(1), MatcherConfig::default());
            let mut rows = Vec::new();
            let mut late = Vec::new();
            // Some prewrites are delayed until just before INITIALIZED, as a slow scan would.
            for (i, e) in interleave(&txns, &picks).into_iter().enumerate() {
                match e {
                    RowEntry::Prewrite(p) if late_prewrites.get(i).copied().unwrap_or(false) => {
                        late.push(p)
                    }
                    RowEntry::Prewrite(p) => m.on_prewrite(p).expect("prewrite"),
                    RowEntry::Commit(c) => rows.extend(m.on_commit(c).expect("commit")),
                    RowEntry::Rollback(r) => m.on_rollback(r).expect("rollback"),
                    _ => unreachable!(),
                }
            }
            for p in late {
                m.on_prewrite(p).expect("late prewrite");
            }
            prop_assert_eq!(m.on_initialized(&mut rows), 0);
            let got: BTreeSet<(u64, Vec<u8>, Vec<u8>)> =
                rows.iter().map(|r| (r.start_ts.0, r.key.clone(), r.value.clone())).collect();
            prop_assert_eq!(got.len(), rows.len(), "emitted twice");
            let want: BTreeSet<(u64, Vec<u8>, Vec<u8>)> = txns
                .iter()
                .filter(|t| t.commit)
                .flat_map(|t| t.keys.iter().map(move |k| {
                    (t.start_ts, vec![b'k', *k], format!("v{}-{k}", t.start_ts).into_bytes())
                }))
                .collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(m.pending_prewrites(), 0);
            prop_assert_eq!(m.pending_bytes(), 0);
        }
    }
}

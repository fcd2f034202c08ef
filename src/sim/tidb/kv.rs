//! A TiDB-side optimistic transaction over the core: a sorted write buffer, snapshot reads at
//! `start_ts` that see the buffer first, and the client-go commit protocols.
//!
//! Commit follows client-go's choice: 1PC when asked for and every key lives in one region
//! (otherwise it falls back), async commit when asked for (or falling back from 1PC) and the
//! transaction has at most [`ASYNC_COMMIT_KEYS_LIMIT`] keys of at most
//! [`ASYNC_COMMIT_KEY_SIZE_LIMIT`] bytes in total, else 2PC. The primary key is the smallest key
//! (client-go takes the first mutation after sorting). 2PC and async commit commit the primary
//! first, then the secondaries.

use std::collections::BTreeMap;

use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::mvcc::{Mutation, PrewriteRequest};
use crate::sim::region::encode_key;
use crate::sim::Ts;

use super::error::Result;

/// client-go `async-commit.keys-limit` default.
pub const ASYNC_COMMIT_KEYS_LIMIT: usize = 256;
/// client-go `async-commit.total-key-size-limit` default.
pub const ASYNC_COMMIT_KEY_SIZE_LIMIT: usize = 4096;
/// Default lock TTL (client-go `ManagedLockTTL` is 20 s; plain prewrites start at 3 s).
const BASE_LOCK_TTL_MS: u64 = 3000;

/// How a transaction asks to be committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitMode {
    /// Prewrite, then commit with a commit_ts from the TSO.
    TwoPc,
    /// Async commit (falls back to 2PC for large transactions).
    AsyncCommit,
    /// One-phase commit (falls back to async commit, then 2PC).
    OnePc,
}

impl CommitMode {
    /// Lower-case name (`2pc`, `async`, `1pc`).
    pub fn name(self) -> &'static str {
        match self {
            CommitMode::TwoPc => "2pc",
            CommitMode::AsyncCommit => "async",
            CommitMode::OnePc => "1pc",
        }
    }
}

/// The result of a commit.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Committed {
    pub start_ts: Ts,
    /// Commit ts (equal to... nothing: zero only for a read-only transaction).
    pub commit_ts: Ts,
    /// The protocol actually used (`None` when the transaction wrote nothing).
    pub mode: Option<CommitMode>,
    /// Everything the CDC endpoints emitted while committing, in order.
    pub outputs: Vec<StoreOutput>,
    /// Number of keys written.
    pub keys: usize,
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>),
    /// Put that presumes the key does not exist (prewrite fails with `AlreadyExist` otherwise).
    Insert(Vec<u8>),
    Delete,
}

/// Buffered writes of one transaction.
#[derive(Debug)]
pub struct KvTxn {
    start_ts: Ts,
    buf: BTreeMap<Vec<u8>, Op>,
    txn_source: u64,
}

impl KvTxn {
    /// A transaction reading at `start_ts`.
    pub fn new(start_ts: Ts) -> Self {
        KvTxn {
            start_ts,
            buf: BTreeMap::new(),
            txn_source: 0,
        }
    }

    /// Tags every write with a `txn_source` (e.g. a lossy DDL backfill).
    pub fn set_txn_source(&mut self, source: u64) {
        self.txn_source = source;
    }

    /// The snapshot ts.
    pub fn start_ts(&self) -> Ts {
        self.start_ts
    }

    /// Number of buffered keys.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Reads `key`: the buffer first, then the snapshot at `start_ts`.
    pub fn get(&self, core: &mut SimCore, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.buf.get(key) {
            Some(Op::Put(v) | Op::Insert(v)) => Ok(Some(v.clone())),
            Some(Op::Delete) => Ok(None),
            None => Ok(core.mvcc.get(key, self.start_ts, &[])?.map(|r| r.value)),
        }
    }

    /// Writes `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        match self.buf.get_mut(&key) {
            Some(Op::Insert(v)) => *v = value,
            Some(op) => *op = Op::Put(value),
            None => {
                self.buf.insert(key, Op::Put(value));
            }
        }
    }

    /// Writes `value` to a key presumed absent.
    pub fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        match self.buf.get_mut(&key) {
            // deleted earlier in this txn: the key may exist in the snapshot
            Some(op @ Op::Delete) => *op = Op::Put(value),
            Some(op) => *op = Op::Insert(value),
            None => {
                self.buf.insert(key, Op::Insert(value));
            }
        }
    }

    /// Deletes `key`. Deleting a key this transaction inserted cancels the insert.
    pub fn delete(&mut self, key: Vec<u8>) {
        match self.buf.get(&key) {
            Some(Op::Insert(_)) => {
                self.buf.remove(&key);
            }
            _ => {
                self.buf.insert(key, Op::Delete);
            }
        }
    }

    fn single_region(&self, core: &SimCore) -> bool {
        let (Some((first, _)), Some((last, _))) =
            (self.buf.first_key_value(), self.buf.last_key_value())
        else {
            return true;
        };
        let Some(r) = core.cluster.region_by_key(&encode_key(first)) else {
            return false;
        };
        r.contains_encoded(&encode_key(last))
    }

    /// Commits with `mode` (or the fallback it allows). On error the prewritten locks are
    /// rolled back and nothing stays.
    pub fn commit(self, core: &mut SimCore, mode: CommitMode) -> Result<Committed> {
        let mut done = Committed {
            start_ts: self.start_ts,
            keys: self.buf.len(),
            ..Committed::default()
        };
        if self.buf.is_empty() {
            return Ok(done);
        }
        let key_bytes: usize = self.buf.keys().map(Vec::len).sum();
        let one_pc = mode == CommitMode::OnePc && self.single_region(core);
        let async_commit = !one_pc
            && mode != CommitMode::TwoPc
            && self.buf.len() <= ASYNC_COMMIT_KEYS_LIMIT
            && key_bytes <= ASYNC_COMMIT_KEY_SIZE_LIMIT;
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(self.buf.len());
        let mut mutations = Vec::with_capacity(self.buf.len());
        for (k, op) in self.buf {
            keys.push(k.clone());
            mutations.push(match op {
                Op::Put(v) => Mutation::Put(k, v),
                Op::Insert(v) => Mutation::Insert(k, v),
                Op::Delete => Mutation::Delete(k),
            });
        }
        let primary = keys[0].clone();
        let req = PrewriteRequest {
            mutations,
            primary: primary.clone(),
            start_ts: self.start_ts,
            lock_ttl_ms: BASE_LOCK_TTL_MS + keys.len() as u64,
            txn_size: keys.len() as u64,
            min_commit_ts: self.start_ts.next(),
            use_async_commit: async_commit,
            secondaries: if async_commit {
                keys[1..].to_vec()
            } else {
                Vec::new()
            },
            try_one_pc: one_pc,
            txn_source: self.txn_source,
            ..PrewriteRequest::default()
        };
        let (res, out) = core.prewrite(&req)?;
        done.outputs = out;
        if one_pc {
            done.commit_ts = res.one_pc_commit_ts;
            done.mode = Some(CommitMode::OnePc);
            return Ok(done);
        }
        let commit_ts = if async_commit {
            res.min_commit_ts
        } else {
            core.ts()
        };
        let r = core
            .commit(&keys[..1], self.start_ts, commit_ts)
            .and_then(|mut o| {
                o.extend(core.commit(&keys[1..], self.start_ts, commit_ts)?);
                Ok(o)
            });
        match r {
            Ok(o) => done.outputs.extend(o),
            Err(e) => {
                // The primary did not commit: the transaction is rolled back.
                if let Ok(o) = core.rollback(&keys, self.start_ts) {
                    done.outputs.extend(o);
                }
                return Err(e.into());
            }
        }
        done.commit_ts = commit_ts;
        done.mode = Some(if async_commit {
            CommitMode::AsyncCommit
        } else {
            CommitMode::TwoPc
        });
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sim::cdc::CdcConfig;
    use crate::sim::ts::ManualClock;

    fn core() -> SimCore {
        SimCore::new(
            &[1],
            CdcConfig::default(),
            Arc::new(ManualClock::new(1000)),
            1,
        )
        .expect("core")
    }

    #[test]
    fn buffer_semantics() {
        let mut c = core();
        let mut t = KvTxn::new(c.ts());
        t.insert(b"a".to_vec(), b"1".to_vec());
        t.delete(b"a".to_vec());
        assert!(t.is_empty(), "insert then delete cancels");
        t.put(b"b".to_vec(), b"2".to_vec());
        assert_eq!(t.get(&mut c, b"b").expect("get"), Some(b"2".to_vec()));
        let done = t.commit(&mut c, CommitMode::OnePc).expect("commit");
        assert_eq!(done.mode, Some(CommitMode::OnePc));
        let r = c.mvcc.get(b"b", done.commit_ts, &[]).expect("get");
        assert_eq!(r.map(|r| r.value), Some(b"2".to_vec()));
    }

    #[test]
    fn large_async_commit_falls_back_to_2pc() {
        let mut c = core();
        let mut t = KvTxn::new(c.ts());
        for i in 0..=ASYNC_COMMIT_KEYS_LIMIT {
            t.put(format!("k{i:05}").into_bytes(), b"v".to_vec());
        }
        let done = t.commit(&mut c, CommitMode::AsyncCommit).expect("commit");
        assert_eq!(done.mode, Some(CommitMode::TwoPc));
        assert_eq!(done.keys, ASYNC_COMMIT_KEYS_LIMIT + 1);
        let mut t = KvTxn::new(c.ts());
        t.put(b"x".to_vec(), b"v".to_vec());
        let done = t.commit(&mut c, CommitMode::AsyncCommit).expect("commit");
        assert_eq!(done.mode, Some(CommitMode::AsyncCommit));
        assert!(c.mvcc.locks().next().is_none());
    }

    #[test]
    fn one_pc_across_regions_falls_back() {
        let mut c = core();
        let region = c.cluster.region_by_key(b"").expect("region").id();
        c.split_region(region, b"m").expect("split");
        let mut t = KvTxn::new(c.ts());
        t.put(b"a".to_vec(), b"1".to_vec());
        t.put(b"z".to_vec(), b"2".to_vec());
        let done = t.commit(&mut c, CommitMode::OnePc).expect("commit");
        assert_eq!(done.mode, Some(CommitMode::AsyncCommit));
    }
}

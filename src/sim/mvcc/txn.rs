//! Percolator actions: prewrite (2PC, async commit, 1PC), commit, rollback, pessimistic locks,
//! heartbeat, check_txn_status and resolve_lock (TiKV `src/storage/txn/actions`, in our words).
//!
//! Each action validates every key against the current state first and writes nothing when any
//! key fails, then applies one [`WriteBatch`] and returns it.

use super::{split_value, Lock, LockType, Modify, MvccStore, Write, WriteBatch, WriteType};
use crate::sim::error::{Result, SimError};
use crate::sim::ts::Ts;

/// One key change of a prewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Write `value`.
    Put(Vec<u8>, Vec<u8>),
    /// Write `value`, failing with `AlreadyExist` if a value is visible.
    Insert(Vec<u8>, Vec<u8>),
    /// Delete the key.
    Delete(Vec<u8>),
    /// Lock the key without changing it.
    Lock(Vec<u8>),
}

impl Mutation {
    /// The raw key.
    pub fn key(&self) -> &[u8] {
        match self {
            Mutation::Put(k, _)
            | Mutation::Insert(k, _)
            | Mutation::Delete(k)
            | Mutation::Lock(k) => k,
        }
    }
}

/// Arguments of a prewrite (`kvrpcpb::PrewriteRequest`, trimmed).
#[derive(Debug, Clone, Default)]
pub struct PrewriteRequest {
    /// Key changes.
    pub mutations: Vec<Mutation>,
    /// Primary key of the transaction.
    pub primary: Vec<u8>,
    /// Transaction start ts.
    pub start_ts: Ts,
    /// Lock TTL in milliseconds (large transactions use seconds to minutes).
    pub lock_ttl_ms: u64,
    /// Total number of keys in the transaction.
    pub txn_size: u64,
    /// Non-zero for a pessimistic transaction: every key must hold its pessimistic lock.
    pub for_update_ts: Ts,
    /// Lower bound of the commit ts (TiDB sends start_ts + 1 or more).
    pub min_commit_ts: Ts,
    /// Async commit: locks carry `min_commit_ts`, commit_ts is computed, not allocated.
    pub use_async_commit: bool,
    /// Async commit: secondaries, stored in the primary lock.
    pub secondaries: Vec<Vec<u8>>,
    /// Commit in one phase (no locks) when possible.
    pub try_one_pc: bool,
    /// Source tag written into locks and write records.
    pub txn_source: u64,
}

/// What a successful prewrite reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrewriteResult {
    /// The applied batch.
    pub batch: WriteBatch,
    /// Async commit: the minimum commit ts over this call's locks (the commit ts candidate).
    pub min_commit_ts: Ts,
    /// 1PC: the commit ts used; zero when the txn was not committed in one phase.
    pub one_pc_commit_ts: Ts,
}

/// Result of `check_txn_status` on a primary key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnStatus {
    /// Still locked and alive.
    Locked {
        /// Lock TTL in ms.
        ttl_ms: u64,
        /// Current min commit ts (possibly pushed by this call).
        min_commit_ts: Ts,
        /// The primary lock (async-commit readers need its secondaries).
        lock: Box<Lock>,
    },
    /// Committed at this ts.
    Committed(Ts),
    /// Rolled back earlier.
    RolledBack,
    /// The lock's TTL expired; it was rolled back by this call.
    TtlExpireRollback,
    /// No lock and no record; a rollback record was written to stop a late prewrite.
    LockNotExistRollback,
}

/// What `KvCheckSecondaryLocks` finds on an async-commit transaction's secondaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecondaryLocks {
    /// Every key holds its prewrite lock (in the order asked).
    Locked(Vec<(Vec<u8>, Lock)>),
    /// A key is committed, at this ts.
    Committed(Ts),
    /// A key was rolled back, or had no lock and no record (rolled back now, so that the
    /// transaction can no longer commit), or held only a pessimistic lock (never prewritten).
    RolledBack,
}

impl MvccStore {
    /// `KvCheckSecondaryLocks` of the transaction `start_ts` on `keys`: stops at the first key
    /// that decides the transaction (committed or rolled back).
    pub fn check_secondary_locks(
        &mut self,
        keys: &[Vec<u8>],
        start_ts: Ts,
    ) -> Result<(SecondaryLocks, WriteBatch)> {
        let mut batch = WriteBatch::default();
        let mut locked = Vec::new();
        for key in keys {
            let entry = self.entry(key);
            let lock = entry
                .and_then(|e| e.lock())
                .filter(|l| l.start_ts == start_ts);
            match lock {
                Some(l) if l.lock_type != LockType::Pessimistic => {
                    locked.push((key.clone(), l.clone()));
                    continue;
                }
                Some(_) => {}
                None => match entry.and_then(|e| find_txn_record(e, start_ts)) {
                    Some((_, w)) if w.write_type == WriteType::Rollback => {
                        return Ok((SecondaryLocks::RolledBack, batch));
                    }
                    Some((commit_ts, _)) => {
                        return Ok((SecondaryLocks::Committed(commit_ts), batch))
                    }
                    None => {}
                },
            }
            self.rollback_key(key, start_ts, &mut batch)?;
            self.apply(&batch);
            return Ok((SecondaryLocks::RolledBack, batch));
        }
        Ok((SecondaryLocks::Locked(locked), batch))
    }

    /// Prewrite (2PC first phase, async commit, or 1PC). All-or-nothing; the first failing key's
    /// error is returned.
    pub fn prewrite(&mut self, req: &PrewriteRequest) -> Result<PrewriteResult> {
        if req.start_ts.is_zero() || req.mutations.is_empty() {
            return Err(SimError::InvalidRequest(
                "prewrite needs start_ts and mutations",
            ));
        }
        let pessimistic = !req.for_update_ts.is_zero();
        // async commit / 1PC pick a ts above every read so far (TiKV: max(max_ts, start_ts,
        // for_update_ts) + 1, then at least the client's min_commit_ts).
        let computed_min = if req.use_async_commit || req.try_one_pc {
            self.max_ts
                .max(req.start_ts)
                .max(req.for_update_ts)
                .next()
                .max(req.min_commit_ts)
        } else {
            req.min_commit_ts
        };
        let mut batch = WriteBatch::default();
        let mut locks = Vec::with_capacity(req.mutations.len());
        for m in &req.mutations {
            let key = m.key();
            let entry = self.entry(key);
            if let Some(lock) = entry.and_then(|e| e.lock()) {
                if lock.start_ts != req.start_ts {
                    return Err(SimError::KeyIsLocked {
                        key: key.to_vec(),
                        lock: Box::new(lock.clone()),
                    });
                }
                if lock.lock_type != LockType::Pessimistic {
                    continue; // prewrite retried: already done for this key
                }
            } else if pessimistic {
                return Err(SimError::PessimisticLockNotFound {
                    key: key.to_vec(),
                    start_ts: req.start_ts,
                });
            }
            if let Some(e) = entry {
                if !pessimistic {
                    check_write_conflict(key, e, req.start_ts)?;
                }
                if let Mutation::Insert(..) = m {
                    if e.committed_value_at(Ts::MAX).is_some() {
                        return Err(SimError::AlreadyExist { key: key.to_vec() });
                    }
                }
            }
            locks.push(m);
        }

        if req.try_one_pc {
            let commit_ts = computed_min;
            batch.one_pc = true;
            for m in locks {
                let key = m.key();
                let (write_type, value) = match m {
                    Mutation::Put(_, v) | Mutation::Insert(_, v) => (WriteType::Put, Some(v)),
                    Mutation::Delete(_) => (WriteType::Delete, None),
                    Mutation::Lock(_) => (WriteType::Lock, None),
                };
                let short_value = value.and_then(|v| split_value(key, req.start_ts, v, &mut batch));
                if pessimistic {
                    batch
                        .modifies
                        .push(Modify::DeleteLock { key: key.to_vec() });
                }
                batch.modifies.push(Modify::PutWrite {
                    key: key.to_vec(),
                    commit_ts,
                    write: Write {
                        write_type,
                        start_ts: req.start_ts,
                        short_value,
                        has_overlapped_rollback: false,
                        txn_source: req.txn_source,
                    },
                });
            }
            self.apply(&batch);
            return Ok(PrewriteResult {
                batch,
                min_commit_ts: commit_ts,
                one_pc_commit_ts: commit_ts,
            });
        }

        for m in locks {
            let key = m.key();
            let (lock_type, value) = match m {
                Mutation::Put(_, v) | Mutation::Insert(_, v) => (LockType::Put, Some(v)),
                Mutation::Delete(_) => (LockType::Delete, None),
                Mutation::Lock(_) => (LockType::Lock, None),
            };
            let short_value = value.and_then(|v| split_value(key, req.start_ts, v, &mut batch));
            let secondaries = if req.use_async_commit && key == req.primary.as_slice() {
                req.secondaries.clone()
            } else {
                Vec::new()
            };
            batch.modifies.push(Modify::PutLock {
                key: key.to_vec(),
                lock: Lock {
                    lock_type,
                    primary: req.primary.clone(),
                    start_ts: req.start_ts,
                    ttl_ms: req.lock_ttl_ms,
                    short_value,
                    for_update_ts: req.for_update_ts,
                    txn_size: req.txn_size,
                    min_commit_ts: computed_min,
                    use_async_commit: req.use_async_commit,
                    secondaries,
                    txn_source: req.txn_source,
                },
            });
        }
        self.apply(&batch);
        Ok(PrewriteResult {
            batch,
            min_commit_ts: computed_min,
            one_pc_commit_ts: Ts::ZERO,
        })
    }

    /// Acquires pessimistic locks (`KvPessimisticLock`): conflicts are checked against
    /// `for_update_ts`; the locks are invisible to readers and CDC until prewrite.
    pub fn acquire_pessimistic_lock(
        &mut self,
        keys: &[Vec<u8>],
        primary: &[u8],
        start_ts: Ts,
        for_update_ts: Ts,
        ttl_ms: u64,
    ) -> Result<WriteBatch> {
        let mut batch = WriteBatch::default();
        for key in keys {
            if let Some(e) = self.entry(key) {
                if let Some(lock) = e.lock() {
                    if lock.start_ts != start_ts {
                        return Err(SimError::KeyIsLocked {
                            key: key.clone(),
                            lock: Box::new(lock.clone()),
                        });
                    }
                    continue;
                }
                check_write_conflict(key, e, for_update_ts)?;
            }
            batch.modifies.push(Modify::PutLock {
                key: key.clone(),
                lock: Lock {
                    lock_type: LockType::Pessimistic,
                    primary: primary.to_vec(),
                    start_ts,
                    ttl_ms,
                    short_value: None,
                    for_update_ts,
                    txn_size: 0,
                    min_commit_ts: Ts::ZERO,
                    use_async_commit: false,
                    secondaries: Vec::new(),
                    txn_source: 0,
                },
            });
        }
        self.apply(&batch);
        Ok(batch)
    }

    /// Commit (2PC second phase). Idempotent: committing a committed key writes nothing.
    pub fn commit(&mut self, keys: &[Vec<u8>], start_ts: Ts, commit_ts: Ts) -> Result<WriteBatch> {
        if start_ts.is_zero() || commit_ts <= start_ts {
            return Err(SimError::InvalidTxnTso {
                start_ts,
                commit_ts,
            });
        }
        let mut batch = WriteBatch::default();
        for key in keys {
            let entry = self.entry(key);
            match entry.and_then(|e| e.lock()) {
                Some(lock)
                    if lock.start_ts == start_ts && lock.lock_type != LockType::Pessimistic =>
                {
                    if commit_ts < lock.min_commit_ts {
                        return Err(SimError::CommitTsExpired {
                            key: key.clone(),
                            start_ts,
                            commit_ts,
                            min_commit_ts: lock.min_commit_ts,
                        });
                    }
                    let write_type = match lock.lock_type {
                        LockType::Put => WriteType::Put,
                        LockType::Delete => WriteType::Delete,
                        _ => WriteType::Lock,
                    };
                    batch.modifies.push(Modify::PutWrite {
                        key: key.clone(),
                        commit_ts,
                        write: Write {
                            write_type,
                            start_ts,
                            short_value: lock.short_value.clone(),
                            has_overlapped_rollback: false,
                            txn_source: lock.txn_source,
                        },
                    });
                    batch.modifies.push(Modify::DeleteLock { key: key.clone() });
                }
                _ => match entry.and_then(|e| find_txn_record(e, start_ts)) {
                    Some((_, w)) if w.write_type != WriteType::Rollback => {}
                    _ => {
                        return Err(SimError::TxnLockNotFound {
                            key: key.clone(),
                            start_ts,
                        })
                    }
                },
            }
        }
        self.apply(&batch);
        Ok(batch)
    }

    /// Rollback: removes this txn's locks (and long values) and leaves Rollback records so a
    /// late prewrite fails. Fails with `Committed` for a committed key.
    pub fn rollback(&mut self, keys: &[Vec<u8>], start_ts: Ts) -> Result<WriteBatch> {
        let mut batch = WriteBatch::default();
        for key in keys {
            self.rollback_key(key, start_ts, &mut batch)?;
        }
        self.apply(&batch);
        Ok(batch)
    }

    fn rollback_key(&self, key: &[u8], start_ts: Ts, batch: &mut WriteBatch) -> Result<()> {
        let entry = self.entry(key);
        if let Some(lock) = entry
            .and_then(|e| e.lock())
            .filter(|l| l.start_ts == start_ts)
        {
            if lock.short_value.is_none() && lock.lock_type == LockType::Put {
                batch.modifies.push(Modify::DeleteDefault {
                    key: key.to_vec(),
                    start_ts,
                });
            }
            batch
                .modifies
                .push(Modify::DeleteLock { key: key.to_vec() });
        } else if let Some((commit_ts, w)) = entry.and_then(|e| find_txn_record(e, start_ts)) {
            return match w.write_type {
                WriteType::Rollback => Ok(()),
                _ => Err(SimError::Committed {
                    key: key.to_vec(),
                    start_ts,
                    commit_ts,
                }),
            };
        }
        // Another txn may have committed exactly at our start_ts: flag its record instead of
        // overwriting it (TiKV's overlapped rollback).
        match entry.and_then(|e| e.writes.get(&start_ts)) {
            Some(w) if w.start_ts != start_ts => {
                let mut w = w.clone();
                w.has_overlapped_rollback = true;
                batch.modifies.push(Modify::PutWrite {
                    key: key.to_vec(),
                    commit_ts: start_ts,
                    write: w,
                });
            }
            _ => batch.modifies.push(Modify::PutWrite {
                key: key.to_vec(),
                commit_ts: start_ts,
                write: Write {
                    write_type: WriteType::Rollback,
                    start_ts,
                    short_value: None,
                    has_overlapped_rollback: false,
                    txn_source: 0,
                },
            }),
        }
        Ok(())
    }

    /// Large-transaction heartbeat: raises the primary lock's TTL (rewriting the lock, which
    /// CDC observes as a lock-only write).
    pub fn txn_heart_beat(
        &mut self,
        primary: &[u8],
        start_ts: Ts,
        advise_ttl_ms: u64,
    ) -> Result<(u64, WriteBatch)> {
        let mut batch = WriteBatch::default();
        let lock = match self.entry(primary).and_then(|e| e.lock()) {
            Some(l) if l.start_ts == start_ts => l,
            _ => {
                return Err(SimError::TxnLockNotFound {
                    key: primary.to_vec(),
                    start_ts,
                })
            }
        };
        let ttl = lock.ttl_ms.max(advise_ttl_ms);
        if ttl > lock.ttl_ms {
            let mut lock = lock.clone();
            lock.ttl_ms = ttl;
            batch.modifies.push(Modify::PutLock {
                key: primary.to_vec(),
                lock,
            });
        }
        self.apply(&batch);
        Ok((ttl, batch))
    }

    /// `KvCheckTxnStatus` on the primary key. `current_ts` decides TTL expiry (physical part of
    /// start_ts + ttl < physical part of current_ts); a live non-async lock whose min_commit_ts
    /// is ≤ `caller_start_ts` is pushed to `caller_start_ts + 1` so the reader need not wait.
    pub fn check_txn_status(
        &mut self,
        primary: &[u8],
        lock_ts: Ts,
        caller_start_ts: Ts,
        current_ts: Ts,
        rollback_if_not_exist: bool,
    ) -> Result<(TxnStatus, WriteBatch)> {
        let mut batch = WriteBatch::default();
        let entry = self.entry(primary);
        if let Some(lock) = entry
            .and_then(|e| e.lock())
            .filter(|l| l.start_ts == lock_ts)
        {
            // An async-commit transaction is decided by its secondaries (CheckSecondaryLocks),
            // never by its primary's TTL, and its min commit ts is not pushed: TiKV returns
            // its lock as it is.
            if lock.use_async_commit {
                let status = TxnStatus::Locked {
                    ttl_ms: lock.ttl_ms,
                    min_commit_ts: lock.min_commit_ts,
                    lock: Box::new(lock.clone()),
                };
                return Ok((status, batch));
            }
            let expired =
                lock.start_ts.physical_ms().saturating_add(lock.ttl_ms) < current_ts.physical_ms();
            if expired {
                self.rollback_key(primary, lock_ts, &mut batch)?;
                self.apply(&batch);
                return Ok((TxnStatus::TtlExpireRollback, batch));
            }
            let mut lock = lock.clone();
            if !lock.use_async_commit
                && matches!(
                    lock.lock_type,
                    LockType::Put | LockType::Delete | LockType::Lock
                )
                && !caller_start_ts.is_zero()
                && caller_start_ts != Ts::MAX
                && lock.min_commit_ts <= caller_start_ts
            {
                lock.min_commit_ts = caller_start_ts.next();
                batch.modifies.push(Modify::PutLock {
                    key: primary.to_vec(),
                    lock: lock.clone(),
                });
                self.apply(&batch);
            }
            let status = TxnStatus::Locked {
                ttl_ms: lock.ttl_ms,
                min_commit_ts: lock.min_commit_ts,
                lock: Box::new(lock),
            };
            return Ok((status, batch));
        }
        match entry.and_then(|e| find_txn_record(e, lock_ts)) {
            Some((_, w)) if w.write_type == WriteType::Rollback => {
                Ok((TxnStatus::RolledBack, batch))
            }
            Some((commit_ts, _)) => Ok((TxnStatus::Committed(commit_ts), batch)),
            None if rollback_if_not_exist => {
                self.rollback_key(primary, lock_ts, &mut batch)?;
                self.apply(&batch);
                Ok((TxnStatus::LockNotExistRollback, batch))
            }
            None => Err(SimError::TxnLockNotFound {
                key: primary.to_vec(),
                start_ts: lock_ts,
            }),
        }
    }

    /// `KvResolveLock`: commits (`commit_ts` non-zero) or rolls back every lock of `start_ts`,
    /// or only those on `keys` when given.
    pub fn resolve_lock(
        &mut self,
        start_ts: Ts,
        commit_ts: Ts,
        keys: Option<&[Vec<u8>]>,
    ) -> Result<WriteBatch> {
        let targets: Vec<Vec<u8>> = match keys {
            Some(k) => k.to_vec(),
            None => self
                .locks()
                .filter(|(_, l)| l.start_ts == start_ts)
                .map(|(k, _)| k.to_vec())
                .collect(),
        };
        if commit_ts.is_zero() {
            self.rollback(&targets, start_ts)
        } else {
            // Resolving skips keys whose lock is already gone (committed or never locked).
            let locked: Vec<Vec<u8>> = targets
                .into_iter()
                .filter(|k| {
                    self.entry(k)
                        .and_then(|e| e.lock())
                        .is_some_and(|l| l.start_ts == start_ts)
                })
                .collect();
            self.commit(&locked, start_ts, commit_ts)
        }
    }
}

/// Write conflict: any record committed after `ts`, or our own rollback at exactly `ts`.
fn check_write_conflict(key: &[u8], e: &super::KeyEntry, ts: Ts) -> Result<()> {
    if let Some((commit_ts, w)) = e.writes_newest_first().next() {
        if commit_ts > ts {
            return Err(SimError::WriteConflict {
                key: key.to_vec(),
                start_ts: ts,
                conflict_start_ts: w.start_ts,
                conflict_commit_ts: commit_ts,
            });
        }
    }
    if let Some(w) = e.writes.get(&ts) {
        if (w.write_type == WriteType::Rollback && w.start_ts == ts) || w.has_overlapped_rollback {
            return Err(SimError::WriteConflict {
                key: key.to_vec(),
                start_ts: ts,
                conflict_start_ts: ts,
                conflict_commit_ts: ts,
            });
        }
    }
    Ok(())
}

/// The write record of transaction `start_ts` on this key, if any (commit or rollback).
fn find_txn_record(e: &super::KeyEntry, start_ts: Ts) -> Option<(Ts, &Write)> {
    if let Some(w) = e.writes.get(&start_ts) {
        if w.start_ts == start_ts || w.has_overlapped_rollback {
            let w = if w.start_ts == start_ts {
                w
            } else {
                return Some((start_ts, &ROLLED_BACK));
            };
            return Some((start_ts, w));
        }
    }
    e.writes
        .since(start_ts)
        .iter()
        .find(|(_, w)| w.start_ts == start_ts)
        .map(|(t, w)| (*t, w))
}

/// Stand-in record returned when a txn's rollback is represented by an overlapped flag.
static ROLLED_BACK: Write = Write {
    write_type: WriteType::Rollback,
    start_ts: Ts(0),
    short_value: None,
    has_overlapped_rollback: false,
    txn_source: 0,
};

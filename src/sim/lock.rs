//! A lock-CF record of the simulated TiKV ([`Lock`], TiKV's `txn_types::Lock`): what a
//! prewrite leaves on a key until its commit or rollback, and what a reader that meets it is
//! told.

use tibinlog_proto::kvrpcpb;

use super::ts::Ts;

/// Kind of a lock-CF record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockType {
    /// Prewritten put.
    Put,
    /// Prewritten delete.
    Delete,
    /// Prewritten `Op::Lock` (SELECT FOR UPDATE in optimistic txns); invisible to CDC.
    Lock,
    /// Acquired by a pessimistic txn before prewrite; invisible to reads and CDC.
    Pessimistic,
}

/// A lock-CF record (TiKV `txn_types::Lock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// Lock kind.
    pub lock_type: LockType,
    /// Primary key of the transaction (raw).
    pub primary: Vec<u8>,
    /// Transaction start ts.
    pub start_ts: Ts,
    /// Time to live in milliseconds, counted from `start_ts`'s physical time.
    pub ttl_ms: u64,
    /// The value when at most `SHORT_VALUE_MAX_LEN` (`mvcc`) bytes; longer ones are in the default CF.
    pub short_value: Option<Vec<u8>>,
    /// Pessimistic txns: the for_update_ts of the lock; zero for optimistic ones.
    pub for_update_ts: Ts,
    /// Number of keys of the transaction, as told by the client.
    pub txn_size: u64,
    /// Commit must use at least this ts (async commit / pushed by readers).
    pub min_commit_ts: Ts,
    /// Async-commit transaction: committed once all its locks exist.
    pub use_async_commit: bool,
    /// Async commit: the secondary keys, stored on the primary lock.
    pub secondaries: Vec<Vec<u8>>,
    /// Source tag of the writing transaction (see `cdcpb` txn_source bits).
    pub txn_source: u64,
}

impl Lock {
    /// The `kvrpcpb::LockInfo` a reader that met this lock gets back.
    pub fn to_lock_info(&self, key: &[u8]) -> kvrpcpb::LockInfo {
        let lock_type = match self.lock_type {
            LockType::Put => kvrpcpb::Op::Put,
            LockType::Delete => kvrpcpb::Op::Del,
            LockType::Lock => kvrpcpb::Op::Lock,
            LockType::Pessimistic => kvrpcpb::Op::PessimisticLock,
        };
        kvrpcpb::LockInfo {
            primary_lock: self.primary.clone(),
            lock_version: self.start_ts.0,
            key: key.to_vec(),
            lock_ttl: self.ttl_ms,
            txn_size: self.txn_size,
            lock_type: lock_type as i32,
            lock_for_update_ts: self.for_update_ts.0,
            use_async_commit: self.use_async_commit,
            min_commit_ts: self.min_commit_ts.0,
            secondaries: self.secondaries.clone(),
            ..Default::default()
        }
    }
}

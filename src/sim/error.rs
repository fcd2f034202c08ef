//! Errors of the simulator core.
//!
//! Classified by what the caller (the gRPC shell or the TiDB layer) must do: a key error goes back
//! to the transaction client inside `KeyError`, a region error inside `errorpb::Error`, and the
//! rest are misuse of the simulator API.

use super::lock::Lock;
use super::ts::Ts;

/// Result alias of the simulator.
pub type Result<T, E = SimError> = std::result::Result<T, E>;

/// Everything a simulator call can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A read or prewrite met another transaction's lock (`KeyError.locked`).
    #[error("key is locked by txn {}", .lock.start_ts.0)]
    KeyIsLocked {
        /// Raw key carrying the lock.
        key: Vec<u8>,
        /// The lock met.
        lock: Box<Lock>,
    },
    /// A newer version was committed after our start_ts (`KeyError.conflict`).
    #[error("write conflict on txn {start_ts:?}: committed {conflict_start_ts:?}@{conflict_commit_ts:?}")]
    WriteConflict {
        /// Raw key.
        key: Vec<u8>,
        /// The writing transaction.
        start_ts: Ts,
        /// start_ts of the conflicting committed transaction.
        conflict_start_ts: Ts,
        /// commit_ts of the conflicting write.
        conflict_commit_ts: Ts,
    },
    /// An insert found an existing row (`KeyError.already_exist`).
    #[error("key already exists")]
    AlreadyExist {
        /// Raw key.
        key: Vec<u8>,
    },
    /// Commit found neither the lock nor a commit record: the txn was rolled back or never wrote.
    #[error("txn {start_ts:?} lock not found")]
    TxnLockNotFound {
        /// Raw key.
        key: Vec<u8>,
        /// The transaction.
        start_ts: Ts,
    },
    /// Commit with a commit_ts below the lock's min_commit_ts (`CommitTsExpired`).
    #[error("commit ts {commit_ts:?} < min commit ts {min_commit_ts:?}")]
    CommitTsExpired {
        /// Raw key.
        key: Vec<u8>,
        /// The transaction.
        start_ts: Ts,
        /// Requested commit ts.
        commit_ts: Ts,
        /// The lock's minimum.
        min_commit_ts: Ts,
    },
    /// Rollback of a transaction that already committed this key.
    #[error("txn {start_ts:?} already committed at {commit_ts:?}")]
    Committed {
        /// Raw key.
        key: Vec<u8>,
        /// The transaction.
        start_ts: Ts,
        /// Its commit ts.
        commit_ts: Ts,
    },
    /// A pessimistic prewrite found no pessimistic lock of its transaction.
    #[error("pessimistic lock not found for txn {start_ts:?}")]
    PessimisticLockNotFound {
        /// Raw key.
        key: Vec<u8>,
        /// The transaction.
        start_ts: Ts,
    },
    /// Timestamps that cannot belong to one transaction (commit_ts ≤ start_ts, zero ts).
    #[error("invalid txn timestamps start {start_ts:?} commit {commit_ts:?}")]
    InvalidTxnTso {
        /// start_ts given.
        start_ts: Ts,
        /// commit_ts given.
        commit_ts: Ts,
    },
    /// A TSO request asked for zero (or too many) timestamps.
    #[error("invalid tso count {count}")]
    InvalidTsoCount {
        /// Requested count.
        count: u64,
    },
    /// Read at a ts below the GC safe point: that history is gone.
    #[error("read ts {read_ts:?} is older than gc safe point {safe_point:?}")]
    DataCompacted {
        /// Requested read ts.
        read_ts: Ts,
        /// Current safe point.
        safe_point: Ts,
    },
    /// No region with this id exists.
    #[error("region {0} not found")]
    RegionNotFound(u64),
    /// No store with this id exists.
    #[error("store {0} not found")]
    StoreNotFound(u64),
    /// The region cannot be split or merged as asked.
    #[error("invalid region operation on {region}: {reason}")]
    InvalidRegionOp {
        /// Region id.
        region: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// The request is malformed (empty key set, unknown downstream…).
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
}

impl SimError {
    /// True for errors that belong in a `kvrpcpb::KeyError` (the transaction client retries or
    /// resolves locks); false for misuse and region errors.
    pub fn is_key_error(&self) -> bool {
        matches!(
            self,
            Self::KeyIsLocked { .. }
                | Self::WriteConflict { .. }
                | Self::AlreadyExist { .. }
                | Self::TxnLockNotFound { .. }
                | Self::CommitTsExpired { .. }
                | Self::Committed { .. }
                | Self::PessimisticLockNotFound { .. }
        )
    }
}

impl From<super::ts::InvalidTsoCount> for SimError {
    fn from(e: super::ts::InvalidTsoCount) -> Self {
        SimError::InvalidTsoCount { count: e.count }
    }
}

//! Errors of the binlog store, classified by what the caller must do.
//!
//! * [`StoreError`]: the writer side. [`StoreError::is_caller_bug`] errors (order, state, rows
//!   that do not match their transaction) leave the store usable once the caller aborts the open
//!   transaction; everything else (I/O, corruption) means the writer must stop and be reopened,
//!   which runs recovery.
//! * [`DumpError`]: the read side. Position and GTID errors are what a MySQL master answers with
//!   ERR 1236; the server takes the texts from the protocol crate's `wire::errors`.

use std::io;
use std::path::PathBuf;

use tibinlog_protocol::binlog::{BinlogError, Sid};

use crate::model::Ts;

/// Result of the writer side.
pub type Result<T> = std::result::Result<T, StoreError>;

/// Writer-side errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed. The writer must be dropped and the store reopened (recovery
    /// truncates whatever was half written).
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A row or event could not be encoded (value does not fit its column, name too long, one
    /// event of 4 GiB). The statement was not written; abort the transaction.
    #[error("binlog encoding failed: {0}")]
    Codec(#[from] BinlogError),
    /// Bytes on disk that recovery cannot explain: fsynced data missing or damaged.
    #[error("binlog store corrupt: {file} at {offset}: {reason}")]
    Corrupt {
        file: String,
        offset: u64,
        reason: &'static str,
    },
    /// Transactions must arrive in ascending `(commit_ts, start_ts, part)`.
    #[error(
        "transaction ({next_commit:?}, {next_start:?}) not after ({prev_commit:?}, {prev_start:?})"
    )]
    OutOfOrder {
        prev_commit: Ts,
        prev_start: Ts,
        next_commit: Ts,
        next_start: Ts,
    },
    /// The write guard refused: this writer may no longer change its files (an HA owner whose
    /// ownership is lost). Nothing more is written; the store must be reopened.
    #[error("not writing: {0}")]
    Refused(String),
    /// A call that is not valid in the current transaction state (e.g. `write_rows` without
    /// `begin_txn`, `flush` inside a transaction).
    #[error("{call} is not valid {state}")]
    TxnState {
        call: &'static str,
        state: &'static str,
    },
    /// A row change does not belong to the open transaction or lacks an image its op needs.
    #[error("row of table {table_id} rejected: {reason}")]
    BadRow { table_id: u64, reason: &'static str },
    /// The files were written with another server UUID; GTIDs would mix two domains.
    #[error("binlog files carry GTIDs of {found}, configured server_uuid is {configured}")]
    ServerUuidChanged { configured: Sid, found: Sid },
    /// The checkpoint must not move backwards.
    #[error("checkpoint regressed from {prev:?} to {next:?}")]
    CheckpointRegressed { prev: Ts, next: Ts },
    /// `purge_to` names a file that is not in the index.
    #[error("binlog file {file} is not in the index")]
    UnknownFile { file: String },
    /// Invalid configuration.
    #[error("invalid binlog store config: {reason}")]
    Config { reason: &'static str },
    /// A relayed transaction is not the one this store would write next (another position,
    /// GNO, server UUID or event run): the two binlogs differ.
    #[error("relayed transaction refused at {file}:{offset}: {reason}")]
    RelayMismatch {
        file: String,
        offset: u64,
        reason: String,
    },
}

impl StoreError {
    /// True for errors caused by the caller's input; the store itself is intact.
    pub fn is_caller_bug(&self) -> bool {
        matches!(
            self,
            Self::OutOfOrder { .. }
                | Self::TxnState { .. }
                | Self::BadRow { .. }
                | Self::CheckpointRegressed { .. }
                | Self::UnknownFile { .. }
                | Self::RelayMismatch { .. }
        )
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }
}

/// Read-side errors: why a dump cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The file is not (or no longer) in the index.
    #[error("binlog file {file} not in the index")]
    UnknownFile { file: String },
    /// Position below the 4-byte magic.
    #[error("position {pos} < 4")]
    PositionBelow4 { pos: u64 },
    /// Position past the durable end of the file.
    #[error("position {pos} past the end {size} of {file}")]
    PositionPastEnd { file: String, pos: u64, size: u64 },
    /// Position inside an event.
    #[error("position {pos} of {file} is not an event boundary")]
    NotEventBoundary { file: String, pos: u64 },
    /// The client's GTID set lacks GTIDs of purged files.
    #[error("GTIDs {missing} the client needs were purged")]
    GtidsPurged { missing: String },
    /// The client's set holds GTIDs of this server that were never written.
    #[error("client has GTIDs {extra} this server never wrote")]
    ClientHasMoreGtids { extra: String },
    /// Transactions after `ts` may be in purged files (or came before the capture started).
    #[error("ts {} is older than the binlog: transactions after it are not all in it (the binlog covers ts {} to {})", ts.0, purged_up_to.0, newest.map_or("nothing yet".to_owned(), |n| n.0.to_string()))]
    TsPurged {
        ts: Ts,
        purged_up_to: Ts,
        newest: Option<Ts>,
    },
    /// Transactions up to `ts` may not all be in the binlog yet (past the checkpoint).
    #[error("ts {} is newer than the binlog's checkpoint: transactions up to it may not all be in it yet (the binlog covers ts {} to {})", ts.0, oldest.map_or("the start".to_owned(), |o| o.0.to_string()), newest.map_or("nothing yet".to_owned(), |n| n.0.to_string()))]
    TsAhead {
        ts: Ts,
        oldest: Option<Ts>,
        newest: Option<Ts>,
    },
    /// The writer is gone: no more data will come.
    #[error("binlog writer stopped")]
    WriterGone,
    /// Reading a file failed.
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file does not hold what the index says (missing bytes, bad event header).
    #[error("binlog file {file} corrupt at {offset}: {reason}")]
    Corrupt {
        file: String,
        offset: u64,
        reason: &'static str,
    },
}

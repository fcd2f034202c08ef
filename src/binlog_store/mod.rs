//! The binlog store: the capture pipeline's ordered transactions become real MySQL binlog files
//! on disk, crash-safe, and dump sessions read them back.
//!
//! In: transactions in `(commit_ts, start_ts, part)` order (`part` numbers the statements of a
//! DDL job that made several, such as a batch `CREATE TABLE`; each is a binlog transaction with
//! its own GTID), as [`RowChange`](crate::mounter::RowChange)
//! pieces between [`BinlogStore::begin_txn`] and [`BinlogStore::commit_txn`], and
//! [`DdlEvent`](crate::mounter::DdlEvent)s; group commits with [`BinlogStore::flush`]`(checkpoint)`.
//! Out: files `<basename>.000001`, … listed in `<basename>.index`, a mapping file
//! `<basename>.map`, and for readers a [`BinlogFiles`] handle with a watch of the durable end.
//!
//! # Files
//! Every file is `magic | FORMAT_DESCRIPTION | PREVIOUS_GTIDS | transactions… | [ROTATE]`. The
//! FORMAT_DESCRIPTION carries `LOG_EVENT_BINLOG_IN_USE_F` while the file is the open one and the
//! flag is cleared in place when the file is closed by a rotation or [`BinlogStore::close`], as
//! MySQL does (`MYSQL_BIN_LOG::close`); the CRC does not cover the flag, so flipping it keeps the
//! event valid. A dump session must clear the flag in what it sends (the protocol crate's
//! `format_desc::patch_for_sending`).
//! Unlike MySQL, a restart continues the last file instead of opening a new one, and no STOP
//! event is written: the bytes are a function of the transactions alone (no wall clock), so two
//! stores fed the same transactions are byte-identical.
//! The FORMAT_DESCRIPTION's create timestamp is therefore always 0.
//!
//! Transactions:
//! ```text
//! row DML: GTID | QUERY "BEGIN" | (TABLE_MAP | rows events…STMT_END_F)+ | XID(start_ts)
//! DDL:     GTID | QUERY <ddl> (db = schema, Q_DDL_LOGGED_WITH_XID = start_ts)
//! ```
//! GNOs are dense (1, 2, 3, …) for `server_uuid`; the GTID's `sequence_number` counts from 1 in
//! each file; header timestamps are the commit's physical seconds. A file is rotated after the
//! transaction that takes it past `max_binlog_size`; a transaction never spans two files.
//!
//! # Big transactions
//! A transaction is built in memory until it passes [`StoreConfig::spill_threshold`] (at least
//! 16 MiB). Then its GTID event is re-encoded with the 9-byte length-encoded
//! `transaction_length` (the minimal form for any length ≥ 2^24, so the final event is what
//! MySQL would write) and everything so far goes to the file; later events stream to the file
//! and at commit the GTID event is patched in place with the real length (same size). Readers
//! never see these bytes before the commit is flushed; recovery cuts them if the commit never
//! came.
//!
//! A transaction never spans two files, so one of several GiB takes its file past 4 GiB. The
//! header's 32-bit `log_pos` then wraps modulo 2^32, as MySQL writes it; offsets everywhere
//! else (readers, recovery, the mapping, `SHOW MASTER STATUS`, COM_BINLOG_DUMP_GTID's 8-byte
//! position) are 64-bit and counted from the bytes, never taken from `log_pos`. As with
//! MySQL, COM_BINLOG_DUMP's 4-byte position cannot name an offset past 4 GiB: such clients
//! resume by GTID, or from the next file.
//!
//! # Durability (group commit)
//! [`BinlogStore::flush`] appends the mapping records of the new transactions and the checkpoint
//! to `<basename>.map` and fsyncs it, then writes the binlog bytes and fsyncs the binlog file,
//! then publishes the new durable end. See [`map`] for why the map goes first. Recovery
//! ([`BinlogStore::open`]) scans the last file from the last position known to be fsynced,
//! truncates everything after the last complete transaction (a torn event included), drops
//! mapping records the binlog lost, and reports the checkpoint of the last checkpoint record
//! whose binlog survived.
//!
//! # Layout
//! - [`writer`]: [`BinlogStore`]: transactions, group commit, rotation, purge.
//! - [`recovery`]: opening a store, the tail scan, [`Recovery`].
//! - [`retention`]: purge by file, by time, expiry.
//! - [`files`]: [`BinlogFiles`], the read side's metadata. [`reader`]: [`StoreReader`], the
//!   events for dump sessions.
//! - [`map`]: the mapping file and [`TxnEntry`]. [`index`]: file names and the index file.
//! - [`scan`]: reading events back, the transaction-boundary state machine.
//! - [`error`]: [`StoreError`], [`DumpError`].

pub mod catalog_history;
pub mod error;
pub mod files;
pub mod gate;
pub mod index;
pub mod map;
pub(crate) mod prologue;
pub mod reader;
pub mod recovery;
pub mod retention;
pub(crate) mod scan;
pub mod sink;
pub mod source;
pub mod writer;

use std::path::PathBuf;

use tibinlog_protocol::binlog::Sid;

use crate::model::Ts;

pub use error::{DumpError, Result, StoreError};
pub use files::{BinlogFiles, StoreSnapshotPoint};
pub use index::{file_name, WriteGuard};
pub use map::{TxnEntry, TxnOrder};
pub use reader::{EventRef, StoreReader};
pub use recovery::Recovery;
pub use retention::{PurgeInUse, Purged};
pub use writer::{BinlogStore, Committed};

/// MySQL's default `max_binlog_size`: 1 GiB.
pub const DEFAULT_MAX_BINLOG_SIZE: u64 = 1 << 30;
/// Smallest spill threshold: 2^24 bytes, from which on `transaction_length` needs the 9-byte
/// length-encoded form (see "Big transactions").
pub const MIN_SPILL_THRESHOLD: u64 = 1 << 24;

/// Where an event is in the store: the file's sequence number and the byte offset in that
/// file, ordered as the binlog is. Internal to the store; at its seam with the server a
/// position is a file name and an offset (the server's `BinlogPosition`, which
/// [`BinlogFiles::file_name`] gives for a sequence number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StorePos {
    /// N of `<basename>.N`.
    pub file_seq: u32,
    pub offset: u64,
}

impl StorePos {
    pub fn new(file_seq: u32, offset: u64) -> Self {
        Self { file_seq, offset }
    }
}

/// Configuration of a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Directory of the files (created if missing).
    pub data_dir: PathBuf,
    /// File name prefix: `<basename>.000001`, `<basename>.index`.
    pub basename: String,
    /// `@@server_id` in every event header.
    pub server_id: u32,
    /// GTID source id. Must stay the same for the life of the files.
    pub server_uuid: Sid,
    /// `binlog_checksum=CRC32`. A change takes effect with a new file at open.
    pub checksum: bool,
    /// Rotate once a file passes this many bytes (1 B ..= 4 GiB; a big transaction can take a
    /// file past it, see "Big transactions").
    pub max_binlog_size: u64,
    /// `binlog_expire_logs_seconds`; 0 disables [`BinlogStore::purge_expired`].
    pub expire_logs_seconds: u64,
    /// `@@version`, e.g. `8.0.36-tibinlog-0.1.0`; the GTID events carry its numeric form.
    pub server_version: String,
    /// Rows events are cut before they pass this many bytes (`binlog_row_event_max_size`).
    pub max_rows_event_size: usize,
    /// A transaction larger than this streams to the file (clamped to [`MIN_SPILL_THRESHOLD`]).
    pub spill_threshold: u64,
    /// Stamps the header timestamp of the first file's FORMAT_DESCRIPTION and PREVIOUS_GTIDS of
    /// a new store (the TSO capture starts from), so that it is deterministic.
    pub first_file_ts: Ts,
    /// fsync latency and group-commit sizes are observed here.
    pub metrics: crate::metrics::BinlogMetrics,
    /// `binlog_row_metadata`: the optional metadata of every TABLE_MAP written from now on.
    pub row_metadata: tibinlog_protocol::binlog::RowMetadata,
}

impl StoreConfig {
    /// Defaults: basename `binlog`, CRC32 on, 1 GiB files, no expiry, 8 KiB rows events,
    /// 16 MiB spill threshold.
    pub fn new(data_dir: impl Into<PathBuf>, server_id: u32, server_uuid: Sid) -> Self {
        Self {
            data_dir: data_dir.into(),
            basename: "binlog".into(),
            server_id,
            server_uuid,
            checksum: true,
            max_binlog_size: DEFAULT_MAX_BINLOG_SIZE,
            expire_logs_seconds: 0,
            server_version: concat!("8.0.36-tibinlog-", env!("CARGO_PKG_VERSION")).into(),
            max_rows_event_size: 8192,
            spill_threshold: MIN_SPILL_THRESHOLD,
            first_file_ts: Ts::ZERO,
            metrics: crate::metrics::BinlogMetrics::default(),
            row_metadata: tibinlog_protocol::binlog::RowMetadata::Full,
        }
    }

    /// `8.0.36-…` → 80036 (what GTID events carry); 0 when the text does not start `X.Y.Z`.
    pub fn server_version_number(&self) -> u32 {
        let head = self
            .server_version
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()
            .unwrap_or("");
        let mut parts = head.split('.').map(|p| p.parse::<u32>().ok());
        match (parts.next(), parts.next(), parts.next()) {
            (Some(Some(a)), Some(Some(b)), Some(Some(c))) if b < 100 && c < 100 => {
                a * 10_000 + b * 100 + c
            }
            _ => 0,
        }
    }
}

/// Header timestamp of an event of a transaction committed at `ts`: its physical seconds.
pub fn header_timestamp(ts: Ts) -> u32 {
    u32::try_from(ts.physical_ms() / 1000).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_version_number_and_header_timestamp() {
        let mut c = StoreConfig::new("/nonexistent", 1, Sid::ZERO);
        c.server_version = "8.0.36-tibinlog-0.1.0".into();
        assert_eq!(c.server_version_number(), 80036);
        c.server_version = "8.4.3".into();
        assert_eq!(c.server_version_number(), 80403);
        c.server_version = "tibinlog".into();
        assert_eq!(c.server_version_number(), 0);
        assert_eq!(
            header_timestamp(Ts::compose(1_700_000_000_999, 5)),
            1_700_000_000
        );
    }
}

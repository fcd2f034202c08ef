//! What the server needs from the binlog store and the schema store.
//!
//! The server never talks to the capture pipeline: every dump session reads finished bytes
//! through [`BinlogSource`], and catalog statements (`SHOW DATABASES`, `SHOW CREATE TABLE`) go
//! through [`SchemaProvider`]. Both are implemented by other stages; [`super::testing`] has an
//! in-memory implementation for tests.
//!
//! # Contract of a binlog source
//! * Files are named `<base>.NNNNNN`, listed oldest first; every file starts with the 4-byte
//!   magic, then FORMAT_DESCRIPTION at offset 4, then PREVIOUS_GTIDS; every file but the last
//!   ends with a ROTATE naming the next one.
//! * A reader returns events exactly as stored (header, body, CRC) and only complete ones: a
//!   half-written event at the tail is "not yet there" (`Ok(None)`).
//! * The end-position watch moves forward after bytes are durable and readable, so a session
//!   woken by it always finds the new events.

use tibinlog_protocol::binlog::{ChecksumAlg, GtidSet};
use tokio::sync::watch;

use crate::sql::error::SqlWarning;

/// A position in the binlog: file name and byte offset of the next event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct BinlogPosition {
    pub file: String,
    pub pos: u64,
}

impl BinlogPosition {
    pub fn new(file: impl Into<String>, pos: u64) -> Self {
        Self {
            file: file.into(),
            pos,
        }
    }
}

/// One binlog file in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogFile {
    pub name: String,
    /// Bytes of complete events, magic included (`SHOW BINARY LOGS` File_size).
    pub size: u64,
}

/// Why a source could not serve a request. Each maps to the MySQL error a client acts on.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SourceError {
    /// The file is not (or no longer) in the index.
    #[error("unknown binlog file {file}")]
    UnknownFile { file: String },
    /// The offset is past the end of the file's complete events.
    #[error("position {pos} is past the end of {file}")]
    PastEnd { file: String, pos: u64 },
    /// The offset is not the start of an event.
    #[error("position {pos} in {file} is not an event boundary")]
    NotAtEventBoundary { file: String, pos: u64 },
    /// The requested GTIDs (or file) were purged.
    #[error("binlog data needed by the request was purged")]
    Purged,
    /// The bytes on disk do not parse as events: stop the session, report loudly.
    #[error("corrupt binlog {file} at {pos}: {detail}")]
    Corrupt {
        file: String,
        pos: u64,
        detail: String,
    },
    /// An I/O failure that may succeed later.
    #[error("binlog I/O error: {0}")]
    Io(String),
    /// The operation is not supported by this source (e.g. purge of the active file).
    #[error("{0}")]
    Refused(String),
}

/// The binlog store as the server sees it. Methods must be cheap (metadata is in memory);
/// event reading happens through [`BinlogReader`], which the server drives from a blocking
/// thread.
pub trait BinlogSource: Send + Sync + 'static {
    /// The checksum algorithm the files are written with (`@@binlog_checksum`).
    fn checksum_alg(&self) -> ChecksumAlg;
    /// The optional metadata of the TABLE_MAP events written (`@@binlog_row_metadata`).
    fn row_metadata(&self) -> tibinlog_protocol::binlog::RowMetadata {
        tibinlog_protocol::binlog::RowMetadata::Full
    }
    /// Every file in the index, oldest first.
    fn files(&self) -> Vec<BinlogFile>;
    /// End of the last complete transaction: the `SHOW MASTER STATUS` position.
    fn end_position(&self) -> BinlogPosition;
    /// A watch of [`Self::end_position`]; dump sessions wait on it for new events.
    fn subscribe_end(&self) -> watch::Receiver<BinlogPosition>;
    /// Every GTID written to the binlog, purged ones included (`@@gtid_executed`).
    fn gtid_executed(&self) -> GtidSet;
    /// [`Self::end_position`] and [`Self::gtid_executed`] at that end (`SHOW MASTER STATUS`).
    /// Sources that can read both at once override this; the default reads one after the other.
    fn status(&self) -> (BinlogPosition, GtidSet) {
        (self.end_position(), self.gtid_executed())
    }
    /// What `SHOW MASTER STATUS` and `@@gtid_executed` show: the newest snapshot point's end
    /// and GTIDs, or [`Self::status`] where there is none. A read that follows reads at that
    /// point or a later one, so a watermark taken here is never ahead of the rows a following
    /// `SELECT` sees (the durable end can run ahead of it while a batch is written, and a
    /// read-only incremental snapshot between two such watermarks would keep a row a
    /// transaction inside the low one had already deleted).
    fn visible_status(&self) -> (BinlogPosition, GtidSet) {
        match self.snapshot_point() {
            Some(p) => (p.end, p.gtid_executed),
            None => self.status(),
        }
    }
    /// GTIDs whose files were purged (`@@gtid_purged`).
    fn gtid_purged(&self) -> GtidSet;
    /// The position where the history splits at TiDB timestamp `ts`: before the first
    /// transaction with `commit_ts > ts` (or the end). Fails for purged history.
    fn position_for_ts(&self, _ts: u64) -> Result<BinlogPosition, SourceError> {
        Err(SourceError::Refused(
            "no TiDB timestamps in this binlog".into(),
        ))
    }
    /// The TiDB timestamp a position lines up with, if one does.
    fn ts_for_position(&self, _pos: &BinlogPosition) -> Option<u64> {
        None
    }
    /// The newest snapshot point: a TiDB timestamp and the binlog position where the history
    /// splits at it (every transaction with `commit_ts <= ts` before, every later one after),
    /// with `@@gtid_executed` there. `None` when the binlog has none (or no upstream).
    fn snapshot_point(&self) -> Option<SnapshotPoint> {
        None
    }
    /// The TiDB identity of the transaction that ends exactly at `pos` of `file`: what a
    /// standby of an HA group needs besides its bytes (see [`RelayTag`]).
    fn txn_ending_at(&self, _file: &str, _pos: u64) -> Option<RelayTag> {
        None
    }
    /// A reader positioned at `pos` of `file`, which must be an event boundary (4 = the
    /// FORMAT_DESCRIPTION).
    fn open(&self, file: &str, pos: u64) -> Result<Box<dyn BinlogReader>, SourceError>;
    /// Where a GTID dump for a client that has `have` starts: the newest file whose
    /// PREVIOUS_GTIDS is a subset of `have` (position 4). [`SourceError::Purged`] if a needed
    /// transaction is no longer in any file.
    fn locate_gtid_start(&self, have: &GtidSet) -> Result<BinlogPosition, SourceError>;
    /// The position a copy that has applied exactly `have` stands at: the start of the first
    /// transaction not in it (or the end). Refused where this source cannot tell.
    fn position_for_gtids(&self, _have: &GtidSet) -> Result<BinlogPosition, SourceError> {
        Err(SourceError::Refused(
            "no GTID positions in this binlog".into(),
        ))
    }
    /// `PURGE BINARY LOGS TO 'file'`: delete every file before `file`. Returns the warnings
    /// of a purge that stopped early (a file being read).
    fn purge_to(&self, file: &str) -> Result<Vec<SqlWarning>, SourceError>;
    /// `PURGE BINARY LOGS BEFORE t`: delete files whose last event is older than `unix_secs`
    /// (never the active one).
    fn purge_before(&self, unix_secs: u64) -> Result<Vec<SqlWarning>, SourceError>;
}

/// Events read in one go, back to back in one buffer that is reused from batch to batch.
#[derive(Debug, Default)]
pub struct EventBatch {
    bytes: Vec<u8>,
    /// End offset in `bytes` of each event.
    ends: Vec<usize>,
}

impl EventBatch {
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of all events.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Gives back memory above `bytes` (a tailing session keeps a small buffer, not the one
    /// a backlog grew).
    pub fn shrink_to(&mut self, bytes: usize) {
        self.bytes.shrink_to(bytes);
        self.ends.shrink_to(bytes / 64);
    }

    /// Appends one event.
    pub fn push(&mut self, event: &[u8]) {
        self.bytes.extend_from_slice(event);
        self.ends.push(self.bytes.len());
    }

    fn range(&self, i: usize) -> std::ops::Range<usize> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        start..self.ends[i]
    }

    /// Event `i` (panics if `i >= len`).
    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.range(i)]
    }

    /// Event `i`, to be patched in place before sending.
    pub fn get_mut(&mut self, i: usize) -> &mut [u8] {
        let r = self.range(i);
        &mut self.bytes[r]
    }
}

/// Sequential reader over one binlog file.
pub trait BinlogReader: Send {
    /// The next complete event (header + body + CRC as stored), or `None` at the current end of
    /// the file's complete events (more may come later if the file is the active one).
    fn next_event(&mut self) -> Result<Option<Vec<u8>>, SourceError>;
    /// Appends the next complete events to `batch` until it holds `max_events` events or
    /// `max_bytes` bytes, or the file's complete events end. An error leaves the events read
    /// before it in `batch`; the reader returns the error again on the next call.
    fn read_batch(
        &mut self,
        batch: &mut EventBatch,
        max_events: usize,
        max_bytes: usize,
    ) -> Result<(), SourceError> {
        while batch.len() < max_events && batch.byte_len() < max_bytes {
            if !self.push_next(batch)? {
                break;
            }
        }
        Ok(())
    }
    /// Appends the next complete event to `batch`; false at the end of the complete events.
    /// Readers that hold the event in a buffer of their own override this to copy it once.
    fn push_next(&mut self, batch: &mut EventBatch) -> Result<bool, SourceError> {
        Ok(self.next_event()?.map(|ev| batch.push(&ev)).is_some())
    }
    /// File and offset of the next event this reader returns.
    fn position(&self) -> BinlogPosition;
}

/// What a dump session for a standby of an HA group sends after each transaction (see
/// `BinlogStore::relay_txn`); its bytes are a relay event's.
pub use tibinlog_protocol::binlog::events::relay::RelayTag;

/// A binlog position lined up with a TiDB timestamp (see [`BinlogSource::snapshot_point`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotPoint {
    pub ts: u64,
    pub end: BinlogPosition,
    pub gtid_executed: GtidSet,
}

/// Catalog answers for SQL clients: the schema valid at the current end of the binlog.
///
/// The answers never run ahead of the binlog: a table changed by a DDL whose event is not yet
/// durable is shown as it was before that DDL, so a client that reads `SHOW MASTER STATUS` and
/// then the tables (Debezium's snapshot) gets a schema that matches the events after that position.
pub trait SchemaProvider: Send + Sync + 'static {
    /// The catalog as it is at binlog end `end` (every DDL before `end` applied, none after),
    /// fixed: later DDLs do not change its answers. A session holding a read lock answers from it.
    fn at(&self, end: &BinlogPosition) -> std::sync::Arc<dyn SchemaProvider>;
    /// The whole catalog in MySQL's terms (information_schema, SHOW, snapshot reads).
    fn catalog(&self) -> std::sync::Arc<crate::sql::catalog::CatalogSnapshot>;
}

/// A schema provider that knows nothing: every table is unknown.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptySchema;

impl SchemaProvider for EmptySchema {
    fn at(&self, _end: &BinlogPosition) -> std::sync::Arc<dyn SchemaProvider> {
        std::sync::Arc::new(EmptySchema)
    }
    fn catalog(&self) -> std::sync::Arc<crate::sql::catalog::CatalogSnapshot> {
        std::sync::Arc::default()
    }
}

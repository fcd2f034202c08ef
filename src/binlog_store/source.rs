//! The binlog store as the server's [`BinlogSource`].
//!
//! Reads go straight to [`BinlogFiles`] (metadata in memory, events from the files). Purges
//! change the store, which only its writer may do: they are sent to the writer thread as
//! [`PurgeRequest`]s and the caller (a statement running on the blocking pool) waits for the
//! answer.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tibinlog_protocol::binlog::{ChecksumAlg, GtidSet, RowMetadata};
use tibinlog_protocol::wire::errors::{ER_WARN_PURGE_LOG_IN_USE, MSG_MORE_GTIDS};
use tokio::sync::{mpsc, watch};

use crate::binlog_store::{BinlogFiles, DumpError, Purged, StoreError, StorePos};
use crate::server::source::RelayTag;
use crate::server::{
    BinlogFile, BinlogPosition, BinlogReader, BinlogSource, EventBatch, SnapshotPoint, SourceError,
};
use crate::sql::error::SqlWarning;

/// How long a purge waits for the writer thread.
const PURGE_TIMEOUT: Duration = Duration::from_secs(60);

/// `PURGE BINARY LOGS …` for the writer thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purge {
    /// `TO 'file'`.
    To(String),
    /// `BEFORE <unix seconds>`.
    Before(u64),
    /// `binlog_expire_logs_seconds` before the time given (unix seconds).
    Expired(u64),
}

/// A purge's answer: the warnings of a purge that stopped early.
pub type PurgeAnswer = Result<Vec<SqlWarning>, SourceError>;

/// A purge and where its answer goes (nowhere for the expiry timer's).
#[derive(Debug)]
pub struct PurgeRequest {
    pub purge: Purge,
    pub reply: Option<std_mpsc::SyncSender<PurgeAnswer>>,
}

/// Message to the writer thread.
#[derive(Debug)]
pub enum WriterMsg<E> {
    /// Something from the changefeed, with what it holds of the queue's byte budget (the
    /// writer gives it back once the event is written).
    Event(E, u32),
    /// A purge from a SQL session.
    Purge(PurgeRequest),
    /// The changefeed restarts from the durable checkpoint: drop an open transaction.
    Reset,
    /// Close the store and end the thread.
    Stop,
    /// An HA standby: a transaction of the owner's binlog, its events as they are there.
    /// `catalog`: the included tables after it, when it is a DDL.
    Relayed {
        events: Vec<u8>,
        tag: RelayTag,
        catalog: Option<crate::mounter::Catalog>,
    },
    /// An HA standby: the owner's stream is at snapshot point `ts`, `file`/`pos`.
    RelayedCheckpoint { ts: u64, file: String, pos: u64 },
    /// An HA standby: the header timestamp of the owner's first file, for a store with
    /// nothing in it yet.
    RelayedFirstFile { timestamp: u32 },
    /// An HA standby: make what was relayed durable and answer where following resumes (or
    /// why the owner's binlog was refused since the last ask).
    RelayFrom(tokio::sync::oneshot::Sender<Result<RelayStart, String>>),
}

/// Where a standby resumes following the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayStart {
    pub file: String,
    pub pos: u64,
    /// Nothing is in the store yet: the stream starts at the first file's start, whose
    /// timestamp the store takes.
    pub pristine: bool,
}

/// [`BinlogSource`] over the store's files.
#[derive(Debug)]
pub struct StoreSource<E> {
    files: BinlogFiles,
    checksum: bool,
    row_metadata: RowMetadata,
    end: watch::Receiver<BinlogPosition>,
    writer: mpsc::Sender<WriterMsg<E>>,
}

impl<E: Send + 'static> StoreSource<E> {
    /// Wraps `files` (written with `checksum`); purges go to `writer`. Spawns the task that
    /// mirrors the store's end watch in file-name form, so it needs a runtime.
    pub fn new(files: BinlogFiles, checksum: bool, writer: mpsc::Sender<WriterMsg<E>>) -> Self {
        let mut rx = files.subscribe();
        let named =
            |f: &BinlogFiles, p: StorePos| BinlogPosition::new(f.file_name(p.file_seq), p.offset);
        let (tx, end) = watch::channel(named(&files, *rx.borrow_and_update()));
        let f = files.clone();
        tokio::spawn(async move {
            // Ends (dropping `tx`, which closes every subscriber) when the writer is dropped.
            while rx.changed().await.is_ok() {
                let pos = named(&f, *rx.borrow_and_update());
                tx.send_replace(pos);
            }
        });
        StoreSource {
            files,
            checksum,
            row_metadata: RowMetadata::Full,
            end,
            writer,
        }
    }

    /// The `binlog_row_metadata` the writer uses (FULL unless said otherwise).
    pub fn with_row_metadata(mut self, m: RowMetadata) -> Self {
        self.row_metadata = m;
        self
    }

    fn purge(&self, purge: Purge) -> PurgeAnswer {
        let (reply, answer) = std_mpsc::sync_channel(1);
        let gone = || SourceError::Refused("the binlog writer is not running".into());
        self.writer
            .blocking_send(WriterMsg::Purge(PurgeRequest {
                purge,
                reply: Some(reply),
            }))
            .map_err(|_| gone())?;
        match answer.recv_timeout(PURGE_TIMEOUT) {
            Ok(r) => r,
            Err(std_mpsc::RecvTimeoutError::Timeout) => Err(SourceError::Io(
                "the binlog writer did not answer the purge in time".into(),
            )),
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Err(gone()),
        }
    }
}

/// The server's view of a read-side error.
pub fn source_error(e: DumpError) -> SourceError {
    match e {
        DumpError::UnknownFile { file } => SourceError::UnknownFile { file },
        DumpError::PositionBelow4 { pos } => SourceError::NotAtEventBoundary {
            file: String::new(),
            pos,
        },
        DumpError::PositionPastEnd { file, pos, .. } => SourceError::PastEnd { file, pos },
        DumpError::NotEventBoundary { file, pos } => SourceError::NotAtEventBoundary { file, pos },
        DumpError::GtidsPurged { .. } => SourceError::Purged,
        e @ (DumpError::TsPurged { .. } | DumpError::TsAhead { .. }) => {
            SourceError::Refused(e.to_string())
        }
        DumpError::ClientHasMoreGtids { extra } => SourceError::Refused(format!(
            "{MSG_MORE_GTIDS} (GTIDs the binlog lacks: {extra})"
        )),
        DumpError::WriterGone => SourceError::Io("binlog writer stopped".into()),
        DumpError::Io { path, source } => {
            SourceError::Io(format!("reading {}: {source}", path.display()))
        }
        DumpError::Corrupt {
            file,
            offset,
            reason,
        } => SourceError::Corrupt {
            file,
            pos: offset,
            detail: reason.to_string(),
        },
    }
}

/// The server's view of a writer-side error of a purge.
/// The answer to a SQL session of a purge that ran.
pub fn purge_answer(r: Result<Purged, StoreError>) -> PurgeAnswer {
    let purged = r.map_err(purge_error)?;
    Ok(purged
        .in_use
        .iter()
        .map(|u| SqlWarning::new(ER_WARN_PURGE_LOG_IN_USE, u.message(purged.files.len())))
        .collect())
}

fn purge_error(e: StoreError) -> SourceError {
    match e {
        StoreError::UnknownFile { file } => SourceError::UnknownFile { file },
        other => SourceError::Io(other.to_string()),
    }
}

impl<E: Send + 'static> BinlogSource for StoreSource<E> {
    fn checksum_alg(&self) -> ChecksumAlg {
        if self.checksum {
            ChecksumAlg::Crc32
        } else {
            ChecksumAlg::Off
        }
    }

    fn row_metadata(&self) -> RowMetadata {
        self.row_metadata
    }

    fn files(&self) -> Vec<BinlogFile> {
        self.files
            .list()
            .into_iter()
            .map(|(name, size)| BinlogFile { name, size })
            .collect()
    }

    fn end_position(&self) -> BinlogPosition {
        let (file, pos) = self.files.current_end();
        BinlogPosition::new(file, pos)
    }

    fn subscribe_end(&self) -> watch::Receiver<BinlogPosition> {
        self.end.clone()
    }

    fn gtid_executed(&self) -> GtidSet {
        self.files.gtid_executed()
    }

    fn status(&self) -> (BinlogPosition, GtidSet) {
        let (end, gtids) = self.files.status();
        (
            BinlogPosition::new(self.files.file_name(end.file_seq), end.offset),
            gtids,
        )
    }

    fn gtid_purged(&self) -> GtidSet {
        self.files.purged_gtids()
    }

    fn position_for_ts(&self, ts: u64) -> Result<BinlogPosition, SourceError> {
        let p = self
            .files
            .locate_ts(crate::model::Ts(ts))
            .map_err(source_error)?;
        Ok(BinlogPosition::new(
            self.files.file_name(p.file_seq),
            p.offset,
        ))
    }

    fn ts_for_position(&self, pos: &BinlogPosition) -> Option<u64> {
        let p = self.files.parse_position(&pos.file, pos.pos)?;
        self.files.ts_at(p).map(|t| t.0)
    }

    fn snapshot_point(&self) -> Option<SnapshotPoint> {
        self.files.snapshot_point().map(|p| SnapshotPoint {
            ts: p.ts.0,
            end: BinlogPosition::new(self.files.file_name(p.end.file_seq), p.end.offset),
            gtid_executed: p.gtid_executed,
        })
    }

    fn txn_ending_at(&self, file: &str, pos: u64) -> Option<RelayTag> {
        let p = self.files.parse_position(file, pos)?;
        self.files.txn_ending_at(p).map(|e| RelayTag {
            start_ts: e.start_ts.0,
            commit_ts: e.commit_ts.0,
            part: e.part,
        })
    }

    fn open(&self, file: &str, pos: u64) -> Result<Box<dyn BinlogReader>, SourceError> {
        let reader = self.files.open_reader(file, pos).map_err(source_error)?;
        Ok(Box::new(FileReader {
            file_seq: reader.position().file_seq,
            file: reader.file_name(),
            pos,
            reader,
            rotated: false,
        }))
    }

    fn locate_gtid_start(&self, have: &GtidSet) -> Result<BinlogPosition, SourceError> {
        // Validates the set (purged GTIDs, GTIDs this server never wrote).
        let at = self.files.locate_gtid(have).map_err(source_error)?;
        // MySQL starts in the newest file whose PREVIOUS_GTIDS the client has; the dump
        // session skips the transactions it has from there.
        let seq = self
            .files
            .shared
            .read()
            .files
            .iter()
            .rev()
            .find(|f| f.previous_gtids.is_subset_of(have))
            .map_or(at.file_seq, |f| f.seq.min(at.file_seq));
        Ok(BinlogPosition::new(self.files.file_name(seq), 4))
    }

    fn position_for_gtids(&self, have: &GtidSet) -> Result<BinlogPosition, SourceError> {
        // One position stands for `have` only if it holds every transaction of this server's
        // up to some N and none after (a set with a hole is no single position).
        let sid = self.files.server_uuid();
        let own: Vec<(u64, u64)> = have
            .iter()
            .filter(|(s, _)| **s == sid)
            .flat_map(|(_, ivs)| ivs.iter().copied())
            .collect();
        match own.as_slice() {
            [] | [(1, _)] => {}
            _ => {
                return Err(SourceError::Refused(format!(
                    "{have} is not the transactions of {sid} up to one of them (from 1 on, \
                     without a gap): it stands for no single position"
                )))
            }
        }
        let at = self.files.locate_gtid(have).map_err(source_error)?;
        Ok(BinlogPosition::new(
            self.files.file_name(at.file_seq),
            at.offset,
        ))
    }

    fn purge_to(&self, file: &str) -> PurgeAnswer {
        self.purge(Purge::To(file.to_owned()))
    }

    fn purge_before(&self, unix_secs: u64) -> PurgeAnswer {
        self.purge(Purge::Before(unix_secs))
    }
}

/// Reads one file: stops after its ROTATE (the server opens the next file itself).
struct FileReader {
    reader: crate::binlog_store::StoreReader,
    file_seq: u32,
    file: String,
    pos: u64,
    rotated: bool,
}

/// `ROTATE_EVENT`.
const ROTATE: u8 = 4;

impl FileReader {
    /// The next event of this file, handed to `take` without a copy of its own.
    fn next_with<R>(&mut self, take: impl FnOnce(&[u8]) -> R) -> Result<Option<R>, SourceError> {
        if self.rotated {
            return Ok(None);
        }
        let Some(ev) = self.reader.try_next().map_err(source_error)? else {
            return Ok(None);
        };
        if ev.file_seq != self.file_seq {
            // Only reachable if a closed file lacked its ROTATE.
            return Err(SourceError::Corrupt {
                file: self.file.clone(),
                pos: self.pos,
                detail: "file ends without a ROTATE event".into(),
            });
        }
        self.pos = ev.end();
        if ev.event_type().0 == ROTATE {
            self.rotated = true;
        }
        Ok(Some(take(ev.bytes)))
    }
}

impl BinlogReader for FileReader {
    fn next_event(&mut self) -> Result<Option<Vec<u8>>, SourceError> {
        self.next_with(<[u8]>::to_vec)
    }

    fn push_next(&mut self, batch: &mut EventBatch) -> Result<bool, SourceError> {
        Ok(self.next_with(|ev| batch.push(ev))?.is_some())
    }

    fn position(&self) -> BinlogPosition {
        BinlogPosition::new(self.file.clone(), self.pos)
    }
}

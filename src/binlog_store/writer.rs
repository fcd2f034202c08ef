//! [`BinlogStore`]: the writer. Runs on one thread; every method is synchronous and does its
//! own I/O (fsync at [`BinlogStore::flush`] and at rotation only).
//!
//! ```text
//!            begin_txn          write_rows*            commit_txn
//! Idle ─────────────────► InTxn ───────────► InTxn ──────────────► Idle (+ rotate if full)
//!   │  write_ddl (GTID + QUERY, then Idle)       └── abort_txn ──► Idle
//!   └─ flush(checkpoint): map records + fsync, binlog bytes + fsync, publish the durable end
//! ```
//! Bytes live in `pending` until a flush (or a spill) writes them: `pending` holds the file's
//! bytes `[written, pos)`.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use tibinlog_protocol::binlog::events::gtid::FLAG_MAY_HAVE_SBR;
use tibinlog_protocol::binlog::{
    shift_log_pos, EventWriter, GtidEvent, GtidSet, QueryEvent, RowsKind, TableMap, Xid,
};
use tokio::sync::watch;

use super::error::{Result, StoreError};
use super::files::{BinlogFiles, FileInfo, Shared};
use super::index::{file_name, WriteGuard};
use super::map::{MapFile, Record, TxnEntry, TxnOrder};
use super::prologue::prologue;
use super::{header_timestamp, StoreConfig, StorePos, MIN_SPILL_THRESHOLD};
use crate::model::Ts;
use crate::mounter::{DdlEvent, RowChange, RowOp};

mod relay;
mod rotate;

/// `pseudo_thread_id` of every QUERY event: there are no sessions, and a constant keeps the
/// output deterministic.
pub const THREAD_ID: u32 = 1;
/// A spilled transaction is written out in chunks of this size while it streams.
const STREAM_CHUNK: usize = 1 << 20;
/// Offset of the FORMAT_DESCRIPTION's header flags in a file (magic 4 + header offset 17).
const FDE_FLAGS_OFFSET: u64 = 4 + 17;

/// A committed transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    pub gno: u64,
    /// Position after its last event (durable only after the next flush).
    pub end: StorePos,
}

/// The transaction being written.
#[derive(Debug, Clone, Copy)]
struct OpenTxn {
    start_ts: Ts,
    commit_ts: Ts,
    /// See [`TxnEntry::part`].
    part: u32,
    timestamp: u32,
    gtid: GtidEvent,
    /// File offset of the GTID event.
    start_pos: u64,
    /// Bytes the GTID event occupies now.
    gtid_len: usize,
    /// Its bytes are (partly) in the file already; the GTID event has its final size.
    spilled: bool,
}

/// The binlog writer; see the module docs of [`super`].
#[derive(Debug)]
pub struct BinlogStore {
    pub(crate) cfg: StoreConfig,
    pub(crate) shared: Arc<Shared>,
    pub(crate) end_tx: watch::Sender<StorePos>,
    pub(crate) ew: EventWriter,
    pub(crate) version: u32,
    pub(crate) file: File,
    pub(crate) file_seq: u32,
    pub(crate) path: PathBuf,
    /// File offset after every byte accepted.
    pub(crate) pos: u64,
    /// File offset up to which bytes are in the file.
    pub(crate) written: u64,
    pub(crate) pending: Vec<u8>,
    /// `sequence_number` of the last transaction in the current file.
    pub(crate) seq_in_file: i64,
    pub(crate) next_gno: u64,
    /// GTIDs of every committed transaction, flushed or not.
    pub(crate) gtid_executed: GtidSet,
    pub(crate) last_written: Option<TxnOrder>,
    /// Header timestamp of the last transaction (stamps ROTATE and the next file's prologue).
    pub(crate) last_timestamp: u32,
    txn: Option<OpenTxn>,
    /// Committed transactions not yet published to readers.
    pub(crate) unsynced: Vec<TxnEntry>,
    /// How many of `unsynced` already have their map record.
    pub(crate) recorded: usize,
    /// The durable end (what readers see).
    pub(crate) synced_end: StorePos,
    /// The last Synced marker in the map.
    pub(crate) marker_written: StorePos,
    /// The last checkpoint record in the map.
    pub(crate) checkpoint: Option<(Ts, StorePos)>,
    pub(crate) map: MapFile,
    scratch: Vec<u8>,
    records: Vec<Record>,
    /// Asked before every change to the files (see [`WriteGuard`]).
    pub(crate) guard: WriteGuard,
}

impl BinlogStore {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        cfg: StoreConfig,
        shared: Arc<Shared>,
        end_tx: watch::Sender<StorePos>,
        checksum: bool,
        file: File,
        file_seq: u32,
        pos: u64,
        seq_in_file: i64,
        next_gno: u64,
        gtid_executed: GtidSet,
        last_written: Option<TxnOrder>,
        last_timestamp: u32,
        checkpoint: Option<(Ts, StorePos)>,
        map: MapFile,
    ) -> Self {
        let mut ew = EventWriter::new(cfg.server_id, checksum);
        ew.max_rows_event_size = cfg.max_rows_event_size;
        let version = cfg.server_version_number();
        let path = cfg.data_dir.join(file_name(&cfg.basename, file_seq));
        let end = StorePos::new(file_seq, pos);
        Self {
            cfg,
            shared,
            end_tx,
            ew,
            version,
            file,
            file_seq,
            path,
            pos,
            written: pos,
            pending: Vec::with_capacity(1 << 16),
            seq_in_file,
            next_gno,
            gtid_executed,
            last_written,
            last_timestamp,
            txn: None,
            unsynced: Vec::new(),
            recorded: 0,
            synced_end: end,
            marker_written: end,
            checkpoint,
            map,
            scratch: Vec::new(),
            records: Vec::new(),
            guard: WriteGuard::default(),
        }
    }

    /// The read-side handle.
    pub fn files(&self) -> BinlogFiles {
        BinlogFiles {
            shared: self.shared.clone(),
        }
    }

    /// `(commit_ts, start_ts, part)` of the last transaction committed (flushed or not).
    pub fn last_written(&self) -> Option<TxnOrder> {
        self.last_written
    }

    /// True when the transaction `(commit_ts, start_ts)` (its statement `part`, for a DDL
    /// batch) is already in the binlog: capture resending from the checkpoint must skip it.
    pub fn already_written(&self, commit_ts: Ts, start_ts: Ts, part: u32) -> bool {
        self.last_written
            .is_some_and(|l| (commit_ts, start_ts, part) <= l)
    }

    /// True while the store holds nothing but its first file's prologue: no transaction was
    /// ever written and no checkpoint recorded (a new member of an HA group).
    pub fn is_pristine(&self) -> bool {
        self.file_seq == 1
            && self.next_gno == 1
            && self.last_written.is_none()
            && self.txn.is_none()
            && self.checkpoint.is_none()
    }

    /// A new member of an HA group takes the owner's first file: the prologue of a
    /// [pristine](Self::is_pristine) store is rewritten in place with the owner's header
    /// `timestamp` (the TSO its capture started from stamps it; nothing else in the prologue
    /// depends on more than the configuration). False when it already had it. Refused once
    /// anything is in the store.
    pub fn adopt_first_file(&mut self, timestamp: u32) -> Result<bool> {
        if !self.is_pristine() {
            return Err(StoreError::TxnState {
                call: "adopt_first_file",
                state: "the store has transactions or a checkpoint",
            });
        }
        if self.last_timestamp == timestamp {
            return Ok(false);
        }
        let (buf, end) = prologue(&self.cfg, &mut self.ew, &GtidSet::new(), timestamp)?;
        if end != self.pos || self.pos != self.written || !self.pending.is_empty() {
            return Err(StoreError::TxnState {
                call: "adopt_first_file",
                state: "the first file is not just its prologue",
            });
        }
        // Same length, one small write within the first page, then fsync: the file is the
        // old prologue or the new one.
        self.file
            .write_all_at(&buf, 0)
            .map_err(StoreError::io("write", &self.path))?;
        self.file
            .sync_data()
            .map_err(StoreError::io("fsync", &self.path))?;
        self.last_timestamp = timestamp;
        if let Some(f) = self.shared.write().files.first_mut() {
            f.last_secs = timestamp;
        }
        Ok(true)
    }

    /// Sets the guard asked before every change to the files from now on (an HA owner's
    /// fence); a refusal is [`StoreError::Refused`] and leaves the files as they were.
    pub fn set_write_guard(&mut self, guard: WriteGuard) {
        self.guard = guard;
    }

    /// The GNO the next transaction gets.
    pub fn next_gno(&self) -> u64 {
        self.next_gno
    }

    /// Position after every byte accepted so far (not necessarily durable).
    pub fn write_pos(&self) -> StorePos {
        StorePos::new(self.file_seq, self.pos)
    }

    /// The durable end.
    pub fn durable_end(&self) -> StorePos {
        self.synced_end
    }

    /// The last persisted checkpoint.
    pub fn checkpoint(&self) -> Option<Ts> {
        self.checkpoint.map(|c| c.0)
    }

    fn check_order(&self, commit_ts: Ts, start_ts: Ts, part: u32) -> Result<()> {
        if let Some((pc, ps, pp)) = self.last_written {
            if (commit_ts, start_ts, part) <= (pc, ps, pp) {
                return Err(StoreError::OutOfOrder {
                    prev_commit: pc,
                    prev_start: ps,
                    next_commit: commit_ts,
                    next_start: start_ts,
                });
            }
        }
        Ok(())
    }

    /// Reserves the GTID event of a new transaction at the end of `pending`.
    fn start(&mut self, start_ts: Ts, commit_ts: Ts, part: u32, gtid_flags: u8) -> Result<OpenTxn> {
        if self.txn.is_some() {
            return Err(StoreError::TxnState {
                call: "starting a transaction",
                state: "inside a transaction",
            });
        }
        self.check_order(commit_ts, start_ts, part)?;
        let mut gtid = GtidEvent::new(
            self.cfg.server_uuid,
            self.next_gno,
            self.seq_in_file + 1,
            commit_ts.physical_ms().saturating_mul(1000),
            self.version,
        );
        gtid.flags = gtid_flags;
        // Guess the 3-byte length form (totals 251..65535); fixed at commit.
        gtid.transaction_length = 0xffff;
        let gtid_len = gtid.event_len(self.ew.checksum);
        let txn = OpenTxn {
            start_ts,
            commit_ts,
            part,
            timestamp: header_timestamp(commit_ts),
            gtid,
            start_pos: self.pos,
            gtid_len,
            spilled: false,
        };
        self.pending.resize(self.pending.len() + gtid_len, 0);
        self.pos += gtid_len as u64;
        Ok(txn)
    }

    /// Starts a row transaction: GTID (reserved) and `BEGIN`.
    pub fn begin_txn(&mut self, start_ts: Ts, commit_ts: Ts) -> Result<()> {
        let txn = self.start(start_ts, commit_ts, 0, 0)?;
        self.txn = Some(txn);
        let res = self.ew.write(
            &mut self.pending,
            self.pos,
            txn.timestamp,
            &QueryEvent::begin(THREAD_ID),
        );
        match res {
            Ok(p) => {
                self.pos = p;
                Ok(())
            }
            Err(e) => {
                self.abort_txn()?;
                Err(e.into())
            }
        }
    }

    /// Appends row changes of the open transaction. Consecutive rows of the same table and op
    /// become one statement: TABLE_MAP, then rows events (cut at `max_rows_event_size`, the last
    /// with STMT_END_F). A statement does not continue across calls. On error the failing
    /// statement leaves no bytes; the caller should [`Self::abort_txn`].
    pub fn write_rows(&mut self, rows: &[RowChange]) -> Result<()> {
        let Some(txn) = self.txn else {
            return Err(StoreError::TxnState {
                call: "write_rows",
                state: "outside a transaction",
            });
        };
        let mut i = 0;
        while i < rows.len() {
            let first = &rows[i];
            let n = rows[i..]
                .iter()
                .take_while(|r| {
                    r.op == first.op
                        && (Arc::ptr_eq(&r.table, &first.table) || r.table.def == first.table.def)
                })
                .count();
            let group = &rows[i..i + n];
            for r in group {
                if r.start_ts != txn.start_ts || r.commit_ts != txn.commit_ts {
                    return Err(StoreError::BadRow {
                        table_id: r.table.def.table_id,
                        reason: "row belongs to another transaction",
                    });
                }
            }
            let (mark_len, mark_pos) = (self.pending.len(), self.pos);
            if let Err(e) = self.encode_statement(txn.timestamp, group) {
                self.pending.truncate(mark_len);
                self.pos = mark_pos;
                return Err(e);
            }
            self.after_statement()?;
            i += n;
        }
        Ok(())
    }

    fn encode_statement(&mut self, timestamp: u32, group: &[RowChange]) -> Result<()> {
        let def = &group[0].table.def;
        let map = TableMap {
            table: def,
            metadata: self.cfg.row_metadata,
        };
        self.pos = self
            .ew
            .write(&mut self.pending, self.pos, timestamp, &map)?;
        let kind = match group[0].op {
            RowOp::Insert => RowsKind::Write,
            RowOp::Update => RowsKind::Update,
            RowOp::Delete => RowsKind::Delete,
        };
        let missing = |reason| StoreError::BadRow {
            table_id: def.table_id,
            reason,
        };
        let mut rw = self
            .ew
            .rows(&mut self.pending, self.pos, timestamp, def, kind);
        for r in group {
            match r.op {
                RowOp::Insert => rw.write_row(
                    r.after
                        .as_deref()
                        .ok_or(missing("insert without after image"))?,
                )?,
                RowOp::Delete => rw.write_row(
                    r.before
                        .as_deref()
                        .ok_or(missing("delete without before image"))?,
                )?,
                RowOp::Update => rw.update_row(
                    r.before
                        .as_deref()
                        .ok_or(missing("update without before image"))?,
                    r.after
                        .as_deref()
                        .ok_or(missing("update without after image"))?,
                )?,
            }
        }
        self.pos = rw.finish()?;
        Ok(())
    }

    /// Spills a transaction that got big, or streams more of a spilled one.
    fn after_statement(&mut self) -> Result<()> {
        let Some(txn) = self.txn else {
            return Ok(());
        };
        if txn.spilled {
            if self.pending.len() >= STREAM_CHUNK {
                self.write_out()?;
            }
            return Ok(());
        }
        let threshold = self.cfg.spill_threshold.max(MIN_SPILL_THRESHOLD);
        if self.pos - txn.start_pos <= threshold {
            return Ok(());
        }
        // Committed transactions ahead of this one are about to reach the file: their map
        // records go first (the map must never be behind the binlog).
        self.record_unsynced()?;
        let idx = (txn.start_pos - self.written) as usize;
        let mut gtid = txn.gtid;
        gtid.transaction_length = MIN_SPILL_THRESHOLD; // 9-byte form, final size
        self.scratch.clear();
        self.ew
            .write(&mut self.scratch, txn.start_pos, txn.timestamp, &gtid)?;
        let new_len = self.scratch.len();
        let delta = new_len as i64 - txn.gtid_len as i64;
        self.pending
            .splice(idx..idx + txn.gtid_len, self.scratch.iter().copied());
        shift_log_pos(&mut self.pending[idx + new_len..], delta, self.ew.checksum)?;
        self.pos = self.pos.wrapping_add_signed(delta);
        self.txn = Some(OpenTxn {
            gtid_len: new_len,
            spilled: true,
            ..txn
        });
        self.write_out()
    }

    /// Ends the open row transaction with XID = start_ts.
    pub fn commit_txn(&mut self) -> Result<Committed> {
        let Some(txn) = self.txn else {
            return Err(StoreError::TxnState {
                call: "commit_txn",
                state: "outside a transaction",
            });
        };
        self.pos = self.ew.write(
            &mut self.pending,
            self.pos,
            txn.timestamp,
            &Xid(txn.start_ts.0),
        )?;
        self.finish(txn)
    }

    /// Writes a DDL statement as its own transaction: GTID + QUERY (db = schema).
    pub fn write_ddl(&mut self, ddl: &DdlEvent) -> Result<Committed> {
        let txn = self.start(ddl.start_ts, ddl.commit_ts, ddl.part, FLAG_MAY_HAVE_SBR)?;
        self.txn = Some(txn);
        let dbs = [ddl.schema.as_str()];
        let updated: &[&str] = if ddl.schema.is_empty() { &[] } else { &dbs };
        let q = QueryEvent::ddl(THREAD_ID, &ddl.schema, &ddl.query, updated, ddl.start_ts.0);
        match self
            .ew
            .write(&mut self.pending, self.pos, txn.timestamp, &q)
        {
            Ok(p) => self.pos = p,
            Err(e) => {
                self.abort_txn()?;
                return Err(e.into());
            }
        }
        self.finish(txn)
    }

    /// Writes the final GTID event of `txn`, whose last event is written.
    fn finish(&mut self, txn: OpenTxn) -> Result<Committed> {
        let crc = self.ew.checksum;
        let rest = self.pos - txn.start_pos - txn.gtid_len as u64;
        let mut gtid = txn.gtid;
        gtid.set_transaction_length(rest, crc);
        self.scratch.clear();
        self.ew
            .write(&mut self.scratch, txn.start_pos, txn.timestamp, &gtid)?;
        if txn.spilled {
            if self.scratch.len() != txn.gtid_len {
                debug_assert!(false, "spilled GTID event changed size");
                return Err(StoreError::Corrupt {
                    file: self.file_name(),
                    offset: txn.start_pos,
                    reason: "spilled GTID event changed size",
                });
            }
            self.guard.check()?;
            self.file
                .write_all_at(&self.scratch, txn.start_pos)
                .map_err(StoreError::io("write", &self.path))?;
        } else {
            let idx = (txn.start_pos - self.written) as usize;
            let new_len = self.scratch.len();
            let delta = new_len as i64 - txn.gtid_len as i64;
            self.pending
                .splice(idx..idx + txn.gtid_len, self.scratch.iter().copied());
            if delta != 0 {
                shift_log_pos(&mut self.pending[idx + new_len..], delta, crc)?;
                self.pos = self.pos.wrapping_add_signed(delta);
            }
        }
        self.txn = None;
        self.committed(
            (txn.commit_ts, txn.start_ts, txn.part),
            txn.gtid.gno,
            txn.gtid.sequence_number,
            txn.timestamp,
        )
    }

    /// The bookkeeping after a transaction's last byte is in `pending` (written here or
    /// relayed): GTID state, its mapping entry, and the rotation after a full file.
    fn committed(
        &mut self,
        (commit_ts, start_ts, part): TxnOrder,
        gno: u64,
        sequence_number: i64,
        timestamp: u32,
    ) -> Result<Committed> {
        self.seq_in_file = sequence_number;
        self.next_gno = gno + 1;
        self.gtid_executed.add(self.cfg.server_uuid, gno);
        self.last_written = Some((commit_ts, start_ts, part));
        self.last_timestamp = timestamp;
        let entry = TxnEntry {
            start_ts,
            commit_ts,
            gno,
            file_seq: self.file_seq,
            end_pos: self.pos,
            part,
        };
        self.unsynced.push(entry);
        if self.pos >= self.cfg.max_binlog_size {
            self.rotate()?;
        }
        Ok(Committed {
            gno,
            end: entry.end(),
        })
    }

    /// Drops the open transaction (nothing of it will be in the binlog).
    pub fn abort_txn(&mut self) -> Result<()> {
        let Some(txn) = self.txn.take() else {
            return Ok(());
        };
        if txn.start_pos >= self.written {
            self.pending
                .truncate((txn.start_pos - self.written) as usize);
        } else {
            // Spilled: everything before it is in the file, cut the file back.
            self.pending.clear();
            self.guard.check()?;
            self.file
                .set_len(txn.start_pos)
                .map_err(StoreError::io("truncate", &self.path))?;
            // The append cursor must follow the cut, or the next write leaves a hole.
            self.file
                .seek(SeekFrom::Start(txn.start_pos))
                .map_err(StoreError::io("seek", &self.path))?;
            self.written = txn.start_pos;
        }
        self.pos = txn.start_pos;
        Ok(())
    }

    fn file_name(&self) -> String {
        file_name(&self.cfg.basename, self.file_seq)
    }

    /// Writes `pending` to the file (no fsync).
    fn write_out(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            self.guard.check()?;
            self.file
                .write_all(&self.pending)
                .map_err(StoreError::io("write", &self.path))?;
            self.written += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }

    /// Appends map records of committed transactions that have none yet, and fsyncs the map.
    fn record_unsynced(&mut self) -> Result<()> {
        self.record_unsynced_with(None)
    }

    /// [`Self::record_unsynced`] plus `extra` (a checkpoint) in the same fsync.
    fn record_unsynced_with(&mut self, extra: Option<Record>) -> Result<()> {
        self.records.clear();
        if self.marker_written < self.synced_end {
            self.records.push(Record::Synced(self.synced_end));
        }
        self.records.extend(
            self.unsynced[self.recorded..]
                .iter()
                .map(|e| Record::Txn(*e)),
        );
        self.records.extend(extra);
        if !self.records.is_empty() {
            self.guard.check()?;
            self.map.append_sync(&self.records)?;
        }
        self.marker_written = self.synced_end;
        self.recorded = self.unsynced.len();
        Ok(())
    }

    /// Group commit: makes every committed transaction durable, persists `checkpoint` (the
    /// watermark after which everything is written) with the mapping, and wakes readers.
    pub fn flush(&mut self, checkpoint: Ts) -> Result<()> {
        self.sync(Some(checkpoint))
    }

    fn sync(&mut self, checkpoint: Option<Ts>) -> Result<()> {
        if self.txn.is_some() {
            return Err(StoreError::TxnState {
                call: "flush",
                state: "inside a transaction",
            });
        }
        if let (Some(next), Some((prev, _))) = (checkpoint, self.checkpoint) {
            if next < prev {
                return Err(StoreError::CheckpointRegressed { prev, next });
            }
        }
        let end = StorePos::new(self.file_seq, self.pos);
        let new_checkpoint = checkpoint.filter(|c| self.checkpoint.map(|p| p.0) != Some(*c));
        if end == self.synced_end && new_checkpoint.is_none() {
            return Ok(());
        }
        let rec = new_checkpoint.map(|c| Record::Checkpoint {
            checkpoint: c,
            requires: end,
        });
        self.record_unsynced_with(rec)?;
        if let Some(c) = new_checkpoint {
            self.checkpoint = Some((c, end));
        }
        if end != self.synced_end {
            self.write_out()?;
            let started = std::time::Instant::now();
            self.file
                .sync_data()
                .map_err(StoreError::io("fsync", &self.path))?;
            self.cfg
                .metrics
                .fsync_seconds
                .observe(started.elapsed().as_secs_f64());
            self.publish(end, None);
        } else if new_checkpoint.is_some() {
            if let Some(point) = self.snapshot_point(end) {
                self.shared.write().snapshot = Some(point);
            }
        }
        Ok(())
    }

    /// The snapshot point the checkpoint makes, if any: only a checkpoint recorded at the
    /// durable end, when no transaction before `end` committed after it (everything up to it
    /// is before `end`, nothing after it is). After a restart, the binlog can be ahead of the
    /// checkpoint capture resumed from until the resent transactions are skipped past.
    fn snapshot_point(&self, end: StorePos) -> Option<super::files::StoreSnapshotPoint> {
        let (ts, requires) = self.checkpoint?;
        let after = self.last_written.is_some_and(|(c, _, _)| c > ts);
        (requires == end && !after).then(|| super::files::StoreSnapshotPoint {
            ts,
            end,
            gtid_executed: self.gtid_executed.clone(),
        })
    }

    /// Makes what is durable visible: entries, sizes, GTIDs, then the watch.
    fn publish(&mut self, end: StorePos, new_file: Option<FileInfo>) {
        if !self.unsynced.is_empty() {
            self.cfg
                .metrics
                .group_commit
                .observe(self.unsynced.len() as f64);
        }
        {
            let mut st = self.shared.write();
            st.entries.append(&mut self.unsynced);
            if let Some(f) = st.files.iter_mut().rev().find(|f| f.seq == self.file_seq) {
                f.size = self.pos;
                f.last_secs = self.last_timestamp.max(f.last_secs);
            }
            st.files.extend(new_file);
            st.gtid_executed.clone_from(&self.gtid_executed);
            if let Some(point) = self.snapshot_point(end) {
                st.snapshot = Some(point);
            }
            // Under the lock, so `BinlogFiles::status` reads an end and a GTID set that agree.
            self.end_tx.send_replace(end);
        }
        self.recorded = 0;
        self.synced_end = end;
    }

    /// Clean shutdown: aborts an open transaction, makes everything durable (the checkpoint
    /// stays where it is) and clears BINLOG_IN_USE in the open file.
    pub fn close(mut self) -> Result<()> {
        self.abort_txn()?;
        self.sync(None)?;
        self.guard.check()?;
        self.file
            .write_all_at(&[0, 0], FDE_FLAGS_OFFSET)
            .map_err(StoreError::io("write", &self.path))?;
        self.file
            .sync_data()
            .map_err(StoreError::io("fsync", &self.path))
    }
}

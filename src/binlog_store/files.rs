//! The read side: [`BinlogFiles`], a cloneable handle on the files for dump sessions, and
//! [`BinlogReader`], which yields the raw bytes of each event (header, body, CRC exactly as in
//! the file), follows ROTATE into the next file, and at the live end waits on the writer's
//! watch of the durable end.
//!
//! Readers only ever see fsynced, complete transactions: the watch moves at group commit, after
//! the fsync. Files are plain reads through the page cache; a caller that wants them off the
//! async runtime can call [`BinlogReader::try_next`] from `spawn_blocking`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tibinlog_protocol::binlog::codec::Reader;
use tibinlog_protocol::binlog::{EventHeader, EventType, GtidSet, Sid, HEADER_LEN};
use tokio::sync::watch;

use super::error::DumpError;
use super::index::{file_name, parse_file_name};
use super::map::TxnEntry;
use super::scan::{open_at, read_event, ReadOutcome};
use super::BinlogPos;
use crate::model::Ts;

/// What the store knows of one file.
#[derive(Debug, Clone)]
pub(crate) struct FileInfo {
    pub seq: u32,
    /// Durable size: the whole file once closed, the durable end for the open one.
    pub size: u64,
    /// Offset of the first transaction.
    pub prologue_end: u64,
    pub previous_gtids: GtidSet,
    /// Header timestamp of the last transaction (of the FORMAT_DESCRIPTION without one); purge
    /// by time compares it.
    pub last_secs: u32,
}

/// State shared by the writer and the readers. Only durable data is in here.
#[derive(Debug, Default)]
pub(crate) struct FilesState {
    pub files: Vec<FileInfo>,
    /// Every transaction of `files`, in binlog order. Dense: 40 bytes per retained
    /// transaction; purge is what bounds it. (A sampled index over the on-disk map would bound
    /// it independently of retention.)
    pub entries: Vec<TxnEntry>,
    pub gtid_executed: GtidSet,
    /// commit_ts and gno of the last purged transaction.
    pub purged_horizon: Option<(Ts, u64)>,
    /// The newest durable checkpoint whose binlog end is known exactly (see
    /// [`SnapshotPoint`]).
    pub snapshot: Option<SnapshotPoint>,
}

/// A position where the binlog and the upstream history line up: every transaction with
/// `commit_ts <= ts` is before `end`, every later one after it. A snapshot read at `ts` plus
/// the binlog from `end` is exactly the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotPoint {
    pub ts: Ts,
    pub end: BinlogPos,
    /// `@@gtid_executed` at `end`.
    pub gtid_executed: GtidSet,
}

impl FilesState {
    pub(crate) fn file(&self, seq: u32) -> Option<&FileInfo> {
        self.files
            .binary_search_by_key(&seq, |f| f.seq)
            .ok()
            .map(|i| &self.files[i])
    }

    /// Start offset of the transaction `entries[i]`.
    pub(crate) fn txn_start(&self, i: usize) -> u64 {
        let e = &self.entries[i];
        match i.checked_sub(1).map(|j| &self.entries[j]) {
            Some(p) if p.file_seq == e.file_seq => p.end_pos,
            _ => self.file(e.file_seq).map_or(4, |f| f.prologue_end),
        }
    }

    /// Entries of file `seq` (a range of `entries`).
    pub(crate) fn entries_of(&self, seq: u32) -> std::ops::Range<usize> {
        let a = self.entries.partition_point(|e| e.file_seq < seq);
        let b = self.entries.partition_point(|e| e.file_seq <= seq);
        a..b
    }

    /// The GTIDs of purged files: PREVIOUS_GTIDS of the first file.
    pub(crate) fn purged_gtids(&self) -> GtidSet {
        self.files
            .first()
            .map(|f| f.previous_gtids.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub dir: PathBuf,
    pub basename: String,
    pub server_uuid: Sid,
    pub state: RwLock<FilesState>,
    pub end_rx: watch::Receiver<BinlogPos>,
    /// The files readers are on.
    pub in_use: Mutex<InUse>,
}

/// Which files readers are on, so that a purge leaves them and every later file (as MySQL's
/// PURGE and expiry leave a file a dump thread reads).
#[derive(Debug, Default)]
pub(crate) struct InUse {
    /// Readers per file sequence number.
    readers: BTreeMap<u32, usize>,
    /// Files below this one are purged or being purged: no reader may start on them.
    floor: u32,
}

impl InUse {
    /// The oldest file a reader is on, and how many readers are on it.
    pub(crate) fn first_read(&self) -> Option<(u32, usize)> {
        self.readers.iter().next().map(|(s, n)| (*s, *n))
    }

    /// Files below `seq` are about to be purged: readers can no longer start on them.
    pub(crate) fn raise_floor(&mut self, seq: u32) {
        self.floor = self.floor.max(seq);
    }

    fn enter(&mut self, seq: u32) -> bool {
        if seq < self.floor {
            return false;
        }
        *self.readers.entry(seq).or_default() += 1;
        true
    }

    fn leave(&mut self, seq: u32) {
        if let Some(n) = self.readers.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                self.readers.remove(&seq);
            }
        }
    }
}

impl Shared {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, FilesState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, FilesState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
    fn path(&self, seq: u32) -> PathBuf {
        self.dir.join(file_name(&self.basename, seq))
    }
    pub(crate) fn in_use(&self) -> MutexGuard<'_, InUse> {
        self.in_use.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A cloneable handle on the binlog files for dump sessions and status queries.
#[derive(Debug, Clone)]
pub struct BinlogFiles {
    pub(crate) shared: Arc<Shared>,
}

impl BinlogFiles {
    /// `SHOW BINARY LOGS`: names and durable sizes, oldest first.
    pub fn list(&self) -> Vec<(String, u64)> {
        let st = self.shared.read();
        st.files
            .iter()
            .map(|f| (self.file_name(f.seq), f.size))
            .collect()
    }

    /// The name of file `seq`.
    pub fn file_name(&self, seq: u32) -> String {
        file_name(&self.shared.basename, seq)
    }

    /// `SHOW MASTER STATUS`: the durable end as (file name, offset).
    pub fn current_end(&self) -> (String, u64) {
        let end = self.end_pos();
        (self.file_name(end.file_seq), end.offset)
    }

    /// The durable end.
    pub fn end_pos(&self) -> BinlogPos {
        *self.shared.end_rx.borrow()
    }

    /// The durable end and `@@gtid_executed` at that end, read together (`SHOW MASTER STATUS`).
    pub fn status(&self) -> (BinlogPos, GtidSet) {
        let st = self.shared.read();
        let end = *self.shared.end_rx.borrow();
        (end, st.gtid_executed.clone())
    }

    /// The newest snapshot point: a durable checkpoint and the binlog end it was recorded at.
    pub fn snapshot_point(&self) -> Option<SnapshotPoint> {
        self.shared.read().snapshot.clone()
    }

    /// The position of `pos` in file `name`, if `name` is one of this store's file names.
    pub fn parse_position(&self, name: &str, pos: u64) -> Option<BinlogPos> {
        parse_file_name(&self.shared.basename, name).map(|seq| BinlogPos::new(seq, pos))
    }

    /// A watch of the durable end; it changes at every group commit and rotation, and closes
    /// when the writer is dropped.
    pub fn subscribe(&self) -> watch::Receiver<BinlogPos> {
        self.shared.end_rx.clone()
    }

    /// The first file of the index (a dump with file name "" starts there).
    pub fn first_file(&self) -> String {
        let seq = self.shared.read().files.first().map_or(1, |f| f.seq);
        self.file_name(seq)
    }

    /// The GTID source id of this server.
    pub fn server_uuid(&self) -> Sid {
        self.shared.server_uuid
    }

    /// `@@gtid_executed`: GTIDs of every durable transaction, purged ones included.
    pub fn gtid_executed(&self) -> GtidSet {
        self.shared.read().gtid_executed.clone()
    }

    /// `@@gtid_purged`: GTIDs of the purged files.
    pub fn purged_gtids(&self) -> GtidSet {
        self.shared.read().purged_gtids()
    }

    /// The mapping entry of the durable transaction with `start_ts`, if retained.
    pub fn find_txn(&self, start_ts: Ts) -> Option<TxnEntry> {
        let st = self.shared.read();
        st.entries
            .iter()
            .rev()
            .find(|e| e.start_ts == start_ts)
            .copied()
    }

    /// The durable transaction that ends exactly at `pos`, if retained (a standby following
    /// this binlog learns each transaction's timestamps from it).
    pub fn txn_ending_at(&self, pos: BinlogPos) -> Option<TxnEntry> {
        let st = self.shared.read();
        let i = st.entries.partition_point(|e| e.end() < pos);
        st.entries.get(i).filter(|e| e.end() == pos).copied()
    }

    fn resolve(&self, file: &str) -> Result<u32, DumpError> {
        let unknown = || DumpError::UnknownFile {
            file: file.to_owned(),
        };
        let name = std::path::Path::new(file)
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(unknown)?;
        let seq = parse_file_name(&self.shared.basename, name).ok_or_else(unknown)?;
        self.shared.read().file(seq).ok_or_else(unknown)?;
        Ok(seq)
    }

    /// A reader at `file`/`pos` (COM_BINLOG_DUMP). The position must be 4 or the end of an
    /// event at or before the durable end of the file.
    pub fn open_reader(&self, file: &str, pos: u64) -> Result<BinlogReader, DumpError> {
        let seq = self.resolve(file)?;
        if pos < 4 {
            return Err(DumpError::PositionBelow4 { pos });
        }
        // On the file before it is checked, so that a purge either sees the reader or has
        // already taken the file out of the state.
        let guard = FileInUse::enter(&self.shared, seq).ok_or_else(|| DumpError::UnknownFile {
            file: file.to_owned(),
        })?;
        let end = self.end_pos();
        let (size, scan_from) = {
            let st = self.shared.read();
            let f = st.file(seq).ok_or_else(|| DumpError::UnknownFile {
                file: file.to_owned(),
            })?;
            let size = if seq == end.file_seq {
                end.offset
            } else {
                f.size
            };
            // Start the boundary check at the last transaction end at or before `pos`.
            let r = st.entries_of(seq);
            let k = st.entries[r.clone()].partition_point(|e| e.end_pos <= pos);
            let from = if k == 0 {
                4
            } else {
                st.entries[r.start + k - 1].end_pos
            };
            (size, from)
        };
        if pos > size {
            return Err(DumpError::PositionPastEnd {
                file: file.to_owned(),
                pos,
                size,
            });
        }
        if pos != scan_from {
            self.check_boundary(seq, scan_from, pos)?;
        }
        self.reader_at(BinlogPos::new(seq, pos), guard)
    }

    /// Hops event headers from `from` (a known boundary) to `pos`.
    fn check_boundary(&self, seq: u32, from: u64, pos: u64) -> Result<(), DumpError> {
        let path = self.shared.path(seq);
        let io = |source| DumpError::Io {
            path: path.clone(),
            source,
        };
        let mut r = open_at(&path, from).map_err(io)?;
        let mut at = from;
        let mut hdr = [0u8; HEADER_LEN];
        while at < pos {
            std::io::Read::read_exact(&mut r, &mut hdr).map_err(io)?;
            let h = EventHeader::parse(&hdr).map_err(|_| DumpError::Corrupt {
                file: self.file_name(seq),
                offset: at,
                reason: "bad event header",
            })?;
            at += u64::from(h.event_size);
            std::io::Seek::seek_relative(&mut r, i64::from(h.event_size) - HEADER_LEN as i64)
                .map_err(io)?;
        }
        if at != pos {
            return Err(DumpError::NotEventBoundary {
                file: self.file_name(seq),
                pos,
            });
        }
        Ok(())
    }

    fn reader_at(&self, pos: BinlogPos, in_use: FileInUse) -> Result<BinlogReader, DumpError> {
        let path = self.shared.path(pos.file_seq);
        let file = open_at(&path, pos.offset).map_err(|source| DumpError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(BinlogReader {
            shared: self.shared.clone(),
            end_rx: self.shared.end_rx.clone(),
            pos,
            file,
            in_sync: true,
            ahead: ReadAhead::default(),
            buf: Vec::with_capacity(16 * 1024),
            current: None,
            claim: in_use,
        })
    }

    /// A reader at the start of the file (position 4): what COM_BINLOG_DUMP_GTID streams from.
    pub fn open_reader_at(&self, pos: BinlogPos) -> Result<BinlogReader, DumpError> {
        self.open_reader(&self.file_name(pos.file_seq), pos.offset)
    }

    /// COM_BINLOG_DUMP_GTID: the position of the first transaction whose GTID is not in `set`,
    /// or the durable end when there is none. Refused when `set` lacks purged GTIDs or holds
    /// GTIDs of this server that were never written. Later transactions that are in `set` (a set
    /// with holes) must still be skipped by the dump session.
    pub fn locate_gtid(&self, set: &GtidSet) -> Result<BinlogPos, DumpError> {
        let st = self.shared.read();
        let purged = st.purged_gtids();
        if !purged.is_subset_of(set) {
            return Err(DumpError::GtidsPurged {
                missing: purged.subtract(set).to_string(),
            });
        }
        let mut own = GtidSet::new();
        for (sid, ivs) in set.iter() {
            if *sid == self.shared.server_uuid {
                for &(s, e) in ivs {
                    own.add_interval(*sid, s, e);
                }
            }
        }
        if !own.is_subset_of(&st.gtid_executed) {
            return Err(DumpError::ClientHasMoreGtids {
                extra: own.subtract(&st.gtid_executed).to_string(),
            });
        }
        // MySQL starts in the newest file whose PREVIOUS_GTIDS is contained in the set.
        let start_file = st
            .files
            .iter()
            .rev()
            .find(|f| f.previous_gtids.is_subset_of(set))
            .map_or(0, |f| f.seq);
        let from = st.entries.partition_point(|e| e.file_seq < start_file);
        let sid = self.shared.server_uuid;
        match (from..st.entries.len()).find(|&i| !set.contains(&sid, st.entries[i].gno)) {
            Some(i) => Ok(BinlogPos::new(st.entries[i].file_seq, st.txn_start(i))),
            None => Ok(self.end_pos()),
        }
    }

    /// The TiDB timestamp position `pos` lines up with: the commit ts of the transaction
    /// ending there (of the one before, at a file's first transaction), if every later
    /// transaction committed after it; `None` when `pos` is not a transaction boundary this
    /// store retains, or when a transaction of the same commit ts follows (no timestamp splits
    /// the history there). The durable end answers with its snapshot point's timestamp.
    pub fn ts_at(&self, pos: BinlogPos) -> Option<Ts> {
        let st = self.shared.read();
        if let Some(p) = &st.snapshot {
            if p.end == pos {
                return Some(p.ts);
            }
        }
        // The last transaction ending at or before `pos` and the first starting at or after it.
        let i = st.entries.partition_point(|e| e.end() <= pos);
        let before = i.checked_sub(1).map(|j| &st.entries[j])?;
        let at_boundary = before.end() == pos
            || st
                .file(pos.file_seq)
                .is_some_and(|f| f.prologue_end == pos.offset && before.file_seq < pos.file_seq);
        if !at_boundary {
            return None;
        }
        match st.entries.get(i) {
            Some(next) if next.commit_ts <= before.commit_ts => None,
            _ => Some(before.commit_ts),
        }
    }

    /// Where the history splits at TiDB timestamp `ts`: the position of the first transaction
    /// with `commit_ts > ts`. Only inside `[oldest, newest]` of [`Self::ts_range`]: before it
    /// the binlog lacks transactions that came after `ts` (purged, or before the capture
    /// started); after it, transactions up to `ts` may still be on their way.
    pub fn locate_ts(&self, ts: Ts) -> Result<BinlogPos, DumpError> {
        let st = self.shared.read();
        let (oldest, newest) = range_of(&st);
        if let Some(h) = oldest {
            if ts < h {
                return Err(DumpError::TsPurged {
                    ts,
                    purged_up_to: h,
                    newest,
                });
            }
        }
        if newest.is_none_or(|n| ts > n) {
            return Err(DumpError::TsAhead { ts, oldest, newest });
        }
        let i = st.entries.partition_point(|e| e.commit_ts <= ts);
        if i < st.entries.len() {
            Ok(BinlogPos::new(st.entries[i].file_seq, st.txn_start(i)))
        } else {
            Ok(self.end_pos())
        }
    }

    /// The TiDB timestamps a position can be found for: from the purge horizon (or the capture
    /// origin) to the newest durable checkpoint; `None` where there is none.
    pub fn ts_range(&self) -> (Option<Ts>, Option<Ts>) {
        range_of(&self.shared.read())
    }
}

fn range_of(st: &FilesState) -> (Option<Ts>, Option<Ts>) {
    (
        st.purged_horizon.map(|(h, _)| h),
        st.snapshot.as_ref().map(|p| p.ts),
    )
}

/// One event as read from a file.
#[derive(Debug, Clone, Copy)]
pub struct EventRef<'a> {
    /// File the event is in.
    pub file_seq: u32,
    /// Its start offset.
    pub start: u64,
    /// Header, body and CRC as stored.
    pub bytes: &'a [u8],
}

impl EventRef<'_> {
    /// The event's type code.
    pub fn event_type(&self) -> EventType {
        EventType(self.bytes[4])
    }
    /// Offset after the event.
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// For a GTID event: its `sid:gno` and `transaction_length` (bytes of the whole
    /// transaction from this event's start), so that a dump session can skip a transaction the
    /// replica already has with [`BinlogReader::skip_to`]`(start + transaction_length)`.
    pub fn gtid(&self) -> Option<(Sid, u64, u64)> {
        if self.event_type() != EventType::GTID {
            return None;
        }
        let mut r = Reader::new(self.bytes.get(HEADER_LEN..)?, "GTID event");
        r.u8().ok()?;
        let mut sid = [0u8; 16];
        sid.copy_from_slice(r.bytes(16).ok()?);
        let gno = r.u64_le().ok()?;
        r.bytes(1 + 8 + 8).ok()?;
        let imm = r.uint_le(7).ok()?;
        if imm & (1 << 55) != 0 {
            r.bytes(7).ok()?;
        }
        let len = r.lenenc().ok()?;
        Some((Sid(sid), gno, len))
    }
}

/// Bytes of one positioned read ahead of a reader in the open file.
const READ_AHEAD: u64 = 64 * 1024;

/// Bytes of the open file read ahead of the reader. Every byte was below the durable end when it
/// was read, and durable bytes never change, so one positioned read serves many events (instead
/// of two reads per event).
#[derive(Debug, Default)]
struct ReadAhead {
    file_seq: u32,
    /// File offset of `bytes[0]`.
    offset: u64,
    bytes: Vec<u8>,
}

impl ReadAhead {
    /// Bytes `[pos, pos + n)` of file `file_seq`; `pos + n` must not pass `limit`. When they are
    /// not held, reads from `pos` at least `n` and up to [`READ_AHEAD`] bytes, never past `limit`.
    fn get(
        &mut self,
        file: &File,
        file_seq: u32,
        pos: u64,
        n: u64,
        limit: u64,
    ) -> std::io::Result<&[u8]> {
        use std::os::unix::fs::FileExt;
        let held = self.file_seq == file_seq
            && pos >= self.offset
            && pos + n <= self.offset + self.bytes.len() as u64;
        if !held {
            let len = n.max(READ_AHEAD).min(limit - pos) as usize;
            self.bytes.clear();
            self.bytes.resize(len, 0);
            if let Err(e) = file.read_exact_at(&mut self.bytes, pos) {
                self.bytes.clear();
                return Err(e);
            }
            self.file_seq = file_seq;
            self.offset = pos;
        }
        let at = (pos - self.offset) as usize;
        Ok(&self.bytes[at..at + n as usize])
    }
}

/// Reads the event at `pos` of the open file `file_seq`, never past `limit` (the durable end).
fn read_event_at(
    ahead: &mut ReadAhead,
    file: &File,
    file_seq: u32,
    pos: u64,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<ReadOutcome> {
    if pos >= limit {
        return Ok(ReadOutcome::Eof);
    }
    if limit - pos < HEADER_LEN as u64 {
        return Ok(ReadOutcome::Torn);
    }
    let header = ahead.get(file, file_seq, pos, HEADER_LEN as u64, limit)?;
    let Ok(h) = EventHeader::parse(header) else {
        return Ok(ReadOutcome::Torn);
    };
    let size = u64::from(h.event_size);
    if size > limit - pos {
        return Ok(ReadOutcome::Torn);
    }
    buf.clear();
    buf.extend_from_slice(ahead.get(file, file_seq, pos, size, limit)?);
    Ok(ReadOutcome::Event)
}

/// Clears `LOG_EVENT_BINLOG_IN_USE_F` in a FORMAT_DESCRIPTION's header, as a dump session must
/// before sending it (the open file's FORMAT_DESCRIPTION carries the flag). The CRC stays valid:
/// it is computed with the flag cleared. Other events are left alone.
pub fn clear_binlog_in_use(event: &mut [u8]) {
    if event.len() >= HEADER_LEN && event[4] == EventType::FORMAT_DESCRIPTION.0 {
        event[17] &= !(tibinlog_protocol::binlog::flags::BINLOG_IN_USE as u8);
    }
}

/// Streams events from a position onwards; see the module docs.
#[derive(Debug)]
pub struct BinlogReader {
    shared: Arc<Shared>,
    end_rx: watch::Receiver<BinlogPos>,
    /// Position of the next event.
    pos: BinlogPos,
    /// Buffered reads, used in closed files only: bytes past the durable end of the open file
    /// can still change (a spilled transaction that is aborted, a GTID event patched at commit),
    /// so the open file is read with positioned reads of exactly one event, never buffered.
    file: BufReader<File>,
    /// `file`'s position is `pos` (false after positioned reads).
    in_sync: bool,
    /// Read-ahead for the open file.
    ahead: ReadAhead,
    buf: Vec<u8>,
    /// Start of the event in `buf`, once loaded.
    current: Option<BinlogPos>,
    /// Keeps the file of `pos` from being purged.
    claim: FileInUse,
}

/// A reader's claim on one file: a purge stops before it. Moves with the reader from file to
/// file; released when dropped.
#[derive(Debug)]
struct FileInUse {
    shared: Arc<Shared>,
    seq: u32,
}

impl FileInUse {
    /// `None` when the file is purged or being purged.
    fn enter(shared: &Arc<Shared>, seq: u32) -> Option<Self> {
        shared.in_use().enter(seq).then(|| FileInUse {
            shared: shared.clone(),
            seq,
        })
    }

    /// Moves the claim to the next file (a reader that crossed a ROTATE). The next file is
    /// never purged while this one is held.
    fn advance(&mut self, seq: u32) {
        let mut u = self.shared.in_use();
        u.leave(self.seq);
        u.readers.entry(seq).and_modify(|n| *n += 1).or_insert(1);
        self.seq = seq;
    }
}

impl Drop for FileInUse {
    fn drop(&mut self) {
        self.shared.in_use().leave(self.seq);
    }
}

impl BinlogReader {
    /// Position of the next event to read.
    pub fn position(&self) -> BinlogPos {
        self.pos
    }

    /// Name of the file of the next event.
    pub fn file_name(&self) -> String {
        file_name(&self.shared.basename, self.pos.file_seq)
    }

    /// Continues at `offset` of the current file, which must be an event boundary at or after
    /// the current position and not past the durable end (e.g. the end of a transaction to skip,
    /// from [`EventRef::gtid`]).
    pub fn skip_to(&mut self, offset: u64) -> Result<(), DumpError> {
        let end = *self.end_rx.borrow();
        let limit = if self.pos.file_seq == end.file_seq {
            end.offset
        } else {
            // A closed file: its whole length (the descriptor outlives a purge).
            self.file.get_ref().metadata().map_or(0, |m| m.len())
        };
        let target = BinlogPos::new(self.pos.file_seq, offset);
        if offset < self.pos.offset || offset > limit {
            return Err(DumpError::NotEventBoundary {
                file: self.file_name(),
                pos: offset,
            });
        }
        self.pos = target;
        self.in_sync = false;
        self.current = None;
        Ok(())
    }

    /// The next durable event, or `None` at the durable end (never blocks on the writer).
    pub fn try_next(&mut self) -> Result<Option<EventRef<'_>>, DumpError> {
        let end = *self.end_rx.borrow();
        Ok(if self.load(end)? {
            self.current()
        } else {
            None
        })
    }

    /// The next event, waiting for the writer at the live end. `Err(WriterGone)` once the
    /// writer is dropped and everything durable was read.
    pub async fn next(&mut self) -> Result<EventRef<'_>, DumpError> {
        loop {
            let end = *self.end_rx.borrow_and_update();
            if self.load(end)? {
                break;
            }
            self.end_rx
                .changed()
                .await
                .map_err(|_| DumpError::WriterGone)?;
        }
        self.current().ok_or(DumpError::WriterGone)
    }

    fn current(&self) -> Option<EventRef<'_>> {
        self.current.map(|p| EventRef {
            file_seq: p.file_seq,
            start: p.offset,
            bytes: &self.buf,
        })
    }

    /// Loads the next event into `buf` if there is a durable one. Crosses into the next file
    /// at the end of a closed file.
    fn load(&mut self, end: BinlogPos) -> Result<bool, DumpError> {
        self.current = None;
        loop {
            if self.pos >= end {
                return Ok(false);
            }
            let name = || file_name(&self.shared.basename, self.pos.file_seq);
            let limit = (self.pos.file_seq == end.file_seq).then_some(end.offset);
            let seq = self.pos.file_seq;
            let io = |source| DumpError::Io {
                path: self.shared.path(seq),
                source,
            };
            let outcome = match limit {
                Some(limit) => {
                    self.in_sync = false;
                    read_event_at(
                        &mut self.ahead,
                        self.file.get_ref(),
                        seq,
                        self.pos.offset,
                        limit,
                        &mut self.buf,
                    )
                    .map_err(io)?
                }
                None => {
                    if !self.in_sync {
                        self.file
                            .seek(SeekFrom::Start(self.pos.offset))
                            .map_err(io)?;
                        self.in_sync = true;
                    }
                    read_event(&mut self.file, &mut self.buf).map_err(io)?
                }
            };
            match outcome {
                ReadOutcome::Event => {
                    let len = self.buf.len() as u64;
                    let corrupt = |reason| DumpError::Corrupt {
                        file: name(),
                        offset: self.pos.offset,
                        reason,
                    };
                    if limit.is_some_and(|l| self.pos.offset + len > l) {
                        return Err(corrupt("event crosses the durable end"));
                    }
                    let log_pos = u32::from_le_bytes([
                        self.buf[13],
                        self.buf[14],
                        self.buf[15],
                        self.buf[16],
                    ]);
                    // Modulo 2^32: a file that a huge transaction took past 4 GiB wraps it.
                    if log_pos != (self.pos.offset + len) as u32 {
                        return Err(corrupt("log_pos does not match the event's end"));
                    }
                    self.current = Some(self.pos);
                    self.pos.offset += len;
                    return Ok(true);
                }
                ReadOutcome::Eof if limit.is_none() => {
                    // End of a closed file: continue at the start of the next one.
                    let next = self.pos.file_seq + 1;
                    let path = self.shared.path(next);
                    if self.shared.read().file(next).is_none() {
                        return Err(DumpError::UnknownFile {
                            file: file_name(&self.shared.basename, next),
                        });
                    }
                    self.file = open_at(&path, 4).map_err(|source| DumpError::Io {
                        path: path.clone(),
                        source,
                    })?;
                    self.in_sync = true;
                    self.claim.advance(next);
                    self.pos = BinlogPos::new(next, 4);
                }
                ReadOutcome::Eof | ReadOutcome::Torn => {
                    return Err(DumpError::Corrupt {
                        file: name(),
                        offset: self.pos.offset,
                        reason: "durable bytes missing",
                    })
                }
            }
        }
    }
}

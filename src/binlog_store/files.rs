//! The read side's metadata: [`BinlogFiles`], a cloneable handle on the files for dump
//! sessions (the index, the transactions' map, GTID sets, snapshot points, the durable end and
//! its watch). Reading events through it is `reader.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tibinlog_protocol::binlog::{GtidSet, Sid};
use tokio::sync::watch;

use super::error::DumpError;
use super::index::{file_name, parse_file_name};
use super::map::TxnEntry;
use super::StorePos;
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
    /// [`StoreSnapshotPoint`]).
    pub snapshot: Option<StoreSnapshotPoint>,
}

/// A position where the binlog and the upstream history line up: every transaction with
/// `commit_ts <= ts` is before `end`, every later one after it. A snapshot read at `ts` plus
/// the binlog from `end` is exactly the history. The store's own form (its TSO type and
/// [`StorePos`]) of what the server sees as a `SnapshotPoint` (`BinlogSource::snapshot_point`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSnapshotPoint {
    pub ts: Ts,
    pub end: StorePos,
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
    pub end_rx: watch::Receiver<StorePos>,
    /// The files readers are on.
    pub in_use: Mutex<InUse>,
}

/// Which files readers are on, so that a purge leaves them and every later file (as MySQL's
/// PURGE and expiry leave a file a dump thread reads).
#[derive(Debug, Default)]
pub(crate) struct InUse {
    /// Readers per file sequence number.
    pub(super) readers: BTreeMap<u32, usize>,
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

    pub(super) fn enter(&mut self, seq: u32) -> bool {
        if seq < self.floor {
            return false;
        }
        *self.readers.entry(seq).or_default() += 1;
        true
    }

    pub(super) fn leave(&mut self, seq: u32) {
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
    pub(super) fn path(&self, seq: u32) -> PathBuf {
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
    pub fn end_pos(&self) -> StorePos {
        *self.shared.end_rx.borrow()
    }

    /// The durable end and `@@gtid_executed` at that end, read together (`SHOW MASTER STATUS`).
    pub fn status(&self) -> (StorePos, GtidSet) {
        let st = self.shared.read();
        let end = *self.shared.end_rx.borrow();
        (end, st.gtid_executed.clone())
    }

    /// The newest snapshot point: a durable checkpoint and the binlog end it was recorded at.
    pub fn snapshot_point(&self) -> Option<StoreSnapshotPoint> {
        self.shared.read().snapshot.clone()
    }

    /// The position of `pos` in file `name`, if `name` is one of this store's file names.
    pub fn parse_position(&self, name: &str, pos: u64) -> Option<StorePos> {
        parse_file_name(&self.shared.basename, name).map(|seq| StorePos::new(seq, pos))
    }

    /// A watch of the durable end; it changes at every group commit and rotation, and closes
    /// when the writer is dropped.
    pub fn subscribe(&self) -> watch::Receiver<StorePos> {
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
    pub fn txn_ending_at(&self, pos: StorePos) -> Option<TxnEntry> {
        let st = self.shared.read();
        let i = st.entries.partition_point(|e| e.end() < pos);
        st.entries.get(i).filter(|e| e.end() == pos).copied()
    }

    pub(super) fn resolve(&self, file: &str) -> Result<u32, DumpError> {
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

    /// COM_BINLOG_DUMP_GTID: the position of the first transaction whose GTID is not in `set`,
    /// or the durable end when there is none. Refused when `set` lacks purged GTIDs or holds
    /// GTIDs of this server that were never written. Later transactions that are in `set` (a set
    /// with holes) must still be skipped by the dump session.
    pub fn locate_gtid(&self, set: &GtidSet) -> Result<StorePos, DumpError> {
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
            Some(i) => Ok(StorePos::new(st.entries[i].file_seq, st.txn_start(i))),
            None => Ok(self.end_pos()),
        }
    }

    /// The TiDB timestamp position `pos` lines up with: the commit ts of the transaction
    /// ending there (of the one before, at a file's first transaction), if every later
    /// transaction committed after it; `None` when `pos` is not a transaction boundary this
    /// store retains, or when a transaction of the same commit ts follows (no timestamp splits
    /// the history there). The durable end answers with its snapshot point's timestamp.
    pub fn ts_at(&self, pos: StorePos) -> Option<Ts> {
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
    pub fn locate_ts(&self, ts: Ts) -> Result<StorePos, DumpError> {
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
            Ok(StorePos::new(st.entries[i].file_seq, st.txn_start(i)))
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

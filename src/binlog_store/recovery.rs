//! Opening a store: a new one, or recovery of an existing one.
//!
//! 1. Leftover temporaries (`*.index_crash_safe`, `*.map_crash_safe`) are removed; numbered
//!    files outside the index range (a rotation that did not reach the index, a purge that did
//!    not finish deleting) are deleted.
//! 2. The map is loaded; a torn last record is cut.
//! 3. The last file is scanned from the last position a Synced record vouches for (else from
//!    its prologue end) with [`TxnScanner`]; the file is cut at the end of the last complete
//!    transaction, which also removes a torn event, a half-written transaction, or a ROTATE
//!    whose next file never made it into the index.
//! 4. Map records describing binlog bytes that did not survive are cut; the checkpoint is the
//!    last checkpoint record whose binlog end survived.
//!
//! Files before the last one, and the prologue of the last one, were fsynced before the index
//! named the next file; damage there is reported as [`StoreError::Corrupt`], not repaired.

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, RwLock};

use tibinlog_protocol::binlog::checksum::verify_event;
use tibinlog_protocol::binlog::{EventWriter, GtidSet, Sid};
use tokio::sync::watch;

use super::error::{Result, StoreError};
use super::files::{FileInfo, FilesState, Shared, StoreSnapshotPoint};
use super::index::{file_name, parse_file_name, read_index, write_index};
use super::map::{MapFile, Record, TxnEntry, TxnOrder};
use super::prologue::create_file;
use super::scan::{open_at, read_event, read_prologue, ReadOutcome, ScannedTxn, TxnScanner};
use super::writer::BinlogStore;
use super::{header_timestamp, StoreConfig, StorePos};
use crate::model::Ts;

/// What [`BinlogStore::open`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Resume capture from here (`checkpoint_ts`); `None` when nothing was ever checkpointed.
    pub checkpoint: Option<Ts>,
    /// `(commit_ts, start_ts, part)` of the last transaction in the binlog.
    pub last_written: Option<TxnOrder>,
    pub gtid_executed: GtidSet,
    /// GNO of the next transaction.
    pub next_gno: u64,
    /// Where the next transaction goes (also the durable end).
    pub end: StorePos,
    /// Bytes cut from the end of the last file.
    pub truncated_bytes: u64,
    /// Mapping records dropped because the binlog did not keep their transactions.
    pub dropped_records: usize,
    /// True when the store was created by this open.
    pub created: bool,
}

impl Recovery {
    /// True when capture, resending from [`Self::checkpoint`], must skip this transaction
    /// because it is already in the binlog.
    pub fn already_written(&self, commit_ts: Ts, start_ts: Ts, part: u32) -> bool {
        self.last_written
            .is_some_and(|l| (commit_ts, start_ts, part) <= l)
    }
}

fn validate(cfg: &StoreConfig) -> Result<()> {
    let bad = |reason| Err(StoreError::Config { reason });
    if cfg.basename.is_empty() || cfg.basename.contains(['/', '\\']) {
        return bad("basename must be a plain file name");
    }
    if cfg.max_binlog_size == 0 || cfg.max_binlog_size > u64::from(u32::MAX) {
        return bad("max_binlog_size must be in 1..4 GiB");
    }
    if cfg.server_version.len() > 50 {
        return bad("server_version longer than 50 bytes");
    }
    if cfg.max_rows_event_size < 256 {
        return bad("max_rows_event_size below 256 bytes");
    }
    Ok(())
}

/// What the scan of the last file's tail found.
struct TailScan {
    /// Where the scan started: the last position a Synced record vouches for, else the end of
    /// the file's prologue.
    from: u64,
    /// The end of the last complete transaction (the file is cut there).
    end: u64,
    /// The complete transactions after `from`.
    txns: Vec<ScannedTxn>,
}

/// The map's records reconciled with what the binlog kept (step 4 of the module docs).
#[derive(Debug, Default)]
struct Reconciled {
    /// Mapping records of transactions still in the binlog, in order.
    entries: Vec<TxnEntry>,
    /// The last checkpoint whose binlog end survived, and that end.
    checkpoint: Option<(Ts, StorePos)>,
    /// The newest purged transaction the map remembers (commit ts, gno).
    horizon: Option<(Ts, u64)>,
    /// Where the map is cut: the first record past what the binlog kept.
    cut_at: Option<u64>,
    /// Transaction records dropped by that cut.
    dropped_records: usize,
}

impl BinlogStore {
    /// Opens (creating or recovering) the store in `cfg.data_dir`.
    pub fn open(cfg: StoreConfig) -> Result<(BinlogStore, Recovery)> {
        validate(&cfg)?;
        let dir = cfg.data_dir.clone();
        fs::create_dir_all(&dir).map_err(StoreError::io("create dir", &dir))?;
        for tmp in ["index_crash_safe", "map_crash_safe"] {
            let p = dir.join(format!("{}.{tmp}", cfg.basename));
            if p.exists() {
                fs::remove_file(&p).map_err(StoreError::io("remove", &p))?;
            }
        }
        let map_path = dir.join(format!("{}.map", cfg.basename));
        let seqs = match read_index(&dir, &cfg.basename)? {
            Some(s) if !s.is_empty() => s,
            _ => {
                if fs::metadata(&map_path).is_ok_and(|m| m.len() > 0) {
                    return Err(StoreError::Corrupt {
                        file: format!("{}.index", cfg.basename),
                        offset: 0,
                        reason: "mapping exists but the index is missing or empty",
                    });
                }
                return Self::create(cfg);
            }
        };
        remove_strays(&cfg, &seqs)?;
        let (map, records) = MapFile::open(&map_path)?;
        let (files, checksum) = read_prologues(&cfg, &seqs)?;
        Self::recover(cfg, files, checksum, map, &records)
    }

    /// Steps 3 and 4 of the module docs over the files of the index (`files`, whose last one
    /// is written with `checksum`) and the map's `records`, then the store that continues them.
    fn recover(
        cfg: StoreConfig,
        mut files: Vec<FileInfo>,
        checksum: bool,
        mut map: MapFile,
        records: &[(u64, Record)],
    ) -> Result<(BinlogStore, Recovery)> {
        let Some(last) = files.last().cloned() else {
            return Err(StoreError::Config {
                reason: "empty index",
            });
        };
        let last_name = file_name(&cfg.basename, last.seq);
        let last_path = cfg.data_dir.join(&last_name);
        let tail = scan_tail(&cfg, &last, records, checksum)?;
        let end_pos = StorePos::new(last.seq, tail.end);
        let seqs: Vec<u32> = files.iter().map(|f| f.seq).collect();
        let rec = reconcile(records, &seqs, end_pos);
        check_tail_mapped(&rec.entries, &tail, last.seq, &last_name)?;

        // Fix the files.
        let file = cut_last_file(&last_path, tail.end)?;
        let truncated_bytes = last.size - tail.end;
        if let Some(off) = rec.cut_at {
            map.truncate(off)?;
        }
        map.append_sync(&[Record::Synced(end_pos)])?;

        // State.
        for f in files.iter_mut() {
            let r = rec.entries.partition_point(|e| e.file_seq < f.seq)
                ..rec.entries.partition_point(|e| e.file_seq <= f.seq);
            if let Some(e) = rec.entries[r].last() {
                f.last_secs = f.last_secs.max(header_timestamp(e.commit_ts));
            }
        }
        if let Some(f) = files.last_mut() {
            f.size = tail.end;
        }
        let mut gtid_executed = last.previous_gtids.clone();
        let in_last = rec.entries.iter().filter(|e| e.file_seq == last.seq);
        let mut seq_in_file = 0i64;
        for e in in_last {
            gtid_executed.add(cfg.server_uuid, e.gno);
            seq_in_file += 1;
        }
        let next_gno = next_gno(&gtid_executed, &cfg.server_uuid);
        let last_written = rec.entries.last().map(TxnEntry::order_key);
        let last_timestamp = files.last().map_or(0, |f| f.last_secs);
        let checkpoint = rec.checkpoint;
        let snapshot = checkpoint
            .filter(|(ts, requires)| {
                *requires == end_pos && last_written.is_none_or(|(c, _, _)| c <= *ts)
            })
            .map(|(ts, end)| StoreSnapshotPoint {
                ts,
                end,
                gtid_executed: gtid_executed.clone(),
            });
        let state = FilesState {
            files,
            entries: rec.entries,
            gtid_executed: gtid_executed.clone(),
            purged_horizon: rec.horizon,
            snapshot,
        };
        let (end_tx, end_rx) = watch::channel(end_pos);
        let shared = Arc::new(Shared {
            dir: cfg.data_dir.clone(),
            basename: cfg.basename.clone(),
            server_uuid: cfg.server_uuid,
            state: RwLock::new(state),
            end_rx,
            in_use: Default::default(),
        });
        let wants_checksum = cfg.checksum;
        let mut store = BinlogStore::from_parts(
            cfg,
            shared,
            end_tx,
            checksum,
            file,
            last.seq,
            tail.end,
            seq_in_file,
            next_gno,
            gtid_executed.clone(),
            last_written,
            last_timestamp,
            checkpoint,
            map,
        );
        if wants_checksum != checksum {
            // binlog_checksum changed: the new setting starts with a new file, as in MySQL.
            store.rotate()?;
        } else if seq_in_file > 0 && tail.end >= store.cfg.max_binlog_size {
            // The last transaction took the file past its size and the crash came before the
            // rotation that follows it (or cut its ROTATE): rotate now, where an uninterrupted
            // run rotated, so the next transaction starts the next file as it would have.
            store.rotate()?;
        }
        tracing::info!(
            file = %file_name(&store.cfg.basename, store.durable_end().file_seq),
            pos = store.durable_end().offset,
            next_gno,
            truncated_bytes,
            dropped_records = rec.dropped_records,
            checkpoint = ?checkpoint.map(|c| c.0),
            "binlog store recovered"
        );
        let recovery = Recovery {
            checkpoint: checkpoint.map(|c| c.0),
            last_written,
            gtid_executed,
            next_gno,
            end: store.durable_end(),
            truncated_bytes,
            dropped_records: rec.dropped_records,
            created: false,
        };
        Ok((store, recovery))
    }

    /// A new store: file 1 and the index.
    fn create(cfg: StoreConfig) -> Result<(BinlogStore, Recovery)> {
        remove_strays(&cfg, &[])?;
        let mut ew = EventWriter::new(cfg.server_id, cfg.checksum);
        let ts = header_timestamp(cfg.first_file_ts);
        let (file, prologue_end) = create_file(
            &cfg,
            &mut ew,
            1,
            (&GtidSet::new(), ts),
            &super::index::WriteGuard::default(),
        )?;
        write_index(&cfg.data_dir, &cfg.basename, &[1])?;
        let map_path = cfg.data_dir.join(format!("{}.map", cfg.basename));
        let (mut map, _) = MapFile::open(&map_path)?;
        map.truncate(0)?;
        let end = StorePos::new(1, prologue_end);
        // The capture starts after `first_file_ts`: nothing at or before it is in this binlog,
        // as if it had been purged. Kept as the purge horizon, a snapshot read at an older ts
        // (whose later transactions the binlog lacks) is refused instead of leaving a gap.
        let origin = (cfg.first_file_ts > Ts::ZERO).then_some((cfg.first_file_ts, 0));
        let mut records = Vec::with_capacity(2);
        if let Some((commit_ts, gno)) = origin {
            records.push(Record::PurgedHorizon { commit_ts, gno });
        }
        records.push(Record::Synced(end));
        map.append_sync(&records)?;
        let state = FilesState {
            purged_horizon: origin,
            files: vec![FileInfo {
                seq: 1,
                size: prologue_end,
                prologue_end,
                previous_gtids: GtidSet::new(),
                last_secs: ts,
            }],
            ..FilesState::default()
        };
        let (end_tx, end_rx) = watch::channel(end);
        let shared = Arc::new(Shared {
            dir: cfg.data_dir.clone(),
            basename: cfg.basename.clone(),
            server_uuid: cfg.server_uuid,
            state: RwLock::new(state),
            end_rx,
            in_use: Default::default(),
        });
        let checksum = cfg.checksum;
        let store = BinlogStore::from_parts(
            cfg,
            shared,
            end_tx,
            checksum,
            file,
            1,
            prologue_end,
            0,
            1,
            GtidSet::new(),
            None,
            ts,
            None,
            map,
        );
        let rec = Recovery {
            checkpoint: None,
            last_written: None,
            gtid_executed: GtidSet::new(),
            next_gno: 1,
            end,
            truncated_bytes: 0,
            dropped_records: 0,
            created: true,
        };
        Ok((store, rec))
    }
}

/// The prologue of every file of the index, as [`FileInfo`]s, and whether the last file is
/// written with a checksum.
fn read_prologues(cfg: &StoreConfig, seqs: &[u32]) -> Result<(Vec<FileInfo>, bool)> {
    let mut files = Vec::with_capacity(seqs.len());
    let mut checksum = false;
    for &seq in seqs {
        let name = file_name(&cfg.basename, seq);
        let path = cfg.data_dir.join(&name);
        let len = fs::metadata(&path)
            .map_err(StoreError::io("stat", &path))?
            .len();
        let p = read_prologue(&path, &name)?;
        check_sids(&cfg.server_uuid, &p.previous_gtids)?;
        checksum = p.checksum;
        files.push(FileInfo {
            seq,
            size: len,
            prologue_end: p.end,
            previous_gtids: p.previous_gtids,
            last_secs: p.timestamp,
        });
    }
    Ok((files, checksum))
}

/// Step 3: scans the last file from the last position a Synced record vouches for (else from
/// its prologue end) up to the end of its last complete, checksum-valid transaction.
fn scan_tail(
    cfg: &StoreConfig,
    last: &FileInfo,
    records: &[(u64, Record)],
    checksum: bool,
) -> Result<TailScan> {
    let path = cfg.data_dir.join(file_name(&cfg.basename, last.seq));
    let marker = records
        .iter()
        .rev()
        .find_map(|(_, r)| match r {
            Record::Synced(p) => Some(*p),
            _ => None,
        })
        .filter(|p| {
            p.file_seq == last.seq && p.offset >= last.prologue_end && p.offset <= last.size
        });
    let from = marker.map_or(last.prologue_end, |p| p.offset);
    let mut reader = open_at(&path, from).map_err(StoreError::io("open", &path))?;
    let mut scanner = TxnScanner::default();
    let mut buf = Vec::new();
    let mut at = from;
    let mut tail = TailScan {
        from,
        end: from,
        txns: Vec::new(),
    };
    loop {
        let outcome = read_event(&mut reader, &mut buf).map_err(StoreError::io("read", &path))?;
        if outcome != ReadOutcome::Event || (checksum && verify_event(&buf).is_err()) {
            break;
        }
        let end = at + buf.len() as u64;
        match scanner.on_event(&buf, end, checksum) {
            Ok(Some(tx)) => {
                if tx.sid != cfg.server_uuid {
                    return Err(StoreError::ServerUuidChanged {
                        configured: cfg.server_uuid,
                        found: tx.sid,
                    });
                }
                tail.txns.push(tx);
                tail.end = end;
            }
            Ok(None) => {}
            Err(()) => break,
        }
        at = end;
    }
    Ok(tail)
}

/// Step 4: keeps the map's records up to the first that describes binlog bytes past `end`
/// (what the binlog kept) or a file no longer in the index (`seqs`).
fn reconcile(records: &[(u64, Record)], seqs: &[u32], end: StorePos) -> Reconciled {
    let mut rec = Reconciled::default();
    for (off, r) in records {
        match *r {
            Record::Txn(e) if e.file_seq < seqs[0] => {
                // A purge deleted the file but did not get to compact the map.
                rec.horizon = Some((e.commit_ts, e.gno));
            }
            Record::Txn(e) => {
                if e.end() > end || !seqs.contains(&e.file_seq) {
                    rec.cut_at = Some(*off);
                    break;
                }
                rec.entries.push(e);
            }
            Record::Checkpoint {
                checkpoint: c,
                requires,
            } => {
                if requires > end {
                    rec.cut_at = Some(*off);
                    break;
                }
                rec.checkpoint = Some((c, requires));
            }
            Record::Synced(p) => {
                if p > end {
                    rec.cut_at = Some(*off);
                    break;
                }
            }
            Record::PurgedHorizon { commit_ts, gno } => rec.horizon = Some((commit_ts, gno)),
        }
    }
    rec.dropped_records = rec.cut_at.map_or(0, |off| {
        records
            .iter()
            .filter(|(o, r)| *o >= off && matches!(r, Record::Txn(_)))
            .count()
    });
    rec
}

/// Every transaction the tail scan found has its mapping record, and every mapped
/// transaction of the last file (`seq`) lies before the scan start or was found by it.
fn check_tail_mapped(entries: &[TxnEntry], tail: &TailScan, seq: u32, name: &str) -> Result<()> {
    let corrupt = |offset, reason| StoreError::Corrupt {
        file: name.to_owned(),
        offset,
        reason,
    };
    for tx in &tail.txns {
        let ok = entries
            .iter()
            .rev()
            .take_while(|e| e.file_seq == seq)
            .any(|e| e.end_pos == tx.end && e.gno == tx.gno);
        if !ok {
            return Err(corrupt(tx.end, "transaction without a mapping record"));
        }
    }
    if let Some(e) = entries
        .iter()
        .filter(|e| e.file_seq == seq && e.end_pos > tail.from)
        .find(|e| !tail.txns.iter().any(|t| t.end == e.end_pos))
    {
        return Err(corrupt(
            e.end_pos,
            "mapped transaction not found in the binlog",
        ));
    }
    Ok(())
}

/// Cuts the last file at `end`, marks it in use again (BINLOG_IN_USE in its
/// FORMAT_DESCRIPTION's header flags), fsyncs it and returns it positioned at its end.
fn cut_last_file(path: &std::path::Path, end: u64) -> Result<fs::File> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(StoreError::io("open", path))?;
    let len = file.metadata().map_err(StoreError::io("stat", path))?.len();
    if len > end {
        file.set_len(end)
            .map_err(StoreError::io("truncate", path))?;
    }
    file.write_all_at(&[1, 0], 4 + 17)
        .map_err(StoreError::io("write", path))?;
    file.sync_all().map_err(StoreError::io("fsync", path))?;
    file.seek(SeekFrom::End(0))
        .map_err(StoreError::io("seek", path))?;
    Ok(file)
}

/// GNO after the last one of `sid` in `set` (1 when none).
fn next_gno(set: &GtidSet, sid: &Sid) -> u64 {
    set.iter()
        .find(|(s, _)| *s == sid)
        .and_then(|(_, ivs)| ivs.last().map(|&(_, e)| e))
        .unwrap_or(1)
}

fn check_sids(configured: &Sid, set: &GtidSet) -> Result<()> {
    match set.iter().find(|(s, _)| *s != configured) {
        Some((found, _)) => Err(StoreError::ServerUuidChanged {
            configured: *configured,
            found: *found,
        }),
        None => Ok(()),
    }
}

/// Deletes numbered files outside the index's range: the product of a rotation that did not
/// reach the index, or of a purge that did not finish deleting.
fn remove_strays(cfg: &StoreConfig, seqs: &[u32]) -> Result<()> {
    let dir = &cfg.data_dir;
    let rd = fs::read_dir(dir).map_err(StoreError::io("list", dir))?;
    let (lo, hi) = (seqs.first().copied(), seqs.last().copied());
    for ent in rd {
        let ent = ent.map_err(StoreError::io("list", dir))?;
        let name = ent.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| parse_file_name(&cfg.basename, n))
        else {
            continue;
        };
        let stray = match (lo, hi) {
            (Some(lo), Some(hi)) => seq < lo || seq > hi,
            _ => true,
        };
        if stray {
            let p = ent.path();
            fs::remove_file(&p).map_err(StoreError::io("remove", &p))?;
        }
    }
    Ok(())
}

//! The persisted mapping: an append-only file `<basename>.map` of fixed-size records with a CRC
//! each, so a torn last record is recognised and dropped.
//!
//! ```text
//! record (48 bytes, integers LE):
//! +--------+---------+-----------+--------+--------+--------+--------+--------+--------+
//! | kind 1 | zero 3  | file_seq 4| a 8    | b 8    | c 8    | d 8    | e 4    | crc 4  |
//! +--------+---------+-----------+--------+--------+--------+--------+--------+--------+
//!   kind 1 Txn:           a = start_ts, b = commit_ts, c = gno, d = end_pos, e = part
//!   kind 2 Checkpoint:    b = checkpoint, (file_seq, d) = binlog end it needs
//!   kind 3 Synced:        (file_seq, d) = binlog end known to be fsynced
//!   kind 4 PurgedHorizon: b = commit_ts, c = gno of the last purged transaction
//! e is zero in the other kinds (and in Txn records of files written before `part` existed,
//! which is what `part` is for them).
//! crc = CRC32 of the first 44 bytes
//! ```
//!
//! # Ordering with the binlog
//! Txn and Checkpoint records are appended and fsynced **before** the binlog bytes they
//! describe are written to the binlog file. So every transaction found in a binlog file has its
//! record (the binlog never gets ahead of the map), and recovery only has to drop records whose
//! binlog bytes did not survive. A Checkpoint record is valid only if the binlog reaches the
//! end it names. A Synced record, written with the next batch, tells recovery where it can start
//! scanning the last file.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::error::{Result, StoreError};
use super::StorePos;
use crate::model::Ts;

/// Bytes of one record.
pub(crate) const RECORD_LEN: usize = 48;

/// One transaction of the mapping: where it ends in the binlog and how TiDB and MySQL name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnEntry {
    /// TiDB start_ts (the XID value): identifies the transaction.
    pub start_ts: Ts,
    pub commit_ts: Ts,
    /// GNO of `server_uuid:gno`.
    pub gno: u64,
    /// File the transaction is in.
    pub file_seq: u32,
    /// Offset just after its last event.
    pub end_pos: u64,
    /// The statement's place among the DDL statements one TiDB transaction made (a batch
    /// `CREATE TABLE` job): each is a binlog transaction of its own. 0 for everything else.
    pub part: u32,
}

impl TxnEntry {
    /// The binlog position after the transaction.
    pub fn end(&self) -> StorePos {
        StorePos::new(self.file_seq, self.end_pos)
    }

    /// Sort key of binlog order.
    pub fn order_key(&self) -> TxnOrder {
        (self.commit_ts, self.start_ts, self.part)
    }
}

/// Binlog order of transactions: `(commit_ts, start_ts, part)`.
pub type TxnOrder = (Ts, Ts, u32);

/// A record of the map file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    Txn(TxnEntry),
    Checkpoint { checkpoint: Ts, requires: StorePos },
    Synced(StorePos),
    PurgedHorizon { commit_ts: Ts, gno: u64 },
}

impl Record {
    pub(crate) fn encode_into(&self, buf: &mut Vec<u8>) {
        let (kind, file_seq, a, b, c, d, e) = match *self {
            Record::Txn(t) => (
                1u8,
                t.file_seq,
                t.start_ts.0,
                t.commit_ts.0,
                t.gno,
                t.end_pos,
                t.part,
            ),
            Record::Checkpoint {
                checkpoint,
                requires,
            } => (2, requires.file_seq, 0, checkpoint.0, 0, requires.offset, 0),
            Record::Synced(p) => (3, p.file_seq, 0, 0, 0, p.offset, 0),
            Record::PurgedHorizon { commit_ts, gno } => (4, 0, 0, commit_ts.0, gno, 0, 0),
        };
        let start = buf.len();
        buf.extend_from_slice(&[kind, 0, 0, 0]);
        buf.extend_from_slice(&file_seq.to_le_bytes());
        for v in [a, b, c, d] {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        buf.extend_from_slice(&e.to_le_bytes());
        let crc = crc32fast::hash(&buf[start..]);
        buf.extend_from_slice(&crc.to_le_bytes());
    }

    /// Decodes one record; `None` for a torn or damaged one.
    pub(crate) fn decode(b: &[u8]) -> Option<Record> {
        if b.len() < RECORD_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if crc32fast::hash(&b[..44]) != u32_at(44) || b[1..4] != [0, 0, 0] {
            return None;
        }
        let part = u32_at(40);
        if b[0] != 1 && part != 0 {
            return None;
        }
        let file_seq = u32_at(4);
        let (a, bb, c, d) = (u64_at(8), u64_at(16), u64_at(24), u64_at(32));
        Some(match b[0] {
            1 => Record::Txn(TxnEntry {
                start_ts: Ts(a),
                commit_ts: Ts(bb),
                gno: c,
                file_seq,
                end_pos: d,
                part,
            }),
            2 => Record::Checkpoint {
                checkpoint: Ts(bb),
                requires: StorePos::new(file_seq, d),
            },
            3 => Record::Synced(StorePos::new(file_seq, d)),
            4 => Record::PurgedHorizon {
                commit_ts: Ts(bb),
                gno: c,
            },
            _ => return None,
        })
    }
}

/// The open map file.
#[derive(Debug)]
pub(crate) struct MapFile {
    path: PathBuf,
    file: File,
    /// Reused encode buffer.
    buf: Vec<u8>,
}

impl MapFile {
    /// Loads every valid record of `path` (creating it if missing) and truncates a torn tail.
    /// Returns the records with their byte offsets.
    pub(crate) fn open(path: &Path) -> Result<(MapFile, Vec<(u64, Record)>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(StoreError::io("open", path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(StoreError::io("read", path))?;
        let mut records = Vec::with_capacity(bytes.len() / RECORD_LEN);
        let mut at = 0usize;
        while let Some(r) = bytes.get(at..at + RECORD_LEN).and_then(Record::decode) {
            records.push((at as u64, r));
            at += RECORD_LEN;
        }
        let map = MapFile {
            path: path.to_owned(),
            file,
            buf: Vec::new(),
        };
        if at < bytes.len() {
            map.truncate(at as u64)?;
        }
        Ok((map, records))
    }

    /// Cuts the file at `len` bytes and fsyncs it.
    pub(crate) fn truncate(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(StoreError::io("truncate", &self.path))?;
        self.file
            .sync_all()
            .map_err(StoreError::io("fsync", &self.path))
    }

    /// Appends `records` and fsyncs.
    pub(crate) fn append_sync(&mut self, records: &[Record]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.buf.clear();
        for r in records {
            r.encode_into(&mut self.buf);
        }
        self.file
            .write_all(&self.buf)
            .map_err(StoreError::io("append", &self.path))?;
        self.file
            .sync_data()
            .map_err(StoreError::io("fsync", &self.path))
    }

    /// Replaces the whole file with `records` (write temp, fsync, rename, fsync dir).
    pub(crate) fn rewrite(
        &mut self,
        records: &[Record],
        guard: &super::index::WriteGuard,
    ) -> Result<()> {
        let tmp = self.path.with_extension("map_crash_safe");
        let mut buf = Vec::with_capacity(records.len() * RECORD_LEN);
        for r in records {
            r.encode_into(&mut buf);
        }
        super::index::write_atomically(&tmp, &self.path, &buf, guard)?;
        self.file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)
            .map_err(StoreError::io("open", &self.path))?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_detected() {
        let recs = [
            Record::Txn(TxnEntry {
                start_ts: Ts(10),
                commit_ts: Ts(11),
                gno: 3,
                file_seq: 2,
                end_pos: 999,
                part: 1,
            }),
            Record::Checkpoint {
                checkpoint: Ts(12),
                requires: StorePos::new(2, 999),
            },
            Record::Synced(StorePos::new(1, 5)),
            Record::PurgedHorizon {
                commit_ts: Ts(7),
                gno: 2,
            },
        ];
        for r in recs {
            let mut b = Vec::new();
            r.encode_into(&mut b);
            assert_eq!(b.len(), RECORD_LEN);
            assert_eq!(Record::decode(&b), Some(r));
            for i in 0..RECORD_LEN {
                let mut d = b.clone();
                d[i] ^= 0x40;
                assert_eq!(Record::decode(&d), None, "flip at byte {i}");
            }
            assert_eq!(Record::decode(&b[..RECORD_LEN - 1]), None);
        }
    }

    #[test]
    fn torn_tail_is_truncated_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.map");
        let mut bytes = Vec::new();
        Record::Synced(StorePos::new(1, 4)).encode_into(&mut bytes);
        Record::Synced(StorePos::new(1, 8)).encode_into(&mut bytes);
        bytes.truncate(RECORD_LEN + 20);
        std::fs::write(&path, &bytes).unwrap();
        let (mut m, recs) = MapFile::open(&path).unwrap();
        assert_eq!(recs, vec![(0, Record::Synced(StorePos::new(1, 4)))]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), RECORD_LEN as u64);
        m.append_sync(&[Record::Synced(StorePos::new(1, 9))])
            .unwrap();
        let (_, recs) = MapFile::open(&path).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1], (48, Record::Synced(StorePos::new(1, 9))));
    }
}

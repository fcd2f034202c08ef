//! An in-memory [`BinlogSource`] for tests: not the product's binlog store.
//!
//! It holds real event bytes produced by the protocol crate's encoder, so dump sessions and
//! clients see exactly what a file-backed store would serve: FORMAT_DESCRIPTION and
//! PREVIOUS_GTIDS at the start of every file, GTID / BEGIN / TABLE_MAP / WRITE_ROWS / XID
//! transactions, and a ROTATE at the end of every closed file.

use std::sync::{Arc, Mutex, MutexGuard};

use tibinlog_protocol::binlog::{
    ChecksumAlg, ColumnDef, ColumnKind, EventHeader, EventWriter, FormatDescription, GtidEvent,
    GtidSet, PreviousGtids, QueryEvent, Rotate, RowsKind, Sid, TableDef, TableMap, Transaction,
    BINLOG_MAGIC, HEADER_LEN,
};
use tibinlog_protocol::value::Value;
use tokio::sync::watch;

use super::source::{BinlogFile, BinlogPosition, BinlogReader, BinlogSource, SourceError};

/// First event timestamp of the fake history (2023-11-14).
const BASE_TIMESTAMP: u32 = 1_700_000_000;
/// Server version written into FORMAT_DESCRIPTION events.
pub const FDE_VERSION: &str = "8.0.36-tibinlog";

#[derive(Debug)]
struct MemFile {
    name: String,
    bytes: Vec<u8>,
    /// GTIDs written before this file (its PREVIOUS_GTIDS).
    previous: GtidSet,
}

#[derive(Debug)]
struct State {
    files: Vec<MemFile>,
    next_seq: u32,
    executed: GtidSet,
    purged: GtidSet,
    next_gno: u64,
    /// GTID sequence number inside the current file.
    seq_in_file: i64,
    writer: EventWriter,
}

/// In-memory binlog, cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct MemSource {
    state: Arc<Mutex<State>>,
    end_tx: Arc<watch::Sender<BinlogPosition>>,
    sid: Sid,
}

/// The table every generated transaction writes to: `test.t (id BIGINT, name VARCHAR(32))`.
pub fn test_table() -> TableDef {
    TableDef {
        table_id: 100,
        schema: "test".into(),
        table: "t".into(),
        columns: vec![
            ColumnDef::new("id", ColumnKind::LongLong).not_null(),
            ColumnDef::new("name", ColumnKind::VarString { max_bytes: 128 }).collation(255),
        ],
        primary_key: vec![0],
    }
}

impl MemSource {
    /// A binlog with one empty file `binlog.000001`; `checksum` selects CRC32 or NONE.
    pub fn new(server_id: u32, sid: Sid, checksum: bool) -> Self {
        let mut state = State {
            files: Vec::new(),
            next_seq: 1,
            executed: GtidSet::new(),
            purged: GtidSet::new(),
            next_gno: 1,
            seq_in_file: 0,
            writer: EventWriter::new(server_id, checksum),
        };
        state.open_file();
        let end = state.end();
        let (end_tx, _) = watch::channel(end);
        Self {
            state: Arc::new(Mutex::new(state)),
            end_tx: Arc::new(end_tx),
            sid,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn publish(&self, end: BinlogPosition) {
        self.end_tx.send_replace(end);
    }

    /// Appends one transaction inserting `rows` (id, name) into [`test_table`]. Returns its
    /// GTID number and the end position.
    pub fn append_insert(&self, rows: &[(i64, &str)]) -> (u64, BinlogPosition) {
        let table = test_table();
        let mut st = self.lock();
        let gno = st.next_gno;
        st.next_gno += 1;
        st.seq_in_file += 1;
        let ts = BASE_TIMESTAMP + gno as u32;
        let gtid = GtidEvent::new(
            self.sid,
            gno,
            st.seq_in_file,
            u64::from(ts) * 1_000_000,
            80036,
        );
        let State { files, writer, .. } = &mut *st;
        let Some(file) = files.last_mut() else {
            unreachable!("a MemSource always has a file")
        };
        let pos = file.bytes.len() as u64;
        let mut buf = Vec::new();
        let mut tx = Transaction::begin(writer, &mut buf, pos, ts, gtid);
        let values: Vec<Vec<Value>> = rows
            .iter()
            .map(|(id, name)| vec![Value::Int(*id), Value::Bytes(name.as_bytes().to_vec())])
            .collect();
        let res = tx
            .write(&QueryEvent::begin(1))
            .and_then(|()| tx.write(&TableMap::new(&table)))
            .and_then(|()| {
                tx.rows(&table, RowsKind::Write, |r| {
                    values.iter().try_for_each(|row| r.write_row(row))
                })
            })
            .and_then(|()| tx.commit(gno));
        if let Err(e) = res {
            panic!("test transaction does not encode: {e}");
        }
        file.bytes.extend_from_slice(&buf);
        st.executed.add(self.sid, gno);
        let end = st.end();
        drop(st);
        self.publish(end.clone());
        (gno, end)
    }

    /// Closes the current file with a ROTATE and starts the next one.
    pub fn rotate(&self) -> BinlogPosition {
        let mut st = self.lock();
        let next = file_name(st.next_seq);
        let State { files, writer, .. } = &mut *st;
        if let Some(file) = files.last_mut() {
            let pos = file.bytes.len() as u64;
            let rotate = Rotate {
                position: 4,
                next_file: &next,
            };
            let ts = BASE_TIMESTAMP + 1_000_000;
            if let Err(e) = writer.write(&mut file.bytes, pos, ts, &rotate) {
                panic!("rotate does not encode: {e}");
            }
        }
        st.open_file();
        let end = st.end();
        drop(st);
        self.publish(end.clone());
        end
    }

    /// The whole content of `file` (magic included), for tests that compare bytes.
    pub fn file_bytes(&self, file: &str) -> Option<Vec<u8>> {
        let st = self.lock();
        st.files
            .iter()
            .find(|f| f.name == file)
            .map(|f| f.bytes.clone())
    }

    /// The SID every GTID of this source uses.
    pub fn sid(&self) -> Sid {
        self.sid
    }
}

fn file_name(seq: u32) -> String {
    format!("binlog.{seq:06}")
}

impl State {
    fn open_file(&mut self) {
        let name = file_name(self.next_seq);
        self.next_seq += 1;
        self.seq_in_file = 0;
        let mut bytes = BINLOG_MAGIC.to_vec();
        let alg = if self.writer.checksum {
            ChecksumAlg::Crc32
        } else {
            ChecksumAlg::Off
        };
        let fde = FormatDescription::mysql80(FDE_VERSION, BASE_TIMESTAMP, alg);
        let res = self
            .writer
            .write(&mut bytes, 4, BASE_TIMESTAMP, &fde)
            .and_then(|pos| {
                self.writer.write(
                    &mut bytes,
                    pos,
                    BASE_TIMESTAMP,
                    &PreviousGtids(&self.executed),
                )
            });
        if let Err(e) = res {
            panic!("file prologue does not encode: {e}");
        }
        self.files.push(MemFile {
            name,
            bytes,
            previous: self.executed.clone(),
        });
    }

    fn end(&self) -> BinlogPosition {
        self.files
            .last()
            .map(|f| BinlogPosition::new(f.name.clone(), f.bytes.len() as u64))
            .unwrap_or_default()
    }

    fn file(&self, name: &str) -> Result<&MemFile, SourceError> {
        self.files
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| SourceError::UnknownFile { file: name.into() })
    }
}

/// Length of the event starting at `bytes[pos..]`, if it is complete.
fn event_len_at(bytes: &[u8], pos: usize) -> Option<usize> {
    let h = EventHeader::parse(bytes.get(pos..pos + HEADER_LEN)?).ok()?;
    let len = h.event_size as usize;
    (pos + len <= bytes.len()).then_some(len)
}

impl BinlogSource for MemSource {
    fn checksum_alg(&self) -> ChecksumAlg {
        if self.lock().writer.checksum {
            ChecksumAlg::Crc32
        } else {
            ChecksumAlg::Off
        }
    }

    fn files(&self) -> Vec<BinlogFile> {
        self.lock()
            .files
            .iter()
            .map(|f| BinlogFile {
                name: f.name.clone(),
                size: f.bytes.len() as u64,
            })
            .collect()
    }

    fn end_position(&self) -> BinlogPosition {
        self.lock().end()
    }

    fn subscribe_end(&self) -> watch::Receiver<BinlogPosition> {
        self.end_tx.subscribe()
    }

    fn gtid_executed(&self) -> GtidSet {
        self.lock().executed.clone()
    }

    fn gtid_purged(&self) -> GtidSet {
        self.lock().purged.clone()
    }

    fn open(&self, file: &str, pos: u64) -> Result<Box<dyn BinlogReader>, SourceError> {
        let st = self.lock();
        let f = st.file(file)?;
        let len = f.bytes.len() as u64;
        if pos > len {
            return Err(SourceError::PastEnd {
                file: file.into(),
                pos,
            });
        }
        let mut at = 4usize;
        while (at as u64) < pos {
            match event_len_at(&f.bytes, at) {
                Some(n) => at += n,
                None => break,
            }
        }
        if at as u64 != pos {
            return Err(SourceError::NotAtEventBoundary {
                file: file.into(),
                pos,
            });
        }
        Ok(Box::new(MemReader {
            source: self.clone(),
            file: file.into(),
            pos,
        }))
    }

    fn locate_gtid_start(&self, have: &GtidSet) -> Result<BinlogPosition, SourceError> {
        let st = self.lock();
        if !st.purged.is_subset_of(have) {
            return Err(SourceError::Purged);
        }
        st.files
            .iter()
            .rev()
            .find(|f| f.previous.is_subset_of(have))
            .map(|f| BinlogPosition::new(f.name.clone(), 4))
            .ok_or(SourceError::Purged)
    }

    fn purge_to(&self, file: &str) -> Result<(), SourceError> {
        let mut st = self.lock();
        let idx = st
            .files
            .iter()
            .position(|f| f.name == file)
            .ok_or_else(|| SourceError::UnknownFile { file: file.into() })?;
        st.files.drain(..idx);
        let purged = st.files.first().map(|f| f.previous.clone());
        if let Some(p) = purged {
            st.purged = p;
        }
        Ok(())
    }

    fn purge_before(&self, _unix_secs: u64) -> Result<(), SourceError> {
        Err(SourceError::Refused(
            "PURGE BINARY LOGS BEFORE is not supported by the in-memory binlog".into(),
        ))
    }
}

struct MemReader {
    source: MemSource,
    file: String,
    pos: u64,
}

impl BinlogReader for MemReader {
    fn next_event(&mut self) -> Result<Option<Vec<u8>>, SourceError> {
        let st = self.source.lock();
        let f = st.file(&self.file).map_err(|_| SourceError::Purged)?;
        let at = self.pos as usize;
        if at >= f.bytes.len() {
            return Ok(None);
        }
        let Some(n) = event_len_at(&f.bytes, at) else {
            return Err(SourceError::Corrupt {
                file: self.file.clone(),
                pos: self.pos,
                detail: "truncated event".into(),
            });
        };
        let ev = f.bytes[at..at + n].to_vec();
        self.pos += n as u64;
        Ok(Some(ev))
    }

    fn position(&self) -> BinlogPosition {
        BinlogPosition::new(self.file.clone(), self.pos)
    }
}

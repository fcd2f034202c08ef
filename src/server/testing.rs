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
use crate::sql::catalog::{
    CatalogSnapshot, ColumnMeta, HandleKind, IndexMeta, TableKind, TableMeta,
};
use crate::sql::error::Result as SqlResult;
use crate::sql::exec::RowStream;
use crate::sql::keyrange::{Access, KeyRanges, ScanOrder, ScanRequest};
use crate::sql::plan::SnapshotSource;
use crate::sql::types::SqlType;

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

    /// The end, lined up with a timestamp that counts the transactions written (the in-memory
    /// tables of [`MemTables`] ignore it).
    fn snapshot_point(&self) -> Option<super::SnapshotPoint> {
        let st = self.lock();
        Some(super::SnapshotPoint {
            ts: st.next_gno,
            end: st.end(),
            gtid_executed: st.executed.clone(),
        })
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

    fn purge_to(&self, file: &str) -> Result<Vec<crate::sql::error::SqlWarning>, SourceError> {
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
        Ok(Vec::new())
    }

    fn purge_before(
        &self,
        _unix_secs: u64,
    ) -> Result<Vec<crate::sql::error::SqlWarning>, SourceError> {
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

/// An in-memory catalog with rows, for tests of the SQL front: a [`super::SchemaProvider`]
/// over a fixed [`CatalogSnapshot`] and a [`SnapshotSource`] serving each table's rows (in
/// handle order for integer-key tables), ignoring timestamps.
#[derive(Debug, Clone, Default)]
pub struct MemTables {
    catalog: Arc<CatalogSnapshot>,
    rows: Arc<std::collections::HashMap<TableName, Vec<Vec<Value>>>>,
}

/// (database, table).
type TableName = (String, String);

/// One table of a [`MemTables`]: `(column name, type, column_type text)` per column, the
/// primary key column (an integer handle) if any, and the rows.
#[derive(Debug, Clone)]
pub struct MemTable {
    pub db: String,
    pub name: String,
    pub columns: Vec<(String, SqlType, String)>,
    pub pk: Option<usize>,
    pub rows: Vec<Vec<Value>>,
}

impl MemTables {
    pub fn new(tables: Vec<MemTable>) -> Self {
        let mut metas = Vec::new();
        let mut rows = std::collections::HashMap::new();
        for (i, t) in tables.into_iter().enumerate() {
            let columns: Vec<ColumnMeta> = t
                .columns
                .iter()
                .enumerate()
                .map(|(ci, (name, ty, column_type))| {
                    let mut ty = ty.clone();
                    if Some(ci) == t.pk {
                        ty.key_flags |= mysql_common::constants::ColumnFlags::PRI_KEY_FLAG;
                        ty.nullable = false;
                    }
                    ColumnMeta {
                        name: name.clone(),
                        data_type: column_type
                            .split(['(', ' '])
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                        column_type: column_type.clone(),
                        default: None,
                        extra: String::new(),
                        comment: String::new(),
                        key: if Some(ci) == t.pk {
                            "PRI".into()
                        } else {
                            String::new()
                        },
                        charset: ty.is_string().then(|| "utf8mb4".to_owned()),
                        collation: ty.is_string().then(|| "utf8mb4_bin".to_owned()),
                        generated: None,
                        char_max_len: None,
                        char_octet_len: None,
                        numeric_precision: None,
                        numeric_scale: None,
                        datetime_precision: None,
                        ty,
                    }
                })
                .collect();
            let mut sorted = t.rows;
            let handle = match t.pk {
                Some(pk) => {
                    sorted.sort_by_key(|r| match r.get(pk) {
                        Some(Value::Int(i)) => *i as i128,
                        Some(Value::UInt(u)) => *u as i128,
                        _ => 0,
                    });
                    HandleKind::IntPk {
                        column: pk,
                        unsigned: columns[pk].ty.unsigned,
                    }
                }
                None => HandleKind::RowId,
            };
            let indexes =
                t.pk.map(|pk| IndexMeta {
                    name: "PRIMARY".into(),
                    stored: None,
                    primary: true,
                    unique: true,
                    columns: vec![(columns[pk].name.clone(), None)],
                    expressions: Vec::new(),
                    comment: String::new(),
                    visible: true,
                })
                .into_iter()
                .collect();
            metas.push(Arc::new(TableMeta {
                db: t.db.clone(),
                name: t.name.clone(),
                id: 1000 + i as i64,
                kind: TableKind::BaseTable,
                columns,
                indexes,
                foreign_keys: Vec::new(),
                checks: Vec::new(),
                partitions: Vec::new(),
                handle,
                charset: "utf8mb4".into(),
                collation: "utf8mb4_bin".into(),
                comment: String::new(),
                auto_increment: None,
                create_time: None,
                create_options: String::new(),
                create_sql: format!("CREATE TABLE `{}` (…)", t.name),
                rows: None,
            }));
            rows.insert((t.db, t.name), sorted);
        }
        MemTables {
            catalog: Arc::new(CatalogSnapshot::from_tables(metas, Vec::new())),
            rows: Arc::new(rows),
        }
    }
}

impl super::SchemaProvider for MemTables {
    fn at(&self, _end: &BinlogPosition) -> Arc<dyn super::SchemaProvider> {
        Arc::new(self.clone())
    }
    fn catalog(&self) -> Arc<CatalogSnapshot> {
        self.catalog.clone()
    }
}

impl SnapshotSource for MemTables {
    fn scan(
        &self,
        table: &TableMeta,
        _ts: u64,
        request: ScanRequest,
    ) -> SqlResult<Box<dyn RowStream>> {
        let all = self
            .rows
            .get(&(table.db.clone(), table.name.clone()))
            .cloned()
            .unwrap_or_default();
        let rows = match (request.access, table.handle) {
            (Access::Table(KeyRanges::Int(ranges)), HandleKind::IntPk { column, .. }) => all
                .into_iter()
                .filter(|r| {
                    let h = match r.get(column) {
                        Some(Value::Int(i)) => *i as i128,
                        Some(Value::UInt(u)) => *u as i128,
                        _ => return false,
                    };
                    ranges.iter().any(|(lo, hi)| *lo <= h && h <= *hi)
                })
                .collect(),
            _ => all,
        };
        // In handle order, as TiKV's keys order them (descending when asked).
        let mut rows = rows;
        if let HandleKind::IntPk { column, .. } = table.handle {
            let handle = |r: &Vec<Value>| match r.get(column) {
                Some(Value::Int(i)) => i128::from(*i),
                Some(Value::UInt(u)) => i128::from(*u),
                _ => i128::MIN,
            };
            rows.sort_by_key(handle);
            if request.order == ScanOrder::Descending {
                rows.reverse();
            }
        }
        Ok(Box::new(MemStream {
            rows: rows.into_iter(),
        }))
    }
}

/// Rows of a [`MemTables`] scan, in pages of 3 (so tests cross page boundaries).
struct MemStream {
    rows: std::vec::IntoIter<Vec<Value>>,
}

impl RowStream for MemStream {
    fn next_batch(
        &mut self,
        out: &mut Vec<Vec<Value>>,
        _spare: &mut Vec<Vec<Value>>,
    ) -> SqlResult<bool> {
        let before = out.len();
        out.extend(self.rows.by_ref().take(3));
        Ok(out.len() > before)
    }
}

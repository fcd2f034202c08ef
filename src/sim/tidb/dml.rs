//! INSERT / UPDATE / DELETE by primary key, in one optimistic transaction.
//!
//! Keys and values are TiDB's: the record key `t{physical id}_r{handle}` holds the row in
//! format v2; every index gets `t{id}_i{index id}{datums}` — unique indexes without NULLs hold
//! the handle in the value (8-byte big-endian int handle, or TiDB's common-handle layout
//! `00 7F len:u16be handle`), other indexes append the handle to the key and hold `"0"`.
//! A clustered PK is the record key itself and has no index entries. An UPDATE that moves the
//! row to another handle (PK change, or another partition) deletes the old record key and
//! inserts the new one in the same transaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use tibinlog_protocol::value::Value;

use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::Ts;
use crate::tidb::codec::{encode_key_datums, Datum};
use crate::tidb::key::{index_prefix, record_key, Handle};

use super::catalog::{int_handle, key_datum, HandleKind, IndexPlan, TableMeta};
use super::error::{Result, TidbError};
use super::kv::{CommitMode, Committed, KvTxn};
use super::truth::{RowOp, TruthRow, TruthTxn};
use super::Tidb;

/// TiDB's `CommonHandleFlag` in unique index values.
const COMMON_HANDLE_FLAG: u8 = 127;

/// The index key and value of `row` for `idx`.
pub(crate) fn index_entry(
    t: &TableMeta,
    idx: &IndexPlan,
    physical_id: i64,
    handle: &Handle,
    row: &[Value],
) -> Result<(Vec<u8>, Vec<u8>)> {
    let row = t.index_row(row)?;
    let mut datums = Vec::with_capacity(idx.cols.len() + 1);
    for &p in &idx.cols {
        datums.push(key_datum(&row[p], t.key_type(p))?);
    }
    let distinct = idx.unique && !datums.iter().any(|d| matches!(d, Datum::Null));
    let mut key = index_prefix(physical_id, idx.id);
    encode_key_datums(&mut key, &datums)?;
    if distinct {
        let value = match handle {
            Handle::Int(h) => (*h as u64).to_be_bytes().to_vec(),
            Handle::Common(b) => {
                let mut v = Vec::with_capacity(b.len() + 4);
                v.extend_from_slice(&[0, COMMON_HANDLE_FLAG]);
                v.extend_from_slice(&(b.len() as u16).to_be_bytes());
                v.extend_from_slice(b);
                v
            }
        };
        Ok((key, value))
    } else {
        match handle {
            Handle::Int(h) => encode_key_datums(&mut key, &[Datum::Int(*h)])?,
            Handle::Common(b) => key.extend_from_slice(b),
        }
        Ok((key, b"0".to_vec()))
    }
}

struct Touch {
    table: Arc<TableMeta>,
    before: Option<Vec<Value>>,
    after: Option<Vec<Value>>,
}

/// A located row: physical id, handle, record key, current values.
struct Located {
    physical_id: i64,
    handle: Handle,
    key: Vec<u8>,
    row: Vec<Value>,
}

/// One user transaction. Statements buffer their writes; [`commit`](Self::commit) runs the
/// commit protocol and reports the transaction to the truth log.
pub struct Txn<'a> {
    tidb: &'a mut Tidb,
    core: &'a mut SimCore,
    kv: KvTxn,
    touched: Vec<Touch>,
    by_key: BTreeMap<Vec<u8>, usize>,
    outputs: Vec<StoreOutput>,
}

impl Tidb {
    /// Starts a transaction with a start_ts from the TSO.
    pub fn begin<'a>(&'a mut self, core: &'a mut SimCore) -> Txn<'a> {
        let start_ts = core.ts();
        Txn {
            tidb: self,
            core,
            kv: KvTxn::new(start_ts),
            touched: Vec::new(),
            by_key: BTreeMap::new(),
            outputs: Vec::new(),
        }
    }
}

impl Txn<'_> {
    /// The snapshot ts.
    pub fn start_ts(&self) -> Ts {
        self.kv.start_ts()
    }

    fn table(&self, db: &str, table: &str) -> Result<Arc<TableMeta>> {
        self.tidb.catalog.table_or_err(db, table).cloned()
    }

    fn touch(
        &mut self,
        t: &Arc<TableMeta>,
        key: &[u8],
        before: Option<Vec<Value>>,
        after: Option<Vec<Value>>,
    ) {
        if self.tidb.truth.is_none() {
            return; // nothing to report at commit
        }
        match self.by_key.get(key) {
            Some(&i) => self.touched[i].after = after,
            None => {
                self.by_key.insert(key.to_vec(), self.touched.len());
                self.touched.push(Touch {
                    table: t.clone(),
                    before,
                    after,
                });
            }
        }
    }

    fn check_len(t: &TableMeta, row: &[Value]) -> Result<()> {
        if row.len() != t.names.len() {
            return Err(TidbError::BadRow {
                table: t.name().to_owned(),
                problem: "value count differs from column count",
            });
        }
        Ok(())
    }

    fn write_indexes(&mut self, t: &TableMeta, pid: i64, h: &Handle, row: &[Value]) -> Result<()> {
        for idx in &t.indexes {
            let (k, v) = index_entry(t, idx, pid, h, row)?;
            if v.as_slice() == b"0" {
                self.kv.put(k, v);
            } else {
                self.kv.insert(k, v);
            }
        }
        Ok(())
    }

    /// INSERT one row (values in column order).
    pub fn insert(&mut self, db: &str, table: &str, row: &[Value]) -> Result<()> {
        let t = self.table(db, table)?;
        Self::check_len(&t, row)?;
        let pid = t.route_row(row)?;
        let handle = match t.row_handle(row)? {
            Some(h) => h,
            None => Handle::Int(self.tidb.alloc_row_id(
                self.core,
                t.db_id,
                t.info.id,
                &mut self.outputs,
            )?),
        };
        let key = record_key(pid, &handle);
        let mut value = Vec::new();
        t.codec.encode_v2(row, &mut value)?;
        let after = self.tidb.truth.is_some().then(|| row.to_vec());
        self.touch(&t, &key, None, after);
        self.kv.insert(key, value);
        self.write_indexes(&t, pid, &handle, row)
    }

    fn locate(&mut self, t: &Arc<TableMeta>, key: &[Value]) -> Result<Option<Located>> {
        let bad = |problem| TidbError::BadRow {
            table: t.name().to_owned(),
            problem,
        };
        let pos = t
            .key_positions()
            .ok_or_else(|| bad("table has no primary key"))?;
        if pos.len() != key.len() {
            return Err(bad("key value count differs from primary key columns"));
        }
        let part = t
            .partition_cols()
            .iter()
            .map(|pc| {
                pos.iter()
                    .position(|p| p == pc)
                    .map(|i| &key[i])
                    .ok_or_else(|| bad("partition column is not in the primary key"))
            })
            .collect::<Result<Vec<&Value>>>()?;
        let pid = t.route(&part)?;
        let handle = match &t.handle {
            HandleKind::Int(_) => Handle::Int(
                int_handle(&key[0]).ok_or_else(|| bad("integer primary key must be an integer"))?,
            ),
            HandleKind::Common(_) => {
                let mut d = Vec::with_capacity(key.len());
                for (v, &p) in key.iter().zip(&pos) {
                    d.push(key_datum(v, &t.types[p])?);
                }
                Handle::common_from_datums(&d)?
            }
            HandleKind::RowId => {
                let idx = t
                    .indexes
                    .iter()
                    .find(|i| i.primary)
                    .ok_or_else(|| bad("no primary key"))?;
                let mut ik = index_prefix(pid, idx.id);
                let mut d = Vec::with_capacity(key.len());
                for (v, &p) in key.iter().zip(&pos) {
                    d.push(key_datum(v, &t.types[p])?);
                }
                encode_key_datums(&mut ik, &d)?;
                match self.kv.get(self.core, &ik)? {
                    None => return Ok(None),
                    Some(v) => Handle::Int(
                        v.get(..8)
                            .and_then(|b| b.try_into().ok())
                            .map(|b| u64::from_be_bytes(b) as i64)
                            .ok_or(TidbError::CorruptedMeta {
                                what: "unique index value",
                            })?,
                    ),
                }
            }
        };
        let rkey = record_key(pid, &handle);
        let Some(value) = self.kv.get(self.core, &rkey)? else {
            return Ok(None);
        };
        let mut row = Vec::with_capacity(t.names.len());
        t.codec.decode_into(&value, Some(&handle), &mut row)?;
        Ok(Some(Located {
            physical_id: pid,
            handle,
            key: rkey,
            row,
        }))
    }

    /// SELECT by primary key (sees this transaction's writes).
    pub fn get(&mut self, db: &str, table: &str, key: &[Value]) -> Result<Option<Vec<Value>>> {
        let t = self.table(db, table)?;
        Ok(self.locate(&t, key)?.map(|l| l.row))
    }

    /// UPDATE the row with primary key `key` to `row` (all columns, in column order). A row
    /// equal to the current one writes nothing, as in TiDB.
    pub fn update(&mut self, db: &str, table: &str, key: &[Value], row: &[Value]) -> Result<()> {
        let t = self.table(db, table)?;
        Self::check_len(&t, row)?;
        let old = self
            .locate(&t, key)?
            .ok_or_else(|| TidbError::RowNotFound {
                table: t.name().to_owned(),
            })?;
        if old.row.as_slice() == row {
            return Ok(());
        }
        let pid = t.route_row(row)?;
        let handle = t.row_handle(row)?.unwrap_or_else(|| old.handle.clone());
        let mut value = Vec::new();
        t.codec.encode_v2(row, &mut value)?;
        if pid == old.physical_id && handle == old.handle {
            self.touch(&t, &old.key, Some(old.row.clone()), Some(row.to_vec()));
            self.kv.put(old.key.clone(), value);
        } else {
            self.touch(&t, &old.key, Some(old.row.clone()), None);
            self.kv.delete(old.key.clone());
            let key = record_key(pid, &handle);
            self.touch(&t, &key, None, Some(row.to_vec()));
            self.kv.insert(key, value);
        }
        for idx in &t.indexes {
            let (ok, ov) = index_entry(&t, idx, old.physical_id, &old.handle, &old.row)?;
            let (nk, nv) = index_entry(&t, idx, pid, &handle, row)?;
            if ok == nk && ov == nv {
                continue;
            }
            let distinct = nv.as_slice() != b"0";
            self.kv.delete(ok);
            if distinct {
                self.kv.insert(nk, nv);
            } else {
                self.kv.put(nk, nv);
            }
        }
        Ok(())
    }

    /// DELETE the row with primary key `key`.
    pub fn delete(&mut self, db: &str, table: &str, key: &[Value]) -> Result<()> {
        let t = self.table(db, table)?;
        let old = self
            .locate(&t, key)?
            .ok_or_else(|| TidbError::RowNotFound {
                table: t.name().to_owned(),
            })?;
        for idx in &t.indexes {
            let (k, _) = index_entry(&t, idx, old.physical_id, &old.handle, &old.row)?;
            self.kv.delete(k);
        }
        self.touch(&t, &old.key, Some(old.row), None);
        self.kv.delete(old.key);
        Ok(())
    }

    /// Number of keys written so far.
    pub fn key_count(&self) -> usize {
        self.kv.len()
    }

    /// Commits with the configured protocol.
    pub fn commit(self) -> Result<Committed> {
        let mode = self.tidb.cfg.commit_mode;
        self.commit_with(mode)
    }

    /// Commits with `mode` (falling back as client-go does) and logs the net row changes.
    pub fn commit_with(self, mode: CommitMode) -> Result<Committed> {
        let Txn {
            tidb,
            core,
            kv,
            touched,
            outputs,
            ..
        } = self;
        let mut done = kv.commit(core, mode)?;
        let mut all = outputs;
        all.append(&mut done.outputs);
        done.outputs = all;
        if done.mode.is_none() || tidb.truth.is_none() {
            return Ok(done);
        }
        let rows = touched
            .into_iter()
            .filter_map(|t| {
                let op = match (&t.before, &t.after) {
                    (None, Some(_)) => RowOp::Insert,
                    (Some(_), None) => RowOp::Delete,
                    (Some(b), Some(a)) if b != a => RowOp::Update,
                    _ => return None,
                };
                Some(TruthRow {
                    table: t.table,
                    op,
                    before: t.before,
                    after: t.after,
                })
            })
            .collect();
        tidb.emit_truth(&TruthTxn {
            start_ts: done.start_ts,
            commit_ts: done.commit_ts,
            rows,
            ddl: None,
        })?;
        Ok(done)
    }
}

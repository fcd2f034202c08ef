//! Raw rows → typed row changes, with the schema valid at each row's commit ts.
//!
//! | raw row | change | images |
//! |---|---|---|
//! | PUT, empty `old_value` | Insert | after = `value` |
//! | PUT, `old_value` | Update | before = `old_value`, after = `value` |
//! | DELETE, `old_value` | Delete | before = `old_value` |
//! | DELETE, empty `old_value` | error [`MounterError::MissingOldValue`] | never an empty before image |
//!
//! A primary-key change reaches us as DELETE(old key) + PUT(new key) of one transaction and
//! stays two changes, as TiKV sends it. Both images are decoded with the schema at `commit_ts`;
//! an old value written before an ADD COLUMN gets the column's origin default, one written
//! before a DROP COLUMN loses the column, as TiCDC's mounter does.
//!
//! Keys that are not row keys (index keys, meta keys), rows of system schemas and reserved
//! system table ids, and rows of tables outside the filter are [`Mounted::Skipped`]; rows of
//! the DDL spans go to the DDL path and come out as [`Mounted::Ddl`].
//!
//! Per row, the only allocations are the value vectors of the images (and a common handle's
//! key bytes); the row decoder of each table version is built once, in the schema store.

use std::sync::Arc;

use tibinlog_protocol::value::Value;

use super::ddl::{ddl_events, decode_job_row, is_ddl_key, DdlEvent};
use super::error::{MounterError, Result};
use super::schema_store::{MountedTable, SchemaStore};
use crate::model::{Op, RawRow, Ts};
use crate::tidb::key::{self, ParsedKey, MAX_INT48};

/// User object ids are below this; ids at or above are TiDB's reserved system tables.
pub const RESERVED_TABLE_ID_START: i64 = MAX_INT48 - 1000;

/// The kind of a row change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowOp {
    Insert,
    Update,
    Delete,
}

/// One typed row change.
#[derive(Debug, Clone)]
pub struct RowChange {
    /// The table version the images were decoded with (TABLE_MAP from `table.def`).
    pub table: Arc<MountedTable>,
    pub op: RowOp,
    /// Cells in `table.def.columns` order; `Some` for Update and Delete.
    pub before: Option<Vec<Value>>,
    /// Cells in `table.def.columns` order; `Some` for Insert and Update.
    pub after: Option<Vec<Value>>,
    pub start_ts: Ts,
    pub commit_ts: Ts,
}

/// What a raw row became.
#[derive(Debug, Clone)]
pub enum Mounted {
    Row(RowChange),
    /// A DDL-span row that finished a job: the schema store moved; these go to the binlog
    /// (possibly none, if filtered or TiDB-only).
    Ddl(Vec<DdlEvent>),
    /// Nothing for the binlog.
    Skipped,
}

/// The mounter: a schema store plus the row and DDL paths.
#[derive(Debug)]
pub struct Mounter {
    store: SchemaStore,
}

impl Mounter {
    /// A mounter over a bootstrapped schema store.
    pub fn new(store: SchemaStore) -> Self {
        Mounter { store }
    }

    /// The schema store.
    pub fn store(&self) -> &SchemaStore {
        &self.store
    }

    /// The schema store, to apply jobs that come from elsewhere or to GC it.
    pub fn store_mut(&mut self) -> &mut SchemaStore {
        &mut self.store
    }

    /// Mounts one raw row. Rows must come in `(commit_ts, start_ts)` order when DDL-span rows
    /// are among them (DDL jobs are applied as they come).
    pub fn mount(&mut self, row: &RawRow) -> Result<Mounted> {
        if is_ddl_key(&row.key) {
            return self.on_ddl_row(row).map(Mounted::Ddl);
        }
        Ok(match self.mount_row(row)? {
            Some(change) => Mounted::Row(change),
            None => Mounted::Skipped,
        })
    }

    /// The DDL path alone: applies the job a DDL-span row finishes and returns its events.
    pub fn on_ddl_row(&mut self, row: &RawRow) -> Result<Vec<DdlEvent>> {
        let Some(job) = decode_job_row(&self.store, row)? else {
            return Ok(Vec::new());
        };
        match self.store.apply_ddl_job(job, row.commit_ts)? {
            Some(applied) => Ok(ddl_events(&applied, row.start_ts, self.store.filter())),
            None => Ok(Vec::new()),
        }
    }

    /// The row path alone: `None` for keys and tables that produce nothing.
    pub fn mount_row(&self, row: &RawRow) -> Result<Option<RowChange>> {
        let Some(table_id) = key::table_id_of(&row.key) else {
            return Ok(None);
        };
        if table_id >= RESERVED_TABLE_ID_START {
            return Ok(None);
        }
        let row_err = |source| MounterError::Row {
            table_id,
            commit_ts: row.commit_ts,
            source,
        };
        let handle = match key::parse_key(&row.key).map_err(row_err)? {
            ParsedKey::Record { handle, .. } => handle,
            _ => return Ok(None),
        };
        if row.commit_ts <= self.store.valid_after() {
            return Err(MounterError::SchemaTooOld {
                commit_ts: row.commit_ts,
                valid_after: self.store.valid_after(),
            });
        }
        let table =
            self.store
                .table_at(table_id, row.commit_ts)
                .ok_or(MounterError::UnknownTable {
                    table_id,
                    commit_ts: row.commit_ts,
                })?;
        if !table.included || table.is_system() {
            return Ok(None);
        }
        let decode = |bytes: &[u8]| -> Result<Vec<Value>> {
            let mut cells = Vec::with_capacity(table.def.columns.len());
            table
                .decode_row(bytes, Some(&handle), &mut cells)
                .map_err(row_err)?;
            Ok(cells)
        };
        let (op, before, after) = match (row.op, row.old_value.is_empty()) {
            (Op::Put, true) => (RowOp::Insert, None, Some(decode(&row.value)?)),
            (Op::Put, false) => (
                RowOp::Update,
                Some(decode(&row.old_value)?),
                Some(decode(&row.value)?),
            ),
            (Op::Delete, false) => (RowOp::Delete, Some(decode(&row.old_value)?), None),
            (Op::Delete, true) => {
                return Err(MounterError::MissingOldValue {
                    op: "delete",
                    table_id,
                    commit_ts: row.commit_ts,
                })
            }
        };
        Ok(Some(RowChange {
            table,
            op,
            before,
            after,
            start_ts: row.start_ts,
            commit_ts: row.commit_ts,
        }))
    }
}

//! What a DDL job is planned to do before it is submitted: the meta edits, the job's fields
//! and arguments, the index entries to backfill; and what a finished job reports.

use crate::sim::core::StoreOutput;
use crate::sim::tidb::error::TidbError;
use crate::sim::Ts;
use crate::tidb::schema::{DBInfo, TableInfo};

/// `txn_source` of index backfill writes: lossy DDL reorg (bit 8), dropped by TiKV's CDC.
pub const BACKFILL_TXN_SOURCE: u64 = 1 << 8;

/// What a finished DDL reports.
#[derive(Debug, Clone, PartialEq)]
pub struct DdlOutcome {
    pub job_id: i64,
    pub schema_version: i64,
    /// start_ts of the transaction that made the job done.
    pub start_ts: Ts,
    /// Its commit ts: the FinishedTS a CDC client assigns to the job.
    pub finished_ts: Ts,
    /// Everything the CDC endpoints emitted during the three (or four) transactions.
    pub outputs: Vec<StoreOutput>,
}

/// One change to the schema meta (and the in-memory catalog) a job makes.
pub(in crate::sim::tidb) enum Edit {
    PutDb(DBInfo),
    DropDb(i64),
    PutTable(i64, Box<TableInfo>),
    DropTable(i64, i64),
    /// Moves the `TID:` allocator field between databases (cross-database rename).
    MoveRowId {
        table: i64,
        from: i64,
        to: i64,
    },
    /// Exchange partition: both tables' allocators go to the larger end, the plain table's
    /// under its new id (`(db id, table id)` pairs).
    ExchangeRowIds {
        pt: (i64, i64),
        nt_old: (i64, i64),
        nt_new: (i64, i64),
    },
}

/// A checked DDL, ready to run as a job.
pub(in crate::sim::tidb) struct Plan {
    pub(super) action: u8,
    pub(super) schema_id: i64,
    pub(super) schema_name: String,
    pub(super) table_id: i64,
    pub(super) table_name: String,
    pub(super) old_schema_id: i64,
    pub(in crate::sim::tidb) edits: Vec<Edit>,
    pub(super) db_info: Option<DBInfo>,
    pub(in crate::sim::tidb) table_info: Option<TableInfo>,
    /// The tables of a batch create.
    pub(super) multiple_table_infos: Vec<TableInfo>,
    pub(in crate::sim::tidb) raw_args: serde_json::Value,
    pub(super) reorg: bool,
    /// Index entries of existing rows for ADD INDEX.
    pub(super) backfill: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Plan {
    /// A plan of `action` in schema `schema_id`, with no table, edits or arguments yet.
    pub(in crate::sim::tidb) fn new(action: u8, schema_id: i64, schema_name: &str) -> Self {
        Plan {
            action,
            schema_id,
            schema_name: schema_name.to_owned(),
            table_id: 0,
            table_name: String::new(),
            old_schema_id: 0,
            edits: Vec::new(),
            db_info: None,
            table_info: None,
            multiple_table_infos: Vec::new(),
            raw_args: serde_json::Value::Null,
            reorg: false,
            backfill: Vec::new(),
        }
    }
    /// Names `t` as the job's table.
    pub(in crate::sim::tidb) fn table(mut self, t: &TableInfo) -> Self {
        self.table_id = t.id;
        self.table_name = t.name.o.clone();
        self
    }
}

/// The error about an object (`what` named `name`) of `table`.
pub(in crate::sim::tidb) fn obj_err(
    what: &'static str,
    name: &str,
    table: &str,
    problem: &'static str,
) -> TidbError {
    TidbError::Object {
        what,
        name: name.to_owned(),
        table: table.to_owned(),
        problem,
    }
}

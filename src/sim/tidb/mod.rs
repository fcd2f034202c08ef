//! A TiDB-like SQL layer over [`SimCore`]: it writes exactly the keys TiDB writes — meta keys,
//! DDL job rows, row and index keys — through real Percolator transactions on the core, so that
//! a client following the core as TiCDC does sees what it would see from a real cluster.
//!
//! # Simulated version: TiDB 8.5
//!
//! * **Bootstrap** (`InitDDLTables`): one transaction allocates the `mysql` database id from
//!   `NextGlobalID`, writes its DBInfo (`DBs` field `DB:{id}`), the TableInfo of
//!   `mysql.tidb_ddl_job` (id `MaxInt48 − 1`) and `mysql.tidb_ddl_history` (id `MaxInt48 − 3`)
//!   built from TiDB's CREATE TABLE text (`job_id bigint` clustered PK = int handle; `job_meta`
//!   is column id 5 of the job table, id 2 of the history table) and `DDLTableVersion`. Then
//!   `CREATE DATABASE test` runs as an ordinary DDL job.
//! * **DDL** ([`ddl`]): each statement is three transactions, as TiDB 8.5's job scheduler does:
//!   1. *submit*: allocate the job id and the new object ids from `NextGlobalID`, INSERT the job
//!      row (state queueing) into `mysql.tidb_ddl_job`;
//!   2. *run*: the meta changes (`DBs`, `DB:{id}` / `Table:{id}`), `SchemaVersionKey` + 1,
//!      `Diff:{version}`, and an UPDATE of the job row to state **done** with
//!      `binlog = {SchemaVersion, DBInfo/TableInfo, FinishedTS: 0}` — one transaction, whose
//!      commit ts is what TiCDC takes as the job's FinishedTS;
//!   3. *finish*: DELETE the job row and INSERT it (state **synced**, `FinishedTS` set) into
//!      `mysql.tidb_ddl_history`.
//! * **DML** ([`dml`]): optimistic transactions; rows in row format v2 under `t{id}_r{handle}`
//!   (int handle, clustered common handle, or `_tidb_rowid` allocated in batches through meta
//!   hash field `TID:{table}`), index keys for every index, commit by 2PC, async commit or 1PC
//!   ([`kv`]).
//!
//! # Known differences from TiDB 8.5
//!
//! * Multi-state DDLs (ADD/DROP COLUMN, ADD INDEX: none → delete-only → write-only →
//!   (reorg) → public) are collapsed into the final state: one schema version, one job-row
//!   update. A client sees the same done job; it never sees intermediate states.
//! * ADD INDEX backfills existing rows in one transaction tagged as a lossy DDL reorg
//!   (`txn_source` bit 8), so CDC drops it — TiDB's fast reorg ingests SSTs that CDC never
//!   sees either.
//! * MODIFY COLUMN supports only changes that need no reorg (same type family, not narrower);
//!   a dropped column must not be indexed. ADD COLUMN appends (no FIRST/AFTER).
//! * Transactions are optimistic (TiDB defaults to pessimistic: the extra pessimistic locks
//!   are invisible to CDC anyway). Duplicate keys fail at prewrite, not at the statement.
//! * Only the DDL job/history system tables exist (no `mysql.user` etc.); hash meta keys
//!   (field counts) are not maintained; TableInfo/Job JSON carry the members our schema structs
//!   know (a superset of what TiCDC reads). Unique-index values use TiDB's layouts for int and
//!   common handles but without restore data. Job `raw_args` are small version-2-style objects.
//!
//! # Layout
//!
//! * [`types`]: column types, table definitions, TableInfo building, SQL text.
//! * [`catalog`]: the in-memory schema, DML plans, meta-key writers.
//! * [`kv`]: the buffered transaction and the commit protocols.
//! * [`ddl`]: DDL statements and jobs.
//! * [`dml`]: INSERT, UPDATE and DELETE by primary key.
//! * [`truth`]: the truth log.

pub mod catalog;
pub mod ddl;
pub mod dml;
pub mod error;
pub mod kv;
pub mod partition;
pub mod truth;
pub mod types;
mod view;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::sim::core::{SimCore, StoreOutput};
use crate::tidb::key::{DDL_HISTORY_TABLE_ID, DDL_JOB_TABLE_ID};
use crate::tidb::schema::{mysql, schema_state, CIStr, DBInfo};

pub use catalog::{Catalog, TableMeta};
pub use ddl::{exchange_compatible, Ddl, DdlOutcome, TableRename};
pub use dml::Txn;
pub use error::{Result, TidbError};
pub use kv::{CommitMode, Committed};
pub use truth::{RowOp, TruthCollector, TruthLog, TruthRow, TruthSink, TruthTxn};
pub use types::{CheckDef, ColumnDef, ForeignKeyDef, IndexDef, PartitionDef, TableDef};

use catalog::DbEntry;
use kv::KvTxn;

/// Name of the system database.
pub const MYSQL_DB: &str = "mysql";
/// `DDLTableVersion` written at bootstrap (the job/history tables exist).
pub const DDL_TABLE_VERSION: &str = "1";

/// Knobs of the simulated TiDB.
#[derive(Debug, Clone)]
pub struct TidbConfig {
    /// Commit protocol of user transactions (falls back as client-go does).
    pub commit_mode: CommitMode,
    /// `_tidb_rowid` allocation batch (TiDB's autoid step).
    pub row_id_step: i64,
}

impl Default for TidbConfig {
    fn default() -> Self {
        TidbConfig {
            commit_mode: CommitMode::TwoPc,
            row_id_step: 30_000,
        }
    }
}

/// The simulated TiDB server: catalog, id allocators and the truth log.
pub struct Tidb {
    catalog: Catalog,
    cfg: TidbConfig,
    /// `_tidb_rowid` caches by logical table id: (next, last allocated).
    row_ids: BTreeMap<i64, (i64, i64)>,
    truth: Option<Box<dyn TruthSink>>,
    job_table: Arc<TableMeta>,
    history_table: Arc<TableMeta>,
    seq_num: u64,
}

impl std::fmt::Debug for Tidb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tidb")
            .field("schema_version", &self.catalog.schema_version)
            .field("next_global_id", &self.catalog.next_global_id)
            .field("dbs", &self.catalog.dbs.len())
            .finish()
    }
}

fn system_table(name: &str, cols: Vec<ColumnDef>) -> TableDef {
    TableDef {
        name: name.into(),
        columns: cols,
        primary_key: vec!["job_id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// `mysql.tidb_ddl_job` as TiDB's `JobTableSQL` declares it.
pub fn job_table_def() -> TableDef {
    let int = types::int(mysql::TYPE_LONG, false);
    system_table(
        "tidb_ddl_job",
        vec![
            ColumnDef::new("job_id", types::int(mysql::TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("reorg", int.clone()),
            ColumnDef::new("schema_ids", types::text()),
            ColumnDef::new("table_ids", types::text()),
            ColumnDef::new("job_meta", types::longblob()),
            ColumnDef::new("type", int.clone()),
            ColumnDef::new("processing", int),
        ],
    )
}

/// `mysql.tidb_ddl_history` as TiDB's `HistoryTableSQL` declares it.
pub fn history_table_def() -> TableDef {
    system_table(
        "tidb_ddl_history",
        vec![
            ColumnDef::new("job_id", types::int(mysql::TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("job_meta", types::longblob()),
            ColumnDef::new("db_name", types::char(64)),
            ColumnDef::new("table_name", types::char(64)),
            ColumnDef::new("schema_ids", types::text()),
            ColumnDef::new("table_ids", types::text()),
            ColumnDef::new("create_time", types::datetime(0)),
        ],
    )
}

fn db_info(id: i64, name: &str) -> DBInfo {
    DBInfo {
        id,
        db_name: CIStr::new(name),
        charset: types::CHARSET.into(),
        collate: types::COLLATE.into(),
        state: schema_state::PUBLIC,
    }
}

impl Tidb {
    /// Bootstraps a fresh cluster (see the module doc) and returns the server, with
    /// the outputs the core emitted.
    pub fn bootstrap(core: &mut SimCore, cfg: TidbConfig) -> Result<(Self, Vec<StoreOutput>)> {
        let mut txn = KvTxn::new(core.ts());
        let mysql_id = 1;
        let ts = txn.start_ts().0;
        let job = job_table_def().build(MYSQL_DB, DDL_JOB_TABLE_ID, &[], ts)?;
        let hist = history_table_def().build(MYSQL_DB, DDL_HISTORY_TABLE_ID, &[], ts)?;
        let db = db_info(mysql_id, MYSQL_DB);
        catalog::put_string(&mut txn, "NextGlobalID", mysql_id.to_string().into_bytes());
        catalog::put_db(&mut txn, &db);
        catalog::put_table(&mut txn, mysql_id, &job);
        catalog::put_table(&mut txn, mysql_id, &hist);
        catalog::put_string(&mut txn, "DDLTableVersion", DDL_TABLE_VERSION.into());
        let done = txn.commit(core, CommitMode::TwoPc)?;
        let job_table = Arc::new(TableMeta::new(mysql_id, MYSQL_DB, job));
        let history_table = Arc::new(TableMeta::new(mysql_id, MYSQL_DB, hist));
        let mut tables = BTreeMap::new();
        tables.insert(job_table.info.id, job_table.clone());
        tables.insert(history_table.info.id, history_table.clone());
        let mut dbs = BTreeMap::new();
        dbs.insert(mysql_id, DbEntry { info: db, tables });
        let mut tidb = Tidb {
            catalog: Catalog::new(dbs, mysql_id, 0),
            cfg,
            row_ids: BTreeMap::new(),
            truth: None,
            job_table,
            history_table,
            seq_num: 0,
        };
        let mut outputs = done.outputs;
        outputs.extend(
            tidb.execute_ddl(
                core,
                &Ddl::CreateDatabase {
                    name: "test".into(),
                },
            )?
            .outputs,
        );
        Ok((tidb, outputs))
    }

    /// The current schema.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// A table by names.
    pub fn table(&self, db: &str, table: &str) -> Option<&Arc<TableMeta>> {
        self.catalog.table(db, table)
    }

    /// The configuration.
    pub fn config(&self) -> &TidbConfig {
        &self.cfg
    }

    /// Changes the commit protocol of later transactions.
    pub fn set_commit_mode(&mut self, mode: CommitMode) {
        self.cfg.commit_mode = mode;
    }

    /// Sends every later committed user transaction and DDL to `sink`.
    pub fn set_truth_sink(&mut self, sink: Box<dyn TruthSink>) {
        self.truth = Some(sink);
    }

    /// Takes the truth sink back.
    pub fn take_truth_sink(&mut self) -> Option<Box<dyn TruthSink>> {
        self.truth.take()
    }

    pub(crate) fn emit_truth(&mut self, t: &TruthTxn) -> Result<()> {
        if let Some(s) = self.truth.as_mut() {
            s.record(t).map_err(|e| TidbError::TruthLog {
                detail: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Next `_tidb_rowid` of a logical table; refills the cache with an internal transaction
    /// on `TID:{table}` when it is used up (TiDB's autoid allocator).
    pub(crate) fn alloc_row_id(
        &mut self,
        core: &mut SimCore,
        db_id: i64,
        table_id: i64,
        outputs: &mut Vec<StoreOutput>,
    ) -> Result<i64> {
        if let Some((next, last)) = self.row_ids.get_mut(&table_id) {
            if *next <= *last {
                *next += 1;
                return Ok(*next - 1);
            }
        }
        let mut txn = KvTxn::new(core.ts());
        let key = catalog::row_id_key(db_id, table_id);
        let base = match txn.get(core, &key)? {
            None => 0,
            Some(v) => std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or(TidbError::CorruptedMeta { what: "TID" })?,
        };
        let last = base + self.cfg.row_id_step.max(1);
        txn.put(key, last.to_string().into_bytes());
        outputs.extend(txn.commit(core, CommitMode::TwoPc)?.outputs);
        self.row_ids.insert(table_id, (base + 2, last));
        Ok(base + 1)
    }
}

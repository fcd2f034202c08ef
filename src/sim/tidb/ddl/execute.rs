//! Running a planned DDL job: its transactions (submit, backfill, run to done, move to
//! history), the catalog update and region splits once it is done, and its truth-log lines.

use std::sync::Arc;

use serde_json::json;
use tibinlog_protocol::value::Value;

use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::tidb::catalog::{self, DbEntry, TableMeta};
use crate::sim::tidb::error::{Result, TidbError};
use crate::sim::tidb::kv::{CommitMode, KvTxn};
use crate::sim::tidb::truth::TruthTxn;
use crate::sim::tidb::Tidb;
use crate::sim::Ts;
use crate::tidb::key::{record_key, table_prefix, table_span, Handle};
use crate::tidb::schema::{action, job_state, schema_state, HistoryInfo, Job};
use crate::tidb::time;

use super::plan::{DdlOutcome, Edit, Plan, BACKFILL_TXN_SOURCE};
use super::statement::Ddl;

impl Tidb {
    /// Runs `ddl` as a job; returns once it is done and in the history table.
    pub fn execute_ddl(&mut self, core: &mut SimCore, ddl: &Ddl) -> Result<DdlOutcome> {
        let n = self.ids_needed(ddl)?;
        let first = self.catalog.next_global_id + 1;
        let job_id = first;
        let ids: Vec<i64> = (first + 1..first + 1 + n as i64).collect();
        let mut plan = self.plan(core, ddl, &ids)?;
        let query = ddl.sql();
        let mut outputs = Vec::new();

        // 1. submit
        let mut job = self.submit_job(
            core,
            &plan,
            job_id,
            first + n as i64,
            query.clone(),
            &mut outputs,
        )?;

        // 1b. backfill (ADD INDEX), invisible to CDC
        write_backfill(core, &mut plan, &mut outputs)?;

        // 2. run to done
        let (run_start, version, finished_ts) =
            self.run_job(core, &mut plan, &mut job, &mut outputs)?;
        outputs.extend(self.apply_done(core, &plan, version, finished_ts));
        self.emit_ddl_truth(ddl, query, run_start, finished_ts)?;

        // 3. move to history
        self.move_to_history(core, &plan, &mut job, &mut outputs)?;

        Ok(DdlOutcome {
            job_id,
            schema_version: version,
            start_ts: run_start,
            finished_ts,
            outputs,
        })
    }

    /// Step 1, submit: allocates the ids up to `next_global_id` and inserts the queueing job
    /// row, in one transaction; returns the job.
    fn submit_job(
        &mut self,
        core: &mut SimCore,
        plan: &Plan,
        job_id: i64,
        next_global_id: i64,
        query: String,
        outputs: &mut Vec<StoreOutput>,
    ) -> Result<Job> {
        let mut txn = KvTxn::new(core.ts());
        self.seq_num += 1;
        let job = queued_job(plan, job_id, txn.start_ts(), query, self.seq_num);
        self.catalog.next_global_id = next_global_id;
        catalog::put_string(
            &mut txn,
            "NextGlobalID",
            self.catalog.next_global_id.to_string().into_bytes(),
        );
        let (k, v) = self.job_row(&job, plan.reorg, false, plan)?;
        txn.insert(k, v);
        outputs.extend(txn.commit(core, CommitMode::TwoPc)?.outputs);
        Ok(job)
    }

    /// Step 2, run to done: the meta edits, `SchemaVersionKey` + 1, its diff and the job row
    /// marked done, in one transaction; returns its start ts, the new schema version and its
    /// commit ts (the job's FinishedTS).
    fn run_job(
        &self,
        core: &mut SimCore,
        plan: &mut Plan,
        job: &mut Job,
        outputs: &mut Vec<StoreOutput>,
    ) -> Result<(Ts, i64, Ts)> {
        let mut txn = KvTxn::new(core.ts());
        let run_start = txn.start_ts();
        let version = self.catalog.schema_version + 1;
        self.write_edits(core, &mut txn, &mut plan.edits, run_start)?;
        stamp_public_tables(plan, run_start);
        catalog::put_string(
            &mut txn,
            "SchemaVersionKey",
            version.to_string().into_bytes(),
        );
        let diff = schema_diff(plan, version);
        catalog::put_string(
            &mut txn,
            &format!("Diff:{version}"),
            diff.to_string().into_bytes(),
        );
        mark_done(job, plan, version, run_start);
        let (k, v) = self.job_row(job, plan.reorg, true, plan)?;
        txn.put(k, v);
        let done = txn.commit(core, CommitMode::TwoPc)?;
        outputs.extend(done.outputs);
        Ok((run_start, version, done.commit_ts))
    }

    /// Writes the meta keys of `edits` in `txn`; tables put get `run_start` as their update
    /// timestamp.
    fn write_edits(
        &self,
        core: &mut SimCore,
        txn: &mut KvTxn,
        edits: &mut [Edit],
        run_start: Ts,
    ) -> Result<()> {
        for e in edits {
            match e {
                Edit::PutDb(info) => catalog::put_db(txn, info),
                Edit::DropDb(id) => {
                    if let Some(db) = self.catalog.dbs.get(id) {
                        catalog::delete_db(txn, db);
                    }
                }
                Edit::PutTable(db, info) => {
                    info.update_timestamp = run_start.0;
                    catalog::put_table(txn, *db, info);
                }
                Edit::DropTable(db, id) => catalog::delete_table(txn, *db, *id),
                Edit::MoveRowId { table, from, to } => {
                    let old = catalog::row_id_key(*from, *table);
                    if let Some(v) = txn.get(core, &old)? {
                        txn.delete(old);
                        txn.put(catalog::row_id_key(*to, *table), v);
                    }
                }
                Edit::ExchangeRowIds { pt, nt_old, nt_new } => {
                    exchange_row_ids(core, txn, *pt, *nt_old, *nt_new)?;
                }
            }
        }
        Ok(())
    }

    /// Applies the done job to the catalog; the dropped tables' rows go to the delete ranges,
    /// and every new table starts a region. Returns what the splits emitted.
    fn apply_done(
        &mut self,
        core: &mut SimCore,
        plan: &Plan,
        version: i64,
        commit_ts: Ts,
    ) -> Vec<StoreOutput> {
        let mut outputs = Vec::new();
        let stored_before = self.catalog.physical_ids();
        self.apply(plan, version);
        // The rows of every table or partition the job dropped (DROP, TRUNCATE, DROP DATABASE,
        // TRUNCATE PARTITION) go to the delete ranges that GC destroys past the job's ts.
        let stored_after = self.catalog.physical_ids();
        for id in stored_before.difference(&stored_after) {
            let (start, end) = table_span(*id);
            core.add_delete_range(commit_ts, start, end);
        }
        // TiDB's `split-table` (on by default): a new table or partition starts a region.
        for id in stored_after.difference(&stored_before) {
            outputs.extend(split_at_table(core, *id));
        }
        outputs
    }

    /// Records the done job in the truth log.
    fn emit_ddl_truth(
        &mut self,
        ddl: &Ddl,
        query: String,
        start_ts: Ts,
        commit_ts: Ts,
    ) -> Result<()> {
        // A batch create is one binlog transaction per table, in statement order.
        let statements = match ddl {
            Ddl::CreateTables { db, tables } => tables.iter().map(|t| t.sql(db)).collect(),
            _ => vec![query],
        };
        for statement in statements {
            self.emit_truth(&TruthTxn {
                start_ts,
                commit_ts,
                rows: Vec::new(),
                ddl: Some(statement),
            })?;
        }
        Ok(())
    }

    /// Step 3, move to history: deletes the job row and inserts it, synced and with its
    /// FinishedTS, into the history table, in one transaction.
    fn move_to_history(
        &self,
        core: &mut SimCore,
        plan: &Plan,
        job: &mut Job,
        outputs: &mut Vec<StoreOutput>,
    ) -> Result<()> {
        let mut txn = KvTxn::new(core.ts());
        job.state = job_state::SYNCED;
        if let Some(b) = job.binlog.as_mut() {
            b.finished_ts = txn.start_ts().0;
        }
        let (k, _) = self.job_row(job, plan.reorg, true, plan)?;
        txn.delete(k);
        let now = core.now_ms();
        let created = time::timestamp_to_datetime((now / 1000) as u32, 0);
        let row = [
            Value::Int(job.id),
            Value::Bytes(serde_json::to_vec(&job).unwrap_or_default()),
            Value::Bytes(plan.schema_name.clone().into_bytes()),
            Value::Bytes(plan.table_name.clone().into_bytes()),
            Value::Bytes(plan.schema_id.to_string().into_bytes()),
            Value::Bytes(plan.table_id.to_string().into_bytes()),
            Value::DateTime(created),
        ];
        let mut v = Vec::new();
        self.history_table.codec.encode_v2(&row, &mut v)?;
        txn.insert(
            record_key(self.history_table.info.id, &Handle::Int(job.id)),
            v,
        );
        outputs.extend(txn.commit(core, CommitMode::TwoPc)?.outputs);
        Ok(())
    }

    /// The key and value of `job`'s row in `mysql.tidb_ddl_job`.
    fn job_row(
        &self,
        job: &Job,
        reorg: bool,
        processing: bool,
        p: &Plan,
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        let row = [
            Value::Int(job.id),
            Value::Int(i64::from(reorg)),
            Value::Bytes(p.schema_id.to_string().into_bytes()),
            Value::Bytes(p.table_id.to_string().into_bytes()),
            Value::Bytes(serde_json::to_vec(job).unwrap_or_default()),
            Value::Int(i64::from(job.action)),
            Value::Int(i64::from(processing)),
        ];
        let mut v = Vec::new();
        self.job_table.codec.encode_v2(&row, &mut v)?;
        Ok((record_key(self.job_table.info.id, &Handle::Int(job.id)), v))
    }

    /// Applies a committed plan to the in-memory catalog.
    fn apply(&mut self, plan: &Plan, version: i64) {
        self.catalog.schema_version = version;
        for e in &plan.edits {
            match e {
                Edit::PutDb(info) => {
                    self.catalog.dbs.insert(
                        info.id,
                        DbEntry {
                            info: info.clone(),
                            tables: Default::default(),
                        },
                    );
                }
                Edit::DropDb(id) => {
                    if let Some(db) = self.catalog.dbs.remove(id) {
                        for t in db.tables.keys() {
                            self.row_ids.remove(t);
                        }
                    }
                }
                Edit::PutTable(db, info) => {
                    if let Some(d) = self.catalog.dbs.get_mut(db) {
                        let name = d.info.db_name.o.clone();
                        d.tables.insert(
                            info.id,
                            Arc::new(TableMeta::new(*db, &name, (**info).clone())),
                        );
                    }
                }
                Edit::DropTable(db, id) => {
                    if let Some(d) = self.catalog.dbs.get_mut(db) {
                        d.tables.remove(id);
                    }
                    if !matches!(plan.action, action::RENAME_TABLE | action::RENAME_TABLES) {
                        self.row_ids.remove(id);
                    }
                }
                Edit::MoveRowId { .. } => {}
                Edit::ExchangeRowIds { pt, nt_new, .. } => {
                    // Both allocators moved to the larger end: refill from the meta key.
                    self.row_ids.remove(&pt.1);
                    self.row_ids.remove(&nt_new.1);
                }
            }
        }
        self.catalog.reindex();
    }
}

/// The job row of a newly submitted `plan` (state queueing), started at `start_ts`.
fn queued_job(plan: &Plan, id: i64, start_ts: Ts, query: String, seq_num: u64) -> Job {
    Job {
        id,
        action: plan.action,
        schema_id: plan.schema_id,
        table_id: plan.table_id,
        schema_name: plan.schema_name.clone(),
        table_name: plan.table_name.clone(),
        state: job_state::QUEUEING,
        raw_args: Some(plan.raw_args.clone()),
        schema_state: schema_state::NONE,
        start_ts: start_ts.0,
        query,
        binlog: Some(HistoryInfo::default()),
        version: 2,
        seq_num,
        ..Job::default()
    }
}

/// Step 1b: writes the index entries ADD INDEX backfills, in a transaction tagged as a lossy
/// DDL reorg (invisible to CDC); nothing when there are none.
fn write_backfill(
    core: &mut SimCore,
    plan: &mut Plan,
    outputs: &mut Vec<StoreOutput>,
) -> Result<()> {
    if !plan.backfill.is_empty() {
        let mut txn = KvTxn::new(core.ts());
        txn.set_txn_source(BACKFILL_TXN_SOURCE);
        for (k, v) in std::mem::take(&mut plan.backfill) {
            txn.put(k, v);
        }
        outputs.extend(txn.commit(core, CommitMode::TwoPc)?.outputs);
    }
    Ok(())
}

/// Exchange partition: both tables' row id allocators go to the larger end, the plain table's
/// under its new id.
fn exchange_row_ids(
    core: &mut SimCore,
    txn: &mut KvTxn,
    pt: (i64, i64),
    nt_old: (i64, i64),
    nt_new: (i64, i64),
) -> Result<()> {
    let mut end = 0i64;
    for (db, id) in [pt, nt_old] {
        if let Some(v) = txn.get(core, &catalog::row_id_key(db, id))? {
            let n = std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or(TidbError::CorruptedMeta { what: "TID" })?;
            end = end.max(n);
        }
    }
    txn.delete(catalog::row_id_key(nt_old.0, nt_old.1));
    if end > 0 {
        for (db, id) in [pt, nt_new] {
            txn.put(catalog::row_id_key(db, id), end.to_string().into_bytes());
        }
    }
    Ok(())
}

/// Gives the public tables of the job's binlog `run_start` as their update timestamp.
fn stamp_public_tables(plan: &mut Plan, run_start: Ts) {
    for t in plan
        .table_info
        .iter_mut()
        .chain(plan.multiple_table_infos.iter_mut())
    {
        if t.state == schema_state::PUBLIC {
            t.update_timestamp = run_start.0;
        }
    }
}

/// The `Diff:{version}` value of the job.
fn schema_diff(plan: &Plan, version: i64) -> serde_json::Value {
    let (diff_table, diff_old_table) = match &plan.edits[..] {
        [.., Edit::ExchangeRowIds { nt_old, nt_new, .. }] => (nt_new.1, nt_old.1),
        _ => (
            plan.table_info.as_ref().map_or(plan.table_id, |t| t.id),
            if plan.action == action::TRUNCATE_TABLE {
                plan.table_id
            } else {
                0
            },
        ),
    };
    json!({
        "version": version, "type": plan.action, "schema_id": plan.schema_id,
        "table_id": diff_table,
        "old_table_id": diff_old_table,
        "old_schema_id": plan.old_schema_id, "regenerate_schema_map": false,
        "affected_options": null,
    })
}

/// Marks `job` done at schema `version`, run from `run_start`, with its binlog info.
fn mark_done(job: &mut Job, plan: &Plan, version: i64, run_start: Ts) {
    job.state = job_state::DONE;
    job.schema_state = if matches!(
        plan.action,
        action::DROP_SCHEMA
            | action::DROP_TABLE
            | action::TRUNCATE_TABLE_PARTITION
            | action::EXCHANGE_TABLE_PARTITION
    ) {
        schema_state::NONE
    } else {
        schema_state::PUBLIC
    };
    job.snapshot_ver = run_start.0;
    job.real_start_ts = run_start.0;
    job.binlog = Some(HistoryInfo {
        schema_version: version,
        db_info: plan.db_info.clone(),
        table_info: plan.table_info.clone(),
        finished_ts: 0,
        multiple_table_infos: plan.multiple_table_infos.clone(),
    });
}

/// Splits the region holding `t{id}` there, unless a region starts there already; a refused
/// split (no leader) leaves the region whole, as TiDB only logs a failed pre-split.
fn split_at_table(core: &mut SimCore, id: i64) -> Vec<StoreOutput> {
    let prefix = table_prefix(id);
    let encoded = crate::sim::region::encode_key(&prefix);
    let region = match core.cluster.region_by_key(&encoded) {
        Some(r) if r.region.start_key != encoded => r.id(),
        _ => return Vec::new(),
    };
    core.split_region(region, &prefix).unwrap_or_default()
}

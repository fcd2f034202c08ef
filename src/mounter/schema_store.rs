//! The schema history: every database and table TiDB has, as of any ts after the store's
//! start, built from a meta-key snapshot and then advanced by finished DDL jobs.
//!
//! # Bootstrap
//!
//! [`SchemaStore::bootstrap`] reads, at the start ts S, the hash `DBs` (one DBInfo JSON per
//! field `DB:{id}`) and each database's hash `DB:{id}` (fields `Table:{id}` hold TableInfo JSON;
//! the `TID:`/`IID:`/… counters are skipped), as TiCDC does (docs/upstream-facts.md, "TiDB
//! keys"). Everything read is valid for rows with `commit_ts > S`.
//!
//! # DDL jobs
//!
//! [`SchemaStore::apply_ddl_job`] takes a job that reached state done, with the commit ts F of
//! the job row that says so (the job's FinishedTS; the done record leaves `binlog.FinishedTS`
//! at 0). Jobs arrive in commit order (an earlier F than the last applied job is an error); one
//! already applied (same job id, or F ≤ the snapshot/GC ts, or `binlog.SchemaVersion` ≤ the
//! snapshot's `SchemaVersionKey`, so the snapshot already has it) is skipped, as are jobs with
//! `SchemaVersion == 0`. How each action changes the schema follows
//! tiflow `cdc/entry/schema/snapshot.go`:
//!
//! | action | effect |
//! |---|---|
//! | create schema, modify schema charset, other jobs with `binlog.DBInfo` | put `binlog.DBInfo` |
//! | drop schema | drop the database and all its tables |
//! | recover schema | put `binlog.DBInfo`, then each of `binlog.MultipleTableInfos` |
//! | create table / view / sequence, recover table | put `binlog.TableInfo` in `schema_id` |
//! | drop table / view / sequence | drop `table_id` |
//! | truncate table | drop `table_id` (old id), put `binlog.TableInfo` (new id) |
//! | rename table | drop `table_id`, put `binlog.TableInfo` in `schema_id` (the new schema) |
//! | create tables | put each of `binlog.MultipleTableInfos` in `schema_id` |
//! | rename tables | put each of `binlog.MultipleTableInfos` in its new schema (from `raw_args`) |
//! | exchange partition | swap the partition's id with the plain table's id (below) |
//! | everything else with `binlog.TableInfo` (columns, indexes, partitions, options, multi-schema change) | replace `table_id` by `binlog.TableInfo` |
//!
//! A version becomes valid for rows with `commit_ts > F`, as in TiCDC. Partition changes are
//! "replace": physical ids no longer in the table map to nothing from F on, new ones to the
//! table. Exchange partition: `binlog.TableInfo` is the partitioned table after the swap; the
//! partition id it lost becomes the plain table's new id, and the plain table's old id (now a
//! partition) maps to the partitioned table.
//!
//! # Versions and GC
//!
//! Physical ids (partition ids, or the table id) and logical table ids each keep a list of
//! `(ts, Option<table>)` in ascending ts; [`SchemaStore::table_at`] picks the newest entry with
//! `ts < commit_ts`. [`SchemaStore::gc`] forgets entries no row after a given ts can need.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tibinlog_protocol::binlog::TableDef;
use tibinlog_protocol::value::Value;

use super::coltype::{table_def, visible_columns};
use super::error::{MounterError, Result};
use super::filter::{is_system_schema, TableFilter};
use crate::model::Ts;
use crate::sql::generated::{Uncomputable, VirtualColumns};
use crate::sql::types::SqlType;
use crate::tidb::key::{self, Handle, MetaField};
use crate::tidb::rowcodec::RowCodec;
use crate::tidb::schema::{action, DBInfo, Job, TableInfo};

/// Snapshot reads of raw TiKV keys (KvScan / KvGet at a ts). Capture implements it over gRPC;
/// tests over the simulator. Errors are [`MounterError::Snapshot`].
pub trait MetaReader {
    /// Every `(raw key, value)` with `start <= key < end` visible at `ts`, in key order.
    fn scan(&self, start: &[u8], end: &[u8], ts: Ts) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// The value of `key` visible at `ts`.
    fn get(&self, key: &[u8], ts: Ts) -> Result<Option<Vec<u8>>>;
}

/// One version of a table: TiDB's schema, its binlog description and its row decoder.
#[derive(Debug)]
pub struct MountedTable {
    /// Database id.
    pub schema_id: i64,
    /// The logical TableInfo (for partitioned tables, the parent's with all partitions).
    pub info: TableInfo,
    /// TABLE_MAP description: `table_id` = logical id, columns = [`RowCodec::columns`] order.
    pub def: TableDef,
    /// Row decoder for this version.
    pub codec: RowCodec,
    /// Its virtual generated columns, computed after decoding (empty for most tables).
    pub virtual_columns: VirtualColumns,
    /// The first virtual column that cannot be computed: rows of this version are refused.
    pub uncomputable: Option<Uncomputable>,
    /// Whether its rows and DDL pass the table filter (never for system schemas).
    pub included: bool,
}

impl MountedTable {
    /// Builds the binlog view of `info` in database `schema` (id `schema_id`).
    pub fn new(
        schema_id: i64,
        schema: &str,
        info: TableInfo,
        filter: &TableFilter,
    ) -> Result<Self> {
        let def = match table_def(schema, &info) {
            Ok(def) => def,
            // Views and sequences have no rows: a column type without a binlog form does
            // not matter there.
            Err(_) if info.is_view_or_sequence() => TableDef {
                table_id: info.id.max(0) as u64,
                schema: schema.to_owned(),
                table: info.name.o.clone(),
                columns: Vec::new(),
                primary_key: Vec::new(),
            },
            Err(e) => return Err(e),
        };
        let codec = RowCodec::new(&info);
        debug_assert!(info.is_view_or_sequence() || def.columns.len() == codec.columns().len());
        let included = filter.matches(schema, &info.name.o);
        let (virtual_columns, uncomputable) = virtual_columns(schema, &info, &def, included);
        Ok(MountedTable {
            schema_id,
            info,
            def,
            codec,
            virtual_columns,
            uncomputable,
            included,
        })
    }

    /// Decodes a stored row value into `out` (cells in `def.columns` order, every one
    /// overwritten: a row passed back in has its buffers reused), virtual generated columns
    /// computed. `handle` is the row key's handle.
    pub fn decode_row(
        &self,
        value: &[u8],
        handle: Option<&Handle>,
        out: &mut Vec<Value>,
    ) -> std::result::Result<(), crate::tidb::Error> {
        self.decode_row_columns(value, handle, None, out)
    }

    /// [`decode_row`](Self::decode_row) of the columns `wanted` marks (`None`: all), the
    /// others left NULL. A table with virtual generated columns decodes every column (their
    /// expressions read the others).
    pub fn decode_row_columns(
        &self,
        value: &[u8],
        handle: Option<&Handle>,
        wanted: Option<&[bool]>,
        out: &mut Vec<Value>,
    ) -> std::result::Result<(), crate::tidb::Error> {
        let column = |name: &str| format!("{}.{}.{name}", self.def.schema, self.def.table);
        if let Some(u) = &self.uncomputable {
            return Err(crate::tidb::Error::GeneratedColumn {
                column: column(&u.column),
                reason: format!("{} in `{}`", u.reason, u.expression),
            });
        }
        let wanted = wanted.filter(|_| self.virtual_columns.is_empty());
        self.codec.decode_columns(value, handle, wanted, out)?;
        if !self.virtual_columns.is_empty() {
            self.virtual_columns
                .fill(out)
                .map_err(|f| crate::tidb::Error::GeneratedColumn {
                    column: column(&f.column),
                    reason: f.reason,
                })?;
        }
        Ok(())
    }
    /// Database name.
    pub fn schema(&self) -> &str {
        &self.def.schema
    }
    /// Table name.
    pub fn name(&self) -> &str {
        &self.def.table
    }
    /// In a system schema (`mysql`, …).
    pub fn is_system(&self) -> bool {
        is_system_schema(&self.def.schema)
    }
}

/// The compiled virtual generated columns of `info`, and the first that cannot be computed
/// (named in a warning once per table version, for the included tables: its rows will be
/// refused).
fn virtual_columns(
    schema: &str,
    info: &TableInfo,
    def: &TableDef,
    included: bool,
) -> (VirtualColumns, Option<Uncomputable>) {
    let visible = visible_columns(info);
    let generated: Vec<(usize, &str)> = visible
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_virtual_generated())
        .map(|(i, c)| (i, c.generated_expr_string.as_str()))
        .collect();
    if generated.is_empty() || def.columns.len() != visible.len() {
        return (VirtualColumns::default(), None);
    }
    let names: Vec<String> = visible.iter().map(|c| c.name.o.clone()).collect();
    let types: Vec<SqlType> = def.columns.iter().map(SqlType::from_column).collect();
    let (compiled, failed) = VirtualColumns::compile(&info.name.o, &names, &types, &generated);
    if included {
        for f in &failed {
            tracing::warn!(
                table = %format!("{schema}.{}", info.name.o),
                column = %f.column,
                expression = %f.expression,
                reason = %f.reason,
                "a virtual generated column cannot be computed; rows of this table will stop capture (exclude the table to go on without it)"
            );
        }
    }
    (compiled, failed.into_iter().next())
}

type Versions = Vec<(Ts, Option<Arc<MountedTable>>)>;

#[derive(Debug, Clone)]
struct DbState {
    info: DBInfo,
    tables: BTreeSet<i64>,
}

/// What one applied job changed, for the DDL output.
#[derive(Debug, Clone)]
pub struct AppliedDdl {
    pub job: Arc<Job>,
    /// The job's FinishedTS (commit ts of its done record).
    pub commit_ts: Ts,
    /// Database name the statement runs in (the job's `schema_id` after the job, else before).
    pub schema: String,
    /// Tables as they were before the job (dropped, renamed, altered ones).
    pub before: Vec<Arc<MountedTable>>,
    /// Tables as they are after the job (created or changed ones), in job order.
    pub after: Vec<Arc<MountedTable>>,
}

/// Versioned schema of the whole cluster.
#[derive(Debug)]
pub struct SchemaStore {
    filter: TableFilter,
    dbs: BTreeMap<i64, DbState>,
    /// Current version of every logical table (views and sequences included).
    tables: BTreeMap<i64, Arc<MountedTable>>,
    physical: BTreeMap<i64, Versions>,
    logical: BTreeMap<i64, Versions>,
    applied_jobs: BTreeMap<i64, Ts>,
    /// `SchemaVersionKey` of the bootstrap snapshot (0 if none was read): a job whose
    /// `binlog.SchemaVersion` is at or below it is in the snapshot already.
    snapshot_version: i64,
    /// Ts of the snapshot or of the last applied job.
    resolved: Ts,
    /// Rows with `commit_ts <= valid_after` cannot be served.
    valid_after: Ts,
}

fn scan_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            break;
        }
    }
    end
}

fn push_version(map: &mut BTreeMap<i64, Versions>, id: i64, ts: Ts, v: Option<Arc<MountedTable>>) {
    let list = map.entry(id).or_default();
    match list.last_mut() {
        Some(last) if last.0 == ts => last.1 = v,
        _ => list.push((ts, v)),
    }
}

fn lookup(map: &BTreeMap<i64, Versions>, id: i64, ts: Ts) -> Option<Arc<MountedTable>> {
    let list = map.get(&id)?;
    let n = list.partition_point(|(t, _)| *t < ts);
    n.checked_sub(1).and_then(|i| list[i].1.clone())
}

impl SchemaStore {
    /// An empty store valid after `start_ts` (tests, or a cluster without user objects).
    pub fn new(filter: TableFilter, start_ts: Ts) -> Self {
        SchemaStore {
            filter,
            dbs: BTreeMap::new(),
            tables: BTreeMap::new(),
            physical: BTreeMap::new(),
            logical: BTreeMap::new(),
            applied_jobs: BTreeMap::new(),
            snapshot_version: 0,
            resolved: start_ts,
            valid_after: start_ts,
        }
    }

    /// Reads the schema at `start_ts` from the meta keys (see the module doc).
    pub fn bootstrap(reader: &dyn MetaReader, start_ts: Ts, filter: TableFilter) -> Result<Self> {
        let mut store = SchemaStore::new(filter, start_ts);
        // The version of the snapshot: the history copy of a job that finished before it
        // (committed after it) must not be applied again.
        store.snapshot_version = reader
            .get(&key::meta_string_key(b"SchemaVersionKey"), start_ts)?
            .and_then(|v| std::str::from_utf8(&v).ok()?.trim().parse().ok())
            .unwrap_or(0);
        let dbs_prefix = key::meta_hash_prefix(b"DBs");
        let mut dbs = Vec::new();
        for (k, v) in reader.scan(&dbs_prefix, &scan_end(&dbs_prefix), start_ts)? {
            let Ok(mk) = key::parse_meta_key(&k) else {
                continue;
            };
            if let Some(MetaField::Db(id)) = mk.field() {
                let info = DBInfo::from_json(&v).map_err(|source| MounterError::Schema {
                    what: "DBInfo",
                    id,
                    source,
                })?;
                dbs.push(info);
            }
        }
        for db in dbs {
            let db_id = db.id;
            store.put_db(db);
            let prefix = key::meta_hash_prefix(format!("DB:{db_id}").as_bytes());
            for (k, v) in reader.scan(&prefix, &scan_end(&prefix), start_ts)? {
                let Ok(mk) = key::parse_meta_key(&k) else {
                    continue;
                };
                if let Some(MetaField::Table(id)) = mk.field() {
                    let info = TableInfo::from_json(&v).map_err(|source| MounterError::Schema {
                        what: "TableInfo",
                        id,
                        source,
                    })?;
                    store.put_table(db_id, info, start_ts)?;
                }
            }
        }
        Ok(store)
    }

    /// The table filter.
    pub fn filter(&self) -> &TableFilter {
        &self.filter
    }

    /// Rows with `commit_ts` at or below this cannot be mounted (bootstrap ts or GC point).
    pub fn valid_after(&self) -> Ts {
        self.valid_after
    }

    /// Ts of the snapshot or of the last applied DDL job.
    pub fn resolved_ts(&self) -> Ts {
        self.resolved
    }

    /// The table version valid for a row of physical table `physical_id` with `commit_ts`.
    pub fn table_at(&self, physical_id: i64, commit_ts: Ts) -> Option<Arc<MountedTable>> {
        lookup(&self.physical, physical_id, commit_ts)
    }

    /// The version of logical table `table_id` valid at `ts` (for schema answers at a position).
    pub fn logical_table_at(&self, table_id: i64, ts: Ts) -> Option<Arc<MountedTable>> {
        lookup(&self.logical, table_id, ts)
    }

    /// The included base tables and views at `ts`: what the binlog shows of the schema then.
    pub fn included_at(&self, ts: Ts) -> super::Catalog {
        Arc::new(
            self.tables_at(ts)
                .into_iter()
                .filter(|t| t.included)
                .collect(),
        )
    }

    /// Every base table and view valid at `ts` (sequences have no versions).
    pub fn tables_at(&self, ts: Ts) -> Vec<Arc<MountedTable>> {
        self.logical
            .keys()
            .filter_map(|&id| lookup(&self.logical, id, ts))
            .collect()
    }

    /// The current version of a table by names (case-insensitive).
    pub fn table_by_name(&self, schema: &str, table: &str) -> Option<Arc<MountedTable>> {
        self.tables
            .values()
            .find(|t| {
                t.schema().eq_ignore_ascii_case(schema) && t.name().eq_ignore_ascii_case(table)
            })
            .cloned()
    }

    /// The current version of a logical table by id.
    pub fn table(&self, table_id: i64) -> Option<Arc<MountedTable>> {
        self.tables.get(&table_id).cloned()
    }

    /// Current database by id.
    pub fn database(&self, schema_id: i64) -> Option<&DBInfo> {
        self.dbs.get(&schema_id).map(|d| &d.info)
    }

    /// Physical ids of every current included base table: the record spans capture watches.
    pub fn included_physical_ids(&self) -> Vec<i64> {
        self.tables
            .values()
            .filter(|t| t.included && !t.info.is_view_or_sequence())
            .flat_map(|t| t.info.physical_ids())
            .collect()
    }

    fn put_db(&mut self, info: DBInfo) {
        let tables = self
            .dbs
            .get(&info.id)
            .map(|d| d.tables.clone())
            .unwrap_or_default();
        self.dbs.insert(info.id, DbState { info, tables });
    }

    fn drop_db(&mut self, schema_id: i64, ts: Ts) {
        if let Some(db) = self.dbs.remove(&schema_id) {
            for id in db.tables {
                self.drop_table(id, ts);
            }
        }
    }

    /// Puts (creates or replaces) logical table `info.id` into `schema_id` from `ts` on.
    fn put_table(&mut self, schema_id: i64, info: TableInfo, ts: Ts) -> Result<Arc<MountedTable>> {
        let schema = match self.dbs.get(&schema_id) {
            Some(db) => db.info.db_name.o.clone(),
            None => {
                return Err(MounterError::UnknownDatabase {
                    schema_id,
                    table_id: info.id,
                })
            }
        };
        let old_physical: Vec<i64> = self
            .tables
            .get(&info.id)
            .filter(|t| !t.info.is_view_or_sequence())
            .map(|t| t.info.physical_ids())
            .unwrap_or_default();
        if let Some(old) = self.tables.get(&info.id) {
            let old_schema = old.schema_id;
            if let Some(db) = self.dbs.get_mut(&old_schema) {
                db.tables.remove(&info.id);
            }
        }
        let table = Arc::new(MountedTable::new(schema_id, &schema, info, &self.filter)?);
        let id = table.info.id;
        if let Some(db) = self.dbs.get_mut(&schema_id) {
            db.tables.insert(id);
        }
        let base = !table.info.is_view_or_sequence();
        let new_physical = if base {
            table.info.physical_ids()
        } else {
            Vec::new()
        };
        for pid in old_physical {
            if !new_physical.contains(&pid) {
                push_version(&mut self.physical, pid, ts, None);
            }
        }
        for &pid in &new_physical {
            push_version(&mut self.physical, pid, ts, Some(table.clone()));
        }
        // Views have a version too (catalog answers list them); sequences are not shown.
        if base || table.info.view.is_some() {
            push_version(&mut self.logical, id, ts, Some(table.clone()));
        }
        self.tables.insert(id, table.clone());
        Ok(table)
    }

    fn drop_table(&mut self, table_id: i64, ts: Ts) -> Option<Arc<MountedTable>> {
        let old = self.tables.remove(&table_id)?;
        if let Some(db) = self.dbs.get_mut(&old.schema_id) {
            db.tables.remove(&table_id);
        }
        if !old.info.is_view_or_sequence() {
            for pid in old.info.physical_ids() {
                push_version(&mut self.physical, pid, ts, None);
            }
        }
        if !old.info.is_view_or_sequence() || old.info.view.is_some() {
            push_version(&mut self.logical, table_id, ts, None);
        }
        Some(old)
    }

    /// Applies a finished DDL job whose done record committed at `commit_ts` (see the module
    /// doc). `Ok(None)`: already applied, or nothing to apply.
    pub fn apply_ddl_job(&mut self, job: Job, commit_ts: Ts) -> Result<Option<AppliedDdl>> {
        if self.applied_jobs.contains_key(&job.id) || commit_ts <= self.valid_after {
            return Ok(None);
        }
        if commit_ts < self.resolved {
            return Err(MounterError::DdlOutOfOrder {
                job_id: job.id,
                commit_ts,
                applied: self.resolved,
            });
        }
        // SchemaVersion 0: ignored upstream. At or below the snapshot's version: the snapshot
        // has it (a restart at a checkpoint between a job's done record and its history copy,
        // which commits later, sees only the copy).
        if job.schema_version() == 0 || job.schema_version() <= self.snapshot_version {
            return Ok(None);
        }
        let bad = |reason| MounterError::BadJob {
            job_id: job.id,
            action: job.action,
            reason,
        };
        let binlog = job.binlog.clone().unwrap_or_default();
        let ts = commit_ts;
        let mut before = Vec::new();
        let mut after = Vec::new();
        let mut schema_before = self
            .dbs
            .get(&job.schema_id)
            .map(|d| d.info.db_name.o.clone());
        match job.action {
            action::DROP_SCHEMA => {
                let ids: Vec<i64> = self
                    .dbs
                    .get(&job.schema_id)
                    .map(|d| d.tables.iter().copied().collect())
                    .unwrap_or_default();
                before.extend(ids.iter().filter_map(|id| self.tables.get(id).cloned()));
                self.drop_db(job.schema_id, ts);
            }
            action::RECOVER_SCHEMA => {
                let db = binlog.db_info.ok_or_else(|| bad("no binlog.DBInfo"))?;
                let sid = db.id;
                schema_before = Some(db.db_name.o.clone());
                self.put_db(db);
                for t in binlog.multiple_table_infos {
                    after.push(self.put_table(sid, t, ts)?);
                }
            }
            action::DROP_TABLE | action::DROP_VIEW | action::DROP_SEQUENCE => {
                before.extend(self.drop_table(job.table_id, ts));
            }
            action::TRUNCATE_TABLE | action::RENAME_TABLE => {
                let info = binlog
                    .table_info
                    .ok_or_else(|| bad("no binlog.TableInfo"))?;
                before.extend(self.drop_table(job.table_id, ts));
                after.push(self.put_table(job.schema_id, info, ts)?);
            }
            action::CREATE_TABLES => {
                for t in binlog.multiple_table_infos {
                    after.push(self.put_table(job.schema_id, t, ts)?);
                }
            }
            action::RENAME_TABLES => {
                let targets = rename_targets(&job);
                // The i-th table info is the i-th rename's result (a table renamed twice in one
                // statement has two); by table id only if the lists disagree.
                let paired = targets.len() == binlog.multiple_table_infos.len();
                for (i, t) in binlog.multiple_table_infos.into_iter().enumerate() {
                    let sid = paired
                        .then(|| targets[i])
                        .filter(|(tid, _)| *tid == t.id)
                        .or_else(|| targets.iter().find(|(tid, _)| *tid == t.id).copied())
                        .map(|(_, s)| s)
                        .or_else(|| self.tables.get(&t.id).map(|o| o.schema_id))
                        .ok_or_else(|| bad("renamed table has no target schema"))?;
                    before.extend(self.drop_table(t.id, ts));
                    after.push(self.put_table(sid, t, ts)?);
                }
            }
            action::EXCHANGE_TABLE_PARTITION => {
                let pt = binlog
                    .table_info
                    .ok_or_else(|| bad("no binlog.TableInfo"))?;
                let old_pt = self
                    .tables
                    .get(&pt.id)
                    .cloned()
                    .ok_or_else(|| bad("unknown partitioned table"))?;
                let nt = self
                    .tables
                    .get(&job.table_id)
                    .cloned()
                    .ok_or_else(|| bad("unknown table"))?;
                let new_ids = pt.physical_ids();
                let lost = old_pt
                    .info
                    .physical_ids()
                    .into_iter()
                    .find(|id| !new_ids.contains(id))
                    .ok_or_else(|| bad("no partition was exchanged"))?;
                before.push(old_pt.clone());
                before.push(nt.clone());
                self.drop_table(nt.info.id, ts);
                after.push(self.put_table(old_pt.schema_id, pt, ts)?);
                let mut nt_info = nt.info.clone();
                nt_info.id = lost;
                after.push(self.put_table(nt.schema_id, nt_info, ts)?);
            }
            _ => {
                if let Some(db) = binlog.db_info {
                    schema_before = Some(db.db_name.o.clone());
                    self.put_db(db);
                }
                if let Some(info) = binlog.table_info {
                    if let Some(old) = self.tables.get(&job.table_id).cloned() {
                        before.push(old);
                        if job.table_id != info.id {
                            self.drop_table(job.table_id, ts);
                        }
                    }
                    let sid = if self.dbs.contains_key(&job.schema_id) {
                        job.schema_id
                    } else {
                        before.first().map_or(job.schema_id, |t| t.schema_id)
                    };
                    after.push(self.put_table(sid, info, ts)?);
                }
            }
        }
        let schema = self
            .dbs
            .get(&job.schema_id)
            .map(|d| d.info.db_name.o.clone())
            .or(schema_before)
            .unwrap_or_else(|| job.schema_name.clone());
        self.applied_jobs.insert(job.id, ts);
        self.resolved = ts;
        Ok(Some(AppliedDdl {
            job: Arc::new(job),
            commit_ts: ts,
            schema,
            before,
            after,
        }))
    }

    /// Forgets versions no row with `commit_ts > ts` can need; rows at or below `ts` can no
    /// longer be mounted afterwards.
    pub fn gc(&mut self, ts: Ts) {
        if ts <= self.valid_after {
            return;
        }
        self.valid_after = ts;
        for map in [&mut self.physical, &mut self.logical] {
            map.retain(|_, list| {
                // Keep the newest entry with entry_ts <= ts (it serves commit_ts = ts + 1) and later ones.
                let keep_from = list.partition_point(|(t, _)| *t <= ts).saturating_sub(1);
                list.drain(..keep_from);
                !(list.len() == 1 && list[0].1.is_none() && list[0].0 <= ts)
            });
        }
        // Applied job ids are kept: the history copy of a job (TiDB 8.0–8.2 fast create
        // table) may arrive after its done record was garbage-collected; a few bytes per DDL.
    }

    /// Number of stored versions (physical + logical), for tests and metrics.
    pub fn version_count(&self) -> usize {
        self.physical
            .values()
            .chain(self.logical.values())
            .map(Vec::len)
            .sum()
    }
}

/// `(table id, new schema id)` pairs of a RENAME TABLES job: v2 args
/// `{"rename_table_infos":[{"table_id","new_schema_id"}…]}`, or v1 positional args
/// `[old_schema_ids, new_schema_ids, new_table_names, table_ids, …]`.
fn rename_targets(job: &Job) -> Vec<(i64, i64)> {
    let Some(args) = &job.raw_args else {
        return Vec::new();
    };
    let int = |v: &serde_json::Value| v.as_i64();
    if let Some(infos) = args.get("rename_table_infos").and_then(|v| v.as_array()) {
        return infos
            .iter()
            .filter_map(|i| Some((int(i.get("table_id")?)?, int(i.get("new_schema_id")?)?)))
            .collect();
    }
    let arr = |i: usize| {
        args.get(i)
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default()
    };
    let (schemas, tables) = (arr(1), arr(3));
    tables
        .iter()
        .zip(&schemas)
        .filter_map(|(t, s)| Some((int(t)?, int(s)?)))
        .collect()
}

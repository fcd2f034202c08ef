//! The DDL path: job rows from the DDL spans → [`Job`]s for the schema store → [`DdlEvent`]s
//! (one QUERY event each) for the binlog.
//!
//! # Which rows carry jobs
//!
//! | source | accepted rows |
//! |---|---|
//! | `mysql.tidb_ddl_job` (id MaxInt48 − 1) | PUTs whose `job_meta` has state **done** (TiDB 8.5: the run step) |
//! | `mysql.tidb_ddl_history` (id MaxInt48 − 3) | PUTs of CREATE TABLE(S) jobs in state **synced** (TiDB 8.0–8.2 fast create table; duplicates of jobs already applied are skipped by job id, and after a restart by schema version) |
//! | legacy meta lists `DDLJobList` / `DDLJobAddIdxList` | PUTs of Job JSON in state done |
//!
//! `job_meta` is found by column **name** in the system table's own TableInfo from the schema
//! store, as TiCDC does (docs/upstream-facts.md, "DDL jobs"). Deletes are ignored. The job's
//! FinishedTS is the row's commit ts: the done record leaves `binlog.FinishedTS` at 0.
//!
//! # Which jobs become binlog events
//!
//! Only the action types TiCDC replicates (`pkg/filter` `ddlWhiteListMap` of ticdc; see
//! [`is_replicated_action`]); every job still updates the schema. The query is rewritten to
//! MySQL dialect ([`normalize_ddl`]); a statement with nothing left is not written. Table DDL is
//! written when a table it touches, before or after, passes the filter (a RENAME TABLE from
//! or into the filtered set is written so the replica's catalog follows); schema DDL when the
//! schema passes [`TableFilter::matches_schema`]. A CREATE TABLES batch is split into one event
//! per table.

use std::sync::Arc;

use super::ddl_sql::{normalize_ddl, split_statements};
use super::error::{MounterError, Result};
use super::filter::TableFilter;
use super::schema_store::{AppliedDdl, MountedTable, SchemaStore};
use crate::model::{Op, RawRow, Ts};
use crate::tidb::key::{self, MetaKind, MetaName, DDL_HISTORY_TABLE_ID, DDL_JOB_TABLE_ID};
use crate::tidb::schema::{action, job_state, Job};
use tibinlog_protocol::value::Value;

/// One DDL statement for the binlog (a QUERY event with its own GTID, no BEGIN/XID).
#[derive(Debug, Clone)]
pub struct DdlEvent {
    /// FinishedTS: commit ts of the job's done record.
    pub commit_ts: Ts,
    /// start_ts of that transaction.
    pub start_ts: Ts,
    /// The statement's place among the events of one job (a batch `CREATE TABLE` job gives
    /// one per table, all with the job's commit and start ts); 0 for a job of one statement.
    pub part: u32,
    pub job_id: i64,
    /// TiDB ActionType.
    pub action: u8,
    /// The QUERY event's default database.
    pub schema: String,
    /// The statement in MySQL dialect.
    pub query: String,
    /// The table as it is after the statement (created or changed base table), if any.
    pub table: Option<Arc<MountedTable>>,
    /// Every included base table and view after the statement: what catalog answers show once
    /// the event is in the binlog. Filled by the changefeed, which holds the versioned store.
    pub catalog: Option<Catalog>,
}

/// A set of table versions: the included base tables and views valid at one ts.
pub type Catalog = Arc<Vec<Arc<MountedTable>>>;

/// Whether jobs of this action produce a binlog event (TiCDC's replicated DDL types).
pub fn is_replicated_action(a: u8) -> bool {
    matches!(
        a,
        action::CREATE_SCHEMA
            | action::DROP_SCHEMA
            | action::MODIFY_SCHEMA_CHARSET_AND_COLLATE
            | action::RECOVER_SCHEMA
            | action::CREATE_TABLE
            | action::CREATE_TABLES
            | action::DROP_TABLE
            | action::TRUNCATE_TABLE
            | action::RENAME_TABLE
            | action::RENAME_TABLES
            | action::RECOVER_TABLE
            | action::MODIFY_TABLE_COMMENT
            | action::MODIFY_TABLE_CHARSET_AND_COLLATE
            | action::CREATE_VIEW
            | action::DROP_VIEW
            | action::ADD_TABLE_PARTITION
            | action::DROP_TABLE_PARTITION
            | action::TRUNCATE_TABLE_PARTITION
            | action::EXCHANGE_TABLE_PARTITION
            | action::REORGANIZE_PARTITION
            | action::ALTER_TABLE_PARTITIONING
            | action::REMOVE_PARTITIONING
            | action::ADD_COLUMN
            | action::DROP_COLUMN
            | action::MODIFY_COLUMN
            | action::SET_DEFAULT_VALUE
            | action::REBASE_AUTO_ID
            | action::ADD_PRIMARY_KEY
            | action::DROP_PRIMARY_KEY
            | action::ADD_INDEX
            | action::DROP_INDEX
            | action::RENAME_INDEX
            | action::ALTER_INDEX_VISIBILITY
            | ALTER_TTL_INFO
            | ALTER_TTL_REMOVE
            | action::MULTI_SCHEMA_CHANGE
            | action::ADD_FOREIGN_KEY
            | action::DROP_FOREIGN_KEY
            | action::ADD_COLUMNS
            | action::DROP_COLUMNS
    )
}

/// `ActionAlterTTLInfo`.
pub const ALTER_TTL_INFO: u8 = 65;
/// `ActionAlterTTLRemove`.
pub const ALTER_TTL_REMOVE: u8 = 67;

fn is_schema_action(a: u8) -> bool {
    matches!(
        a,
        action::CREATE_SCHEMA
            | action::DROP_SCHEMA
            | action::MODIFY_SCHEMA_CHARSET_AND_COLLATE
            | action::RECOVER_SCHEMA
    )
}

/// Whether a raw key belongs to a DDL span (job table, history table, legacy job lists).
pub fn is_ddl_key(raw: &[u8]) -> bool {
    match key::table_id_of(raw) {
        Some(id) => id == DDL_JOB_TABLE_ID || id == DDL_HISTORY_TABLE_ID,
        None => legacy_list(raw),
    }
}

fn legacy_list(raw: &[u8]) -> bool {
    raw.first() == Some(&key::META_PREFIX)
        && key::parse_meta_key(raw).is_ok_and(|mk| {
            matches!(mk.kind, MetaKind::ListData { .. })
                && matches!(mk.name(), MetaName::DdlJobList | MetaName::DdlJobAddIdxList)
        })
}

/// The finished job a DDL-span row announces, if any (see the module doc).
pub fn decode_job_row(store: &SchemaStore, row: &RawRow) -> Result<Option<Job>> {
    JobDecoder::new(store).decode(row)
}

/// Decodes job rows with the job tables' definitions taken once (they never change), so that
/// it can run apart from the schema store (capture reads new tables' ids from it).
#[derive(Clone)]
pub struct JobDecoder {
    job: Option<Arc<MountedTable>>,
    history: Option<Arc<MountedTable>>,
}

impl JobDecoder {
    pub fn new(store: &SchemaStore) -> JobDecoder {
        JobDecoder {
            job: store.table(DDL_JOB_TABLE_ID),
            history: store.table(DDL_HISTORY_TABLE_ID),
        }
    }

    /// See [`decode_job_row`].
    pub fn decode(&self, row: &RawRow) -> Result<Option<Job>> {
        if row.op != Op::Put {
            return Ok(None);
        }
        let bad = |reason: String| MounterError::JobRow {
            commit_ts: row.commit_ts,
            reason,
        };
        let (job_json, from_history) = match key::table_id_of(&row.key) {
            Some(table_id) if table_id == DDL_JOB_TABLE_ID || table_id == DDL_HISTORY_TABLE_ID => {
                let sys = if table_id == DDL_JOB_TABLE_ID {
                    &self.job
                } else {
                    &self.history
                };
                let sys = sys
                    .as_ref()
                    .ok_or_else(|| bad(format!("no TableInfo for system table {table_id}")))?;
                let pos = sys
                    .def
                    .columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case("job_meta"))
                    .ok_or_else(|| bad("system table has no job_meta column".into()))?;
                let (_, handle) =
                    key::decode_record_key(&row.key).map_err(|e| bad(e.to_string()))?;
                let mut cells = Vec::new();
                sys.codec
                    .decode_into(&row.value, Some(&handle), &mut cells)
                    .map_err(|e| bad(e.to_string()))?;
                match cells.swap_remove(pos) {
                    Value::Bytes(b) => (b, table_id == DDL_HISTORY_TABLE_ID),
                    Value::Null => return Ok(None),
                    _ => return Err(bad("job_meta is not a byte string".into())),
                }
            }
            _ if legacy_list(&row.key) => (row.value.clone(), false),
            _ => return Ok(None),
        };
        let job = Job::from_json(&job_json).map_err(|e| bad(e.to_string()))?;
        let accept = if from_history {
            job.state == job_state::SYNCED
                && matches!(job.action, action::CREATE_TABLE | action::CREATE_TABLES)
        } else {
            job.state == job_state::DONE
        };
        Ok(accept.then_some(job))
    }
}

/// The binlog events of an applied job (see the module doc).
pub fn ddl_events(applied: &AppliedDdl, start_ts: Ts, filter: &TableFilter) -> Vec<DdlEvent> {
    let job = &applied.job;
    if !is_replicated_action(job.action) {
        return Vec::new();
    }
    let event = |query: String, table: Option<&Arc<MountedTable>>| DdlEvent {
        commit_ts: applied.commit_ts,
        start_ts,
        part: 0,
        job_id: job.id,
        action: job.action,
        schema: applied.schema.clone(),
        query,
        table: table.filter(|t| !t.info.is_view_or_sequence()).cloned(),
        catalog: None,
    };
    if is_schema_action(job.action) {
        if !filter.matches_schema(&applied.schema) {
            return Vec::new();
        }
        return normalize_ddl(&job.query)
            .map(|q| event(q, None))
            .into_iter()
            .collect();
    }
    if job.action == action::CREATE_TABLES {
        let stmts = split_statements(&job.query);
        if stmts.len() == applied.after.len() {
            // One binlog transaction per table, in the job's statement order.
            return stmts
                .iter()
                .zip(&applied.after)
                .filter(|(_, t)| t.included)
                .filter_map(|(s, t)| normalize_ddl(s).map(|q| event(q, Some(t))))
                .zip(0..)
                .map(|(e, part)| DdlEvent { part, ..e })
                .collect();
        }
    }
    let included = applied
        .before
        .iter()
        .chain(&applied.after)
        .any(|t| t.included);
    if !included {
        return Vec::new();
    }
    normalize_ddl(&job.query)
        .map(|q| event(q, applied.after.first()))
        .into_iter()
        .collect()
}

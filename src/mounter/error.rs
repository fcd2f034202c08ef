//! The one error type of the mounter, classified by what the caller must do.
//!
//! * Retry ([`MounterError::Snapshot`]): a snapshot read of the meta keys failed (region error,
//!   lock, network); bootstrapping again at the same ts is safe.
//! * Stop the changefeed (everything else): the schema history, a DDL job or a row does not
//!   agree with what TiDB writes. Going on would put wrong rows into the binlog.

use crate::model::Ts;
use crate::tidb;

/// Result of the mounter.
pub type Result<T> = std::result::Result<T, MounterError>;

/// Errors of the mounter.
#[derive(Debug, thiserror::Error)]
pub enum MounterError {
    /// A [`MetaReader`](super::MetaReader) read failed.
    #[error("snapshot read at ts {ts} failed")]
    Snapshot {
        ts: Ts,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A meta value (DBInfo / TableInfo JSON) or a DDL job does not parse.
    #[error("bad {what} (id {id})")]
    Schema {
        what: &'static str,
        id: i64,
        #[source]
        source: tidb::Error,
    },
    /// A DDL job refers to objects the schema store does not have, or lacks what its type needs.
    #[error("DDL job {job_id} (action {action}): {reason}")]
    BadJob {
        job_id: i64,
        action: u8,
        reason: &'static str,
    },
    /// A table in a database the store does not know.
    #[error("table {table_id} is in unknown database {schema_id}")]
    UnknownDatabase { schema_id: i64, table_id: i64 },
    /// DDL jobs must be applied in commit order.
    #[error("DDL job {job_id} at {commit_ts} arrived after a job at {applied}")]
    DdlOutOfOrder {
        job_id: i64,
        commit_ts: Ts,
        applied: Ts,
    },
    /// A column type that has no MySQL binlog representation.
    #[error("table {table}, column {column}: {reason}")]
    UnsupportedColumn {
        table: String,
        column: String,
        reason: &'static str,
    },
    /// A row of a physical table the schema store does not know at the row's commit ts.
    #[error("no schema for table {table_id} at commit ts {commit_ts}")]
    UnknownTable { table_id: i64, commit_ts: Ts },
    /// A row older than what the schema store still holds (bootstrap ts or GC point).
    #[error("row at commit ts {commit_ts} predates the schema store (valid after {valid_after})")]
    SchemaTooOld { commit_ts: Ts, valid_after: Ts },
    /// A delete (or update) whose before image is missing: TiKV must send `old_value`.
    #[error("{op} of table {table_id} at commit ts {commit_ts} has no old value")]
    MissingOldValue {
        op: &'static str,
        table_id: i64,
        commit_ts: Ts,
    },
    /// A key or row value that does not decode.
    #[error("row of table {table_id} at commit ts {commit_ts}")]
    Row {
        table_id: i64,
        commit_ts: Ts,
        #[source]
        source: tidb::Error,
    },
    /// A DDL job row whose `job_meta` cannot be found or decoded.
    #[error("DDL job row at commit ts {commit_ts}: {reason}")]
    JobRow { commit_ts: Ts, reason: String },
    /// A table filter rule that does not parse.
    #[error("table filter rule {rule:?}: {reason}")]
    FilterRule { rule: String, reason: &'static str },
}

impl MounterError {
    /// Whether repeating the operation can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            // Unless TiKV refused our certificate: every retry meets the same refusal.
            Self::Snapshot { source, .. } => !crate::security::is_refused(source.as_ref()),
            _ => false,
        }
    }
}

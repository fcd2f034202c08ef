//! What a query is planned against and what planning returns.

use tokio_util::sync::CancellationToken;

use crate::sql::catalog::{CatalogSnapshot, TableMeta, TableStats};
use crate::sql::error::Result;
use crate::sql::exec::{Operator, RowStream};
use crate::sql::expr::Env;
use crate::sql::infoschema;
use crate::sql::keyrange::ScanRequest;
use crate::sql::types::SqlType;

/// Reads a TiDB table at a timestamp.
pub trait SnapshotSource: Send + Sync + std::fmt::Debug {
    /// Rows of `table` (cells in `table.columns` order) as of `ts`, reached by the request's
    /// access path (a superset of the rows the statement wants), in the order it asks (of the
    /// clustered key or of the index read, every partition's rows merged).
    fn scan(&self, table: &TableMeta, ts: u64, request: ScanRequest) -> Result<Box<dyn RowStream>>;

    /// Size estimates of the tables, if the source has them.
    fn stats(&self) -> Option<&dyn TableStats> {
        None
    }
}

/// What a query runs against.
pub struct QueryCtx<'a> {
    pub catalog: &'a CatalogSnapshot,
    pub env: &'a dyn Env,
    /// The session's current database.
    pub database: Option<&'a str>,
    /// TiDB table reads, at `read_ts`.
    pub snapshot: Option<&'a dyn SnapshotSource>,
    /// The snapshot timestamp of the statement; `None` before the binlog has a checkpoint.
    pub read_ts: Option<u64>,
    /// Server facts information_schema shows beyond the catalog (sessions).
    pub info: &'a infoschema::ServerFacts,
    /// The original statement text (for column labels).
    pub sql: &'a str,
    pub cancel: CancellationToken,
    /// `'user'@'host'` of a session without the SELECT privilege: reading a TiDB table is
    /// refused (1142) before it is looked up, as MySQL checks privileges first.
    pub select_denied_to: Option<&'a str>,
}

/// One result column.
#[derive(Debug, Clone)]
pub struct OutColumn {
    /// The label clients address the column by.
    pub name: String,
    pub ty: SqlType,
    /// `(schema, table alias, table, column)` for a column read from a table.
    pub origin: Option<(String, String, String, String)>,
    /// MySQL's display length of an integer result (sign included), where it follows from
    /// the expression: a view column is INT up to 9, BIGINT above (`views::int_display_len`).
    pub int_len: Option<u32>,
}

/// A planned query: its columns and the operator producing its rows.
pub struct Planned {
    pub columns: Vec<OutColumn>,
    pub op: Box<dyn Operator>,
}

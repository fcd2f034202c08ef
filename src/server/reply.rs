//! The answers of the SQL surface, before they are put on the wire: what [`super::admin`] and
//! `SHOW BINLOG EVENTS` return and the connection loop sends.

use tibinlog_protocol::wire::errors::ErrorCode;
use tibinlog_protocol::wire::response::{ColumnSpec, ErrResponse};

use crate::sql::error::{SqlError, SqlWarning};
use crate::sql::exec::Operator;
use crate::sql::types::SqlType;

/// One answer to one statement.
#[derive(Debug)]
pub enum Reply {
    Ok {
        affected: u64,
        /// Left for `SHOW WARNINGS`; the OK packet carries their number.
        warnings: Vec<SqlWarning>,
    },
    Err(ErrResponse),
    Rows {
        columns: Vec<ColumnSpec>,
        rows: Vec<Vec<Option<String>>>,
    },
    /// A query whose rows are produced while they are sent.
    Query(QueryReply),
}

/// The result set of a planned query: column definitions, the type of each column (how its
/// values are rendered), and the operator producing the rows.
pub struct QueryReply {
    pub columns: Vec<ColumnSpec>,
    pub types: Vec<SqlType>,
    pub op: Box<dyn Operator>,
}

impl std::fmt::Debug for QueryReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryReply")
            .field("columns", &self.columns.len())
            .finish_non_exhaustive()
    }
}

impl From<SqlError> for Reply {
    fn from(e: SqlError) -> Self {
        Reply::err(e.code, e.message)
    }
}

impl Reply {
    pub(super) fn ok() -> Self {
        Self::Ok {
            affected: 0,
            warnings: Vec::new(),
        }
    }

    /// OK with warnings.
    pub(super) fn ok_warning(warnings: Vec<SqlWarning>) -> Self {
        Self::Ok {
            affected: 0,
            warnings,
        }
    }

    pub(super) fn err(code: ErrorCode, msg: impl Into<String>) -> Self {
        Self::Err(ErrResponse::new(code, msg))
    }

    /// A result set whose columns are all text.
    pub(super) fn text(names: &[&str], rows: Vec<Vec<Option<String>>>) -> Self {
        Self::Rows {
            columns: names.iter().map(|n| ColumnSpec::text(*n)).collect(),
            rows,
        }
    }
}

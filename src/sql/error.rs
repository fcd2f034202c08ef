//! Errors of SQL statements, as the MySQL error a client receives.

use tibinlog_protocol::wire::errors::{
    ErrorCode, ER_BAD_DB_ERROR, ER_BAD_FIELD_ERROR, ER_NON_UNIQ_ERROR, ER_NO_SUCH_TABLE,
    ER_UNKNOWN_ERROR, ER_WRONG_ARGUMENTS,
};

/// A MySQL error: code (with SQL state) and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} ({}): {message}", code.code, code.sql_state_str())]
pub struct SqlError {
    pub code: ErrorCode,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, SqlError>;

/// A warning a statement leaves for `SHOW WARNINGS`: a code and a text, as an error has.
pub type SqlWarning = SqlError;

impl SqlError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        SqlError {
            code,
            message: message.into(),
        }
    }

    /// 1105 naming what is not implemented.
    pub fn unsupported(what: impl std::fmt::Display) -> Self {
        Self::new(
            ER_UNKNOWN_ERROR,
            format!("tibinlog does not support {what}"),
        )
    }

    /// 1054 `Unknown column 'c' in '<clause>'`.
    pub fn unknown_column(name: &str, clause: &str) -> Self {
        Self::new(
            ER_BAD_FIELD_ERROR,
            format!("Unknown column '{name}' in '{clause}'"),
        )
    }

    /// 1052 `Column 'c' in <clause> is ambiguous`.
    pub fn ambiguous_column(name: &str, clause: &str) -> Self {
        Self::new(
            ER_NON_UNIQ_ERROR,
            format!("Column '{name}' in {clause} is ambiguous"),
        )
    }

    /// 1146 `Table 'db.t' doesn't exist`.
    pub fn no_such_table(db: &str, table: &str) -> Self {
        Self::new(
            ER_NO_SUCH_TABLE,
            format!("Table '{db}.{table}' doesn't exist"),
        )
    }

    /// 1049 `Unknown database 'db'`.
    pub fn unknown_database(db: &str) -> Self {
        Self::new(ER_BAD_DB_ERROR, format!("Unknown database '{db}'"))
    }

    /// 1210 `Incorrect arguments to <what>`.
    pub fn wrong_arguments(what: &str) -> Self {
        Self::new(ER_WRONG_ARGUMENTS, format!("Incorrect arguments to {what}"))
    }
}

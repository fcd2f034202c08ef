//! Errors of the simulated TiDB layer, classified by what the caller must do: a storage error
//! from the core (retry the transaction, or fix the test), a codec error (a value that does not
//! fit its column), or a statement the catalog rejects (a caller bug, like MySQL's DDL/DML errors).

use crate::sim::SimError;
use crate::tidb;

/// Result alias of the simulated TiDB layer.
pub type Result<T, E = TidbError> = std::result::Result<T, E>;

/// Everything a DDL, DML or commit of the simulated TiDB can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TidbError {
    /// The storage core refused a read or a Percolator action (conflict, lock, duplicate key).
    /// The transaction wrote nothing that stays: run it again or give up.
    #[error("storage: {0}")]
    Storage(#[from] SimError),
    /// A value does not encode for its column, or stored bytes do not decode.
    #[error("codec: {0}")]
    Codec(#[from] tidb::Error),
    /// `ER_BAD_DB_ERROR` / `ER_DB_CREATE_EXISTS`.
    #[error("database {name:?} {problem}")]
    Database { name: String, problem: &'static str },
    /// `ER_NO_SUCH_TABLE` / `ER_TABLE_EXISTS_ERROR`.
    #[error("table {db}.{table} {problem}")]
    Table {
        db: String,
        table: String,
        problem: &'static str,
    },
    /// Unknown, duplicate or unsupported column / index in a statement.
    #[error("{what} {name:?} of {table}: {problem}")]
    Object {
        what: &'static str,
        name: String,
        table: String,
        problem: &'static str,
    },
    /// A row has the wrong number of values, or a key value of the wrong kind.
    #[error("bad row for {table}: {problem}")]
    BadRow {
        table: String,
        problem: &'static str,
    },
    /// UPDATE/DELETE found no row for the given key.
    #[error("no row in {table} for the given key")]
    RowNotFound { table: String },
    /// The truth log could not be written.
    #[error("truth log: {detail}")]
    TruthLog { detail: String },
    /// A meta value read back from storage is not what the layer wrote.
    #[error("corrupted meta value {what}")]
    CorruptedMeta { what: &'static str },
}

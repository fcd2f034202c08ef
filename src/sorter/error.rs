//! The sorter's error type, classified by what the caller must do.

/// Errors of the sorter stage.
#[derive(Debug, thiserror::Error)]
pub enum SorterError {
    /// RocksDB failed (I/O, out of space, ...). The cache is unusable: restart the pipeline from
    /// the checkpoint; the data dir is wiped at open.
    #[error("rocksdb: {source}")]
    Rocks {
        #[source]
        source: rocksdb::Error,
    },
    /// The data dir could not be wiped or created.
    #[error("sorter data dir {path}: {source}")]
    DataDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A stored key or value does not follow the layout of [`super::key`]: the cache is corrupt.
    /// Fatal for this run; a restart wipes the cache.
    #[error("corrupt sorter {what} ({len} bytes): {detail}")]
    Corrupt {
        /// "key" or "value".
        what: &'static str,
        /// Length of the offending bytes (the bytes themselves are user data: not logged).
        len: usize,
        /// What was wrong.
        detail: &'static str,
    },
    /// A configuration value is out of range.
    #[error("invalid sorter config: {field}: {detail}")]
    Config {
        field: &'static str,
        detail: &'static str,
    },
    /// A sorter thread could not be started.
    #[error("cannot start sorter thread: {source}")]
    Spawn {
        #[source]
        source: std::io::Error,
    },
    /// The other half of the sorter (its writer or reader thread) is gone.
    #[error("sorter {0} thread is gone")]
    Closed(&'static str),
}

impl SorterError {
    /// Nothing in the sorter can be retried in place: every error means "restart from the
    /// checkpoint". Kept for symmetry with the other stages' error types.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

impl From<rocksdb::Error> for SorterError {
    fn from(source: rocksdb::Error) -> Self {
        SorterError::Rocks { source }
    }
}

/// Result of the sorter stage.
pub type Result<T> = std::result::Result<T, SorterError>;

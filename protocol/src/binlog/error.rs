//! The one error type of the binlog codec.
//!
//! Errors are classified by what the caller has to do:
//! * [`BinlogError::is_value_error`]: a row value does not fit the column it is written for. The
//!   event was not written (the buffer is left as it was); the caller's schema or value is wrong and
//!   retrying will not help.
//! * [`BinlogError::is_malformed_input`]: bytes read from disk or the network are not a valid
//!   binlog structure. Reject the input; never retry on the same bytes.
//! * [`BinlogError::PositionOverflow`]: one event of 4 GiB or more (32-bit `event_size`); it
//!   cannot be written anywhere. (`log_pos` past 4 GiB wraps, as MySQL's does.)

/// Result of the binlog codec.
pub type Result<T> = std::result::Result<T, BinlogError>;

/// Everything that can go wrong while encoding or decoding binlog structures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinlogError {
    /// A value cannot be stored in its column (wrong variant, out of range, too long).
    #[error("column {column} ({column_type}): {reason}")]
    Value {
        /// Index of the column in the table definition.
        column: usize,
        /// The column's kind, for the message.
        column_type: &'static str,
        /// What is wrong with the value.
        reason: &'static str,
    },
    /// A row carries a different number of values than the table has columns.
    #[error("row has {got} values but table {table_id} has {want} columns")]
    ColumnCount {
        table_id: u64,
        got: usize,
        want: usize,
    },
    /// A table definition cannot be expressed in a TABLE_MAP (name too long, bad metadata).
    #[error("table definition invalid: {reason}")]
    TableDef { reason: &'static str },
    /// Decimal text that is not `[-+]digits[.digits]` or does not fit DECIMAL(precision, scale).
    #[error("decimal {reason} for DECIMAL({precision},{scale})")]
    Decimal {
        precision: u8,
        scale: u8,
        reason: &'static str,
    },
    /// A JSON document that MySQL's binary JSON cannot hold (e.g. a key over 65535 bytes).
    #[error("json document cannot be encoded: {reason}")]
    Json { reason: &'static str },
    /// The event is 4 GiB or larger: a v4 header's `event_size` cannot hold it.
    #[error("an event of {end} bytes does not fit the 32-bit event_size")]
    PositionOverflow { end: u64 },
    /// Input bytes are not a valid structure.
    #[error("malformed {what} at byte {offset}")]
    Malformed { what: &'static str, offset: usize },
    /// The CRC32 stored in an event differs from the one computed over its bytes.
    #[error("event checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch { stored: u32, computed: u32 },
    /// GTID or GTID-set text that does not parse.
    #[error("invalid GTID text at byte {offset}: {reason}")]
    GtidText { offset: usize, reason: &'static str },
}

impl BinlogError {
    /// True when a value or table definition given by the caller cannot be encoded.
    pub fn is_value_error(&self) -> bool {
        matches!(
            self,
            Self::Value { .. }
                | Self::ColumnCount { .. }
                | Self::TableDef { .. }
                | Self::Decimal { .. }
                | Self::Json { .. }
        )
    }

    /// True when input bytes or text were rejected.
    pub fn is_malformed_input(&self) -> bool {
        matches!(
            self,
            Self::Malformed { .. } | Self::ChecksumMismatch { .. } | Self::GtidText { .. }
        )
    }
}

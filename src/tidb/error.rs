//! The one error type of the TiDB codecs.
//!
//! Every variant means the same thing to a caller: the bytes (or the schema JSON, or the value
//! handed to an encoder) do not describe what they claim to. None of them is retryable; the
//! caller decides whether to skip the row or stop the changefeed. Variants carry the context
//! (what was being decoded, the column, the offending byte) as fields.

/// Errors of the TiDB key, row, value and schema codecs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input ended before `what` was complete.
    #[error("truncated input while decoding {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A memcomparable group marker or padding byte is not what the encoder writes.
    #[error("bad memcomparable bytes group: marker {marker:#04x}")]
    BadGroupMarker { marker: u8 },
    /// A varint runs past 64 bits.
    #[error("varint overflows 64 bits while decoding {what}")]
    VarintOverflow { what: &'static str },
    /// A datum, JSON or other type tag is unknown.
    #[error("unknown {what} flag {flag:#04x}")]
    UnknownFlag { what: &'static str, flag: u8 },
    /// Input left over where the format says the value ends.
    #[error("{left} trailing bytes after {what}")]
    TrailingBytes { what: &'static str, left: usize },
    /// A structural field holds an impossible value (row header, offsets, key layout, ...).
    #[error("corrupted {what}: {detail}")]
    Corrupted {
        what: &'static str,
        detail: &'static str,
    },
    /// Decimal precision/frac out of MySQL's limits (precision 1..=65, frac <= 30, frac <= precision).
    #[error("invalid decimal precision {precision} / frac {frac}")]
    BadDecimalSize { precision: u8, frac: u8 },
    /// Decimal text that does not parse or does not fit the precision.
    #[error("invalid decimal text {text:?}: {detail}")]
    BadDecimalText { text: String, detail: &'static str },
    /// A packed time or duration whose fields are out of range.
    #[error("invalid {what} value {raw:#x}")]
    BadTime { what: &'static str, raw: u64 },
    /// Time text (a default value) that does not parse.
    #[error("invalid {what} text {text:?}")]
    BadTimeText { what: &'static str, text: String },
    /// Nested JSON deeper than the decoder accepts.
    #[error("JSON document nested deeper than {max}")]
    JsonTooDeep { max: usize },
    /// A JSON object key or string that is not UTF-8.
    #[error("invalid UTF-8 in {what}")]
    InvalidUtf8 { what: &'static str },
    /// A virtual generated column whose value cannot be computed for this row: the row is
    /// refused rather than given a made-up value.
    #[error("virtual generated column {column} cannot be computed ({reason}); add the table to the filter's exclusions to go on without it")]
    GeneratedColumn { column: String, reason: String },
    /// A column type code the row decoder does not know how to interpret.
    #[error("column {column_id}: unsupported MySQL type code {tp}")]
    UnsupportedType { column_id: i64, tp: u8 },
    /// A stored datum whose kind does not fit the column's type.
    #[error("column {column_id} (type {tp}): stored {found} does not fit the column")]
    TypeMismatch {
        column_id: i64,
        tp: u8,
        found: &'static str,
    },
    /// A `Value` handed to an encoder that does not fit the column's type.
    #[error("column {column_id} (type {tp}): cannot encode a {found} value")]
    ValueMismatch {
        column_id: i64,
        tp: u8,
        found: &'static str,
    },
    /// The row needs the int handle from its key, and none was given.
    #[error("column {column_id} is the int handle but no handle was given")]
    MissingHandle { column_id: i64 },
    /// The number of values given to an encoder differs from the column count.
    #[error("expected {expected} values, got {got}")]
    ColumnCount { expected: usize, got: usize },
    /// A column id that cannot be written (<= 0, > u32::MAX, or duplicated).
    #[error("invalid column id {column_id} for row format v2")]
    BadColumnId { column_id: i64 },
    /// A column default (`origin_default`) that cannot be converted to the column type.
    #[error("column {column:?}: invalid default value {value}")]
    BadDefault { column: String, value: String },
    /// Schema JSON that does not deserialize.
    #[error("invalid schema JSON: {0}")]
    SchemaJson(String),
}

/// Result of the TiDB codecs.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns the first `n` bytes of `b` and the rest, or `Truncated`.
#[inline]
pub(crate) fn take<'a>(b: &'a [u8], n: usize, what: &'static str) -> Result<(&'a [u8], &'a [u8])> {
    if b.len() < n {
        return Err(Error::Truncated {
            what,
            need: n,
            have: b.len(),
        });
    }
    Ok(b.split_at(n))
}

/// Reads `N` bytes into an array.
#[inline]
pub(crate) fn take_array<'a, const N: usize>(
    b: &'a [u8],
    what: &'static str,
) -> Result<([u8; N], &'a [u8])> {
    let (head, rest) = take(b, N, what)?;
    let mut a = [0u8; N];
    a.copy_from_slice(head);
    Ok((a, rest))
}

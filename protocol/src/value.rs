//! Typed MySQL column values: what the mounter produces from TiDB rows and what the rows-event
//! encoder writes. One value per column cell, in the MySQL form of the column's type (not TiDB's).
//!
//! These types are the contract between the capture side (`tibinlog::tidb`, the mounter) and the
//! binlog codec; they carry no column metadata: precision, fsp, lengths and charsets come from the
//! column definition that travels in the TABLE_MAP.

/// A calendar date; zero parts are allowed (`0000-00-00`, `2024-00-00`) as MySQL allows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

/// A date and a time of day with microseconds (DATETIME, and TIMESTAMP inside JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DateTime {
    pub date: Date,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

/// A MySQL TIME value: a signed duration of at most 838:59:59.999999.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Time {
    pub negative: bool,
    pub hours: u16,
    pub minutes: u8,
    pub seconds: u8,
    pub micros: u32,
}

/// One column cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    /// TINYINT..BIGINT of a signed column.
    Int(i64),
    /// TINYINT..BIGINT of an UNSIGNED column.
    UInt(u64),
    Float(f32),
    Double(f64),
    /// DECIMAL in canonical text form (`-1234567.89`); precision and scale come from the column.
    Decimal(String),
    /// CHAR/VARCHAR/TEXT/BLOB/BINARY/VARBINARY bytes, already in the column's charset.
    Bytes(Vec<u8>),
    Date(Date),
    DateTime(DateTime),
    /// TIMESTAMP as seconds since 1970-01-01 UTC plus microseconds (0 = the zero timestamp).
    Timestamp {
        seconds: u32,
        micros: u32,
    },
    Time(Time),
    /// YEAR: 0 for the zero year, else 1901..=2155.
    Year(u16),
    /// ENUM member index, 1-based; 0 is the invalid '' member.
    Enum(u16),
    /// SET bitmask, bit i = member i.
    Set(u64),
    /// BIT(n) value in the low n bits.
    Bit(u64),
    Json(Json),
}

/// A JSON document as a tree, the meeting point of TiDB's binary JSON (decoded by
/// `tibinlog::tidb`) and MySQL's binary JSON (encoded by this crate). The temporal and decimal
/// variants exist because both formats carry them as typed scalars (MySQL as opaque values).
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    String(String),
    Array(Vec<Json>),
    /// Members in document order as given; encoders sort keys as their format requires.
    Object(Vec<(String, Json)>),
    /// A DECIMAL scalar in canonical text form with its precision and scale.
    Decimal {
        text: String,
        precision: u8,
        scale: u8,
    },
    Date(Date),
    DateTime(DateTime),
    Timestamp(DateTime),
    Time(Time),
    /// Any other opaque value: a MySQL field type code and its raw bytes.
    Opaque {
        field_type: u8,
        data: Vec<u8>,
    },
}

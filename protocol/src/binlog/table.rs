//! Table definitions as a binlog master describes them: what a TABLE_MAP carries and what the
//! row encoder needs to lay out each value.
//!
//! Every [`ColumnKind`] maps to one binlog type code (never the legacy DECIMAL, TIMESTAMP,
//! DATETIME, TIME, NEWDATE, VAR_STRING, ENUM or SET codes) and a fixed metadata layout:
//!
//! | kind            | type code        | metadata bytes                                 |
//! |-----------------|------------------|------------------------------------------------|
//! | Tiny..LongLong  | 1, 2, 9, 3, 8    | none                                           |
//! | Float / Double  | 4 / 5            | `4` / `8`                                      |
//! | NewDecimal      | 246              | precision, scale                               |
//! | Year / Date     | 13 / 10          | none                                           |
//! | Time2 etc.      | 19, 18, 17       | fsp                                            |
//! | String          | 254              | `254 ^ ((L & 0x300) >> 4)`, `L & 0xFF`          |
//! | VarString       | 15               | L as 2 bytes LE                                |
//! | Blob / Json / Geometry | 252 / 245 / 255 | pack length (Json and Geometry: 4)     |
//! | Bit             | 16               | bits % 8, bits / 8                             |
//! | Enum / Set      | 254              | 247 or 248, pack length                        |

use super::error::{BinlogError, Result};

/// Binlog column type codes (`enum_field_types`) this crate emits.
#[allow(missing_docs)]
pub mod column_type {
    pub const TINY: u8 = 1;
    pub const SHORT: u8 = 2;
    pub const LONG: u8 = 3;
    pub const FLOAT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const TIMESTAMP: u8 = 7;
    pub const LONGLONG: u8 = 8;
    pub const INT24: u8 = 9;
    pub const DATE: u8 = 10;
    pub const TIME: u8 = 11;
    pub const DATETIME: u8 = 12;
    pub const YEAR: u8 = 13;
    pub const VARCHAR: u8 = 15;
    pub const BIT: u8 = 16;
    pub const TIMESTAMP2: u8 = 17;
    pub const DATETIME2: u8 = 18;
    pub const TIME2: u8 = 19;
    pub const JSON: u8 = 245;
    pub const NEWDECIMAL: u8 = 246;
    pub const ENUM: u8 = 247;
    pub const SET: u8 = 248;
    pub const BLOB: u8 = 252;
    pub const STRING: u8 = 254;
    pub const GEOMETRY: u8 = 255;
}

/// The collation id of binary strings (`binary`, charset 63).
pub const BINARY_COLLATION: u16 = 63;

/// The shape of a column: everything that decides its binlog type, metadata and value layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnKind {
    /// TINYINT
    Tiny,
    /// SMALLINT
    Short,
    /// MEDIUMINT
    Int24,
    /// INT
    Long,
    /// BIGINT
    LongLong,
    /// FLOAT
    Float,
    /// DOUBLE
    Double,
    /// DECIMAL(precision, scale): precision 1..=65, scale 0..=30.
    NewDecimal { precision: u8, scale: u8 },
    /// YEAR
    Year,
    /// DATE
    Date,
    /// TIME(fsp)
    Time2 { fsp: u8 },
    /// DATETIME(fsp)
    DateTime2 { fsp: u8 },
    /// TIMESTAMP(fsp)
    Timestamp2 { fsp: u8 },
    /// CHAR(n) / BINARY(n): `max_bytes` = n x max bytes per character, at most 1023.
    String { max_bytes: u16 },
    /// VARCHAR(n) / VARBINARY(n): `max_bytes` = n x max bytes per character.
    VarString { max_bytes: u16 },
    /// TINY/-/MEDIUM/LONG TEXT or BLOB: the length prefix width, 1..=4.
    Blob { pack_len: u8 },
    /// JSON
    Json,
    /// BIT(bits), bits 1..=64.
    Bit { bits: u8 },
    /// ENUM: member names in definition order; `pack` = 1 (<= 255 members) or 2.
    Enum { members: Vec<Vec<u8>>, pack: u8 },
    /// SET: member names in definition order; `pack` = 1, 2, 3, 4 or 8.
    Set { members: Vec<Vec<u8>>, pack: u8 },
    /// GEOMETRY and its subtypes; `geometry_type` as MySQL's `Field::geometry_type` (0 = GEOMETRY).
    Geometry { geometry_type: u8 },
}

impl ColumnKind {
    /// ENUM with the pack length MySQL chooses for `members`.
    pub fn enumeration(members: Vec<Vec<u8>>) -> Self {
        let pack = if members.len() < 256 { 1 } else { 2 };
        Self::Enum { members, pack }
    }

    /// SET with the pack length MySQL chooses for `members`.
    pub fn set(members: Vec<Vec<u8>>) -> Self {
        let pack = match members.len().div_ceil(8) {
            0 | 1 => 1,
            2 => 2,
            3 => 3,
            4 => 4,
            _ => 8,
        };
        Self::Set { members, pack }
    }

    /// The binlog type code written in the TABLE_MAP.
    pub fn binlog_type(&self) -> u8 {
        use column_type as t;
        match self {
            Self::Tiny => t::TINY,
            Self::Short => t::SHORT,
            Self::Int24 => t::INT24,
            Self::Long => t::LONG,
            Self::LongLong => t::LONGLONG,
            Self::Float => t::FLOAT,
            Self::Double => t::DOUBLE,
            Self::NewDecimal { .. } => t::NEWDECIMAL,
            Self::Year => t::YEAR,
            Self::Date => t::DATE,
            Self::Time2 { .. } => t::TIME2,
            Self::DateTime2 { .. } => t::DATETIME2,
            Self::Timestamp2 { .. } => t::TIMESTAMP2,
            Self::String { .. } | Self::Enum { .. } | Self::Set { .. } => t::STRING,
            Self::VarString { .. } => t::VARCHAR,
            Self::Blob { .. } => t::BLOB,
            Self::Json => t::JSON,
            Self::Bit { .. } => t::BIT,
            Self::Geometry { .. } => t::GEOMETRY,
        }
    }

    /// Appends the column's TABLE_MAP metadata bytes.
    pub fn put_metadata(&self, buf: &mut Vec<u8>) {
        match self {
            Self::Float => buf.push(4),
            Self::Double => buf.push(8),
            Self::NewDecimal { precision, scale } => buf.extend_from_slice(&[*precision, *scale]),
            Self::Time2 { fsp } | Self::DateTime2 { fsp } | Self::Timestamp2 { fsp } => {
                buf.push(*fsp)
            }
            Self::String { max_bytes } => {
                // Lengths above 255 fold bits 8-9 of L into the type byte, inverted (bug #37426).
                let l = *max_bytes;
                buf.push(column_type::STRING ^ ((l & 0x300) >> 4) as u8);
                buf.push((l & 0xff) as u8);
            }
            Self::VarString { max_bytes } => buf.extend_from_slice(&max_bytes.to_le_bytes()),
            Self::Blob { pack_len } => buf.push(*pack_len),
            Self::Json | Self::Geometry { .. } => buf.push(4),
            Self::Bit { bits } => buf.extend_from_slice(&[bits % 8, bits / 8]),
            Self::Enum { pack, .. } => buf.extend_from_slice(&[column_type::ENUM, *pack]),
            Self::Set { pack, .. } => buf.extend_from_slice(&[column_type::SET, *pack]),
            _ => {}
        }
    }

    /// Columns that get a bit in the SIGNEDNESS optional metadata. MySQL's own list is the
    /// integer types, FLOAT, DOUBLE and NEWDECIMAL; YEAR is included because mysql_common and
    /// python-mysql-replication count it when they walk the bitmap (it is written as signed).
    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            Self::Tiny
                | Self::Short
                | Self::Int24
                | Self::Long
                | Self::LongLong
                | Self::Float
                | Self::Double
                | Self::NewDecimal { .. }
                | Self::Year
        )
    }

    /// Columns covered by DEFAULT_CHARSET / COLUMN_CHARSET (MySQL: STRING, VARCHAR, BLOB;
    /// ENUM and SET have their own TLVs).
    pub fn is_character(&self) -> bool {
        matches!(
            self,
            Self::String { .. } | Self::VarString { .. } | Self::Blob { .. }
        )
    }

    /// Columns covered by ENUM_AND_SET_DEFAULT_CHARSET / _COLUMN_CHARSET.
    pub fn is_enum_or_set(&self) -> bool {
        matches!(self, Self::Enum { .. } | Self::Set { .. })
    }

    /// Short name for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Tiny => "TINYINT",
            Self::Short => "SMALLINT",
            Self::Int24 => "MEDIUMINT",
            Self::Long => "INT",
            Self::LongLong => "BIGINT",
            Self::Float => "FLOAT",
            Self::Double => "DOUBLE",
            Self::NewDecimal { .. } => "DECIMAL",
            Self::Year => "YEAR",
            Self::Date => "DATE",
            Self::Time2 { .. } => "TIME",
            Self::DateTime2 { .. } => "DATETIME",
            Self::Timestamp2 { .. } => "TIMESTAMP",
            Self::String { .. } => "CHAR",
            Self::VarString { .. } => "VARCHAR",
            Self::Blob { .. } => "BLOB",
            Self::Json => "JSON",
            Self::Bit { .. } => "BIT",
            Self::Enum { .. } => "ENUM",
            Self::Set { .. } => "SET",
            Self::Geometry { .. } => "GEOMETRY",
        }
    }

    fn validate(&self) -> std::result::Result<(), &'static str> {
        match self {
            Self::NewDecimal { precision, scale }
                if *precision == 0 || *precision > 65 || *scale > 30 || scale > precision =>
            {
                Err("DECIMAL precision/scale out of range")
            }
            Self::Time2 { fsp } | Self::DateTime2 { fsp } | Self::Timestamp2 { fsp }
                if *fsp > 6 =>
            {
                Err("fsp above 6")
            }
            Self::String { max_bytes } if *max_bytes > 1023 => Err("CHAR longer than 1023 bytes"),
            Self::Blob { pack_len } if !(1..=4).contains(pack_len) => {
                Err("BLOB pack length not 1..4")
            }
            Self::Bit { bits } if !(1..=64).contains(bits) => Err("BIT width not 1..64"),
            Self::Enum { members, pack } if !matches!(pack, 1 | 2) || members.len() > 65535 => {
                Err("ENUM pack length not 1 or 2")
            }
            Self::Set { members, pack }
                if !matches!(pack, 1 | 2 | 3 | 4 | 8) || members.len() > 64 =>
            {
                Err("SET pack length not 1, 2, 3, 4 or 8")
            }
            _ => Ok(()),
        }
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: String,
    pub kind: ColumnKind,
    /// UNSIGNED; only meaningful for numeric kinds.
    pub unsigned: bool,
    /// The column may hold NULL.
    pub nullable: bool,
    /// Collation id for character, ENUM and SET columns; `None` means binary (63).
    pub collation: Option<u16>,
}

impl ColumnDef {
    /// A nullable, signed column without collation.
    pub fn new(name: impl Into<String>, kind: ColumnKind) -> Self {
        Self {
            name: name.into(),
            kind,
            unsigned: false,
            nullable: true,
            collation: None,
        }
    }

    /// Marks the column UNSIGNED.
    pub fn unsigned(mut self) -> Self {
        self.unsigned = true;
        self
    }

    /// Marks the column NOT NULL.
    pub fn not_null(mut self) -> Self {
        self.nullable = false;
        self
    }

    /// Sets the collation id.
    pub fn collation(mut self, id: u16) -> Self {
        self.collation = Some(id);
        self
    }

    /// The collation written in the charset TLVs.
    pub fn collation_id(&self) -> u16 {
        self.collation.unwrap_or(BINARY_COLLATION)
    }
}

/// A table as the binlog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    /// The 48-bit TABLE_MAP id; never 0 and never `0xFFFF_FFFF_FFFF`, never re-bound to another
    /// table (clients cache by id).
    pub table_id: u64,
    pub schema: String,
    pub table: String,
    pub columns: Vec<ColumnDef>,
    /// Column indexes of the primary key, in key order (empty: no primary key).
    pub primary_key: Vec<u16>,
}

impl TableDef {
    /// Checks what a TABLE_MAP and the row encoder rely on.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason| Err(BinlogError::TableDef { reason });
        if self.table_id == 0 || self.table_id >= 0xFFFF_FFFF_FFFF {
            return bad("table id must be in 1..0xFFFFFFFFFFFF");
        }
        if self.schema.len() > 255 || self.table.len() > 255 {
            return bad("schema or table name longer than 255 bytes");
        }
        if self.columns.is_empty() {
            return bad("table without columns");
        }
        if self
            .primary_key
            .iter()
            .any(|&i| usize::from(i) >= self.columns.len())
        {
            return bad("primary key index out of range");
        }
        for c in &self.columns {
            c.kind.validate().or_else(bad)?;
        }
        Ok(())
    }

    /// Bytes of a bitmap with one bit per column.
    pub fn bitmap_len(&self) -> usize {
        self.columns.len().div_ceil(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_metadata_folds_long_lengths() {
        let mut b = Vec::new();
        // CHAR(255) in utf8mb4: L = 1020 -> CE FC (as MySQL's Field_string writes it).
        ColumnKind::String { max_bytes: 1020 }.put_metadata(&mut b);
        assert_eq!(b, [0xCE, 0xFC]);
        b.clear();
        ColumnKind::String { max_bytes: 40 }.put_metadata(&mut b);
        assert_eq!(b, [0xFE, 40]);
    }

    #[test]
    fn set_and_enum_pack_lengths() {
        let m = |n: usize| {
            (0..n)
                .map(|i| format!("m{i}").into_bytes())
                .collect::<Vec<_>>()
        };
        assert!(matches!(
            ColumnKind::set(m(8)),
            ColumnKind::Set { pack: 1, .. }
        ));
        assert!(matches!(
            ColumnKind::set(m(17)),
            ColumnKind::Set { pack: 3, .. }
        ));
        assert!(matches!(
            ColumnKind::set(m(33)),
            ColumnKind::Set { pack: 8, .. }
        ));
        assert!(matches!(
            ColumnKind::enumeration(m(256)),
            ColumnKind::Enum { pack: 2, .. }
        ));
    }
}

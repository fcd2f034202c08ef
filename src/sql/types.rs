//! The type of a result column or an expression, as MySQL types it: what decides the column
//! definition a client receives (type code, length, flags, decimals, charset) and how a value is
//! rendered in the text and binary protocols.

use mysql_common::constants::{ColumnFlags, ColumnType};
use tibinlog_protocol::binlog::{ColumnDef, ColumnKind};
use tibinlog_protocol::wire::response::ColumnSpec;

use super::charset::{self, BINARY, UTF8MB3_GENERAL_CI, UTF8MB4_0900_AI_CI};
use super::like::CaseRule;

/// The shape of a type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeKind {
    /// The type of the NULL literal.
    Null,
    /// TINYINT (1), SMALLINT (2), MEDIUMINT (3), INT (4), BIGINT (8): the width in bytes.
    Int {
        bytes: u8,
    },
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Year,
    Date,
    Time {
        fsp: u8,
    },
    DateTime {
        fsp: u8,
    },
    Timestamp {
        fsp: u8,
    },
    /// CHAR(n) / BINARY(n).
    Char {
        chars: u32,
    },
    /// VARCHAR(n) / VARBINARY(n).
    VarChar {
        chars: u32,
    },
    /// TEXT / BLOB of at most `max_bytes` bytes.
    Text {
        max_bytes: u64,
    },
    Json,
    Bit {
        bits: u8,
    },
    Enum {
        members: Vec<Vec<u8>>,
    },
    Set {
        members: Vec<Vec<u8>>,
    },
    Geometry,
}

/// A MySQL type with what the column definition says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlType {
    pub kind: TypeKind,
    /// UNSIGNED (numeric kinds).
    pub unsigned: bool,
    /// Collation id of a character kind; [`BINARY`] for binary strings and non-strings.
    pub collation: u16,
    pub nullable: bool,
    /// PRI_KEY / UNIQUE_KEY / MULTIPLE_KEY / AUTO_INCREMENT / ZEROFILL, for table columns.
    pub key_flags: ColumnFlags,
}

impl SqlType {
    pub fn new(kind: TypeKind) -> Self {
        SqlType {
            kind,
            unsigned: false,
            collation: BINARY,
            nullable: true,
            key_flags: ColumnFlags::empty(),
        }
    }

    pub fn null() -> Self {
        Self::new(TypeKind::Null)
    }

    pub fn bigint() -> Self {
        Self::new(TypeKind::Int { bytes: 8 })
    }

    pub fn ubigint() -> Self {
        Self::new(TypeKind::Int { bytes: 8 }).unsigned()
    }

    pub fn int() -> Self {
        Self::new(TypeKind::Int { bytes: 4 })
    }

    pub fn double() -> Self {
        Self::new(TypeKind::Double)
    }

    pub fn decimal(precision: u8, scale: u8) -> Self {
        Self::new(TypeKind::Decimal { precision, scale })
    }

    pub fn datetime(fsp: u8) -> Self {
        Self::new(TypeKind::DateTime { fsp })
    }

    /// VARCHAR(chars) in `collation`.
    pub fn varchar(chars: u32, collation: u16) -> Self {
        Self::new(TypeKind::VarChar { chars }).with_collation(collation)
    }

    /// A catalog name column: VARCHAR(64) utf8mb3_general_ci, as MySQL 8.0's
    /// information_schema answers them.
    pub fn name() -> Self {
        Self::varchar(64, UTF8MB3_GENERAL_CI)
    }

    /// A computed string (`utf8mb4_0900_ai_ci`, the connection collation).
    pub fn string(chars: u32) -> Self {
        Self::varchar(chars, UTF8MB4_0900_AI_CI)
    }

    /// LONGTEXT in `collation`.
    pub fn longtext(collation: u16) -> Self {
        Self::new(TypeKind::Text {
            max_bytes: u64::from(u32::MAX),
        })
        .with_collation(collation)
    }

    pub fn unsigned(mut self) -> Self {
        self.unsigned = true;
        self
    }

    pub fn not_null(mut self) -> Self {
        self.nullable = false;
        self
    }

    pub fn nullable(mut self, nullable: bool) -> Self {
        self.nullable = nullable;
        self
    }

    pub fn with_collation(mut self, collation: u16) -> Self {
        self.collation = collation;
        self
    }

    /// The type of a table column as the binlog describes it.
    pub fn from_column(c: &ColumnDef) -> Self {
        let collation = c.collation.unwrap_or(BINARY);
        let maxlen = charset::maxlen(collation).max(1);
        let kind = match &c.kind {
            ColumnKind::Tiny => TypeKind::Int { bytes: 1 },
            ColumnKind::Short => TypeKind::Int { bytes: 2 },
            ColumnKind::Int24 => TypeKind::Int { bytes: 3 },
            ColumnKind::Long => TypeKind::Int { bytes: 4 },
            ColumnKind::LongLong => TypeKind::Int { bytes: 8 },
            ColumnKind::Float => TypeKind::Float,
            ColumnKind::Double => TypeKind::Double,
            ColumnKind::NewDecimal { precision, scale } => TypeKind::Decimal {
                precision: *precision,
                scale: *scale,
            },
            ColumnKind::Year => TypeKind::Year,
            ColumnKind::Date => TypeKind::Date,
            ColumnKind::Time2 { fsp } => TypeKind::Time { fsp: *fsp },
            ColumnKind::DateTime2 { fsp } => TypeKind::DateTime { fsp: *fsp },
            ColumnKind::Timestamp2 { fsp } => TypeKind::Timestamp { fsp: *fsp },
            ColumnKind::String { max_bytes } => TypeKind::Char {
                chars: u32::from(*max_bytes) / maxlen,
            },
            ColumnKind::VarString { max_bytes } => TypeKind::VarChar {
                chars: u32::from(*max_bytes) / maxlen,
            },
            ColumnKind::Blob { pack_len } => TypeKind::Text {
                max_bytes: (1u64 << (8 * u32::from(*pack_len))) - 1,
            },
            ColumnKind::Json => TypeKind::Json,
            ColumnKind::Bit { bits } => TypeKind::Bit { bits: *bits },
            ColumnKind::Enum { members, .. } => TypeKind::Enum {
                members: members.clone(),
            },
            ColumnKind::Set { members, .. } => TypeKind::Set {
                members: members.clone(),
            },
            ColumnKind::Geometry { .. } => TypeKind::Geometry,
        };
        SqlType {
            kind,
            unsigned: c.unsigned,
            collation,
            nullable: c.nullable,
            key_flags: ColumnFlags::empty(),
        }
    }

    /// True for the integer kinds (and YEAR, BIT).
    pub fn is_integer(&self) -> bool {
        matches!(
            self.kind,
            TypeKind::Int { .. } | TypeKind::Year | TypeKind::Bit { .. }
        )
    }

    /// True for every numeric kind.
    pub fn is_numeric(&self) -> bool {
        self.is_integer()
            || matches!(
                self.kind,
                TypeKind::Float | TypeKind::Double | TypeKind::Decimal { .. }
            )
    }

    /// True for the kinds compared and shown as character or binary strings.
    pub fn is_string(&self) -> bool {
        matches!(
            self.kind,
            TypeKind::Char { .. }
                | TypeKind::VarChar { .. }
                | TypeKind::Text { .. }
                | TypeKind::Enum { .. }
                | TypeKind::Set { .. }
        )
    }

    /// True for DATE, DATETIME and TIMESTAMP.
    pub fn is_temporal(&self) -> bool {
        matches!(
            self.kind,
            TypeKind::Date | TypeKind::DateTime { .. } | TypeKind::Timestamp { .. }
        )
    }

    /// How LIKE and comparisons treat case in this type's collation.
    pub fn case_rule(&self) -> CaseRule {
        if !self.is_string() {
            return CaseRule::Sensitive;
        }
        charset::collation(self.collation).map_or(CaseRule::Sensitive, |c| c.case_rule())
    }

    /// Fractional-second digits of a temporal kind.
    pub fn fsp(&self) -> u8 {
        match self.kind {
            TypeKind::Time { fsp } | TypeKind::DateTime { fsp } | TypeKind::Timestamp { fsp } => {
                fsp
            }
            _ => 0,
        }
    }

    /// The column definition MySQL sends for a column of this type labelled `name`.
    pub fn column_spec(&self, name: &str) -> ColumnSpec {
        let maxlen = charset::maxlen(self.collation);
        let sign = u32::from(!self.unsigned);
        let frac = |fsp: u8| if fsp > 0 { u32::from(fsp) + 1 } else { 0 };
        let binary_charset = !self.is_string() || self.collation == BINARY;
        let (ty, length, decimals, mut flags) = match &self.kind {
            TypeKind::Null => (ColumnType::MYSQL_TYPE_NULL, 0, 0, ColumnFlags::BINARY_FLAG),
            TypeKind::Int { bytes } => {
                let (ty, digits) = match bytes {
                    1 => (ColumnType::MYSQL_TYPE_TINY, 3),
                    2 => (ColumnType::MYSQL_TYPE_SHORT, 5),
                    3 => (ColumnType::MYSQL_TYPE_INT24, 8),
                    4 => (ColumnType::MYSQL_TYPE_LONG, 10),
                    _ => (ColumnType::MYSQL_TYPE_LONGLONG, 19),
                };
                let length = if *bytes == 8 { 20 } else { digits + sign };
                (ty, length, 0, ColumnFlags::NUM_FLAG)
            }
            TypeKind::Float => (ColumnType::MYSQL_TYPE_FLOAT, 12, 31, ColumnFlags::NUM_FLAG),
            TypeKind::Double => (ColumnType::MYSQL_TYPE_DOUBLE, 22, 31, ColumnFlags::NUM_FLAG),
            TypeKind::Decimal { precision, scale } => (
                ColumnType::MYSQL_TYPE_NEWDECIMAL,
                u32::from(*precision) + u32::from(*scale > 0) + sign,
                *scale,
                ColumnFlags::NUM_FLAG,
            ),
            TypeKind::Year => (
                ColumnType::MYSQL_TYPE_YEAR,
                4,
                0,
                ColumnFlags::UNSIGNED_FLAG | ColumnFlags::ZEROFILL_FLAG | ColumnFlags::NUM_FLAG,
            ),
            TypeKind::Date => (ColumnType::MYSQL_TYPE_DATE, 10, 0, ColumnFlags::BINARY_FLAG),
            TypeKind::Time { fsp } => (
                ColumnType::MYSQL_TYPE_TIME,
                10 + frac(*fsp),
                *fsp,
                ColumnFlags::BINARY_FLAG,
            ),
            TypeKind::DateTime { fsp } => (
                ColumnType::MYSQL_TYPE_DATETIME,
                19 + frac(*fsp),
                *fsp,
                ColumnFlags::BINARY_FLAG,
            ),
            TypeKind::Timestamp { fsp } => (
                ColumnType::MYSQL_TYPE_TIMESTAMP,
                19 + frac(*fsp),
                *fsp,
                ColumnFlags::BINARY_FLAG | ColumnFlags::TIMESTAMP_FLAG,
            ),
            TypeKind::Char { chars } => (
                ColumnType::MYSQL_TYPE_STRING,
                chars.saturating_mul(maxlen),
                0,
                ColumnFlags::empty(),
            ),
            TypeKind::VarChar { chars } => (
                ColumnType::MYSQL_TYPE_VAR_STRING,
                chars.saturating_mul(maxlen),
                0,
                ColumnFlags::empty(),
            ),
            TypeKind::Text { max_bytes } => (
                ColumnType::MYSQL_TYPE_BLOB,
                u32::try_from(*max_bytes).unwrap_or(u32::MAX),
                0,
                ColumnFlags::BLOB_FLAG,
            ),
            TypeKind::Json => (
                ColumnType::MYSQL_TYPE_JSON,
                u32::MAX,
                0,
                ColumnFlags::BLOB_FLAG | ColumnFlags::BINARY_FLAG,
            ),
            TypeKind::Bit { bits } => (
                ColumnType::MYSQL_TYPE_BIT,
                u32::from(*bits),
                0,
                ColumnFlags::UNSIGNED_FLAG,
            ),
            TypeKind::Enum { members } | TypeKind::Set { members } => {
                let set = matches!(self.kind, TypeKind::Set { .. });
                let chars = if set {
                    members.iter().map(|m| m.len() as u32 + 1).sum::<u32>()
                } else {
                    members.iter().map(|m| m.len() as u32).max().unwrap_or(0)
                };
                (
                    ColumnType::MYSQL_TYPE_STRING,
                    chars.saturating_mul(maxlen),
                    0,
                    if set {
                        ColumnFlags::SET_FLAG
                    } else {
                        ColumnFlags::ENUM_FLAG
                    },
                )
            }
            TypeKind::Geometry => (
                ColumnType::MYSQL_TYPE_GEOMETRY,
                u32::MAX,
                0,
                ColumnFlags::BLOB_FLAG | ColumnFlags::BINARY_FLAG,
            ),
        };
        if self.unsigned && self.is_numeric() {
            flags |= ColumnFlags::UNSIGNED_FLAG;
        }
        if self.is_string() && self.collation == BINARY {
            flags |= ColumnFlags::BINARY_FLAG;
        }
        if !self.nullable {
            flags |= ColumnFlags::NOT_NULL_FLAG;
        }
        flags |= self.key_flags;
        let mut spec = ColumnSpec::new(
            name,
            ty,
            if binary_charset {
                BINARY
            } else {
                self.collation
            },
            length,
        );
        spec.flags = flags;
        spec.decimals = decimals;
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_definitions_match_mysql() {
        let c = SqlType::name().not_null().column_spec("TABLE_NAME");
        assert_eq!(c.column_type, ColumnType::MYSQL_TYPE_VAR_STRING);
        assert_eq!((c.charset, c.length), (UTF8MB3_GENERAL_CI, 192));
        assert!(c.flags.contains(ColumnFlags::NOT_NULL_FLAG));

        let c = SqlType::ubigint().column_spec("n");
        assert_eq!(c.column_type, ColumnType::MYSQL_TYPE_LONGLONG);
        assert_eq!((c.charset, c.length), (BINARY, 20));
        assert!(c
            .flags
            .contains(ColumnFlags::UNSIGNED_FLAG | ColumnFlags::NUM_FLAG));

        let c = SqlType::new(TypeKind::Int { bytes: 4 }).column_spec("i");
        assert_eq!(c.length, 11);
        let c = SqlType::decimal(10, 2).column_spec("d");
        assert_eq!((c.length, c.decimals), (12, 2));
        let c = SqlType::datetime(3).column_spec("t");
        assert_eq!((c.length, c.decimals), (23, 3));
        let c = SqlType::null().column_spec("NULL");
        assert_eq!(c.column_type, ColumnType::MYSQL_TYPE_NULL);
    }

    #[test]
    fn table_columns_keep_their_shape() {
        let c = ColumnDef {
            name: "v".into(),
            kind: ColumnKind::VarString { max_bytes: 256 },
            unsigned: false,
            nullable: false,
            collation: Some(charset::UTF8MB4_BIN),
        };
        let t = SqlType::from_column(&c);
        assert_eq!(t.kind, TypeKind::VarChar { chars: 64 });
        assert_eq!(t.case_rule(), CaseRule::Sensitive);
        let spec = t.column_spec("v");
        assert_eq!((spec.charset, spec.length), (charset::UTF8MB4_BIN, 256));
        let b = ColumnDef {
            name: "b".into(),
            kind: ColumnKind::Blob { pack_len: 2 },
            unsigned: false,
            nullable: true,
            collation: None,
        };
        let spec = SqlType::from_column(&b).column_spec("b");
        assert_eq!(spec.column_type, ColumnType::MYSQL_TYPE_BLOB);
        assert_eq!(spec.length, 65_535);
        assert!(spec
            .flags
            .contains(ColumnFlags::BINARY_FLAG | ColumnFlags::BLOB_FLAG));
    }
}

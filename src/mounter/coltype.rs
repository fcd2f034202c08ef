//! TiDB column types as a MySQL binlog master describes them: `FieldType` → [`ColumnDef`]
//! (binlog type, metadata, signedness, nullability, collation) and `TableInfo` → [`TableDef`].
//!
//! | TiDB `Tp` | [`ColumnKind`] | metadata source |
//! |---|---|---|
//! | TINY/SHORT/INT24/LONG/LONGLONG | same width | none; UNSIGNED flag → signedness |
//! | FLOAT / DOUBLE | Float / Double | none |
//! | NEWDECIMAL (and legacy DECIMAL) | NewDecimal | `Flen` (−1/0 → 10), `Decimal` (−1 → 0) |
//! | YEAR, DATE (and NEWDATE) | Year, Date | none |
//! | DURATION / DATETIME / TIMESTAMP | Time2 / DateTime2 / Timestamp2 | fsp = `Decimal` clamped 0..=6 |
//! | STRING (CHAR, BINARY) | String | L = `Flen` × max bytes per char of `Charset` |
//! | VARCHAR (and VAR_STRING) | VarString | same L (at most 65535) |
//! | TINY_BLOB / BLOB / MEDIUM_BLOB / LONG_BLOB | Blob | pack 1 / 2 / 3 / 4, see [`blob_pack_len`] |
//! | JSON, GEOMETRY | Json, Geometry | 4 |
//! | BIT | Bit | `Flen` bits (−1 → 1) |
//! | ENUM / SET | Enum / Set (type STRING) | `Elems`, pack from the member count |
//! | TiDB VECTOR | Blob pack 4, binary | never the VECTOR code 242 |
//!
//! The legacy codes (DECIMAL 0, TIMESTAMP 7, DATETIME 12, TIME 11, NEWDATE 14, VAR_STRING 253,
//! ENUM 247 and SET 248 as top-level types) are never produced: connector-java reads no
//! metadata for VAR_STRING, so one such column would shift the whole TABLE_MAP metadata block
//! (trap 12 of `tests/traps.rs`).
//!
//! # Collations
//!
//! TiDB stores collation names; MySQL clients want ids. [`COLLATIONS`] lists the ids, which are
//! MySQL's own (`SHOW COLLATION`); TiDB's `pkg/parser/charset/charset.go` (`collations`) uses the
//! same numbers. `utf8mb4_0900_bin` (309) is MySQL 8.0's. A name not in the table falls back to
//! the TiDB default collation of its charset ([`default_collation_id`]); TiDB-only collations
//! (`utf8mb4_zh_pinyin_tidb_as_cs`, 2048) therefore show as `utf8mb4_bin`.

use tibinlog_protocol::binlog::{ColumnDef, ColumnKind, TableDef};

use super::error::{MounterError, Result};
use crate::tidb::schema::{mysql, ColumnInfo, FieldType, TableInfo};

/// TiDB collation name → MySQL collation id (lower-case names).
///
/// Sources: MySQL 8.0 `INFORMATION_SCHEMA.COLLATIONS`; TiDB `pkg/parser/charset/charset.go`
/// (`collations`, the same ids); TiDB's supported set is `utf8mb4_bin`, `utf8mb4_general_ci`,
/// `utf8mb4_unicode_ci`, `utf8mb4_0900_ai_ci`, `utf8mb4_0900_bin`, `utf8_bin`, `utf8_general_ci`,
/// `utf8_unicode_ci`, `ascii_bin`, `latin1_bin`, `binary`, `gbk_bin`, `gbk_chinese_ci`,
/// `gb18030_bin`, `gb18030_chinese_ci`; the rest are common MySQL collations of those charsets.
pub const COLLATIONS: &[(&str, u16)] = &[
    ("latin1_swedish_ci", 8),
    ("ascii_general_ci", 11),
    ("gbk_chinese_ci", 28),
    ("utf8_general_ci", 33),
    ("utf8mb4_general_ci", 45),
    ("utf8mb4_bin", 46),
    ("latin1_bin", 47),
    ("latin1_general_ci", 48),
    ("binary", 63),
    ("ascii_bin", 65),
    ("utf8_bin", 83),
    ("gbk_bin", 87),
    ("utf8_unicode_ci", 192),
    ("utf8_general_mysql500_ci", 223),
    ("utf8mb4_unicode_ci", 224),
    ("utf8mb4_unicode_520_ci", 246),
    ("gb18030_chinese_ci", 248),
    ("gb18030_bin", 249),
    ("utf8mb4_0900_ai_ci", 255),
    ("utf8mb4_0900_as_cs", 278),
    ("utf8mb4_0900_bin", 309),
];

/// MySQL collation id of a TiDB collation name (case-insensitive; `utf8mb3_*` = `utf8_*`).
pub fn collation_id(name: &str) -> Option<u16> {
    let lower = name.to_ascii_lowercase();
    let name = match lower.strip_prefix("utf8mb3_") {
        Some(rest) => format!("utf8_{rest}"),
        None => lower,
    };
    COLLATIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, id)| id)
}

/// The collation id of a charset's TiDB default collation (`utf8mb4` → `utf8mb4_bin`).
pub fn default_collation_id(charset: &str) -> u16 {
    match charset.to_ascii_lowercase().as_str() {
        "utf8" | "utf8mb3" => 83,
        "latin1" => 47,
        "ascii" => 65,
        "binary" => 63,
        "gbk" => 28,
        "gb18030" => 248,
        _ => 46,
    }
}

/// Maximum bytes per character (`Maxlen` of TiDB's charset table; unknown charsets: 4).
pub fn charset_max_bytes(charset: &str) -> u32 {
    match charset.to_ascii_lowercase().as_str() {
        "utf8" | "utf8mb3" => 3,
        "latin1" | "ascii" | "binary" => 1,
        "gbk" => 2,
        _ => 4,
    }
}

/// Length prefix width of a TEXT/BLOB column. TINY/MEDIUM/LONG are fixed by the type. A plain
/// `BLOB`/`TEXT` is 2 unless TiDB kept an explicit `TEXT(M)` length below the type's default
/// 65535 whose bytes (M × max bytes per char) need more; it is never narrower than 2, so a
/// value TiDB accepted always fits the prefix.
pub fn blob_pack_len(ft: &FieldType) -> u8 {
    match ft.tp {
        mysql::TYPE_TINY_BLOB => 1,
        mysql::TYPE_MEDIUM_BLOB => 3,
        mysql::TYPE_LONG_BLOB => 4,
        _ if ft.flen > 0 && ft.flen < 65_535 => {
            let bytes = ft.flen as u64 * u64::from(charset_max_bytes(&ft.charset));
            match bytes {
                0..=65_535 => 2,
                65_536..=16_777_215 => 3,
                _ => 4,
            }
        }
        _ => 2,
    }
}

fn max_bytes(ft: &FieldType, limit: u32) -> u32 {
    let chars = if ft.flen < 0 { 1 } else { ft.flen as u64 };
    let bytes = chars * u64::from(charset_max_bytes(&ft.charset));
    bytes.min(u64::from(limit)) as u32
}

fn collation_of(ft: &FieldType) -> u16 {
    if ft.charset.eq_ignore_ascii_case(mysql::BINARY_CHARSET) {
        return 63;
    }
    collation_id(&ft.collate).unwrap_or_else(|| default_collation_id(&ft.charset))
}

/// The binlog shape of a TiDB field type.
pub fn column_kind(ft: &FieldType) -> std::result::Result<ColumnKind, &'static str> {
    use mysql::*;
    Ok(match ft.tp {
        TYPE_TINY => ColumnKind::Tiny,
        TYPE_SHORT => ColumnKind::Short,
        TYPE_INT24 => ColumnKind::Int24,
        TYPE_LONG => ColumnKind::Long,
        TYPE_LONGLONG => ColumnKind::LongLong,
        TYPE_FLOAT => ColumnKind::Float,
        TYPE_DOUBLE => ColumnKind::Double,
        TYPE_NEWDECIMAL | TYPE_DECIMAL => {
            let precision = if ft.flen <= 0 { 10 } else { ft.flen.min(65) };
            let scale = i64::from(ft.decimal.clamp(0, 30)).min(precision);
            ColumnKind::NewDecimal {
                precision: precision as u8,
                scale: scale as u8,
            }
        }
        TYPE_YEAR => ColumnKind::Year,
        TYPE_DATE | TYPE_NEWDATE => ColumnKind::Date,
        TYPE_DURATION => ColumnKind::Time2 { fsp: ft.fsp() },
        TYPE_DATETIME => ColumnKind::DateTime2 { fsp: ft.fsp() },
        TYPE_TIMESTAMP => ColumnKind::Timestamp2 { fsp: ft.fsp() },
        TYPE_STRING => {
            let l = max_bytes(ft, u32::MAX);
            if l > 1023 {
                return Err("CHAR longer than 1023 bytes");
            }
            ColumnKind::String {
                max_bytes: l as u16,
            }
        }
        TYPE_VARCHAR | TYPE_VAR_STRING => ColumnKind::VarString {
            max_bytes: max_bytes(ft, 65_535) as u16,
        },
        TYPE_TINY_BLOB | TYPE_BLOB | TYPE_MEDIUM_BLOB | TYPE_LONG_BLOB => ColumnKind::Blob {
            pack_len: blob_pack_len(ft),
        },
        TYPE_TIDB_VECTOR_FLOAT32 => ColumnKind::Blob { pack_len: 4 },
        TYPE_JSON => ColumnKind::Json,
        TYPE_GEOMETRY => ColumnKind::Geometry { geometry_type: 0 },
        TYPE_BIT => ColumnKind::Bit {
            bits: if ft.flen <= 0 {
                1
            } else {
                ft.flen.min(64) as u8
            },
        },
        TYPE_ENUM => {
            if ft.elems.len() > 65_535 {
                return Err("ENUM with more than 65535 members");
            }
            ColumnKind::enumeration(ft.elems.iter().map(|e| e.as_bytes().to_vec()).collect())
        }
        TYPE_SET => {
            if ft.elems.len() > 64 {
                return Err("SET with more than 64 members");
            }
            ColumnKind::set(ft.elems.iter().map(|e| e.as_bytes().to_vec()).collect())
        }
        _ => return Err("column type has no binlog representation"),
    })
}

/// The binlog column of a TiDB column.
pub fn column_def(table: &str, col: &ColumnInfo) -> Result<ColumnDef> {
    let ft = &col.field_type;
    let kind = column_kind(ft).map_err(|reason| MounterError::UnsupportedColumn {
        table: table.to_owned(),
        column: col.name.o.clone(),
        reason,
    })?;
    let character = kind.is_character() || kind.is_enum_or_set();
    let unsigned = kind.is_numeric() && kind != ColumnKind::Year && ft.is_unsigned();
    let collation = character.then(|| collation_of(ft));
    Ok(ColumnDef {
        name: col.name.o.clone(),
        kind,
        unsigned,
        nullable: !ft.is_not_null(),
        collation,
    })
}

/// The columns a replica sees, in the order [`RowCodec`](crate::tidb::rowcodec::RowCodec)
/// decodes them: public, not hidden, by offset.
pub fn visible_columns(info: &TableInfo) -> Vec<&ColumnInfo> {
    crate::tidb::show_create::visible_columns(info)
}

/// The binlog table of a TiDB table: `table_id` = the logical table id (partitions share their
/// parent's), names as created, primary key positions in the visible column list.
pub fn table_def(schema: &str, info: &TableInfo) -> Result<TableDef> {
    let cols = visible_columns(info);
    let columns = cols
        .iter()
        .map(|c| column_def(&info.name.o, c))
        .collect::<Result<Vec<_>>>()?;
    let pos_of = |id: i64| cols.iter().position(|c| c.id == id).map(|p| p as u16);
    let primary_key = match info.pk_handle_column() {
        Some(c) => pos_of(c.id).into_iter().collect(),
        None => info
            .primary_index()
            .map(|idx| {
                idx.idx_cols
                    .iter()
                    .filter_map(|ic| info.columns.get(ic.offset).and_then(|c| pos_of(c.id)))
                    .collect()
            })
            .unwrap_or_default(),
    };
    Ok(TableDef {
        table_id: info.id.max(0) as u64,
        schema: schema.to_owned(),
        table: info.name.o.clone(),
        columns,
        primary_key,
    })
}

#[cfg(all(test, feature = "sim"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::sim::tidb::types as ty;

    /// Binlog type code, metadata bytes, unsigned, collation id.
    type Golden = (u8, Vec<u8>, bool, Option<u16>);

    fn golden(ft: FieldType) -> Golden {
        let col = ColumnInfo {
            name: crate::tidb::schema::CIStr::new("c"),
            field_type: ft,
            ..ColumnInfo::default()
        };
        let d = column_def("t", &col).unwrap();
        let mut meta = Vec::new();
        d.kind.put_metadata(&mut meta);
        (d.kind.binlog_type(), meta, d.unsigned, d.collation)
    }

    #[test]
    fn golden_types_and_metadata() {
        use mysql::*;
        let utf8mb4_bin = Some(46);
        let cases: Vec<(FieldType, Golden)> = vec![
            (ty::int(TYPE_TINY, false), (1, vec![], false, None)),
            (ty::int(TYPE_TINY, true), (1, vec![], true, None)),
            (ty::int(TYPE_SHORT, false), (2, vec![], false, None)),
            (ty::int(TYPE_INT24, true), (9, vec![], true, None)),
            (ty::int(TYPE_LONG, false), (3, vec![], false, None)),
            (ty::int(TYPE_LONGLONG, true), (8, vec![], true, None)),
            (ty::float(), (4, vec![4], false, None)),
            (ty::double(), (5, vec![8], false, None)),
            (ty::decimal(20, 6), (246, vec![20, 6], false, None)),
            (ty::decimal(65, 30), (246, vec![65, 30], false, None)),
            (ty::year(), (13, vec![], false, None)),
            (ty::date(), (10, vec![], false, None)),
            (ty::time(0), (19, vec![0], false, None)),
            (ty::time(2), (19, vec![2], false, None)),
            (ty::datetime(3), (18, vec![3], false, None)),
            (ty::timestamp(6), (17, vec![6], false, None)),
            (ty::char(12), (254, vec![0xFE, 48], false, utf8mb4_bin)),
            (ty::char(255), (254, vec![0xCE, 0xFC], false, utf8mb4_bin)),
            (ty::binary(6), (254, vec![0xFE, 6], false, Some(63))),
            (ty::varchar(48), (15, vec![0xC0, 0], false, utf8mb4_bin)),
            (
                ty::varchar(16383),
                (15, vec![0xFC, 0xFF], false, utf8mb4_bin),
            ),
            (ty::varbinary(20), (15, vec![20, 0], false, Some(63))),
            (ty::text(), (252, vec![2], false, utf8mb4_bin)),
            (ty::blob(), (252, vec![2], false, Some(63))),
            (ty::longblob(), (252, vec![4], false, Some(63))),
            (ty::json(), (245, vec![4], false, None)),
            (ty::bit(12), (16, vec![4, 1], false, None)),
            (ty::bit(1), (16, vec![1, 0], false, None)),
            (ty::bit(64), (16, vec![0, 8], false, None)),
            (
                ty::enumeration(&["a", "b"]),
                (254, vec![247, 1], false, utf8mb4_bin),
            ),
            (
                ty::set(&["a", "b", "c"]),
                (254, vec![248, 1], false, utf8mb4_bin),
            ),
        ];
        for (ft, want) in cases {
            let what = format!("{ft:?}");
            assert_eq!(golden(ft), want, "{what}");
        }
    }

    #[test]
    fn charsets_and_collations() {
        let mut ft = ty::varchar(10);
        ft.charset = "latin1".into();
        ft.collate = "latin1_bin".into();
        assert_eq!(golden(ft.clone()), (15, vec![10, 0], false, Some(47)));
        ft.charset = "utf8".into();
        ft.collate = "UTF8_GENERAL_CI".into();
        assert_eq!(golden(ft.clone()).1, vec![30, 0]);
        assert_eq!(golden(ft.clone()).3, Some(33));
        ft.charset = "utf8mb4".into();
        ft.collate = "utf8mb4_zh_pinyin_tidb_as_cs".into();
        assert_eq!(
            golden(ft.clone()).3,
            Some(46),
            "TiDB-only collation falls back"
        );
        ft.collate = "utf8mb4_0900_ai_ci".into();
        assert_eq!(golden(ft.clone()).3, Some(255));
        ft.collate = "utf8mb4_unicode_ci".into();
        assert_eq!(golden(ft.clone()).3, Some(224));
        ft.charset = "gbk".into();
        ft.collate = "gbk_bin".into();
        assert_eq!(golden(ft).1, vec![20, 0]);
        assert_eq!(collation_id("utf8mb3_bin"), Some(83));
        assert_eq!(collation_id("ascii_bin"), Some(65));
        assert_eq!(collation_id("nope"), None);
        // TEXT(100) utf8mb4 keeps a 2-byte prefix; MEDIUMTEXT is 3.
        let mut t = ty::text();
        t.flen = 100;
        assert_eq!(blob_pack_len(&t), 2);
        t.flen = 20_000;
        assert_eq!(blob_pack_len(&t), 3);
        t.tp = mysql::TYPE_MEDIUM_BLOB;
        assert_eq!(blob_pack_len(&t), 3);
    }

    #[test]
    fn nullability_unknown_types_and_pk() {
        let col = ColumnInfo {
            name: crate::tidb::schema::CIStr::new("x"),
            field_type: FieldType::new(mysql::TYPE_NULL),
            ..ColumnInfo::default()
        };
        assert!(matches!(
            column_def("t", &col),
            Err(MounterError::UnsupportedColumn { .. })
        ));
        let mut ft = ty::int(mysql::TYPE_LONG, false);
        ft.flag |= mysql::NOT_NULL_FLAG;
        let col = ColumnInfo {
            field_type: ft,
            ..col
        };
        assert!(!column_def("t", &col).unwrap().nullable);
    }
}

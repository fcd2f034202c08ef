//! Random values for a column type and the table templates of the workload. Every choice
//! comes from the caller's [`SimRng`], so a seed fixes every value.

use tibinlog_protocol::value::{Date, DateTime, Json, Time, Value};

use crate::sim::tidb::types::{self as ty, ColumnDef, IndexDef, PartitionDef, TableDef};
use crate::sim::ts::SimRng;
use crate::tidb::schema::{mysql, FieldType};

const CHARS: &[char] = &[
    'a', 'b', 'c', 'x', 'y', 'z', 'Q', 'R', '0', '7', '9', '_', '-', 'é', 'ß', '中', '文', '😀',
];

fn int_in(rng: &mut SimRng, lo: i64, hi: i64) -> i64 {
    let span = (hi.wrapping_sub(lo) as u64).wrapping_add(1);
    if span == 0 {
        return rng.next_u64() as i64;
    }
    lo.wrapping_add((rng.next_u64() % span) as i64)
}

fn signed_range(tp: u8) -> (i64, i64) {
    match tp {
        mysql::TYPE_TINY => (i8::MIN.into(), i8::MAX.into()),
        mysql::TYPE_SHORT => (i16::MIN.into(), i16::MAX.into()),
        mysql::TYPE_INT24 => (-(1 << 23), (1 << 23) - 1),
        mysql::TYPE_LONG => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    }
}

fn text(rng: &mut SimRng, max_chars: usize) -> Vec<u8> {
    let n = rng.below(max_chars as u64 + 1) as usize;
    let mut s = String::with_capacity(n);
    for _ in 0..n {
        s.push(CHARS[rng.below(CHARS.len() as u64) as usize]);
    }
    s.into_bytes()
}

fn bytes(rng: &mut SimRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

fn micros(rng: &mut SimRng, fsp: u8) -> u32 {
    let unit = 10u32.pow(6 - u32::from(fsp.min(6)));
    (rng.below(1_000_000) as u32) / unit * unit
}

fn date(rng: &mut SimRng) -> Date {
    Date {
        year: 1000 + rng.below(9000) as u16,
        month: 1 + rng.below(12) as u8,
        day: 1 + rng.below(28) as u8,
    }
}

fn json(rng: &mut SimRng, depth: u32) -> Json {
    match rng.below(if depth > 1 { 5 } else { 7 }) {
        0 => Json::Null,
        1 => Json::Bool(rng.chance(0.5)),
        2 => Json::Int(int_in(rng, -1_000_000, 1_000_000)),
        3 => Json::Double(int_in(rng, -1000, 1000) as f64 + 0.5),
        4 => Json::String(String::from_utf8(text(rng, 12)).unwrap_or_default()),
        5 => Json::Array((0..rng.below(4)).map(|_| json(rng, depth + 1)).collect()),
        _ => {
            let n = rng.below(4) as usize;
            // sorted, distinct keys: the order binary JSON stores them in
            Json::Object(
                (0..n)
                    .map(|i| (format!("k{i}"), json(rng, depth + 1)))
                    .collect(),
            )
        }
    }
}

/// A random value valid for a column of type `ft` (NULL sometimes when `nullable`).
pub fn value(rng: &mut SimRng, ft: &FieldType, nullable: bool) -> Value {
    if nullable && rng.chance(0.05) {
        return Value::Null;
    }
    let fsp = ft.fsp();
    match ft.tp {
        mysql::TYPE_TINY
        | mysql::TYPE_SHORT
        | mysql::TYPE_INT24
        | mysql::TYPE_LONG
        | mysql::TYPE_LONGLONG => {
            let (lo, hi) = signed_range(ft.tp);
            let edge = rng.chance(0.1);
            if ft.is_unsigned() {
                let max = if ft.tp == mysql::TYPE_LONGLONG {
                    u64::MAX
                } else {
                    (hi as u64) * 2 + 1
                };
                Value::UInt(if edge { max } else { rng.next_u64() % max })
            } else if edge {
                Value::Int(if rng.chance(0.5) { lo } else { hi })
            } else {
                Value::Int(int_in(rng, lo, hi))
            }
        }
        mysql::TYPE_FLOAT => Value::Float(int_in(rng, -1_000_000, 1_000_000) as f32 / 8.0),
        mysql::TYPE_DOUBLE => Value::Double(int_in(rng, -1 << 40, 1 << 40) as f64 / 1024.0),
        mysql::TYPE_NEWDECIMAL => {
            let scale = ft.decimal.clamp(0, 30) as u32;
            let int_digits = (ft.flen as u32).saturating_sub(scale).min(18);
            let ip = rng.below(10u64.pow(int_digits));
            let neg = rng.chance(0.3) && ip > 0;
            let mut s = format!("{}{ip}", if neg { "-" } else { "" });
            if scale > 0 {
                let fp = rng.below(10u64.pow(scale.min(18)));
                s.push_str(&format!(".{fp:0w$}", w = scale.min(18) as usize));
                s.extend(std::iter::repeat_n('0', scale.saturating_sub(18) as usize));
            }
            Value::Decimal(s)
        }
        mysql::TYPE_STRING if ft.is_binary_string() => Value::Bytes(bytes(rng, ft.flen as usize)),
        mysql::TYPE_VARCHAR | mysql::TYPE_VAR_STRING if ft.is_binary_string() => {
            let n = rng.below(ft.flen as u64 + 1) as usize;
            Value::Bytes(bytes(rng, n))
        }
        mysql::TYPE_STRING | mysql::TYPE_VARCHAR | mysql::TYPE_VAR_STRING => {
            Value::Bytes(text(rng, ft.flen.clamp(0, 64) as usize))
        }
        mysql::TYPE_BLOB
        | mysql::TYPE_LONG_BLOB
        | mysql::TYPE_MEDIUM_BLOB
        | mysql::TYPE_TINY_BLOB => {
            let n = if rng.chance(0.05) { 2048 } else { 200 };
            if ft.is_binary_string() {
                let n = rng.below(n + 1) as usize;
                Value::Bytes(bytes(rng, n))
            } else {
                Value::Bytes(text(rng, n as usize))
            }
        }
        mysql::TYPE_DATE => Value::Date(date(rng)),
        mysql::TYPE_DATETIME => Value::DateTime(DateTime {
            date: date(rng),
            hour: rng.below(24) as u8,
            minute: rng.below(60) as u8,
            second: rng.below(60) as u8,
            micros: micros(rng, fsp),
        }),
        mysql::TYPE_TIMESTAMP => Value::Timestamp {
            seconds: 1 + rng.below(2_147_483_646) as u32,
            micros: micros(rng, fsp),
        },
        mysql::TYPE_DURATION => Value::Time(Time {
            negative: rng.chance(0.2),
            hours: rng.below(838) as u16,
            minutes: rng.below(60) as u8,
            seconds: rng.below(60) as u8,
            micros: micros(rng, fsp),
        }),
        mysql::TYPE_YEAR => Value::Year(1901 + rng.below(255) as u16),
        mysql::TYPE_ENUM => Value::Enum(1 + rng.below(ft.elems.len().max(1) as u64) as u16),
        mysql::TYPE_SET => Value::Set(rng.below(1 << ft.elems.len().min(63))),
        mysql::TYPE_BIT => {
            let bits = ft.flen.clamp(1, 64) as u32;
            Value::Bit(if bits == 64 {
                rng.next_u64()
            } else {
                rng.next_u64() & ((1 << bits) - 1)
            })
        }
        mysql::TYPE_JSON => Value::Json(json(rng, 0)),
        _ => Value::Null,
    }
}

fn c(name: &str, ft: FieldType) -> ColumnDef {
    ColumnDef::new(name, ft)
}

/// Columns covering every type the workload exercises.
pub fn all_type_columns() -> Vec<ColumnDef> {
    use mysql::*;
    vec![
        c("c_tinyint", ty::int(TYPE_TINY, false)),
        c("c_tinyint_u", ty::int(TYPE_TINY, true)),
        c("c_smallint", ty::int(TYPE_SHORT, false)),
        c("c_smallint_u", ty::int(TYPE_SHORT, true)),
        c("c_mediumint", ty::int(TYPE_INT24, false)),
        c("c_mediumint_u", ty::int(TYPE_INT24, true)),
        c("c_int", ty::int(TYPE_LONG, false)).not_null(),
        c("c_int_u", ty::int(TYPE_LONG, true)),
        c("c_bigint", ty::int(TYPE_LONGLONG, false)),
        c("c_bigint_u", ty::int(TYPE_LONGLONG, true)),
        c("c_float", ty::float()),
        c("c_double", ty::double()),
        c("c_decimal", ty::decimal(20, 6)),
        c("c_decimal0", ty::decimal(10, 0)),
        c("c_char", ty::char(12)),
        c("c_varchar", ty::varchar(48)),
        c("c_text", ty::text()),
        c("c_blob", ty::blob()),
        c("c_binary", ty::binary(6)),
        c("c_varbinary", ty::varbinary(20)),
        c("c_date", ty::date()),
        c("c_datetime", ty::datetime(0)),
        c("c_datetime3", ty::datetime(3)),
        c("c_timestamp", ty::timestamp(0)),
        c("c_timestamp6", ty::timestamp(6)),
        c("c_time", ty::time(0)),
        c("c_time2", ty::time(2)),
        c("c_year", ty::year()),
        c(
            "c_enum",
            ty::enumeration(&["red", "green", "blue", "x-large"]),
        ),
        c("c_set", ty::set(&["a", "b", "c", "d", "e"])),
        c("c_bit", ty::bit(12)),
        c("c_bit1", ty::bit(1)),
        c("c_json", ty::json()),
    ]
}

/// The tables created at setup: every handle kind, partitions, secondary indexes.
pub fn initial_tables() -> Vec<TableDef> {
    use mysql::*;
    let mut all = vec![c("id", ty::int(TYPE_LONGLONG, false)).not_null()];
    all.extend(all_type_columns());
    let small = |pk: Vec<ColumnDef>| {
        let mut v = pk;
        v.push(c("v_int", ty::int(TYPE_LONG, false)));
        v.push(c("v_str", ty::varchar(32)).default(Value::Bytes(b"none".to_vec())));
        v.push(c("v_dec", ty::decimal(12, 3)));
        v.push(c("v_dt", ty::datetime(6)));
        v.push(c("v_json", ty::json()));
        v
    };
    vec![
        TableDef {
            name: "t_all".into(),
            columns: all,
            primary_key: vec!["id".into()],
            clustered: true,
            indexes: vec![
                IndexDef::new("i_int", &["c_int"], false),
                IndexDef::new("i_vc_date", &["c_varchar", "c_date"], false),
            ],
            partition: None,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
        TableDef {
            name: "t_common".into(),
            columns: small(vec![
                c("k", ty::varchar(32)).not_null(),
                c("n", ty::int(TYPE_LONG, false)).not_null(),
            ]),
            primary_key: vec!["k".into(), "n".into()],
            clustered: true,
            indexes: vec![IndexDef::new("i_v", &["v_int"], false)],
            partition: None,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
        TableDef {
            name: "t_rowid".into(),
            columns: small(vec![c("id", ty::int(TYPE_LONG, false)).not_null()]),
            primary_key: vec!["id".into()],
            clustered: false,
            indexes: vec![IndexDef::new("i_str", &["v_str"], false)],
            partition: None,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
        TableDef {
            name: "t_range".into(),
            columns: small(vec![c("id", ty::int(TYPE_LONGLONG, false)).not_null()]),
            primary_key: vec!["id".into()],
            clustered: true,
            indexes: Vec::new(),
            partition: Some(PartitionDef::Range {
                column: "id".into(),
                bounds: vec![Some(200), Some(1000), None],
            }),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
        TableDef {
            name: "t_hash".into(),
            columns: small(vec![c("id", ty::int(TYPE_LONGLONG, true)).not_null()]),
            primary_key: vec!["id".into()],
            clustered: true,
            indexes: vec![IndexDef::new("i_dt", &["v_dt"], false)],
            partition: Some(PartitionDef::Hash {
                column: "id".into(),
                count: 4,
            }),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
    ]
}

/// A table created by a DDL during the run.
pub fn extra_table(name: &str) -> TableDef {
    TableDef {
        name: name.into(),
        columns: vec![
            c("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
            c("a", ty::varchar(16)),
            c("b", ty::double()),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// A range-partitioned table and a plain one of the same definition (ids equal column for
/// column), made in one `CREATE TABLES` for EXCHANGE PARTITION.
pub fn exchange_pair(pt: &str, nt: &str) -> (TableDef, TableDef) {
    let mut p = extra_table(pt);
    p.partition = Some(PartitionDef::Range {
        column: "id".into(),
        bounds: vec![Some(60), Some(600), None],
    });
    (p, extra_table(nt))
}

/// A column added by a DDL during the run (with a default half of the time).
pub fn added_column(rng: &mut SimRng, name: &str) -> ColumnDef {
    let (ft, default) = match rng.below(4) {
        0 => (
            ty::int(mysql::TYPE_LONG, false),
            Value::Int(int_in(rng, -50, 50)),
        ),
        1 => (ty::varchar(20), Value::Bytes(b"dflt".to_vec())),
        2 => (ty::decimal(8, 2), Value::Decimal("12.50".into())),
        _ => (
            ty::datetime(0),
            Value::DateTime(DateTime {
                date: Date {
                    year: 2020,
                    month: 2,
                    day: 29,
                },
                hour: 12,
                minute: 0,
                second: 0,
                micros: 0,
            }),
        ),
    };
    let col = ColumnDef::new(name, ft);
    if rng.chance(0.5) {
        col.default(default)
    } else {
        col
    }
}

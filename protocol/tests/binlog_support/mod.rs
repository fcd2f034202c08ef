//! Helpers shared by the binlog integration tests: a table with every column type, sample rows,
//! and the comparison of our values with what mysql_common's binlog parser decodes.
#![allow(dead_code, clippy::unwrap_used)]

use mysql_common::binlog::jsonb::{JsonContainer, JsonDom, JsonNumber, JsonScalar};
use mysql_common::binlog::row::BinlogRow;
use mysql_common::binlog::value::BinlogValue;
use mysql_common::value::Value as MyValue;
use tibinlog_protocol::binlog::decimal;
use tibinlog_protocol::binlog::{ColumnDef, ColumnKind, TableDef};
use tibinlog_protocol::value::{Date, DateTime, Json, Time, Value};

pub fn col(name: &str, kind: ColumnKind) -> ColumnDef {
    ColumnDef::new(name, kind)
}

/// One column of every kind, signed and unsigned integers, every fsp, short and long strings.
pub fn all_types_table(table_id: u64) -> TableDef {
    use ColumnKind as K;
    let members = |n: usize| {
        (0..n)
            .map(|i| format!("m{i}").into_bytes())
            .collect::<Vec<_>>()
    };
    let mut columns = vec![
        col("id", K::LongLong).not_null(),
        col("t", K::Tiny),
        col("tu", K::Tiny).unsigned(),
        col("s", K::Short),
        col("su", K::Short).unsigned(),
        col("m", K::Int24),
        col("mu", K::Int24).unsigned(),
        col("i", K::Long),
        col("iu", K::Long).unsigned(),
        col("b", K::LongLong),
        col("bu", K::LongLong).unsigned(),
        col("f", K::Float),
        col("d", K::Double),
        col(
            "dec1",
            K::NewDecimal {
                precision: 10,
                scale: 2,
            },
        ),
        col(
            "dec2",
            K::NewDecimal {
                precision: 65,
                scale: 30,
            },
        ),
        col(
            "dec3",
            K::NewDecimal {
                precision: 5,
                scale: 0,
            },
        )
        .unsigned(),
        col("y", K::Year),
        col("dt", K::Date),
    ];
    for fsp in 0..=6u8 {
        columns.push(col(&format!("tm{fsp}"), K::Time2 { fsp }));
        columns.push(col(&format!("dtm{fsp}"), K::DateTime2 { fsp }));
        columns.push(col(&format!("ts{fsp}"), K::Timestamp2 { fsp }));
    }
    columns.extend([
        col("c", K::String { max_bytes: 40 }).collation(255),
        col("clong", K::String { max_bytes: 1020 }).collation(255),
        col("bin", K::String { max_bytes: 8 }),
        col("vc", K::VarString { max_bytes: 200 }).collation(45),
        col("vclong", K::VarString { max_bytes: 4000 }).collation(255),
        col("tb", K::Blob { pack_len: 1 }),
        col("bl", K::Blob { pack_len: 2 }),
        col("mb", K::Blob { pack_len: 3 }).collation(255),
        col("lb", K::Blob { pack_len: 4 }),
        col("j", K::Json),
        col("bit1", K::Bit { bits: 1 }),
        col("bit12", K::Bit { bits: 12 }),
        col("bit64", K::Bit { bits: 64 }),
        col("e", ColumnKind::enumeration(members(3))).collation(255),
        col("e2", ColumnKind::enumeration(members(300))).collation(255),
        col("st", ColumnKind::set(members(5))).collation(255),
        col("st64", ColumnKind::set(members(64))).collation(8),
        col("g", K::Geometry { geometry_type: 0 }),
    ]);
    TableDef {
        table_id,
        schema: "db1".into(),
        table: "all_types".into(),
        columns,
        primary_key: vec![0],
    }
}

fn date(year: u16, month: u8, day: u8) -> Date {
    Date { year, month, day }
}

fn dtm(d: Date, hour: u8, minute: u8, second: u8, micros: u32) -> DateTime {
    DateTime {
        date: d,
        hour,
        minute,
        second,
        micros,
    }
}

fn tm(negative: bool, hours: u16, minutes: u8, seconds: u8, micros: u32) -> Time {
    Time {
        negative,
        hours,
        minutes,
        seconds,
        micros,
    }
}

/// Micros valid for `fsp` (already truncated as MySQL stores them).
fn micros_for(fsp: u8, m: u32) -> u32 {
    let d = 10u32.pow(6 - u32::from(fsp));
    m - m % d
}

pub fn sample_json() -> Json {
    Json::Object(vec![
        ("name".into(), Json::String("tibinlog".into())),
        ("n".into(), Json::Int(-5)),
        ("big".into(), Json::UInt(u64::MAX)),
        ("i32".into(), Json::Int(100_000)),
        ("pi".into(), Json::Double(3.25)),
        ("ok".into(), Json::Bool(true)),
        ("nothing".into(), Json::Null),
        (
            "arr".into(),
            Json::Array(vec![
                Json::Int(1),
                Json::String("two".into()),
                Json::Array(vec![]),
            ]),
        ),
        (
            "dec".into(),
            Json::Decimal {
                text: "-12.50".into(),
                precision: 6,
                scale: 2,
            },
        ),
        ("d".into(), Json::Date(date(2024, 2, 29))),
        (
            "dt".into(),
            Json::DateTime(dtm(date(1999, 12, 31), 23, 59, 59, 999_999)),
        ),
        ("t".into(), Json::Time(tm(true, 838, 59, 59, 0))),
        (
            "obj".into(),
            Json::Object(vec![("k".into(), Json::Object(vec![]))]),
        ),
    ])
}

/// Rows exercising minimum, maximum, zero, empty and NULL values.
pub fn sample_rows(table: &TableDef) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for variant in 0..4usize {
        let mut row = Vec::new();
        for (ci, c) in table.columns.iter().enumerate() {
            row.push(sample_value(ci, c, variant));
        }
        rows.push(row);
    }
    rows
}

fn sample_value(ci: usize, c: &ColumnDef, variant: usize) -> Value {
    use ColumnKind as K;
    if ci == 0 {
        return Value::Int(variant as i64 + 1);
    }
    if variant == 3 {
        return Value::Null;
    }
    let big = variant == 1;
    let zero = variant == 2;
    let int = |bits: u32| -> Value {
        if c.unsigned {
            Value::UInt(if zero {
                0
            } else if big {
                u64::MAX >> (64 - bits)
            } else {
                1
            })
        } else {
            Value::Int(if zero {
                0
            } else if big {
                i64::MAX >> (64 - bits)
            } else {
                i64::MIN >> (64 - bits)
            })
        }
    };
    match &c.kind {
        K::Tiny => int(8),
        K::Short => int(16),
        K::Int24 => int(24),
        K::Long => int(32),
        K::LongLong => int(64),
        K::Float => Value::Float([1.5e-38, f32::MAX, 0.0][variant]),
        K::Double => Value::Double([-f64::MIN_POSITIVE, f64::MAX, -0.0][variant]),
        K::NewDecimal { precision, scale } => {
            let (p, s) = (*precision as usize, *scale as usize);
            let nines = |n: usize| "9".repeat(n);
            let text = match variant {
                0 if !c.unsigned => format!(
                    "-{}{}{}",
                    nines(p - s),
                    if s > 0 { "." } else { "" },
                    nines(s)
                ),
                1 => format!(
                    "{}{}{}",
                    nines(p - s),
                    if s > 0 { "." } else { "" },
                    nines(s)
                ),
                _ => "0".to_string(),
            };
            Value::Decimal(text)
        }
        K::Year => Value::Year([1901, 2155, 0][variant]),
        K::Date => Value::Date([date(1000, 1, 1), date(9999, 12, 31), date(0, 0, 0)][variant]),
        // mysql_common 0.38 underflows (debug panic) on negative TIME(1|2) values with a
        // fraction, so those are covered by golden bytes instead.
        K::Time2 { fsp } => Value::Time(
            [
                tm(true, 838, 59, 59, 0),
                tm(false, 838, 59, 59, 0),
                tm(!matches!(fsp, 1 | 2), 1, 2, 3, micros_for(*fsp, 456_789)),
            ][variant],
        ),
        K::DateTime2 { fsp } => Value::DateTime(
            [
                dtm(date(1000, 1, 1), 0, 0, 0, 0),
                dtm(date(9999, 12, 31), 23, 59, 59, micros_for(*fsp, 999_999)),
                dtm(date(0, 0, 0), 0, 0, 0, 0),
            ][variant],
        ),
        K::Timestamp2 { fsp } => Value::Timestamp {
            seconds: [1, 2_147_483_647, 0][variant],
            micros: [0, micros_for(*fsp, 999_999), 0][variant],
        },
        K::String { max_bytes } => Value::Bytes(
            [
                b"a".to_vec(),
                vec![b'z'; usize::from(*max_bytes)],
                Vec::new(),
            ][variant]
                .clone(),
        ),
        K::VarString { max_bytes } => Value::Bytes(
            [
                b"hello".to_vec(),
                vec![0xC3; usize::from(*max_bytes)],
                Vec::new(),
            ][variant]
                .clone(),
        ),
        K::Blob { pack_len } => {
            let max = match pack_len {
                1 => 255,
                2 => 65_535,
                _ => 70_000,
            };
            Value::Bytes([b"x".to_vec(), vec![7u8; max], Vec::new()][variant].clone())
        }
        K::Json => Value::Json(
            [
                sample_json(),
                Json::Array(vec![Json::String("x".repeat(70_000))]),
                Json::Null,
            ][variant]
                .clone(),
        ),
        K::Bit { bits } => Value::Bit(
            [
                1,
                if *bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                },
                0,
            ][variant],
        ),
        K::Enum { members, .. } => Value::Enum([1, members.len() as u16, 0][variant]),
        K::Set { members, .. } => Value::Set(
            [
                1,
                if members.len() == 64 {
                    u64::MAX
                } else {
                    (1u64 << members.len()) - 1
                },
                0,
            ][variant],
        ),
        K::Geometry { .. } => Value::Bytes(
            [
                hex::decode("000000000101000000000000000000F03F000000000000F03F").unwrap(),
                Vec::new(),
                vec![0; 25],
            ][variant]
                .clone(),
        ),
    }
}

/// What mysql_common decodes for our `v` in column `c`.
pub fn expected(c: &ColumnDef, v: &Value) -> MyValue {
    use ColumnKind as K;
    match (&c.kind, v) {
        (_, Value::Null) => MyValue::NULL,
        // mysql_common 0.38 reads signed MEDIUMINT without sign extension (`eat_i24_le`), so a
        // negative value comes back as its 24-bit two's complement; our bytes are MySQL's.
        (K::Int24, Value::Int(x)) => MyValue::Int(*x & 0xFF_FFFF),
        (K::Int24, Value::UInt(x)) => MyValue::Int(*x as i64),
        (_, Value::Int(x)) => MyValue::Int(*x),
        // mysql_common decodes unsigned values as Int, except BIGINT above i64::MAX as UInt.
        (_, Value::UInt(x)) => i64::try_from(*x).map_or(MyValue::UInt(*x), MyValue::Int),
        (_, Value::Float(x)) => MyValue::Float(*x),
        (_, Value::Double(x)) => MyValue::Double(*x),
        (K::NewDecimal { precision, scale }, Value::Decimal(t)) => {
            let mut b = Vec::new();
            decimal::encode_into(t, *precision, *scale, &mut b).unwrap();
            MyValue::Bytes(
                decimal::decode(&b, *precision, *scale)
                    .unwrap()
                    .0
                    .into_bytes(),
            )
        }
        (_, Value::Year(y)) => MyValue::Bytes(
            (1900 + if *y == 0 { 0 } else { y - 1900 })
                .to_string()
                .into_bytes(),
        ),
        (_, Value::Date(d)) => MyValue::Date(d.year, d.month, d.day, 0, 0, 0, 0),
        (_, Value::DateTime(d)) => MyValue::Date(
            d.date.year,
            d.date.month,
            d.date.day,
            d.hour,
            d.minute,
            d.second,
            d.micros,
        ),
        (_, Value::Timestamp { seconds, micros }) => MyValue::Bytes(
            if *micros == 0 {
                seconds.to_string()
            } else {
                format!("{seconds}.{micros:06}")
            }
            .into_bytes(),
        ),
        (_, Value::Time(t)) => MyValue::Time(
            t.negative && (t.hours, t.minutes, t.seconds, t.micros) != (0, 0, 0, 0),
            u32::from(t.hours) / 24,
            (t.hours % 24) as u8,
            t.minutes,
            t.seconds,
            t.micros,
        ),
        (K::String { .. }, Value::Bytes(b)) if c.collation_id() != 63 => {
            let n = b.iter().rposition(|&x| x != b' ').map_or(0, |p| p + 1);
            MyValue::Bytes(b[..n].to_vec())
        }
        (_, Value::Bytes(b)) => MyValue::Bytes(b.clone()),
        (K::Bit { bits }, Value::Bit(x)) => {
            let n = usize::from(*bits).div_ceil(8);
            MyValue::Bytes(x.to_be_bytes()[8 - n..].to_vec())
        }
        (_, Value::Enum(x)) => MyValue::Int(i64::from(*x)),
        (K::Set { pack, .. }, Value::Set(x)) => {
            MyValue::Bytes(x.to_le_bytes()[..usize::from(*pack)].to_vec())
        }
        (k, v) => panic!("no expectation for {v:?} in {k:?}"),
    }
}

/// True when mysql_common's JSON DOM equals our document (keys compared as sets, since both
/// sides are maps; duplicates in ours keep the last value).
pub fn json_matches(ours: &Json, dom: &JsonDom) -> bool {
    match (ours, dom) {
        (Json::Null, JsonDom::Scalar(JsonScalar::Null)) => true,
        (Json::Bool(a), JsonDom::Scalar(JsonScalar::Boolean(b))) => a == b,
        (Json::Int(a), JsonDom::Scalar(JsonScalar::Number(JsonNumber::Int(b)))) => a == b,
        (Json::UInt(a), JsonDom::Scalar(JsonScalar::Number(JsonNumber::Uint(b)))) => a == b,
        (Json::Double(a), JsonDom::Scalar(JsonScalar::Number(JsonNumber::Double(b)))) => {
            a.to_bits() == b.to_bits()
        }
        (Json::String(a), JsonDom::Scalar(JsonScalar::String(b))) => a == b,
        (
            Json::Decimal {
                text,
                precision,
                scale,
            },
            JsonDom::Scalar(JsonScalar::Number(JsonNumber::Decimal(d))),
        ) => {
            let mut b = Vec::new();
            decimal::encode_into(text, *precision, *scale, &mut b).unwrap();
            decimal::decode(&b, *precision, *scale).unwrap().0 == d.to_string()
        }
        (Json::Date(a), JsonDom::Scalar(JsonScalar::DateTime(t))) => {
            (u32::from(a.year), u32::from(a.month), u32::from(a.day)) == (t.year, t.month, t.day)
        }
        (Json::DateTime(a) | Json::Timestamp(a), JsonDom::Scalar(JsonScalar::DateTime(t))) => {
            (
                u32::from(a.date.year),
                u32::from(a.date.month),
                u32::from(a.date.day),
            ) == (t.year, t.month, t.day)
                && (
                    u32::from(a.hour),
                    u32::from(a.minute),
                    u32::from(a.second),
                    a.micros,
                ) == (t.hour, t.minute, t.second, t.second_part)
        }
        (Json::Time(a), JsonDom::Scalar(JsonScalar::DateTime(t))) => {
            a.negative == t.neg
                && (
                    u32::from(a.hours),
                    u32::from(a.minutes),
                    u32::from(a.seconds),
                    a.micros,
                ) == (t.hour, t.minute, t.second, t.second_part)
        }
        (Json::Array(a), JsonDom::Container(JsonContainer::Array(b))) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| json_matches(x, y))
        }
        (Json::Object(a), JsonDom::Container(JsonContainer::Object(b))) => {
            let mut last = std::collections::BTreeMap::new();
            for (k, v) in a {
                last.insert(k.clone(), v);
            }
            last.len() == b.len()
                && last
                    .iter()
                    .all(|(k, v)| b.get(k).is_some_and(|d| json_matches(v, d)))
        }
        _ => false,
    }
}

/// Asserts that the row mysql_common decoded equals ours.
pub fn assert_row(table: &TableDef, ours: &[Value], theirs: &BinlogRow) {
    assert_eq!(theirs.len(), table.columns.len());
    for (i, (c, v)) in table.columns.iter().zip(ours).enumerate() {
        let got = theirs
            .as_ref(i)
            .unwrap_or_else(|| panic!("column {i} missing"));
        match (v, got) {
            (Value::Json(j), BinlogValue::Jsonb(b)) => {
                let dom = b.clone().parse().unwrap();
                assert!(
                    json_matches(j, &dom),
                    "column {} ({}): {j:?} vs {dom:?}",
                    i,
                    c.name
                );
            }
            (_, BinlogValue::Value(x)) => {
                let want = expected(c, v);
                let same = match (&want, x) {
                    (MyValue::Float(a), MyValue::Float(b)) => a.to_bits() == b.to_bits(),
                    (MyValue::Double(a), MyValue::Double(b)) => a.to_bits() == b.to_bits(),
                    _ => &want == x,
                };
                assert!(
                    same,
                    "column {} ({}): ours {v:?} -> want {want:?}, got {x:?}",
                    i, c.name
                );
            }
            (_, other) => panic!("column {i}: unexpected {other:?} for {v:?}"),
        }
    }
}

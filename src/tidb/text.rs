//! A `Value` as the text MySQL's `SELECT` shows for a column of a given type (the text
//! protocol form), used by the admin SQL surface and by tests that compare with a real MySQL.
//!
//! Choices where MySQL's client and server differ or where text is not obvious:
//!
//! * NULL renders as `None`.
//! * TIMESTAMP renders in UTC (the server's `time_zone` is taken to be `+00:00`).
//! * DATETIME/TIMESTAMP/TIME show exactly the column's fsp digits (`2018-01-19 03:14:07.123`).
//! * FLOAT shows the shortest text that reads back as the same f32, DOUBLE the shortest for
//!   the f64 (MySQL 8 behaviour), switching to exponent form (`1e20`, `1.5e-7`) outside
//!   `[1e-4, 1e15)`; FLOAT(M,D)/DOUBLE(M,D) columns show exactly D decimals.
//! * Strings and blobs: the bytes as UTF-8 when they are valid UTF-8, else `0x` + upper-case
//!   hex of the bytes (what `mysql --binary-as-hex` prints).
//! * BIT(n): `0x` + upper-case hex of the `(n+7)/8` big-endian bytes (the raw bytes are rarely
//!   printable).
//! * ENUM/SET: member names (`''` for the invalid ENUM index 0), SET members joined by `,`.
//! * YEAR: 4 digits (`0000` for the zero year). ZEROFILL integers are left-padded to the
//!   display width.

use tibinlog_protocol::value::Value;

use super::schema::{mysql, FieldType};
use super::{decimal, json, time};

/// Renders `v` as MySQL shows it for a column of type `ft`; `None` for NULL.
pub fn render(v: &Value, ft: &FieldType) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => zerofill(i.to_string(), ft),
        Value::UInt(u) => zerofill(u.to_string(), ft),
        Value::Float(f) => float_text(f64::from(*f), ft, true),
        Value::Double(f) => float_text(*f, ft, false),
        Value::Decimal(t) => {
            if ft.decimal >= 0 {
                decimal::rescale(t, ft.decimal.clamp(0, 30) as u8).unwrap_or_else(|_| t.clone())
            } else {
                t.clone()
            }
        }
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => hex_upper(b),
        },
        Value::Date(d) => time::format_date(d),
        Value::DateTime(dt) => time::format_datetime(dt, ft.fsp()),
        Value::Timestamp { seconds, micros } => {
            time::format_datetime(&time::timestamp_to_datetime(*seconds, *micros), ft.fsp())
        }
        Value::Time(t) => time::format_duration(t, ft.fsp()),
        Value::Year(y) => format!("{y:04}"),
        Value::Enum(i) => {
            if *i == 0 {
                String::new()
            } else {
                ft.elems
                    .get(usize::from(*i) - 1)
                    .cloned()
                    .unwrap_or_else(|| i.to_string())
            }
        }
        Value::Set(mask) => ft
            .elems
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 64 && mask & (1u64 << i) != 0)
            .map(|(_, e)| e.as_str())
            .collect::<Vec<_>>()
            .join(","),
        Value::Bit(b) => {
            let width = if ft.flen > 0 {
                ((ft.flen + 7) / 8).clamp(1, 8) as usize
            } else {
                8
            };
            hex_upper(&b.to_be_bytes()[8 - width..])
        }
        Value::Json(j) => json::to_text(j),
    })
}

fn hex_upper(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + b.len() * 2);
    s.push_str("0x");
    s.push_str(&hex::encode_upper(b));
    s
}

fn zerofill(s: String, ft: &FieldType) -> String {
    if ft.flag & mysql::ZEROFILL_FLAG != 0 && ft.flen > 0 && (s.len() as i64) < ft.flen {
        let mut p = "0".repeat(ft.flen as usize - s.len());
        p.push_str(&s);
        p
    } else {
        s
    }
}

fn float_text(f: f64, ft: &FieldType, is_float: bool) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    // FLOAT(M,D) / DOUBLE(M,D): fixed decimals. 31 is MySQL's "not fixed" marker.
    if ft.decimal >= 0 && ft.decimal < 31 && ft.flen > 0 {
        return format!("{:.*}", ft.decimal as usize, f);
    }
    let abs = f.abs();
    let exp_form = abs != 0.0 && !(1e-4..1e15).contains(&abs);
    match (is_float, exp_form) {
        (true, false) => (f as f32).to_string(),
        (true, true) => format!("{:e}", f as f32),
        (false, false) => f.to_string(),
        (false, true) => format!("{f:e}"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tibinlog_protocol::value::{Date, DateTime, Json, Time};

    fn ft(tp: u8, decimal: i32) -> FieldType {
        FieldType {
            decimal,
            ..FieldType::new(tp)
        }
    }

    #[test]
    fn renders_like_mysql() {
        use mysql::*;
        let dt = DateTime {
            date: Date {
                year: 2018,
                month: 1,
                day: 19,
            },
            hour: 3,
            minute: 14,
            second: 7,
            micros: 123_456,
        };
        assert_eq!(render(&Value::Null, &ft(TYPE_LONG, 0)), None);
        assert_eq!(
            render(&Value::DateTime(dt), &ft(TYPE_DATETIME, 3)).unwrap(),
            "2018-01-19 03:14:07.123"
        );
        assert_eq!(
            render(
                &Value::Timestamp {
                    seconds: 2_147_483_647,
                    micros: 0
                },
                &ft(TYPE_TIMESTAMP, 0)
            )
            .unwrap(),
            "2038-01-19 03:14:07"
        );
        let t = Time {
            negative: true,
            hours: 838,
            minutes: 59,
            seconds: 59,
            micros: 0,
        };
        assert_eq!(
            render(&Value::Time(t), &ft(TYPE_DURATION, 0)).unwrap(),
            "-838:59:59"
        );
        assert_eq!(
            render(&Value::Decimal("1.5".into()), &ft(TYPE_NEWDECIMAL, 3)).unwrap(),
            "1.500"
        );
        assert_eq!(
            render(&Value::Float(1.1), &ft(TYPE_FLOAT, -1)).unwrap(),
            "1.1"
        );
        assert_eq!(
            render(&Value::Float(1e20), &ft(TYPE_FLOAT, -1)).unwrap(),
            "1e20"
        );
        assert_eq!(
            render(&Value::Double(0.1), &ft(TYPE_DOUBLE, -1)).unwrap(),
            "0.1"
        );
        assert_eq!(
            render(&Value::UInt(u64::MAX), &ft(TYPE_LONGLONG, 0)).unwrap(),
            "18446744073709551615"
        );
        assert_eq!(render(&Value::Year(0), &ft(TYPE_YEAR, 0)).unwrap(), "0000");
        let mut e = ft(TYPE_ENUM, 0);
        e.elems = vec!["a".into(), "b".into(), "c".into()];
        assert_eq!(render(&Value::Enum(2), &e).unwrap(), "b");
        assert_eq!(render(&Value::Enum(0), &e).unwrap(), "");
        assert_eq!(render(&Value::Set(0b101), &e).unwrap(), "a,c");
        let mut b = ft(TYPE_BIT, 0);
        b.flen = 10;
        assert_eq!(render(&Value::Bit(0x1ff), &b).unwrap(), "0x01FF");
        assert_eq!(
            render(&Value::Bytes(b"hi".to_vec()), &ft(TYPE_VARCHAR, 0)).unwrap(),
            "hi"
        );
        assert_eq!(
            render(&Value::Bytes(vec![0xff, 0]), &ft(TYPE_BLOB, 0)).unwrap(),
            "0xFF00"
        );
        assert_eq!(
            render(
                &Value::Json(Json::Array(vec![Json::Int(1), Json::Null])),
                &ft(TYPE_JSON, 0)
            )
            .unwrap(),
            "[1, null]"
        );
        let mut z = ft(TYPE_LONG, 0);
        z.flag = ZEROFILL_FLAG;
        z.flen = 5;
        assert_eq!(render(&Value::Int(42), &z).unwrap(), "00042");
    }
}

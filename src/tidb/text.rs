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
        Value::Float(f) => float_text_for(f64::from(*f), ft, true),
        Value::Double(f) => float_text_for(*f, ft, false),
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

fn float_text_for(f: f64, ft: &FieldType, is_float: bool) -> String {
    // FLOAT(M,D) / DOUBLE(M,D): fixed decimals. 31 is MySQL's "not fixed" marker.
    if f.is_finite() && ft.decimal >= 0 && ft.decimal < 31 && ft.flen > 0 {
        return format!("{:.*}", ft.decimal as usize, f);
    }
    float_text(f, is_float)
}

/// A FLOAT (`is_float`, read back as `f32`) or DOUBLE as MySQL 8 shows it: the shortest text
/// that reads back as the same value, in exponent form outside `[1e-4, 1e15)`.
pub fn float_text(f: f64, is_float: bool) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    let abs = f.abs();
    let exp = shortest_exp(f, is_float);
    if abs != 0.0 && !(1e-4..1e15).contains(&abs) {
        exp
    } else {
        exp_to_plain(&exp)
    }
}

/// `f` as `d[.ddd]e<exp>` (Rust's `{:e}` form) with the fewest significant digits that read back
/// as the same value (as an `f32` when `single`).
///
/// When two decimals of that length are equally near `f` (the value lies exactly halfway),
/// MySQL's dtoa, like Python's `repr`, takes the one with the even last digit; Rust's shortest
/// `{:e}` takes the upper one (`-1043330439.09765625` prints `...0976563`, MySQL `...0976562`).
/// Rust's fixed-precision formatting is exact and rounds ties to even, so the shortest length
/// is taken from `{:e}` and the digits from `{:.N$e}` when those read back as `f`.
pub(crate) fn shortest_exp(f: f64, single: bool) -> String {
    let (shortest, reads_back) = if single {
        let v = f as f32;
        let s = format!("{v:e}");
        let digits = significant_digits(&s);
        let exact = format!("{:.*e}", digits.saturating_sub(1), v);
        (
            s,
            exact.parse::<f32>().is_ok_and(|r| r == v).then_some(exact),
        )
    } else {
        let s = format!("{f:e}");
        let digits = significant_digits(&s);
        let exact = format!("{:.*e}", digits.saturating_sub(1), f);
        (
            s,
            exact.parse::<f64>().is_ok_and(|r| r == f).then_some(exact),
        )
    };
    reads_back.unwrap_or(shortest)
}

fn significant_digits(exp_form: &str) -> usize {
    let mantissa = exp_form.split('e').next().unwrap_or("");
    mantissa.bytes().filter(u8::is_ascii_digit).count()
}

/// `d[.ddd]e<exp>` in plain decimal notation, as Rust's `Display` prints floats (`1.5e2` →
/// `150`, `-2.5e-3` → `-0.0025`, `-0e0` → `-0`).
pub(crate) fn exp_to_plain(s: &str) -> String {
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::from(sign);
    // The decimal point goes after `exp + 1` digits.
    let point = exp + 1;
    if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    } else if point as usize >= digits.len() {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The digits read back as the value, and are never longer than Rust's shortest.
        #[test]
        fn shortest_reads_back(bits in any::<u64>(), single in any::<bool>()) {
            let f = f64::from_bits(bits);
            prop_assume!(f.is_finite());
            let f = if single { f64::from(f as f32) } else { f };
            prop_assume!(f.is_finite());
            let s = shortest_exp(f, single);
            let plain = exp_to_plain(&s);
            if single {
                prop_assert_eq!(s.parse::<f32>().unwrap(), f as f32);
                prop_assert_eq!(plain.parse::<f32>().unwrap(), f as f32);
                prop_assert_eq!(significant_digits(&s), significant_digits(&format!("{:e}", f as f32)));
            } else {
                prop_assert_eq!(s.parse::<f64>().unwrap(), f);
                prop_assert_eq!(plain.parse::<f64>().unwrap(), f);
                prop_assert_eq!(significant_digits(&s), significant_digits(&format!("{f:e}")));
            }
        }
    }
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
        // Exactly halfway between two 17-digit decimals: the even one, as MySQL prints it.
        assert_eq!(
            render(
                &Value::Double(-1_068_370_369_636.0 / 1024.0),
                &ft(TYPE_DOUBLE, -1)
            )
            .unwrap(),
            "-1043330439.0976562"
        );
        assert_eq!(
            render(&Value::Double(1e14), &ft(TYPE_DOUBLE, -1)).unwrap(),
            "100000000000000"
        );
        assert_eq!(
            render(&Value::Double(-1.5e-7), &ft(TYPE_DOUBLE, -1)).unwrap(),
            "-1.5e-7"
        );
        assert_eq!(
            render(&Value::Double(0.00012), &ft(TYPE_DOUBLE, -1)).unwrap(),
            "0.00012"
        );
        assert_eq!(
            render(&Value::Double(-0.0), &ft(TYPE_DOUBLE, -1)).unwrap(),
            "-0"
        );
        assert_eq!(
            render(&Value::Float(-12345.625), &ft(TYPE_FLOAT, -1)).unwrap(),
            "-12345.625"
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

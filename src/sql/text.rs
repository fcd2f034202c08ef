//! Values as the text protocol carries them: the bytes MySQL sends for a cell of a given type
//! (`SELECT` through COM_QUERY), written into a caller's buffer without allocating.
//!
//! Strings and binary strings are their bytes; integers, decimals and temporal values their
//! canonical text (temporal values with exactly the type's fractional digits, TIMESTAMP in
//! UTC, the server's time zone); FLOAT and DOUBLE the shortest text that reads back as the same
//! value (MySQL 8's form, exponent notation outside `[1e-4, 1e15)`); YEAR four digits; ENUM and
//! SET their member names; BIT its big-endian bytes; JSON MySQL's JSON text.

use std::io::Write as _;

use tibinlog_protocol::value::{Date, DateTime, Time, Value};

use super::types::{SqlType, TypeKind};
use crate::tidb::gcvt::{gcvt, PROTOCOL_WIDTH};
use crate::tidb::{decimal, json, text as tidb_text, time};

/// Appends the text form of `v` for a column of type `ty` to `out`; false (nothing written)
/// for NULL.
pub fn write_text(v: &Value, ty: &SqlType, out: &mut Vec<u8>) -> bool {
    match v {
        Value::Null => return false,
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        Value::Float(f) => {
            out.extend_from_slice(tidb_text::float_text(f64::from(*f), true).as_bytes())
        }
        // A FLOAT keeps the shortest text that reads back as its value (MySQL sends 6
        // significant digits); a DOUBLE is MySQL's text exactly.
        Value::Double(f) if matches!(ty.kind, TypeKind::Float) => {
            out.extend_from_slice(tidb_text::float_text(*f, true).as_bytes());
        }
        Value::Double(f) => {
            out.extend_from_slice(gcvt(*f, false, PROTOCOL_WIDTH).as_bytes());
        }
        Value::Decimal(t) => match ty.kind {
            TypeKind::Decimal { scale, .. } => match decimal::rescale(t, scale.min(30)) {
                Ok(s) => out.extend_from_slice(s.as_bytes()),
                Err(_) => out.extend_from_slice(t.as_bytes()),
            },
            _ => out.extend_from_slice(t.as_bytes()),
        },
        Value::Bytes(b) => out.extend_from_slice(b),
        Value::Date(d) => write_date(d, out),
        Value::DateTime(dt) => write_datetime(dt, ty.fsp(), out),
        Value::Timestamp { seconds, micros } => write_datetime(
            &time::timestamp_to_datetime(*seconds, *micros),
            ty.fsp(),
            out,
        ),
        Value::Time(t) => write_time(t, ty.fsp(), out),
        Value::Year(y) => {
            let _ = write!(out, "{y:04}");
        }
        Value::Enum(i) => {
            if let TypeKind::Enum { members } = &ty.kind {
                if let Some(m) = usize::from(*i).checked_sub(1).and_then(|i| members.get(i)) {
                    out.extend_from_slice(m);
                }
            } else {
                let _ = write!(out, "{i}");
            }
        }
        Value::Set(mask) => {
            if let TypeKind::Set { members } = &ty.kind {
                let mut first = true;
                for (i, m) in members.iter().enumerate().take(64) {
                    if mask & (1u64 << i) != 0 {
                        if !first {
                            out.push(b',');
                        }
                        out.extend_from_slice(m);
                        first = false;
                    }
                }
            } else {
                let _ = write!(out, "{mask}");
            }
        }
        Value::Bit(b) => {
            let width = match ty.kind {
                TypeKind::Bit { bits } => usize::from(bits).div_ceil(8).clamp(1, 8),
                _ => 8,
            };
            out.extend_from_slice(&b.to_be_bytes()[8 - width..]);
        }
        Value::Json(j) => out.extend_from_slice(json::to_text(j).as_bytes()),
    }
    true
}

/// The text form as an owned string (lossy for non-UTF-8 bytes); `None` for NULL.
pub fn to_text(v: &Value, ty: &SqlType) -> Option<String> {
    let mut out = Vec::new();
    write_text(v, ty, &mut out).then(|| String::from_utf8_lossy(&out).into_owned())
}

fn write_date(d: &Date, out: &mut Vec<u8>) {
    let _ = write!(out, "{:04}-{:02}-{:02}", d.year, d.month, d.day);
}

fn write_frac(micros: u32, fsp: u8, out: &mut Vec<u8>) {
    let fsp = u32::from(fsp.min(6));
    if fsp > 0 {
        let _ = write!(
            out,
            ".{:0width$}",
            micros / 10u32.pow(6 - fsp),
            width = fsp as usize
        );
    }
}

fn write_datetime(dt: &DateTime, fsp: u8, out: &mut Vec<u8>) {
    write_date(&dt.date, out);
    let _ = write!(out, " {:02}:{:02}:{:02}", dt.hour, dt.minute, dt.second);
    write_frac(dt.micros, fsp, out);
}

fn write_time(t: &Time, fsp: u8, out: &mut Vec<u8>) {
    let zero = (t.hours, t.minutes, t.seconds, t.micros) == (0, 0, 0, 0);
    if t.negative && !zero {
        out.push(b'-');
    }
    let _ = write!(out, "{:02}:{:02}:{:02}", t.hours, t.minutes, t.seconds);
    write_frac(t.micros, fsp, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::charset;

    fn text(v: Value, ty: SqlType) -> Option<String> {
        to_text(&v, &ty)
    }

    #[test]
    fn values_render_as_mysql_sends_them() {
        assert_eq!(text(Value::Null, SqlType::bigint()), None);
        assert_eq!(
            text(Value::Int(-5), SqlType::bigint()).as_deref(),
            Some("-5")
        );
        assert_eq!(
            text(Value::Decimal("1.5".into()), SqlType::decimal(10, 3)).as_deref(),
            Some("1.500")
        );
        assert_eq!(
            text(Value::Double(0.1), SqlType::double()).as_deref(),
            Some("0.1")
        );
        assert_eq!(
            text(Value::Double(1e20), SqlType::double()).as_deref(),
            Some("1e20")
        );
        assert_eq!(
            text(Value::Float(0.1), SqlType::new(TypeKind::Float)).as_deref(),
            Some("0.1")
        );
        let dt = DateTime {
            date: Date {
                year: 2024,
                month: 2,
                day: 29,
            },
            hour: 23,
            minute: 5,
            second: 9,
            micros: 123_456,
        };
        assert_eq!(
            text(Value::DateTime(dt), SqlType::datetime(3)).as_deref(),
            Some("2024-02-29 23:05:09.123")
        );
        assert_eq!(
            text(Value::DateTime(dt), SqlType::datetime(0)).as_deref(),
            Some("2024-02-29 23:05:09")
        );
        assert_eq!(
            text(
                Value::Timestamp {
                    seconds: 0,
                    micros: 5
                },
                SqlType::new(TypeKind::Timestamp { fsp: 6 })
            )
            .as_deref(),
            Some("1970-01-01 00:00:00.000005")
        );
        let t = Time {
            negative: true,
            hours: 838,
            minutes: 59,
            seconds: 59,
            micros: 0,
        };
        assert_eq!(
            text(Value::Time(t), SqlType::new(TypeKind::Time { fsp: 0 })).as_deref(),
            Some("-838:59:59")
        );
        assert_eq!(
            text(Value::Year(0), SqlType::new(TypeKind::Year)).as_deref(),
            Some("0000")
        );
        let members = vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()];
        let e = SqlType::new(TypeKind::Enum {
            members: members.clone(),
        })
        .with_collation(charset::UTF8MB4_BIN);
        assert_eq!(text(Value::Enum(2), e.clone()).as_deref(), Some("b"));
        assert_eq!(text(Value::Enum(0), e).as_deref(), Some(""));
        let s = SqlType::new(TypeKind::Set { members });
        assert_eq!(text(Value::Set(0b101), s).as_deref(), Some("a,c"));
        let mut out = Vec::new();
        assert!(write_text(
            &Value::Bit(0x1ff),
            &SqlType::new(TypeKind::Bit { bits: 9 }),
            &mut out
        ));
        assert_eq!(out, [0x01, 0xff]);
    }
}

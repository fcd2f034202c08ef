//! MySQL's rules for values in expressions: how a cell converts to a number, a string or a
//! temporal value, and how two values compare (the comparison type MySQL's `Arg_comparator`
//! chooses from the two argument types).
//!
//! Cells are [`Value`]s in their column's form (ENUM as its index, TIMESTAMP as epoch seconds);
//! their [`SqlType`] says how to read them. NULL never reaches these helpers: callers handle it
//! first (every comparison with NULL is NULL).

use std::cmp::Ordering;

use tibinlog_protocol::value::{Date, DateTime, Time, Value};

use super::charset;
use super::text::write_text;
use super::types::{SqlType, TypeKind};
use crate::tidb::time as tidb_time;

/// The domain two values are compared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpMode {
    /// Both integers: exact, signed against unsigned handled.
    Int,
    /// A DECIMAL against a DECIMAL or an integer: exact decimal text comparison.
    Decimal,
    /// Anything with a FLOAT/DOUBLE, or a string against a number.
    Double,
    /// Strings under a collation.
    String { collation: u16 },
    /// DATE/DATETIME/TIMESTAMP against each other or a string.
    DateTime,
    /// TIME against TIME or a string.
    Time,
}

impl CmpMode {
    /// MySQL's comparison type for two argument types.
    pub fn for_types(a: &SqlType, b: &SqlType) -> CmpMode {
        let decimal = |t: &SqlType| matches!(t.kind, TypeKind::Decimal { .. });
        let float = |t: &SqlType| matches!(t.kind, TypeKind::Float | TypeKind::Double);
        let time = |t: &SqlType| matches!(t.kind, TypeKind::Time { .. });
        let strish = |t: &SqlType| t.is_string() || matches!(t.kind, TypeKind::Null);
        match () {
            _ if a.is_integer() && b.is_integer() => CmpMode::Int,
            _ if (decimal(a) || a.is_integer()) && (decimal(b) || b.is_integer()) => {
                CmpMode::Decimal
            }
            _ if float(a) || float(b) => CmpMode::Double,
            _ if a.is_temporal() && (b.is_temporal() || strish(b)) => CmpMode::DateTime,
            _ if b.is_temporal() && strish(a) => CmpMode::DateTime,
            _ if time(a) && (time(b) || strish(b)) => CmpMode::Time,
            _ if time(b) && strish(a) => CmpMode::Time,
            _ if strish(a) && strish(b) => CmpMode::String {
                collation: string_collation(a, b),
            },
            _ if a.is_numeric() || b.is_numeric() => CmpMode::Double,
            _ => CmpMode::String {
                collation: string_collation(a, b),
            },
        }
    }
}

/// The collation two strings compare in: binary if either is binary, else the first one's
/// that is a real string column (literals take the other side's).
fn string_collation(a: &SqlType, b: &SqlType) -> u16 {
    let coll = |t: &SqlType| t.is_string().then_some(t.collation);
    match (coll(a), coll(b)) {
        (Some(charset::BINARY), _) | (_, Some(charset::BINARY)) => charset::BINARY,
        (Some(x), _) | (None, Some(x)) => x,
        (None, None) => charset::UTF8MB4_0900_AI_CI,
    }
}

/// Compares two non-NULL values in `mode`; `None` if one cannot be read in that domain
/// (a string that is not a date in a DATETIME comparison: MySQL then compares as strings, so
/// callers fall back to that).
pub fn compare(
    mode: CmpMode,
    a: &Value,
    ta: &SqlType,
    b: &Value,
    tb: &SqlType,
) -> Option<Ordering> {
    match mode {
        CmpMode::Int => Some(cmp_int(to_int(a, ta)?, to_int(b, tb)?)),
        CmpMode::Decimal => Some(cmp_decimal(
            &to_decimal_text(a, ta)?,
            &to_decimal_text(b, tb)?,
        )),
        CmpMode::Double => to_f64(a, ta).partial_cmp(&to_f64(b, tb)),
        // Strings are their bytes (whatever the column type): compared in place.
        CmpMode::String { collation } if matches!((a, b), (Value::Bytes(_), Value::Bytes(_))) => {
            match (a, b) {
                (Value::Bytes(x), Value::Bytes(y)) => Some(charset::compare(collation, x, y)),
                _ => None,
            }
        }
        CmpMode::String { collation } => {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            write_text(a, ta, &mut x);
            write_text(b, tb, &mut y);
            Some(charset::compare(collation, &x, &y))
        }
        CmpMode::DateTime => Some(to_datetime(a, ta)?.cmp(&to_datetime(b, tb)?)),
        CmpMode::Time => Some(time_key(&to_time(a, ta)?).cmp(&time_key(&to_time(b, tb)?))),
    }
}

/// An integer read as i128 (covers both i64 and u64).
fn cmp_int(a: i128, b: i128) -> Ordering {
    a.cmp(&b)
}

/// The value in integer context: integer kinds, YEAR, BIT, ENUM index and SET mask as they
/// are; a double or decimal rounded half away from zero; a string by its integer prefix.
pub fn to_int(v: &Value, _t: &SqlType) -> Option<i128> {
    Some(match v {
        Value::Int(i) => i128::from(*i),
        Value::UInt(u) | Value::Bit(u) | Value::Set(u) => i128::from(*u),
        Value::Year(y) => i128::from(*y),
        Value::Enum(i) => i128::from(*i),
        Value::Double(f) => round_half_away(*f)?,
        Value::Float(f) => round_half_away(f64::from(*f))?,
        Value::Decimal(d) => round_half_away(d.parse::<f64>().ok()?)?,
        Value::Bytes(b) => int_prefix(b),
        _ => return None,
    })
}

/// A string in integer context, as MySQL reads it: the integer its leading blanks, sign and
/// digits spell (`'12abc'` 12, `'1.9'` 1, `'1e3'` 1, no digits 0), exactly — not through a
/// double, which loses digits past 2^53 (an MD5 half read by `CONV` and `CAST … AS UNSIGNED`)
/// — and saturated at the 64-bit ends.
fn int_prefix(b: &[u8]) -> i128 {
    let b = &b[b.iter().take_while(|c| c.is_ascii_whitespace()).count()..];
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut n: i128 = 0;
    for d in digits.iter().take_while(|c| c.is_ascii_digit()) {
        n = (n * 10 + i128::from(d - b'0')).min(i128::from(u64::MAX) + 1);
    }
    if neg {
        (-n).max(i128::from(i64::MIN))
    } else {
        n.min(i128::from(u64::MAX))
    }
}

fn round_half_away(f: f64) -> Option<i128> {
    if !f.is_finite() || f.abs() > 1.8e19 {
        return None;
    }
    Some(f.round() as i128)
}

/// The value as a double, as MySQL converts it (strings by their longest numeric prefix, 0 when
/// there is none; temporal values as their `YYYYMMDDhhmmss` number).
pub fn to_f64(v: &Value, t: &SqlType) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Int(i) => *i as f64,
        Value::UInt(u) | Value::Bit(u) => *u as f64,
        Value::Float(f) => f64::from(*f),
        Value::Double(f) => *f,
        Value::Decimal(d) => d.parse().unwrap_or(0.0),
        Value::Year(y) => f64::from(*y),
        Value::Enum(i) => f64::from(*i),
        Value::Set(m) => *m as f64,
        Value::Bytes(b) => numeric_prefix(b),
        Value::Date(d) => date_number(d),
        Value::DateTime(dt) => datetime_number(dt),
        Value::Timestamp { seconds, micros } => {
            datetime_number(&tidb_time::timestamp_to_datetime(*seconds, *micros))
        }
        Value::Time(tm) => {
            let n = f64::from(tm.hours) * 10_000.0
                + f64::from(tm.minutes) * 100.0
                + f64::from(tm.seconds)
                + f64::from(tm.micros) / 1e6;
            if tm.negative {
                -n
            } else {
                n
            }
        }
        Value::Json(_) => {
            let mut s = Vec::new();
            write_text(v, t, &mut s);
            numeric_prefix(&s)
        }
    }
}

fn date_number(d: &Date) -> f64 {
    f64::from(d.year) * 10_000.0 + f64::from(d.month) * 100.0 + f64::from(d.day)
}

fn datetime_number(dt: &DateTime) -> f64 {
    date_number(&dt.date) * 1_000_000.0
        + f64::from(dt.hour) * 10_000.0
        + f64::from(dt.minute) * 100.0
        + f64::from(dt.second)
        + f64::from(dt.micros) / 1e6
}

/// The longest prefix of `b` that reads as a number (after leading spaces); 0 without one.
pub fn numeric_prefix(b: &[u8]) -> f64 {
    let s = match std::str::from_utf8(b) {
        Ok(s) => s.trim_start(),
        Err(_) => return 0.0,
    };
    let bytes = s.as_bytes();
    let mut end = 0;
    let mut seen_digit = false;
    let mut i = 0;
    if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
        i += 1;
    }
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
        seen_digit = true;
        end = i;
    }
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
            seen_digit = true;
            end = i;
        }
    }
    if seen_digit && i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        let digits = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > digits {
            end = j;
        }
    }
    if !seen_digit {
        return 0.0;
    }
    s[..end].parse().unwrap_or(0.0)
}

/// The value as canonical decimal text, for integer and decimal values.
pub fn to_decimal_text(v: &Value, t: &SqlType) -> Option<String> {
    match v {
        Value::Decimal(d) => Some(d.clone()),
        _ => to_int(v, t).map(|i| i.to_string()),
    }
}

/// Compares two decimal texts exactly (`-12.50` < `3`).
pub fn cmp_decimal(a: &str, b: &str) -> Ordering {
    let (na, ia, fa) = split_decimal(a);
    let (nb, ib, fb) = split_decimal(b);
    let zero = |i: &str, f: &str| i.is_empty() && f.is_empty();
    let (na, nb) = (na && !zero(ia, fa), nb && !zero(ib, fb));
    let magnitude = || {
        ia.len()
            .cmp(&ib.len())
            .then_with(|| ia.cmp(ib))
            .then_with(|| {
                let n = fa.len().max(fb.len());
                let pad = |f: &str| format!("{f:0<n$}");
                pad(fa).cmp(&pad(fb))
            })
    };
    match (na, nb) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (false, false) => magnitude(),
        (true, true) => magnitude().reverse(),
    }
}

/// `(negative, integer digits without leading zeros, fraction digits without trailing zeros)`.
fn split_decimal(s: &str) -> (bool, &str, &str) {
    let s = s.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (i, f) = s.split_once('.').unwrap_or((s, ""));
    (neg, i.trim_start_matches('0'), f.trim_end_matches('0'))
}

/// The value as a DATETIME (DATE at midnight, TIMESTAMP in UTC, strings parsed).
pub fn to_datetime(v: &Value, t: &SqlType) -> Option<DateTime> {
    match v {
        Value::DateTime(dt) => Some(*dt),
        Value::Date(d) => Some(DateTime {
            date: *d,
            ..DateTime::default()
        }),
        Value::Timestamp { seconds, micros } => {
            Some(tidb_time::timestamp_to_datetime(*seconds, *micros))
        }
        Value::Bytes(b) => {
            let s = std::str::from_utf8(b).ok()?.trim();
            tidb_time::parse_datetime(s).ok()
        }
        Value::Int(_) | Value::UInt(_) => {
            let n = to_int(v, t)?;
            datetime_from_number(n)
        }
        _ => None,
    }
}

/// `YYYYMMDD` or `YYYYMMDDhhmmss` as a DATETIME.
fn datetime_from_number(n: i128) -> Option<DateTime> {
    let (date, time) = if n >= 10_000_000_000 {
        (n / 1_000_000, n % 1_000_000)
    } else {
        (n, 0)
    };
    let dt = DateTime {
        date: Date {
            year: u16::try_from(date / 10_000).ok()?,
            month: u8::try_from(date / 100 % 100).ok()?,
            day: u8::try_from(date % 100).ok()?,
        },
        hour: u8::try_from(time / 10_000).ok()?,
        minute: u8::try_from(time / 100 % 100).ok()?,
        second: u8::try_from(time % 100).ok()?,
        micros: 0,
    };
    Some(dt)
}

/// The value as a TIME.
pub fn to_time(v: &Value, _t: &SqlType) -> Option<Time> {
    match v {
        Value::Time(t) => Some(*t),
        Value::Bytes(b) => tidb_time::parse_duration(std::str::from_utf8(b).ok()?.trim()).ok(),
        Value::DateTime(dt) => Some(Time {
            negative: false,
            hours: u16::from(dt.hour),
            minutes: dt.minute,
            seconds: dt.second,
            micros: dt.micros,
        }),
        _ => None,
    }
}

/// A TIME as signed microseconds, for ordering.
pub fn time_key(t: &Time) -> i64 {
    let us = ((i64::from(t.hours) * 60 + i64::from(t.minutes)) * 60 + i64::from(t.seconds))
        * 1_000_000
        + i64::from(t.micros);
    if t.negative {
        -us
    } else {
        us
    }
}

/// The value as the bytes of its text form (strings as they are), as MySQL turns a value into
/// a string inside an expression (`CONCAT`, `CAST(… AS CHAR)`): FLOAT with 6 significant
/// digits in 12 characters, DOUBLE in 24 (see [`crate::tidb::gcvt`]).
pub fn to_bytes(v: &Value, t: &SqlType) -> Vec<u8> {
    use crate::tidb::gcvt::{gcvt, DOUBLE_STR_WIDTH, FLOAT_STR_WIDTH};
    match v {
        Value::Bytes(b) => b.clone(),
        Value::Float(f) => gcvt(f64::from(*f), true, FLOAT_STR_WIDTH).into_bytes(),
        Value::Double(f) if matches!(t.kind, TypeKind::Float) => {
            gcvt(*f, true, FLOAT_STR_WIDTH).into_bytes()
        }
        Value::Double(f) => gcvt(*f, false, DOUBLE_STR_WIDTH).into_bytes(),
        _ => {
            let mut out = Vec::new();
            write_text(v, t, &mut out);
            out
        }
    }
}

/// MySQL truth: a non-zero number (strings by their numeric prefix).
pub fn is_true(v: &Value, t: &SqlType) -> bool {
    match v {
        Value::Null => false,
        Value::Int(i) => *i != 0,
        Value::UInt(u) => *u != 0,
        _ => to_f64(v, t) != 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::charset::{UTF8MB4_BIN, UTF8MB4_GENERAL_CI};

    #[test]
    fn strings_read_as_integers_exactly_by_their_integer_prefix() {
        let t = SqlType::varchar(30, UTF8MB4_BIN);
        let int = |s: &str| to_int(&Value::Bytes(s.as_bytes().to_vec()), &t);
        assert_eq!(int("9295841150795136291"), Some(9_295_841_150_795_136_291));
        assert_eq!(int(" -12abc"), Some(-12));
        assert_eq!(int("+7"), Some(7));
        assert_eq!(int("1.9"), Some(1));
        assert_eq!(int("1e3"), Some(1));
        assert_eq!(int("abc"), Some(0));
        assert_eq!(int(""), Some(0));
        assert_eq!(int("99999999999999999999999"), Some(i128::from(u64::MAX)));
        assert_eq!(int("-99999999999999999999999"), Some(i128::from(i64::MIN)));
    }

    #[test]
    fn modes_follow_mysql() {
        let i = SqlType::bigint();
        let u = SqlType::ubigint();
        let d = SqlType::decimal(10, 2);
        let f = SqlType::double();
        let s = SqlType::varchar(10, UTF8MB4_GENERAL_CI);
        let dt = SqlType::datetime(0);
        assert_eq!(CmpMode::for_types(&i, &u), CmpMode::Int);
        assert_eq!(CmpMode::for_types(&i, &d), CmpMode::Decimal);
        assert_eq!(CmpMode::for_types(&d, &f), CmpMode::Double);
        assert_eq!(CmpMode::for_types(&s, &i), CmpMode::Double);
        assert_eq!(CmpMode::for_types(&dt, &s), CmpMode::DateTime);
        assert_eq!(
            CmpMode::for_types(&s, &SqlType::varchar(3, UTF8MB4_BIN)),
            CmpMode::String {
                collation: UTF8MB4_GENERAL_CI
            }
        );
    }

    #[test]
    fn comparisons() {
        let i = SqlType::bigint();
        let u = SqlType::ubigint();
        assert_eq!(
            compare(
                CmpMode::Int,
                &Value::Int(-1),
                &i,
                &Value::UInt(u64::MAX),
                &u
            ),
            Some(Ordering::Less)
        );
        assert_eq!(cmp_decimal("-12.50", "3"), Ordering::Less);
        assert_eq!(cmp_decimal("12.50", "12.5"), Ordering::Equal);
        assert_eq!(cmp_decimal("-0.00", "0"), Ordering::Equal);
        assert_eq!(cmp_decimal("-2", "-10"), Ordering::Greater);
        assert_eq!(cmp_decimal("100", "99.999"), Ordering::Greater);
        let s = SqlType::varchar(10, UTF8MB4_GENERAL_CI);
        assert_eq!(
            compare(
                CmpMode::Double,
                &Value::Bytes(b"12abc".to_vec()),
                &s,
                &Value::Int(12),
                &i
            ),
            Some(Ordering::Equal)
        );
        let dt = SqlType::datetime(0);
        let v = Value::DateTime(DateTime {
            date: Date {
                year: 2024,
                month: 1,
                day: 2,
            },
            ..DateTime::default()
        });
        assert_eq!(
            compare(
                CmpMode::DateTime,
                &v,
                &dt,
                &Value::Bytes(b"2024-01-02".to_vec()),
                &s
            ),
            Some(Ordering::Equal)
        );
        assert_eq!(numeric_prefix(b"  -1.5e3xyz"), -1500.0);
        assert_eq!(numeric_prefix(b"abc"), 0.0);
        assert_eq!(numeric_prefix(b"1e"), 1.0);
    }
}

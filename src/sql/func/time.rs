//! Temporal functions: TIME_TO_SEC, TIMEDIFF, and the parts of a date (YEAR, MONTH, …,
//! DATE_FORMAT) in [`parts`].

use tibinlog_protocol::value::{DateTime, Value};

use super::{unreachable_func, Func};
use crate::sql::error::Result;
use crate::sql::expr::Expr;
use crate::sql::value as v;

/// TIME_TO_SEC, TIMEDIFF.
pub(super) fn time(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let arg = |i: usize| args[i].eval(row);
    Ok(match f {
        Func::TimeToSec => {
            let val = arg(0)?;
            match v::to_time(&val, &args[0].ty) {
                Some(t) if !matches!(val, Value::Null) => Value::Int(v::time_key(&t) / 1_000_000),
                _ => Value::Null,
            }
        }
        Func::TimeDiff => {
            let (a, b) = (arg(0)?, arg(1)?);
            let us = match (
                v::to_datetime(&a, &args[0].ty),
                v::to_datetime(&b, &args[1].ty),
            ) {
                (Some(x), Some(y)) => datetime_micros(&x) - datetime_micros(&y),
                _ => match (v::to_time(&a, &args[0].ty), v::to_time(&b, &args[1].ty)) {
                    (Some(x), Some(y)) => v::time_key(&x) - v::time_key(&y),
                    _ => return Ok(Value::Null),
                },
            };
            let neg = us < 0;
            let us = us.unsigned_abs();
            let secs = us / 1_000_000;
            let hours = (secs / 3600).min(838);
            Value::Time(tibinlog_protocol::value::Time {
                negative: neg,
                hours: hours as u16,
                minutes: ((secs / 60) % 60) as u8,
                seconds: (secs % 60) as u8,
                micros: (us % 1_000_000) as u32,
            })
        }
        _ => unreachable_func(f)?,
    })
}

fn datetime_micros(dt: &tibinlog_protocol::value::DateTime) -> i64 {
    let days = days_from_civil(
        i64::from(dt.date.year),
        i64::from(dt.date.month),
        i64::from(dt.date.day),
    );
    ((days * 24 + i64::from(dt.hour)) * 60 + i64::from(dt.minute)) * 60_000_000
        + i64::from(dt.second) * 1_000_000
        + i64::from(dt.micros)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
/// MySQL's day number of a date (`TO_DAYS`): day 1 is 0000-01-01, and year 0 counts as MySQL
/// counts it; 0 for the zero date.
pub(crate) fn day_number(year: u32, month: u32, day: u32) -> i64 {
    if year == 0 && month == 0 {
        return 0;
    }
    let (mut year, month, day) = (i64::from(year), i64::from(month), i64::from(day));
    let mut sum = 365 * year + 31 * (month - 1) + day;
    if month <= 2 {
        year -= 1;
    } else {
        sum -= (month * 4 + 23) / 10;
    }
    // Integer division truncating toward zero, as the C original computes it.
    let century = ((year / 100 + 1) * 3) / 4;
    sum + year / 4 - century
}

/// Days from 1970-01-01 to a whole date (`None` for zero parts).
pub(crate) fn unix_days(d: &tibinlog_protocol::value::Date) -> Option<i64> {
    if d.month == 0 || d.day == 0 {
        return None;
    }
    Some(day_number(u32::from(d.year), u32::from(d.month), u32::from(d.day)) - 719_528)
}

/// Day of the week of day number `n`: 0 = Monday, or 0 = Sunday when `sunday_first`.
fn weekday(n: i64, sunday_first: bool) -> i64 {
    (n + 5 + i64::from(sunday_first)).rem_euclid(7)
}

fn days_in_year(year: u32) -> i64 {
    if year % 4 == 0 && (year % 100 != 0 || (year % 400 == 0 && year != 0)) {
        366
    } else {
        365
    }
}

/// `WEEK()` behaviour bits.
const MONDAY_FIRST: u8 = 1;
const WEEK_YEAR: u8 = 2;
const FIRST_WEEKDAY: u8 = 4;

/// The week number of a date under `mode` bits and the year it belongs to.
fn week(dt: &DateTime, mode: u8) -> (i64, u32) {
    let (y, m, d) = (
        u32::from(dt.date.year),
        u32::from(dt.date.month),
        u32::from(dt.date.day),
    );
    let daynr = day_number(y, m, d);
    let mut first = day_number(y, 1, 1);
    let monday_first = mode & MONDAY_FIRST != 0;
    let mut week_year = mode & WEEK_YEAR != 0;
    let first_weekday = mode & FIRST_WEEKDAY != 0;
    let mut wd = weekday(first, !monday_first);
    let mut year = y;
    if m == 1 && i64::from(d) <= 7 - wd {
        if !week_year && ((first_weekday && wd != 0) || (!first_weekday && wd >= 4)) {
            return (0, year);
        }
        week_year = true;
        year = year.saturating_sub(1);
        let days = days_in_year(year);
        first -= days;
        wd = (wd + 53 * 7 - days).rem_euclid(7);
    }
    let days = if (first_weekday && wd != 0) || (!first_weekday && wd >= 4) {
        daynr - (first + (7 - wd))
    } else {
        daynr - (first - wd)
    };
    if week_year && days >= 52 * 7 {
        let wd = (wd + days_in_year(year)) % 7;
        if (!first_weekday && wd < 4) || (first_weekday && wd == 0) {
            return (1, year + 1);
        }
    }
    (days / 7 + 1, year)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// `DATE_FORMAT(dt, format)` into `out`; `None` where MySQL gives NULL (a name of a zero month
/// or of the weekday of a zero date).
fn date_format(dt: &DateTime, format: &[u8], out: &mut Vec<u8>) -> Option<()> {
    use std::io::Write as _;
    let (y, m, d) = (
        u32::from(dt.date.year),
        u32::from(dt.date.month),
        u32::from(dt.date.day),
    );
    let h = u32::from(dt.hour);
    let zero_date = y == 0 && m == 0;
    let mut it = format.iter().copied();
    while let Some(c) = it.next() {
        if c != b'%' {
            out.push(c);
            continue;
        }
        let Some(spec) = it.next() else {
            out.push(b'%');
            break;
        };
        let _ = match spec {
            b'M' => out.write_all(MONTHS.get(m.checked_sub(1)? as usize)?.as_bytes()),
            b'b' => out.write_all(&MONTHS.get(m.checked_sub(1)? as usize)?.as_bytes()[..3]),
            b'W' | b'a' | b'w' => {
                if zero_date {
                    return None;
                }
                let n = day_number(y, m, d);
                if spec == b'w' {
                    write!(out, "{}", weekday(n, true))
                } else {
                    let name = DAYS[weekday(n, false) as usize];
                    let name = if spec == b'a' { &name[..3] } else { name };
                    out.write_all(name.as_bytes())
                }
            }
            b'D' => {
                let suffix = match d {
                    10..=19 => "th",
                    _ => match d % 10 {
                        1 => "st",
                        2 => "nd",
                        3 => "rd",
                        _ => "th",
                    },
                };
                write!(out, "{d}{suffix}")
            }
            b'Y' => write!(out, "{y:04}"),
            b'y' => write!(out, "{:02}", y % 100),
            b'm' => write!(out, "{m:02}"),
            b'c' => write!(out, "{m}"),
            b'd' => write!(out, "{d:02}"),
            b'e' => write!(out, "{d}"),
            b'f' => write!(out, "{:06}", dt.micros),
            b'H' => write!(out, "{h:02}"),
            b'k' => write!(out, "{h}"),
            b'h' | b'I' => write!(out, "{:02}", (h % 24 + 11) % 12 + 1),
            b'l' => write!(out, "{}", (h % 24 + 11) % 12 + 1),
            b'i' => write!(out, "{:02}", dt.minute),
            b'S' | b's' => write!(out, "{:02}", dt.second),
            b'p' => out.write_all(if h % 24 < 12 { b"AM" } else { b"PM" }),
            b'r' => write!(
                out,
                "{:02}:{:02}:{:02} {}",
                (h + 11) % 12 + 1,
                dt.minute,
                dt.second,
                if h % 24 < 12 { "AM" } else { "PM" }
            ),
            b'T' => write!(out, "{h:02}:{:02}:{:02}", dt.minute, dt.second),
            b'j' => write!(out, "{:03}", day_number(y, m, d) - day_number(y, 1, 1) + 1),
            b'U' => write!(out, "{:02}", week(dt, FIRST_WEEKDAY).0),
            b'u' => write!(out, "{:02}", week(dt, MONDAY_FIRST).0),
            b'V' => write!(out, "{:02}", week(dt, WEEK_YEAR | FIRST_WEEKDAY).0),
            b'v' => write!(out, "{:02}", week(dt, WEEK_YEAR | MONDAY_FIRST).0),
            b'X' => write!(out, "{:04}", week(dt, WEEK_YEAR | FIRST_WEEKDAY).1),
            b'x' => write!(out, "{:04}", week(dt, WEEK_YEAR | MONDAY_FIRST).1),
            other => {
                out.push(other);
                Ok(())
            }
        };
    }
    Some(())
}

/// DATE_FORMAT, DATE, and the parts of a date or time.
pub(super) fn parts(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let val = args[0].eval(row)?;
    if matches!(val, Value::Null) {
        return Ok(Value::Null);
    }
    let ty = &args[0].ty;
    let dt = v::to_datetime(&val, ty);
    // The time parts of a TIME (or of text that is a time, not a date).
    if matches!(
        f,
        Func::Hour | Func::Minute | Func::Second | Func::Microsecond
    ) {
        let t = match &val {
            Value::Time(t) => Some(*t),
            _ if dt.is_none() => v::to_time(&val, ty),
            _ => None,
        };
        if let Some(t) = t {
            return Ok(Value::Int(match f {
                Func::Hour => i64::from(t.hours),
                Func::Minute => i64::from(t.minutes),
                Func::Second => i64::from(t.seconds),
                _ => i64::from(t.micros),
            }));
        }
    }
    let Some(dt) = dt else {
        return Ok(Value::Null);
    };
    let (y, m, d) = (
        u32::from(dt.date.year),
        u32::from(dt.date.month),
        u32::from(dt.date.day),
    );
    // Functions that need a whole date: NULL for zero parts, as MySQL gives.
    let whole = m != 0 && d != 0;
    let int = |n: i64| Ok(Value::Int(n));
    match f {
        Func::DateFormat => {
            let format = args[1].eval(row)?;
            if matches!(format, Value::Null) {
                return Ok(Value::Null);
            }
            let format = v::to_bytes(&format, &args[1].ty);
            let mut out = Vec::with_capacity(format.len() * 2);
            Ok(match date_format(&dt, &format, &mut out) {
                Some(()) => Value::Bytes(out),
                None => Value::Null,
            })
        }
        Func::Date => Ok(Value::Date(dt.date)),
        Func::Year => int(i64::from(y)),
        Func::Month => int(i64::from(m)),
        Func::Day => int(i64::from(d)),
        Func::Hour => int(i64::from(dt.hour)),
        Func::Minute => int(i64::from(dt.minute)),
        Func::Second => int(i64::from(dt.second)),
        Func::Microsecond => int(i64::from(dt.micros)),
        Func::Quarter => int(i64::from(m.div_ceil(3))),
        Func::DayOfWeek if whole => int(weekday(day_number(y, m, d), true) + 1),
        Func::WeekDay if whole => int(weekday(day_number(y, m, d), false)),
        Func::DayOfYear if whole => int(day_number(y, m, d) - day_number(y, 1, 1) + 1),
        Func::ToDays if whole => int(day_number(y, m, d)),
        Func::DayOfWeek | Func::WeekDay | Func::DayOfYear | Func::ToDays => Ok(Value::Null),
        _ => unreachable_func(f),
    }
}

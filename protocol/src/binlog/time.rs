//! Temporal encodings of MySQL 5.6.4+ (`mysys/my_time.cc`): DATE, DATETIME2, TIMESTAMP2, TIME2
//! row values, and the "packed" 64-bit integers that binary JSON stores in opaque values.
//!
//! ```text
//! DATE        3 bytes LE   day | month << 5 | year << 9
//! DATETIME2   5 bytes BE   0x80_0000_0000 + (((year*13+month) << 22) | day << 17 | h << 12 | m << 6 | s)
//! TIMESTAMP2  4 bytes BE   seconds since the epoch
//! TIME2       3 bytes BE   0x80_0000 + signed (h << 12 | m << 6 | s)           fsp 0..4
//!             6 bytes BE   0x8000_0000_0000 + signed ((h<<12|m<<6|s) << 24 | us) fsp 5..6
//! fraction    fsp 1-2: 1 byte  us / 10_000 | fsp 3-4: 2 bytes BE us / 100 | fsp 5-6: in the above
//!             (DATETIME2/TIMESTAMP2 fsp 5-6: 3 bytes BE us)
//! ```
//! Negative TIME with a fraction borrows: the integer part is decremented and the fraction is
//! stored as its (1- or 2-byte) two's complement, as `my_time_packed_to_binary` does.

use crate::value::{Date, DateTime, Time};

/// Offset added to the 40-bit DATETIME2 integer part.
const DATETIMEF_INT_OFS: u64 = 0x80_0000_0000;
/// Offset added to the 24-bit TIME2 integer part.
const TIMEF_INT_OFS: i64 = 0x80_0000;
/// Offset added to the 48-bit TIME2 value with fsp 5-6.
const TIMEF_OFS: i64 = 0x8000_0000_0000;

/// Microseconds truncated to `fsp` digits (MySQL stores values already rounded to the column).
#[inline]
pub(crate) fn truncate_micros(micros: u32, fsp: u8) -> u32 {
    const DIV: [u32; 7] = [1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];
    let d = DIV[fsp.min(6) as usize];
    micros - micros % d
}

#[inline]
fn put_frac(buf: &mut Vec<u8>, micros: u32, fsp: u8) {
    match fsp {
        1 | 2 => buf.push((micros / 10_000) as u8),
        3 | 4 => buf.extend_from_slice(&((micros / 100) as u16).to_be_bytes()),
        5 | 6 => buf.extend_from_slice(&micros.to_be_bytes()[1..]),
        _ => {}
    }
}

/// The 3-byte DATE value.
#[inline]
pub(crate) fn date_to_u24(d: &Date) -> u32 {
    u32::from(d.day) | (u32::from(d.month) << 5) | (u32::from(d.year) << 9)
}

/// `year*13+month` / day / h:m:s folded as DATETIME2 and the packed integers fold them.
#[inline]
fn datetime_int_part(dt: &DateTime) -> u64 {
    let ym = u64::from(dt.date.year) * 13 + u64::from(dt.date.month);
    let ymd = (ym << 5) | u64::from(dt.date.day);
    let hms = (u64::from(dt.hour) << 12) | (u64::from(dt.minute) << 6) | u64::from(dt.second);
    (ymd << 17) | hms
}

/// Appends a DATETIME2(fsp) value.
pub(crate) fn put_datetime2(buf: &mut Vec<u8>, dt: &DateTime, fsp: u8) {
    let v = DATETIMEF_INT_OFS + datetime_int_part(dt);
    buf.extend_from_slice(&v.to_be_bytes()[3..]);
    put_frac(buf, truncate_micros(dt.micros, fsp), fsp);
}

/// Appends a TIMESTAMP2(fsp) value.
pub(crate) fn put_timestamp2(buf: &mut Vec<u8>, seconds: u32, micros: u32, fsp: u8) {
    buf.extend_from_slice(&seconds.to_be_bytes());
    put_frac(buf, truncate_micros(micros, fsp), fsp);
}

/// The signed packed TIME integer: `±((h << 12 | m << 6 | s) << 24 | us)`.
#[inline]
pub(crate) fn time_packed(t: &Time, fsp: u8) -> i64 {
    let hms = (i64::from(t.hours) << 12) | (i64::from(t.minutes) << 6) | i64::from(t.seconds);
    let v = (hms << 24) + i64::from(truncate_micros(t.micros, fsp));
    if t.negative {
        -v
    } else {
        v
    }
}

/// Appends a TIME2(fsp) value (`my_time_packed_to_binary`).
pub(crate) fn put_time2(buf: &mut Vec<u8>, t: &Time, fsp: u8) {
    let nr = time_packed(t, fsp);
    // MY_PACKED_TIME_GET_INT_PART is an arithmetic shift (floor); GET_FRAC_PART is C's `%`,
    // which keeps the dividend's sign: together they produce the borrow for negative values.
    let int_part = nr >> 24;
    let frac_part = nr % (1 << 24);
    match fsp {
        1 | 2 => {
            buf.extend_from_slice(&((TIMEF_INT_OFS + int_part) as u32).to_be_bytes()[1..]);
            buf.push((frac_part / 10_000) as i8 as u8);
        }
        3 | 4 => {
            buf.extend_from_slice(&((TIMEF_INT_OFS + int_part) as u32).to_be_bytes()[1..]);
            buf.extend_from_slice(&((frac_part / 100) as i16).to_be_bytes());
        }
        5 | 6 => buf.extend_from_slice(&((nr + TIMEF_OFS) as u64).to_be_bytes()[2..]),
        _ => buf.extend_from_slice(&((TIMEF_INT_OFS + int_part) as u32).to_be_bytes()[1..]),
    }
}

/// Packed DATETIME / TIMESTAMP integer (`TIME_to_longlong_datetime_packed`).
pub fn datetime_packed(dt: &DateTime) -> i64 {
    ((datetime_int_part(dt) << 24) | u64::from(dt.micros)) as i64
}

/// Packed DATE integer (`TIME_to_longlong_date_packed`): a datetime at midnight.
pub fn date_packed(d: &Date) -> i64 {
    datetime_packed(&DateTime {
        date: *d,
        ..DateTime::default()
    })
}

/// Packed TIME integer (`TIME_to_longlong_time_packed`).
pub fn time_packed_full(t: &Time) -> i64 {
    time_packed(t, 6)
}

/// Inverse of [`datetime_packed`] (also reads [`date_packed`] values). Returns `None` for
/// negative or out-of-range fields.
pub fn datetime_from_packed(v: i64) -> Option<DateTime> {
    if v < 0 {
        return None;
    }
    let micros = (v % (1 << 24)) as u32;
    let ymdhms = v >> 24;
    let ymd = ymdhms >> 17;
    let ym = ymd >> 5;
    let hms = ymdhms % (1 << 17);
    let year = u16::try_from(ym / 13).ok()?;
    if micros > 999_999 {
        return None;
    }
    Some(DateTime {
        date: Date {
            year,
            month: (ym % 13) as u8,
            day: (ymd % 32) as u8,
        },
        hour: (hms >> 12) as u8,
        minute: ((hms >> 6) % 64) as u8,
        second: (hms % 64) as u8,
        micros,
    })
}

/// Inverse of [`time_packed_full`].
pub fn time_from_packed(v: i64) -> Option<Time> {
    let negative = v < 0;
    let a = v.checked_abs()?;
    let micros = (a % (1 << 24)) as u32;
    let hms = a >> 24;
    if micros > 999_999 {
        return None;
    }
    Some(Time {
        negative,
        hours: u16::try_from((hms >> 12) % (1 << 10)).ok()?,
        minutes: ((hms >> 6) % 64) as u8,
        seconds: (hms % 64) as u8,
        micros,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(negative: bool, hours: u16, minutes: u8, seconds: u8, micros: u32) -> Time {
        Time {
            negative,
            hours,
            minutes,
            seconds,
            micros,
        }
    }

    #[test]
    fn time2_matches_my_time_packed_to_binary() {
        let mut b = Vec::new();
        // 00:00:00 fsp 0 = 0x800000.
        put_time2(&mut b, &t(false, 0, 0, 0, 0), 0);
        assert_eq!(b, [0x80, 0, 0]);
        // -00:00:00.5 fsp 1: int part -1, fraction byte -50 (0xCE).
        b.clear();
        put_time2(&mut b, &t(true, 0, 0, 0, 500_000), 1);
        assert_eq!(b, [0x7f, 0xff, 0xff, 0xce]);
        // -838:59:59 fsp 0.
        b.clear();
        put_time2(&mut b, &t(true, 838, 59, 59, 0), 0);
        let hms: i64 = (838 << 12) | (59 << 6) | 59;
        assert_eq!(b, ((0x80_0000 - hms) as u32).to_be_bytes()[1..]);
        // fsp 6 is one 48-bit value.
        b.clear();
        put_time2(&mut b, &t(false, 1, 2, 3, 4), 6);
        let v = 0x8000_0000_0000i64 + ((((1 << 12) | (2 << 6) | 3) << 24) + 4);
        assert_eq!(b, (v as u64).to_be_bytes()[2..]);
    }

    #[test]
    fn datetime2_and_packed_round_trip() {
        let dt = DateTime {
            date: Date {
                year: 2024,
                month: 2,
                day: 29,
            },
            hour: 23,
            minute: 59,
            second: 58,
            micros: 123_456,
        };
        let mut b = Vec::new();
        put_datetime2(&mut b, &dt, 3);
        assert_eq!(b.len(), 5 + 2);
        assert_eq!(&b[5..], &1230u16.to_be_bytes());
        assert_eq!(datetime_from_packed(datetime_packed(&dt)), Some(dt));
        let tm = t(true, 800, 1, 2, 3);
        assert_eq!(time_from_packed(time_packed_full(&tm)), Some(tm));
        assert_eq!(truncate_micros(123_456, 2), 120_000);
    }
}

//! TiDB time encodings to and from the protocol's `Date`/`DateTime`/`Time`.
//!
//! Two different u64 layouts exist, and each is used in a different place:
//!
//! ```text
//! packed (Time.ToPackedUint; row values, keys, v1 datums)      big-end bits first
//!   | 0 | year*13+month : 17 | day : 5 | hour : 5 | minute : 6 | second : 6 | micro : 24 |
//! CoreTime (TiDB's in-memory layout; binary JSON date/datetime/timestamp values)
//!   | year : 14 | month : 4 | day : 5 | hour : 5 | minute : 6 | second : 6 | micro : 20 | fspTt : 4 |
//! ```
//!
//! Durations (TIME) are signed nanoseconds in an i64 (Go's `time.Duration`).
//! TIMESTAMP values are stored in UTC; they become seconds since the Unix epoch.

use tibinlog_protocol::value::{Date, DateTime, Time};

use super::error::{Error, Result};

const NANOS_PER_MICRO: i64 = 1_000;
const NANOS_PER_SEC: i64 = 1_000_000_000;

fn check_fields(dt: &DateTime, what: &'static str, raw: u64) -> Result<()> {
    let d = &dt.date;
    if d.year > 9999
        || d.month > 12
        || d.day > 31
        || dt.hour > 23
        || dt.minute > 59
        || dt.second > 59
        || dt.micros > 999_999
    {
        return Err(Error::BadTime { what, raw });
    }
    Ok(())
}

/// Decodes a packed time (`Time.FromPackedUint`).
pub fn unpack_datetime(packed: u64) -> Result<DateTime> {
    let ymdhms = packed >> 24;
    let ymd = ymdhms >> 17;
    let hms = ymdhms & ((1 << 17) - 1);
    let ym = ymd >> 5;
    let year = ym / 13;
    if year > 9999 {
        return Err(Error::BadTime {
            what: "packed time",
            raw: packed,
        });
    }
    let dt = DateTime {
        date: Date {
            year: year as u16,
            month: (ym % 13) as u8,
            day: (ymd & 0x1f) as u8,
        },
        hour: (hms >> 12) as u8,
        minute: ((hms >> 6) & 0x3f) as u8,
        second: (hms & 0x3f) as u8,
        micros: (packed & 0xff_ffff) as u32,
    };
    check_fields(&dt, "packed time", packed)?;
    Ok(dt)
}

/// Encodes a packed time (`Time.ToPackedUint`); the zero datetime is 0.
pub fn pack_datetime(dt: &DateTime) -> u64 {
    let d = &dt.date;
    let ymd = ((u64::from(d.year) * 13 + u64::from(d.month)) << 5) | u64::from(d.day);
    let hms = (u64::from(dt.hour) << 12) | (u64::from(dt.minute) << 6) | u64::from(dt.second);
    ((ymd << 17 | hms) << 24) | u64::from(dt.micros)
}

/// Packed form of a date (time of day zero).
pub fn pack_date(d: &Date) -> u64 {
    pack_datetime(&DateTime {
        date: *d,
        ..DateTime::default()
    })
}

/// The `fspTt` low nibble TiDB keeps in a CoreTime: fsp in bits 3..1, bit 0 = timestamp;
/// `0b1110` marks a DATE.
pub mod fsp_tt {
    /// DATE.
    pub const DATE: u8 = 0b1110;
    /// DATETIME with fsp 6.
    pub const DATETIME6: u8 = 6 << 1;
    /// TIMESTAMP with fsp 6.
    pub const TIMESTAMP6: u8 = (6 << 1) | 1;
}

/// Decodes TiDB's in-memory CoreTime (used by binary JSON temporal values).
pub fn core_time_to_datetime(raw: u64) -> Result<DateTime> {
    let f = |off: u32, width: u32| (raw >> off) & ((1u64 << width) - 1);
    let dt = DateTime {
        date: Date {
            year: f(50, 14) as u16,
            month: f(46, 4) as u8,
            day: f(41, 5) as u8,
        },
        hour: f(36, 5) as u8,
        minute: f(30, 6) as u8,
        second: f(24, 6) as u8,
        micros: f(4, 20) as u32,
    };
    check_fields(&dt, "CoreTime", raw)?;
    Ok(dt)
}

/// Encodes a CoreTime with the given `fspTt` nibble (see [`fsp_tt`]).
pub fn datetime_to_core_time(dt: &DateTime, fsp_tt: u8) -> u64 {
    let d = &dt.date;
    (u64::from(d.year) << 50)
        | (u64::from(d.month & 0xf) << 46)
        | (u64::from(d.day & 0x1f) << 41)
        | (u64::from(dt.hour & 0x1f) << 36)
        | (u64::from(dt.minute & 0x3f) << 30)
        | (u64::from(dt.second & 0x3f) << 24)
        | (u64::from(dt.micros & 0xf_ffff) << 4)
        | u64::from(fsp_tt & 0xf)
}

/// Converts a duration in nanoseconds to a `Time` (sub-microsecond digits are dropped;
/// TiDB never stores them).
pub fn duration_from_nanos(ns: i64) -> Result<Time> {
    let negative = ns < 0;
    let abs = ns.unsigned_abs();
    let total_secs = abs / NANOS_PER_SEC as u64;
    let hours = total_secs / 3600;
    let hours = u16::try_from(hours).map_err(|_| Error::BadTime {
        what: "duration",
        raw: ns as u64,
    })?;
    Ok(Time {
        negative,
        hours,
        minutes: ((total_secs / 60) % 60) as u8,
        seconds: (total_secs % 60) as u8,
        micros: ((abs % NANOS_PER_SEC as u64) / NANOS_PER_MICRO as u64) as u32,
    })
}

/// Converts a `Time` to signed nanoseconds.
pub fn duration_to_nanos(t: &Time) -> i64 {
    let secs = i64::from(t.hours) * 3600 + i64::from(t.minutes) * 60 + i64::from(t.seconds);
    let ns = secs * NANOS_PER_SEC + i64::from(t.micros) * NANOS_PER_MICRO;
    if t.negative {
        -ns
    } else {
        ns
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u8, u8) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Converts a UTC datetime (a decoded TIMESTAMP) to seconds since the epoch and micros.
/// The zero datetime maps to `(0, 0)`, MySQL's zero timestamp.
pub fn datetime_to_timestamp(dt: &DateTime) -> Result<(u32, u32)> {
    if *dt == DateTime::default() {
        return Ok((0, 0));
    }
    let d = &dt.date;
    let bad = || Error::BadTime {
        what: "timestamp",
        raw: pack_datetime(dt),
    };
    if d.month == 0 || d.day == 0 {
        return Err(bad());
    }
    let days = days_from_civil(i64::from(d.year), i64::from(d.month), i64::from(d.day));
    let secs = days * 86_400
        + i64::from(dt.hour) * 3600
        + i64::from(dt.minute) * 60
        + i64::from(dt.second);
    let secs = u32::try_from(secs).map_err(|_| bad())?;
    Ok((secs, dt.micros))
}

/// Converts seconds since the epoch (UTC) and micros to a datetime; `(0, 0)` is the zero
/// datetime.
pub fn timestamp_to_datetime(seconds: u32, micros: u32) -> DateTime {
    if seconds == 0 && micros == 0 {
        return DateTime::default();
    }
    let secs = i64::from(seconds);
    let (y, m, d) = civil_from_days(secs / 86_400);
    let rem = secs % 86_400;
    DateTime {
        date: Date {
            year: y as u16,
            month: m,
            day: d,
        },
        hour: (rem / 3600) as u8,
        minute: ((rem / 60) % 60) as u8,
        second: (rem % 60) as u8,
        micros,
    }
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `.ffffff` fraction digits (up to 6; more are truncated) into micros.
fn parse_micros(frac: &str) -> Option<u32> {
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut digits: String = frac.chars().take(6).collect();
    while digits.len() < 6 {
        digits.push('0');
    }
    digits.parse().ok()
}

/// Parses `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` (the form TiDB writes column defaults in).
pub fn parse_datetime(s: &str) -> Result<DateTime> {
    let bad = || Error::BadTimeText {
        what: "datetime",
        text: s.to_owned(),
    };
    let s2 = s.trim();
    let (date, time) = match s2.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t)),
        None => (s2, None),
    };
    let mut dp = date.split('-');
    let (Some(y), Some(m), Some(d), None) = (dp.next(), dp.next(), dp.next(), dp.next()) else {
        return Err(bad());
    };
    let mut dt = DateTime {
        date: Date {
            year: num(y).ok_or_else(bad)?,
            month: num(m).ok_or_else(bad)?,
            day: num(d).ok_or_else(bad)?,
        },
        ..DateTime::default()
    };
    if let Some(t) = time {
        let (hms, frac) = match t.split_once('.') {
            Some((a, b)) => (a, b),
            None => (t, ""),
        };
        let mut tp = hms.split(':');
        let (Some(h), Some(mi), Some(se), None) = (tp.next(), tp.next(), tp.next(), tp.next())
        else {
            return Err(bad());
        };
        dt.hour = num(h).ok_or_else(bad)?;
        dt.minute = num(mi).ok_or_else(bad)?;
        dt.second = num(se).ok_or_else(bad)?;
        dt.micros = parse_micros(frac).ok_or_else(bad)?;
    }
    check_fields(&dt, "datetime", 0).map_err(|_| bad())?;
    Ok(dt)
}

/// Parses `[-]HH:MM:SS[.ffffff]` (hours may exceed 24).
pub fn parse_duration(s: &str) -> Result<Time> {
    let bad = || Error::BadTimeText {
        what: "time",
        text: s.to_owned(),
    };
    let t = s.trim();
    let (negative, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (hms, frac) = match t.split_once('.') {
        Some((a, b)) => (a, b),
        None => (t, ""),
    };
    let mut tp = hms.split(':');
    let (Some(h), Some(m), Some(sec), None) = (tp.next(), tp.next(), tp.next(), tp.next()) else {
        return Err(bad());
    };
    let time = Time {
        negative,
        hours: num(h).ok_or_else(bad)?,
        minutes: num(m).ok_or_else(bad)?,
        seconds: num(sec).ok_or_else(bad)?,
        micros: parse_micros(frac).ok_or_else(bad)?,
    };
    if time.minutes > 59 || time.seconds > 59 {
        return Err(bad());
    }
    Ok(time)
}

fn push_frac(out: &mut String, micros: u32, fsp: u8) {
    let fsp = usize::from(fsp.min(6));
    if fsp > 0 {
        let s = format!("{micros:06}");
        out.push('.');
        out.push_str(&s[..fsp]);
    }
}

/// `YYYY-MM-DD`.
pub fn format_date(d: &Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
}

/// `YYYY-MM-DD HH:MM:SS[.f{fsp}]` (fractional digits truncated to `fsp`).
pub fn format_datetime(dt: &DateTime, fsp: u8) -> String {
    let mut s = format!(
        "{} {:02}:{:02}:{:02}",
        format_date(&dt.date),
        dt.hour,
        dt.minute,
        dt.second
    );
    push_frac(&mut s, dt.micros, fsp);
    s
}

/// `[-]HH:MM:SS[.f{fsp}]`, hours at least two digits (`-838:59:59`).
pub fn format_duration(t: &Time, fsp: u8) -> String {
    let mut s = format!(
        "{}{:02}:{:02}:{:02}",
        if t.negative && (t.hours, t.minutes, t.seconds, t.micros) != (0, 0, 0, 0) {
            "-"
        } else {
            ""
        },
        t.hours,
        t.minutes,
        t.seconds
    );
    push_frac(&mut s, t.micros, fsp);
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dt(y: u16, mo: u8, d: u8, h: u8, mi: u8, s: u8, us: u32) -> DateTime {
        DateTime {
            date: Date {
                year: y,
                month: mo,
                day: d,
            },
            hour: h,
            minute: mi,
            second: s,
            micros: us,
        }
    }

    // tidb pkg/util/rowcodec/rowcodec_test.go TestTypesNewRowCodec: the TIMESTAMP
    // "2011-11-10 11:11:11.999999" decodes to the uint 1840446893366133311.
    #[test]
    fn golden_packed_time_tidb() {
        let t = dt(2011, 11, 10, 11, 11, 11, 999_999);
        assert_eq!(pack_datetime(&t), 1_840_446_893_366_133_311);
        assert_eq!(unpack_datetime(1_840_446_893_366_133_311).unwrap(), t);
    }

    // tikv components/tidb_query_datatype/src/codec/row/v2/encoder_for_test.rs test_encode:
    // "2018-01-19 03:14:07" is written as LE bytes 0,0,0,135,51,230,158,25.
    #[test]
    fn golden_packed_time_tikv() {
        let t = dt(2018, 1, 19, 3, 14, 7, 0);
        let packed = u64::from_le_bytes([0, 0, 0, 135, 51, 230, 158, 25]);
        assert_eq!(pack_datetime(&t), packed);
        assert_eq!(unpack_datetime(packed).unwrap(), t);
    }

    // tidb rowcodec_test.go TestTypesNewRowCodec: TIME "4:00:00" is int 14400000000000.
    #[test]
    fn golden_duration() {
        let t = duration_from_nanos(14_400_000_000_000).unwrap();
        assert_eq!(format_duration(&t, 0), "04:00:00");
        assert_eq!(duration_to_nanos(&t), 14_400_000_000_000);
        let max = parse_duration("-838:59:59").unwrap();
        assert_eq!(format_duration(&max, 0), "-838:59:59");
        assert_eq!(duration_from_nanos(duration_to_nanos(&max)).unwrap(), max);
    }

    #[test]
    fn timestamp_conversion() {
        let t = dt(2038, 1, 19, 3, 14, 7, 123_000);
        assert_eq!(datetime_to_timestamp(&t).unwrap(), (2_147_483_647, 123_000));
        assert_eq!(timestamp_to_datetime(2_147_483_647, 123_000), t);
        assert_eq!(datetime_to_timestamp(&DateTime::default()).unwrap(), (0, 0));
        assert!(datetime_to_timestamp(&dt(1960, 1, 1, 0, 0, 0, 0)).is_err());
        assert_eq!(format_datetime(&t, 3), "2038-01-19 03:14:07.123");
    }

    #[test]
    fn core_time_layout() {
        let t = dt(2024, 2, 29, 23, 59, 58, 654_321);
        let raw = datetime_to_core_time(&t, fsp_tt::DATETIME6);
        assert_eq!(raw & 0xf, 12);
        assert_eq!(core_time_to_datetime(raw).unwrap(), t);
        assert_eq!(raw >> 50, 2024);
    }

    #[test]
    fn parse_errors() {
        assert!(parse_datetime("2020-13-01").is_err());
        assert!(parse_datetime("x").is_err());
        assert!(parse_duration("1:2").is_err());
        assert_eq!(
            parse_datetime("2020-01-02 03:04:05.5").unwrap(),
            dt(2020, 1, 2, 3, 4, 5, 500_000)
        );
        assert!(unpack_datetime(u64::MAX).is_err());
    }

    proptest! {
        #[test]
        fn packed_roundtrip(y in 0u16..=9999, mo in 0u8..=12, d in 0u8..=31, h in 0u8..24, mi in 0u8..60, s in 0u8..60, us in 0u32..1_000_000) {
            let t = dt(y, mo, d, h, mi, s, us);
            prop_assert_eq!(unpack_datetime(pack_datetime(&t)).unwrap(), t);
            prop_assert_eq!(core_time_to_datetime(datetime_to_core_time(&t, fsp_tt::DATE)).unwrap(), t);
        }

        #[test]
        fn timestamp_roundtrip(secs in 1u32.., us in 0u32..1_000_000) {
            let t = timestamp_to_datetime(secs, us);
            prop_assert_eq!(datetime_to_timestamp(&t).unwrap(), (secs, us));
        }

        #[test]
        fn duration_roundtrip(us in -3_020_399_999_999i64..=3_020_399_999_999) {
            let ns = us * 1000;
            prop_assert_eq!(duration_to_nanos(&duration_from_nanos(ns).unwrap()), ns);
        }

        #[test]
        fn random_never_panic(raw: u64, ns: i64, s in ".{0,30}") {
            let _ = unpack_datetime(raw);
            let _ = core_time_to_datetime(raw);
            let _ = duration_from_nanos(ns);
            let _ = parse_datetime(&s);
            let _ = parse_duration(&s);
        }
    }
}

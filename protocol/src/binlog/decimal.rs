//! MySQL's binary DECIMAL (`strings/decimal.cc`: `decimal2bin` / `bin2decimal`), from and to
//! canonical decimal text.
//!
//! DECIMAL(p, s) keeps `p - s` integer digits and `s` fraction digits, each side cut into groups
//! of 9 digits stored as 4-byte big-endian words; a leftover group of k digits takes
//! `DIG2BYTES[k]` bytes. The integer leftover comes first (most significant), the fraction
//! leftover last:
//! ```text
//! +------------------+-------------------+-------------------+-------------------+
//! | int leftover     | full int words    | full frac words   | frac leftover     |
//! | DIG2BYTES[i % 9] | (i / 9) x 4 bytes | (s / 9) x 4 bytes | DIG2BYTES[s % 9]  |
//! +------------------+-------------------+-------------------+-------------------+
//! ```
//! Negative values have every byte inverted; then the top bit of the first byte is flipped, so
//! the encoding sorts bytewise. DECIMAL(10,2) `1234567.89` is `80 12 D6 87 59`.

use super::error::{BinlogError, Result};

const DIG_PER_WORD: usize = 9;
const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
const MAX_PRECISION: u8 = 65;
const MAX_SCALE: u8 = 30;

/// Bytes of a DECIMAL(precision, scale) value.
pub fn bin_size(precision: u8, scale: u8) -> usize {
    let (p, s) = (precision as usize, scale as usize);
    let i = p.saturating_sub(s);
    (i / DIG_PER_WORD) * 4
        + DIG2BYTES[i % DIG_PER_WORD]
        + (s / DIG_PER_WORD) * 4
        + DIG2BYTES[s % DIG_PER_WORD]
}

fn err(precision: u8, scale: u8, reason: &'static str) -> BinlogError {
    BinlogError::Decimal {
        precision,
        scale,
        reason,
    }
}

/// Appends the binary form of `text` as DECIMAL(precision, scale).
///
/// `text` is `[+-]digits[.digits]` (either side may be empty but not both). Integer digits beyond
/// `precision - scale` are an error; fraction digits beyond `scale` must be zeros (no rounding).
pub fn encode_into(text: &str, precision: u8, scale: u8, buf: &mut Vec<u8>) -> Result<()> {
    if precision == 0 || precision > MAX_PRECISION || scale > MAX_SCALE || scale > precision {
        return Err(err(precision, scale, "has an invalid precision/scale"));
    }
    let b = text.as_bytes();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let (int_part, frac_part) = match digits.iter().position(|&c| c == b'.') {
        Some(i) => (&digits[..i], &digits[i + 1..]),
        None => (digits, &digits[digits.len()..]),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.iter().chain(frac_part).all(u8::is_ascii_digit)
    {
        return Err(err(precision, scale, "text is not a decimal number"));
    }
    let int_part = {
        let z = int_part.iter().take_while(|&&c| c == b'0').count();
        &int_part[z..]
    };
    let intg = (precision - scale) as usize;
    let frac = scale as usize;
    if int_part.len() > intg {
        return Err(err(precision, scale, "has too many integer digits"));
    }
    if frac_part.len() > frac && frac_part[frac..].iter().any(|&c| c != b'0') {
        return Err(err(precision, scale, "has too many fraction digits"));
    }
    let frac_part = &frac_part[..frac_part.len().min(frac)];
    let is_zero = int_part.is_empty() && frac_part.iter().all(|&c| c == b'0');
    let mask: u8 = if neg && !is_zero { 0xff } else { 0 };

    let start = buf.len();
    // Integer digits, right-aligned in `intg` positions: digit at position k (0 = most significant)
    // is int_part[k - (intg - len)] or 0.
    let pad = intg - int_part.len();
    let int_digit = |k: usize| -> u32 {
        if k < pad {
            0
        } else {
            u32::from(int_part[k - pad] - b'0')
        }
    };
    let lead = intg % DIG_PER_WORD;
    let mut k = 0;
    let put_group = |buf: &mut Vec<u8>, n: usize, f: &dyn Fn(usize) -> u32, k: &mut usize| {
        let mut v: u32 = 0;
        for _ in 0..n {
            v = v * 10 + f(*k);
            *k += 1;
        }
        let nb = if n == DIG_PER_WORD { 4 } else { DIG2BYTES[n] };
        buf.extend_from_slice(&v.to_be_bytes()[4 - nb..]);
    };
    if lead > 0 {
        put_group(buf, lead, &int_digit, &mut k);
    }
    for _ in 0..intg / DIG_PER_WORD {
        put_group(buf, DIG_PER_WORD, &int_digit, &mut k);
    }
    let frac_digit = |k: usize| -> u32 { frac_part.get(k).map_or(0, |&c| u32::from(c - b'0')) };
    let mut k = 0;
    for _ in 0..frac / DIG_PER_WORD {
        put_group(buf, DIG_PER_WORD, &frac_digit, &mut k);
    }
    if frac % DIG_PER_WORD > 0 {
        put_group(buf, frac % DIG_PER_WORD, &frac_digit, &mut k);
    }
    for x in &mut buf[start..] {
        *x ^= mask;
    }
    if let Some(first) = buf.get_mut(start) {
        *first ^= 0x80;
    }
    Ok(())
}

/// Decodes DECIMAL(precision, scale) from the start of `bin` into canonical text (`-0.50`,
/// `12.00`, `0`): leading integer zeros removed, exactly `scale` fraction digits. Returns the text
/// and the number of bytes consumed.
pub fn decode(bin: &[u8], precision: u8, scale: u8) -> Result<(String, usize)> {
    if precision == 0 || precision > MAX_PRECISION || scale > MAX_SCALE || scale > precision {
        return Err(err(precision, scale, "has an invalid precision/scale"));
    }
    let size = bin_size(precision, scale);
    let Some(src) = bin.get(..size) else {
        return Err(BinlogError::Malformed {
            what: "decimal",
            offset: bin.len(),
        });
    };
    let neg = src[0] & 0x80 == 0;
    let mask: u8 = if neg { 0xff } else { 0 };
    let byte = |i: usize| -> u8 {
        if i == 0 {
            (src[0] ^ 0x80) ^ mask
        } else {
            src[i] ^ mask
        }
    };
    let mut pos = 0;
    let mut read = |n: usize| -> u32 {
        let mut v: u32 = 0;
        for _ in 0..n {
            v = (v << 8) | u32::from(byte(pos));
            pos += 1;
        }
        v
    };
    let intg = (precision - scale) as usize;
    let frac = scale as usize;
    let mut int_digits = String::new();
    let lead = intg % DIG_PER_WORD;
    let push = |s: &mut String, v: u32, n: usize| -> Result<()> {
        if n < 10 && u64::from(v) >= 10u64.pow(n as u32) {
            return Err(BinlogError::Malformed {
                what: "decimal digit group",
                offset: 0,
            });
        }
        let t = format!("{v:0n$}");
        s.push_str(&t);
        Ok(())
    };
    if lead > 0 {
        let v = read(DIG2BYTES[lead]);
        push(&mut int_digits, v, lead)?;
    }
    for _ in 0..intg / DIG_PER_WORD {
        let v = read(4);
        push(&mut int_digits, v, DIG_PER_WORD)?;
    }
    let mut frac_digits = String::new();
    for _ in 0..frac / DIG_PER_WORD {
        let v = read(4);
        push(&mut frac_digits, v, DIG_PER_WORD)?;
    }
    if frac % DIG_PER_WORD > 0 {
        let n = frac % DIG_PER_WORD;
        let v = read(DIG2BYTES[n]);
        push(&mut frac_digits, v, n)?;
    }
    let int_trim = int_digits.trim_start_matches('0');
    let is_zero = int_trim.is_empty() && frac_digits.bytes().all(|c| c == b'0');
    let mut out = String::with_capacity(int_trim.len() + frac_digits.len() + 3);
    if neg && !is_zero {
        out.push('-');
    }
    out.push_str(if int_trim.is_empty() { "0" } else { int_trim });
    if !frac_digits.is_empty() {
        out.push('.');
        out.push_str(&frac_digits);
    }
    Ok((out, size))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn enc(t: &str, p: u8, s: u8) -> Vec<u8> {
        let mut b = Vec::new();
        encode_into(t, p, s, &mut b).unwrap();
        b
    }

    #[test]
    fn golden_examples_from_decimal_cc() {
        // The decimal2bin comment in mysql-server strings/decimal.cc: DECIMAL(10,2).
        assert_eq!(enc("1234567.89", 10, 2), [0x80, 0x12, 0xD6, 0x87, 0x59]);
        assert_eq!(enc("-1234567.89", 10, 2), [0x7F, 0xED, 0x29, 0x78, 0xA6]);
        // The longer example there: DECIMAL(14,4) 1234567890.1234 -> 81 0D FB 38 D2 04 D2.
        assert_eq!(
            enc("1234567890.1234", 14, 4),
            [0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2]
        );
        assert_eq!(
            enc("-1234567890.1234", 14, 4),
            [0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D]
        );
    }

    #[test]
    fn round_trips_and_canonical_text() {
        for (t, p, s, want) in [
            ("0", 10, 2, "0.00"),
            ("-0.00", 10, 2, "0.00"),
            (".5", 3, 1, "0.5"),
            ("-12.", 5, 0, "-12"),
            (
                "99999999999999999999999999999999999.999999999999999999999999999999",
                65,
                30,
                "99999999999999999999999999999999999.999999999999999999999999999999",
            ),
            ("1.50", 4, 1, "1.5"),
        ] {
            let b = enc(t, p, s);
            assert_eq!(b.len(), bin_size(p, s));
            assert_eq!(decode(&b, p, s).unwrap().0, want, "{t}");
        }
    }

    #[test]
    fn rejects_what_does_not_fit() {
        let mut b = Vec::new();
        assert!(encode_into("123", 4, 2, &mut b).is_err());
        assert!(encode_into("1.234", 4, 2, &mut b).is_err());
        assert!(encode_into("1e5", 10, 0, &mut b).is_err());
        assert!(encode_into("", 10, 0, &mut b).is_err());
        assert!(encode_into("-", 10, 0, &mut b).is_err());
        assert!(encode_into("1", 0, 0, &mut b).is_err());
        assert!(b.is_empty());
        assert!(decode(&[0x80], 10, 2).is_err());
    }
}

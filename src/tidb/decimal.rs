//! TiDB/MySQL binary DECIMAL (`MyDecimal.ToBin`/`FromBin`, MySQL `decimal2bin`/`bin2decimal`)
//! to and from canonical decimal text.
//!
//! ```text
//! precision P, frac F, intg = P - F
//! [lead int digits: intg % 9 -> DIG2BYTES bytes][intg / 9 words x 4 bytes]
//! [frac / 9 words x 4 bytes][tail frac digits: frac % 9 -> DIG2BYTES bytes]
//! every group big-endian; negative: every byte inverted; finally byte 0 ^= 0x80
//! ```
//!
//! Example (MySQL `strings/decimal.cc`, comment of `decimal2bin`): 1234567890.1234 with
//! precision 14, frac 4 is `81 0D FB 38 D2 04 D2`.
//!
//! Canonical text (what [`decode_bin`] returns and `Value::Decimal` carries): optional `-`,
//! integer digits without leading zeros (at least one `0`), then `.` and exactly `frac` digits
//! when frac > 0. Negative zero is written without the sign.

use super::error::{take, Error, Result};

const DIG_PER_WORD: usize = 9;
const WORD_SIZE: usize = 4;
const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
/// MySQL's maximum DECIMAL precision.
pub const MAX_PRECISION: u8 = 65;
/// MySQL's maximum DECIMAL scale.
pub const MAX_FRAC: u8 = 30;

fn check_size(precision: u8, frac: u8) -> Result<()> {
    if precision == 0 || precision > MAX_PRECISION || frac > MAX_FRAC || frac > precision {
        return Err(Error::BadDecimalSize { precision, frac });
    }
    Ok(())
}

/// Size in bytes of the binary form for `precision`/`frac` (`DecimalBinSize`).
pub fn bin_size(precision: u8, frac: u8) -> Result<usize> {
    check_size(precision, frac)?;
    let intg = usize::from(precision - frac);
    let frac = usize::from(frac);
    Ok(intg / DIG_PER_WORD * WORD_SIZE
        + DIG2BYTES[intg % DIG_PER_WORD]
        + frac / DIG_PER_WORD * WORD_SIZE
        + DIG2BYTES[frac % DIG_PER_WORD])
}

/// Decodes the binary form for `precision`/`frac` into canonical text; returns the text and
/// the number of bytes consumed.
pub fn decode_bin(b: &[u8], precision: u8, frac: u8) -> Result<(String, usize)> {
    let mut s = String::new();
    let n = decode_bin_into(b, precision, frac, &mut s)?;
    Ok((s, n))
}

/// Like [`decode_bin`], writing the text into `out` (cleared first) without allocating when
/// `out` has capacity: the row decoder's hot path.
pub fn decode_bin_into(b: &[u8], precision: u8, frac: u8, out: &mut String) -> Result<usize> {
    let size = bin_size(precision, frac)?;
    let (body, _) = take(b, size, "decimal")?;
    let intg = usize::from(precision - frac);
    let fracu = usize::from(frac);
    let negative = body[0] & 0x80 == 0;
    let mask = if negative { 0xFF } else { 0 };
    // At most 65 digits; groups are written right-aligned into this buffer.
    let mut digits = [0u8; 72];
    let mut nd = 0usize;
    let mut pos = 0usize;
    let mut group = |ndig: usize, nd: &mut usize, pos: &mut usize| -> Result<()> {
        let len = if ndig == DIG_PER_WORD {
            WORD_SIZE
        } else {
            DIG2BYTES[ndig]
        };
        let mut v = 0u32;
        for i in 0..len {
            let mut byte = body[*pos + i];
            if *pos + i == 0 {
                byte ^= 0x80;
            }
            v = (v << 8) | u32::from(byte ^ mask);
        }
        *pos += len;
        if u64::from(v) >= 10u64.pow(ndig as u32) {
            return Err(Error::Corrupted {
                what: "decimal",
                detail: "digit group out of range",
            });
        }
        for i in (0..ndig).rev() {
            digits[*nd + i] = (v % 10) as u8;
            v /= 10;
        }
        *nd += ndig;
        Ok(())
    };
    let lead = intg % DIG_PER_WORD;
    if lead > 0 {
        group(lead, &mut nd, &mut pos)?;
    }
    for _ in 0..intg / DIG_PER_WORD {
        group(DIG_PER_WORD, &mut nd, &mut pos)?;
    }
    let int_len = nd;
    for _ in 0..fracu / DIG_PER_WORD {
        group(DIG_PER_WORD, &mut nd, &mut pos)?;
    }
    let tail = fracu % DIG_PER_WORD;
    if tail > 0 {
        group(tail, &mut nd, &mut pos)?;
    }
    debug_assert_eq!(pos, size);
    let (int_part, frac_part) = digits[..nd].split_at(int_len);
    let first_nz = int_part.iter().position(|&d| d != 0).unwrap_or(int_len);
    let int_part = &int_part[first_nz..];
    let all_zero = int_part.is_empty() && frac_part.iter().all(|&d| d == 0);
    // Sign, digits, point: at most 1 + 65 + 1 ASCII bytes.
    let mut text = [0u8; 72];
    let mut n = 0usize;
    let mut put = |c: u8| {
        text[n] = c;
        n += 1;
    };
    if negative && !all_zero {
        put(b'-');
    }
    if int_part.is_empty() {
        put(b'0');
    }
    for &d in int_part {
        put(b'0' + d);
    }
    if !frac_part.is_empty() {
        put(b'.');
        for &d in frac_part {
            put(b'0' + d);
        }
    }
    out.clear();
    out.push_str(
        std::str::from_utf8(&text[..n]).map_err(|_| Error::InvalidUtf8 {
            what: "decimal text",
        })?,
    );
    Ok(size)
}

/// Decimal text split into sign, integer digits (no leading zeros) and fraction digits.
struct Parsed {
    negative: bool,
    int: Vec<u8>,
    frac: Vec<u8>,
}

fn parse(text: &str) -> Result<Parsed> {
    let bad = |detail| Error::BadDecimalText {
        text: text.to_owned(),
        detail,
    };
    let t = text.trim();
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (i, f) = match t.find('.') {
        Some(p) => (&t[..p], &t[p + 1..]),
        None => (t, ""),
    };
    if i.is_empty() && f.is_empty() {
        return Err(bad("no digits"));
    }
    if !i.bytes().all(|c| c.is_ascii_digit()) || !f.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad("not a plain decimal number"));
    }
    let int: Vec<u8> = i
        .trim_start_matches('0')
        .bytes()
        .map(|c| c - b'0')
        .collect();
    let frac: Vec<u8> = f.bytes().map(|c| c - b'0').collect();
    Ok(Parsed {
        negative,
        int,
        frac,
    })
}

/// Rounds (half away from zero, MySQL's HALF_UP) or zero-pads the fraction to `frac` digits.
fn round_to(p: &mut Parsed, frac: usize) {
    if p.frac.len() <= frac {
        p.frac.resize(frac, 0);
        return;
    }
    let round_up = p.frac[frac] >= 5;
    p.frac.truncate(frac);
    if !round_up {
        return;
    }
    for d in p.frac.iter_mut().rev() {
        if *d == 9 {
            *d = 0;
        } else {
            *d += 1;
            return;
        }
    }
    for d in p.int.iter_mut().rev() {
        if *d == 9 {
            *d = 0;
        } else {
            *d += 1;
            return;
        }
    }
    p.int.insert(0, 1);
}

fn is_zero(p: &Parsed) -> bool {
    p.int.iter().all(|&d| d == 0) && p.frac.iter().all(|&d| d == 0)
}

fn to_text(p: &Parsed) -> String {
    let mut s = String::with_capacity(p.int.len() + p.frac.len() + 3);
    if p.negative && !is_zero(p) {
        s.push('-');
    }
    if p.int.is_empty() {
        s.push('0');
    }
    s.extend(p.int.iter().map(|&d| char::from(b'0' + d)));
    if !p.frac.is_empty() {
        s.push('.');
        s.extend(p.frac.iter().map(|&d| char::from(b'0' + d)));
    }
    s
}

/// Rounds or pads decimal text to exactly `frac` fraction digits, in canonical form.
pub fn rescale(text: &str, frac: u8) -> Result<String> {
    let mut p = parse(text)?;
    round_to(&mut p, usize::from(frac));
    Ok(to_text(&p))
}

/// Canonical form of decimal text, keeping its own number of fraction digits.
pub fn canonical(text: &str) -> Result<String> {
    let p = parse(text)?;
    Ok(to_text(&p))
}

/// The precision and frac TiDB infers for a decimal value (`MyDecimal.PrecisionAndFrac`):
/// significant integer digits plus fraction digits, at least 1.
pub fn precision_and_frac(text: &str) -> Result<(u8, u8)> {
    let p = parse(text)?;
    let frac = p.frac.len().min(usize::from(MAX_FRAC));
    let prec = (p.int.len() + frac).clamp(1, usize::from(MAX_PRECISION));
    Ok((prec as u8, frac as u8))
}

fn digits_value(d: &[u8]) -> u32 {
    d.iter().fold(0u32, |acc, &x| acc * 10 + u32::from(x))
}

/// Appends the binary form of decimal `text` for `precision`/`frac`. Extra fraction digits are
/// truncated, as `MyDecimal.ToBin` does (it reports `ErrTruncated`); an integer part wider than
/// `precision - frac` is an error (TiDB saturates and reports `ErrOverflow`).
pub fn encode_bin(buf: &mut Vec<u8>, text: &str, precision: u8, frac: u8) -> Result<()> {
    check_size(precision, frac)?;
    let mut p = parse(text)?;
    p.frac.resize(usize::from(frac), 0);
    let intg = usize::from(precision - frac);
    if p.int.len() > intg {
        return Err(Error::BadDecimalText {
            text: text.to_owned(),
            detail: "integer part exceeds the precision",
        });
    }
    let negative = p.negative && !is_zero(&p);
    let mut int = vec![0u8; intg - p.int.len()];
    int.extend_from_slice(&p.int);
    let start = buf.len();
    let lead = intg % DIG_PER_WORD;
    let put = |digits: &[u8], nbytes: usize, buf: &mut Vec<u8>| {
        let v = digits_value(digits);
        buf.extend_from_slice(&v.to_be_bytes()[WORD_SIZE - nbytes..]);
    };
    if lead > 0 {
        put(&int[..lead], DIG2BYTES[lead], buf);
    }
    for w in int[lead..].chunks(DIG_PER_WORD) {
        put(w, WORD_SIZE, buf);
    }
    let tail = usize::from(frac) % DIG_PER_WORD;
    let full = usize::from(frac) - tail;
    for w in p.frac[..full].chunks(DIG_PER_WORD) {
        put(w, WORD_SIZE, buf);
    }
    if tail > 0 {
        put(&p.frac[full..], DIG2BYTES[tail], buf);
    }
    if negative {
        for b in &mut buf[start..] {
            *b = !*b;
        }
    }
    if let Some(b) = buf.get_mut(start) {
        *b ^= 0x80;
    }
    Ok(())
}

/// Appends `precision, frac, bin` as `codec.EncodeDecimal`: precision 0 means "use the
/// value's own precision and frac"; frac is capped at 30.
pub fn encode_datum_payload(buf: &mut Vec<u8>, text: &str, precision: u8, frac: u8) -> Result<()> {
    let (precision, frac) = if precision == 0 {
        precision_and_frac(text)?
    } else {
        (precision, frac.min(MAX_FRAC))
    };
    buf.push(precision);
    buf.push(frac);
    encode_bin(buf, text, precision, frac)
}

/// Decodes `precision, frac, bin` (the v2 payload and the decimal datum body); returns the
/// canonical text with the stored frac, the stored precision and frac, and the rest.
pub fn decode_datum_payload(b: &[u8]) -> Result<(String, u8, u8, &[u8])> {
    let (hdr, rest) = take(b, 2, "decimal header")?;
    let (precision, frac) = (hdr[0], hdr[1]);
    let (text, n) = decode_bin(rest, precision, frac)?;
    Ok((text, precision, frac, &rest[n..]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(text: &str, p: u8, f: u8) -> Vec<u8> {
        let mut b = Vec::new();
        encode_bin(&mut b, text, p, f).unwrap();
        b
    }

    // MySQL strings/decimal.cc, comment above decimal2bin(): the documented example value.
    #[test]
    fn golden_mysql_doc_example() {
        let b = enc("1234567890.1234", 14, 4);
        assert_eq!(b, [0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2]);
        assert_eq!(
            decode_bin(&b, 14, 4).unwrap(),
            ("1234567890.1234".into(), 7)
        );
        let n = enc("-1234567890.1234", 14, 4);
        assert_eq!(n, [0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D]);
        assert_eq!(decode_bin(&n, 14, 4).unwrap().0, "-1234567890.1234");
    }

    // tikv components/tidb_query_datatype/src/codec/row/v2/encoder_for_test.rs test_encode:
    // Decimal::from(1) is written as `1, 0, 129` (precision 1, frac 0, 0x81).
    #[test]
    fn golden_tikv_row_decimal() {
        let mut b = Vec::new();
        encode_datum_payload(&mut b, "1", 0, 0).unwrap();
        assert_eq!(b, [1, 0, 129]);
        assert_eq!(decode_datum_payload(&b).unwrap().0, "1");
    }

    // tidb pkg/types/mydecimal_test.go TestToBinFromBin: FromString -> ToBin -> FromBin ->
    // ToString. Cases TiDB reports as ErrOverflow (it saturates) are errors here.
    #[test]
    fn tidb_to_bin_from_bin_cases() {
        let z43 = "0".repeat(43);
        let z29 = "0".repeat(29);
        let c1 = format!("{z43}.000000000000123000000000000000");
        let c2 = format!("{z29}.00000000000012300");
        let c3 = format!("{z43}.0000000000001234000000000000000");
        let c4 = format!("{z29}.000000000000123400");
        let cases: Vec<(&str, u8, u8, Option<&str>)> = vec![
            ("-10.55", 4, 2, Some("-10.55")),
            (
                "0.0123456789012345678912345",
                30,
                25,
                Some("0.0123456789012345678912345"),
            ),
            ("12345", 5, 0, Some("12345")),
            ("12345", 10, 3, Some("12345.000")),
            ("123.45", 10, 3, Some("123.450")),
            ("-123.45", 20, 10, Some("-123.4500000000")),
            (".00012345000098765", 15, 14, Some("0.00012345000098")),
            (".00012345000098765", 22, 20, Some("0.00012345000098765000")),
            (".12345000098765", 30, 20, Some("0.12345000098765000000")),
            (
                "-.000000012345000098765",
                30,
                20,
                Some("-0.00000001234500009876"),
            ),
            ("1234500009876.5", 30, 5, Some("1234500009876.50000")),
            ("111111111.11", 10, 2, None),
            ("000000000.01", 7, 3, Some("0.010")),
            ("123.4", 10, 2, Some("123.40")),
            ("1000", 3, 0, None),
            ("0.1", 1, 1, Some("0.1")),
            ("0.100", 1, 1, Some("0.1")),
            ("0.1000", 1, 1, Some("0.1")),
            ("0.10000", 1, 1, Some("0.1")),
            ("0.100000", 1, 1, Some("0.1")),
            ("0.1000000", 1, 1, Some("0.1")),
            ("0.10", 1, 1, Some("0.1")),
            (&c1, 15, 15, Some("0.000000000000123")),
            (&c2, 15, 15, Some("0.000000000000123")),
            (&c3, 16, 16, Some("0.0000000000001234")),
            (&c4, 16, 16, Some("0.0000000000001234")),
            ("0.1", 2, 2, Some("0.10")),
            ("0.10", 3, 3, Some("0.100")),
            ("0.1", 3, 1, Some("0.1")),
            ("0.0000000000001234", 32, 17, Some("0.00000000000012340")),
            ("0.0000000000001234", 20, 20, Some("0.00000000000012340000")),
        ];
        for (input, p, f, out) in cases {
            let mut b = Vec::new();
            let r = encode_bin(&mut b, input, p, f);
            match out {
                Some(out) => {
                    r.unwrap();
                    assert_eq!(decode_bin(&b, p, f).unwrap().0, out, "{input}");
                }
                None => assert!(r.is_err(), "{input}"),
            }
        }
        // Same test, errTests: illegal precision/frac.
        for (p, f) in [(82u8, 1u8), (10, 31)] {
            assert!(encode_bin(&mut Vec::new(), "1", p, f).is_err());
        }
    }

    #[test]
    fn errors() {
        assert!(bin_size(0, 0).is_err());
        assert!(bin_size(66, 0).is_err());
        assert!(bin_size(10, 31).is_err());
        assert!(bin_size(5, 6).is_err());
        assert!(decode_bin(&[0x81], 14, 4).is_err());
        // word value >= 1e9
        assert!(decode_bin(&[0xff, 0xff, 0xff, 0xff], 9, 0).is_err());
        assert!(encode_bin(&mut Vec::new(), "abc", 5, 0).is_err());
        assert!(encode_bin(&mut Vec::new(), "1e5", 5, 0).is_err());
    }

    #[test]
    fn rescale_rounds_half_up() {
        assert_eq!(rescale("11.9900", 3).unwrap(), "11.990");
        assert_eq!(rescale("9.995", 2).unwrap(), "10.00");
        assert_eq!(rescale("-9.995", 2).unwrap(), "-10.00");
        assert_eq!(rescale("-0.001", 2).unwrap(), "0.00");
        assert_eq!(rescale("5", 2).unwrap(), "5.00");
        assert_eq!(precision_and_frac("0.5").unwrap(), (1, 1));
        assert_eq!(precision_and_frac("11.9900").unwrap(), (6, 4));
        assert_eq!(precision_and_frac("0").unwrap(), (1, 0));
    }

    proptest! {
        #[test]
        fn text_bin_text(neg: bool, int in "[0-9]{0,20}", frac in "[0-9]{0,12}", extra_p in 0u8..10) {
            let text = format!("{}{}.{}", if neg { "-" } else { "" }, if int.is_empty() { "0" } else { &int }, frac);
            let f = frac.len() as u8;
            let i = int.trim_start_matches('0').len() as u8;
            let p = (i + f + extra_p).max(1);
            let mut b = Vec::new();
            encode_bin(&mut b, &text, p, f).unwrap();
            prop_assert_eq!(b.len(), bin_size(p, f).unwrap());
            let (back, n) = decode_bin(&b, p, f).unwrap();
            prop_assert_eq!(n, b.len());
            prop_assert_eq!(back, canonical(&text).unwrap());
        }

        #[test]
        fn bin_order(a in -1_000_000i64..1_000_000, b in -1_000_000i64..1_000_000) {
            // binary decimals of the same precision/frac compare like the numbers
            let ta = format!("{}.{:02}", a / 100, (a % 100).abs());
            let ta = if a < 0 && a / 100 == 0 { format!("-{ta}") } else { ta };
            let tb = format!("{}.{:02}", b / 100, (b % 100).abs());
            let tb = if b < 0 && b / 100 == 0 { format!("-{tb}") } else { tb };
            let (ea, eb) = (enc(&ta, 12, 2), enc(&tb, 12, 2));
            prop_assert_eq!(a.cmp(&b), ea.cmp(&eb), "{} {}", ta, tb);
        }

        #[test]
        fn random_bytes_never_panic(b: Vec<u8>, p: u8, f: u8) {
            let _ = decode_bin(&b, p, f);
            let _ = decode_datum_payload(&b);
        }
    }
}

//! Row images of WRITE/UPDATE/DELETE_ROWS events rendered as `mysqlbinlog -vv` does
//! (`@1=… /* TYPE meta=… nullable=… is_null=… */`).
//!
//! The table's column types and metadata come from its TABLE_MAP; the values are decoded here
//! from the raw row bytes, column by column, so that every value a MySQL or MariaDB server can
//! write (negative TIME2 with fractions included) is shown, and a malformed image is an error
//! naming the column, never a crash.
//!
//! ```text
//! row image = null-bitmap(ceil(present/8)) value(present, non-NULL column)*
//! ```

use std::fmt::Write as _;

use mysql_common::binlog::events::TableMapEvent;

/// A malformed row image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("row image truncated or malformed at column {column} ({what})")]
pub struct RowImageError {
    /// 1-based column number, as `@N` shows it.
    pub column: usize,
    pub what: &'static str,
}

/// A column as the TABLE_MAP describes it.
#[derive(Debug, Clone)]
pub struct ColumnMeta {
    /// Binlog type code; for STRING columns, the real type (ENUM/SET/STRING) from the metadata.
    pub code: u8,
    /// Type metadata, decoded: max length, pack length, fsp, (precision, scale) or bit count.
    pub meta: u32,
    pub nullable: bool,
    /// From the SIGNEDNESS optional metadata; `None` when the table map has none.
    pub unsigned: Option<bool>,
    /// The metadata number `mysqlbinlog` prints.
    pub shown_meta: u32,
}

/// Reads the column descriptions out of a TABLE_MAP event.
pub fn columns_of(tme: &TableMapEvent<'_>) -> Vec<ColumnMeta> {
    let n = tme.columns_count() as usize;
    let mut signedness = None;
    for field in tme.iter_optional_meta().flatten() {
        if let mysql_common::binlog::events::OptionalMetadataField::Signedness(bits) = field {
            signedness = Some(bits.to_bitvec());
        }
    }
    let mut numeric_idx = 0usize;
    let mut cols = Vec::with_capacity(n);
    for i in 0..n {
        let raw = tme
            .get_raw_column_type(i)
            .ok()
            .flatten()
            .map(|t| t as u8)
            .unwrap_or(0);
        let m = tme.get_column_metadata(i).unwrap_or_default();
        let (code, meta, shown) = decode_meta(raw, m);
        let unsigned = if is_numeric(code) {
            let u = signedness
                .as_ref()
                .and_then(|b| b.get(numeric_idx).map(|b| *b));
            numeric_idx += 1;
            u
        } else {
            None
        };
        let nullable = tme.null_bitmask().get(i).map(|b| *b).unwrap_or(true);
        cols.push(ColumnMeta {
            code,
            meta,
            nullable,
            unsigned,
            shown_meta: shown,
        });
    }
    cols
}

fn is_numeric(code: u8) -> bool {
    matches!(code, 1 | 2 | 3 | 4 | 5 | 8 | 9 | 246)
}

/// (real type code, decoded metadata, the number mysqlbinlog prints).
fn decode_meta(code: u8, m: &[u8]) -> (u8, u32, u32) {
    let b = |i: usize| u32::from(m.get(i).copied().unwrap_or(0));
    match code {
        // STRING: byte0 = real type (with two length bits folded in), byte1 = length low byte.
        254 => {
            let (b0, b1) = (b(0), b(1));
            let shown = b0 << 8 | b1;
            if b0 & 0x30 != 0x30 {
                let len = b1 | (((b0 & 0x30) ^ 0x30) << 4);
                ((b0 | 0x30) as u8, len, shown)
            } else {
                (b0 as u8, b1, shown)
            }
        }
        // VARCHAR, VAR_STRING: 2-byte LE max length. BIT: bits, bytes.
        15 | 253 => (code, b(0) | b(1) << 8, b(0) | b(1) << 8),
        16 => (code, b(1) * 8 + b(0), b(1) << 8 | b(0)),
        // NEWDECIMAL: precision, scale.
        246 => (code, b(0) << 8 | b(1), b(0) << 8 | b(1)),
        // ENUM/SET at top level: (real type, pack length).
        247 | 248 => (code, b(1), b(0) << 8 | b(1)),
        4 | 5 | 17 | 18 | 19 | 245 | 252 | 255 => (code, b(0), b(0)),
        _ => (code, 0, 0),
    }
}

pub fn type_name(code: u8) -> &'static str {
    match code {
        1 => "TINYINT",
        2 => "SHORTINT",
        9 => "MEDIUMINT",
        3 => "INT",
        8 => "LONGINT",
        4 => "FLOAT",
        5 => "DOUBLE",
        0 | 246 => "DECIMAL",
        13 => "YEAR",
        10 | 14 => "DATE",
        11 | 19 => "TIME",
        12 | 18 => "DATETIME",
        7 | 17 => "TIMESTAMP",
        15 | 253 => "VARSTRING",
        254 => "STRING",
        247 => "ENUM",
        248 => "SET",
        16 => "BIT",
        245 => "JSON",
        255 => "GEOMETRY",
        249..=252 => "BLOB",
        _ => "UNKNOWN",
    }
}

/// Cursor over a row image.
struct Cur<'a> {
    buf: &'a [u8],
    column: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RowImageError> {
        if self.buf.len() < n {
            return Err(RowImageError {
                column: self.column,
                what,
            });
        }
        let (h, t) = self.buf.split_at(n);
        self.buf = t;
        Ok(h)
    }
    fn le(&mut self, n: usize, what: &'static str) -> Result<u64, RowImageError> {
        let b = self.take(n, what)?;
        Ok(b.iter().rev().fold(0u64, |a, x| a << 8 | u64::from(*x)))
    }
    fn be(&mut self, n: usize, what: &'static str) -> Result<u64, RowImageError> {
        let b = self.take(n, what)?;
        Ok(b.iter().fold(0u64, |a, x| a << 8 | u64::from(*x)))
    }
}

/// Decodes one row image starting at `buf` for the columns whose bit is set in `present`,
/// appending `###   @N=…` lines to `out`. Returns the number of bytes consumed.
pub fn describe_image(
    cols: &[ColumnMeta],
    present: &[bool],
    buf: &[u8],
    out: &mut String,
) -> Result<usize, RowImageError> {
    let n_present = present.iter().filter(|p| **p).count();
    let mut cur = Cur { buf, column: 0 };
    let nulls = cur.take(n_present.div_ceil(8), "null bitmap")?;
    let mut k = 0usize;
    for (i, col) in cols.iter().enumerate() {
        if !present.get(i).copied().unwrap_or(false) {
            continue;
        }
        cur.column = i + 1;
        let is_null = nulls[k / 8] >> (k % 8) & 1 == 1;
        k += 1;
        let _ = write!(out, "###   @{}=", i + 1);
        if is_null {
            out.push_str("NULL");
        } else {
            value(col, &mut cur, out)?;
        }
        let _ = writeln!(
            out,
            " /* {} meta={} nullable={} is_null={} */",
            type_name(col.code),
            col.shown_meta,
            col.nullable as u8,
            is_null as u8
        );
    }
    Ok(buf.len() - cur.buf.len())
}

fn int(
    col: &ColumnMeta,
    cur: &mut Cur<'_>,
    bytes: usize,
    out: &mut String,
) -> Result<(), RowImageError> {
    let u = cur.le(bytes, "integer")?;
    let bits = bytes as u32 * 8;
    let signed = if bits == 64 {
        u as i64
    } else {
        ((u << (64 - bits)) as i64) >> (64 - bits)
    };
    match col.unsigned {
        Some(true) => {
            let _ = write!(out, "{u}");
        }
        Some(false) => {
            let _ = write!(out, "{signed}");
        }
        None if signed < 0 => {
            let _ = write!(out, "{signed} ({u})");
        }
        None => {
            let _ = write!(out, "{signed}");
        }
    }
    Ok(())
}

/// A quoted string as `mysqlbinlog` shows it: bytes as they are, control characters as `\xNN`.
fn quoted(bytes: &[u8], out: &mut String) {
    out.push('\'');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if (c as u32) < 0x20 || c as u32 == 0x7f {
                let _ = write!(out, "\\x{:02x}", c as u32);
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('\'');
}

/// C's `printf("%.{precision}g")`: `precision` significant digits, trailing zeros removed,
/// scientific notation when the exponent is below -4 or not below the precision.
fn format_g(v: f64, precision: usize, out: &mut String) {
    if !v.is_finite() {
        let _ = write!(
            out,
            "{}",
            if v.is_nan() {
                "nan"
            } else if v > 0.0 {
                "inf"
            } else {
                "-inf"
            }
        );
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    let sci = format!("{:.*e}", precision - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= precision as i32 {
        let m = mantissa.trim_end_matches('0').trim_end_matches('.');
        let _ = write!(
            out,
            "{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        let fixed = format!("{v:.decimals$}");
        let fixed = if fixed.contains('.') {
            fixed.trim_end_matches('0').trim_end_matches('.')
        } else {
            &fixed
        };
        out.push_str(fixed);
    }
}

fn frac(cur: &mut Cur<'_>, fsp: u32) -> Result<(u64, usize), RowImageError> {
    // (stored fraction scaled to microseconds, number of bytes)
    Ok(match fsp {
        1 | 2 => (cur.be(1, "fraction")? * 10_000, 1),
        3 | 4 => (cur.be(2, "fraction")? * 100, 2),
        5 | 6 => (cur.be(3, "fraction")?, 3),
        _ => (0, 0),
    })
}

fn push_frac(out: &mut String, micros: u64, fsp: u32) {
    if fsp > 0 {
        let digits = format!("{micros:06}");
        let _ = write!(out, ".{}", &digits[..fsp.min(6) as usize]);
    }
}

fn value(col: &ColumnMeta, cur: &mut Cur<'_>, out: &mut String) -> Result<(), RowImageError> {
    match col.code {
        1 => int(col, cur, 1, out)?,
        2 => int(col, cur, 2, out)?,
        9 => int(col, cur, 3, out)?,
        3 => int(col, cur, 4, out)?,
        8 => int(col, cur, 8, out)?,
        4 => {
            let v = f32::from_bits(cur.le(4, "float")? as u32);
            format_g(f64::from(v), 6, out);
        }
        5 => {
            let v = f64::from_bits(cur.le(8, "double")?);
            format_g(v, 20, out);
        }
        246 => {
            let (p, s) = ((col.meta >> 8) as usize, (col.meta & 0xff) as usize);
            let len = decimal_bin_size(p, s).ok_or(RowImageError {
                column: cur.column,
                what: "decimal precision",
            })?;
            let b = cur.take(len, "decimal")?;
            out.push_str(&decimal_text(b, p, s));
        }
        13 => {
            // As mysqlbinlog prints it: the zero year shows as 1900.
            let y = cur.le(1, "year")?;
            let _ = write!(out, "{:04}", 1900 + y);
        }
        10 | 14 => {
            let v = cur.le(3, "date")?;
            let _ = write!(out, "'{:04}:{:02}:{:02}'", v >> 9, v >> 5 & 15, v & 31);
        }
        11 => {
            let v = cur.le(3, "time")? as u32;
            let _ = write!(
                out,
                "'{:02}:{:02}:{:02}'",
                v / 10000,
                v / 100 % 100,
                v % 100
            );
        }
        12 => {
            let v = cur.le(8, "datetime")?;
            let (d, t) = (v / 1_000_000, v % 1_000_000);
            let _ = write!(
                out,
                "'{:04}-{:02}-{:02} {:02}:{:02}:{:02}'",
                d / 10000,
                d / 100 % 100,
                d % 100,
                t / 10000,
                t / 100 % 100,
                t % 100
            );
        }
        7 => {
            let v = cur.le(4, "timestamp")?;
            let _ = write!(out, "{v}");
        }
        17 => {
            let secs = cur.be(4, "timestamp2")?;
            let (f, _) = frac(cur, col.meta)?;
            let _ = write!(out, "{secs}");
            push_frac(out, f, col.meta);
        }
        18 => {
            let packed = cur.be(5, "datetime2")?.wrapping_sub(0x80_0000_0000);
            let (f, _) = frac(cur, col.meta)?;
            let ym = packed >> 22 & 0x1_ffff;
            let _ = write!(
                out,
                "'{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                ym / 13,
                ym % 13,
                packed >> 17 & 31,
                packed >> 12 & 31,
                packed >> 6 & 63,
                packed & 63
            );
            push_frac(out, f, col.meta);
            out.push('\'');
        }
        19 => time2(col.meta, cur, out)?,
        15 | 253 => {
            let n = if col.meta > 255 { 2 } else { 1 };
            let len = cur.le(n, "string length")? as usize;
            quoted(cur.take(len, "string")?, out);
        }
        254 => {
            let n = if col.meta > 255 { 2 } else { 1 };
            let len = cur.le(n, "string length")? as usize;
            quoted(cur.take(len, "string")?, out);
        }
        247 => {
            let v = cur.le(col.meta.clamp(1, 2) as usize, "enum")?;
            let _ = write!(out, "{v}");
        }
        248 => {
            let pack = col.meta.clamp(1, 8) as usize;
            let v = cur.le(pack, "set")?;
            let _ = write!(out, "b'{:0width$b}'", v, width = pack * 8);
        }
        16 => {
            let bits = col.meta;
            let v = cur.be(bits.div_ceil(8) as usize, "bit")?;
            let _ = write!(out, "b'{:0width$b}'", v, width = bits as usize);
        }
        245 => {
            let len = cur.le(col.meta.clamp(1, 4) as usize, "json length")? as usize;
            let b = cur.take(len, "json")?;
            out.push_str(&json_text(b));
        }
        249..=252 | 255 => {
            let len = cur.le(col.meta.clamp(1, 4) as usize, "blob length")? as usize;
            quoted(cur.take(len, "blob")?, out);
        }
        _ => {
            return Err(RowImageError {
                column: cur.column,
                what: "unsupported column type",
            })
        }
    }
    Ok(())
}

/// TIME2: 3 bytes BE (offset 0x800000) plus fraction; for fsp 5-6 one 48-bit value. Negative
/// values with a fraction store the integer part rounded towards -inf and a complemented fraction.
fn time2(fsp: u32, cur: &mut Cur<'_>, out: &mut String) -> Result<(), RowImageError> {
    // Packed form: (intpart << 24) + micros, signed.
    let packed: i64 = match fsp {
        1 | 2 => {
            let mut int = cur.be(3, "time2")? as i64 - 0x80_0000;
            let mut f = cur.be(1, "fraction")? as i64;
            if int < 0 && f != 0 {
                int += 1;
                f -= 0x100;
            }
            (int << 24) + f * 10_000
        }
        3 | 4 => {
            let mut int = cur.be(3, "time2")? as i64 - 0x80_0000;
            let mut f = cur.be(2, "fraction")? as i64;
            if int < 0 && f != 0 {
                int += 1;
                f -= 0x10000;
            }
            (int << 24) + f * 100
        }
        5 | 6 => cur.be(6, "time2")? as i64 - 0x8000_0000_0000,
        _ => (cur.be(3, "time2")? as i64 - 0x80_0000) << 24,
    };
    let neg = packed < 0;
    let abs = packed.unsigned_abs();
    let hms = abs >> 24;
    let micros = abs & 0xff_ffff;
    let _ = write!(
        out,
        "'{}{:02}:{:02}:{:02}",
        if neg { "-" } else { "" },
        hms >> 12 & 0x3ff,
        hms >> 6 & 63,
        hms & 63
    );
    push_frac(out, micros, fsp);
    out.push('\'');
    Ok(())
}

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

fn decimal_bin_size(p: usize, s: usize) -> Option<usize> {
    if s > p || p > 65 {
        return None;
    }
    let i = p - s;
    Some(i / 9 * 4 + DIG2BYTES[i % 9] + s / 9 * 4 + DIG2BYTES[s % 9])
}

/// Binary DECIMAL (MySQL `decimal2bin` layout) to text with exactly `s` fraction digits.
fn decimal_text(b: &[u8], p: usize, s: usize) -> String {
    if b.is_empty() {
        return "0".to_string();
    }
    let mut bytes = b.to_vec();
    let negative = bytes[0] & 0x80 == 0;
    bytes[0] ^= 0x80;
    if negative {
        for x in bytes.iter_mut() {
            *x = !*x;
        }
    }
    let i = p - s;
    let mut pos = 0usize;
    let mut read = |n: usize| -> u64 {
        let v = bytes[pos..pos + n]
            .iter()
            .fold(0u64, |a, x| a << 8 | u64::from(*x));
        pos += n;
        v
    };
    let mut int = String::new();
    if i % 9 > 0 {
        let _ = write!(int, "{}", read(DIG2BYTES[i % 9]));
    }
    for _ in 0..i / 9 {
        let _ = write!(int, "{:09}", read(4));
    }
    let int = int.trim_start_matches('0');
    let mut text = String::new();
    if negative {
        text.push('-');
    }
    text.push_str(if int.is_empty() { "0" } else { int });
    if s > 0 {
        text.push('.');
        for _ in 0..s / 9 {
            let _ = write!(text, "{:09}", read(4));
        }
        if s % 9 > 0 {
            let _ = write!(text, "{:0w$}", read(DIG2BYTES[s % 9]), w = s % 9);
        }
    }
    text
}

fn json_text(b: &[u8]) -> String {
    use mysql_common::binlog::jsonb;
    use mysql_common::io::ParseBuf;
    use mysql_common::proto::MyDeserialize;
    if b.is_empty() {
        return "'null'".to_string();
    }
    match jsonb::Value::deserialize((), &mut ParseBuf(b)).and_then(|v| v.parse()) {
        Ok(dom) => {
            let mut s = String::new();
            quoted(serde_json::Value::from(dom).to_string().as_bytes(), &mut s);
            s
        }
        Err(e) => format!("<bad json: {e}>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(code: u8, meta: u32) -> ColumnMeta {
        ColumnMeta {
            code,
            meta,
            nullable: true,
            unsigned: None,
            shown_meta: meta,
        }
    }

    #[test]
    fn decimal_vectors_from_the_spec() {
        // DECIMAL(10,2) examples of strings/decimal.cc's decimal2bin.
        assert_eq!(
            decimal_text(&[0x80, 0x12, 0xD6, 0x87, 0x59], 10, 2),
            "1234567.89"
        );
        assert_eq!(
            decimal_text(&[0x7F, 0xED, 0x29, 0x78, 0xA6], 10, 2),
            "-1234567.89"
        );
    }

    #[test]
    fn negative_time2_with_fraction() {
        // -12:34:56.78 at fsp 2: intpart = -(12<<12 | 34<<6 | 56) rounded down, fraction 100-78.
        let hms = (12i64 << 12) | (34 << 6) | 56;
        let int = 0x80_0000 - hms - 1;
        let bytes = [
            (int >> 16) as u8,
            (int >> 8) as u8,
            int as u8,
            (0x100 - 78) as u8,
        ];
        let mut out = String::new();
        let mut cur = Cur {
            buf: &bytes,
            column: 1,
        };
        time2(2, &mut cur, &mut out).expect("valid");
        assert_eq!(out, "'-12:34:56.78'");
    }

    #[test]
    fn printf_g() {
        let g = |v: f64, p: usize| {
            let mut s = String::new();
            format_g(v, p, &mut s);
            s
        };
        // Expected strings are what glibc's printf prints for the same format.
        assert_eq!(g(1.5, 6), "1.5");
        assert_eq!(g(-0.25, 6), "-0.25");
        assert_eq!(g(1e20, 6), "1e+20");
        assert_eq!(g(123456789.0, 6), "1.23457e+08");
        assert_eq!(g(0.0001, 6), "0.0001");
        assert_eq!(g(0.00001, 6), "1e-05");
        assert_eq!(g(2.25, 20), "2.25");
        assert_eq!(g(-1e-300, 20), "-1.0000000000000000251e-300");
        assert_eq!(g(0.1, 20), "0.10000000000000000555");
        assert_eq!(g(f64::from(2.71f32), 6), "2.71");
    }

    #[test]
    fn truncated_values_are_errors() {
        let cols = [col(3, 0), col(15, 20)];
        let mut out = String::new();
        // null bitmap, 4-byte int, varchar claiming 5 bytes with 2 present.
        let img = [0u8, 1, 0, 0, 0, 5, b'a', b'b'];
        let e = describe_image(&cols, &[true, true], &img, &mut out).expect_err("truncated");
        assert_eq!(e.column, 2);
        let ok = [0u8, 1, 0, 0, 0, 2, b'a', b'b'];
        out.clear();
        assert_eq!(describe_image(&cols, &[true, true], &ok, &mut out), Ok(8));
        assert!(out.contains("@2='ab' /* VARSTRING meta=20"), "{out}");
    }
}

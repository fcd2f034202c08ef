//! FLOAT and DOUBLE as MySQL writes them as text (its `my_gcvt`): the significant digits of
//! its `dtoa` mode 4 (the shortest digits that read back as the value when there are at most
//! `precision` of them, else the value rounded to `precision` digits; FLOAT takes 6), laid out
//! in fixed or exponent form by the room a `width` gives and MySQL's rule of keeping the
//! exponent between -14 and 15 in fixed form.
//!
//! MySQL uses two widths: a value sent as a column of a result set is laid out in 69
//! characters ([`PROTOCOL_WIDTH`]); a value turned into a string inside an expression
//! (`CONCAT`, `CAST(… AS CHAR)`) in 12 for FLOAT and 24 for DOUBLE ([`FLOAT_STR_WIDTH`],
//! [`DOUBLE_STR_WIDTH`]). So a FLOAT of 1.5e-10 is `0.00000000015` in a result set and
//! `1.5e-10` inside `CONCAT`, as MySQL 8.0 answers.

/// Width of a FLOAT or DOUBLE in a text result set.
pub const PROTOCOL_WIDTH: i32 = 69;
/// Width of a FLOAT turned into a string.
pub const FLOAT_STR_WIDTH: i32 = 12;
/// Width of a DOUBLE turned into a string.
pub const DOUBLE_STR_WIDTH: i32 = 24;
/// Significant digits of a FLOAT (`FLT_DIG`).
const FLT_DIG: i32 = 6;
/// The largest exponent kept in fixed form (`DBL_DIG`).
const MAX_DECPT_FOR_F_FORMAT: i32 = 15;

/// Significant digits (no trailing zeros) and the decimal point's position (`0.d₁d₂… × 10^decpt`)
/// of `x` (positive, finite) as dtoa's mode 4 gives them for `ndigits`.
fn digits(x: f64, ndigits: i32) -> (Vec<u8>, i32) {
    let shortest = super::text::shortest_exp(x, false);
    let parse = |s: &str| -> (Vec<u8>, i32) {
        let (m, e) = s.split_once('e').unwrap_or((s, "0"));
        let mut d: Vec<u8> = m.bytes().filter(u8::is_ascii_digit).collect();
        while d.len() > 1 && d.last() == Some(&b'0') {
            d.pop();
        }
        (d, e.parse::<i32>().unwrap_or(0) + 1)
    };
    let (d, decpt) = parse(&shortest);
    if d.len() as i32 <= ndigits.max(1) {
        return (d, decpt);
    }
    // Rust's fixed-precision formatting is exact and rounds ties to even, as dtoa does.
    parse(&format!("{:.*e}", (ndigits.max(1) - 1) as usize, x))
}

/// Digits and decimal point of `x` rounded to `k` places after the point (dtoa's mode 5).
fn fixed_digits(x: f64, k: i32) -> (Vec<u8>, i32) {
    let s = format!("{:.*}", k.max(0) as usize, x);
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let all: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    let lead = all.iter().take_while(|&&b| b == b'0').count();
    let mut d = all[lead..].to_vec();
    while d.last() == Some(&b'0') {
        d.pop();
    }
    let decpt = int.len() as i32 - lead as i32;
    (d, decpt)
}

/// `x` as MySQL's `my_gcvt` writes it in `width` characters (`float`: a FLOAT's 6 digits).
pub fn gcvt(x: f64, float: bool, width: i32) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let negative = x.is_sign_negative();
    let a = x.abs();
    let mut width = width - i32::from(negative);
    let precision = if float { width.min(FLT_DIG) } else { width };
    let (mut d, mut decpt) = if a == 0.0 {
        (vec![b'0'], 1)
    } else {
        digits(a, precision)
    };
    let mut len = d.len() as i32;
    let exp_len =
        1 + i32::from(decpt >= 101 || decpt <= -99) + i32::from(decpt >= 11 || decpt <= -9);
    let f_len = if decpt <= 0 {
        len - decpt + 2
    } else if decpt < len {
        len + 1
    } else {
        decpt
    };
    let have_space = f_len <= width;
    let force_e = decpt <= 0 && width <= 2 - decpt && width >= 3 + exp_len;
    let fits_f = (have_space || (decpt <= width && (decpt >= -1 || decpt == -2) && !force_e))
        && (!have_space
            || (decpt > -MAX_DECPT_FOR_F_FORMAT
                && (decpt <= MAX_DECPT_FOR_F_FORMAT || len > decpt)));
    let mut out = String::with_capacity(24);
    if negative {
        out.push('-');
    }
    if fits_f {
        width -= i32::from(decpt < len) + if decpt <= 0 { 1 - decpt } else { 0 };
        if width < len {
            let w = width.max(decpt);
            (d, decpt) = fixed_digits(a, w - decpt);
            len = d.len() as i32;
        }
        if len == 0 {
            return "0".to_owned();
        }
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        }
        for (i, &b) in d.iter().enumerate() {
            out.push(b as char);
            if i as i32 + 1 == decpt && (i as i32 + 1) < len {
                out.push('.');
            }
        }
        if decpt > len {
            out.extend(std::iter::repeat_n('0', (decpt - len) as usize));
        }
    } else {
        let mut exp = decpt - 1;
        if exp < 0 {
            width -= 1;
        }
        width -= 1 + exp_len + i32::from(len > 1);
        if width.max(0) < len {
            (d, decpt) = digits(a, width.max(1));
            exp = decpt - 1;
        }
        out.push(d[0] as char);
        if d.len() > 1 {
            out.push('.');
            out.extend(d[1..].iter().map(|&b| b as char));
        }
        out.push('e');
        out.push_str(&exp.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What MySQL 8.0.31 answers for FLOAT and DOUBLE columns holding these values: in the
    /// result set, and inside `CONCAT` (its string width).
    #[test]
    fn the_texts_mysql_8_writes() {
        let float = |v: f32, w| gcvt(f64::from(v), true, w);
        let double = |v: f64, w| gcvt(v, false, w);
        for (v, result_set, in_string) in [
            (-35763.25f32, "-35763.2", "-35763.2"),
            (64407.875, "64407.9", "64407.9"),
            (123456789.0, "123457000", "123457000"),
            (1.1754944e-38, "1.17549e-38", "1.17549e-38"),
            (0.000012345678, "0.0000123457", "0.0000123457"),
            (1.5e-10, "0.00000000015", "1.5e-10"),
            (1e-14, "0.00000000000001", "1e-14"),
            (1e15, "1e15", "1e15"),
            (1234567.0, "1234570", "1234570"),
            (3.4028234e38, "3.40282e38", "3.40282e38"),
            (999999.5, "1000000", "1000000"),
            (-0.0000123457, "-0.0000123457", "-1.23457e-5"),
            (0.00000123457, "0.00000123457", "1.23457e-6"),
            (100.0, "100", "100"),
            (-0.5, "-0.5", "-0.5"),
            (1.5, "1.5", "1.5"),
        ] {
            assert_eq!(float(v, PROTOCOL_WIDTH), result_set, "FLOAT {v:e}");
            assert_eq!(
                float(v, FLOAT_STR_WIDTH),
                in_string,
                "FLOAT {v:e} in a string"
            );
        }
        for (v, result_set, in_string) in [
            (0.1, "0.1", "0.1"),
            (1e20, "1e20", "1e20"),
            (
                1.7976931348623157e308,
                "1.7976931348623157e308",
                "1.7976931348623157e308",
            ),
            (5e-324, "5e-324", "5e-324"),
            (
                123456789012345678.0,
                "1.2345678901234568e17",
                "1.2345678901234568e17",
            ),
            (0.00001, "0.00001", "0.00001"),
            (1.5e-10, "0.00000000015", "0.00000000015"),
            (1e15, "1e15", "1e15"),
            (123456789012345.0, "123456789012345", "123456789012345"),
            (
                1234567890123456.0,
                "1.234567890123456e15",
                "1.234567890123456e15",
            ),
            (1.5e-15, "0.0000000000000015", "0.0000000000000015"),
            (
                1.2345678901234567e-14,
                "0.000000000000012345678901234567",
                "1.2345678901234567e-14",
            ),
            (
                -1.2345678901234567e-5,
                "-0.000012345678901234568",
                "-0.000012345678901234568",
            ),
            (
                1.2345678901234567e-6,
                "0.0000012345678901234567",
                "0.0000012345678901234567",
            ),
            (
                -1.2345678901234567e-6,
                "-0.0000012345678901234567",
                "-1.2345678901234567e-6",
            ),
            (
                1.2345678901234567e-7,
                "0.00000012345678901234566",
                "1.2345678901234566e-7",
            ),
            (123456789.123, "123456789.123", "123456789.123"),
        ] {
            assert_eq!(double(v, PROTOCOL_WIDTH), result_set, "DOUBLE {v:e}");
            assert_eq!(
                double(v, DOUBLE_STR_WIDTH),
                in_string,
                "DOUBLE {v:e} in a string"
            );
        }
    }
}

//! ABS, FLOOR, CEIL and the bit operators.

use tibinlog_protocol::value::Value;

use super::{unreachable_func, Func};
use crate::sql::charset;
use crate::sql::error::Result;
use crate::sql::expr::{out_of_range, Expr};
use crate::sql::types::{SqlType, TypeKind};
use crate::sql::value as v;

/// ABS, the bit operators, FLOOR, CEIL.
pub(super) fn num(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let arg = |i: usize| args[i].eval(row);
    Ok(match f {
        Func::Abs => {
            let val = arg(0)?;
            match val {
                Value::Null => Value::Null,
                Value::Int(i) => Value::Int(
                    i.checked_abs()
                        .ok_or_else(|| out_of_range("BIGINT", "abs"))?,
                ),
                Value::Decimal(d) => Value::Decimal(d.trim_start_matches('-').to_owned()),
                Value::Double(x) => Value::Double(x.abs()),
                other => other,
            }
        }
        Func::BitAnd | Func::BitOr | Func::BitXor | Func::ShiftLeft | Func::ShiftRight => {
            let (a, b) = (arg(0)?, arg(1)?);
            if matches!(a, Value::Null) || matches!(b, Value::Null) {
                return Ok(Value::Null);
            }
            // MySQL converts each operand to a 64-bit integer: negative values wrap,
            // larger ones saturate.
            let (x, y) = (word(&a, &args[0].ty), word(&b, &args[1].ty));
            Value::UInt(match f {
                Func::BitAnd => x & y,
                Func::BitOr => x | y,
                Func::BitXor => x ^ y,
                Func::ShiftLeft => x.checked_shl(u32::try_from(y).unwrap_or(64)).unwrap_or(0),
                _ => x.checked_shr(u32::try_from(y).unwrap_or(64)).unwrap_or(0),
            })
        }
        Func::Floor | Func::Ceil => {
            let val = arg(0)?;
            let t = &args[0].ty;
            match val {
                Value::Null => Value::Null,
                Value::Int(_) | Value::UInt(_) if t.is_integer() => val,
                Value::Decimal(d) if matches!(t.kind, TypeKind::Decimal { .. }) => {
                    // Exactly, on the text: the integer part, one step down (FLOOR of a
                    // negative) or up (CEIL of a positive) when a fraction is left.
                    let (neg, digits) = d
                        .strip_prefix('-')
                        .map_or((false, d.as_str()), |r| (true, r));
                    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
                    let whole: i64 = int.parse().map_err(|_| out_of_range("BIGINT", "floor"))?;
                    let whole = if neg { -whole } else { whole };
                    let fraction = frac.bytes().any(|b| b != b'0');
                    Value::Int(match (f == Func::Floor, neg, fraction) {
                        (true, true, true) => whole - 1,
                        (false, false, true) => whole + 1,
                        _ => whole,
                    })
                }
                other => {
                    let x = v::to_f64(&other, t);
                    Value::Double(if f == Func::Floor {
                        x.floor()
                    } else {
                        x.ceil()
                    })
                }
            }
        }
        _ => unreachable_func(f)?,
    })
}

/// A value as the 64-bit word MySQL's bit operators and BIT_* aggregates work on: negative
/// integers wrap, larger ones saturate, binary strings of up to 8 bytes are their big-endian
/// number.
pub(crate) fn word(val: &Value, t: &SqlType) -> u64 {
    if let Value::Bytes(b) = val {
        if t.collation == charset::BINARY && b.len() <= 8 {
            return b.iter().fold(0u64, |n, x| (n << 8) | u64::from(*x));
        }
    }
    match v::to_int(val, t) {
        Some(i) if i < 0 => (i.max(i128::from(i64::MIN)) as i64) as u64,
        Some(i) => u64::try_from(i).unwrap_or(u64::MAX),
        None => {
            if v::to_f64(val, t) <= 0.0 {
                0
            } else {
                u64::MAX
            }
        }
    }
}

/// `CONV(n, from_base, to_base)`: the number `n` reads in (as much of its text as is a number
/// in `from_base`), written in `to_base`; a negative base means a signed number. Bases beyond
/// 2..=36 give NULL, as in MySQL.
pub(super) fn conv(args: &[Expr], row: &[Value]) -> Result<Value> {
    let mut vals = Vec::with_capacity(3);
    for a in args {
        let val = a.eval(row)?;
        if matches!(val, Value::Null) {
            return Ok(Value::Null);
        }
        vals.push(val);
    }
    let base = |i: usize| v::to_int(&vals[i], &args[i].ty).unwrap_or(0);
    let (from, to) = (base(1), base(2));
    if !(2..=36).contains(&from.abs()) || !(2..=36).contains(&to.abs()) {
        return Ok(Value::Null);
    }
    let text = v::to_bytes(&vals[0], &args[0].ty);
    let text = String::from_utf8_lossy(&text);
    let text = text.trim_start();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut n: u64 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(from.unsigned_abs() as u32) else {
            break;
        };
        n = n
            .saturating_mul(from.unsigned_abs() as u64)
            .saturating_add(u64::from(d));
    }
    // A negative input is its two's complement unless the source base is signed.
    let mut n = if negative {
        if from < 0 {
            (n.min(1 << 63) as i64).wrapping_neg() as u64
        } else {
            n.wrapping_neg()
        }
    } else {
        n
    };
    let mut out = Vec::new();
    let signed_out = to < 0 && (n as i64) < 0;
    if signed_out {
        n = (n as i64).unsigned_abs();
    }
    let to = to.unsigned_abs() as u64;
    loop {
        let d = (n % to) as u32;
        out.push(std::char::from_digit(d, 36).map_or(b'0', |c| c.to_ascii_uppercase() as u8));
        n /= to;
        if n == 0 {
            break;
        }
    }
    if signed_out {
        out.push(b'-');
    }
    out.reverse();
    Ok(Value::Bytes(out))
}

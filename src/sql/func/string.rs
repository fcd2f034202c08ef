//! String functions: CONCAT, CONCAT_WS, LOWER, UPPER, LENGTH, CHAR_LENGTH, SUBSTRING, LEFT,
//! RIGHT, REPLACE, TRIM, LTRIM, RTRIM, HEX. Strings are taken as the bytes of their text;
//! character counts read them as UTF-8 unless the argument is a binary string.

use tibinlog_protocol::value::Value;

use super::{unreachable_func, Func};
use crate::sql::charset;
use crate::sql::error::Result;
use crate::sql::expr::Expr;
use crate::sql::value as v;

/// CONCAT, CONCAT_WS, LOWER, UPPER, LENGTH, CHAR_LENGTH.
pub(super) fn concat_case(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let arg = |i: usize| args[i].eval(row);
    let text = |val: &Value, i: usize| v::to_bytes(val, &args[i].ty);
    Ok(match f {
        Func::Concat => {
            let mut out = Vec::new();
            for i in 0..args.len() {
                let val = arg(i)?;
                if matches!(val, Value::Null) {
                    return Ok(Value::Null);
                }
                out.extend_from_slice(&text(&val, i));
            }
            Value::Bytes(out)
        }
        Func::ConcatWs => {
            let sep = arg(0)?;
            if matches!(sep, Value::Null) {
                return Ok(Value::Null);
            }
            let sep = text(&sep, 0);
            let mut out = Vec::new();
            let mut first = true;
            for i in 1..args.len() {
                let val = arg(i)?;
                if matches!(val, Value::Null) {
                    continue;
                }
                if !first {
                    out.extend_from_slice(&sep);
                }
                out.extend_from_slice(&text(&val, i));
                first = false;
            }
            Value::Bytes(out)
        }
        Func::Lower | Func::Upper => {
            let val = arg(0)?;
            if matches!(val, Value::Null) {
                return Ok(Value::Null);
            }
            let b = text(&val, 0);
            if args[0].ty.collation == charset::BINARY && args[0].ty.is_string() {
                Value::Bytes(b)
            } else {
                let s = String::from_utf8_lossy(&b);
                Value::Bytes(
                    if f == Func::Lower {
                        s.to_lowercase()
                    } else {
                        s.to_uppercase()
                    }
                    .into_bytes(),
                )
            }
        }
        Func::Length | Func::CharLength => {
            let val = arg(0)?;
            if matches!(val, Value::Null) {
                return Ok(Value::Null);
            }
            let b = text(&val, 0);
            let n = if f == Func::Length || args[0].ty.collation == charset::BINARY {
                b.len()
            } else {
                String::from_utf8_lossy(&b).chars().count()
            };
            Value::Int(n as i64)
        }
        _ => unreachable_func(f)?,
    })
}

/// SUBSTRING, LEFT, RIGHT, REPLACE, TRIM, LTRIM, RTRIM, HEX.
pub(super) fn pieces(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let arg = |i: usize| args[i].eval(row);
    let text = |val: &Value, i: usize| v::to_bytes(val, &args[i].ty);
    Ok(match f {
        Func::Substring | Func::Left | Func::Right => {
            let val = arg(0)?;
            if matches!(val, Value::Null) {
                return Ok(Value::Null);
            }
            let mut ints = Vec::new();
            for (i, a) in args.iter().enumerate().skip(1) {
                let x = arg(i)?;
                if matches!(x, Value::Null) {
                    return Ok(Value::Null);
                }
                ints.push(v::to_int(&x, &a.ty).unwrap_or(0));
            }
            let s = String::from_utf8_lossy(&text(&val, 0)).into_owned();
            let chars: Vec<char> = s.chars().collect();
            let len = chars.len() as i128;
            let (start, count) = match f {
                Func::Left => (0, ints[0].max(0)),
                Func::Right => {
                    let n = ints[0].clamp(0, len);
                    (len - n, n)
                }
                _ => {
                    let pos = ints[0];
                    let start = if pos > 0 {
                        pos - 1
                    } else if pos < 0 {
                        len + pos
                    } else {
                        return Ok(Value::Bytes(Vec::new()));
                    };
                    if start < 0 || start >= len {
                        return Ok(Value::Bytes(Vec::new()));
                    }
                    (start, ints.get(1).copied().unwrap_or(len).max(0))
                }
            };
            let start = start.clamp(0, len) as usize;
            let end = (start as i128 + count).clamp(0, len) as usize;
            Value::Bytes(chars[start..end].iter().collect::<String>().into_bytes())
        }
        Func::Replace => {
            let (a, from, to) = (arg(0)?, arg(1)?, arg(2)?);
            if [&a, &from, &to].iter().any(|x| matches!(x, Value::Null)) {
                return Ok(Value::Null);
            }
            let (a, from, to) = (text(&a, 0), text(&from, 1), text(&to, 2));
            if from.is_empty() {
                return Ok(Value::Bytes(a));
            }
            let mut out = Vec::with_capacity(a.len());
            let mut i = 0;
            while i < a.len() {
                if a[i..].starts_with(&from) {
                    out.extend_from_slice(&to);
                    i += from.len();
                } else {
                    out.push(a[i]);
                    i += 1;
                }
            }
            Value::Bytes(out)
        }
        Func::Trim | Func::Ltrim | Func::Rtrim => {
            let val = arg(0)?;
            if matches!(val, Value::Null) {
                return Ok(Value::Null);
            }
            let b = text(&val, 0);
            let start = if f == Func::Rtrim {
                0
            } else {
                b.iter().position(|&c| c != b' ').unwrap_or(b.len())
            };
            let end = if f == Func::Ltrim {
                b.len()
            } else {
                b.iter().rposition(|&c| c != b' ').map_or(start, |i| i + 1)
            };
            Value::Bytes(b[start..end.max(start)].to_vec())
        }
        Func::Hex => {
            let val = arg(0)?;
            match val {
                Value::Null => Value::Null,
                Value::Int(_) | Value::UInt(_) => {
                    let n = v::to_int(&val, &args[0].ty).unwrap_or(0);
                    Value::Bytes(format!("{:X}", n as u64).into_bytes())
                }
                other => Value::Bytes(hex::encode_upper(text(&other, 0)).into_bytes()),
            }
        }
        _ => unreachable_func(f)?,
    })
}

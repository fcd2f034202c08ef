//! Literals: their values and types as MySQL lexes them, and the negation of a constant.

use sqlparser::ast;
use tibinlog_protocol::value::Value;

use crate::sql::charset;
use crate::sql::error::{Result, SqlError};
use crate::sql::types::SqlType;

use super::tree::{expr, Expr, ExprKind};
use super::typing::const_type;

/// `-v` of a numeric constant, as a constant (`None` when it is not one or overflows).
pub(super) fn negate_const(v: &Value) -> Option<Value> {
    match v {
        Value::Int(i) => i.checked_neg().map(Value::Int),
        Value::UInt(u) if *u == 1u64 << 63 => Some(Value::Int(i64::MIN)),
        Value::UInt(u) => i64::try_from(*u).ok().map(|i| Value::Int(-i)),
        Value::Double(f) => Some(Value::Double(-f)),
        Value::Decimal(d) => Some(Value::Decimal(match d.strip_prefix('-') {
            Some(r) => r.to_owned(),
            None => format!("-{d}"),
        })),
        _ => None,
    }
}

/// A literal's value and type (numbers as MySQL lexes them: integers that fit are integers,
/// a `.` makes a DECIMAL, an exponent a DOUBLE).
pub fn literal(v: &ast::Value) -> Result<Expr> {
    let val = match v {
        ast::Value::Null => return Ok(expr(ExprKind::Const(Value::Null), SqlType::null())),
        ast::Value::Boolean(b) => Value::Int(i64::from(*b)),
        ast::Value::Number(n, _) => number(n)?,
        ast::Value::SingleQuotedString(s)
        | ast::Value::DoubleQuotedString(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::NationalStringLiteral(s) => Value::Bytes(s.clone().into_bytes()),
        ast::Value::HexStringLiteral(h) => {
            let bytes = hex::decode(if h.len() % 2 == 1 {
                format!("0{h}")
            } else {
                h.clone()
            })
            .map_err(|_| SqlError::unsupported(format!("the literal X'{h}'")))?;
            return Ok(expr(
                ExprKind::Const(Value::Bytes(bytes)),
                SqlType::varchar(h.len().div_ceil(2) as u32, charset::BINARY).not_null(),
            ));
        }
        // b'0101': a bit-value literal, the binary string of its bits (right-aligned).
        ast::Value::SingleQuotedByteStringLiteral(bits)
            if bits.bytes().all(|b| b == b'0' || b == b'1') =>
        {
            let mut bytes = vec![0u8; bits.len().div_ceil(8)];
            for (i, b) in bits.bytes().rev().enumerate() {
                if b == b'1' {
                    let at = bytes.len() - 1 - i / 8;
                    bytes[at] |= 1 << (i % 8);
                }
            }
            let len = bytes.len() as u32;
            return Ok(expr(
                ExprKind::Const(Value::Bytes(bytes)),
                SqlType::varchar(len.max(1), charset::BINARY).not_null(),
            ));
        }
        ast::Value::Placeholder(p) => {
            return Err(SqlError::unsupported(format!("the placeholder {p} here")))
        }
        other => return Err(SqlError::unsupported(format!("the literal {other}"))),
    };
    let ty = const_type(&val);
    Ok(expr(ExprKind::Const(val), ty))
}

/// The value of a number literal.
fn number(n: &str) -> Result<Value> {
    if n.contains(['e', 'E']) {
        return n
            .parse::<f64>()
            .map(Value::Double)
            .map_err(|_| SqlError::unsupported(format!("the number {n}")));
    }
    if n.contains('.') {
        return Ok(Value::Decimal(n.to_owned()));
    }
    if let Ok(i) = n.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = n.parse::<u64>() {
        return Ok(Value::UInt(u));
    }
    Ok(Value::Decimal(n.to_owned()))
}

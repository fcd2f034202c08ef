//! Aggregate functions: COUNT, MIN, MAX, SUM, AVG, GROUP_CONCAT, ANY_VALUE, BIT_AND, BIT_OR,
//! BIT_XOR, with MySQL's result types (COUNT is BIGINT, SUM and AVG of integers or decimals are
//! DECIMAL, of anything else DOUBLE; MIN/MAX keep the argument's type; BIT_* are BIGINT
//! UNSIGNED) and NULL rules (NULL inputs are skipped; no input gives NULL, COUNT gives 0, BIT_AND
//! all ones, BIT_OR and BIT_XOR 0).

use std::cmp::Ordering;
use std::collections::HashSet;

use tibinlog_protocol::value::Value;

use super::charset;
use super::error::{Result, SqlError};
use super::expr::{compare_values, Expr};
use super::types::{SqlType, TypeKind};
use super::value::{self as v, CmpMode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    CountStar,
    Count,
    Min,
    Max,
    Sum,
    Avg,
    GroupConcat,
    AnyValue,
    BitAnd,
    BitOr,
    BitXor,
}

/// One aggregate call of a query.
#[derive(Debug, Clone)]
pub struct AggCall {
    pub func: AggFunc,
    pub arg: Option<Expr>,
    pub distinct: bool,
    /// The result type.
    pub ty: SqlType,
}

/// Running state of one aggregate in one group.
#[derive(Debug)]
pub enum AggState {
    Count(i64, Option<HashSet<Vec<u8>>>),
    Extreme(Option<Value>),
    /// Integer/decimal sum as exact decimal text parts, or a double.
    SumExact {
        total: i128,
        scale: u32,
        n: i64,
        any: bool,
    },
    SumDouble {
        total: f64,
        n: i64,
        any: bool,
    },
    Concat(Option<Vec<u8>>),
    Any(Option<Value>),
    Bits(u64),
}

impl AggCall {
    /// Builds a call of `name` (upper case) over `arg` (`None` for `COUNT(*)`).
    pub fn new(name: &str, arg: Option<Expr>, distinct: bool) -> Result<AggCall> {
        let arg_ty = arg
            .as_ref()
            .map(|a| a.ty.clone())
            .unwrap_or_else(SqlType::bigint);
        let exact = arg_ty.is_integer() || matches!(arg_ty.kind, TypeKind::Decimal { .. });
        let scale = match arg_ty.kind {
            TypeKind::Decimal { scale, .. } => scale,
            _ => 0,
        };
        let (func, ty) = match (name, &arg) {
            ("COUNT", None) => (AggFunc::CountStar, SqlType::bigint().not_null()),
            ("COUNT", Some(_)) => (AggFunc::Count, SqlType::bigint().not_null()),
            ("MIN", Some(_)) => (AggFunc::Min, arg_ty.clone().nullable(true)),
            ("MAX", Some(_)) => (AggFunc::Max, arg_ty.clone().nullable(true)),
            ("ANY_VALUE", Some(_)) => (AggFunc::AnyValue, arg_ty.clone()),
            ("SUM", Some(_)) if exact => (AggFunc::Sum, SqlType::decimal(65, scale)),
            ("SUM", Some(_)) => (AggFunc::Sum, SqlType::double()),
            ("AVG", Some(_)) if exact => (AggFunc::Avg, SqlType::decimal(65, (scale + 4).min(30))),
            ("AVG", Some(_)) => (AggFunc::Avg, SqlType::double()),
            ("GROUP_CONCAT", Some(_)) => (
                AggFunc::GroupConcat,
                SqlType::new(TypeKind::Text { max_bytes: 65_535 })
                    .with_collation(super::charset::UTF8MB4_0900_AI_CI),
            ),
            ("BIT_AND", Some(_)) => (AggFunc::BitAnd, SqlType::ubigint().not_null()),
            ("BIT_OR", Some(_)) => (AggFunc::BitOr, SqlType::ubigint().not_null()),
            ("BIT_XOR", Some(_)) => (AggFunc::BitXor, SqlType::ubigint().not_null()),
            _ => return Err(SqlError::unsupported(format!("the aggregate {name}"))),
        };
        Ok(AggCall {
            func,
            arg,
            distinct,
            ty,
        })
    }

    pub fn start(&self) -> AggState {
        match self.func {
            AggFunc::CountStar | AggFunc::Count => {
                AggState::Count(0, self.distinct.then(HashSet::new))
            }
            AggFunc::Min | AggFunc::Max => AggState::Extreme(None),
            AggFunc::Sum | AggFunc::Avg => match self.ty.kind {
                TypeKind::Decimal { .. } => AggState::SumExact {
                    total: 0,
                    scale: 0,
                    n: 0,
                    any: false,
                },
                _ => AggState::SumDouble {
                    total: 0.0,
                    n: 0,
                    any: false,
                },
            },
            AggFunc::GroupConcat => AggState::Concat(None),
            AggFunc::AnyValue => AggState::Any(None),
            AggFunc::BitAnd => AggState::Bits(u64::MAX),
            AggFunc::BitOr | AggFunc::BitXor => AggState::Bits(0),
        }
    }

    /// Folds one input row in; returns the bytes the state grew by.
    pub fn update(&self, state: &mut AggState, row: &[Value]) -> Result<usize> {
        // The argument is read in place (a column, a constant) and copied only when kept.
        const ONE: &Value = &Value::Int(1);
        let bigint;
        let (val, ty) = match &self.arg {
            Some(a) => (a.eval_ref(row)?, &a.ty),
            None => {
                bigint = SqlType::bigint();
                (std::borrow::Cow::Borrowed(ONE), &bigint)
            }
        };
        if matches!(val.as_ref(), Value::Null) {
            return Ok(0);
        }
        Ok(match state {
            AggState::Count(n, seen) => {
                if let Some(seen) = seen {
                    let key = group_key(std::slice::from_ref(val.as_ref()), &[ty]);
                    let grown = key.len() + 32;
                    if seen.insert(key) {
                        *n += 1;
                        return Ok(grown);
                    }
                    return Ok(0);
                }
                *n += 1;
                0
            }
            AggState::Extreme(cur) => {
                let replace = match cur {
                    None => true,
                    Some(c) => {
                        let mode = CmpMode::for_types(ty, ty);
                        let ord = compare_values(mode, &val, ty, c, ty);
                        if self.func == AggFunc::Min {
                            ord == Ordering::Less
                        } else {
                            ord == Ordering::Greater
                        }
                    }
                };
                if replace {
                    *cur = Some(val.into_owned());
                }
                0
            }
            AggState::SumExact {
                total,
                scale,
                n,
                any,
            } => {
                let text = v::to_decimal_text(&val, ty).unwrap_or_else(|| "0".into());
                let (units, s) = decimal_units(&text);
                if s > *scale {
                    *total = total
                        .checked_mul(10i128.pow(s - *scale))
                        .ok_or_else(sum_overflow)?;
                    *scale = s;
                }
                let units = units
                    .checked_mul(10i128.pow(*scale - s))
                    .ok_or_else(sum_overflow)?;
                *total = total.checked_add(units).ok_or_else(sum_overflow)?;
                *n += 1;
                *any = true;
                0
            }
            AggState::SumDouble { total, n, any } => {
                *total += v::to_f64(&val, ty);
                *n += 1;
                *any = true;
                0
            }
            AggState::Concat(acc) => {
                let b = v::to_bytes(&val, ty);
                let grown = b.len() + 1;
                match acc {
                    None => *acc = Some(b),
                    Some(a) => {
                        a.push(b',');
                        a.extend_from_slice(&b);
                    }
                }
                grown
            }
            AggState::Any(cur) => {
                if cur.is_none() {
                    *cur = Some(val.into_owned());
                }
                0
            }
            AggState::Bits(acc) => {
                let w = super::func::num::word(&val, ty);
                *acc = match self.func {
                    AggFunc::BitAnd => *acc & w,
                    AggFunc::BitOr => *acc | w,
                    _ => *acc ^ w,
                };
                0
            }
        })
    }

    /// The aggregate's value for a finished group.
    pub fn finish(&self, state: AggState) -> Value {
        match state {
            AggState::Count(n, _) => Value::Int(n),
            AggState::Extreme(cur) | AggState::Any(cur) => cur.unwrap_or(Value::Null),
            AggState::SumExact {
                total,
                scale,
                n,
                any,
            } => {
                if !any {
                    return Value::Null;
                }
                let out_scale = match self.ty.kind {
                    TypeKind::Decimal { scale, .. } => u32::from(scale),
                    _ => scale,
                };
                if self.func == AggFunc::Avg {
                    let (total, scale) = (total as f64 / 10f64.powi(scale as i32), out_scale);
                    return Value::Decimal(format!("{:.*}", scale as usize, total / n as f64));
                }
                Value::Decimal(units_to_text(total, scale))
            }
            AggState::SumDouble { total, n, any } => {
                if !any {
                    Value::Null
                } else if self.func == AggFunc::Avg {
                    Value::Double(total / n as f64)
                } else {
                    Value::Double(total)
                }
            }
            AggState::Concat(acc) => acc.map_or(Value::Null, Value::Bytes),
            AggState::Bits(acc) => Value::UInt(acc),
        }
    }
}

fn sum_overflow() -> SqlError {
    SqlError::new(
        tibinlog_protocol::wire::errors::ER_DATA_OUT_OF_RANGE,
        "DECIMAL value is out of range in 'sum'",
    )
}

/// Decimal text → (units, scale): `-12.50` → (-1250, 2).
fn decimal_units(text: &str) -> (i128, u32) {
    let (neg, t) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (i, f) = t.split_once('.').unwrap_or((t, ""));
    let digits = format!("{i}{f}");
    let units: i128 = digits.parse().unwrap_or(0);
    (if neg { -units } else { units }, f.len() as u32)
}

fn units_to_text(units: i128, scale: u32) -> String {
    let neg = units < 0;
    let digits = units.unsigned_abs().to_string();
    let scale = scale as usize;
    let text = if scale == 0 {
        digits
    } else if digits.len() > scale {
        format!(
            "{}.{}",
            &digits[..digits.len() - scale],
            &digits[digits.len() - scale..]
        )
    } else {
        format!("0.{digits:0>scale$}")
    };
    if neg {
        format!("-{text}")
    } else {
        text
    }
}

/// A grouping key: the values made comparable as MySQL groups them (strings under their
/// collation's case and pad rules, numbers by value).
pub fn group_key(values: &[Value], types: &[&SqlType]) -> Vec<u8> {
    let mut key = Vec::new();
    for (x, ty) in values.iter().zip(types) {
        match x {
            Value::Null => key.push(0),
            _ if ty.is_string() => {
                key.push(1);
                let bytes = v::to_bytes(x, ty);
                let c = charset::collation(ty.collation);
                let bytes: &[u8] = if c.is_some_and(|c| c.pad_space) {
                    let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
                    &bytes[..end]
                } else {
                    &bytes
                };
                match (ty.case_rule(), std::str::from_utf8(bytes)) {
                    (super::like::CaseRule::Insensitive, Ok(s)) => {
                        for ch in s.chars().map(charset::fold) {
                            let mut b = [0u8; 4];
                            key.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                        }
                    }
                    _ => key.extend_from_slice(bytes),
                }
                key.push(0xff);
            }
            _ if ty.is_integer() => {
                key.push(2);
                key.extend_from_slice(&v::to_int(x, ty).unwrap_or(0).to_be_bytes());
            }
            _ => {
                key.push(3);
                let mut t = Vec::new();
                super::text::write_text(x, ty, &mut t);
                key.extend_from_slice(&t);
                key.push(0xff);
            }
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(call: &AggCall, vals: &[Value]) -> Value {
        let mut st = call.start();
        for x in vals {
            call.update(&mut st, std::slice::from_ref(x))
                .expect("update");
        }
        call.finish(st)
    }

    #[test]
    fn bit_aggregates_skip_nulls_and_start_from_their_identity() {
        let col = || Some(Expr::column(0, SqlType::bigint()));
        let vals = [Value::Int(6), Value::Null, Value::Int(3), Value::Int(-1)];
        let bits = |name: &str, vals: &[Value]| {
            run(
                &AggCall::new(name, col(), false).expect("bit aggregate"),
                vals,
            )
        };
        // -1 is all ones as a 64-bit word.
        assert_eq!(bits("BIT_XOR", &vals), Value::UInt(!(6 ^ 3)));
        assert_eq!(bits("BIT_OR", &vals), Value::UInt(u64::MAX));
        assert_eq!(bits("BIT_AND", &vals[..3]), Value::UInt(2));
        assert_eq!(bits("BIT_XOR", &[]), Value::UInt(0));
        assert_eq!(bits("BIT_AND", &[Value::Null]), Value::UInt(u64::MAX));
    }

    #[test]
    fn aggregates_follow_mysql() {
        let col = || Some(Expr::column(0, SqlType::bigint()));
        let vals = [Value::Int(3), Value::Null, Value::Int(1), Value::Int(3)];
        assert_eq!(
            run(&AggCall::new("COUNT", None, false).expect("count"), &vals),
            Value::Int(4)
        );
        assert_eq!(
            run(&AggCall::new("COUNT", col(), false).expect("c"), &vals),
            Value::Int(3)
        );
        assert_eq!(
            run(&AggCall::new("COUNT", col(), true).expect("c"), &vals),
            Value::Int(2)
        );
        assert_eq!(
            run(&AggCall::new("MIN", col(), false).expect("m"), &vals),
            Value::Int(1)
        );
        assert_eq!(
            run(&AggCall::new("MAX", col(), false).expect("m"), &vals),
            Value::Int(3)
        );
        assert_eq!(
            run(&AggCall::new("SUM", col(), false).expect("s"), &vals),
            Value::Decimal("7".into())
        );
        assert_eq!(
            run(&AggCall::new("SUM", col(), false).expect("s"), &[]),
            Value::Null
        );
        assert_eq!(
            run(&AggCall::new("AVG", col(), false).expect("a"), &vals),
            Value::Decimal("2.3333".into())
        );
        let dec = Some(Expr::column(0, SqlType::decimal(10, 2)));
        let ds = [Value::Decimal("1.25".into()), Value::Decimal("-0.5".into())];
        assert_eq!(
            run(&AggCall::new("SUM", dec, false).expect("s"), &ds),
            Value::Decimal("0.75".into())
        );
        assert_eq!(units_to_text(-5, 2), "-0.05");
    }
}

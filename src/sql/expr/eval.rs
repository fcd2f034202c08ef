//! Evaluation of compiled expressions for a row, with MySQL's semantics.

use std::cmp::Ordering;

use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::ER_DATA_OUT_OF_RANGE;

use crate::sql::charset;
use crate::sql::error::{Result, SqlError};
use crate::sql::func;
use crate::sql::like::{LikePattern, LikeScratch};
use crate::sql::types::{SqlType, TypeKind};
use crate::sql::value::{self as v, CmpMode};

use super::tree::{bool_value, ArithOp, CmpOp, Expr, ExprKind};

impl Expr {
    /// The value of the expression for `row`, borrowed where it already is (a column of the
    /// row, a constant) and computed otherwise.
    pub fn eval_ref<'a>(&'a self, row: &'a [Value]) -> Result<std::borrow::Cow<'a, Value>> {
        use std::borrow::Cow;
        const NULL: &Value = &Value::Null;
        Ok(match &self.kind {
            ExprKind::Column(i) => Cow::Borrowed(row.get(*i).unwrap_or(NULL)),
            ExprKind::Const(c) => Cow::Borrowed(c),
            _ => Cow::Owned(self.eval(row)?),
        })
    }

    pub fn eval(&self, row: &[Value]) -> Result<Value> {
        match &self.kind {
            ExprKind::Column(i) => Ok(row.get(*i).cloned().unwrap_or(Value::Null)),
            ExprKind::Const(c) => Ok(c.clone()),
            ExprKind::Unsupported(what) => Err(SqlError::unsupported(what.clone())),
            ExprKind::Not(_)
            | ExprKind::And(_)
            | ExprKind::Or(_)
            | ExprKind::Xor(..)
            | ExprKind::Cmp { .. } => Ok(match self.truth(row)? {
                Some(b) => bool_value(b),
                None => Value::Null,
            }),
            ExprKind::IsNull { expr: e, negated } => {
                Ok(bool_value(matches!(e.eval(row)?, Value::Null) != *negated))
            }
            ExprKind::IsBool {
                expr: e,
                value,
                negated,
            } => {
                let t = self.truth_of(e, row)?;
                Ok(bool_value((t == Some(*value)) != *negated))
            }
            ExprKind::Like {
                expr: e,
                pattern,
                compiled,
                escape,
                rule,
                negated,
            } => {
                let val = e.eval(row)?;
                if matches!(val, Value::Null) {
                    return Ok(Value::Null);
                }
                let text = v::to_bytes(&val, &e.ty);
                let text = String::from_utf8_lossy(&text);
                let matched = match compiled {
                    Some(p) => p.matches_with(&text, &mut LikeScratch::default()),
                    None => {
                        let pv = pattern.eval(row)?;
                        if matches!(pv, Value::Null) {
                            return Ok(Value::Null);
                        }
                        let p =
                            String::from_utf8_lossy(&v::to_bytes(&pv, &pattern.ty)).into_owned();
                        LikePattern::compile(&p, *escape, *rule)
                            .map_err(|err| SqlError::wrong_arguments(&format!("LIKE: {err}")))?
                            .matches(&text)
                    }
                };
                Ok(bool_value(matched != *negated))
            }
            ExprKind::In {
                expr: e,
                list,
                modes,
                negated,
            } => {
                let val = e.eval(row)?;
                if matches!(val, Value::Null) {
                    return Ok(Value::Null);
                }
                let mut saw_null = false;
                for (item, mode) in list.iter().zip(modes) {
                    let x = item.eval(row)?;
                    if matches!(x, Value::Null) {
                        saw_null = true;
                        continue;
                    }
                    if compare_values(*mode, &val, &e.ty, &x, &item.ty) == Ordering::Equal {
                        return Ok(bool_value(!negated));
                    }
                }
                Ok(if saw_null {
                    Value::Null
                } else {
                    bool_value(*negated)
                })
            }
            ExprKind::Arith { first, steps } => {
                let mut acc = first.eval(row)?;
                let mut acc_ty = &first.ty;
                for st in steps {
                    if matches!(acc, Value::Null) {
                        return Ok(Value::Null);
                    }
                    let b = st.rhs.eval(row)?;
                    if matches!(b, Value::Null) {
                        return Ok(Value::Null);
                    }
                    acc = arith(st.op, &acc, acc_ty, &b, &st.rhs.ty, &st.ty)?;
                    acc_ty = &st.ty;
                }
                Ok(acc)
            }
            ExprKind::Neg(e) => {
                let a = e.eval(row)?;
                if matches!(a, Value::Null) {
                    return Ok(Value::Null);
                }
                arith(
                    ArithOp::Sub,
                    &Value::Int(0),
                    &SqlType::bigint(),
                    &a,
                    &e.ty,
                    &self.ty,
                )
            }
            ExprKind::Case {
                operand,
                whens,
                modes,
                otherwise,
            } => {
                let base = operand.as_ref().map(|o| o.eval(row)).transpose()?;
                for (i, (cond, result)) in whens.iter().enumerate() {
                    let hit = match (&base, operand) {
                        (Some(b), Some(o)) => {
                            let c = cond.eval(row)?;
                            !matches!(b, Value::Null)
                                && !matches!(c, Value::Null)
                                && compare_values(modes[i], b, &o.ty, &c, &cond.ty)
                                    == Ordering::Equal
                        }
                        _ => self.truth_of(cond, row)? == Some(true),
                    };
                    if hit {
                        return convert_to(result.eval(row)?, &result.ty, &self.ty);
                    }
                }
                match otherwise {
                    Some(o) => convert_to(o.eval(row)?, &o.ty, &self.ty),
                    None => Ok(Value::Null),
                }
            }
            ExprKind::Func(f, args) => func::eval(*f, args, &self.ty, row),
            ExprKind::Cast(inner) => {
                let val = inner.eval(row)?;
                convert_to(val, &inner.ty, &self.ty)
            }
        }
    }

    /// The expression as a truth value: `None` for NULL.
    fn truth_of(&self, e: &Expr, row: &[Value]) -> Result<Option<bool>> {
        e.truth(row)
    }

    /// The expression as a truth value for `row` (`None`: NULL). Logic and comparisons are
    /// decided here without building a value per node (a WHERE runs this for every row read).
    pub fn truth(&self, row: &[Value]) -> Result<Option<bool>> {
        match &self.kind {
            ExprKind::Not(e) => Ok(e.truth(row)?.map(|b| !b)),
            ExprKind::And(parts) => {
                // FALSE wins, then NULL, then TRUE.
                let mut null = false;
                for p in parts {
                    match p.truth(row)? {
                        Some(false) => return Ok(Some(false)),
                        None => null = true,
                        Some(true) => {}
                    }
                }
                Ok((!null).then_some(true))
            }
            ExprKind::Or(parts) => {
                let mut null = false;
                for p in parts {
                    match p.truth(row)? {
                        Some(true) => return Ok(Some(true)),
                        None => null = true,
                        Some(false) => {}
                    }
                }
                Ok((!null).then_some(false))
            }
            ExprKind::Xor(a, b) => Ok(match (a.truth(row)?, b.truth(row)?) {
                (Some(x), Some(y)) => Some(x != y),
                _ => None,
            }),
            ExprKind::Cmp {
                op,
                left,
                right,
                mode,
            } => {
                // Columns and constants are compared where they are, not copied per row.
                let (a, b) = (left.eval_ref(row)?, right.eval_ref(row)?);
                let (a, b) = (a.as_ref(), b.as_ref());
                if *op == CmpOp::NullSafeEq {
                    return Ok(Some(match (a, b) {
                        (Value::Null, Value::Null) => true,
                        (Value::Null, _) | (_, Value::Null) => false,
                        _ => compare_values(*mode, a, &left.ty, b, &right.ty) == Ordering::Equal,
                    }));
                }
                if matches!(a, Value::Null) || matches!(b, Value::Null) {
                    return Ok(None);
                }
                let ord = compare_values(*mode, a, &left.ty, b, &right.ty);
                Ok(Some(match op {
                    CmpOp::Eq | CmpOp::NullSafeEq => ord == Ordering::Equal,
                    CmpOp::NotEq => ord != Ordering::Equal,
                    CmpOp::Lt => ord == Ordering::Less,
                    CmpOp::LtEq => ord != Ordering::Greater,
                    CmpOp::Gt => ord == Ordering::Greater,
                    CmpOp::GtEq => ord != Ordering::Less,
                }))
            }
            _ => {
                let val = self.eval(row)?;
                Ok(match val {
                    Value::Null => None,
                    other => Some(v::is_true(&other, &self.ty)),
                })
            }
        }
    }

    /// True when the expression is TRUE for `row` (NULL and FALSE filter a row out).
    pub fn is_true(&self, row: &[Value]) -> Result<bool> {
        Ok(self.truth(row)? == Some(true))
    }
}

/// Compares two non-NULL values; a value that cannot be read in `mode` (a string that is not
/// a date) falls back to comparing the texts, as MySQL does.
pub fn compare_values(mode: CmpMode, a: &Value, ta: &SqlType, b: &Value, tb: &SqlType) -> Ordering {
    v::compare(mode, a, ta, b, tb).unwrap_or_else(|| {
        charset::compare(
            charset::UTF8MB4_0900_AI_CI,
            &v::to_bytes(a, ta),
            &v::to_bytes(b, tb),
        )
    })
}

pub(crate) fn out_of_range(ty: &str, what: &str) -> SqlError {
    SqlError::new(
        ER_DATA_OUT_OF_RANGE,
        format!("{ty} value is out of range in '{what}'"),
    )
}

fn arith(
    op: ArithOp,
    a: &Value,
    ta: &SqlType,
    b: &Value,
    tb: &SqlType,
    out: &SqlType,
) -> Result<Value> {
    if op == ArithOp::IntDiv {
        let (x, y) = (v::to_f64(a, ta), v::to_f64(b, tb));
        if y == 0.0 {
            return Ok(Value::Null);
        }
        let q = (x / y).trunc();
        if q.abs() > 9.2e18 {
            return Err(out_of_range("BIGINT", "DIV"));
        }
        return Ok(Value::Int(q as i64));
    }
    if out.is_integer() {
        let (x, y) = (v::to_int(a, ta).unwrap_or(0), v::to_int(b, tb).unwrap_or(0));
        let r = match op {
            ArithOp::Add => x + y,
            ArithOp::Sub => x - y,
            ArithOp::Mul => x
                .checked_mul(y)
                .ok_or_else(|| out_of_range("BIGINT", "*"))?,
            ArithOp::Mod => {
                if y == 0 {
                    return Ok(Value::Null);
                }
                x % y
            }
            _ => unreachable!("division is not integer-typed"),
        };
        return if out.unsigned {
            u64::try_from(r)
                .map(Value::UInt)
                .map_err(|_| out_of_range("BIGINT UNSIGNED", "arithmetic"))
        } else {
            i64::try_from(r)
                .map(Value::Int)
                .map_err(|_| out_of_range("BIGINT", "arithmetic"))
        };
    }
    let (x, y) = (v::to_f64(a, ta), v::to_f64(b, tb));
    let r = match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x / y
        }
        ArithOp::Mod => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x % y
        }
        ArithOp::IntDiv => unreachable!("handled above"),
    };
    if let TypeKind::Decimal { scale, .. } = out.kind {
        return Ok(Value::Decimal(format!(
            "{r:.prec$}",
            prec = usize::from(scale)
        )));
    }
    Ok(Value::Double(r))
}

/// Converts a value to the representation of type `to` (CAST, and branches of CASE/IF).
pub fn convert_to(val: Value, from: &SqlType, to: &SqlType) -> Result<Value> {
    if matches!(val, Value::Null) {
        return Ok(Value::Null);
    }
    Ok(match &to.kind {
        TypeKind::Int { .. } if !to.unsigned => match val {
            Value::Int(_) => val,
            other => match v::to_int(&other, from) {
                Some(i) => {
                    Value::Int(i64::try_from(i).unwrap_or(if i < 0 { i64::MIN } else { i64::MAX }))
                }
                None => Value::Int(0),
            },
        },
        TypeKind::Int { .. } => match val {
            Value::UInt(_) => val,
            other => match v::to_int(&other, from) {
                Some(i) if i < 0 => Value::UInt(i as i64 as u64),
                Some(i) => Value::UInt(u64::try_from(i).unwrap_or(u64::MAX)),
                None => Value::UInt(0),
            },
        },
        TypeKind::Double | TypeKind::Float => Value::Double(v::to_f64(&val, from)),
        TypeKind::Decimal { scale, .. } => match &val {
            Value::Decimal(d) => Value::Decimal(
                crate::tidb::decimal::rescale(d, *scale).unwrap_or_else(|_| d.clone()),
            ),
            _ if from.is_integer() => {
                let i = v::to_int(&val, from).unwrap_or(0);
                Value::Decimal(
                    crate::tidb::decimal::rescale(&i.to_string(), *scale)
                        .unwrap_or_else(|_| i.to_string()),
                )
            }
            _ => Value::Decimal(format!(
                "{:.prec$}",
                v::to_f64(&val, from),
                prec = usize::from(*scale)
            )),
        },
        TypeKind::Date => match v::to_datetime(&val, from) {
            Some(dt) => Value::Date(dt.date),
            None => Value::Null,
        },
        TypeKind::DateTime { .. } | TypeKind::Timestamp { .. } => {
            match v::to_datetime(&val, from) {
                Some(dt) => Value::DateTime(dt),
                None => Value::Null,
            }
        }
        TypeKind::Time { .. } => match v::to_time(&val, from) {
            Some(t) => Value::Time(t),
            None => Value::Null,
        },
        TypeKind::Char { .. } | TypeKind::VarChar { .. } | TypeKind::Text { .. } => {
            Value::Bytes(v::to_bytes(&val, from))
        }
        TypeKind::Json => func::json::cast(val, from)?,
        _ => val,
    })
}

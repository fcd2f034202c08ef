//! IFNULL, NULLIF, IF, COALESCE, ISNULL, GREATEST, LEAST and the GTID set functions.

use std::cmp::Ordering;

use tibinlog_protocol::value::Value;

use super::{bool_value, truth_of, unreachable_func, Func};
use crate::sql::error::{Result, SqlError};
use crate::sql::expr::{compare_values, convert_to, Expr};
use crate::sql::types::SqlType;
use crate::sql::value::{self as v, CmpMode};

/// IFNULL, NULLIF, IF, COALESCE, ISNULL, GREATEST, LEAST.
pub(super) fn logic(f: Func, args: &[Expr], out: &SqlType, row: &[Value]) -> Result<Value> {
    let arg = |i: usize| args[i].eval(row);
    Ok(match f {
        Func::IfNull => {
            let a = arg(0)?;
            let (val, ty) = if matches!(a, Value::Null) {
                (arg(1)?, &args[1].ty)
            } else {
                (a, &args[0].ty)
            };
            convert_to(val, ty, out)?
        }
        Func::NullIf => {
            let (a, b) = (arg(0)?, arg(1)?);
            let mode = CmpMode::for_types(&args[0].ty, &args[1].ty);
            if !matches!(a, Value::Null)
                && !matches!(b, Value::Null)
                && compare_values(mode, &a, &args[0].ty, &b, &args[1].ty) == Ordering::Equal
            {
                Value::Null
            } else {
                a
            }
        }
        Func::If => {
            let i = if truth_of(&args[0], row)? == Some(true) {
                1
            } else {
                2
            };
            convert_to(arg(i)?, &args[i].ty, out)?
        }
        Func::Coalesce => {
            for (i, a) in args.iter().enumerate() {
                let val = a.eval(row)?;
                if !matches!(val, Value::Null) {
                    return convert_to(val, &args[i].ty, out);
                }
            }
            Value::Null
        }
        Func::IsNull => bool_value(matches!(arg(0)?, Value::Null)),
        Func::Greatest | Func::Least => {
            let mut best: Option<(Value, usize)> = None;
            for i in 0..args.len() {
                let val = arg(i)?;
                if matches!(val, Value::Null) {
                    return Ok(Value::Null);
                }
                best = Some(match best {
                    None => (val, i),
                    Some((b, j)) => {
                        let mode = CmpMode::for_types(&args[i].ty, &args[j].ty);
                        let ord = compare_values(mode, &val, &args[i].ty, &b, &args[j].ty);
                        let take = if f == Func::Greatest {
                            ord == Ordering::Greater
                        } else {
                            ord == Ordering::Less
                        };
                        if take {
                            (val, i)
                        } else {
                            (b, j)
                        }
                    }
                });
            }
            match best {
                Some((val, i)) => convert_to(val, &args[i].ty, out)?,
                None => Value::Null,
            }
        }
        _ => unreachable_func(f)?,
    })
}

/// GTID_SUBTRACT, GTID_SUBSET.
pub(super) fn gtid(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let arg = |i: usize| args[i].eval(row);
    let text = |val: &Value, i: usize| v::to_bytes(val, &args[i].ty);
    Ok(match f {
        Func::GtidSubtract | Func::GtidSubset => {
            let (a, b) = (arg(0)?, arg(1)?);
            if matches!(a, Value::Null) || matches!(b, Value::Null) {
                return Ok(Value::Null);
            }
            let parse = |val: &Value, i: usize| {
                let t = String::from_utf8_lossy(&text(val, i)).into_owned();
                tibinlog_protocol::binlog::GtidSet::parse(&t).map_err(|_| {
                    SqlError::new(
                        tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR,
                        "Malformed GTID set specification",
                    )
                })
            };
            let (a, b) = (parse(&a, 0)?, parse(&b, 1)?);
            if f == Func::GtidSubtract {
                Value::Bytes(a.subtract(&b).to_string().into_bytes())
            } else {
                bool_value(a.is_subset_of(&b))
            }
        }
        _ => unreachable_func(f)?,
    })
}

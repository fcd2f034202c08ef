//! Scalar functions: their names, arities and result types (the table below), and their
//! evaluation per row, grouped by what they work on (`logic`, `string`, `num`, `time`, `json`,
//! `hash`). The compiler in [`super::expr`] resolves a call to a [`Func`] with
//! [`signature`]; [`eval`] computes it with MySQL's semantics: NULL in gives NULL out unless
//! the function says otherwise (IFNULL, COALESCE, CONCAT_WS, ISNULL).

mod hash;
pub mod json;
mod logic;
pub(crate) mod num;
mod string;
mod time;

pub(crate) use time::unix_days;

use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::{ER_SP_DOES_NOT_EXIST, ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT};

use super::charset;
use super::error::{Result, SqlError};
use super::expr::{display_chars, union_type, Expr};
use super::types::{SqlType, TypeKind};
use super::value as v;

/// Scalar functions evaluated per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    IfNull,
    NullIf,
    If,
    Coalesce,
    IsNull,
    Concat,
    ConcatWs,
    Lower,
    Upper,
    Length,
    CharLength,
    Substring,
    Left,
    Right,
    Replace,
    Trim,
    Ltrim,
    Rtrim,
    Hex,
    Unhex,
    Abs,
    Greatest,
    Least,
    GtidSubtract,
    GtidSubset,
    TimeToSec,
    TimeDiff,
    /// `&`, `|`, `^`, `<<`, `>>`: on unsigned 64-bit integers, as MySQL does for numbers.
    BitAnd,
    BitOr,
    BitXor,
    ShiftLeft,
    ShiftRight,
    Floor,
    Ceil,
    /// `CONV(n, from_base, to_base)`.
    Conv,
    Crc32,
    Md5,
    Sha1,
    Sha2,
    /// `JSON_EXTRACT(doc, path, …)` and `doc->path`.
    JsonExtract,
    /// `JSON_UNQUOTE(x)`; `doc->>path` is `JSON_UNQUOTE(JSON_EXTRACT(doc, path))`.
    JsonUnquote,
    JsonType,
    JsonValid,
    JsonLength,
    DateFormat,
    /// The date part of a temporal value: `DATE(x)`.
    Date,
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Microsecond,
    Quarter,
    DayOfWeek,
    WeekDay,
    DayOfYear,
    ToDays,
}

/// Any number of arguments from the minimum on.
const MANY: usize = usize::MAX;

/// Every function by name: `(name, function, fewest arguments, most arguments)`.
#[rustfmt::skip]
const TABLE: &[(&str, Func, usize, usize)] = &[
    ("IFNULL", Func::IfNull, 2, 2),
    ("NULLIF", Func::NullIf, 2, 2),
    ("IF", Func::If, 3, 3),
    ("COALESCE", Func::Coalesce, 1, MANY),
    ("ISNULL", Func::IsNull, 1, 1),
    ("CONCAT", Func::Concat, 1, MANY),
    ("CONCAT_WS", Func::ConcatWs, 2, MANY),
    ("LOWER", Func::Lower, 1, 1),
    ("LCASE", Func::Lower, 1, 1),
    ("UPPER", Func::Upper, 1, 1),
    ("UCASE", Func::Upper, 1, 1),
    ("LENGTH", Func::Length, 1, 1),
    ("OCTET_LENGTH", Func::Length, 1, 1),
    ("CHAR_LENGTH", Func::CharLength, 1, 1),
    ("CHARACTER_LENGTH", Func::CharLength, 1, 1),
    ("SUBSTRING", Func::Substring, 2, 3),
    ("SUBSTR", Func::Substring, 2, 3),
    ("MID", Func::Substring, 2, 3),
    ("LEFT", Func::Left, 2, 2),
    ("RIGHT", Func::Right, 2, 2),
    ("REPLACE", Func::Replace, 3, 3),
    ("TRIM", Func::Trim, 1, 1),
    ("LTRIM", Func::Ltrim, 1, 1),
    ("RTRIM", Func::Rtrim, 1, 1),
    ("HEX", Func::Hex, 1, 1),
    ("UNHEX", Func::Unhex, 1, 1),
    ("ABS", Func::Abs, 1, 1),
    ("FLOOR", Func::Floor, 1, 1),
    ("CEIL", Func::Ceil, 1, 1),
    ("CEILING", Func::Ceil, 1, 1),
    ("GREATEST", Func::Greatest, 2, MANY),
    ("LEAST", Func::Least, 2, MANY),
    ("GTID_SUBTRACT", Func::GtidSubtract, 2, 2),
    ("GTID_SUBSET", Func::GtidSubset, 2, 2),
    ("TIME_TO_SEC", Func::TimeToSec, 1, 1),
    ("TIMEDIFF", Func::TimeDiff, 2, 2),
    ("CONV", Func::Conv, 3, 3),
    ("CRC32", Func::Crc32, 1, 1),
    ("MD5", Func::Md5, 1, 1),
    ("SHA1", Func::Sha1, 1, 1),
    ("SHA", Func::Sha1, 1, 1),
    ("SHA2", Func::Sha2, 2, 2),
    ("JSON_EXTRACT", Func::JsonExtract, 2, MANY),
    ("JSON_UNQUOTE", Func::JsonUnquote, 1, 1),
    ("JSON_TYPE", Func::JsonType, 1, 1),
    ("JSON_VALID", Func::JsonValid, 1, 1),
    ("JSON_LENGTH", Func::JsonLength, 1, 2),
    ("DATE_FORMAT", Func::DateFormat, 2, 2),
    ("DATE", Func::Date, 1, 1),
    ("YEAR", Func::Year, 1, 1),
    ("MONTH", Func::Month, 1, 1),
    ("DAY", Func::Day, 1, 1),
    ("DAYOFMONTH", Func::Day, 1, 1),
    ("HOUR", Func::Hour, 1, 1),
    ("MINUTE", Func::Minute, 1, 1),
    ("SECOND", Func::Second, 1, 1),
    ("MICROSECOND", Func::Microsecond, 1, 1),
    ("QUARTER", Func::Quarter, 1, 1),
    ("DAYOFWEEK", Func::DayOfWeek, 1, 1),
    ("WEEKDAY", Func::WeekDay, 1, 1),
    ("DAYOFYEAR", Func::DayOfYear, 1, 1),
    ("TO_DAYS", Func::ToDays, 1, 1),
];

/// The function `name` (upper case) of `args`, and its result type.
pub(crate) fn signature(name: &str, args: &[Expr]) -> Result<(Func, SqlType)> {
    let Some(&(_, f, min, max)) = TABLE.iter().find(|(n, ..)| *n == name) else {
        return Err(SqlError::new(
            ER_SP_DOES_NOT_EXIST,
            format!("FUNCTION {name} does not exist"),
        ));
    };
    if args.len() < min || args.len() > max {
        return Err(SqlError::new(
            ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT,
            format!("Incorrect parameter count in the call to native function '{name}'"),
        ));
    }
    Ok((f, result_type(f, args)))
}

/// A string result as long as the texts of `args` together.
fn text_of(args: &[Expr]) -> SqlType {
    let chars: u32 = args
        .iter()
        .map(|a| display_chars(&a.ty))
        .fold(0u32, u32::saturating_add);
    SqlType::string(chars)
}

fn bool_type() -> SqlType {
    SqlType::new(TypeKind::Int { bytes: 1 })
}

/// The result type of `f` on `args` (whose count [`signature`] checked).
fn result_type(f: Func, args: &[Expr]) -> SqlType {
    let first = &args[0].ty;
    let all: Vec<&SqlType> = args.iter().map(|a| &a.ty).collect();
    let small_int = || SqlType::int().nullable(true);
    match f {
        Func::IfNull => union_type(&all).nullable(args[1].ty.nullable),
        Func::NullIf | Func::Substring => first.clone().nullable(true),
        Func::If => union_type(&all[1..]),
        Func::Coalesce | Func::Greatest | Func::Least => union_type(&all),
        Func::IsNull => bool_type().not_null(),
        Func::Concat | Func::ConcatWs => text_of(args),
        Func::Lower | Func::Upper | Func::Left | Func::Right => first.clone(),
        Func::Trim | Func::Ltrim | Func::Rtrim | Func::Abs => first.clone(),
        Func::Length | Func::CharLength | Func::TimeToSec => SqlType::bigint(),
        Func::Replace | Func::GtidSubtract => SqlType::longtext(charset::UTF8MB4_0900_AI_CI),
        Func::Hex => SqlType::string(display_chars(first).saturating_mul(2)),
        Func::Unhex => SqlType::varchar(display_chars(first) / 2 + 1, charset::BINARY),
        Func::Floor | Func::Ceil => {
            // Integers stay integers, decimals lose their scale, the rest is DOUBLE.
            if first.is_integer() {
                first.clone()
            } else if matches!(first.kind, TypeKind::Decimal { .. }) {
                SqlType::bigint().nullable(first.nullable)
            } else {
                SqlType::double().nullable(first.nullable)
            }
        }
        Func::BitAnd | Func::BitOr | Func::BitXor | Func::ShiftLeft | Func::ShiftRight => {
            SqlType::ubigint().nullable(all.iter().any(|t| t.nullable))
        }
        Func::GtidSubset | Func::JsonValid => bool_type(),
        Func::TimeDiff => SqlType::new(TypeKind::Time { fsp: 0 }),
        Func::Crc32 => SqlType::int().unsigned().nullable(first.nullable),
        Func::Md5 => SqlType::string(32).nullable(first.nullable),
        Func::Conv => SqlType::string(64),
        Func::Sha1 => SqlType::string(40).nullable(first.nullable),
        Func::Sha2 => SqlType::string(128),
        Func::JsonExtract => SqlType::new(TypeKind::Json),
        Func::JsonUnquote => SqlType::longtext(charset::UTF8MB4_BIN),
        Func::JsonType => SqlType::string(51),
        Func::JsonLength => SqlType::bigint(),
        Func::DateFormat => SqlType::string(display_chars(&args[1].ty).saturating_mul(10)),
        Func::Date => SqlType::new(TypeKind::Date),
        Func::ToDays => SqlType::bigint(),
        Func::Year
        | Func::Month
        | Func::Day
        | Func::Hour
        | Func::Minute
        | Func::Second
        | Func::Microsecond
        | Func::Quarter
        | Func::DayOfWeek
        | Func::WeekDay
        | Func::DayOfYear => small_int(),
    }
}

/// The value of `f` on `args` for `row`; `out` is its result type.
pub(crate) fn eval(f: Func, args: &[Expr], out: &SqlType, row: &[Value]) -> Result<Value> {
    match f {
        Func::IfNull
        | Func::NullIf
        | Func::If
        | Func::Coalesce
        | Func::IsNull
        | Func::Greatest
        | Func::Least => logic::logic(f, args, out, row),
        Func::GtidSubtract | Func::GtidSubset => logic::gtid(f, args, row),
        Func::Concat
        | Func::ConcatWs
        | Func::Lower
        | Func::Upper
        | Func::Length
        | Func::CharLength => string::concat_case(f, args, row),
        Func::Substring
        | Func::Left
        | Func::Right
        | Func::Replace
        | Func::Trim
        | Func::Ltrim
        | Func::Rtrim
        | Func::Hex => string::pieces(f, args, row),
        Func::Unhex | Func::Crc32 | Func::Md5 | Func::Sha1 | Func::Sha2 => hash::eval(f, args, row),
        Func::Abs
        | Func::BitAnd
        | Func::BitOr
        | Func::BitXor
        | Func::ShiftLeft
        | Func::ShiftRight
        | Func::Floor
        | Func::Ceil => num::num(f, args, row),
        Func::Conv => num::conv(args, row),
        Func::TimeToSec | Func::TimeDiff => time::time(f, args, row),
        Func::DateFormat
        | Func::Date
        | Func::Year
        | Func::Month
        | Func::Day
        | Func::Hour
        | Func::Minute
        | Func::Second
        | Func::Microsecond
        | Func::Quarter
        | Func::DayOfWeek
        | Func::WeekDay
        | Func::DayOfYear
        | Func::ToDays => time::parts(f, args, row),
        Func::JsonExtract
        | Func::JsonUnquote
        | Func::JsonType
        | Func::JsonValid
        | Func::JsonLength => json::eval(f, args, row),
    }
}

/// A function handed to a group that does not evaluate it: a bug, reported as an error
/// rather than a panic.
fn unreachable_func(f: Func) -> Result<Value> {
    Err(SqlError::unsupported(format!(
        "the function {f:?} in this evaluator"
    )))
}

/// The expression as a truth value: `None` for NULL.
fn truth_of(e: &Expr, row: &[Value]) -> Result<Option<bool>> {
    let val = e.eval(row)?;
    Ok(match val {
        Value::Null => None,
        other => Some(v::is_true(&other, &e.ty)),
    })
}

fn bool_value(b: bool) -> Value {
    Value::Int(i64::from(b))
}

#[cfg(test)]
mod tests;

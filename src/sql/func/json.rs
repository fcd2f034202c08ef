//! JSON functions (JSON_EXTRACT and `->`, JSON_UNQUOTE and `->>`, JSON_TYPE, JSON_VALID,
//! JSON_LENGTH), MySQL's JSON path language, and `CAST(… AS JSON)`.
//!
//! A path is `$` then legs: `.name`, `."quoted name"`, `.*`, `[n]`, `[last]`, `[last - n]`,
//! `[m to n]`, `[*]`, and `**` (the value and everything below it) before a leg. An array
//! index on a value that is not an array selects the value itself at `[0]`/`[last]`, as MySQL
//! treats a scalar as an array of one. A path with a wildcard, `**` or a range, or more than one
//! path, gives an array of every match; otherwise the one match. No match is SQL NULL.

use tibinlog_protocol::value::{Json, Value};
use tibinlog_protocol::wire::errors::{
    ER_INVALID_JSON_PATH, ER_INVALID_JSON_TEXT_IN_PARAM, ER_INVALID_TYPE_FOR_JSON,
};

use super::{bool_value, unreachable_func, Func};
use crate::sql::error::{Result, SqlError};
use crate::sql::expr::Expr;
use crate::sql::types::{SqlType, TypeKind};
use crate::sql::value as v;
use crate::tidb::json as tidb_json;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Leg {
    Member(String),
    AnyMember,
    /// `[from to to]`, each counted from the start or from `last`.
    Range(Index, Index),
    AnyIndex,
    /// `**`: the value and all values below it.
    Descend,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Index {
    Start(usize),
    /// `last - n`.
    FromLast(usize),
}

impl Index {
    /// The position in an array of `len` elements (`None` before the start).
    fn at(self, len: usize) -> Option<usize> {
        match self {
            Index::Start(i) => Some(i),
            Index::FromLast(n) => len.checked_sub(1)?.checked_sub(n),
        }
    }
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    legs: Vec<Leg>,
}

fn path_error(at: usize) -> SqlError {
    SqlError::new(
        ER_INVALID_JSON_PATH,
        format!("Invalid JSON path expression. The error is around character position {at}."),
    )
}

impl Path {
    /// Parses MySQL's path language.
    pub(crate) fn parse(text: &str) -> Result<Path> {
        let b = text.as_bytes();
        let mut i = skip_space(b, 0);
        if b.get(i) != Some(&b'$') {
            return Err(path_error(i));
        }
        i += 1;
        let mut legs = Vec::new();
        loop {
            i = skip_space(b, i);
            match b.get(i) {
                None => break,
                Some(b'.') => {
                    i = skip_space(b, i + 1);
                    let (leg, next) = member(text, i)?;
                    legs.push(leg);
                    i = next;
                }
                Some(b'[') => {
                    let close = text[i..].find(']').ok_or_else(|| path_error(i))? + i;
                    legs.push(index(&text[i + 1..close]).ok_or_else(|| path_error(i))?);
                    i = close + 1;
                }
                Some(b'*') if b.get(i + 1) == Some(&b'*') => {
                    legs.push(Leg::Descend);
                    i += 2;
                }
                Some(_) => return Err(path_error(i)),
            }
        }
        if legs.last() == Some(&Leg::Descend) {
            return Err(path_error(text.len()));
        }
        Ok(Path { legs })
    }

    /// True when the path can select more than one value.
    fn is_wild(&self) -> bool {
        self.legs.iter().any(|l| match l {
            Leg::AnyMember | Leg::AnyIndex | Leg::Descend => true,
            Leg::Range(a, b) => a != b,
            Leg::Member(_) => false,
        })
    }

    /// Every value the path selects in `doc`, in document order, each once.
    fn select<'a>(&self, doc: &'a Json) -> Vec<&'a Json> {
        let mut cur = vec![doc];
        for leg in &self.legs {
            let mut next: Vec<&'a Json> = Vec::new();
            for j in cur {
                step(leg, j, &mut next);
            }
            if matches!(leg, Leg::Descend) {
                let mut seen = Vec::with_capacity(next.len());
                next.retain(|j| {
                    let p = *j as *const Json;
                    let fresh = !seen.contains(&p);
                    seen.push(p);
                    fresh
                });
            }
            cur = next;
        }
        cur
    }
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// A member leg at `i` (after the dot): `*`, a quoted name or an identifier.
fn member(text: &str, i: usize) -> Result<(Leg, usize)> {
    let rest = &text[i..];
    if rest.starts_with('*') {
        return Ok((Leg::AnyMember, i + 1));
    }
    if rest.starts_with('"') {
        // A JSON string literal: find its end (a quote not escaped).
        let mut escaped = false;
        for (k, c) in rest.char_indices().skip(1) {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    let name: String =
                        serde_json::from_str(&rest[..=k]).map_err(|_| path_error(i))?;
                    return Ok((Leg::Member(name), i + k + 1));
                }
                _ => escaped = false,
            }
        }
        return Err(path_error(i));
    }
    let end = rest
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == '$' || !c.is_ascii()))
        .map_or(rest.len(), |(k, _)| k);
    let name = &rest[..end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(path_error(i));
    }
    Ok((Leg::Member(name.to_owned()), i + end))
}

/// The inside of `[…]`.
fn index(inner: &str) -> Option<Leg> {
    let inner = inner.trim();
    if inner == "*" {
        return Some(Leg::AnyIndex);
    }
    let one = |s: &str| -> Option<Index> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("last") {
            let rest = rest.trim();
            if rest.is_empty() {
                return Some(Index::FromLast(0));
            }
            let n = rest.strip_prefix('-')?.trim();
            return n.parse().ok().map(Index::FromLast);
        }
        s.parse().ok().map(Index::Start)
    };
    match inner.split_once(" to ") {
        Some((a, b)) => Some(Leg::Range(one(a)?, one(b)?)),
        None => {
            let i = one(inner)?;
            Some(Leg::Range(i, i))
        }
    }
}

/// Appends what `leg` selects from `j` to `out`.
fn step<'a>(leg: &Leg, j: &'a Json, out: &mut Vec<&'a Json>) {
    match (leg, j) {
        (Leg::Member(name), Json::Object(members)) => {
            // The last of duplicate keys wins, as MySQL keeps it.
            if let Some((_, val)) = members.iter().rev().find(|(k, _)| k == name) {
                out.push(val);
            }
        }
        (Leg::AnyMember, Json::Object(members)) => out.extend(members.iter().map(|(_, v)| v)),
        (Leg::AnyIndex, Json::Array(items)) => out.extend(items.iter()),
        (Leg::Range(a, b), Json::Array(items)) => {
            let len = items.len();
            // `last - n` before the start counts from 0.
            let from = a.at(len).unwrap_or(0);
            if let Some(to) = b.at(len) {
                let to = to.min(len.saturating_sub(1));
                if from <= to && from < len {
                    out.extend(items[from..=to].iter());
                }
            }
        }
        // A scalar or object is an array of one for `[0]` and `[last]`.
        (Leg::Range(a, b), other) if a.at(1) == Some(0) && b.at(1).is_some() => {
            out.push(other);
        }
        (Leg::Descend, _) => descend(j, out),
        _ => {}
    }
}

/// `j` and every value below it, depth first.
fn descend<'a>(j: &'a Json, out: &mut Vec<&'a Json>) {
    let mut stack = vec![j];
    while let Some(j) = stack.pop() {
        out.push(j);
        match j {
            Json::Array(items) => stack.extend(items.iter().rev()),
            Json::Object(members) => stack.extend(members.iter().rev().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// The JSON document an argument holds: a JSON value, or JSON text in a string.
fn document(val: Value, ty: &SqlType, arg: usize, func: &str) -> Result<Json> {
    match val {
        Value::Json(j) => Ok(j),
        Value::Bytes(b) if ty.is_string() || matches!(ty.kind, TypeKind::Json | TypeKind::Null) => {
            parse_text(&b, arg, func)
        }
        _ => Err(SqlError::new(
            ER_INVALID_TYPE_FOR_JSON,
            format!(
                "Invalid data type for JSON data in argument {arg} to function {func}; a JSON string or JSON type is required."
            ),
        )),
    }
}

/// Parses JSON text.
pub fn parse_text(b: &[u8], arg: usize, func: &str) -> Result<Json> {
    match serde_json::from_slice::<serde_json::Value>(b) {
        Ok(v) => Ok(tidb_json::from_serde(&v)),
        Err(e) => Err(SqlError::new(
            ER_INVALID_JSON_TEXT_IN_PARAM,
            format!("Invalid JSON text in argument {arg} to function {func}: \"{e}\"."),
        )),
    }
}

/// `CAST(val AS JSON)`: JSON text parsed, numbers and temporal values as JSON scalars.
pub(crate) fn cast(val: Value, from: &SqlType) -> Result<Value> {
    Ok(Value::Json(match val {
        Value::Null => return Ok(Value::Null),
        Value::Json(j) => j,
        Value::Bytes(b) if from.collation != crate::sql::charset::BINARY || from.is_string() => {
            parse_text(&b, 1, "cast_as_json")?
        }
        Value::Int(i) => Json::Int(i),
        Value::UInt(u) => Json::UInt(u),
        Value::Double(d) => Json::Double(d),
        Value::Float(f) => Json::Double(f64::from(f)),
        Value::Decimal(text) => {
            let (precision, scale) = match from.kind {
                TypeKind::Decimal { precision, scale } => (precision, scale),
                _ => (65, 30),
            };
            Json::Decimal {
                text,
                precision,
                scale,
            }
        }
        Value::Date(d) => Json::Date(d),
        Value::DateTime(dt) => Json::DateTime(dt),
        Value::Time(t) => Json::Time(t),
        other => match v::to_datetime(&other, from) {
            Some(dt) if matches!(other, Value::Timestamp { .. }) => Json::Timestamp(dt),
            _ => Json::String(String::from_utf8_lossy(&v::to_bytes(&other, from)).into_owned()),
        },
    }))
}

fn type_name(j: &Json) -> &'static str {
    match j {
        Json::Null => "NULL",
        Json::Bool(_) => "BOOLEAN",
        Json::Int(_) => "INTEGER",
        Json::UInt(_) => "UNSIGNED INTEGER",
        Json::Double(_) => "DOUBLE",
        Json::Decimal { .. } => "DECIMAL",
        Json::String(_) => "STRING",
        Json::Array(_) => "ARRAY",
        Json::Object(_) => "OBJECT",
        Json::Date(_) => "DATE",
        Json::DateTime(_) => "DATETIME",
        Json::Timestamp(_) => "TIMESTAMP",
        Json::Time(_) => "TIME",
        Json::Opaque { .. } => "OPAQUE",
    }
}

/// The paths of arguments `1..`, or `None` when one is NULL.
fn paths(args: &[Expr], row: &[Value]) -> Result<Option<Vec<Path>>> {
    let mut out = Vec::with_capacity(args.len().saturating_sub(1));
    for a in &args[1..] {
        let p = a.eval(row)?;
        if matches!(p, Value::Null) {
            return Ok(None);
        }
        out.push(Path::parse(&String::from_utf8_lossy(&v::to_bytes(
            &p, &a.ty,
        )))?);
    }
    Ok(Some(out))
}

pub(super) fn eval(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let val = args[0].eval(row)?;
    if matches!(val, Value::Null) {
        return Ok(Value::Null);
    }
    let ty = &args[0].ty;
    Ok(match f {
        Func::JsonExtract => {
            let doc = document(val, ty, 1, "json_extract")?;
            let Some(paths) = paths(args, row)? else {
                return Ok(Value::Null);
            };
            let mut found: Vec<Json> = Vec::new();
            for p in &paths {
                found.extend(p.select(&doc).into_iter().cloned());
            }
            let single = paths.len() == 1 && !paths[0].is_wild();
            match (found.len(), single) {
                (0, _) => Value::Null,
                (_, true) => Value::Json(found.swap_remove(0)),
                _ => Value::Json(Json::Array(found)),
            }
        }
        Func::JsonUnquote => match val {
            Value::Json(Json::String(s)) => Value::Bytes(s.into_bytes()),
            Value::Json(j) => Value::Bytes(tidb_json::to_text(&j).into_bytes()),
            other => {
                let b = v::to_bytes(&other, ty);
                if b.len() >= 2 && b.starts_with(b"\"") && b.ends_with(b"\"") {
                    match parse_text(&b, 1, "json_unquote")? {
                        Json::String(s) => Value::Bytes(s.into_bytes()),
                        _ => Value::Bytes(b),
                    }
                } else {
                    Value::Bytes(b)
                }
            }
        },
        Func::JsonType => Value::Bytes(
            type_name(&document(val, ty, 1, "json_type")?)
                .as_bytes()
                .to_vec(),
        ),
        Func::JsonValid => match val {
            Value::Json(_) => bool_value(true),
            Value::Bytes(b) if ty.is_string() || matches!(ty.kind, TypeKind::Json) => {
                bool_value(serde_json::from_slice::<serde::de::IgnoredAny>(&b).is_ok())
            }
            _ => bool_value(false),
        },
        Func::JsonLength => {
            let doc = document(val, ty, 1, "json_length")?;
            let target = if args.len() == 2 {
                let Some(paths) = paths(args, row)? else {
                    return Ok(Value::Null);
                };
                if paths[0].is_wild() {
                    return Err(SqlError::new(
                        ER_INVALID_JSON_PATH,
                        "In this situation, path expressions may not contain the * and ** tokens or an array range.",
                    ));
                }
                match paths[0].select(&doc).first() {
                    Some(j) => (*j).clone(),
                    None => return Ok(Value::Null),
                }
            } else {
                doc
            };
            Value::Int(match &target {
                Json::Array(a) => a.len() as i64,
                Json::Object(o) => o.len() as i64,
                _ => 1,
            })
        }
        _ => unreachable_func(f)?,
    })
}

//! Which stored rows a WHERE can match, as ranges of a table's clustered key or of an index,
//! and which ORDER BY a scan of them delivers.
//!
//! TiDB keeps a table's rows under record keys ordered by the clustered key: an integer
//! primary key is the integer handle itself; any other clustered primary key (TiDB's common
//! handle) is the memcomparable encoding of its columns (strings as their collation's sort
//! key), so a scan delivers rows in primary-key order and a range of the key's columns is a
//! range of keys. An index's entries are ordered the same way by the index's columns, and
//! point at their rows (an index lookup). Ranges found here are always a superset of the
//! matching rows: the full WHERE is evaluated on every row read, so a conjunct that gives no
//! range only costs reads.

use tibinlog_protocol::value::Value;

use super::catalog::{HandleKind, StoredIndex, TableMeta};
use super::charset::{self, BINARY};
use super::expr::{CmpOp, Expr, ExprKind};
use super::types::{SqlType, TypeKind};
use super::value::{self as v, CmpMode};
use crate::tidb::codec::{encode_bytes, encode_int, encode_uint, flag};

/// One range of common-handle bytes (what follows a record key's `_r`): the start inclusive,
/// the end exclusive (`None`: to the table's end).
pub type KeySpan = (Vec<u8>, Option<Vec<u8>>);

/// The rows a scan reads, as ranges of the table's clustered key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRanges {
    /// Every row.
    All,
    /// Inclusive ranges of an integer handle, ascending and disjoint.
    Int(Vec<(i128, i128)>),
    /// Ranges of common-handle bytes, ascending and disjoint.
    Common(Vec<KeySpan>),
}

/// How a scan reaches a table's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// The rows themselves, by clustered key.
    Table(KeyRanges),
    /// The rows an index's entries point at, in the index's order (TiDB's index lookup).
    Index {
        index: StoredIndex,
        /// Columns of the index.
        columns: usize,
        /// Ranges of the key form of the index's first column (`None`: the whole index).
        ranges: Option<Vec<KeySpan>>,
    },
}

/// What a statement asks of a table scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRequest {
    pub access: Access,
    pub order: ScanOrder,
    /// How many rows the statement takes at most, if it says (its LIMIT over rows in this
    /// order): pages are sized to it and nothing is read ahead past it. The WHERE may still
    /// drop rows, so the scan goes on if asked.
    pub rows: Option<u64>,
    /// The columns the statement reads, by position (`None`: every one): the others need
    /// not be decoded.
    pub columns: Option<Vec<bool>>,
}

/// The order a scan must deliver its rows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanOrder {
    /// Any order (partitions one after another).
    Unordered,
    /// Ascending clustered-key order (partitions merged).
    Ascending,
    /// Descending clustered-key order (partitions merged).
    Descending,
}

/// The direction a scan of a clustered key `key` (column names in key order) gives to an
/// ORDER BY naming `wanted` (column names with their DESC flags): `Some(desc)` when `wanted`
/// is a non-empty prefix of the key in one direction.
pub fn scan_direction(key: &[String], wanted: &[(String, bool)]) -> Option<bool> {
    let (_, desc) = wanted.first()?;
    let fits = wanted.len() <= key.len()
        && wanted
            .iter()
            .zip(key)
            .all(|((name, d), k)| d == desc && name.eq_ignore_ascii_case(k));
    fits.then_some(*desc)
}

/// How to read `meta` for a WHERE of compiled `conjuncts` and an ORDER BY naming `wanted`
/// columns (`None`: an ORDER BY of expressions), and in which order:
/// - the clustered key when it delivers the order;
/// - else the first readable index (PRIMARY, unique, others) that delivers it, unless the
///   clustered key's ranges narrow the read (a narrow read sorts cheaper than a whole index);
/// - else the clustered key's ranges, or an index whose first column the WHERE narrows;
/// - else the whole table.
pub fn access_path(
    meta: &TableMeta,
    conjuncts: &[Expr],
    wanted: Option<&[(String, bool)]>,
) -> (Access, ScanOrder) {
    let key_cols = |cols: &[usize]| -> Vec<(usize, &SqlType)> {
        cols.iter().map(|&i| (i, &meta.columns[i].ty)).collect()
    };
    let key: Vec<usize> = match meta.handle {
        HandleKind::IntPk { column, .. } => vec![column],
        HandleKind::Common => meta.primary_key_columns().unwrap_or_default(),
        HandleKind::RowId => Vec::new(),
    };
    let table_ranges = match (meta.handle, key.first()) {
        (HandleKind::IntPk { column, unsigned }, _) => {
            int_ranges(conjuncts, column, unsigned).map(KeyRanges::Int)
        }
        (_, Some(_)) => common_ranges(conjuncts, &key_cols(&key)).map(KeyRanges::Common),
        _ => None,
    };
    let order_of = |cols: &[usize]| {
        let names: Vec<String> = cols.iter().map(|&i| meta.columns[i].name.clone()).collect();
        match wanted.and_then(|w| scan_direction(&names, w)) {
            None => ScanOrder::Unordered,
            Some(false) => ScanOrder::Ascending,
            Some(true) => ScanOrder::Descending,
        }
    };
    let by_key = order_of(&key);
    if by_key != ScanOrder::Unordered || table_ranges.is_some() {
        return (
            Access::Table(table_ranges.unwrap_or(KeyRanges::All)),
            by_key,
        );
    }
    let indexes: Vec<(StoredIndex, Vec<usize>)> = meta
        .indexes
        .iter()
        .filter_map(|ix| Some((ix.stored?, meta.index_columns(ix)?)))
        .filter(|(_, cols)| !cols.is_empty())
        .collect();
    let index_ranges = |cols: &[usize]| common_ranges(conjuncts, &key_cols(cols));
    let lookup = |index: StoredIndex, cols: &[usize]| Access::Index {
        index,
        columns: cols.len(),
        ranges: index_ranges(cols),
    };
    if let Some((ix, cols, order)) = indexes
        .iter()
        .map(|(ix, cols)| (ix, cols, order_of(cols)))
        .find(|(_, _, o)| *o != ScanOrder::Unordered)
    {
        return (lookup(*ix, cols), order);
    }
    match indexes
        .iter()
        .find(|(_, cols)| index_ranges(cols).is_some())
    {
        Some((ix, cols)) => (lookup(*ix, cols), ScanOrder::Unordered),
        None => (Access::Table(KeyRanges::All), ScanOrder::Unordered),
    }
}

/// Inclusive ranges of an integer column `key` (the handle) implied by the WHERE's compiled
/// conjuncts (`None`: no restriction found).
pub fn int_ranges(conjuncts: &[Expr], key: usize, unsigned: bool) -> Option<Vec<(i128, i128)>> {
    let (min, max) = if unsigned {
        (0i128, i128::from(u64::MAX))
    } else {
        (i128::from(i64::MIN), i128::from(i64::MAX))
    };
    let mut ranges: Option<Vec<(i128, i128)>> = None;
    for e in conjuncts {
        let Some(r) = expr_ranges(e, key, min, max) else {
            continue;
        };
        ranges = Some(match ranges {
            None => r,
            Some(cur) => intersect(&cur, &r),
        });
    }
    ranges
}

/// Ranges of key-form bytes (a common handle, an index entry after its prefix) implied by the
/// WHERE's compiled conjuncts on the key's columns `cols` (`None`: no restriction found, or a
/// type whose key form is not known here: integers, binary strings and `_bin` collations are).
/// The first column bounds them, and each next one under an equality on those before it.
pub fn common_ranges(conjuncts: &[Expr], cols: &[KeyCol<'_>]) -> Option<Vec<KeySpan>> {
    if cols.is_empty() {
        return None;
    }
    let parts: Vec<&Expr> = conjuncts.iter().collect();
    and_spans(&parts, cols)
}

/// A constant compared with an integer column, as the comparison sees it: a number (a
/// string by its numeric prefix, as MySQL converts it: `'12abc'` is 12, `'abc'` 0).
fn const_f64(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Const(Value::Null) => None,
        ExprKind::Const(c) => Some(v::to_f64(c, &e.ty)),
        _ => None,
    }
}

fn const_int(e: &Expr) -> Option<i128> {
    match &e.kind {
        ExprKind::Const(Value::Int(i)) => Some(i128::from(*i)),
        ExprKind::Const(Value::UInt(u)) => Some(i128::from(*u)),
        _ => None,
    }
}

/// `column op constant` with the column on either side, as (op, constant).
fn comparison(e: &Expr, key: usize) -> Option<(CmpOp, &Expr, CmpMode)> {
    let is_key = |x: &Expr| matches!(x.kind, ExprKind::Column(k) if k == key);
    let ExprKind::Cmp {
        op,
        left,
        right,
        mode,
    } = &e.kind
    else {
        return None;
    };
    if is_key(left) {
        Some((*op, right.as_ref(), *mode))
    } else if is_key(right) {
        Some((flip(*op), left.as_ref(), *mode))
    } else {
        None
    }
}

/// Ranges of one compiled conjunct on integer column `key`.
fn expr_ranges(e: &Expr, key: usize, min: i128, max: i128) -> Option<Vec<(i128, i128)>> {
    match &e.kind {
        ExprKind::Cmp { .. } => {
            let (op, c, _) = comparison(e, key)?;
            let (lo, hi) = match const_int(c) {
                Some(i) => (i, i),
                None => {
                    let f = const_f64(c)?;
                    if !f.is_finite() {
                        return None;
                    }
                    (f.ceil() as i128, f.floor() as i128)
                }
            };
            let exact = lo == hi;
            let r = match op {
                CmpOp::Eq | CmpOp::NullSafeEq => {
                    if exact {
                        (lo, lo)
                    } else {
                        return Some(Vec::new());
                    }
                }
                CmpOp::Lt => (min, if exact { lo - 1 } else { hi }),
                CmpOp::LtEq => (min, hi),
                CmpOp::Gt => (if exact { lo + 1 } else { lo }, max),
                CmpOp::GtEq => (lo, max),
                CmpOp::NotEq => return None,
            };
            Some(clamp(vec![r], min, max))
        }
        ExprKind::In {
            expr,
            list,
            negated: false,
            ..
        } if matches!(expr.kind, ExprKind::Column(k) if k == key) => {
            let mut r = Vec::with_capacity(list.len());
            for item in list {
                let i = const_int(item)?;
                r.push((i, i));
            }
            Some(union(clamp(r, min, max)))
        }
        ExprKind::And(parts) => {
            let mut acc: Option<Vec<(i128, i128)>> = None;
            for p in parts {
                if let Some(r) = expr_ranges(p, key, min, max) {
                    acc = Some(match acc {
                        None => r,
                        Some(cur) => intersect(&cur, &r),
                    });
                }
            }
            acc
        }
        // Every branch must restrict the key, or the OR restricts nothing.
        ExprKind::Or(parts) => {
            let mut all = Vec::new();
            for p in parts {
                all.extend(expr_ranges(p, key, min, max)?);
            }
            Some(union(all))
        }
        _ => None,
    }
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::LtEq => CmpOp::GtEq,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::GtEq => CmpOp::LtEq,
        other => other,
    }
}

fn clamp(r: Vec<(i128, i128)>, min: i128, max: i128) -> Vec<(i128, i128)> {
    r.into_iter()
        .map(|(a, b)| (a.max(min), b.min(max)))
        .filter(|(a, b)| a <= b)
        .collect()
}

/// Intersection of two sorted lists of disjoint inclusive ranges.
fn intersect(a: &[(i128, i128)], b: &[(i128, i128)]) -> Vec<(i128, i128)> {
    let mut out = Vec::new();
    for &(a0, a1) in a {
        for &(b0, b1) in b {
            let (lo, hi) = (a0.max(b0), a1.min(b1));
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    out.sort_unstable();
    out
}

/// Inclusive ranges sorted, with overlapping and adjacent ones joined.
fn union(mut r: Vec<(i128, i128)>) -> Vec<(i128, i128)> {
    r.sort_unstable();
    let mut out: Vec<(i128, i128)> = Vec::with_capacity(r.len());
    for (lo, hi) in r {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The key form of a constant compared with a key column of type `ty` (`None`: not known).
fn key_datum(c: &Expr, ty: &SqlType, mode: CmpMode) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match &ty.kind {
        TypeKind::Int { .. } => {
            // Ranges of an integer key column go through `expr_ranges`.
            return None;
        }
        TypeKind::Char { .. } | TypeKind::VarChar { .. } | TypeKind::Text { .. } => {
            let ExprKind::Const(Value::Bytes(b)) = &c.kind else {
                return None;
            };
            if mode
                != (CmpMode::String {
                    collation: ty.collation,
                })
            {
                return None;
            }
            let coll = charset::collation(ty.collation)?;
            let binary = ty.collation == BINARY;
            // A CHAR BINARY is stored padded: its key is not the constant's bytes.
            if binary && matches!(ty.kind, TypeKind::Char { .. }) {
                return None;
            }
            let utf8 = matches!(coll.charset, "utf8mb4" | "utf8mb3" | "ascii" | "latin1");
            let bytewise = binary || (utf8 && coll.name.ends_with("_bin"));
            if !bytewise {
                return None;
            }
            let b = if coll.pad_space {
                &b[..b.iter().rposition(|&x| x != b' ').map_or(0, |p| p + 1)]
            } else {
                &b[..]
            };
            out.push(flag::BYTES);
            encode_bytes(&mut out, b);
        }
        _ => return None,
    }
    Some(out)
}

/// The key form of an integer of a key column.
fn int_key(i: i128, unsigned: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    if unsigned {
        out.push(flag::UINT);
        encode_uint(&mut out, i as u64);
    } else {
        out.push(flag::INT);
        encode_int(&mut out, i as i64);
    }
    out
}

/// Just above every key whose first column's key form is `k` (a following column's datum
/// starts with a flag below 0xFF).
fn after(mut k: Vec<u8>) -> Vec<u8> {
    k.push(0xFF);
    k
}

/// A key column: its position in the row and its type.
pub type KeyCol<'a> = (usize, &'a SqlType);

/// Spans of one compiled conjunct on the key columns `cols`.
fn spans(e: &Expr, cols: &[KeyCol<'_>]) -> Option<Vec<KeySpan>> {
    match &e.kind {
        ExprKind::And(_) => {
            let mut parts = Vec::new();
            flatten_and(e, &mut parts);
            and_spans(&parts, cols)
        }
        // Every branch must restrict the key, or the OR restricts nothing.
        ExprKind::Or(parts) => {
            let mut all = Vec::new();
            for p in parts {
                all.extend(spans(p, cols)?);
            }
            Some(union_spans(all))
        }
        _ => leaf_spans(e, cols[0]),
    }
}

fn flatten_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::And(parts) => parts.iter().for_each(|p| flatten_and(p, out)),
        _ => out.push(e),
    }
}

/// Spans of a conjunction on the key columns `cols`: an equality on the first column puts
/// what the other parts say about the next column under it (`a = 1 AND b > 2` is the span of
/// keys from `(1, 2)` exclusive to the end of `a = 1`), else the parts' spans on the first
/// column intersect.
fn and_spans(parts: &[&Expr], cols: &[KeyCol<'_>]) -> Option<Vec<KeySpan>> {
    if cols.len() > 1 {
        let eq = parts
            .iter()
            .enumerate()
            .find_map(|(i, p)| eq_key(p, cols[0]).map(|k| (i, k)));
        if let Some((i, k)) = eq {
            let rest: Vec<&Expr> = parts
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, p)| *p)
                .collect();
            if let Some(sub) = and_spans(&rest, &cols[1..]) {
                let under = |b: &[u8]| [k.as_slice(), b].concat();
                return Some(
                    sub.into_iter()
                        .map(|(s, e)| {
                            let end = e.map_or_else(|| after(k.clone()), |e| under(&e));
                            (under(&s), Some(end))
                        })
                        .collect(),
                );
            }
        }
    }
    let mut acc: Option<Vec<KeySpan>> = None;
    for p in parts {
        if let Some(r) = spans(p, cols) {
            acc = Some(match acc {
                None => r,
                Some(cur) => intersect_spans(&cur, &r),
            });
        }
    }
    acc
}

/// The key form of `c` when `e` is `column = c` on key column `col`.
fn eq_key(e: &Expr, (key, ty): KeyCol<'_>) -> Option<Vec<u8>> {
    let (op, c, mode) = comparison(e, key)?;
    if !matches!(op, CmpOp::Eq | CmpOp::NullSafeEq) {
        return None;
    }
    if let TypeKind::Int { .. } = ty.kind {
        let (min, max) = int_bounds(ty.unsigned);
        let i = const_int(c).filter(|i| (min..=max).contains(i))?;
        return Some(int_key(i, ty.unsigned));
    }
    key_datum(c, ty, mode)
}

fn int_bounds(unsigned: bool) -> (i128, i128) {
    if unsigned {
        (0, i128::from(u64::MAX))
    } else {
        (i128::from(i64::MIN), i128::from(i64::MAX))
    }
}

/// Spans of a comparison or IN on one key column.
fn leaf_spans(e: &Expr, (key, ty): KeyCol<'_>) -> Option<Vec<KeySpan>> {
    if let TypeKind::Int { .. } = ty.kind {
        let (min, max) = int_bounds(ty.unsigned);
        let r = expr_ranges(e, key, min, max)?;
        let k = |i| int_key(i, ty.unsigned);
        return Some(
            r.into_iter()
                .map(|(lo, hi)| (k(lo), Some(after(k(hi)))))
                .collect(),
        );
    }
    match &e.kind {
        ExprKind::Cmp { .. } => {
            let (op, c, mode) = comparison(e, key)?;
            let k = key_datum(c, ty, mode)?;
            Some(vec![match op {
                CmpOp::Eq | CmpOp::NullSafeEq => (k.clone(), Some(after(k))),
                CmpOp::Lt => (Vec::new(), Some(k)),
                CmpOp::LtEq => (Vec::new(), Some(after(k))),
                CmpOp::Gt => (after(k), None),
                CmpOp::GtEq => (k, None),
                CmpOp::NotEq => return None,
            }])
        }
        ExprKind::In {
            expr,
            list,
            modes,
            negated: false,
        } if matches!(expr.kind, ExprKind::Column(k) if k == key) => {
            let mut all = Vec::with_capacity(list.len());
            for (item, mode) in list.iter().zip(modes) {
                let k = key_datum(item, ty, *mode)?;
                all.push((k.clone(), Some(after(k))));
            }
            Some(union_spans(all))
        }
        _ => None,
    }
}

/// `a < b` for span ends, `None` being above every key.
fn end_lt(a: &Option<Vec<u8>>, b: &Option<Vec<u8>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a < b,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Intersection of two sorted lists of disjoint spans.
fn intersect_spans(a: &[KeySpan], b: &[KeySpan]) -> Vec<KeySpan> {
    let mut out = Vec::new();
    for (a0, a1) in a {
        for (b0, b1) in b {
            let lo = a0.max(b0).clone();
            let hi = if end_lt(a1, b1) { a1 } else { b1 }.clone();
            if hi.as_ref().is_none_or(|h| &lo < h) {
                out.push((lo, hi));
            }
        }
    }
    out.sort();
    out
}

/// Spans sorted, with overlapping and touching ones joined.
fn union_spans(mut r: Vec<KeySpan>) -> Vec<KeySpan> {
    r.sort();
    let mut out: Vec<KeySpan> = Vec::with_capacity(r.len());
    for (lo, hi) in r {
        match out.last_mut() {
            Some(last) if last.1.as_ref().is_none_or(|e| &lo <= e) => {
                if end_lt(&last.1, &hi) {
                    last.1 = hi;
                }
            }
            _ => out.push((lo, hi)),
        }
    }
    out
}

#[cfg(test)]
mod tests;

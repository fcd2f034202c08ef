//! The executor: pull-based operators over rows of [`Value`]s. Each operator fills a caller's
//! row buffer (no allocation per row where the input can be moved), so results stream to the
//! client as the scan produces them; only sorting, grouping, DISTINCT and the inner side of a
//! join hold rows, within [`MEMORY_LIMIT`] bytes each (a sort then goes on on disk).

use std::cmp::Ordering;
use std::collections::HashMap;

use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::{
    ER_ERROR_ON_READ, ER_ERROR_ON_WRITE, ER_OUT_OF_SORTMEMORY, ER_QUERY_INTERRUPTED,
    ER_UNKNOWN_ERROR,
};
use tokio_util::sync::CancellationToken;

use super::agg::{group_key, AggCall, AggState};
use super::error::{Result, SqlError};
use super::expr::{compare_values, Expr, ExprKind};
use super::spill;
use super::types::SqlType;
use super::value::CmpMode;

/// Bytes an operator may hold (a sort, the groups of an aggregation, a join's inner side).
pub const MEMORY_LIMIT: usize = 256 << 20;

/// A stream of rows.
pub trait Operator: Send {
    /// Writes the next row into `out` (replacing its contents); false at the end.
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool>;
}

/// Rows produced in batches by a source (a TiKV snapshot scan).
pub trait RowStream: Send {
    /// Appends the next rows to `out`; false (and nothing appended) at the end. `spare` holds
    /// rows already consumed, to be reused (cleared or overwritten) instead of allocated.
    fn next_batch(
        &mut self,
        out: &mut Vec<Vec<Value>>,
        spare: &mut Vec<Vec<Value>>,
    ) -> Result<bool>;
}

/// Most consumed rows a [`Scan`] keeps for reuse.
const SPARE_ROWS: usize = 4096;

/// Rows held in memory (virtual tables, derived tables, `SELECT` without `FROM`).
pub struct Values {
    rows: std::vec::IntoIter<Vec<Value>>,
}

impl Values {
    pub fn new(rows: Vec<Vec<Value>>) -> Self {
        Values {
            rows: rows.into_iter(),
        }
    }
}

impl Operator for Values {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        match self.rows.next() {
            Some(r) => {
                *out = r;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// Rows of a [`RowStream`], checking for cancellation between batches.
pub struct Scan {
    stream: Box<dyn RowStream>,
    batch: std::vec::IntoIter<Vec<Value>>,
    buf: Vec<Vec<Value>>,
    spare: Vec<Vec<Value>>,
    cancel: CancellationToken,
    done: bool,
}

impl Scan {
    pub fn new(stream: Box<dyn RowStream>, cancel: CancellationToken) -> Self {
        Scan {
            stream,
            batch: Vec::new().into_iter(),
            buf: Vec::new(),
            spare: Vec::new(),
            cancel,
            done: false,
        }
    }
}

/// The error a cancelled statement ends with.
pub fn interrupted() -> SqlError {
    SqlError::new(ER_QUERY_INTERRUPTED, "Query execution was interrupted")
}

impl Operator for Scan {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        loop {
            if let Some(mut r) = self.batch.next() {
                std::mem::swap(out, &mut r);
                if r.capacity() > 0 && self.spare.len() < SPARE_ROWS {
                    self.spare.push(r);
                }
                return Ok(true);
            }
            if self.done {
                return Ok(false);
            }
            if self.cancel.is_cancelled() {
                return Err(interrupted());
            }
            self.buf.clear();
            if !self.stream.next_batch(&mut self.buf, &mut self.spare)? {
                self.done = true;
            }
            self.batch = std::mem::take(&mut self.buf).into_iter();
        }
    }
}

/// Rows for which a predicate is TRUE.
pub struct Filter {
    pub input: Box<dyn Operator>,
    pub predicate: Expr,
}

impl Operator for Filter {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        while self.input.next(out)? {
            if self.predicate.is_true(out)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Computes the output columns from each input row.
pub struct Project {
    input: Box<dyn Operator>,
    exprs: Vec<Expr>,
    scratch: Vec<Value>,
    /// When every output is a distinct input column (`SELECT *`, a column list): their
    /// indexes, and the values are moved from the input row instead of copied.
    moves: Option<Vec<usize>>,
    /// `moves` is every column in order (`SELECT *` of one table).
    identity: bool,
}

impl Project {
    pub fn new(input: Box<dyn Operator>, exprs: Vec<Expr>) -> Self {
        let mut seen = std::collections::HashSet::new();
        let moves = exprs
            .iter()
            .map(|e| match e.kind {
                ExprKind::Column(i) if seen.insert(i) => Some(i),
                _ => None,
            })
            .collect::<Option<Vec<usize>>>();
        let identity = moves
            .as_ref()
            .is_some_and(|m| m.iter().enumerate().all(|(i, &c)| i == c));
        Project {
            input,
            exprs,
            scratch: Vec::new(),
            moves,
            identity,
        }
    }
}

impl Operator for Project {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        if !self.input.next(&mut self.scratch)? {
            return Ok(false);
        }
        if let Some(moves) = &self.moves {
            if self.identity && moves.len() == self.scratch.len() {
                // Every input column in order: the row itself. The row given back in `out`
                // returns to the input the next time, its buffers to be reused.
                std::mem::swap(out, &mut self.scratch);
                return Ok(true);
            }
            out.clear();
            for &i in moves {
                let v = self.scratch.get_mut(i).ok_or_else(|| {
                    SqlError::new(ER_UNKNOWN_ERROR, format!("no input column {i}"))
                })?;
                out.push(std::mem::replace(v, Value::Null));
            }
            return Ok(true);
        }
        out.clear();
        for e in &self.exprs {
            out.push(e.eval(&self.scratch)?);
        }
        Ok(true)
    }
}

/// `LIMIT offset, count`.
/// The rows of each input in turn.
pub struct Chain {
    pub inputs: Vec<Box<dyn Operator>>,
    pub at: usize,
}

impl Operator for Chain {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        while let Some(input) = self.inputs.get_mut(self.at) {
            if input.next(out)? {
                return Ok(true);
            }
            self.at += 1;
        }
        Ok(false)
    }
}

pub struct Limit {
    pub input: Box<dyn Operator>,
    pub offset: u64,
    pub count: Option<u64>,
    pub seen: u64,
}

impl Operator for Limit {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        while self.seen < self.offset {
            if !self.input.next(out)? {
                return Ok(false);
            }
            self.seen += 1;
        }
        if self
            .count
            .is_some_and(|c| self.seen >= self.offset.saturating_add(c))
        {
            return Ok(false);
        }
        let more = self.input.next(out)?;
        self.seen += 1;
        Ok(more)
    }
}

/// Bytes a row takes, roughly (for the memory limits).
fn row_bytes(row: &[Value]) -> usize {
    row.iter()
        .map(|x| {
            std::mem::size_of::<Value>()
                + match x {
                    Value::Bytes(b) => b.len(),
                    Value::Decimal(d) => d.len(),
                    _ => 0,
                }
        })
        .sum::<usize>()
        + std::mem::size_of::<Vec<Value>>()
}

fn over_memory() -> SqlError {
    SqlError::new(
        ER_OUT_OF_SORTMEMORY,
        format!(
            "Out of sort memory: the statement holds more than {} MiB of rows",
            MEMORY_LIMIT >> 20
        ),
    )
}

/// One ORDER BY key: an expression over the input row.
pub struct SortKey {
    pub expr: Expr,
    pub desc: bool,
}

/// Sorts its input (stable, NULLs first ascending as MySQL). With a `top` (an ORDER BY …
/// LIMIT), only the first `top` rows are kept: the buffer is cut back to them whenever it
/// doubles, so memory follows the LIMIT, not the input. Past its memory budget the rows held
/// are sorted and written to disk as a run, and the runs are merged at the end (`spill.rs`).
pub struct Sort {
    pub input: Option<Box<dyn Operator>>,
    pub keys: Vec<SortKey>,
    top: Option<usize>,
    budget: usize,
    sorted: Sorted,
}

/// A sort's output.
enum Sorted {
    Memory(std::vec::IntoIter<spill::Keyed>),
    /// Runs on disk merged, and how many rows are still wanted.
    Disk(spill::Merged, usize),
}

fn spill_error(what: &str, e: std::io::Error) -> SqlError {
    let code = if what == "writing" {
        ER_ERROR_ON_WRITE
    } else {
        ER_ERROR_ON_READ
    };
    SqlError::new(code, format!("{what} a sort's temporary file: {e}"))
}

impl Sort {
    pub fn new(input: Box<dyn Operator>, keys: Vec<SortKey>) -> Self {
        Sort {
            input: Some(input),
            keys,
            top: None,
            budget: MEMORY_LIMIT,
            sorted: Sorted::Memory(Vec::new().into_iter()),
        }
    }

    /// Only the first `n` rows of the order are wanted.
    pub fn top(mut self, n: usize) -> Self {
        self.top = Some(n);
        self
    }

    /// Bytes of rows held in memory before they go to disk.
    pub fn budget(mut self, bytes: usize) -> Self {
        self.budget = bytes;
        self
    }

    fn fill(&mut self, mut input: Box<dyn Operator>) -> Result<()> {
        let mut rows: Vec<spill::Keyed> = Vec::new();
        let mut runs = Vec::new();
        let mut bytes = 0;
        let mut row = Vec::new();
        let keys = &self.keys;
        let cut_at = self.top.map(|n| n.max(64).saturating_mul(2));
        let order = |a: &spill::Keyed, b: &spill::Keyed| compare_keys(keys, &a.0, &b.0);
        while input.next(&mut row)? {
            let key: Vec<Value> = keys
                .iter()
                .map(|k| k.expr.eval(&row))
                .collect::<Result<_>>()?;
            bytes += row_bytes(&row) + row_bytes(&key);
            rows.push((key, std::mem::take(&mut row)));
            if let (Some(top), Some(cut)) = (self.top, cut_at) {
                if rows.len() >= cut {
                    // Stable: among equal keys the rows seen first stay first.
                    rows.sort_by(order);
                    rows.truncate(top);
                    bytes = rows.iter().map(|(k, r)| row_bytes(r) + row_bytes(k)).sum();
                }
            }
            if bytes > self.budget {
                rows.sort_by(order);
                let run = spill::write_run(std::mem::take(&mut rows));
                runs.push(run.map_err(|e| spill_error("writing", e))?);
                bytes = 0;
            }
        }
        rows.sort_by(order);
        let wanted = self.top.unwrap_or(usize::MAX);
        if runs.is_empty() {
            rows.truncate(wanted);
            self.sorted = Sorted::Memory(rows.into_iter());
            return Ok(());
        }
        // The rows still held are the last run: runs are merged in the order they were cut.
        runs.push(spill::write_run(rows).map_err(|e| spill_error("writing", e))?);
        let merged = spill::Merged::new(runs).map_err(|e| spill_error("reading", e))?;
        self.sorted = Sorted::Disk(merged, wanted);
        Ok(())
    }
}

fn compare_keys(keys: &[SortKey], a: &[Value], b: &[Value]) -> Ordering {
    for (k, (x, y)) in keys.iter().zip(a.iter().zip(b)) {
        let ord = match (x, y) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Less,
            (_, Value::Null) => Ordering::Greater,
            _ => {
                let mode = CmpMode::for_types(&k.expr.ty, &k.expr.ty);
                compare_values(mode, x, &k.expr.ty, y, &k.expr.ty)
            }
        };
        let ord = if k.desc { ord.reverse() } else { ord };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

impl Operator for Sort {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        if let Some(input) = self.input.take() {
            self.fill(input)?;
        }
        let next = match &mut self.sorted {
            Sorted::Memory(rows) => rows.next().map(|(_, row)| row),
            Sorted::Disk(_, 0) => None,
            Sorted::Disk(merged, wanted) => {
                *wanted -= 1;
                let keys = &self.keys;
                merged
                    .next(|a, b| compare_keys(keys, a, b))
                    .map_err(|e| spill_error("reading", e))?
            }
        };
        match next {
            Some(row) => {
                *out = row;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// GROUP BY with aggregates. Output rows: the group key values, then one value per aggregate.
/// Without GROUP BY there is exactly one group (one row even for no input).
pub struct Aggregate {
    pub input: Option<Box<dyn Operator>>,
    pub group_by: Vec<Expr>,
    pub aggs: Vec<AggCall>,
    out: std::vec::IntoIter<Vec<Value>>,
}

impl Aggregate {
    pub fn new(input: Box<dyn Operator>, group_by: Vec<Expr>, aggs: Vec<AggCall>) -> Self {
        Aggregate {
            input: Some(input),
            group_by,
            aggs,
            out: Vec::new().into_iter(),
        }
    }

    fn fill(&mut self, mut input: Box<dyn Operator>) -> Result<()> {
        if self.group_by.is_empty() {
            return self.fill_one(input);
        }
        let types: Vec<&SqlType> = self.group_by.iter().map(|e| &e.ty).collect();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut groups: Vec<(Vec<Value>, Vec<AggState>)> = Vec::new();
        let mut bytes = 0;
        let mut row = Vec::new();
        let mut keyvals = Vec::new();
        while input.next(&mut row)? {
            keyvals.clear();
            for e in &self.group_by {
                keyvals.push(e.eval(&row)?);
            }
            let key = group_key(&keyvals, &types);
            let i = match index.get(&key) {
                Some(i) => *i,
                None => {
                    bytes += key.len() + row_bytes(&keyvals) + 64 * self.aggs.len();
                    if bytes > MEMORY_LIMIT {
                        return Err(over_memory());
                    }
                    let states = self.aggs.iter().map(AggCall::start).collect();
                    groups.push((keyvals.clone(), states));
                    index.insert(key, groups.len() - 1);
                    groups.len() - 1
                }
            };
            for (call, state) in self.aggs.iter().zip(groups[i].1.iter_mut()) {
                bytes += call.update(state, &row)?;
                if bytes > MEMORY_LIMIT {
                    return Err(over_memory());
                }
            }
        }
        if groups.is_empty() && self.group_by.is_empty() {
            groups.push((Vec::new(), self.aggs.iter().map(AggCall::start).collect()));
        }
        let rows: Vec<Vec<Value>> = groups
            .into_iter()
            .map(|(mut key, states)| {
                for (call, st) in self.aggs.iter().zip(states) {
                    key.push(call.finish(st));
                }
                key
            })
            .collect();
        self.out = rows.into_iter();
        Ok(())
    }
}

impl Aggregate {
    /// Without GROUP BY: one group, whatever the input (no group key per row).
    fn fill_one(&mut self, mut input: Box<dyn Operator>) -> Result<()> {
        let mut states: Vec<AggState> = self.aggs.iter().map(AggCall::start).collect();
        let mut bytes = 64 * self.aggs.len();
        let mut row = Vec::new();
        while input.next(&mut row)? {
            for (call, state) in self.aggs.iter().zip(states.iter_mut()) {
                bytes += call.update(state, &row)?;
                if bytes > MEMORY_LIMIT {
                    return Err(over_memory());
                }
            }
        }
        let out = self
            .aggs
            .iter()
            .zip(states)
            .map(|(call, st)| call.finish(st))
            .collect();
        self.out = vec![out].into_iter();
        Ok(())
    }
}

impl Operator for Aggregate {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        if let Some(input) = self.input.take() {
            self.fill(input)?;
        }
        match self.out.next() {
            Some(r) => {
                *out = r;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// Removes duplicate rows (SELECT DISTINCT), keeping the first of each.
pub struct Distinct {
    pub input: Box<dyn Operator>,
    pub types: Vec<SqlType>,
    seen: std::collections::HashSet<Vec<u8>>,
    bytes: usize,
}

impl Distinct {
    pub fn new(input: Box<dyn Operator>, types: Vec<SqlType>) -> Self {
        Distinct {
            input,
            types,
            seen: Default::default(),
            bytes: 0,
        }
    }
}

impl Operator for Distinct {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        let types: Vec<&SqlType> = self.types.iter().collect();
        while self.input.next(out)? {
            let key = group_key(out, &types);
            if !self.seen.contains(&key) {
                self.bytes += key.len() + 32;
                if self.bytes > MEMORY_LIMIT {
                    return Err(over_memory());
                }
                self.seen.insert(key);
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// `left [LEFT] JOIN right ON …` by nested loops over the right side held in memory.
pub struct Join {
    pub left: Box<dyn Operator>,
    right: Option<Box<dyn Operator>>,
    right_rows: Vec<Vec<Value>>,
    right_width: usize,
    pub on: Option<Expr>,
    pub left_outer: bool,
    current: Vec<Value>,
    pos: usize,
    matched: bool,
    active: bool,
}

impl Join {
    pub fn new(
        left: Box<dyn Operator>,
        right: Box<dyn Operator>,
        right_width: usize,
        on: Option<Expr>,
        left_outer: bool,
    ) -> Self {
        Join {
            left,
            right: Some(right),
            right_rows: Vec::new(),
            right_width,
            on,
            left_outer,
            current: Vec::new(),
            pos: 0,
            matched: false,
            active: false,
        }
    }
}

impl Operator for Join {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        if let Some(mut right) = self.right.take() {
            let mut bytes = 0;
            let mut row = Vec::new();
            while right.next(&mut row)? {
                bytes += row_bytes(&row);
                if bytes > MEMORY_LIMIT {
                    return Err(over_memory());
                }
                self.right_rows.push(std::mem::take(&mut row));
            }
        }
        loop {
            if !self.active {
                if !self.left.next(&mut self.current)? {
                    return Ok(false);
                }
                self.active = true;
                self.pos = 0;
                self.matched = false;
            }
            while self.pos < self.right_rows.len() {
                let r = &self.right_rows[self.pos];
                self.pos += 1;
                out.clear();
                out.extend_from_slice(&self.current);
                out.extend_from_slice(r);
                let keep = match &self.on {
                    Some(on) => on.is_true(out)?,
                    None => true,
                };
                if keep {
                    self.matched = true;
                    return Ok(true);
                }
            }
            self.active = false;
            if self.left_outer && !self.matched {
                out.clear();
                out.extend_from_slice(&self.current);
                out.extend(std::iter::repeat_n(Value::Null, self.right_width));
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::expr::{Expr, ExprKind};

    fn ints(rows: &[&[i64]]) -> Vec<Vec<Value>> {
        rows.iter()
            .map(|r| r.iter().map(|i| Value::Int(*i)).collect())
            .collect()
    }

    fn drain(mut op: Box<dyn Operator>) -> Vec<Vec<Value>> {
        let mut out = Vec::new();
        let mut row = Vec::new();
        while op.next(&mut row).expect("next") {
            out.push(row.clone());
        }
        out
    }

    fn col(i: usize) -> Expr {
        Expr::column(i, SqlType::bigint())
    }

    #[test]
    fn a_sort_past_its_budget_goes_to_disk_and_gives_the_same_rows() {
        // Keys with many repeats (stability shows), the second column the input position.
        let rows: Vec<Vec<Value>> = (0..5_000i64)
            .map(|i| vec![Value::Int((i * 7_919) % 97), Value::Int(i)])
            .collect();
        let key = || {
            vec![SortKey {
                expr: col(0),
                desc: true,
            }]
        };
        let sort = |budget: usize, top: Option<usize>| {
            let s = Sort::new(Box::new(Values::new(rows.clone())), key()).budget(budget);
            drain(Box::new(match top {
                Some(n) => s.top(n),
                None => s,
            }))
        };
        let in_memory = sort(MEMORY_LIMIT, None);
        assert_eq!(in_memory.len(), rows.len());
        assert_eq!(sort(4 << 10, None), in_memory);
        assert_eq!(sort(4 << 10, Some(1_234)), in_memory[..1_234]);
    }

    #[test]
    fn sort_limit_and_distinct() {
        let input = Box::new(Values::new(ints(&[&[3, 1], &[1, 2], &[2, 3], &[1, 2]])));
        let sorted = Box::new(Sort::new(
            input,
            vec![SortKey {
                expr: col(0),
                desc: true,
            }],
        ));
        let limited = Box::new(Limit {
            input: sorted,
            offset: 1,
            count: Some(2),
            seen: 0,
        });
        assert_eq!(drain(limited), ints(&[&[2, 3], &[1, 2]]));
        let input = Box::new(Values::new(ints(&[&[1, 2], &[1, 2], &[2, 2]])));
        let d = Box::new(Distinct::new(input, vec![SqlType::bigint(); 2]));
        assert_eq!(drain(d), ints(&[&[1, 2], &[2, 2]]));
    }

    #[test]
    fn top_n_keeps_what_a_full_sort_would_show() {
        // Many ties and more rows than the buffer keeps: the first n of a full stable sort.
        let rows: Vec<Vec<i64>> = (0..5_000).map(|i| vec![(i * 7919) % 97, i]).collect();
        let refs: Vec<&[i64]> = rows.iter().map(Vec::as_slice).collect();
        let key = || {
            vec![SortKey {
                expr: col(0),
                desc: true,
            }]
        };
        let full = drain(Box::new(Sort::new(
            Box::new(Values::new(ints(&refs))),
            key(),
        )));
        for n in [0, 1, 10, 200, 4_999, 6_000] {
            let top = drain(Box::new(
                Sort::new(Box::new(Values::new(ints(&refs))), key()).top(n),
            ));
            assert_eq!(top, full[..n.min(full.len())], "top {n}");
        }
    }

    #[test]
    fn left_join_keeps_unmatched_rows() {
        let left = Box::new(Values::new(ints(&[&[1], &[2]])));
        let right = Box::new(Values::new(ints(&[&[1, 10], &[1, 11]])));
        let on = Expr {
            kind: ExprKind::Cmp {
                op: crate::sql::expr::CmpOp::Eq,
                left: Box::new(col(0)),
                right: Box::new(col(1)),
                mode: CmpMode::Int,
            },
            ty: SqlType::bigint(),
        };
        let j = Box::new(Join::new(left, right, 2, Some(on), true));
        assert_eq!(
            drain(j),
            vec![
                vec![Value::Int(1), Value::Int(1), Value::Int(10)],
                vec![Value::Int(1), Value::Int(1), Value::Int(11)],
                vec![Value::Int(2), Value::Null, Value::Null],
            ]
        );
    }
}

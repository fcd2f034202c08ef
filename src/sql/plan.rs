//! From a parsed `SELECT` to a tree of operators: FROM (information_schema views, TiDB tables
//! read at the statement's snapshot timestamp, derived tables, joins) → WHERE → GROUP BY and
//! aggregates → HAVING → projection → DISTINCT → ORDER BY → LIMIT.
//!
//! Push-down: equality on `TABLE_SCHEMA`/`TABLE_NAME` (and the other name columns) narrows what
//! an information_schema view generates; comparisons of a key's columns with constants narrow
//! a TiDB table's scan to key ranges, an `ORDER BY` a prefix of the clustered key or of an
//! index is served by the scan's order (partitions merged) instead of a sort (`keyrange.rs`),
//! and a LIMIT sizes the scan's pages. The full WHERE is evaluated on every row either way, so
//! push-down only ever saves work.

use std::cell::RefCell;
use std::sync::Arc;

use sqlparser::ast::Spanned;
use sqlparser::ast::{
    self, GroupByExpr, JoinConstraint, JoinOperator, LimitClause, OrderByKind, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableFactor,
};
use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::{ER_NO_DB_ERROR, ER_NO_TABLES_USED, ER_UNKNOWN_TABLE};
use tokio_util::sync::CancellationToken;

use super::agg::AggCall;
use super::catalog::{CatalogSnapshot, TableMeta};
use super::error::{Result, SqlError};
use super::exec::{
    Aggregate, Chain, Distinct, Filter, Join, Limit, Operator, Project, Scan, Sort, SortKey, Values,
};
use super::expr::{is_aggregate, Compiler, Env, Expr, ExprKind, Scope};
use super::infoschema::{self, Pushdown};
use super::keyrange::{self, Access, ScanOrder, ScanRequest};
use super::perfschema;
use super::refs::Refs;
use super::types::SqlType;

/// Reads a TiDB table at a timestamp.
pub trait SnapshotSource: Send + Sync + std::fmt::Debug {
    /// Rows of `table` (cells in `table.columns` order) as of `ts`, reached by the request's
    /// access path (a superset of the rows the statement wants), in the order it asks (of the
    /// clustered key or of the index read, every partition's rows merged).
    fn scan(
        &self,
        table: &TableMeta,
        ts: u64,
        request: ScanRequest,
    ) -> Result<Box<dyn super::exec::RowStream>>;

    /// Size estimates of the tables, if the source has them.
    fn stats(&self) -> Option<&dyn super::catalog::TableStats> {
        None
    }
}

/// What a query runs against.
pub struct QueryCtx<'a> {
    pub catalog: &'a CatalogSnapshot,
    pub env: &'a dyn Env,
    /// The session's current database.
    pub database: Option<&'a str>,
    /// TiDB table reads, at `read_ts`.
    pub snapshot: Option<&'a dyn SnapshotSource>,
    /// The snapshot timestamp of the statement; `None` before the binlog has a checkpoint.
    pub read_ts: Option<u64>,
    /// Server facts information_schema shows beyond the catalog (sessions).
    pub info: &'a infoschema::ServerFacts,
    /// The original statement text (for column labels).
    pub sql: &'a str,
    pub cancel: CancellationToken,
    /// `'user'@'host'` of a session without the SELECT privilege: reading a TiDB table is
    /// refused (1142) before it is looked up, as MySQL checks privileges first.
    pub select_denied_to: Option<&'a str>,
}

/// One result column.
#[derive(Debug, Clone)]
pub struct OutColumn {
    /// The label clients address the column by.
    pub name: String,
    pub ty: SqlType,
    /// `(schema, table alias, table, column)` for a column read from a table.
    pub origin: Option<(String, String, String, String)>,
    /// MySQL's display length of an integer result (sign included), where it follows from
    /// the expression: a view column is INT up to 9, BIGINT above (`views::int_display_len`).
    pub int_len: Option<u32>,
}

/// A planned query: its columns and the operator producing its rows.
pub struct Planned {
    pub columns: Vec<OutColumn>,
    pub op: Box<dyn Operator>,
}

/// One column visible to expressions.
#[derive(Debug, Clone)]
struct ScopeCol {
    /// Alias or name of the table it comes from.
    table: Option<String>,
    db: Option<String>,
    name: String,
    ty: SqlType,
    /// `(schema, table alias, table, column)` for result column definitions.
    origin: Option<(String, String, String, String)>,
    /// The label a bare reference to it gets (information_schema: its defined name).
    label: Option<String>,
}

/// The columns of the rows flowing out of FROM (and WHERE).
struct RowScope {
    cols: Vec<ScopeCol>,
    clause: &'static str,
}

impl RowScope {
    fn find(&self, qual: &[String], name: &str) -> Result<Option<usize>> {
        let mut hit = None;
        for (i, c) in self.cols.iter().enumerate() {
            if !c.name.eq_ignore_ascii_case(name) {
                continue;
            }
            let ok = match qual {
                [] => true,
                [t] => c.table.as_deref() == Some(t.as_str()),
                [d, t] => {
                    c.table.as_deref() == Some(t.as_str()) && c.db.as_deref() == Some(d.as_str())
                }
                _ => false,
            };
            if ok {
                if hit.is_some() {
                    return Err(SqlError::ambiguous_column(name, self.clause));
                }
                hit = Some(i);
            }
        }
        Ok(hit)
    }
}

impl Scope for RowScope {
    fn column(&self, qual: &[String], name: &str) -> Result<Option<(usize, SqlType)>> {
        Ok(self.find(qual, name)?.map(|i| (i, self.cols[i].ty.clone())))
    }
    fn clause(&self) -> &str {
        self.clause
    }
}

/// Expressions after GROUP BY: group keys and aggregates by their text, other columns through
/// an implicit ANY_VALUE (MySQL without ONLY_FULL_GROUP_BY).
struct AggScope<'a> {
    input: &'a RowScope,
    /// Text of each GROUP BY expression → output index.
    keys: Vec<(String, SqlType)>,
    /// Output index of an input column used as a key.
    key_columns: Vec<(usize, usize)>,
    /// Aggregates by text; output index = keys.len() + position.
    aggs: RefCell<Vec<(String, AggCall)>>,
    clause: &'static str,
}

impl AggScope<'_> {
    fn agg_index(&self, text: &str) -> Option<(usize, SqlType)> {
        self.aggs
            .borrow()
            .iter()
            .position(|(t, _)| t == text)
            .map(|i| (self.keys.len() + i, self.aggs.borrow()[i].1.ty.clone()))
    }
}

impl Scope for AggScope<'_> {
    fn column(&self, qual: &[String], name: &str) -> Result<Option<(usize, SqlType)>> {
        let Some(i) = self.input.find(qual, name)? else {
            return Ok(None);
        };
        if let Some((_, out)) = self.key_columns.iter().find(|(inp, _)| *inp == i) {
            return Ok(Some((*out, self.input.cols[i].ty.clone())));
        }
        let text = format!("ANY_VALUE(#{i})");
        if let Some(hit) = self.agg_index(&text) {
            return Ok(Some(hit));
        }
        let ty = self.input.cols[i].ty.clone();
        let call = AggCall::new("ANY_VALUE", Some(Expr::column(i, ty.clone())), false)?;
        self.aggs.borrow_mut().push((text, call));
        Ok(Some((self.keys.len() + self.aggs.borrow().len() - 1, ty)))
    }

    fn computed(&self, e: &ast::Expr) -> Option<(usize, SqlType)> {
        let text = e.to_string();
        if let Some(i) = self.keys.iter().position(|(t, _)| *t == text) {
            return Some((i, self.keys[i].1.clone()));
        }
        self.agg_index(&text)
    }

    fn clause(&self) -> &str {
        self.clause
    }
}

/// Plans a query.
pub fn plan_query(ctx: &QueryCtx<'_>, q: &ast::Query) -> Result<Planned> {
    if q.with.is_some() {
        return Err(SqlError::unsupported("WITH"));
    }
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return match q.body.as_ref() {
            SetExpr::Query(inner) if q.order_by.is_none() && q.limit_clause.is_none() => {
                plan_query(ctx, inner)
            }
            _ => Err(SqlError::unsupported("this query form (UNION, VALUES, …)")),
        };
    };
    plan_select(ctx, sel, q.order_by.as_ref(), q.limit_clause.as_ref())
}

fn plan_select(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    order_by: Option<&ast::OrderBy>,
    limit: Option<&LimitClause>,
) -> Result<Planned> {
    if sel.into.is_some() {
        return Err(SqlError::unsupported("SELECT … INTO"));
    }
    // FROM, with the WHERE available for push-down into a single source.
    let single = sel.from.len() == 1 && sel.from[0].joins.is_empty();
    let order_keys = order_by_exprs(order_by)?;
    // The columns a scan of the single source decodes: those the statement names.
    let refs = single.then(|| {
        let order = order_by.map(|o| o.to_string()).unwrap_or_default();
        Refs::of(&[&sel.to_string(), &order])
    });
    let wanted = Wanted {
        order: &order_keys,
        rows: rows_wanted(ctx, sel, limit)?,
        refs: refs.as_ref(),
    };
    let (op, scope, scan_order) = match key_ends(ctx, sel, single, refs.as_ref())? {
        Some(ends) => ends,
        None => filtered_from(ctx, sel, single, wanted)?,
    };
    finish_select(ctx, sel, order_keys, limit, op, scope, scan_order)
}

/// Rows of FROM/WHERE, their scope, and the order a scan delivers them in (if any).
type Source = (Box<dyn Operator>, RowScope, Option<String>);

/// What a statement wants from its single source: its ORDER BY, and how many rows in that
/// order at most when nothing between the scan and the LIMIT groups or removes rows (a hint
/// that sizes the scan's pages: the WHERE still filters what it reads).
#[derive(Clone, Copy, Default)]
struct Wanted<'a> {
    order: &'a [OrderKey<'a>],
    rows: Option<u64>,
    /// The columns the statement names (`None`: read every column).
    refs: Option<&'a Refs>,
}

/// LIMIT + OFFSET of a plain `SELECT … [ORDER BY …] LIMIT n` (no grouping, aggregates or
/// DISTINCT).
fn rows_wanted(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    limit: Option<&LimitClause>,
) -> Result<Option<u64>> {
    let Some(limit) = limit else { return Ok(None) };
    let no_group =
        matches!(&sel.group_by, GroupByExpr::Expressions(es, m) if es.is_empty() && m.is_empty());
    let grouped = !no_group || sel.having.is_some() || sel.distinct.is_some();
    let mut aggregates = Vec::new();
    for item in &sel.projection {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
            collect_aggregates(e, &mut aggregates);
        }
    }
    if grouped || !aggregates.is_empty() {
        return Ok(None);
    }
    let (offset, count) = limit_values(ctx, limit)?;
    Ok(count.map(|c| c.saturating_add(offset)))
}

/// The rows of FROM, filtered by WHERE (pushed into a single source's scan where it can be).
fn filtered_from(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    single: bool,
    wanted: Wanted<'_>,
) -> Result<Source> {
    let (mut op, scope, scan_order) = match sel.from.as_slice() {
        [] => (
            Box::new(Values::new(vec![Vec::new()])) as Box<dyn Operator>,
            RowScope {
                cols: Vec::new(),
                clause: "field list",
            },
            None,
        ),
        froms => {
            let mut acc: Option<(Box<dyn Operator>, RowScope)> = None;
            let mut order = None;
            for twj in froms {
                let (o, s, ord) = relation(
                    ctx,
                    &twj.relation,
                    if single { sel.selection.as_ref() } else { None },
                    if single { wanted } else { Wanted::default() },
                )?;
                order = ord;
                let (mut o, mut s) = match acc.take() {
                    None => (o, s),
                    Some((lo, ls)) => cross(lo, ls, o, s),
                };
                for j in &twj.joins {
                    let (ro, rs, _) = relation(ctx, &j.relation, None, Wanted::default())?;
                    (o, s) = join(ctx, o, s, ro, rs, &j.join_operator)?;
                }
                acc = Some((o, s));
            }
            let (o, s) = acc.ok_or_else(|| SqlError::unsupported("an empty FROM"))?;
            (o, s, if single { order } else { None })
        }
    };
    let mut scope = scope;
    scope.clause = "where clause";
    if let Some(w) = &sel.selection {
        let pred = Compiler::new(&scope, ctx.env).compile(w)?;
        op = Box::new(Filter {
            input: op,
            predicate: pred,
        });
    }
    scope.clause = "field list";
    Ok((op, scope, scan_order))
}

/// `SELECT MIN(k), MAX(k) … FROM t [WHERE …]` without GROUP BY, every aggregate a MIN or MAX
/// of one column `k` whose order a scan of `t` delivers (its clustered key or an index): the
/// first non-NULL matching row read upwards (for MIN) and the first read downwards (for MAX)
/// are all the aggregates need, so the table (or index) is read at those ends instead of
/// whole (what chunk splitters ask before they split).
fn key_ends(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    single: bool,
    refs: Option<&Refs>,
) -> Result<Option<Source>> {
    let no_group =
        matches!(&sel.group_by, GroupByExpr::Expressions(es, m) if es.is_empty() && m.is_empty());
    if !single || !no_group {
        return Ok(None);
    }
    let mut calls = Vec::new();
    for item in &sel.projection {
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                collect_aggregates(e, &mut calls)
            }
            _ => return Ok(None),
        }
    }
    if let Some(h) = &sel.having {
        collect_aggregates(h, &mut calls);
    }
    let Some((_, _, Some(first), _)) = calls.first() else {
        return Ok(None);
    };
    let same = |a: &ast::Expr| a.to_string().eq_ignore_ascii_case(&first.to_string());
    let min_max = calls.iter().all(|(_, name, arg, _)| {
        matches!(name.as_str(), "MIN" | "MAX")
            && arg.is_some_and(&same)
            && matches!(
                arg,
                Some(ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_))
            )
    });
    if !min_max {
        return Ok(None);
    }
    // MIN needs the low end only, MAX the high end only.
    let wants = |f: &str| calls.iter().any(|(_, name, ..)| name == f);
    let sides: Vec<bool> = [(false, "MIN"), (true, "MAX")]
        .into_iter()
        .filter(|(_, f)| wants(f))
        .map(|(desc, _)| desc)
        .collect();
    let mut ends: Vec<Box<dyn Operator>> = Vec::with_capacity(2);
    let mut scope_out = None;
    for desc in sides {
        let keys = [OrderKey { expr: first, desc }];
        let wanted = Wanted {
            order: &keys,
            rows: Some(1),
            refs,
        };
        let (op, scope, order) = filtered_from(ctx, sel, true, wanted)?;
        if order.is_none() {
            // The scan cannot deliver the column's order: read the table whole.
            return Ok(None);
        }
        // MIN and MAX skip NULLs, which an index holds at its low end.
        let not_null = ast::Expr::IsNotNull(Box::new((*first).clone()));
        let op = Box::new(Filter {
            input: op,
            predicate: Compiler::new(&scope, ctx.env).compile(&not_null)?,
        });
        ends.push(Box::new(Limit {
            input: op,
            offset: 0,
            count: Some(1),
            seen: 0,
        }));
        scope_out = Some(scope);
    }
    let scope = scope_out.ok_or_else(|| SqlError::unsupported("an empty FROM"))?;
    Ok(Some((
        Box::new(Chain {
            inputs: ends,
            at: 0,
        }),
        scope,
        None,
    )))
}

/// Grouping, the select list, DISTINCT, ORDER BY and LIMIT over the rows of FROM/WHERE.
fn finish_select(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    order_keys: Vec<OrderKey<'_>>,
    limit: Option<&LimitClause>,
    op: Box<dyn Operator>,
    scope: RowScope,
    scan_order: Option<String>,
) -> Result<Planned> {
    let mut op = op;
    // Grouping.
    let group_exprs: Vec<&ast::Expr> = match &sel.group_by {
        GroupByExpr::Expressions(es, mods) if mods.is_empty() => es.iter().collect(),
        GroupByExpr::Expressions(_, _) | GroupByExpr::All(_) => {
            return Err(SqlError::unsupported("this GROUP BY form"))
        }
    };
    let mut agg_calls = Vec::new();
    for item in &sel.projection {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
            collect_aggregates(e, &mut agg_calls);
        }
    }
    if let Some(h) = &sel.having {
        collect_aggregates(h, &mut agg_calls);
    }
    for k in &order_keys {
        collect_aggregates(k.expr, &mut agg_calls);
    }
    let grouped = !group_exprs.is_empty() || !agg_calls.is_empty() || sel.having.is_some();

    // Select list: expand wildcards.
    let mut items: Vec<(SelectTarget, String)> = Vec::new();
    for item in &sel.projection {
        match item {
            SelectItem::Wildcard(_) => {
                if scope.cols.is_empty() {
                    return Err(SqlError::new(ER_NO_TABLES_USED, "No tables used"));
                }
                for (i, c) in scope.cols.iter().enumerate() {
                    items.push((
                        SelectTarget::Column(i),
                        c.label.clone().unwrap_or(c.name.clone()),
                    ));
                }
            }
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                let parts: Vec<String> = name_parts(n);
                let t = parts.last().cloned().unwrap_or_default();
                let mut any = false;
                for (i, c) in scope.cols.iter().enumerate() {
                    if c.table.as_deref() == Some(t.as_str()) {
                        items.push((
                            SelectTarget::Column(i),
                            c.label.clone().unwrap_or(c.name.clone()),
                        ));
                        any = true;
                    }
                }
                if !any {
                    return Err(SqlError::new(
                        ER_UNKNOWN_TABLE,
                        format!("Unknown table '{t}'"),
                    ));
                }
            }
            SelectItem::UnnamedExpr(e) => {
                let label = label_of(ctx, &scope, e);
                items.push((SelectTarget::Expr(e), label));
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                items.push((SelectTarget::Expr(expr), alias.value.clone()));
            }
            other => return Err(SqlError::unsupported(format!("the select item {other}"))),
        }
    }

    // Compile the select list, HAVING and ORDER BY in the scope after FROM or after grouping.
    let mut compiled: Vec<Expr> = Vec::with_capacity(items.len());
    let mut origins = Vec::with_capacity(items.len());
    let mut int_lens = Vec::with_capacity(items.len());
    let mut hidden_order: Vec<(Expr, bool)> = Vec::new();
    let mut order_refs: Vec<(usize, bool)> = Vec::new();
    let mut having = None;
    if grouped {
        let mut group = Vec::with_capacity(group_exprs.len());
        let mut keys = Vec::new();
        let mut key_columns = Vec::new();
        for (i, g) in group_exprs.iter().enumerate() {
            // GROUP BY may name a select alias or a position.
            let g = resolve_alias_or_ordinal(g, &items)?.unwrap_or(g);
            let e = Compiler::new(&scope, ctx.env).compile(g)?;
            if let ExprKind::Column(c) = e.kind {
                key_columns.push((c, i));
            }
            keys.push((g.to_string(), e.ty.clone()));
            group.push(e);
        }
        let aggs = agg_calls
            .iter()
            .map(|(text, name, arg, distinct)| {
                let arg = arg
                    .map(|a| Compiler::new(&scope, ctx.env).compile(a))
                    .transpose()?;
                Ok((text.clone(), AggCall::new(name, arg, *distinct)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let agg_scope = AggScope {
            input: &scope,
            keys,
            key_columns,
            aggs: RefCell::new(aggs),
            clause: "field list",
        };
        let c = Compiler::new(&agg_scope, ctx.env);
        for (t, _) in &items {
            let e = match t {
                SelectTarget::Column(i) => c.compile(&ast::Expr::Identifier(ast::Ident::new(
                    scope.cols[*i].name.clone(),
                )))?,
                SelectTarget::Expr(e) => c.compile(e)?,
            };
            origins.push(origin_of(&scope, t));
            int_lens.push(int_len(&c, t, &e.ty));
            compiled.push(e);
        }
        if let Some(h) = &sel.having {
            having = Some(c.compile(h)?);
        }
        for k in &order_keys {
            match resolve_order(k, &items)? {
                Some(i) => order_refs.push((i, k.desc)),
                None => hidden_order.push((c.compile(k.expr)?, k.desc)),
            }
        }
        let calls: Vec<AggCall> = agg_scope
            .aggs
            .into_inner()
            .into_iter()
            .map(|(_, a)| a)
            .collect();
        op = Box::new(Aggregate::new(op, group, calls));
        if let Some(h) = having.take() {
            op = Box::new(Filter {
                input: op,
                predicate: h,
            });
        }
    } else {
        let c = Compiler::new(&scope, ctx.env);
        for (t, _) in &items {
            let e = match t {
                SelectTarget::Column(i) => Expr::column(*i, scope.cols[*i].ty.clone()),
                SelectTarget::Expr(e) => c.compile(e)?,
            };
            origins.push(origin_of(&scope, t));
            int_lens.push(int_len(&c, t, &e.ty));
            compiled.push(e);
        }
        for k in &order_keys {
            match resolve_order(k, &items)? {
                Some(i) => order_refs.push((i, k.desc)),
                None => hidden_order.push((c.compile(k.expr)?, k.desc)),
            }
        }
    }

    // A scan that already delivers the requested order needs no sort.
    let sorted_by_scan = scan_order.is_some()
        && !grouped
        && sel.distinct.is_none()
        && scan_order == Some(order_signature(&order_keys));
    let visible = compiled.len();
    let types: Vec<SqlType> = compiled.iter().map(|e| e.ty.clone()).collect();
    let mut exprs = compiled;
    let mut sort_keys = Vec::new();
    for (i, desc) in &order_refs {
        sort_keys.push(SortKey {
            expr: Expr::column(*i, types[*i].clone()),
            desc: *desc,
        });
    }
    for (e, desc) in hidden_order {
        let ty = e.ty.clone();
        exprs.push(e);
        sort_keys.push(SortKey {
            expr: Expr::column(exprs.len() - 1, ty),
            desc,
        });
    }
    op = Box::new(Project::new(op, exprs));
    if matches!(sel.distinct, Some(ast::Distinct::Distinct)) {
        op = Box::new(Distinct::new(op, types.clone()));
    } else if matches!(sel.distinct, Some(ast::Distinct::On(_))) {
        return Err(SqlError::unsupported("DISTINCT ON"));
    }
    let limits = limit.map(|l| limit_values(ctx, l)).transpose()?;
    if !sort_keys.is_empty() && !sorted_by_scan {
        let sort = Sort::new(op, sort_keys);
        op = Box::new(match limits {
            // Top-N: what the LIMIT can show is all the sort keeps.
            Some((offset, Some(count))) => {
                sort.top(usize::try_from(offset.saturating_add(count)).unwrap_or(usize::MAX))
            }
            _ => sort,
        });
    }
    if let Some((offset, count)) = limits {
        op = Box::new(Limit {
            input: op,
            offset,
            count,
            seen: 0,
        });
    }
    op = Box::new(Truncate {
        input: op,
        width: visible,
    });
    let columns = items
        .iter()
        .zip(types)
        .zip(origins)
        .zip(int_lens)
        .map(|((((_, label), ty), origin), int_len)| OutColumn {
            name: label.clone(),
            ty,
            origin,
            int_len,
        })
        .collect();
    Ok(Planned { columns, op })
}

/// The display length of an integer select item (see [`OutColumn::int_len`]).
fn int_len(c: &Compiler<'_>, t: &SelectTarget<'_>, ty: &SqlType) -> Option<u32> {
    let SelectTarget::Expr(e) = t else {
        return None;
    };
    super::views::int_display_len(e, ty, &|leaf| c.compile(leaf).ok().map(|x| x.ty))
}

/// Drops hidden trailing columns (ORDER BY keys not in the select list).
struct Truncate {
    input: Box<dyn Operator>,
    width: usize,
}

impl Operator for Truncate {
    fn next(&mut self, out: &mut Vec<Value>) -> Result<bool> {
        let more = self.input.next(out)?;
        out.truncate(self.width);
        Ok(more)
    }
}

enum SelectTarget<'a> {
    Column(usize),
    Expr(&'a ast::Expr),
}

fn origin_of(scope: &RowScope, t: &SelectTarget<'_>) -> Option<(String, String, String, String)> {
    let i = match t {
        SelectTarget::Column(i) => *i,
        SelectTarget::Expr(ast::Expr::Identifier(id)) => scope.find(&[], &id.value).ok()??,
        SelectTarget::Expr(ast::Expr::CompoundIdentifier(ids)) => {
            let (n, q) = ids.split_last()?;
            let q: Vec<String> = q.iter().map(|i| i.value.clone()).collect();
            scope.find(&q, &n.value).ok()??
        }
        _ => return None,
    };
    scope.cols[i].origin.clone()
}

/// The label MySQL gives an unaliased select item: a column's name as written (an
/// information_schema column's defined name), else the item's text as written.
fn label_of(ctx: &QueryCtx<'_>, scope: &RowScope, e: &ast::Expr) -> String {
    let column = match e {
        ast::Expr::Identifier(id) if !id.value.starts_with('@') => scope
            .find(&[], &id.value)
            .ok()
            .flatten()
            .map(|i| (i, id.value.clone())),
        ast::Expr::CompoundIdentifier(ids) if !ids[0].value.starts_with('@') => {
            let (n, q) = match ids.split_last() {
                Some(x) => x,
                None => return e.to_string(),
            };
            let q: Vec<String> = q.iter().map(|i| i.value.clone()).collect();
            scope
                .find(&q, &n.value)
                .ok()
                .flatten()
                .map(|i| (i, n.value.clone()))
        }
        _ => None,
    };
    if let Some((i, written)) = column {
        return scope.cols[i].label.clone().unwrap_or(written);
    }
    source_text(ctx.sql, e).unwrap_or_else(|| e.to_string())
}

/// The exact text of `e` in `sql`, from its span.
pub fn source_text(sql: &str, e: &ast::Expr) -> Option<String> {
    let span = e.span();
    if span.start.line == 0 || span.end.line == 0 {
        return None;
    }
    let offset = |line: u64, col: u64| -> Option<usize> {
        let mut off = 0usize;
        for (i, l) in sql.split_inclusive('\n').enumerate() {
            if i as u64 + 1 == line {
                let mut chars = l.char_indices();
                let c = if col <= 1 {
                    0
                } else {
                    chars.nth(col as usize - 1).map_or(l.len(), |(b, _)| b)
                };
                return Some(off + c);
            }
            off += l.len();
        }
        None
    };
    let start = offset(span.start.line, span.start.column)?;
    let end = offset(span.end.line, span.end.column)?;
    let text = sql.get(start..end)?.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// ORDER BY items as (expression, descending).
struct OrderKey<'a> {
    expr: &'a ast::Expr,
    desc: bool,
}

fn order_by_exprs(order_by: Option<&ast::OrderBy>) -> Result<Vec<OrderKey<'_>>> {
    let Some(o) = order_by else {
        return Ok(Vec::new());
    };
    match &o.kind {
        OrderByKind::Expressions(es) => es
            .iter()
            .map(|e| {
                let desc = match &e.options.sort {
                    None | Some(ast::OrderBySort::Asc) => false,
                    Some(ast::OrderBySort::Desc) => true,
                    Some(other) => {
                        return Err(SqlError::unsupported(format!("ORDER BY … {other:?}")))
                    }
                };
                Ok(OrderKey {
                    expr: &e.expr,
                    desc,
                })
            })
            .collect(),
        OrderByKind::All(_) => Err(SqlError::unsupported("ORDER BY ALL")),
    }
}

/// The select item an ORDER BY key names (a position or an alias), if any.
fn resolve_order(k: &OrderKey<'_>, items: &[(SelectTarget<'_>, String)]) -> Result<Option<usize>> {
    match k.expr {
        ast::Expr::Value(v) => {
            if let ast::Value::Number(n, _) = &v.value {
                let i: usize = n.parse().unwrap_or(0);
                if i == 0 || i > items.len() {
                    return Err(SqlError::unknown_column(n, "order clause"));
                }
                return Ok(Some(i - 1));
            }
            Ok(None)
        }
        ast::Expr::Identifier(id) => Ok(items.iter().position(|(t, label)| {
            label.eq_ignore_ascii_case(&id.value) && matches!(t, SelectTarget::Expr(_) | SelectTarget::Column(_))
                && !matches!(t, SelectTarget::Expr(ast::Expr::Identifier(x)) if !x.value.eq_ignore_ascii_case(&id.value))
        })),
        _ => Ok(None),
    }
}

/// A GROUP BY item naming a select alias or position: the select expression it stands for.
fn resolve_alias_or_ordinal<'a>(
    g: &'a ast::Expr,
    items: &[(SelectTarget<'a>, String)],
) -> Result<Option<&'a ast::Expr>> {
    match g {
        ast::Expr::Value(v) => {
            if let ast::Value::Number(n, _) = &v.value {
                let i: usize = n.parse().unwrap_or(0);
                return match items.get(i.wrapping_sub(1)) {
                    Some((SelectTarget::Expr(e), _)) => Ok(Some(e)),
                    Some((SelectTarget::Column(_), _)) => Ok(None),
                    None => Err(SqlError::unknown_column(n, "group statement")),
                };
            }
            Ok(None)
        }
        ast::Expr::Identifier(id) => Ok(items.iter().find_map(|(t, label)| match t {
            SelectTarget::Expr(e)
                if label.eq_ignore_ascii_case(&id.value)
                    && !matches!(e, ast::Expr::Identifier(_)) =>
            {
                Some(*e)
            }
            _ => None,
        })),
        _ => Ok(None),
    }
}

fn limit_values(ctx: &QueryCtx<'_>, l: &LimitClause) -> Result<(u64, Option<u64>)> {
    let num = |e: &ast::Expr| -> Result<u64> {
        let c = Compiler::new(&super::expr::NoColumns, ctx.env).compile(e)?;
        match c.kind {
            ExprKind::Const(Value::Int(i)) if i >= 0 => Ok(i as u64),
            ExprKind::Const(Value::UInt(u)) => Ok(u),
            _ => Err(SqlError::unsupported(format!("LIMIT {e}"))),
        }
    };
    match l {
        LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        } => {
            if !limit_by.is_empty() {
                return Err(SqlError::unsupported("LIMIT BY"));
            }
            let count = limit.as_ref().map(&num).transpose()?;
            let offset = offset
                .as_ref()
                .map(|o| num(&o.value))
                .transpose()?
                .unwrap_or(0);
            Ok((offset, count))
        }
        LimitClause::OffsetCommaLimit { offset, limit } => Ok((num(offset)?, Some(num(limit)?))),
    }
}

/// Aggregate calls found in an expression: (text, name, argument, distinct).
type AggRef<'a> = (String, String, Option<&'a ast::Expr>, bool);

fn collect_aggregates<'a>(e: &'a ast::Expr, out: &mut Vec<AggRef<'a>>) {
    // An explicit stack: operator chains nest as deep as they are long.
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_uppercase();
                if is_aggregate(&name) {
                    let text = e.to_string();
                    if out.iter().any(|(t, ..)| *t == text) {
                        continue;
                    }
                    let (arg, distinct) = match &f.args {
                        ast::FunctionArguments::List(l) => {
                            let distinct = matches!(
                                l.duplicate_treatment,
                                Some(ast::DuplicateTreatment::Distinct)
                            );
                            match l.args.as_slice() {
                                [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a))] => {
                                    (Some(a), distinct)
                                }
                                _ => (None, distinct),
                            }
                        }
                        _ => (None, false),
                    };
                    out.push((text, name, arg, distinct));
                    continue;
                }
                if let ast::FunctionArguments::List(l) = &f.args {
                    for a in &l.args {
                        if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) = a {
                            stack.push(x);
                        }
                    }
                }
            }
            ast::Expr::BinaryOp { left, right, .. } => {
                stack.push(right);
                stack.push(left);
            }
            ast::Expr::UnaryOp { expr, .. }
            | ast::Expr::Nested(expr)
            | ast::Expr::IsNull(expr)
            | ast::Expr::IsNotNull(expr)
            | ast::Expr::IsTrue(expr)
            | ast::Expr::IsFalse(expr)
            | ast::Expr::Cast { expr, .. } => stack.push(expr),
            ast::Expr::Between {
                expr, low, high, ..
            } => {
                stack.push(high);
                stack.push(low);
                stack.push(expr);
            }
            ast::Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                if let Some(e) = else_result {
                    stack.push(e);
                }
                for c in conditions.iter().rev() {
                    stack.push(&c.result);
                    stack.push(&c.condition);
                }
                if let Some(o) = operand {
                    stack.push(o);
                }
            }
            _ => {}
        }
    }
}

fn name_parts(n: &ast::ObjectName) -> Vec<String> {
    n.0.iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.clone())
        .collect()
}

/// A FROM item: its operator, its columns, and (for a TiDB table scanned by its integer key)
/// the ORDER BY it delivers for free.
fn relation(
    ctx: &QueryCtx<'_>,
    r: &TableFactor,
    selection: Option<&ast::Expr>,
    wanted: Wanted<'_>,
) -> Result<(Box<dyn Operator>, RowScope, Option<String>)> {
    match r {
        TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } => {
            let parts = name_parts(name);
            let (db, table) = match parts.as_slice() {
                [t] => {
                    if t.eq_ignore_ascii_case("dual") {
                        return Ok((
                            Box::new(Values::new(vec![Vec::new()])),
                            RowScope {
                                cols: Vec::new(),
                                clause: "field list",
                            },
                            None,
                        ));
                    }
                    let db = ctx
                        .database
                        .ok_or_else(|| SqlError::new(ER_NO_DB_ERROR, "No database selected"))?;
                    (db.to_owned(), t.clone())
                }
                [d, t] => (d.clone(), t.clone()),
                _ => return Err(SqlError::unsupported(format!("the table name {name}"))),
            };
            let alias = alias.as_ref().map(|a| a.name.value.clone());
            if infoschema::is_schema(&db) {
                return info_table(ctx, &db, &table, alias, selection);
            }
            if perfschema::is_schema(&db) {
                return perf_table(ctx, &db, &table, alias);
            }
            if let Some(who) = ctx.select_denied_to {
                return Err(SqlError::new(
                    tibinlog_protocol::wire::errors::ER_TABLEACCESS_DENIED_ERROR,
                    format!("SELECT command denied to user {who} for table '{table}'"),
                ));
            }
            let meta = ctx
                .catalog
                .table(&db, &table)
                .ok_or_else(|| {
                    if ctx.catalog.database(&db).is_none() {
                        SqlError::unknown_database(&db)
                    } else {
                        SqlError::no_such_table(&db, &table)
                    }
                })?
                .clone();
            tidb_table(ctx, meta, alias, selection, wanted)
        }
        TableFactor::Derived {
            lateral: false,
            subquery,
            alias,
            ..
        } => {
            let alias = alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .ok_or_else(|| {
                    SqlError::new(
                        tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR,
                        "Every derived table must have its own alias",
                    )
                })?;
            Ok(derived(plan_query(ctx, subquery)?, alias, None))
        }
        other => Err(SqlError::unsupported(format!("the FROM item {other}"))),
    }
}

/// A FROM item whose rows a query of its own produces (a derived table, a view), addressed as
/// `table` (of database `db`, for a view).
fn derived(
    planned: Planned,
    table: String,
    db: Option<String>,
) -> (Box<dyn Operator>, RowScope, Option<String>) {
    let cols = planned
        .columns
        .iter()
        .map(|c| ScopeCol {
            table: Some(table.clone()),
            db: db.clone(),
            name: c.name.clone(),
            ty: c.ty.clone(),
            origin: None,
            label: None,
        })
        .collect();
    let scope = RowScope {
        cols,
        clause: "field list",
    };
    (planned.op, scope, None)
}

fn info_table(
    ctx: &QueryCtx<'_>,
    db: &str,
    table: &str,
    alias: Option<String>,
    selection: Option<&ast::Expr>,
) -> Result<(Box<dyn Operator>, RowScope, Option<String>)> {
    let def = infoschema::table(db, table).ok_or_else(|| SqlError::no_such_table(db, table))?;
    let mut push = Pushdown::default();
    if let Some(w) = selection {
        for (col, val) in equalities(w) {
            push.eq.push((col.to_ascii_uppercase(), val));
        }
    }
    let stats = ctx.snapshot.and_then(|s| s.stats());
    let rows = infoschema::rows(def, ctx.catalog, ctx.info, &push, stats);
    Ok(view_scan(
        def,
        rows,
        infoschema::schema_name(db),
        db,
        table,
        alias,
    ))
}

/// A `performance_schema` table: the session's and the server's variables or status.
fn perf_table(
    ctx: &QueryCtx<'_>,
    db: &str,
    table: &str,
    alias: Option<String>,
) -> Result<(Box<dyn Operator>, RowScope, Option<String>)> {
    let (def, view) = perfschema::table(table).ok_or_else(|| SqlError::no_such_table(db, table))?;
    let rows = perfschema::rows(ctx.env.server_variables(view));
    Ok(view_scan(
        def,
        rows,
        perfschema::PERFORMANCE_SCHEMA,
        db,
        table,
        alias,
    ))
}

/// The scan of a system view's rows.
fn view_scan(
    def: &infoschema::InfoTable,
    rows: Vec<Vec<Value>>,
    schema: &str,
    db: &str,
    table: &str,
    alias: Option<String>,
) -> (Box<dyn Operator>, RowScope, Option<String>) {
    let tname = alias.unwrap_or_else(|| table.to_owned());
    let cols = def
        .columns
        .iter()
        .map(|(name, ty)| ScopeCol {
            table: Some(tname.clone()),
            db: Some(db.to_owned()),
            name: (*name).to_owned(),
            ty: ty.clone(),
            origin: Some((
                schema.to_owned(),
                tname.clone(),
                def.name.to_owned(),
                (*name).to_owned(),
            )),
            label: Some((*name).to_owned()),
        })
        .collect();
    (
        Box::new(Values::new(rows)),
        RowScope {
            cols,
            clause: "field list",
        },
        None,
    )
}

/// `column = 'constant'` conjuncts of a WHERE (for information_schema push-down).
fn equalities(w: &ast::Expr) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for c in conjuncts(w) {
        if let ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::Eq,
            right,
        } = c
        {
            let (col, val) = match (left.as_ref(), right.as_ref()) {
                (col, ast::Expr::Value(v)) | (ast::Expr::Value(v), col) => (col, v),
                _ => continue,
            };
            let name = match col {
                ast::Expr::Identifier(i) => i.value.clone(),
                ast::Expr::CompoundIdentifier(ids) => match ids.last() {
                    Some(i) => i.value.clone(),
                    None => continue,
                },
                _ => continue,
            };
            if let ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) =
                &val.value
            {
                out.push((name, s.clone()));
            }
        }
    }
    out
}

/// The AND-ed parts of a predicate (without recursion into other operators).
fn conjuncts(w: &ast::Expr) -> Vec<&ast::Expr> {
    let mut out = Vec::new();
    let mut stack = vec![w];
    while let Some(e) = stack.pop() {
        match e {
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::And,
                right,
            } => {
                stack.push(right);
                stack.push(left);
            }
            ast::Expr::Nested(inner) => stack.push(inner),
            other => out.push(other),
        }
    }
    out
}

/// The text of an ORDER BY on one column, as a scan's order is described.
fn order_signature(keys: &[OrderKey<'_>]) -> String {
    keys.iter()
        .map(|k| {
            let name = match k.expr {
                ast::Expr::Identifier(i) => i.value.to_ascii_lowercase(),
                ast::Expr::CompoundIdentifier(ids) => ids
                    .last()
                    .map(|i| i.value.to_ascii_lowercase())
                    .unwrap_or_default(),
                other => other.to_string(),
            };
            format!("{name}{}", if k.desc { " desc" } else { "" })
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn tidb_table(
    ctx: &QueryCtx<'_>,
    meta: Arc<TableMeta>,
    alias: Option<String>,
    selection: Option<&ast::Expr>,
    wanted: Wanted<'_>,
) -> Result<(Box<dyn Operator>, RowScope, Option<String>)> {
    let tname = alias.unwrap_or_else(|| meta.name.clone());
    if meta.is_view() {
        let planned = super::views::expand(ctx, &meta)?;
        return Ok(derived(planned, tname, Some(meta.db.clone())));
    }
    let cols: Vec<ScopeCol> = meta
        .columns
        .iter()
        .map(|c| ScopeCol {
            table: Some(tname.clone()),
            db: Some(meta.db.clone()),
            name: c.name.clone(),
            ty: c.ty.clone(),
            origin: Some((
                meta.db.clone(),
                tname.clone(),
                meta.name.clone(),
                c.name.clone(),
            )),
            label: None,
        })
        .collect();
    let scope = RowScope {
        cols,
        clause: "field list",
    };
    let source = ctx.snapshot.ok_or_else(|| {
        SqlError::unsupported("reading tables on this server (no TiKV snapshot reader)")
    })?;
    let (access, scan_order, order) = scan_plan(ctx, &meta, &scope, selection, wanted.order)?;
    // The LIMIT bounds the rows read only when they come in the ORDER BY's order.
    let rows = (wanted.order.is_empty() || scan_order.is_some())
        .then_some(wanted.rows)
        .flatten();
    let ts = ctx.read_ts.ok_or_else(|| {
        SqlError::new(
            tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR,
            "no snapshot point yet: the binlog has no checkpoint to read tables at",
        )
    })?;
    let columns = wanted
        .refs
        .and_then(|r| r.mask(meta.columns.iter().map(|c| c.name.as_str())));
    let request = ScanRequest {
        access,
        order,
        rows,
        columns,
    };
    let stream = source.scan(&meta, ts, request)?;
    Ok((
        Box::new(Scan::new(stream, ctx.cancel.clone())),
        scope,
        scan_order,
    ))
}

/// How a scan of `meta` reaches the rows `selection` can match, the ORDER BY it delivers (its
/// signature, to skip the sort) and the order to ask the scan for (`keyrange::access_path`).
fn scan_plan(
    ctx: &QueryCtx<'_>,
    meta: &TableMeta,
    scope: &RowScope,
    selection: Option<&ast::Expr>,
    order: &[OrderKey<'_>],
) -> Result<(Access, Option<String>, ScanOrder)> {
    let mut compiled = Vec::new();
    if let Some(w) = selection {
        let c = Compiler::new(scope, ctx.env);
        // A conjunct that does not compile here fails the WHERE's own compilation later.
        compiled.extend(conjuncts(w).into_iter().filter_map(|p| c.compile(p).ok()));
    }
    let wanted: Option<Vec<(String, bool)>> = order
        .iter()
        .map(|k| match k.expr {
            ast::Expr::Identifier(i) => Some((i.value.clone(), k.desc)),
            ast::Expr::CompoundIdentifier(ids) => ids.last().map(|i| (i.value.clone(), k.desc)),
            _ => None,
        })
        .collect();
    let (access, scan_order) = keyrange::access_path(meta, &compiled, wanted.as_deref());
    let signature = (scan_order != ScanOrder::Unordered).then(|| order_signature(order));
    Ok((access, signature, scan_order))
}

fn cross(
    lo: Box<dyn Operator>,
    ls: RowScope,
    ro: Box<dyn Operator>,
    rs: RowScope,
) -> (Box<dyn Operator>, RowScope) {
    let width = rs.cols.len();
    let mut cols = ls.cols;
    cols.extend(rs.cols);
    (
        Box::new(Join::new(lo, ro, width, None, false)),
        RowScope {
            cols,
            clause: "field list",
        },
    )
}

fn join(
    ctx: &QueryCtx<'_>,
    lo: Box<dyn Operator>,
    ls: RowScope,
    ro: Box<dyn Operator>,
    rs: RowScope,
    op: &JoinOperator,
) -> Result<(Box<dyn Operator>, RowScope)> {
    let (constraint, outer) = match op {
        JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => (c, false),
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (c, true),
        other => return Err(SqlError::unsupported(format!("the join {other:?}"))),
    };
    let width = rs.cols.len();
    let mut cols = ls.cols;
    cols.extend(rs.cols);
    let scope = RowScope {
        cols,
        clause: "on clause",
    };
    let on = match constraint {
        JoinConstraint::On(e) => Some(Compiler::new(&scope, ctx.env).compile(e)?),
        JoinConstraint::None | JoinConstraint::Natural if !outer => None,
        other => {
            return Err(SqlError::unsupported(format!(
                "the join constraint {other:?}"
            )))
        }
    };
    Ok((
        Box::new(Join::new(lo, ro, width, on, outer)),
        RowScope {
            cols: scope.cols,
            clause: "field list",
        },
    ))
}

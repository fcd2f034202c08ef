//! The FROM items a SELECT reads: information_schema and performance_schema views, TiDB
//! tables scanned at the statement's snapshot (with the key ranges and order a WHERE and an
//! ORDER BY allow), views and derived tables, and joins of them.

use std::sync::Arc;

use sqlparser::ast::{self, JoinConstraint, JoinOperator};
use tibinlog_protocol::value::Value;

use crate::sql::catalog::TableMeta;
use crate::sql::error::{Result, SqlError};
use crate::sql::exec::{Join, Operator, Scan, Values};
use crate::sql::expr::Compiler;
use crate::sql::infoschema::{self, Pushdown};
use crate::sql::keyrange::{self, Access, ScanOrder, ScanRequest};
use crate::sql::perfschema;
use crate::sql::refs::Refs;
use crate::sql::views;

use super::clauses::{conjuncts, equalities, order_signature, OrderKey};
use super::context::{Planned, QueryCtx};
use super::scope::{RowScope, ScopeCol};

/// Rows of FROM/WHERE, their scope, and the order a scan delivers them in (if any).
pub(super) type Source = (Box<dyn Operator>, RowScope, Option<String>);

/// What a statement wants from its single source: its ORDER BY, and how many rows in that
/// order at most when nothing between the scan and the LIMIT groups or removes rows (a hint
/// that sizes the scan's pages: the WHERE still filters what it reads).
#[derive(Clone, Copy, Default)]
pub(super) struct Wanted<'a> {
    pub(super) order: &'a [OrderKey<'a>],
    pub(super) rows: Option<u64>,
    /// The columns the statement names (`None`: read every column).
    pub(super) refs: Option<&'a Refs>,
}

/// A FROM item whose rows a query of its own produces (a derived table, a view), addressed as
/// `table` (of database `db`, for a view).
pub(super) fn derived(
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

pub(super) fn info_table(
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
pub(super) fn perf_table(
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
pub(super) fn view_scan(
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

pub(super) fn tidb_table(
    ctx: &QueryCtx<'_>,
    meta: Arc<TableMeta>,
    alias: Option<String>,
    selection: Option<&ast::Expr>,
    wanted: Wanted<'_>,
) -> Result<(Box<dyn Operator>, RowScope, Option<String>)> {
    let tname = alias.unwrap_or_else(|| meta.name.clone());
    if meta.is_view() {
        let planned = views::expand(ctx, &meta)?;
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
pub(super) fn scan_plan(
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

pub(super) fn cross(
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

pub(super) fn join(
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

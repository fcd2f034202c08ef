//! A SELECT planned: FROM and WHERE (with a WHERE pushed into a single source, and MIN/MAX of
//! an ordered column read at the ends of a scan), then what `finish.rs` adds over its rows.

use sqlparser::ast::{self, GroupByExpr, LimitClause, SelectItem, SetExpr, TableFactor};
use tibinlog_protocol::wire::errors::ER_NO_DB_ERROR;

use crate::sql::error::{Result, SqlError};
use crate::sql::exec::{Chain, Filter, Limit, Operator, Values};
use crate::sql::expr::Compiler;
use crate::sql::infoschema;
use crate::sql::perfschema;
use crate::sql::refs::Refs;

use super::clauses::{collect_aggregates, limit_values, name_parts, order_by_exprs, OrderKey};
use super::context::{Planned, QueryCtx};
use super::finish::finish_select;
use super::scope::RowScope;
use super::sources::{cross, derived, info_table, join, perf_table, tidb_table, Source, Wanted};

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

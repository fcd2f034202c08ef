//! What a SELECT adds over the rows of FROM and WHERE: grouping and aggregates, HAVING, the
//! select list, DISTINCT, ORDER BY (unless the scan delivers its order) and LIMIT.

use std::cell::RefCell;

use sqlparser::ast::{self, GroupByExpr, LimitClause, SelectItem, SelectItemQualifiedWildcardKind};
use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::{ER_NO_TABLES_USED, ER_UNKNOWN_TABLE};

use crate::sql::agg::AggCall;
use crate::sql::error::{Result, SqlError};
use crate::sql::exec::{Aggregate, Distinct, Filter, Limit, Operator, Project, Sort, SortKey};
use crate::sql::expr::{Compiler, Expr, ExprKind};
use crate::sql::types::SqlType;
use crate::sql::views;

use super::clauses::{
    collect_aggregates, label_of, limit_values, name_parts, order_signature, origin_of,
    resolve_alias_or_ordinal, resolve_order, AggRef, OrderKey, SelectTarget,
};
use super::context::{OutColumn, Planned, QueryCtx};
use super::scope::{AggScope, RowScope};

/// The select items, each with its label.
type Items<'a> = [(SelectTarget<'a>, String)];

/// The select list compiled: each item's expression, origin and integer display length.
struct SelectList {
    exprs: Vec<Expr>,
    origins: Vec<Option<(String, String, String, String)>>,
    int_lens: Vec<Option<u32>>,
}

/// The ORDER BY keys compiled: select items by position, and the keys that are not select
/// items (hidden columns after the items).
struct OrderPlan {
    refs: Vec<(usize, bool)>,
    hidden: Vec<(Expr, bool)>,
}

/// Grouping, the select list, DISTINCT, ORDER BY and LIMIT over the rows of FROM/WHERE.
pub(super) fn finish_select(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    order_keys: Vec<OrderKey<'_>>,
    limit: Option<&LimitClause>,
    op: Box<dyn Operator>,
    scope: RowScope,
    scan_order: Option<String>,
) -> Result<Planned> {
    let group_exprs = group_by_exprs(sel)?;
    let agg_calls = aggregate_calls(sel, &order_keys);
    let grouped = !group_exprs.is_empty() || !agg_calls.is_empty() || sel.having.is_some();
    let items = select_items(ctx, sel, &scope)?;
    // Compile the select list, HAVING and ORDER BY in the scope after FROM or after grouping.
    let (op, list, order) = if grouped {
        let grouping = (&group_exprs[..], &agg_calls[..]);
        grouped_list(ctx, sel, &order_keys, op, &scope, &items, grouping)?
    } else {
        let c = Compiler::new(&scope, ctx.env);
        let list = compile_items(&c, &scope, &items, false)?;
        let order = compile_order(&c, &items, &order_keys)?;
        (op, list, order)
    };
    // A scan that already delivers the requested order needs no sort.
    let sorted_by_scan = scan_order.is_some()
        && !grouped
        && sel.distinct.is_none()
        && scan_order == Some(order_signature(&order_keys));
    let SelectList {
        exprs,
        origins,
        int_lens,
    } = list;
    let (op, types) = project_and_order(ctx, sel, limit, op, exprs, order, sorted_by_scan)?;
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

/// The GROUP BY expressions (none without GROUP BY); other GROUP BY forms are refused.
fn group_by_exprs(sel: &ast::Select) -> Result<Vec<&ast::Expr>> {
    match &sel.group_by {
        GroupByExpr::Expressions(es, mods) if mods.is_empty() => Ok(es.iter().collect()),
        GroupByExpr::Expressions(_, _) | GroupByExpr::All(_) => {
            Err(SqlError::unsupported("this GROUP BY form"))
        }
    }
}

/// The aggregate calls of the select list, HAVING and ORDER BY, each once.
fn aggregate_calls<'a>(sel: &'a ast::Select, order_keys: &[OrderKey<'a>]) -> Vec<AggRef<'a>> {
    let mut agg_calls = Vec::new();
    for item in &sel.projection {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
            collect_aggregates(e, &mut agg_calls);
        }
    }
    if let Some(h) = &sel.having {
        collect_aggregates(h, &mut agg_calls);
    }
    for k in order_keys {
        collect_aggregates(k.expr, &mut agg_calls);
    }
    agg_calls
}

/// The select list with its wildcards expanded, each item with its label.
fn select_items<'a>(
    ctx: &QueryCtx<'_>,
    sel: &'a ast::Select,
    scope: &RowScope,
) -> Result<Vec<(SelectTarget<'a>, String)>> {
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
                let label = label_of(ctx, scope, e);
                items.push((SelectTarget::Expr(e), label));
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                items.push((SelectTarget::Expr(expr), alias.value.clone()));
            }
            other => return Err(SqlError::unsupported(format!("the select item {other}"))),
        }
    }
    Ok(items)
}

/// The select list, HAVING and ORDER BY over grouped rows: an [`Aggregate`] over `op` computes
/// the GROUP BY keys and the aggregate calls of `grouping`, and HAVING filters its rows.
fn grouped_list<'a>(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    order_keys: &[OrderKey<'_>],
    op: Box<dyn Operator>,
    scope: &RowScope,
    items: &Items<'a>,
    (group_exprs, agg_calls): (&[&'a ast::Expr], &[AggRef<'_>]),
) -> Result<(Box<dyn Operator>, SelectList, OrderPlan)> {
    let GroupKeys {
        exprs: group,
        keys,
        key_columns,
    } = group_keys(ctx, scope, items, group_exprs)?;
    let aggs = agg_calls
        .iter()
        .map(|(text, name, arg, distinct)| {
            let arg = arg
                .map(|a| Compiler::new(scope, ctx.env).compile(a))
                .transpose()?;
            Ok((text.clone(), AggCall::new(name, arg, *distinct)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let agg_scope = AggScope {
        input: scope,
        keys,
        key_columns,
        aggs: RefCell::new(aggs),
        clause: "field list",
    };
    let c = Compiler::new(&agg_scope, ctx.env);
    let list = compile_items(&c, scope, items, true)?;
    let having = sel.having.as_ref().map(|h| c.compile(h)).transpose()?;
    let order = compile_order(&c, items, order_keys)?;
    let calls: Vec<AggCall> = agg_scope
        .aggs
        .into_inner()
        .into_iter()
        .map(|(_, a)| a)
        .collect();
    let mut op: Box<dyn Operator> = Box::new(Aggregate::new(op, group, calls));
    if let Some(h) = having {
        op = Box::new(Filter {
            input: op,
            predicate: h,
        });
    }
    Ok((op, list, order))
}

/// The GROUP BY keys compiled, with their texts and types, and the input columns that are
/// keys.
struct GroupKeys {
    exprs: Vec<Expr>,
    /// (text, type) of each key.
    keys: Vec<(String, SqlType)>,
    /// (input index, key index) of each input column used as a key.
    key_columns: Vec<(usize, usize)>,
}

/// The GROUP BY expressions compiled over the rows of FROM (an alias or a position stands for
/// its select item).
fn group_keys<'a>(
    ctx: &QueryCtx<'_>,
    scope: &RowScope,
    items: &Items<'a>,
    group_exprs: &[&'a ast::Expr],
) -> Result<GroupKeys> {
    let mut group = Vec::with_capacity(group_exprs.len());
    let mut keys = Vec::new();
    let mut key_columns = Vec::new();
    for (i, g) in group_exprs.iter().enumerate() {
        // GROUP BY may name a select alias or a position.
        let g = resolve_alias_or_ordinal(g, items)?.unwrap_or(g);
        let e = Compiler::new(scope, ctx.env).compile(g)?;
        if let ExprKind::Column(c) = e.kind {
            key_columns.push((c, i));
        }
        keys.push((g.to_string(), e.ty.clone()));
        group.push(e);
    }
    Ok(GroupKeys {
        exprs: group,
        keys,
        key_columns,
    })
}

/// The select items compiled by `c`; over grouped rows a column is found by its name (a key,
/// or an implicit ANY_VALUE), else it is the input column itself.
fn compile_items(
    c: &Compiler<'_>,
    scope: &RowScope,
    items: &Items<'_>,
    grouped: bool,
) -> Result<SelectList> {
    let mut list = SelectList {
        exprs: Vec::with_capacity(items.len()),
        origins: Vec::with_capacity(items.len()),
        int_lens: Vec::with_capacity(items.len()),
    };
    for (t, _) in items {
        let e = match t {
            SelectTarget::Column(i) if grouped => c.compile(&ast::Expr::Identifier(
                ast::Ident::new(scope.cols[*i].name.clone()),
            ))?,
            SelectTarget::Column(i) => Expr::column(*i, scope.cols[*i].ty.clone()),
            SelectTarget::Expr(e) => c.compile(e)?,
        };
        list.origins.push(origin_of(scope, t));
        list.int_lens.push(int_len(c, t, &e.ty));
        list.exprs.push(e);
    }
    Ok(list)
}

/// The ORDER BY keys: a select item's position, or an expression compiled by `c`.
fn compile_order(
    c: &Compiler<'_>,
    items: &Items<'_>,
    order_keys: &[OrderKey<'_>],
) -> Result<OrderPlan> {
    let mut order = OrderPlan {
        refs: Vec::new(),
        hidden: Vec::new(),
    };
    for k in order_keys {
        match resolve_order(k, items)? {
            Some(i) => order.refs.push((i, k.desc)),
            None => order.hidden.push((c.compile(k.expr)?, k.desc)),
        }
    }
    Ok(order)
}

/// The projection of `exprs` (and the hidden ORDER BY keys after them), then DISTINCT, the
/// sort (unless the scan delivers the order), LIMIT, and the hidden keys dropped; with the
/// types of the visible columns.
fn project_and_order(
    ctx: &QueryCtx<'_>,
    sel: &ast::Select,
    limit: Option<&LimitClause>,
    op: Box<dyn Operator>,
    compiled: Vec<Expr>,
    order: OrderPlan,
    sorted_by_scan: bool,
) -> Result<(Box<dyn Operator>, Vec<SqlType>)> {
    let visible = compiled.len();
    let types: Vec<SqlType> = compiled.iter().map(|e| e.ty.clone()).collect();
    let mut exprs = compiled;
    let mut sort_keys = Vec::new();
    for (i, desc) in &order.refs {
        sort_keys.push(SortKey {
            expr: Expr::column(*i, types[*i].clone()),
            desc: *desc,
        });
    }
    for (e, desc) in order.hidden {
        let ty = e.ty.clone();
        exprs.push(e);
        sort_keys.push(SortKey {
            expr: Expr::column(exprs.len() - 1, ty),
            desc,
        });
    }
    let mut op: Box<dyn Operator> = Box::new(Project::new(op, exprs));
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
    Ok((op, types))
}

/// The display length of an integer select item (see [`OutColumn::int_len`]).
fn int_len(c: &Compiler<'_>, t: &SelectTarget<'_>, ty: &SqlType) -> Option<u32> {
    let SelectTarget::Expr(e) = t else {
        return None;
    };
    views::int_display_len(e, ty, &|leaf| c.compile(leaf).ok().map(|x| x.ty))
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

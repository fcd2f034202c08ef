//! The clauses of a SELECT read from sqlparser's tree: select items and their labels, ORDER
//! BY keys, LIMIT, the aggregates an expression calls, and the conjuncts of a WHERE.

use sqlparser::ast::{self, LimitClause, OrderByKind, Spanned};
use tibinlog_protocol::value::Value;

use crate::sql::error::{Result, SqlError};
use crate::sql::expr::{is_aggregate, Compiler, ExprKind, NoColumns};

use super::context::QueryCtx;
use super::scope::RowScope;

pub(super) enum SelectTarget<'a> {
    Column(usize),
    Expr(&'a ast::Expr),
}

pub(super) fn origin_of(
    scope: &RowScope,
    t: &SelectTarget<'_>,
) -> Option<(String, String, String, String)> {
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
pub(super) fn label_of(ctx: &QueryCtx<'_>, scope: &RowScope, e: &ast::Expr) -> String {
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
pub(super) struct OrderKey<'a> {
    pub(super) expr: &'a ast::Expr,
    pub(super) desc: bool,
}

pub(super) fn order_by_exprs(order_by: Option<&ast::OrderBy>) -> Result<Vec<OrderKey<'_>>> {
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
pub(super) fn resolve_order(
    k: &OrderKey<'_>,
    items: &[(SelectTarget<'_>, String)],
) -> Result<Option<usize>> {
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
pub(super) fn resolve_alias_or_ordinal<'a>(
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

pub(super) fn limit_values(ctx: &QueryCtx<'_>, l: &LimitClause) -> Result<(u64, Option<u64>)> {
    let num = |e: &ast::Expr| -> Result<u64> {
        let c = Compiler::new(&NoColumns, ctx.env).compile(e)?;
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
pub(super) type AggRef<'a> = (String, String, Option<&'a ast::Expr>, bool);

pub(super) fn collect_aggregates<'a>(e: &'a ast::Expr, out: &mut Vec<AggRef<'a>>) {
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

pub(super) fn name_parts(n: &ast::ObjectName) -> Vec<String> {
    n.0.iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.clone())
        .collect()
}

/// `column = 'constant'` conjuncts of a WHERE (for information_schema push-down).
pub(super) fn equalities(w: &ast::Expr) -> Vec<(String, String)> {
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
pub(super) fn conjuncts(w: &ast::Expr) -> Vec<&ast::Expr> {
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
pub(super) fn order_signature(keys: &[OrderKey<'_>]) -> String {
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

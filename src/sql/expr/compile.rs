//! The compiler: sqlparser's expression nodes to typed trees, against a scope and an
//! environment. This file holds the dispatch over node kinds and the nodes that are names,
//! literals, unary operators and special syntax; `operators.rs` holds the operators and calls.

use sqlparser::ast::{self, CastKind, DataType, InTarget, ObjectName, TypedString, UnaryOperator};
use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::ER_UNKNOWN_CHARACTER_SET;

use crate::sql::charset;
use crate::sql::error::{Result, SqlError};
use crate::sql::like::CaseRule;
use crate::sql::types::SqlType;
use crate::sql::value::CmpMode;

use super::literal::{literal, negate_const};
use super::scope::{Env, Scope};
use super::tree::{bool_type, expr, literal_string_type, ArithOp, CmpOp, Expr, ExprKind};
use super::typing::{arith_type, const_type};

/// How deep compiled expressions may nest. Chains of AND, OR and arithmetic are flat nodes
/// and parentheses are bounded by the parser, so only chains of other operators
/// (`a = b = c …`) can get here; they are refused rather than evaluated on a deep stack.
pub const MAX_DEPTH: usize = 128;

/// Compiles sqlparser expressions against a scope and an environment.
pub struct Compiler<'a> {
    pub scope: &'a dyn Scope,
    pub env: &'a dyn Env,
    depth: std::cell::Cell<usize>,
}

/// Leaves one level of [`Compiler::compile`] when dropped.
struct DepthGuard<'a>(&'a std::cell::Cell<usize>);

impl Drop for DepthGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

impl<'a> Compiler<'a> {
    /// A compiler resolving names in `scope` and `env`.
    pub fn new(scope: &'a dyn Scope, env: &'a dyn Env) -> Self {
        Compiler {
            scope,
            env,
            depth: std::cell::Cell::new(0),
        }
    }

    /// Compiles one expression (and its operands, at most [`MAX_DEPTH`] levels deep).
    pub fn compile(&self, e: &ast::Expr) -> Result<Expr> {
        let depth = self.depth.get() + 1;
        if depth > MAX_DEPTH {
            return Err(SqlError::new(
                tibinlog_protocol::wire::errors::ER_STACK_OVERRUN_NEED_MORE,
                format!("the expression nests more than {MAX_DEPTH} levels deep"),
            ));
        }
        self.depth.set(depth);
        let _guard = DepthGuard(&self.depth);
        if let Some((i, ty)) = self.scope.computed(e) {
            return Ok(expr(ExprKind::Column(i), ty));
        }
        match e {
            ast::Expr::Identifier(id) => self.identifier(&[], &id.value, id.quote_style),
            ast::Expr::CompoundIdentifier(ids) => self.compound_identifier(ids),
            ast::Expr::Value(v) => literal(&v.value),
            // A charset introducer (`_utf8mb4'x'`, `_binary'x'`): the literal in that charset's
            // default collation.
            ast::Expr::Prefixed { prefix, value } if prefix.value.starts_with('_') => {
                self.introduced(&prefix.value[1..], value)
            }
            ast::Expr::Nested(inner) => self.compile(inner),
            // FLOOR(x) and CEIL(x) have their own syntax node.
            ast::Expr::Floor {
                expr: inner,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => self.call1("FLOOR", inner),
            ast::Expr::Ceil {
                expr: inner,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => self.call1("CEIL", inner),
            ast::Expr::TypedString(ts) => self.typed_string(ts),
            ast::Expr::UnaryOp { op, expr: inner } => self.unary(op, inner),
            ast::Expr::BinaryOp { left, op, right } => self.binary(left, op, right),
            ast::Expr::IsNull(e) => self.is_null(e, false),
            ast::Expr::IsNotNull(e) => self.is_null(e, true),
            ast::Expr::IsUnknown(e) => self.is_null(e, false),
            ast::Expr::IsNotUnknown(e) => self.is_null(e, true),
            ast::Expr::IsTrue(e) => self.is_bool(e, true, false),
            ast::Expr::IsNotTrue(e) => self.is_bool(e, true, true),
            ast::Expr::IsFalse(e) => self.is_bool(e, false, false),
            ast::Expr::IsNotFalse(e) => self.is_bool(e, false, true),
            ast::Expr::IsNotDistinctFrom(a, b) => self.comparison(a, CmpOp::NullSafeEq, b),
            ast::Expr::IsDistinctFrom(a, b) => {
                let eq = self.comparison(a, CmpOp::NullSafeEq, b)?;
                Ok(expr(ExprKind::Not(Box::new(eq)), bool_type()))
            }
            ast::Expr::Like {
                negated,
                any: false,
                expr: e,
                pattern,
                escape_char,
            } => self.like(e, pattern, escape_char.as_deref(), *negated, None),
            ast::Expr::ILike {
                negated,
                any: false,
                expr: e,
                pattern,
                escape_char,
            } => self.like(
                e,
                pattern,
                escape_char.as_deref(),
                *negated,
                Some(CaseRule::Insensitive),
            ),
            ast::Expr::In {
                expr: e,
                target: InTarget::List(list),
                negated,
                ..
            } if matches!(e.as_ref(), ast::Expr::Tuple(_)) => self.row_in(e, list, *negated),
            ast::Expr::In {
                expr: e,
                target: InTarget::List(list),
                negated,
                ..
            } => self.in_list(e, list, *negated),
            ast::Expr::Between {
                expr: e,
                negated,
                low,
                high,
            } => self.between(e, low, high, *negated),
            ast::Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(operand.as_deref(), conditions, else_result.as_deref()),
            ast::Expr::Cast {
                kind: CastKind::Cast | CastKind::TryCast | CastKind::SafeCast,
                expr: inner,
                data_type,
                format: None,
            } => self.compile_cast(inner, data_type),
            ast::Expr::Convert {
                expr: inner,
                data_type: Some(dt),
                charset: None,
                ..
            } => self.compile_cast(inner, dt),
            ast::Expr::Convert {
                expr: inner,
                data_type: None,
                charset: Some(_),
                ..
            } => self.compile(inner),
            ast::Expr::Collate {
                expr: inner,
                collation,
            } => self.collate(inner, collation),
            ast::Expr::Substring {
                expr: s,
                substring_from,
                substring_for,
                ..
            } => self.substring(s, substring_from.as_deref(), substring_for.as_deref()),
            ast::Expr::Trim {
                expr: s,
                trim_where: None,
                trim_what: None,
                trim_characters: None,
            } => self.call1("TRIM", s),
            ast::Expr::Function(f) => self.function(f),
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::In { .. } => Ok(expr(
                ExprKind::Unsupported("subqueries in expressions".into()),
                SqlType::bigint(),
            )),
            other => Err(SqlError::unsupported(format!("the expression {other}"))),
        }
    }

    /// A function of one argument that has syntax of its own (`FLOOR(x)`, `CEIL(x)`, `TRIM(x)`).
    fn call1(&self, name: &str, arg: &ast::Expr) -> Result<Expr> {
        let arg = self.compile(arg)?;
        self.func(name, vec![arg])
    }

    /// `CAST(inner AS to)` and `CONVERT(inner, to)`.
    fn compile_cast(&self, inner: &ast::Expr, to: &DataType) -> Result<Expr> {
        let inner = self.compile(inner)?;
        self.cast(inner, to)
    }

    /// `a.b[.c]` or `@@scope.name`.
    fn compound_identifier(&self, ids: &[ast::Ident]) -> Result<Expr> {
        let first = ids.first().map(|i| i.value.as_str()).unwrap_or("");
        if first.starts_with("@@") && ids.len() == 2 {
            let scope = first.trim_start_matches('@');
            return self.system_variable(Some(scope), &ids[1].value);
        }
        let (name, qual) = ids
            .split_last()
            .ok_or_else(|| SqlError::unsupported("an empty name"))?;
        let qual: Vec<String> = qual.iter().map(|i| i.value.clone()).collect();
        self.identifier(&qual, &name.value, name.quote_style)
    }

    /// A column, or a variable (`@@name`, `@name`) when unqualified and unquoted.
    fn identifier(&self, qual: &[String], name: &str, quoted: Option<char>) -> Result<Expr> {
        if qual.is_empty() && quoted.is_none() {
            if let Some(n) = name.strip_prefix("@@") {
                return self.system_variable(None, n);
            }
            if let Some(n) = name.strip_prefix('@') {
                let (val, ty) = self.env.user_variable(n.trim_matches(['`', '\'', '"']));
                return Ok(expr(ExprKind::Const(val), ty));
            }
        }
        match self.scope.column(qual, name)? {
            Some((i, ty)) => Ok(expr(ExprKind::Column(i), ty)),
            None => {
                let mut full = qual.join(".");
                if !full.is_empty() {
                    full.push('.');
                }
                full.push_str(name);
                Err(SqlError::unknown_column(&full, self.scope.clause()))
            }
        }
    }

    /// `@@[scope.]name`, a constant of the statement.
    fn system_variable(&self, scope: Option<&str>, name: &str) -> Result<Expr> {
        let (val, ty) = self.env.system_variable(scope, name)?;
        Ok(expr(ExprKind::Const(val), ty))
    }

    /// `_charset value`: the value in the default collation of the character set `name`.
    fn introduced(&self, name: &str, value: &ast::Expr) -> Result<Expr> {
        let coll = charset::charset(name)
            .and_then(|c| charset::collation_by_name(c.default_collation))
            .ok_or_else(|| {
                SqlError::new(
                    ER_UNKNOWN_CHARACTER_SET,
                    format!("Unknown character set: '{name}'"),
                )
            })?;
        let mut e = self.compile(value)?;
        if e.ty.is_string() {
            e.ty = e.ty.with_collation(coll.id);
        }
        Ok(e)
    }

    /// `DATE '…'`, `TIME '…'` and the like: the string cast to the type.
    fn typed_string(&self, ts: &TypedString) -> Result<Expr> {
        let text = match &ts.value.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        };
        let inner = expr(
            ExprKind::Const(Value::Bytes(text.clone().into_bytes())),
            literal_string_type(text.len()),
        );
        self.cast(inner, &ts.data_type)
    }

    /// `NOT x`, `+x`, `-x` (a constant is negated while compiling).
    fn unary(&self, op: &UnaryOperator, inner: &ast::Expr) -> Result<Expr> {
        let inner = self.compile(inner)?;
        match op {
            UnaryOperator::Not => Ok(expr(ExprKind::Not(Box::new(inner)), bool_type())),
            UnaryOperator::Plus => Ok(inner),
            UnaryOperator::Minus => {
                if let ExprKind::Const(c) = &inner.kind {
                    if let Some(n) = negate_const(c) {
                        let ty = const_type(&n);
                        return Ok(expr(ExprKind::Const(n), ty));
                    }
                }
                // MySQL: the negation of an integer is a signed BIGINT, of an
                // UNSIGNED one too (`-u` of 3000000000 is -3000000000).
                let ty = if inner.ty.is_integer() {
                    SqlType::bigint().nullable(inner.ty.nullable)
                } else {
                    arith_type(ArithOp::Sub, &inner.ty, &inner.ty)
                };
                Ok(expr(ExprKind::Neg(Box::new(inner)), ty))
            }
            other => Err(SqlError::unsupported(format!("the operator {other}"))),
        }
    }

    /// `e [NOT] IN (list)` of scalar values.
    fn in_list(&self, e: &ast::Expr, list: &[ast::Expr], negated: bool) -> Result<Expr> {
        let e = self.compile(e)?;
        let list = list
            .iter()
            .map(|x| self.compile(x))
            .collect::<Result<Vec<_>>>()?;
        let modes = list
            .iter()
            .map(|x| CmpMode::for_types(&e.ty, &x.ty))
            .collect();
        Ok(expr(
            ExprKind::In {
                expr: Box::new(e),
                list,
                modes,
                negated,
            },
            bool_type(),
        ))
    }

    /// `e [NOT] BETWEEN low AND high`, as `e >= low AND e <= high`.
    fn between(
        &self,
        e: &ast::Expr,
        low: &ast::Expr,
        high: &ast::Expr,
        negated: bool,
    ) -> Result<Expr> {
        let ge = self.comparison(e, CmpOp::GtEq, low)?;
        let le = self.comparison(e, CmpOp::LtEq, high)?;
        let both = expr(ExprKind::And(vec![ge, le]), bool_type());
        Ok(if negated {
            expr(ExprKind::Not(Box::new(both)), bool_type())
        } else {
            both
        })
    }

    /// `e COLLATE name`: a string takes the collation.
    fn collate(&self, inner: &ast::Expr, collation: &ObjectName) -> Result<Expr> {
        let mut inner = self.compile(inner)?;
        let name = collation.to_string();
        let c = charset::collation_by_name(name.trim_matches(['`', '\'', '"']))
            .ok_or_else(|| SqlError::unsupported(format!("the collation {name}")))?;
        if inner.ty.is_string() {
            inner.ty.collation = c.id;
        }
        Ok(inner)
    }

    /// `SUBSTRING(s FROM f FOR n)`, as the function `SUBSTRING(s, f, n)`.
    fn substring(
        &self,
        s: &ast::Expr,
        from: Option<&ast::Expr>,
        length: Option<&ast::Expr>,
    ) -> Result<Expr> {
        let mut args = vec![self.compile(s)?];
        if let Some(f) = from {
            args.push(self.compile(f)?);
        }
        if let Some(f) = length {
            args.push(self.compile(f)?);
        }
        self.func("SUBSTRING", args)
    }
}

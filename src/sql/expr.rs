//! Expressions: sqlparser's AST compiled against a scope of columns into a typed tree, then
//! evaluated per row with MySQL's semantics (three-valued logic, the comparison type chosen from
//! the argument types, collations, integer overflow as error 1690, division by zero as NULL).
//!
//! Everything that does not depend on the row is resolved while compiling: variables
//! (`@@x`, `@x`), the functions that describe the session or the server (`VERSION()`,
//! `DATABASE()`, `NOW()` — MySQL also fixes `NOW()` at the start of the statement) come from the
//! [`Env`]. Chains of AND, OR and arithmetic are flat nodes and other nesting is bounded
//! ([`super::parse::MAX_OPERATORS`]), so compiling and evaluating them recursively is bounded.

use std::cmp::Ordering;

use sqlparser::ast::{
    self, BinaryOperator, CastKind, DataType, FunctionArg, FunctionArgExpr, FunctionArguments,
    InTarget, UnaryOperator,
};
use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::{ER_DATA_OUT_OF_RANGE, ER_UNKNOWN_CHARACTER_SET};

use super::charset;
use super::error::{Result, SqlError};
pub use super::func::Func;
use super::like::{CaseRule, LikePattern, LikeScratch};
use super::types::{SqlType, TypeKind};
use super::value::{self as v, CmpMode};

/// A compiled expression and its result type.
#[derive(Debug, Clone)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: SqlType,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    /// `<=>`: NULL-safe equality.
    NullSafeEq,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    IntDiv,
    Mod,
}

#[derive(Debug, Clone)]
pub enum ExprKind {
    Column(usize),
    Const(Value),
    Not(Box<Expr>),
    /// `a AND b AND …`: a chain is one node (evaluated without recursion).
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Xor(Box<Expr>, Box<Expr>),
    Cmp {
        op: CmpOp,
        left: Box<Expr>,
        right: Box<Expr>,
        mode: CmpMode,
    },
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    /// `IS [NOT] TRUE|FALSE`.
    IsBool {
        expr: Box<Expr>,
        value: bool,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        /// The compiled pattern when it is a constant.
        compiled: Option<LikePattern>,
        escape: Option<char>,
        rule: CaseRule,
        negated: bool,
    },
    In {
        expr: Box<Expr>,
        list: Vec<Expr>,
        modes: Vec<CmpMode>,
        negated: bool,
    },
    /// What the engine cannot compute (a subquery): an error when evaluated, so a query
    /// that never evaluates it (over no rows) still answers, as MySQL does.
    Unsupported(String),
    /// `first op₁ e₁ op₂ e₂ …`, evaluated left to right; each step keeps its result type.
    Arith {
        first: Box<Expr>,
        steps: Vec<ArithStep>,
    },
    Neg(Box<Expr>),
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        modes: Vec<CmpMode>,
        otherwise: Option<Box<Expr>>,
    },
    Func(Func, Vec<Expr>),
    Cast(Box<Expr>),
}

/// One step of an arithmetic chain.
#[derive(Debug, Clone)]
pub struct ArithStep {
    pub op: ArithOp,
    pub rhs: Expr,
    /// The type of the result so far.
    pub ty: SqlType,
}

/// Column resolution for the compiler.
pub trait Scope {
    /// The column `qualifier.name` (qualifier: `[]`, `[table]` or `[db, table]`), as an index
    /// into the row and its type; `Ok(None)` if no column has that name.
    fn column(&self, qualifier: &[String], name: &str) -> Result<Option<(usize, SqlType)>>;

    /// A whole expression the row already holds (a GROUP BY key or an aggregate after
    /// grouping), matched by its text.
    fn computed(&self, _expr: &ast::Expr) -> Option<(usize, SqlType)> {
        None
    }

    /// The clause named in "Unknown column … in '<clause>'".
    fn clause(&self) -> &str {
        "field list"
    }
}

/// A scope without columns (`SELECT 1`, `SET`).
pub struct NoColumns;

impl Scope for NoColumns {
    fn column(&self, _q: &[String], _name: &str) -> Result<Option<(usize, SqlType)>> {
        Ok(None)
    }
}

/// What compiling needs from the session and the server.
pub trait Env {
    /// `@@[scope.]name`: the value and its type.
    fn system_variable(&self, scope: Option<&str>, name: &str) -> Result<(Value, SqlType)>;
    /// `@name`: NULL if unset.
    fn user_variable(&self, name: &str) -> (Value, SqlType);
    /// A function whose value comes from the session or the server (`VERSION()`,
    /// `DATABASE()`, `NOW()`, `BINLOG_GTID_POS(…)`), given constant arguments; `None` if `name`
    /// (upper case) is not one.
    fn context_function(&self, name: &str, args: &[Value]) -> Option<Result<(Value, SqlType)>>;
    /// The name/value pairs of a `performance_schema` variables or status table (none where
    /// there is no session).
    fn server_variables(&self, _view: super::perfschema::VarView) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// The environment of an expression that must not depend on a session (a generated column,
/// a view's types): no variable can be read and no session function called; the text names
/// where the expression is ("a generated column").
pub struct NoSession(pub &'static str);

impl Env for NoSession {
    fn system_variable(&self, _scope: Option<&str>, name: &str) -> Result<(Value, SqlType)> {
        Err(SqlError::unsupported(format!(
            "the variable @@{name} in {}",
            self.0
        )))
    }
    fn user_variable(&self, _name: &str) -> (Value, SqlType) {
        (Value::Null, SqlType::null())
    }
    fn context_function(&self, _name: &str, _args: &[Value]) -> Option<Result<(Value, SqlType)>> {
        None
    }
}

fn expr(kind: ExprKind, ty: SqlType) -> Expr {
    Expr { kind, ty }
}

/// The type of a truth value (`1`, `0` or NULL).
fn bool_type() -> SqlType {
    SqlType::new(TypeKind::Int { bytes: 8 })
}

fn bool_value(b: bool) -> Value {
    Value::Int(i64::from(b))
}

/// A string literal's type: VARCHAR(n) in the connection collation.
pub fn literal_string_type(len: usize) -> SqlType {
    SqlType::string(len as u32).not_null()
}

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
    pub fn new(scope: &'a dyn Scope, env: &'a dyn Env) -> Self {
        Compiler {
            scope,
            env,
            depth: std::cell::Cell::new(0),
        }
    }

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
            ast::Expr::CompoundIdentifier(ids) => {
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
            ast::Expr::Value(v) => literal(&v.value),
            // A charset introducer (`_utf8mb4'x'`, `_binary'x'`): the literal in that charset's
            // default collation.
            ast::Expr::Prefixed { prefix, value } if prefix.value.starts_with('_') => {
                let name = &prefix.value[1..];
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
            ast::Expr::Nested(inner) => self.compile(inner),
            // FLOOR(x) and CEIL(x) have their own syntax node.
            ast::Expr::Floor {
                expr: inner,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => {
                let arg = self.compile(inner)?;
                self.func("FLOOR", vec![arg])
            }
            ast::Expr::Ceil {
                expr: inner,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => {
                let arg = self.compile(inner)?;
                self.func("CEIL", vec![arg])
            }
            ast::Expr::TypedString(ts) => {
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                        s.clone()
                    }
                    other => other.to_string(),
                };
                let inner = expr(
                    ExprKind::Const(Value::Bytes(text.clone().into_bytes())),
                    literal_string_type(text.len()),
                );
                self.cast(inner, &ts.data_type)
            }
            ast::Expr::UnaryOp { op, expr: inner } => {
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
            } => {
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
                        negated: *negated,
                    },
                    bool_type(),
                ))
            }
            ast::Expr::Between {
                expr: e,
                negated,
                low,
                high,
            } => {
                let ge = self.comparison(e, CmpOp::GtEq, low)?;
                let le = self.comparison(e, CmpOp::LtEq, high)?;
                let both = expr(ExprKind::And(vec![ge, le]), bool_type());
                Ok(if *negated {
                    expr(ExprKind::Not(Box::new(both)), bool_type())
                } else {
                    both
                })
            }
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
            } => {
                let inner = self.compile(inner)?;
                self.cast(inner, data_type)
            }
            ast::Expr::Convert {
                expr: inner,
                data_type: Some(dt),
                charset: None,
                ..
            } => {
                let inner = self.compile(inner)?;
                self.cast(inner, dt)
            }
            ast::Expr::Convert {
                expr: inner,
                data_type: None,
                charset: Some(_),
                ..
            } => self.compile(inner),
            ast::Expr::Collate {
                expr: inner,
                collation,
            } => {
                let mut inner = self.compile(inner)?;
                let name = collation.to_string();
                let c = charset::collation_by_name(name.trim_matches(['`', '\'', '"']))
                    .ok_or_else(|| SqlError::unsupported(format!("the collation {name}")))?;
                if inner.ty.is_string() {
                    inner.ty.collation = c.id;
                }
                Ok(inner)
            }
            ast::Expr::Substring {
                expr: s,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.compile(s)?];
                if let Some(f) = substring_from {
                    args.push(self.compile(f)?);
                }
                if let Some(f) = substring_for {
                    args.push(self.compile(f)?);
                }
                self.func("SUBSTRING", args)
            }
            ast::Expr::Trim {
                expr: s,
                trim_where: None,
                trim_what: None,
                trim_characters: None,
            } => {
                let args = vec![self.compile(s)?];
                self.func("TRIM", args)
            }
            ast::Expr::Function(f) => self.function(f),
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::In { .. } => Ok(expr(
                ExprKind::Unsupported("subqueries in expressions".into()),
                SqlType::bigint(),
            )),
            other => Err(SqlError::unsupported(format!("the expression {other}"))),
        }
    }

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

    fn system_variable(&self, scope: Option<&str>, name: &str) -> Result<Expr> {
        let (val, ty) = self.env.system_variable(scope, name)?;
        Ok(expr(ExprKind::Const(val), ty))
    }

    fn binary(&self, left: &ast::Expr, op: &BinaryOperator, right: &ast::Expr) -> Result<Expr> {
        let cmp = match op {
            BinaryOperator::Eq => Some(CmpOp::Eq),
            BinaryOperator::NotEq => Some(CmpOp::NotEq),
            BinaryOperator::Lt => Some(CmpOp::Lt),
            BinaryOperator::LtEq => Some(CmpOp::LtEq),
            BinaryOperator::Gt => Some(CmpOp::Gt),
            BinaryOperator::GtEq => Some(CmpOp::GtEq),
            BinaryOperator::Spaceship => Some(CmpOp::NullSafeEq),
            _ => None,
        };
        if let Some(op) = cmp {
            return self.comparison(left, op, right);
        }
        match op {
            BinaryOperator::And | BinaryOperator::Or => {
                // A chain `a OR b OR c …` nests as deep as it is long: walk its left spine
                // with a loop and keep the operands in one node.
                let mut operands = vec![right];
                let mut cur = left;
                loop {
                    match cur {
                        ast::Expr::BinaryOp {
                            left: l,
                            op: o,
                            right: r,
                        } if o == op => {
                            operands.push(r);
                            cur = l;
                        }
                        ast::Expr::Nested(inner) if matches!(inner.as_ref(), ast::Expr::BinaryOp { op: o, .. } if o == op) =>
                        {
                            cur = inner;
                        }
                        _ => break,
                    }
                }
                operands.push(cur);
                operands.reverse();
                let parts = operands
                    .into_iter()
                    .map(|e| self.compile(e))
                    .collect::<Result<Vec<_>>>()?;
                Ok(expr(
                    if *op == BinaryOperator::And {
                        ExprKind::And(parts)
                    } else {
                        ExprKind::Or(parts)
                    },
                    bool_type(),
                ))
            }
            BinaryOperator::Xor => {
                let (l, r) = (self.compile(left)?, self.compile(right)?);
                Ok(expr(ExprKind::Xor(Box::new(l), Box::new(r)), bool_type()))
            }
            _ if arith_op(op).is_some() => {
                // Same for `a + b - c …`: the left spine of arithmetic operators is one chain.
                let mut rest = vec![(arith_op(op), right)];
                let mut cur = left;
                while let ast::Expr::BinaryOp {
                    left: l,
                    op: o,
                    right: r,
                } = cur
                {
                    match arith_op(o) {
                        Some(a) => {
                            rest.push((Some(a), r));
                            cur = l;
                        }
                        None => break,
                    }
                }
                rest.reverse();
                let first = self.compile(cur)?;
                let mut ty = first.ty.clone();
                let mut steps = Vec::with_capacity(rest.len());
                for (op, rhs) in rest {
                    let op = op.unwrap_or(ArithOp::Add);
                    let rhs = self.compile(rhs)?;
                    ty = arith_type(op, &ty, &rhs.ty);
                    steps.push(ArithStep {
                        op,
                        rhs,
                        ty: ty.clone(),
                    });
                }
                Ok(expr(
                    ExprKind::Arith {
                        first: Box::new(first),
                        steps,
                    },
                    ty,
                ))
            }
            BinaryOperator::BitwiseAnd
            | BinaryOperator::BitwiseOr
            | BinaryOperator::BitwiseXor
            | BinaryOperator::PGBitwiseShiftLeft
            | BinaryOperator::PGBitwiseShiftRight => {
                let f = match op {
                    BinaryOperator::BitwiseAnd => Func::BitAnd,
                    BinaryOperator::BitwiseOr => Func::BitOr,
                    BinaryOperator::BitwiseXor => Func::BitXor,
                    BinaryOperator::PGBitwiseShiftLeft => Func::ShiftLeft,
                    _ => Func::ShiftRight,
                };
                let (l, r) = (self.compile(left)?, self.compile(right)?);
                let ty = SqlType::ubigint().nullable(l.ty.nullable || r.ty.nullable);
                Ok(expr(ExprKind::Func(f, vec![l, r]), ty))
            }
            BinaryOperator::Arrow | BinaryOperator::LongArrow => {
                // `doc->path` is JSON_EXTRACT(doc, path); `->>` unquotes the result.
                let args = vec![self.compile(left)?, self.compile(right)?];
                let (f, ty) = super::func::signature("JSON_EXTRACT", &args)?;
                let extract = expr(ExprKind::Func(f, args), ty);
                if *op == BinaryOperator::Arrow {
                    return Ok(extract);
                }
                let args = vec![extract];
                let (f, ty) = super::func::signature("JSON_UNQUOTE", &args)?;
                Ok(expr(ExprKind::Func(f, args), ty))
            }
            other => Err(SqlError::unsupported(format!("the operator {other}"))),
        }
    }

    pub(super) fn comparison(
        &self,
        left: &ast::Expr,
        op: CmpOp,
        right: &ast::Expr,
    ) -> Result<Expr> {
        if let Some(rows) = super::expr_row::row_operands(left, right)? {
            return self.row_comparison(rows, op);
        }
        let (l, r) = (self.compile(left)?, self.compile(right)?);
        let mode = CmpMode::for_types(&l.ty, &r.ty);
        let mut ty = bool_type();
        if op == CmpOp::NullSafeEq {
            ty = ty.not_null();
        }
        Ok(expr(
            ExprKind::Cmp {
                op,
                left: Box::new(l),
                right: Box::new(r),
                mode,
            },
            ty,
        ))
    }

    fn is_null(&self, e: &ast::Expr, negated: bool) -> Result<Expr> {
        let e = self.compile(e)?;
        Ok(expr(
            ExprKind::IsNull {
                expr: Box::new(e),
                negated,
            },
            bool_type().not_null(),
        ))
    }

    fn is_bool(&self, e: &ast::Expr, value: bool, negated: bool) -> Result<Expr> {
        let e = self.compile(e)?;
        Ok(expr(
            ExprKind::IsBool {
                expr: Box::new(e),
                value,
                negated,
            },
            bool_type().not_null(),
        ))
    }

    fn like(
        &self,
        e: &ast::Expr,
        pattern: &ast::Expr,
        escape: Option<&ast::Expr>,
        negated: bool,
        rule: Option<CaseRule>,
    ) -> Result<Expr> {
        let e = self.compile(e)?;
        let pattern = self.compile(pattern)?;
        let escape = match escape {
            None => Some('\\'),
            Some(x) => match self.compile(x)?.kind {
                ExprKind::Const(Value::Bytes(b)) => {
                    let s = String::from_utf8_lossy(&b).into_owned();
                    let mut chars = s.chars();
                    match (chars.next(), chars.next()) {
                        (None, _) => None,
                        (Some(c), None) => Some(c),
                        _ => return Err(SqlError::wrong_arguments("ESCAPE")),
                    }
                }
                _ => return Err(SqlError::wrong_arguments("ESCAPE")),
            },
        };
        let rule = rule.unwrap_or_else(|| {
            if e.ty.is_string() {
                e.ty.case_rule()
            } else {
                pattern.ty.case_rule()
            }
        });
        let compiled = match &pattern.kind {
            ExprKind::Const(c @ Value::Bytes(_)) => {
                let text = String::from_utf8_lossy(&v::to_bytes(c, &pattern.ty)).into_owned();
                Some(
                    LikePattern::compile(&text, escape, rule)
                        .map_err(|err| SqlError::wrong_arguments(&format!("LIKE: {err}")))?,
                )
            }
            _ => None,
        };
        Ok(expr(
            ExprKind::Like {
                expr: Box::new(e),
                pattern: Box::new(pattern),
                compiled,
                escape,
                rule,
                negated,
            },
            bool_type(),
        ))
    }

    fn case(
        &self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        otherwise: Option<&ast::Expr>,
    ) -> Result<Expr> {
        let operand = operand.map(|o| self.compile(o)).transpose()?;
        let mut whens = Vec::with_capacity(conditions.len());
        let mut modes = Vec::new();
        for w in conditions {
            let cond = self.compile(&w.condition)?;
            if let Some(o) = &operand {
                modes.push(CmpMode::for_types(&o.ty, &cond.ty));
            }
            whens.push((cond, self.compile(&w.result)?));
        }
        let otherwise = otherwise.map(|o| self.compile(o)).transpose()?;
        let mut results: Vec<&SqlType> = whens.iter().map(|(_, r)| &r.ty).collect();
        if let Some(o) = &otherwise {
            results.push(&o.ty);
        }
        let ty = union_type(&results).nullable(true);
        Ok(expr(
            ExprKind::Case {
                operand: operand.map(Box::new),
                whens,
                modes,
                otherwise: otherwise.map(Box::new),
            },
            ty,
        ))
    }

    fn cast(&self, inner: Expr, to: &DataType) -> Result<Expr> {
        let nullable = inner.ty.nullable;
        let ty = match to {
            DataType::Signed
            | DataType::SignedInteger
            | DataType::Int(_)
            | DataType::Integer(_)
            | DataType::BigInt(_) => SqlType::bigint(),
            DataType::Unsigned | DataType::UnsignedInteger => SqlType::ubigint(),
            DataType::Char(_) | DataType::Varchar(_) | DataType::Text | DataType::String(_) => {
                SqlType::longtext(charset::UTF8MB4_0900_AI_CI)
            }
            DataType::Binary(_) => SqlType::longtext(charset::BINARY),
            DataType::Decimal(info) | DataType::Numeric(info) => {
                let (p, s) = match info {
                    ast::ExactNumberInfo::None => (10, 0),
                    ast::ExactNumberInfo::Precision(p) => (*p as u8, 0),
                    ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p as u8, *s as u8),
                };
                SqlType::decimal(p, s)
            }
            DataType::Double(_)
            | DataType::DoublePrecision
            | DataType::Float(_)
            | DataType::Real => SqlType::double(),
            DataType::Date => SqlType::new(TypeKind::Date),
            DataType::Datetime(p) => SqlType::datetime(p.unwrap_or(0).min(6) as u8),
            DataType::Time(p, _) => SqlType::new(TypeKind::Time {
                fsp: p.unwrap_or(0).min(6) as u8,
            }),
            DataType::JSON => SqlType::new(TypeKind::Json),
            other => return Err(SqlError::unsupported(format!("CAST to {other}"))),
        };
        let out = expr(ExprKind::Cast(Box::new(inner)), ty.nullable(nullable));
        fold(out)
    }

    fn function(&self, f: &ast::Function) -> Result<Expr> {
        let name = f.name.to_string().to_ascii_uppercase();
        let name = name.trim_matches('`');
        let args: Vec<&ast::Expr> = match &f.args {
            FunctionArguments::None => Vec::new(),
            FunctionArguments::List(l) => l
                .args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                    _ => Err(SqlError::unsupported(format!("the argument {a} of {name}"))),
                })
                .collect::<Result<_>>()?,
            FunctionArguments::Subquery(_) => {
                return Err(SqlError::unsupported("subqueries in expressions"))
            }
        };
        if is_aggregate(name) {
            return Err(SqlError::new(
                tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR,
                format!("Invalid use of group function {name}"),
            ));
        }
        let args = args
            .into_iter()
            .map(|a| self.compile(a))
            .collect::<Result<Vec<_>>>()?;
        let consts: Option<Vec<Value>> = args
            .iter()
            .map(|a| match &a.kind {
                ExprKind::Const(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        if let Some(consts) = &consts {
            if let Some(r) = self.env.context_function(name, consts) {
                let (val, ty) = r?;
                return Ok(expr(ExprKind::Const(val), ty));
            }
        }
        self.func(name, args)
    }

    /// A scalar function of compiled arguments.
    fn func(&self, name: &str, args: Vec<Expr>) -> Result<Expr> {
        let (f, ty) = super::func::signature(name, &args)?;
        fold(expr(ExprKind::Func(f, args), ty))
    }
}

fn arith_op(op: &BinaryOperator) -> Option<ArithOp> {
    Some(match op {
        BinaryOperator::Plus => ArithOp::Add,
        BinaryOperator::Minus => ArithOp::Sub,
        BinaryOperator::Multiply => ArithOp::Mul,
        BinaryOperator::Divide => ArithOp::Div,
        BinaryOperator::MyIntegerDivide => ArithOp::IntDiv,
        BinaryOperator::Modulo => ArithOp::Mod,
        _ => return None,
    })
}

/// Characters a value of `ty` shows at most (for result column lengths).
pub(crate) fn display_chars(ty: &SqlType) -> u32 {
    match &ty.kind {
        TypeKind::Char { chars } | TypeKind::VarChar { chars } => *chars,
        TypeKind::Text { max_bytes } => u32::try_from(*max_bytes).unwrap_or(u32::MAX),
        TypeKind::Int { .. } => 21,
        TypeKind::Decimal { precision, .. } => u32::from(*precision) + 2,
        TypeKind::Float | TypeKind::Double => 22,
        TypeKind::DateTime { .. } | TypeKind::Timestamp { .. } => 26,
        TypeKind::Date => 10,
        TypeKind::Time { .. } => 17,
        TypeKind::Null => 0,
        _ => 255,
    }
}

/// Names of the aggregate functions.
pub fn is_aggregate(upper_name: &str) -> bool {
    matches!(
        upper_name,
        "COUNT"
            | "MIN"
            | "MAX"
            | "SUM"
            | "AVG"
            | "GROUP_CONCAT"
            | "ANY_VALUE"
            | "BIT_OR"
            | "BIT_AND"
            | "BIT_XOR"
    )
}

/// The type results of several branches share (CASE, IF, COALESCE): the first non-NULL
/// type when they agree in kind, else a string.
pub fn union_type(tys: &[&SqlType]) -> SqlType {
    let non_null: Vec<&&SqlType> = tys
        .iter()
        .filter(|t| !matches!(t.kind, TypeKind::Null))
        .collect();
    let nullable = tys
        .iter()
        .any(|t| t.nullable || matches!(t.kind, TypeKind::Null));
    let Some(first) = non_null.first() else {
        return SqlType::null();
    };
    let same = non_null.iter().all(|t| {
        std::mem::discriminant(&t.kind) == std::mem::discriminant(&first.kind)
            && t.unsigned == first.unsigned
    });
    if same {
        let mut t = (**first).clone();
        if let TypeKind::VarChar { chars } = &mut t.kind {
            *chars = non_null
                .iter()
                .map(|t| display_chars(t))
                .max()
                .unwrap_or(*chars);
        }
        return t.nullable(nullable);
    }
    if non_null.iter().all(|t| t.is_integer()) {
        return SqlType::bigint().nullable(nullable);
    }
    if non_null.iter().all(|t| t.is_numeric()) {
        return SqlType::double().nullable(nullable);
    }
    let chars = non_null.iter().map(|t| display_chars(t)).max().unwrap_or(0);
    SqlType::string(chars).nullable(nullable)
}

/// The result type of an arithmetic operator (MySQL: integers stay BIGINT except `/`, any
/// DECIMAL gives DECIMAL, anything else DOUBLE).
fn arith_type(op: ArithOp, a: &SqlType, b: &SqlType) -> SqlType {
    let nullable =
        a.nullable || b.nullable || matches!(op, ArithOp::Div | ArithOp::IntDiv | ArithOp::Mod);
    let ty = if op == ArithOp::IntDiv {
        // MySQL: UNSIGNED when either operand is.
        if a.unsigned || b.unsigned {
            SqlType::ubigint()
        } else {
            SqlType::bigint()
        }
    } else if a.is_integer() && b.is_integer() && op != ArithOp::Div {
        // MySQL: an UNSIGNED operand makes the result UNSIGNED, for `-` too (a negative
        // result is then out of range).
        if a.unsigned || b.unsigned {
            SqlType::ubigint()
        } else {
            SqlType::bigint()
        }
    } else if (a.is_integer() || matches!(a.kind, TypeKind::Decimal { .. }))
        && (b.is_integer() || matches!(b.kind, TypeKind::Decimal { .. }))
    {
        SqlType::decimal(65, 4)
    } else {
        SqlType::double()
    };
    ty.nullable(nullable)
}

fn const_type(v: &Value) -> SqlType {
    match v {
        Value::Null => SqlType::null(),
        Value::Int(_) => SqlType::bigint().not_null(),
        Value::UInt(_) => SqlType::ubigint().not_null(),
        Value::Double(_) | Value::Float(_) => SqlType::double().not_null(),
        Value::Decimal(d) => {
            let (i, f) = d.trim_start_matches('-').split_once('.').unwrap_or((d, ""));
            SqlType::decimal(
                (i.len() + f.len()).clamp(1, 65) as u8,
                f.len().min(30) as u8,
            )
            .not_null()
        }
        Value::Bytes(b) => literal_string_type(b.len()),
        _ => SqlType::null(),
    }
}

fn negate_const(v: &Value) -> Option<Value> {
    match v {
        Value::Int(i) => i.checked_neg().map(Value::Int),
        Value::UInt(u) if *u == 1u64 << 63 => Some(Value::Int(i64::MIN)),
        Value::UInt(u) => i64::try_from(*u).ok().map(|i| Value::Int(-i)),
        Value::Double(f) => Some(Value::Double(-f)),
        Value::Decimal(d) => Some(Value::Decimal(match d.strip_prefix('-') {
            Some(r) => r.to_owned(),
            None => format!("-{d}"),
        })),
        _ => None,
    }
}

/// A literal's value and type (numbers as MySQL lexes them: integers that fit are integers,
/// a `.` makes a DECIMAL, an exponent a DOUBLE).
pub fn literal(v: &ast::Value) -> Result<Expr> {
    let val = match v {
        ast::Value::Null => return Ok(expr(ExprKind::Const(Value::Null), SqlType::null())),
        ast::Value::Boolean(b) => Value::Int(i64::from(*b)),
        ast::Value::Number(n, _) => number(n)?,
        ast::Value::SingleQuotedString(s)
        | ast::Value::DoubleQuotedString(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::NationalStringLiteral(s) => Value::Bytes(s.clone().into_bytes()),
        ast::Value::HexStringLiteral(h) => {
            let bytes = hex::decode(if h.len() % 2 == 1 {
                format!("0{h}")
            } else {
                h.clone()
            })
            .map_err(|_| SqlError::unsupported(format!("the literal X'{h}'")))?;
            return Ok(expr(
                ExprKind::Const(Value::Bytes(bytes)),
                SqlType::varchar(h.len().div_ceil(2) as u32, charset::BINARY).not_null(),
            ));
        }
        // b'0101': a bit-value literal, the binary string of its bits (right-aligned).
        ast::Value::SingleQuotedByteStringLiteral(bits)
            if bits.bytes().all(|b| b == b'0' || b == b'1') =>
        {
            let mut bytes = vec![0u8; bits.len().div_ceil(8)];
            for (i, b) in bits.bytes().rev().enumerate() {
                if b == b'1' {
                    let at = bytes.len() - 1 - i / 8;
                    bytes[at] |= 1 << (i % 8);
                }
            }
            let len = bytes.len() as u32;
            return Ok(expr(
                ExprKind::Const(Value::Bytes(bytes)),
                SqlType::varchar(len.max(1), charset::BINARY).not_null(),
            ));
        }
        ast::Value::Placeholder(p) => {
            return Err(SqlError::unsupported(format!("the placeholder {p} here")))
        }
        other => return Err(SqlError::unsupported(format!("the literal {other}"))),
    };
    let ty = const_type(&val);
    Ok(expr(ExprKind::Const(val), ty))
}

fn number(n: &str) -> Result<Value> {
    if n.contains(['e', 'E']) {
        return n
            .parse::<f64>()
            .map(Value::Double)
            .map_err(|_| SqlError::unsupported(format!("the number {n}")));
    }
    if n.contains('.') {
        return Ok(Value::Decimal(n.to_owned()));
    }
    if let Ok(i) = n.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = n.parse::<u64>() {
        return Ok(Value::UInt(u));
    }
    Ok(Value::Decimal(n.to_owned()))
}

/// Evaluates constant subtrees once (an expression whose inputs are all constants).
fn fold(e: Expr) -> Result<Expr> {
    let all_const = match &e.kind {
        ExprKind::Func(_, args) => args.iter().all(|a| matches!(a.kind, ExprKind::Const(_))),
        ExprKind::Cast(inner) => matches!(inner.kind, ExprKind::Const(_)),
        _ => false,
    };
    if !all_const {
        return Ok(e);
    }
    let val = e.eval(&[])?;
    Ok(Expr {
        kind: ExprKind::Const(val),
        ty: e.ty,
    })
}

impl Expr {
    /// A constant of type `ty`.
    pub fn constant(val: Value, ty: SqlType) -> Expr {
        expr(ExprKind::Const(val), ty)
    }

    /// A column reference.
    pub fn column(i: usize, ty: SqlType) -> Expr {
        expr(ExprKind::Column(i), ty)
    }

    /// The value of the expression for `row`, borrowed where it already is (a column of the
    /// row, a constant) and computed otherwise.
    pub fn eval_ref<'a>(&'a self, row: &'a [Value]) -> Result<std::borrow::Cow<'a, Value>> {
        use std::borrow::Cow;
        const NULL: &Value = &Value::Null;
        Ok(match &self.kind {
            ExprKind::Column(i) => Cow::Borrowed(row.get(*i).unwrap_or(NULL)),
            ExprKind::Const(c) => Cow::Borrowed(c),
            _ => Cow::Owned(self.eval(row)?),
        })
    }

    pub fn eval(&self, row: &[Value]) -> Result<Value> {
        match &self.kind {
            ExprKind::Column(i) => Ok(row.get(*i).cloned().unwrap_or(Value::Null)),
            ExprKind::Const(c) => Ok(c.clone()),
            ExprKind::Unsupported(what) => Err(SqlError::unsupported(what.clone())),
            ExprKind::Not(_)
            | ExprKind::And(_)
            | ExprKind::Or(_)
            | ExprKind::Xor(..)
            | ExprKind::Cmp { .. } => Ok(match self.truth(row)? {
                Some(b) => bool_value(b),
                None => Value::Null,
            }),
            ExprKind::IsNull { expr: e, negated } => {
                Ok(bool_value(matches!(e.eval(row)?, Value::Null) != *negated))
            }
            ExprKind::IsBool {
                expr: e,
                value,
                negated,
            } => {
                let t = self.truth_of(e, row)?;
                Ok(bool_value((t == Some(*value)) != *negated))
            }
            ExprKind::Like {
                expr: e,
                pattern,
                compiled,
                escape,
                rule,
                negated,
            } => {
                let val = e.eval(row)?;
                if matches!(val, Value::Null) {
                    return Ok(Value::Null);
                }
                let text = v::to_bytes(&val, &e.ty);
                let text = String::from_utf8_lossy(&text);
                let matched = match compiled {
                    Some(p) => p.matches_with(&text, &mut LikeScratch::default()),
                    None => {
                        let pv = pattern.eval(row)?;
                        if matches!(pv, Value::Null) {
                            return Ok(Value::Null);
                        }
                        let p =
                            String::from_utf8_lossy(&v::to_bytes(&pv, &pattern.ty)).into_owned();
                        LikePattern::compile(&p, *escape, *rule)
                            .map_err(|err| SqlError::wrong_arguments(&format!("LIKE: {err}")))?
                            .matches(&text)
                    }
                };
                Ok(bool_value(matched != *negated))
            }
            ExprKind::In {
                expr: e,
                list,
                modes,
                negated,
            } => {
                let val = e.eval(row)?;
                if matches!(val, Value::Null) {
                    return Ok(Value::Null);
                }
                let mut saw_null = false;
                for (item, mode) in list.iter().zip(modes) {
                    let x = item.eval(row)?;
                    if matches!(x, Value::Null) {
                        saw_null = true;
                        continue;
                    }
                    if compare_values(*mode, &val, &e.ty, &x, &item.ty) == Ordering::Equal {
                        return Ok(bool_value(!negated));
                    }
                }
                Ok(if saw_null {
                    Value::Null
                } else {
                    bool_value(*negated)
                })
            }
            ExprKind::Arith { first, steps } => {
                let mut acc = first.eval(row)?;
                let mut acc_ty = &first.ty;
                for st in steps {
                    if matches!(acc, Value::Null) {
                        return Ok(Value::Null);
                    }
                    let b = st.rhs.eval(row)?;
                    if matches!(b, Value::Null) {
                        return Ok(Value::Null);
                    }
                    acc = arith(st.op, &acc, acc_ty, &b, &st.rhs.ty, &st.ty)?;
                    acc_ty = &st.ty;
                }
                Ok(acc)
            }
            ExprKind::Neg(e) => {
                let a = e.eval(row)?;
                if matches!(a, Value::Null) {
                    return Ok(Value::Null);
                }
                arith(
                    ArithOp::Sub,
                    &Value::Int(0),
                    &SqlType::bigint(),
                    &a,
                    &e.ty,
                    &self.ty,
                )
            }
            ExprKind::Case {
                operand,
                whens,
                modes,
                otherwise,
            } => {
                let base = operand.as_ref().map(|o| o.eval(row)).transpose()?;
                for (i, (cond, result)) in whens.iter().enumerate() {
                    let hit = match (&base, operand) {
                        (Some(b), Some(o)) => {
                            let c = cond.eval(row)?;
                            !matches!(b, Value::Null)
                                && !matches!(c, Value::Null)
                                && compare_values(modes[i], b, &o.ty, &c, &cond.ty)
                                    == Ordering::Equal
                        }
                        _ => self.truth_of(cond, row)? == Some(true),
                    };
                    if hit {
                        return convert_to(result.eval(row)?, &result.ty, &self.ty);
                    }
                }
                match otherwise {
                    Some(o) => convert_to(o.eval(row)?, &o.ty, &self.ty),
                    None => Ok(Value::Null),
                }
            }
            ExprKind::Func(f, args) => super::func::eval(*f, args, &self.ty, row),
            ExprKind::Cast(inner) => {
                let val = inner.eval(row)?;
                convert_to(val, &inner.ty, &self.ty)
            }
        }
    }

    /// The expression as a truth value: `None` for NULL.
    fn truth_of(&self, e: &Expr, row: &[Value]) -> Result<Option<bool>> {
        e.truth(row)
    }

    /// The expression as a truth value for `row` (`None`: NULL). Logic and comparisons are
    /// decided here without building a value per node (a WHERE runs this for every row read).
    pub fn truth(&self, row: &[Value]) -> Result<Option<bool>> {
        match &self.kind {
            ExprKind::Not(e) => Ok(e.truth(row)?.map(|b| !b)),
            ExprKind::And(parts) => {
                // FALSE wins, then NULL, then TRUE.
                let mut null = false;
                for p in parts {
                    match p.truth(row)? {
                        Some(false) => return Ok(Some(false)),
                        None => null = true,
                        Some(true) => {}
                    }
                }
                Ok((!null).then_some(true))
            }
            ExprKind::Or(parts) => {
                let mut null = false;
                for p in parts {
                    match p.truth(row)? {
                        Some(true) => return Ok(Some(true)),
                        None => null = true,
                        Some(false) => {}
                    }
                }
                Ok((!null).then_some(false))
            }
            ExprKind::Xor(a, b) => Ok(match (a.truth(row)?, b.truth(row)?) {
                (Some(x), Some(y)) => Some(x != y),
                _ => None,
            }),
            ExprKind::Cmp {
                op,
                left,
                right,
                mode,
            } => {
                // Columns and constants are compared where they are, not copied per row.
                let (a, b) = (left.eval_ref(row)?, right.eval_ref(row)?);
                let (a, b) = (a.as_ref(), b.as_ref());
                if *op == CmpOp::NullSafeEq {
                    return Ok(Some(match (a, b) {
                        (Value::Null, Value::Null) => true,
                        (Value::Null, _) | (_, Value::Null) => false,
                        _ => compare_values(*mode, a, &left.ty, b, &right.ty) == Ordering::Equal,
                    }));
                }
                if matches!(a, Value::Null) || matches!(b, Value::Null) {
                    return Ok(None);
                }
                let ord = compare_values(*mode, a, &left.ty, b, &right.ty);
                Ok(Some(match op {
                    CmpOp::Eq | CmpOp::NullSafeEq => ord == Ordering::Equal,
                    CmpOp::NotEq => ord != Ordering::Equal,
                    CmpOp::Lt => ord == Ordering::Less,
                    CmpOp::LtEq => ord != Ordering::Greater,
                    CmpOp::Gt => ord == Ordering::Greater,
                    CmpOp::GtEq => ord != Ordering::Less,
                }))
            }
            _ => {
                let val = self.eval(row)?;
                Ok(match val {
                    Value::Null => None,
                    other => Some(v::is_true(&other, &self.ty)),
                })
            }
        }
    }

    /// True when the expression is TRUE for `row` (NULL and FALSE filter a row out).
    pub fn is_true(&self, row: &[Value]) -> Result<bool> {
        Ok(self.truth(row)? == Some(true))
    }
}

/// Compares two non-NULL values; a value that cannot be read in `mode` (a string that is not
/// a date) falls back to comparing the texts, as MySQL does.
pub fn compare_values(mode: CmpMode, a: &Value, ta: &SqlType, b: &Value, tb: &SqlType) -> Ordering {
    v::compare(mode, a, ta, b, tb).unwrap_or_else(|| {
        charset::compare(
            charset::UTF8MB4_0900_AI_CI,
            &v::to_bytes(a, ta),
            &v::to_bytes(b, tb),
        )
    })
}

pub(crate) fn out_of_range(ty: &str, what: &str) -> SqlError {
    SqlError::new(
        ER_DATA_OUT_OF_RANGE,
        format!("{ty} value is out of range in '{what}'"),
    )
}

fn arith(
    op: ArithOp,
    a: &Value,
    ta: &SqlType,
    b: &Value,
    tb: &SqlType,
    out: &SqlType,
) -> Result<Value> {
    if op == ArithOp::IntDiv {
        let (x, y) = (v::to_f64(a, ta), v::to_f64(b, tb));
        if y == 0.0 {
            return Ok(Value::Null);
        }
        let q = (x / y).trunc();
        if q.abs() > 9.2e18 {
            return Err(out_of_range("BIGINT", "DIV"));
        }
        return Ok(Value::Int(q as i64));
    }
    if out.is_integer() {
        let (x, y) = (v::to_int(a, ta).unwrap_or(0), v::to_int(b, tb).unwrap_or(0));
        let r = match op {
            ArithOp::Add => x + y,
            ArithOp::Sub => x - y,
            ArithOp::Mul => x
                .checked_mul(y)
                .ok_or_else(|| out_of_range("BIGINT", "*"))?,
            ArithOp::Mod => {
                if y == 0 {
                    return Ok(Value::Null);
                }
                x % y
            }
            _ => unreachable!("division is not integer-typed"),
        };
        return if out.unsigned {
            u64::try_from(r)
                .map(Value::UInt)
                .map_err(|_| out_of_range("BIGINT UNSIGNED", "arithmetic"))
        } else {
            i64::try_from(r)
                .map(Value::Int)
                .map_err(|_| out_of_range("BIGINT", "arithmetic"))
        };
    }
    let (x, y) = (v::to_f64(a, ta), v::to_f64(b, tb));
    let r = match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x / y
        }
        ArithOp::Mod => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x % y
        }
        ArithOp::IntDiv => unreachable!("handled above"),
    };
    if let TypeKind::Decimal { scale, .. } = out.kind {
        return Ok(Value::Decimal(format!(
            "{r:.prec$}",
            prec = usize::from(scale)
        )));
    }
    Ok(Value::Double(r))
}

/// Converts a value to the representation of type `to` (CAST, and branches of CASE/IF).
pub fn convert_to(val: Value, from: &SqlType, to: &SqlType) -> Result<Value> {
    if matches!(val, Value::Null) {
        return Ok(Value::Null);
    }
    Ok(match &to.kind {
        TypeKind::Int { .. } if !to.unsigned => match val {
            Value::Int(_) => val,
            other => match v::to_int(&other, from) {
                Some(i) => {
                    Value::Int(i64::try_from(i).unwrap_or(if i < 0 { i64::MIN } else { i64::MAX }))
                }
                None => Value::Int(0),
            },
        },
        TypeKind::Int { .. } => match val {
            Value::UInt(_) => val,
            other => match v::to_int(&other, from) {
                Some(i) if i < 0 => Value::UInt(i as i64 as u64),
                Some(i) => Value::UInt(u64::try_from(i).unwrap_or(u64::MAX)),
                None => Value::UInt(0),
            },
        },
        TypeKind::Double | TypeKind::Float => Value::Double(v::to_f64(&val, from)),
        TypeKind::Decimal { scale, .. } => match &val {
            Value::Decimal(d) => Value::Decimal(
                crate::tidb::decimal::rescale(d, *scale).unwrap_or_else(|_| d.clone()),
            ),
            _ if from.is_integer() => {
                let i = v::to_int(&val, from).unwrap_or(0);
                Value::Decimal(
                    crate::tidb::decimal::rescale(&i.to_string(), *scale)
                        .unwrap_or_else(|_| i.to_string()),
                )
            }
            _ => Value::Decimal(format!(
                "{:.prec$}",
                v::to_f64(&val, from),
                prec = usize::from(*scale)
            )),
        },
        TypeKind::Date => match v::to_datetime(&val, from) {
            Some(dt) => Value::Date(dt.date),
            None => Value::Null,
        },
        TypeKind::DateTime { .. } | TypeKind::Timestamp { .. } => {
            match v::to_datetime(&val, from) {
                Some(dt) => Value::DateTime(dt),
                None => Value::Null,
            }
        }
        TypeKind::Time { .. } => match v::to_time(&val, from) {
            Some(t) => Value::Time(t),
            None => Value::Null,
        },
        TypeKind::Char { .. } | TypeKind::VarChar { .. } | TypeKind::Text { .. } => {
            Value::Bytes(v::to_bytes(&val, from))
        }
        TypeKind::Json => super::func::json::cast(val, from)?,
        _ => val,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    struct Cols(Vec<(&'static str, SqlType)>);

    impl Scope for Cols {
        fn column(&self, _q: &[String], name: &str) -> Result<Option<(usize, SqlType)>> {
            Ok(self
                .0
                .iter()
                .position(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|i| (i, self.0[i].1.clone())))
        }
    }

    struct NoEnv;

    impl Env for NoEnv {
        fn system_variable(&self, _s: Option<&str>, name: &str) -> Result<(Value, SqlType)> {
            Ok((Value::Bytes(name.as_bytes().to_vec()), SqlType::string(64)))
        }
        fn user_variable(&self, _name: &str) -> (Value, SqlType) {
            (Value::Null, SqlType::null())
        }
        fn context_function(
            &self,
            name: &str,
            _args: &[Value],
        ) -> Option<Result<(Value, SqlType)>> {
            (name == "VERSION").then(|| Ok((Value::Bytes(b"8.0.36".to_vec()), SqlType::string(16))))
        }
    }

    fn eval_with(sql: &str, cols: &Cols, row: &[Value]) -> Result<Value> {
        let e = Parser::new(&MySqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        let c = Compiler::new(cols, &NoEnv);
        c.compile(&e)?.eval(row)
    }

    fn eval(sql: &str) -> Value {
        eval_with(sql, &Cols(Vec::new()), &[]).expect("evaluates")
    }

    #[test]
    fn the_negation_of_an_unsigned_integer_is_signed() {
        let cols = Cols(vec![("u", SqlType::int().unsigned())]);
        let row = [Value::UInt(3_000_000_000)];
        assert_eq!(
            eval_with("-u", &cols, &row).expect("negates"),
            Value::Int(-3_000_000_000)
        );
        let e = Parser::new(&MySqlDialect {})
            .try_with_sql("-u")
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        let ty = Compiler::new(&cols, &NoEnv)
            .compile(&e)
            .expect("compiles")
            .ty;
        assert!(!ty.unsigned && ty.is_integer(), "{ty:?}");
    }

    #[test]
    fn logic_and_comparisons() {
        assert_eq!(eval("1 = 1"), Value::Int(1));
        assert_eq!(eval("NULL = 1"), Value::Null);
        assert_eq!(eval("NULL <=> NULL"), Value::Int(1));
        assert_eq!(eval("NULL AND 0"), Value::Int(0));
        assert_eq!(eval("NULL OR 1"), Value::Int(1));
        assert_eq!(eval("NULL OR 0"), Value::Null);
        assert_eq!(eval("'abc' = 'ABC'"), Value::Int(1));
        assert_eq!(eval("'10' = 10.0"), Value::Int(1));
        assert_eq!(eval("2 BETWEEN 1 AND 3"), Value::Int(1));
        assert_eq!(eval("2 IN (1, NULL)"), Value::Null);
        assert_eq!(eval("2 IN (1, 2)"), Value::Int(1));
        assert_eq!(eval("2 NOT IN (1, 3)"), Value::Int(1));
        assert_eq!(eval("'a_c' LIKE 'a\\_c'"), Value::Int(1));
        assert_eq!(eval("'abc' LIKE 'a\\_c'"), Value::Int(0));
        assert_eq!(eval("NULL IS NULL"), Value::Int(1));
        assert_eq!(eval("0 IS FALSE"), Value::Int(1));
        assert_eq!(eval("-9223372036854775808 < 0"), Value::Int(1));
        assert_eq!(eval("18446744073709551615 > 1"), Value::Int(1));
    }

    #[test]
    fn arithmetic_and_functions() {
        assert_eq!(eval("1 + 2 * 3"), Value::Int(7));
        // An UNSIGNED operand makes `-` UNSIGNED (MySQL 8.0: 1690 below zero).
        assert_eq!(
            eval("CAST(18446744073709551615 AS UNSIGNED) - 0"),
            Value::UInt(u64::MAX)
        );
        for below in ["CAST(5 AS UNSIGNED) - 10", "5 - CAST(10 AS UNSIGNED)"] {
            let e = eval_with(below, &Cols(Vec::new()), &[]).expect_err(below);
            assert_eq!(e.code.code, 1690, "{below}");
        }
        assert_eq!(eval("12 & 10"), Value::UInt(8));
        assert_eq!(eval("12 | 3"), Value::UInt(15));
        assert_eq!(eval("12 ^ 10"), Value::UInt(6));
        assert_eq!(eval("1 << 62"), Value::UInt(1 << 62));
        assert_eq!(eval("1 << 64"), Value::UInt(0));
        assert_eq!(eval("-1 >> 60"), Value::UInt(15));
        assert_eq!(eval("NULL & 1"), Value::Null);
        assert_eq!(eval("b'101' | 0"), Value::UInt(5));
        assert_eq!(eval("b'100000001'"), Value::Bytes(vec![1, 1]));
        assert_eq!(eval("FLOOR(-2.5)"), Value::Int(-3));
        assert_eq!(eval("CEIL(2.01)"), Value::Int(3));
        assert_eq!(eval("CEILING(-2.5)"), Value::Int(-2));
        assert_eq!(eval("FLOOR(7)"), Value::Int(7));
        assert_eq!(eval("FLOOR(2.5e0)"), Value::Double(2.0));
        assert_eq!(eval("FLOOR('3.7x')"), Value::Double(3.0));
        assert_eq!(eval("FLOOR(NULL)"), Value::Null);
        assert_eq!(eval("7 DIV 2"), Value::Int(3));
        assert_eq!(eval("7 % 0"), Value::Null);
        assert_eq!(eval("1 / 0"), Value::Null);
        assert_eq!(eval("1.5 + 1"), Value::Decimal("2.5000".into()));
        let e = eval_with("9223372036854775807 + 1", &Cols(Vec::new()), &[]).expect_err("overflow");
        assert_eq!(e.code.code, 1690);
        assert_eq!(eval("IFNULL(NULL, 'x')"), Value::Bytes(b"x".to_vec()));
        assert_eq!(eval("COALESCE(NULL, NULL, 3)"), Value::Int(3));
        assert_eq!(eval("CONCAT('a', 1, 'b')"), Value::Bytes(b"a1b".to_vec()));
        assert_eq!(eval("CONCAT('a', NULL)"), Value::Null);
        assert_eq!(eval("UPPER('abc')"), Value::Bytes(b"ABC".to_vec()));
        assert_eq!(
            eval("SUBSTRING('hello', 2, 3)"),
            Value::Bytes(b"ell".to_vec())
        );
        assert_eq!(
            eval("SUBSTRING('hello', -3)"),
            Value::Bytes(b"llo".to_vec())
        );
        assert_eq!(
            eval("CASE WHEN 1 = 2 THEN 'a' ELSE 'b' END"),
            Value::Bytes(b"b".to_vec())
        );
        assert_eq!(
            eval("CASE 2 WHEN 1 THEN 'a' WHEN 2 THEN 'b' END"),
            Value::Bytes(b"b".to_vec())
        );
        assert_eq!(eval("CAST('12abc' AS SIGNED)"), Value::Int(12));
        assert_eq!(eval("CAST(-1 AS UNSIGNED)"), Value::UInt(u64::MAX));
        assert_eq!(eval("VERSION()"), Value::Bytes(b"8.0.36".to_vec()));
        assert_eq!(
            eval("TIME_TO_SEC(TIMEDIFF('2024-01-01 01:00:00', '2024-01-01 00:00:00'))"),
            Value::Int(3600)
        );
        assert_eq!(
            eval("GTID_SUBTRACT('3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10', '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5')"),
            Value::Bytes(b"3e11fa47-71ca-11e1-9e33-c80aa9429562:6-10".to_vec())
        );
    }

    #[test]
    fn columns_and_unknown_names() {
        let cols = Cols(vec![
            ("id", SqlType::bigint()),
            ("name", SqlType::varchar(10, charset::UTF8MB4_BIN)),
        ]);
        let row = [Value::Int(5), Value::Bytes(b"Bob".to_vec())];
        assert_eq!(
            eval_with("id > 3 AND name = 'Bob'", &cols, &row),
            Ok(Value::Int(1))
        );
        assert_eq!(
            eval_with("name = 'bob'", &cols, &row),
            Ok(Value::Int(0)),
            "utf8mb4_bin"
        );
        let e = eval_with("nope = 1", &cols, &row).expect_err("unknown");
        assert_eq!(e.code.code, 1054);
        assert_eq!(e.message, "Unknown column 'nope' in 'field list'");
        let e = eval_with("NO_SUCH_FN(1)", &cols, &row).expect_err("unknown fn");
        assert_eq!(e.code.code, 1305);
    }

    #[test]
    fn the_deepest_chain_evaluates_on_a_small_stack() {
        let sql = format!("1{}", " + 1".repeat(super::super::parse::MAX_OPERATORS));
        let t = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || eval(&sql))
            .expect("spawn");
        assert_eq!(
            t.join().expect("no stack overflow"),
            Value::Int(super::super::parse::MAX_OPERATORS as i64 + 1)
        );
    }
}

//! The compiled expression tree: nodes, operators and result types.

use tibinlog_protocol::value::Value;

use crate::sql::func::Func;
use crate::sql::like::{CaseRule, LikePattern};
use crate::sql::types::{SqlType, TypeKind};
use crate::sql::value::CmpMode;

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

/// A node of type `ty`.
pub(super) fn expr(kind: ExprKind, ty: SqlType) -> Expr {
    Expr { kind, ty }
}

/// The type of a truth value (`1`, `0` or NULL).
pub(super) fn bool_type() -> SqlType {
    SqlType::new(TypeKind::Int { bytes: 8 })
}

/// The value of a truth value (`1` or `0`).
pub(super) fn bool_value(b: bool) -> Value {
    Value::Int(i64::from(b))
}

/// A string literal's type: VARCHAR(n) in the connection collation.
pub fn literal_string_type(len: usize) -> SqlType {
    SqlType::string(len as u32).not_null()
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
}

//! The compiler's operators and calls: binary operators (chains of AND, OR and arithmetic
//! as flat nodes), comparisons, IS, LIKE, CASE, CAST and function calls.

use sqlparser::ast::{
    self, BinaryOperator, DataType, FunctionArg, FunctionArgExpr, FunctionArguments,
};
use tibinlog_protocol::value::Value;

use crate::sql::charset;
use crate::sql::error::{Result, SqlError};
use crate::sql::expr_row;
use crate::sql::func::{self, Func};
use crate::sql::like::{CaseRule, LikePattern};
use crate::sql::types::{SqlType, TypeKind};
use crate::sql::value::{self as v, CmpMode};

use super::compile::Compiler;
use super::tree::{bool_type, expr, ArithOp, ArithStep, CmpOp, Expr, ExprKind};
use super::typing::{arith_type, is_aggregate, union_type};

impl Compiler<'_> {
    /// A binary operator: comparisons, AND/OR and arithmetic chains, bitwise and JSON operators.
    pub(super) fn binary(
        &self,
        left: &ast::Expr,
        op: &BinaryOperator,
        right: &ast::Expr,
    ) -> Result<Expr> {
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
                let (f, ty) = func::signature("JSON_EXTRACT", &args)?;
                let extract = expr(ExprKind::Func(f, args), ty);
                if *op == BinaryOperator::Arrow {
                    return Ok(extract);
                }
                let args = vec![extract];
                let (f, ty) = func::signature("JSON_UNQUOTE", &args)?;
                Ok(expr(ExprKind::Func(f, args), ty))
            }
            other => Err(SqlError::unsupported(format!("the operator {other}"))),
        }
    }

    /// `left op right`, or a comparison of rows.
    pub(in crate::sql) fn comparison(
        &self,
        left: &ast::Expr,
        op: CmpOp,
        right: &ast::Expr,
    ) -> Result<Expr> {
        if let Some(rows) = expr_row::row_operands(left, right)? {
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

    /// `e IS [NOT] NULL`.
    pub(super) fn is_null(&self, e: &ast::Expr, negated: bool) -> Result<Expr> {
        let e = self.compile(e)?;
        Ok(expr(
            ExprKind::IsNull {
                expr: Box::new(e),
                negated,
            },
            bool_type().not_null(),
        ))
    }

    /// `e IS [NOT] TRUE|FALSE`.
    pub(super) fn is_bool(&self, e: &ast::Expr, value: bool, negated: bool) -> Result<Expr> {
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

    /// `e [NOT] LIKE pattern [ESCAPE c]`, the pattern compiled once when it is a constant.
    pub(super) fn like(
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

    /// `CASE [operand] WHEN … THEN … [ELSE …] END`.
    pub(super) fn case(
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

    /// `CAST(inner AS to)`, folded when `inner` is a constant.
    pub(super) fn cast(&self, inner: Expr, to: &DataType) -> Result<Expr> {
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

    /// A function call: a context function of constants, else a scalar function.
    pub(super) fn function(&self, f: &ast::Function) -> Result<Expr> {
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
    pub(super) fn func(&self, name: &str, args: Vec<Expr>) -> Result<Expr> {
        let (f, ty) = func::signature(name, &args)?;
        fold(expr(ExprKind::Func(f, args), ty))
    }
}

/// The arithmetic operator `op` is, if any.
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

//! Row values in comparisons, as keyset pagination writes them: `(a, b) > (1, 'x')` is
//! compared column by column from the left, so it is `a > 1 OR (a = 1 AND b > 'x')`; `=`
//! holds when every column is equal, `<>` when one differs, `IN` when one of the rows is
//! equal. A row where one value is wanted, or rows of different widths, are MySQL's 1241.

use sqlparser::ast;
use tibinlog_protocol::wire::errors::ER_OPERAND_COLUMNS;

use super::error::{Result, SqlError};
use super::expr::{CmpOp, Compiler, Expr, ExprKind};
use super::types::SqlType;

/// The two rows of a comparison when either side is a row value (`None`: two scalars).
pub fn row_operands<'e>(
    left: &'e ast::Expr,
    right: &'e ast::Expr,
) -> Result<Option<(&'e [ast::Expr], &'e [ast::Expr])>> {
    let width = |e: &ast::Expr| match e {
        ast::Expr::Tuple(items) => items.len(),
        _ => 1,
    };
    match (left, right) {
        (ast::Expr::Tuple(l), ast::Expr::Tuple(r)) if l.len() == r.len() && !l.is_empty() => {
            Ok(Some((l, r)))
        }
        (ast::Expr::Tuple(_), _) | (_, ast::Expr::Tuple(_)) => Err(SqlError::new(
            ER_OPERAND_COLUMNS,
            format!("Operand should contain {} column(s)", width(left)),
        )),
        _ => Ok(None),
    }
}

fn node(kind: ExprKind) -> Expr {
    Expr {
        kind,
        ty: SqlType::bigint(),
    }
}

impl Compiler<'_> {
    /// `(l₁, …) op (r₁, …)`, column by column.
    pub(super) fn row_comparison(
        &self,
        (l, r): (&[ast::Expr], &[ast::Expr]),
        op: CmpOp,
    ) -> Result<Expr> {
        let pair = |i: usize, op| self.comparison(&l[i], op, &r[i]);
        let all = |op| {
            (0..l.len())
                .map(|i| pair(i, op))
                .collect::<Result<Vec<_>>>()
        };
        let strict = match op {
            CmpOp::Eq | CmpOp::NullSafeEq => return Ok(node(ExprKind::And(all(op)?))),
            CmpOp::NotEq => return Ok(node(ExprKind::Or(all(op)?))),
            CmpOp::Lt | CmpOp::LtEq => CmpOp::Lt,
            CmpOp::Gt | CmpOp::GtEq => CmpOp::Gt,
        };
        // From the last column: `lᵢ strict rᵢ OR (lᵢ = rᵢ AND <the columns after>)`.
        let last = l.len() - 1;
        let mut acc = pair(last, op)?;
        for i in (0..last).rev() {
            let rest = node(ExprKind::And(vec![pair(i, CmpOp::Eq)?, acc]));
            acc = node(ExprKind::Or(vec![pair(i, strict)?, rest]));
        }
        Ok(acc)
    }

    /// `(l₁, …) [NOT] IN (row, …)`: equal to one of the rows.
    pub(super) fn row_in(
        &self,
        row: &ast::Expr,
        list: &[ast::Expr],
        negated: bool,
    ) -> Result<Expr> {
        let any = list
            .iter()
            .map(|item| self.comparison(row, CmpOp::Eq, item))
            .collect::<Result<Vec<_>>>()?;
        let any = node(ExprKind::Or(any));
        Ok(if negated {
            node(ExprKind::Not(Box::new(any)))
        } else {
            any
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::expr::{Env, Scope};
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;
    use tibinlog_protocol::value::Value;

    struct NoColumns;

    impl Scope for NoColumns {
        fn column(&self, _q: &[String], _name: &str) -> Result<Option<(usize, SqlType)>> {
            Ok(None)
        }
    }

    struct NoEnv;

    impl Env for NoEnv {
        fn system_variable(&self, _s: Option<&str>, _n: &str) -> Result<(Value, SqlType)> {
            Ok((Value::Null, SqlType::null()))
        }
        fn user_variable(&self, _name: &str) -> (Value, SqlType) {
            (Value::Null, SqlType::null())
        }
        fn context_function(&self, _n: &str, _a: &[Value]) -> Option<Result<(Value, SqlType)>> {
            None
        }
    }

    fn eval(sql: &str) -> Result<Value> {
        let e = Parser::new(&MySqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        Compiler::new(&NoColumns, &NoEnv).compile(&e)?.eval(&[])
    }

    #[test]
    fn rows_compare_column_by_column_with_nulls_as_mysql() {
        for (sql, want) in [
            ("(1, 2) < (1, 3)", Value::Int(1)),
            ("(1, 2, 3) >= (1, 2, 3)", Value::Int(1)),
            ("(2, 0) > (1, 9)", Value::Int(1)),
            ("(1, 'b') > (1, 'a')", Value::Int(1)),
            ("(NULL, 1) > (1, 0)", Value::Null),
            ("(2, NULL) > (1, 0)", Value::Int(1)),
            ("(1, NULL) > (1, 0)", Value::Null),
            ("(1, NULL) = (2, NULL)", Value::Int(0)),
            ("(1, NULL) = (1, NULL)", Value::Null),
            ("(1, NULL) <> (2, NULL)", Value::Int(1)),
            ("(NULL, 1) <=> (NULL, 1)", Value::Int(1)),
            ("((1, 2), 3) = ((1, 2), 3)", Value::Int(1)),
            ("(1, 2) IN ((0, 0), (1, 2))", Value::Int(1)),
            ("(1, 2) NOT IN ((0, 0), (1, NULL))", Value::Null),
        ] {
            assert_eq!(eval(sql).expect(sql), want, "{sql}");
        }
        for bad in ["(1, 2) = 1", "1 < (1, 2)", "(1, 2) = (1, 2, 3)"] {
            let e = eval(bad).expect_err(bad);
            assert_eq!(e.code, ER_OPERAND_COLUMNS, "{bad}");
        }
    }
}

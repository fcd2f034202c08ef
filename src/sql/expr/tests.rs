//! Compiling and evaluating expressions.

use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use tibinlog_protocol::value::Value;

use super::*;
use crate::sql::charset;
use crate::sql::error::Result;
use crate::sql::types::SqlType;

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
    fn context_function(&self, name: &str, _args: &[Value]) -> Option<Result<(Value, SqlType)>> {
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

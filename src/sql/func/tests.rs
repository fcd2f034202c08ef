//! Expected values are MySQL 8.0's answers to the same expressions.

use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use tibinlog_protocol::value::Value;

use crate::sql::error::Result;
use crate::sql::expr::{Compiler, Env, NoColumns};
use crate::sql::text::to_text;
use crate::sql::types::SqlType;

struct NoEnv;

impl Env for NoEnv {
    fn system_variable(&self, _s: Option<&str>, _name: &str) -> Result<(Value, SqlType)> {
        Ok((Value::Null, SqlType::null()))
    }
    fn user_variable(&self, _name: &str) -> (Value, SqlType) {
        (Value::Null, SqlType::null())
    }
    fn context_function(&self, _name: &str, _args: &[Value]) -> Option<Result<(Value, SqlType)>> {
        None
    }
}

/// The text MySQL prints for `sql`, `None` for NULL; the error code when it fails.
fn run(sql: &str) -> std::result::Result<Option<String>, u16> {
    let e = Parser::new(&MySqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let compiled = Compiler::new(&NoColumns, &NoEnv)
        .compile(&e)
        .map_err(|e| e.code.code)?;
    let val = compiled.eval(&[]).map_err(|e| e.code.code)?;
    Ok(to_text(&val, &compiled.ty))
}

fn text(sql: &str) -> Option<String> {
    run(sql).unwrap_or_else(|code| panic!("{sql}: error {code}"))
}

fn check(cases: &[(&str, Option<&str>)]) {
    for (sql, want) in cases {
        assert_eq!(text(sql).as_deref(), *want, "{sql}");
    }
}

#[test]
fn checksum_functions() {
    check(&[
        ("CRC32('MySQL')", Some("3259397556")),
        ("CRC32(NULL)", None),
        ("CRC32(12)", Some("1330857165")),
        ("MD5('testing')", Some("ae2b1fca515949e5d54fb22b8ed95575")),
        (
            "SHA1('abc')",
            Some("a9993e364706816aba3e25717850c26c9cd0d89d"),
        ),
        (
            "SHA2('abc', 256)",
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ),
        (
            "SHA2('abc', 0)",
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ),
        ("SHA2('abc', 7)", None),
        ("UNHEX('4D7953514C')", Some("MySQL")),
        ("HEX(UNHEX('F'))", Some("0F")),
        ("UNHEX('GG')", None),
        ("CONCAT_WS('#', 1, NULL, 'b')", Some("1#b")),
        ("CONV('a', 16, 2)", Some("1010")),
        ("CONV('6E', 18, 8)", Some("172")),
        ("CONV(-17, 10, -18)", Some("-H")),
        ("CONV(-17, 10, 16)", Some("FFFFFFFFFFFFFFEF")),
        ("LOWER(CONV(3259397556, 10, 16))", Some("c24675b4")),
        ("CONV('z', 16, 10)", Some("0")),
        ("CONV(1, 1, 10)", None),
    ]);
    assert_eq!(run("BIT_COUNT_NOPE(1)"), Err(1305));
    assert_eq!(run("CRC32()"), Err(1582));
    assert_eq!(run("CRC32(1, 2)"), Err(1582));
}

#[test]
fn json_paths_and_unquote() {
    let doc = r#"'{"a": {"b": [10, 20, {"c": "x"}]}, "k y": true, "n": null}'"#;
    let cases = [
        (format!("JSON_EXTRACT({doc}, '$.a.b[1]')"), Some("20")),
        (
            format!("JSON_EXTRACT({doc}, '$.a.b[last]')"),
            Some(r#"{"c": "x"}"#),
        ),
        (format!("JSON_EXTRACT({doc}, '$.a.b[last-1]')"), Some("20")),
        (
            format!("JSON_EXTRACT({doc}, '$.a.b[0 to 1]')"),
            Some("[10, 20]"),
        ),
        (
            format!("JSON_EXTRACT({doc}, '$.a.b[*]')"),
            Some(r#"[10, 20, {"c": "x"}]"#),
        ),
        (format!("JSON_EXTRACT({doc}, '$.\"k y\"')"), Some("true")),
        (format!("JSON_EXTRACT({doc}, '$**.c')"), Some(r#"["x"]"#)),
        (
            format!("JSON_EXTRACT({doc}, '$.a.b[0]', '$.n')"),
            Some("[10, null]"),
        ),
        (format!("JSON_EXTRACT({doc}, '$.n')"), Some("null")),
        (format!("JSON_EXTRACT({doc}, '$.zz')"), None),
        (format!("JSON_EXTRACT({doc}, '$.a.b[0][0]')"), Some("10")),
        (
            format!("JSON_UNQUOTE(JSON_EXTRACT({doc}, '$.a.b[2].c'))"),
            Some("x"),
        ),
        (
            format!("JSON_TYPE(JSON_EXTRACT({doc}, '$.a'))"),
            Some("OBJECT"),
        ),
        (format!("JSON_LENGTH({doc}, '$.a.b')"), Some("3")),
        ("JSON_UNQUOTE('\"a\\\\tb\"')".to_owned(), Some("a\tb")),
        ("JSON_UNQUOTE('abc')".to_owned(), Some("abc")),
        ("JSON_VALID('{\"a\": 1')".to_owned(), Some("0")),
        ("JSON_VALID('[1]')".to_owned(), Some("1")),
        ("CAST('[1, \"a\"]' AS JSON)".to_owned(), Some(r#"[1, "a"]"#)),
        ("JSON_EXTRACT(NULL, '$')".to_owned(), None),
    ];
    for (sql, want) in &cases {
        assert_eq!(text(sql).as_deref(), *want, "{sql}");
    }
    assert_eq!(run("JSON_EXTRACT('{', '$')"), Err(3141));
    assert_eq!(run("JSON_EXTRACT('{}', 'a')"), Err(3143));
    assert_eq!(run("JSON_EXTRACT('{}', '$**')"), Err(3143));
    assert_eq!(run("JSON_EXTRACT(1, '$')"), Err(3146));
}

#[test]
fn date_parts_and_format() {
    check(&[
        ("YEAR('2024-02-29 13:04:05')", Some("2024")),
        ("MONTH('2024-02-29')", Some("2")),
        ("DAY('2024-02-29')", Some("29")),
        ("DAYOFMONTH(20240301)", Some("1")),
        ("HOUR('838:59:59')", Some("838")),
        ("MINUTE('2024-02-29 13:04:05')", Some("4")),
        ("MICROSECOND('12:00:00.000123')", Some("123")),
        ("QUARTER('2024-11-01')", Some("4")),
        ("DAYOFWEEK('2024-02-29')", Some("5")),
        ("WEEKDAY('2024-02-29')", Some("3")),
        ("DAYOFYEAR('2024-12-31')", Some("366")),
        ("TO_DAYS('1970-01-01')", Some("719528")),
        ("TO_DAYS('0000-01-01')", Some("1")),
        ("DATE('2024-02-29 13:04:05')", Some("2024-02-29")),
        ("YEAR('nope')", None),
        ("DAYOFWEEK('2024-00-00')", None),
        (
            "DATE_FORMAT('2024-02-29 13:04:05.012345', '%Y-%m-%d %H:%i:%s.%f')",
            Some("2024-02-29 13:04:05.012345"),
        ),
        (
            "DATE_FORMAT('2024-02-29 13:04:05', '%W %a %M %b %D %e %c %y %j %w')",
            Some("Thursday Thu February Feb 29th 29 2 24 060 4"),
        ),
        (
            "DATE_FORMAT('2024-02-01 00:04:05', '%h %I %l %k %p %r %T')",
            Some("12 12 12 0 AM 12:04:05 AM 00:04:05"),
        ),
        ("DATE_FORMAT('2024-03-22', '%D %D')", Some("22nd 22nd")),
        (
            "DATE_FORMAT('2024-03-11', '%D|%%|%q|%')",
            Some("11th|%|q|%"),
        ),
        // Week numbers: 2021-01-01 is a Friday.
        (
            "DATE_FORMAT('2021-01-01', '%U %u %V %v %X %x')",
            Some("00 00 52 53 2020 2020"),
        ),
        (
            "DATE_FORMAT('2024-12-31', '%U %u %V %v %X %x')",
            Some("52 53 52 01 2024 2025"),
        ),
        ("DATE_FORMAT('0000-00-00', '%Y-%m-%d')", Some("0000-00-00")),
        ("DATE_FORMAT('0000-00-00', '%W')", None),
        ("DATE_FORMAT('2024-00-10', '%M')", None),
        ("DATE_FORMAT(NULL, '%Y')", None),
    ]);
}

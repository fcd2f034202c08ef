//! Views. TiDB keeps only a view's column names (its `TableInfo` columns carry no types) and
//! types them by planning the view's SELECT; so does this module: the SELECT is planned against
//! the catalog of base tables (nothing is read) and each result column is described as
//! `information_schema.COLUMNS` describes a MySQL 8.0 view column. A query that reads a view
//! runs the view's SELECT in its place, at the query's snapshot ([`expand`]).

use sqlparser::ast::{self, Statement};
use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::ER_VIEW_RECURSIVE;
use tokio_util::sync::CancellationToken;

use super::catalog::{CatalogSnapshot, ColumnMeta, TableKind, TableMeta};
use super::charset;
use super::error::{Result, SqlError};
use super::exec::RowStream;
use super::expr::NoSession;
use super::infoschema::ServerFacts;
use super::parse::parse;
use super::plan::{plan_query, Planned, QueryCtx, SnapshotSource};
use super::types::{SqlType, TypeKind};

/// How deep views may read other views.
const MAX_VIEW_DEPTH: usize = 16;

thread_local! {
    /// Views being expanded on this thread (planning is synchronous).
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The plan of the SELECT of `view` (a view of `ctx.catalog`), planned as if written in the
/// view's database; its columns carry the view's column names.
pub fn expand(ctx: &QueryCtx<'_>, view: &TableMeta) -> Result<Planned> {
    let TableKind::View { definition, .. } = &view.kind else {
        return Err(SqlError::unsupported("expanding a base table as a view"));
    };
    let depth = DEPTH.with(|d| d.get());
    if depth >= MAX_VIEW_DEPTH {
        return Err(SqlError::new(
            ER_VIEW_RECURSIVE,
            format!(
                "`{}`.`{}` contains view recursion (or nests views deeper than {MAX_VIEW_DEPTH})",
                view.db, view.name
            ),
        ));
    }
    let statements = parse(definition).map_err(|e| SqlError::unsupported(format!("{e:?}")))?;
    let [Statement::Query(q)] = statements.as_slice() else {
        return Err(SqlError::unsupported("a view that is not one SELECT"));
    };
    let inner = QueryCtx {
        database: Some(&view.db),
        sql: definition,
        cancel: ctx.cancel.clone(),
        ..*ctx
    };
    DEPTH.with(|d| d.set(depth + 1));
    let planned = plan_query(&inner, q);
    DEPTH.with(|d| d.set(depth));
    let mut planned = planned?;
    for (c, meta) in planned.columns.iter_mut().zip(&view.columns) {
        c.name = meta.name.clone();
    }
    Ok(planned)
}

/// The columns of a view of database `db` whose SELECT is `select`, named `names` (the
/// view's own column list; the SELECT's labels where it is shorter).
pub fn view_columns(
    catalog: &CatalogSnapshot,
    db: &str,
    select: &str,
    names: &[String],
) -> Result<Vec<ColumnMeta>> {
    let statements = parse(select).map_err(|e| SqlError::unsupported(format!("{e:?}")))?;
    let [Statement::Query(q)] = statements.as_slice() else {
        return Err(SqlError::unsupported("a view that is not one SELECT"));
    };
    let facts = ServerFacts::default();
    let ctx = QueryCtx {
        catalog,
        env: &NoSession("a view"),
        database: Some(db),
        snapshot: Some(&Unread),
        read_ts: Some(0),
        info: &facts,
        sql: select,
        cancel: CancellationToken::new(),
        select_denied_to: None,
    };
    let planned = plan_query(&ctx, q)?;
    Ok(planned
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let name = names.get(i).unwrap_or(&c.name);
            // A column read straight from a table is described as that column (its type,
            // nullability and default), as MySQL describes it.
            let base = c.origin.as_ref().and_then(|(db, _, table, column)| {
                catalog
                    .table(db, table)?
                    .column(column)
                    .map(|(_, m)| m.clone())
            });
            match base {
                Some(m) => ColumnMeta {
                    name: name.clone(),
                    key: String::new(),
                    extra: String::new(),
                    comment: String::new(),
                    generated: None,
                    ..m
                },
                None => column_meta(name, &view_int(&c.ty, c.int_len)),
            }
        })
        .collect())
}

/// A view column's type for an integer result: MySQL makes it INT when its display length
/// (sign included) is at most 9, BIGINT above (checked against MySQL 8.0.31: `1+1`,
/// `1234567+1`, `si*ti`, `12345678`, `1 DIV 1` and `ABS(1)` are INT; `12345678+1`, `i+1`,
/// `ti*ti*ti`, `i DIV 2`, `ABS(i)` and `100000000` BIGINT, for SMALLINT `si`, TINYINT `ti`,
/// INT `i`).
fn view_int(ty: &SqlType, int_len: Option<u32>) -> SqlType {
    match (&ty.kind, int_len) {
        (TypeKind::Int { .. }, Some(len)) => {
            let mut t = ty.clone();
            t.kind = TypeKind::Int {
                bytes: if len <= 9 { 4 } else { 8 },
            };
            t
        }
        _ => ty.clone(),
    }
}

/// MySQL's display length (`max_length`, sign included) of an integer expression of result
/// type `ty`: a column's display width, a literal's digits and sign, for `+` and `-` one digit
/// more than the longer operand, for `*` the operands' digits together, for `DIV` the
/// dividend's, for unary minus and `ABS` the operand's; `None` for anything else (CAST, other
/// functions, non-integers). `leaf` types a column reference.
pub fn int_display_len(
    e: &ast::Expr,
    ty: &SqlType,
    leaf: &dyn Fn(&ast::Expr) -> Option<SqlType>,
) -> Option<u32> {
    if !ty.is_integer() {
        return None;
    }
    expr_digits(e, leaf, 0).map(|d| d + u32::from(!ty.unsigned))
}

/// Digits of an integer column type: TINYINT(4), SMALLINT(6), MEDIUMINT(9), INT(11) and
/// BIGINT(20) less the sign when signed.
fn type_digits(t: &SqlType) -> Option<u32> {
    match (&t.kind, t.unsigned) {
        (TypeKind::Int { bytes: 1 }, _) => Some(3),
        (TypeKind::Int { bytes: 2 }, _) => Some(5),
        (TypeKind::Int { bytes: 3 }, _) => Some(8),
        (TypeKind::Int { bytes: 4 }, _) => Some(10),
        (TypeKind::Int { .. }, false) => Some(19),
        (TypeKind::Int { .. }, true) => Some(20),
        _ => None,
    }
}

fn expr_digits(
    e: &ast::Expr,
    leaf: &dyn Fn(&ast::Expr) -> Option<SqlType>,
    depth: usize,
) -> Option<u32> {
    if depth > super::expr::MAX_DEPTH {
        return None;
    }
    let d = |x: &ast::Expr| expr_digits(x, leaf, depth + 1);
    match e {
        ast::Expr::Nested(x) => d(x),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit()) => {
                Some(n.trim_start_matches('0').len().max(1) as u32)
            }
            _ => None,
        },
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => {
            leaf(e).as_ref().and_then(type_digits)
        }
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus | ast::UnaryOperator::Plus,
            expr,
        } => d(expr),
        ast::Expr::BinaryOp { left, op, right } => {
            let (a, b) = (d(left)?, d(right)?);
            match op {
                ast::BinaryOperator::Plus | ast::BinaryOperator::Minus => Some(a.max(b) + 1),
                ast::BinaryOperator::Multiply => Some(a + b),
                ast::BinaryOperator::MyIntegerDivide => Some(a),
                _ => None,
            }
        }
        ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("ABS") => match &f.args {
            ast::FunctionArguments::List(l) => match l.args.as_slice() {
                [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))] => d(x),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// Describes a result column as a view column.
/// The default MySQL shows for a computed NOT NULL view column: its type's zero (`0`, `0.00`
/// at the scale, `''`, the zero date or time at the precision; checked against MySQL 8.0.31);
/// none for a nullable one.
fn implicit_default(ty: &SqlType) -> Option<String> {
    if ty.nullable {
        return None;
    }
    let fraction = |digits: u8| match digits {
        0 => String::new(),
        n => format!(".{}", "0".repeat(usize::from(n))),
    };
    Some(match ty.kind {
        TypeKind::Int { .. } | TypeKind::Float | TypeKind::Double => "0".into(),
        TypeKind::Decimal { scale, .. } => format!("0{}", fraction(scale)),
        TypeKind::Char { .. } | TypeKind::VarChar { .. } => String::new(),
        TypeKind::DateTime { fsp } => format!("0000-00-00 00:00:00{}", fraction(fsp)),
        TypeKind::Date => "0000-00-00".into(),
        TypeKind::Time { fsp } => format!("00:00:00{}", fraction(fsp)),
        _ => return None,
    })
}

fn column_meta(name: &str, ty: &SqlType) -> ColumnMeta {
    let (column_type, data_type) = type_text(ty);
    let collation = ty
        .is_string()
        .then(|| charset::collation(ty.collation))
        .flatten();
    let maxlen = u64::from(charset::maxlen(ty.collation));
    let (char_max_len, char_octet_len) = match ty.kind {
        TypeKind::Char { chars } | TypeKind::VarChar { chars } => {
            (Some(u64::from(chars)), Some(u64::from(chars) * maxlen))
        }
        // MySQL counts TEXT lengths in bytes in both columns, whatever the character set.
        TypeKind::Text { max_bytes } => (Some(max_bytes), Some(max_bytes)),
        _ => (None, None),
    };
    let (numeric_precision, numeric_scale) = match ty.kind {
        TypeKind::Int { bytes: 8 } if ty.unsigned => (Some(20), Some(0)),
        TypeKind::Int { bytes } => (Some(int_digits(bytes)), Some(0)),
        TypeKind::Decimal { precision, scale } => {
            (Some(u64::from(precision)), Some(u64::from(scale)))
        }
        TypeKind::Float => (Some(12), None),
        TypeKind::Double => (Some(22), None),
        _ => (None, None),
    };
    let datetime_precision = match ty.kind {
        TypeKind::Time { fsp } | TypeKind::DateTime { fsp } | TypeKind::Timestamp { fsp } => {
            Some(u64::from(fsp))
        }
        _ => None,
    };
    ColumnMeta {
        name: name.to_owned(),
        ty: ty.clone(),
        column_type,
        data_type,
        default: implicit_default(ty),
        extra: String::new(),
        comment: String::new(),
        key: String::new(),
        charset: collation.map(|c| c.charset.to_owned()),
        collation: collation.map(|c| c.name.to_owned()),
        generated: None,
        char_max_len,
        char_octet_len,
        numeric_precision,
        numeric_scale,
        datetime_precision,
    }
}

/// `NUMERIC_PRECISION` of an integer type of `bytes` bytes.
fn int_digits(bytes: u8) -> u64 {
    match bytes {
        1 => 3,
        2 => 5,
        3 => 7,
        4 => 10,
        _ => 19,
    }
}

/// `COLUMN_TYPE` and `DATA_TYPE` of a type, as MySQL 8.0 prints them.
pub fn type_text(ty: &SqlType) -> (String, String) {
    let binary = ty.collation == charset::BINARY;
    let fsp = |f: u8| {
        if f > 0 {
            format!("({f})")
        } else {
            String::new()
        }
    };
    let (base, args) = match &ty.kind {
        TypeKind::Null => ("binary", "(0)".to_owned()),
        TypeKind::Int { bytes } => (
            match bytes {
                1 => "tinyint",
                2 => "smallint",
                3 => "mediumint",
                4 => "int",
                _ => "bigint",
            },
            String::new(),
        ),
        TypeKind::Float => ("float", String::new()),
        TypeKind::Double => ("double", String::new()),
        TypeKind::Decimal { precision, scale } => ("decimal", format!("({precision},{scale})")),
        TypeKind::Year => ("year", String::new()),
        TypeKind::Date => ("date", String::new()),
        TypeKind::Time { fsp: f } => ("time", fsp(*f)),
        TypeKind::DateTime { fsp: f } => ("datetime", fsp(*f)),
        TypeKind::Timestamp { fsp: f } => ("timestamp", fsp(*f)),
        TypeKind::Char { chars } => (if binary { "binary" } else { "char" }, format!("({chars})")),
        TypeKind::VarChar { chars } => (
            if binary { "varbinary" } else { "varchar" },
            format!("({chars})"),
        ),
        TypeKind::Text { max_bytes } => (text_name(*max_bytes, binary), String::new()),
        TypeKind::Json => ("json", String::new()),
        TypeKind::Bit { bits } => ("bit", format!("({bits})")),
        TypeKind::Enum { members } => ("enum", members_text(members)),
        TypeKind::Set { members } => ("set", members_text(members)),
        TypeKind::Geometry => ("geometry", String::new()),
    };
    let mut column_type = format!("{base}{args}");
    if ty.unsigned && ty.is_numeric() {
        column_type.push_str(" unsigned");
    }
    (column_type, base.to_owned())
}

fn text_name(max_bytes: u64, binary: bool) -> &'static str {
    match (max_bytes, binary) {
        (..=255, false) => "tinytext",
        (..=255, true) => "tinyblob",
        (..=65_535, false) => "text",
        (..=65_535, true) => "blob",
        (..=16_777_215, false) => "mediumtext",
        (..=16_777_215, true) => "mediumblob",
        (_, false) => "longtext",
        (_, true) => "longblob",
    }
}

fn members_text(members: &[Vec<u8>]) -> String {
    let quoted: Vec<String> = members
        .iter()
        .map(|m| format!("'{}'", String::from_utf8_lossy(m).replace('\'', "''")))
        .collect();
    format!("({})", quoted.join(","))
}

/// A table source that is planned against but never read.
#[derive(Debug)]
struct Unread;

impl SnapshotSource for Unread {
    fn scan(
        &self,
        _table: &TableMeta,
        _ts: u64,
        _request: super::keyrange::ScanRequest,
    ) -> Result<Box<dyn RowStream>> {
        Ok(Box::new(NoRows))
    }
}

struct NoRows;

impl RowStream for NoRows {
    fn next_batch(
        &mut self,
        _out: &mut Vec<Vec<Value>>,
        _spare: &mut Vec<Vec<Value>>,
    ) -> Result<bool> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_print_as_mysql_8_column_types() {
        assert_eq!(type_text(&SqlType::bigint()).0, "bigint");
        assert_eq!(type_text(&SqlType::ubigint()).0, "bigint unsigned");
        assert_eq!(type_text(&SqlType::decimal(12, 2)).0, "decimal(12,2)");
        assert_eq!(type_text(&SqlType::datetime(3)).0, "datetime(3)");
        let v = SqlType::varchar(20, charset::UTF8MB4_BIN);
        assert_eq!(type_text(&v), ("varchar(20)".into(), "varchar".into()));
        let b = SqlType::varchar(8, charset::BINARY);
        assert_eq!(type_text(&b).0, "varbinary(8)");
        assert_eq!(
            type_text(&SqlType::longtext(charset::UTF8MB4_BIN)).0,
            "longtext"
        );
    }

    #[test]
    fn a_view_is_typed_by_planning_its_select() {
        let catalog = CatalogSnapshot::from_tables(Vec::new(), Vec::new());
        let cols = view_columns(
            &catalog,
            "d",
            "SELECT CAST(1 AS SIGNED) AS `a`, 'xy' AS `b`, 1.50 AS `c`",
            &["a".into(), "bee".into()],
        )
        .expect("the SELECT is typed");
        let got: Vec<(&str, &str)> = cols
            .iter()
            .map(|c| (c.name.as_str(), c.data_type.as_str()))
            .collect();
        assert_eq!(got, [("a", "bigint"), ("bee", "varchar"), ("c", "decimal")]);
        assert_eq!(cols[1].char_max_len, Some(2));
        assert!(view_columns(&catalog, "d", "SELECT * FROM `nope`", &[]).is_err());
        // Integer expressions: INT up to a display length of 9, as MySQL 8.0 types them.
        let cols = view_columns(
            &catalog,
            "d",
            "SELECT 1+1, 1234567+1, 12345678+1, 12345678, 100000000, -12345678, 123*456, \
             1*1, 10000000*10, 1 DIV 1, ABS(1)",
            &[],
        )
        .expect("typed");
        let got: Vec<&str> = cols.iter().map(|c| c.data_type.as_str()).collect();
        assert_eq!(
            got,
            [
                "int", "int", "bigint", "int", "bigint", "int", "int", "int", "bigint", "int",
                "int"
            ]
        );
        assert!(view_columns(&catalog, "d", "DELETE FROM t", &[]).is_err());
    }
}

//! Virtual generated columns. TiDB keeps only their expression (`GeneratedExprString`, in the
//! form TiDB restores it: `` `price` * `qty` ``, `` concat(`a`, _utf8mb4'-') ``), never their
//! value, so rows read from TiKV lack them. [`VirtualColumns`] compiles those expressions once
//! per table version with the engine that answers SELECT, and fills the cells of every decoded
//! row, for binlog row images and snapshot reads alike.
//!
//! A value is never made up: an expression the engine cannot compile (a function it lacks, a
//! target type it cannot hold) is returned by [`VirtualColumns::compile`], and the caller
//! refuses rows of that table version; an expression that fails on one row (an out-of-range
//! result, invalid JSON) is an error for that row. TiDB computed the same expression when the
//! row was written, so a failure here is a difference between the two evaluators, which only
//! an error makes visible.

use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use tibinlog_protocol::value::Value;

use super::error::{Result, SqlError};
use super::expr::{convert_to, Compiler, Expr, NoSession, Scope};
use super::types::{SqlType, TypeKind};

/// One virtual column of a table version.
#[derive(Debug)]
struct Column {
    /// Position in the row.
    index: usize,
    name: String,
    expr: Expr,
    ty: SqlType,
}

/// A virtual column whose expression cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncomputable {
    pub column: String,
    pub expression: String,
    pub reason: String,
}

/// An evaluation that failed on one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalFailure {
    pub column: String,
    pub reason: String,
}

/// The compiled virtual columns of one table version.
#[derive(Debug, Default)]
pub struct VirtualColumns {
    cols: Vec<Column>,
}

/// Row columns by name, for compiling.
struct RowScope<'a> {
    names: &'a [String],
    types: &'a [SqlType],
    table: &'a str,
}

impl Scope for RowScope<'_> {
    fn column(&self, qualifier: &[String], name: &str) -> Result<Option<(usize, SqlType)>> {
        if let [.., t] = qualifier {
            if !t.eq_ignore_ascii_case(self.table) {
                return Ok(None);
            }
        }
        Ok(self
            .names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(|i| (i, self.types[i].clone())))
    }
}

/// Whether a cell of type `ty` can be produced from an expression result.
fn storable(ty: &SqlType) -> bool {
    matches!(
        ty.kind,
        TypeKind::Int { .. }
            | TypeKind::Float
            | TypeKind::Double
            | TypeKind::Decimal { .. }
            | TypeKind::Date
            | TypeKind::DateTime { .. }
            | TypeKind::Time { .. }
            | TypeKind::Year
            | TypeKind::Char { .. }
            | TypeKind::VarChar { .. }
            | TypeKind::Text { .. }
            | TypeKind::Json
    )
}

/// `val` (of type `from`) as a cell of a column of type `to`, in the form decoded rows carry.
fn to_cell(val: Value, from: &SqlType, to: &SqlType) -> Result<Value> {
    Ok(match to.kind {
        TypeKind::Float => match convert_to(val, from, &SqlType::double())? {
            Value::Double(d) => Value::Float(d as f32),
            other => other,
        },
        TypeKind::Year => match convert_to(val, from, &SqlType::bigint())? {
            Value::Int(0) => Value::Year(0),
            Value::Int(y @ 1..=69) => Value::Year(2000 + y as u16),
            Value::Int(y @ 70..=99) => Value::Year(1900 + y as u16),
            Value::Int(y @ 1901..=2155) => Value::Year(y as u16),
            Value::Null => Value::Null,
            other => return Err(SqlError::unsupported(format!("{other:?} as a YEAR value"))),
        },
        _ => convert_to(val, from, to)?,
    })
}

impl VirtualColumns {
    /// Compiles the virtual columns `generated` (`(row position, expression text)`) of table
    /// `table`, whose row holds the columns `names` of types `types`. Columns that cannot be
    /// computed are returned, not compiled; an empty result means nothing to fill.
    pub fn compile(
        table: &str,
        names: &[String],
        types: &[SqlType],
        generated: &[(usize, &str)],
    ) -> (VirtualColumns, Vec<Uncomputable>) {
        let mut cols = Vec::new();
        let mut failed = Vec::new();
        for &(index, text) in generated {
            let (Some(name), Some(ty)) = (names.get(index), types.get(index)) else {
                continue;
            };
            let fail = |reason: String| Uncomputable {
                column: name.clone(),
                expression: text.to_owned(),
                reason,
            };
            if !storable(ty) {
                failed.push(fail(format!("a generated {:?} column", ty.kind)));
                continue;
            }
            let parsed = Parser::new(&MySqlDialect {})
                .try_with_sql(text)
                .and_then(|mut p| p.parse_expr());
            let ast = match parsed {
                Ok(a) => a,
                Err(e) => {
                    failed.push(fail(e.to_string()));
                    continue;
                }
            };
            let scope = RowScope {
                names,
                types,
                table,
            };
            match Compiler::new(&scope, &NoSession("a generated column")).compile(&ast) {
                Ok(expr) => cols.push(Column {
                    index,
                    name: name.clone(),
                    expr,
                    ty: ty.clone(),
                }),
                Err(e) => failed.push(fail(e.message.clone())),
            }
        }
        (VirtualColumns { cols }, failed)
    }

    /// No column to fill.
    pub fn is_empty(&self) -> bool {
        self.cols.is_empty()
    }

    /// Computes the virtual cells of `row` (a decoded row, the virtual cells unset), in column
    /// order so that one may use another before it; the first column that fails is the error.
    pub fn fill(&self, row: &mut [Value]) -> std::result::Result<(), EvalFailure> {
        for c in &self.cols {
            let value = c
                .expr
                .eval(row)
                .and_then(|v| to_cell(v, &c.expr.ty, &c.ty))
                .map_err(|e| EvalFailure {
                    column: c.name.clone(),
                    reason: e.message.clone(),
                })?;
            if let Some(slot) = row.get_mut(c.index) {
                *slot = value;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::sql::charset::UTF8MB4_BIN;
    use tibinlog_protocol::value::Date;

    fn table() -> (Vec<String>, Vec<SqlType>) {
        let names = [
            "id", "price", "qty", "name", "total", "label", "day", "half",
        ]
        .map(str::to_owned)
        .to_vec();
        let types = vec![
            SqlType::bigint(),
            SqlType::decimal(10, 2),
            SqlType::int(),
            SqlType::varchar(20, UTF8MB4_BIN),
            SqlType::decimal(12, 2),
            SqlType::varchar(40, UTF8MB4_BIN),
            SqlType::new(TypeKind::Date),
            SqlType::double(),
        ];
        (names, types)
    }

    #[test]
    fn tidb_restored_expressions_compute_cells_of_the_column_type() {
        let (names, types) = table();
        let generated = [
            (4, "`price` * `qty`"),
            (5, "concat(upper(`name`), _utf8mb4'-', `qty`)"),
            (6, "_utf8mb4'2024-02-29'"),
            (7, "`t`.`total` / 2"),
        ];
        let (v, failed) = VirtualColumns::compile("t", &names, &types, &generated);
        assert_eq!(failed, []);
        let mut row = vec![
            Value::Int(1),
            Value::Decimal("2.50".into()),
            Value::Int(3),
            Value::Bytes(b"ab".to_vec()),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ];
        assert_eq!(v.fill(&mut row), Ok(()));
        assert_eq!(row[4], Value::Decimal("7.50".into()));
        assert_eq!(row[5], Value::Bytes(b"AB-3".to_vec()));
        assert_eq!(
            row[6],
            Value::Date(Date {
                year: 2024,
                month: 2,
                day: 29
            })
        );
        // A generated column may use one before it.
        assert_eq!(row[7], Value::Double(3.75));

        // NULL in, NULL out.
        row[2] = Value::Null;
        assert_eq!(v.fill(&mut row), Ok(()));
        assert_eq!(row[4], Value::Null);
        assert_eq!(row[5], Value::Null);
    }

    #[test]
    fn what_cannot_be_computed_is_named() {
        let (names, types) = table();
        let generated = [(4, "soundex(`name`)"), (5, "`nope` + 1"), (7, "`price` +")];
        let (v, failed) = VirtualColumns::compile("t", &names, &types, &generated);
        assert!(v.is_empty());
        let cols: Vec<&str> = failed.iter().map(|f| f.column.as_str()).collect();
        assert_eq!(cols, ["total", "label", "half"]);
        assert!(
            failed[0].reason.to_lowercase().contains("soundex"),
            "{failed:?}"
        );
        assert!(failed[1].reason.contains("nope"), "{failed:?}");

        let mut geo = table();
        geo.1[4] = SqlType::new(TypeKind::Geometry);
        let (_, failed) = VirtualColumns::compile("t", &geo.0, &geo.1, &[(4, "`name`")]);
        assert_eq!(failed.len(), 1);
    }

    #[test]
    fn a_row_that_fails_is_an_error_naming_the_column() {
        let (names, types) = table();
        let (v, failed) =
            VirtualColumns::compile("t", &names, &types, &[(5, "`id` + 9223372036854775807")]);
        assert_eq!(failed, []);
        let mut row = vec![Value::Null; 8];
        row[0] = Value::Int(1);
        let f = v.fill(&mut row).expect_err("overflow");
        assert_eq!(f.column, "label");
        assert!(f.reason.contains("out of range"), "{f:?}");
        row[0] = Value::Int(-1);
        assert_eq!(v.fill(&mut row), Ok(()));
        assert_eq!(row[5], Value::Bytes(b"9223372036854775806".to_vec()));
    }

    #[test]
    fn json_index_columns_as_tidb_restores_them() {
        // `doc->>'$.name'` and `doc->'$.tags[0]'` as TiDB keeps them in GeneratedExprString.
        let names = ["id", "doc", "name", "tag", "born"]
            .map(str::to_owned)
            .to_vec();
        let types = vec![
            SqlType::bigint(),
            SqlType::new(TypeKind::Json),
            SqlType::varchar(40, UTF8MB4_BIN),
            SqlType::new(TypeKind::Json),
            SqlType::new(TypeKind::Year),
        ];
        let generated = [
            (2, "json_unquote(json_extract(`doc`, _utf8mb4'$.name'))"),
            (3, "json_extract(`doc`, _utf8mb4'$.tags[0]')"),
            (
                4,
                "year(json_unquote(json_extract(`doc`, _utf8mb4'$.born')))",
            ),
        ];
        let (v, failed) = VirtualColumns::compile("t", &names, &types, &generated);
        assert_eq!(failed, []);
        let doc = crate::sql::func::json::parse_text(
            br#"{"name": "Ann", "tags": ["a", 2], "born": "1999-05-01"}"#,
            1,
            "test",
        )
        .unwrap();
        let mut row = vec![
            Value::Int(1),
            Value::Json(doc),
            Value::Null,
            Value::Null,
            Value::Null,
        ];
        v.fill(&mut row).unwrap();
        assert_eq!(row[2], Value::Bytes(b"Ann".to_vec()));
        assert_eq!(
            row[3],
            Value::Json(tibinlog_protocol::value::Json::String("a".into()))
        );
        assert_eq!(row[4], Value::Year(1999));
    }
}

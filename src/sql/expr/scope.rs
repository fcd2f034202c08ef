//! What compiling resolves names against: the columns in scope, and the session and
//! server (variables, context functions).

use sqlparser::ast;
use tibinlog_protocol::value::Value;

use crate::sql::error::{Result, SqlError};
use crate::sql::perfschema::VarView;
use crate::sql::types::SqlType;

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
    fn server_variables(&self, _view: VarView) -> Vec<(String, String)> {
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

//! The SQL surface: what binlog clients run before streaming (spec §1.7, §2, §6).
//!
//! Statements are parsed with `sqlparser`'s MySQL dialect. A few statements that clients send
//! are outside what it parses; those are recognised by a small tokenizer ([`Words`]) first:
//! - `PURGE {BINARY|MASTER} LOGS {TO 'f' | BEFORE 'datetime'}`: not parsed by sqlparser;
//! - `START TRANSACTION WITH CONSISTENT SNAPSHOT` (Debezium snapshots): rejected by sqlparser;
//! - `SHOW BINLOG EVENTS [IN 'f'] [FROM p] [LIMIT [o,] n]`: sqlparser turns it into a generic
//!   `SHOW <words>` with the clauses as identifiers, so the clauses are read from the tokens.
//!
//! sqlparser maps other MySQL-only `SHOW` forms (`SHOW MASTER STATUS`, `SHOW BINARY LOG STATUS`,
//! `SHOW BINARY LOGS`, `SHOW REPLICAS`, `SHOW GRANTS …`) to a generic `SHOW <idents>` statement;
//! those are dispatched on the identifiers. `SHOW [FULL] COLUMNS FROM t FROM db` reads the
//! second `FROM` from the tokens as well.
//!
//! `FLUSH TABLES WITH READ LOCK` and `LOCK TABLES` cannot stop the cluster's commits; the session
//! instead keeps the binlog end and the catalog of the moment it locked until `UNLOCK TABLES`, which
//! is what a snapshotting client (Debezium) relies on the lock for (see [`super::vars::ReadLock`]).
//!
//! Answers follow MySQL 8.0: labels as written (or the alias), canonical lower-case variable
//! names, 1064 for what does not parse, 1290 for writes, 1193 for unknown variables, 1105 for
//! statements we do not implement. Never a silent OK for a statement we did not understand.

use std::collections::BTreeMap;

use sqlparser::ast::{
    BinaryOperator, ContextModifier, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    InTarget, ObjectName, SelectItem, Set, SetExpr, ShowCreateObject, ShowStatementFilter,
    Statement, UnaryOperator, Value,
};
use sqlparser::parser::ParserError;
use tibinlog_protocol::binlog::{ChecksumAlg, EventType, GtidSet, Sid, HEADER_LEN};
use tibinlog_protocol::wire::errors::{
    ErrorCode, ER_BAD_DB_ERROR, ER_NO_DB_ERROR, ER_NO_SUCH_TABLE, ER_NO_SUCH_THREAD,
    ER_OPTION_PREVENTS_STATEMENT, ER_PARSE_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR,
    ER_STACK_OVERRUN_NEED_MORE, ER_UNKNOWN_ERROR, ER_UNKNOWN_SYSTEM_VARIABLE,
    ER_UNKNOWN_TARGET_BINLOG, ER_WRONG_ARGUMENTS, ER_WRONG_VALUE_FOR_VAR,
};
use tibinlog_protocol::wire::response::{ColumnSpec, ErrResponse};

use super::binlog_events::show_binlog_events;
use super::conn::ConnInfo;
use super::source::SourceError;
use super::sql::like::{CaseRule, LikePattern};
use super::sql::parse::{parse, ParseFailure};
use super::vars::{global_variables, Scope, Session};
use super::words::Words;
use super::Shared;

/// One answer to one statement.
#[derive(Debug, Clone)]
pub enum Reply {
    Ok {
        affected: u64,
    },
    Err(ErrResponse),
    Rows {
        columns: Vec<ColumnSpec>,
        rows: Vec<Vec<Option<String>>>,
    },
}

impl Reply {
    fn ok() -> Self {
        Self::Ok { affected: 0 }
    }

    pub(super) fn err(code: ErrorCode, msg: impl Into<String>) -> Self {
        Self::Err(ErrResponse::new(code, msg))
    }

    /// A result set whose columns are all text.
    pub(super) fn text(names: &[&str], rows: Vec<Vec<Option<String>>>) -> Self {
        Self::Rows {
            columns: names.iter().map(|n| ColumnSpec::text(*n)).collect(),
            rows,
        }
    }
}

/// MySQL's read-only refusal.
const MSG_READ_ONLY: &str =
    "The MySQL server is running with the --read-only option so it cannot execute this statement";

/// Runs the statements of one COM_QUERY.
pub fn execute(shared: &Shared, info: &ConnInfo, session: &mut Session, sql: &str) -> Vec<Reply> {
    let ctx = Ctx {
        shared,
        info,
        globals: global_variables(&shared.identity, shared.source.as_ref()),
    };
    let words = Words::new(sql);
    if let Some(reply) = ctx.fallback(&words) {
        return vec![reply];
    }
    match parse(sql) {
        Ok(stmts) if stmts.is_empty() => vec![Reply::err(ER_PARSE_ERROR, "Query was empty")],
        Ok(stmts) => {
            let mut out = Vec::with_capacity(stmts.len());
            for st in &stmts {
                let r = ctx.statement(session, st, &words);
                let stop = matches!(r, Reply::Err(_));
                out.push(r);
                if stop {
                    break;
                }
            }
            out
        }
        Err(ParseFailure::Syntax(e)) => vec![syntax_error(sql, &e)],
        Err(e @ ParseFailure::TooComplex { .. }) => {
            vec![Reply::err(ER_STACK_OVERRUN_NEED_MORE, e.to_string())]
        }
    }
}

/// ERR 1064 in MySQL's shape: `… near '<rest of the statement>' at line N`.
fn syntax_error(sql: &str, e: &ParserError) -> Reply {
    let msg = e.to_string();
    let (line, col) = parse_location(&msg).unwrap_or((1, 1));
    let offset = sql
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>()
        + col.saturating_sub(1);
    let near: String = sql
        .get(offset.min(sql.len())..)
        .unwrap_or("")
        .chars()
        .take(80)
        .collect();
    Reply::err(
        ER_PARSE_ERROR,
        format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your \
             MySQL server version for the right syntax to use near '{near}' at line {line}"
        ),
    )
}

/// Extracts `Line: l, Column: c` from a sqlparser message.
fn parse_location(msg: &str) -> Option<(usize, usize)> {
    let l = msg.rfind("Line: ")?;
    let rest = &msg[l + 6..];
    let (line, rest) = rest.split_once(',')?;
    let col = rest.trim().strip_prefix("Column: ")?;
    let col: String = col.chars().take_while(char::is_ascii_digit).collect();
    Some((line.trim().parse().ok()?, col.parse().ok()?))
}

struct Ctx<'a> {
    shared: &'a Shared,
    info: &'a ConnInfo,
    globals: BTreeMap<String, String>,
}

/// A value computed for a SELECT item or a SET right-hand side.
type SqlValue = Option<String>;

impl Ctx<'_> {
    /// The catalog this session sees: the one it locked, or the current one.
    fn schema(&self, session: &Session) -> std::sync::Arc<dyn super::source::SchemaProvider> {
        match &session.read_lock {
            Some(l) => l.schema.clone(),
            None => self.shared.schema.clone(),
        }
    }

    /// Takes the session's read lock: keeps the binlog end and the catalog of that end (a
    /// second lock statement keeps the first one, as MySQL's lock stays in place).
    fn lock_reads(&self, session: &mut Session) {
        if session.read_lock.is_some() {
            return;
        }
        let (end, gtid_executed) = self.shared.source.status();
        let schema = self.shared.schema.at(&end);
        session.read_lock = Some(super::vars::ReadLock {
            end,
            gtid_executed,
            schema,
        });
    }

    /// Statements handled from tokens (see the module docs), or `None`.
    fn fallback(&self, w: &Words) -> Option<Reply> {
        if w.starts_with(&["PURGE"]) {
            return Some(self.purge(w));
        }
        if w.starts_with(&["START", "TRANSACTION", "WITH", "CONSISTENT", "SNAPSHOT"]) {
            return Some(Reply::ok());
        }
        if w.starts_with(&["SHOW", "BINLOG", "EVENTS"]) {
            return Some(show_binlog_events(self.shared.source.as_ref(), w));
        }
        None
    }

    fn statement(&self, session: &mut Session, st: &Statement, words: &Words) -> Reply {
        match st {
            Statement::Query(q) => self.select(session, q),
            Statement::Set(set) => self.set(session, set),
            Statement::ShowVariables { filter, global, .. } => {
                let mut vars = self.globals.clone();
                if !global {
                    for (k, v) in &session.overrides {
                        vars.insert(k.clone(), v.clone().unwrap_or_default());
                    }
                }
                name_value_rows(vars, filter.as_ref())
            }
            Statement::ShowStatus { filter, .. } => {
                let mut vars = BTreeMap::new();
                for k in ["Ssl_cipher", "Ssl_version"] {
                    vars.insert(k.to_string(), String::new());
                }
                vars.insert("Threads_connected".into(), "1".into());
                vars.insert("Uptime".into(), "1".into());
                name_value_rows(vars, filter.as_ref())
            }
            Statement::ShowVariable { variable } => {
                let words: Vec<String> = variable.iter().map(|i| i.value.to_uppercase()).collect();
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                self.show_words(session, &words)
            }
            Statement::ShowDatabases { .. } | Statement::ShowSchemas { .. } => {
                let mut dbs = vec!["information_schema".to_string()];
                dbs.extend(self.schema(session).databases());
                Reply::text(
                    &["Database"],
                    dbs.into_iter().map(|d| vec![Some(d)]).collect(),
                )
            }
            Statement::ShowTables {
                full, show_options, ..
            } => {
                let db = show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.as_ref())
                    .and_then(|n| name_parts(n).pop())
                    .or_else(|| session.database.clone());
                let Some(db) = db else {
                    return Reply::err(ER_NO_DB_ERROR, "No database selected");
                };
                let Some(tables) = self.schema(session).tables(&db) else {
                    return Reply::err(ER_BAD_DB_ERROR, format!("Unknown database '{db}'"));
                };
                let label = format!("Tables_in_{db}");
                if *full {
                    let rows = tables
                        .into_iter()
                        .map(|t| vec![Some(t), Some("BASE TABLE".into())])
                        .collect();
                    Reply::text(&[&label, "Table_type"], rows)
                } else {
                    Reply::text(
                        &[&label],
                        tables.into_iter().map(|t| vec![Some(t)]).collect(),
                    )
                }
            }
            Statement::ShowCreate { obj_type, obj_name } => {
                if *obj_type != ShowCreateObject::Table {
                    return unsupported("SHOW CREATE other than TABLE");
                }
                let Some((db, table)) = self.qualify(session, &name_parts(obj_name)) else {
                    return Reply::err(ER_NO_DB_ERROR, "No database selected");
                };
                match self.schema(session).create_table(&db, &table) {
                    Some(ddl) => Reply::text(
                        &["Table", "Create Table"],
                        vec![vec![Some(table), Some(ddl)]],
                    ),
                    None => no_such_table(&db, &table),
                }
            }
            Statement::ShowColumns { full, .. } => self.show_columns(session, *full, words),
            Statement::Kill { id, .. } => match u32::try_from(*id) {
                Ok(id) if self.shared.kill(id) => Reply::ok(),
                _ => Reply::err(ER_NO_SUCH_THREAD, format!("Unknown thread id: {id}")),
            },
            Statement::Use(_) => {
                // The name is the token after USE (quotes removed).
                match words.get(1) {
                    Some(db) => {
                        session.database = Some(db.to_string());
                        Reply::ok()
                    }
                    None => Reply::err(ER_NO_DB_ERROR, "No database selected"),
                }
            }
            Statement::Flush { read_lock, .. } => {
                if *read_lock {
                    self.lock_reads(session);
                }
                Reply::ok()
            }
            Statement::LockTables { .. } => {
                self.lock_reads(session);
                Reply::ok()
            }
            Statement::UnlockTables => {
                session.read_lock = None;
                Reply::ok()
            }
            Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Rollback { .. } => Reply::ok(),
            Statement::Insert(_)
            | Statement::Update(_)
            | Statement::Delete(_)
            | Statement::Merge(_)
            | Statement::Truncate(_)
            | Statement::CreateTable(_)
            | Statement::CreateView(_)
            | Statement::CreateIndex(_)
            | Statement::CreateDatabase { .. }
            | Statement::CreateSchema { .. }
            | Statement::CreateFunction(_)
            | Statement::CreateProcedure { .. }
            | Statement::CreateTrigger(_)
            | Statement::CreateUser(_)
            | Statement::AlterUser(_)
            | Statement::AlterTable(_)
            | Statement::AlterView(_)
            | Statement::Drop { .. }
            | Statement::DropFunction(_)
            | Statement::DropProcedure { .. }
            | Statement::DropTrigger(_)
            | Statement::RenameTable(_)
            | Statement::Grant(_)
            | Statement::Revoke(_)
            | Statement::LoadData { .. }
            | Statement::Load { .. } => Reply::err(ER_OPTION_PREVENTS_STATEMENT, MSG_READ_ONLY),
            _ => unsupported("this statement"),
        }
    }

    /// `SHOW <words>` forms sqlparser leaves generic.
    fn show_words(&self, session: &Session, words: &[&str]) -> Reply {
        match words {
            ["MASTER", "STATUS"] | ["BINARY", "LOG", "STATUS"] | ["BINLOG", "STATUS"] => {
                let (end, gtids) = match &session.read_lock {
                    Some(l) => (l.end.clone(), l.gtid_executed.to_string()),
                    None => {
                        let (end, gtids) = self.shared.source.status();
                        (end, gtids.to_string())
                    }
                };
                Reply::Rows {
                    columns: vec![
                        ColumnSpec::text("File"),
                        ColumnSpec::unsigned("Position"),
                        ColumnSpec::text("Binlog_Do_DB"),
                        ColumnSpec::text("Binlog_Ignore_DB"),
                        ColumnSpec::text("Executed_Gtid_Set"),
                    ],
                    rows: vec![vec![
                        Some(end.file),
                        Some(end.pos.to_string()),
                        Some(String::new()),
                        Some(String::new()),
                        Some(gtids),
                    ]],
                }
            }
            ["BINARY", "LOGS"] | ["MASTER", "LOGS"] => Reply::Rows {
                columns: vec![
                    ColumnSpec::text("Log_name"),
                    ColumnSpec::unsigned("File_size"),
                    ColumnSpec::text("Encrypted"),
                ],
                rows: self
                    .shared
                    .source
                    .files()
                    .into_iter()
                    .map(|f| vec![Some(f.name), Some(f.size.to_string()), Some("No".into())])
                    .collect(),
            },
            ["SLAVE", "HOSTS"] | ["REPLICAS"] => {
                let old = words == ["SLAVE", "HOSTS"];
                let names: [&str; 5] = if old {
                    ["Server_id", "Host", "Port", "Master_id", "Slave_UUID"]
                } else {
                    ["Server_Id", "Host", "Port", "Source_Id", "Replica_UUID"]
                };
                let rows = self
                    .shared
                    .replicas()
                    .into_iter()
                    .map(|r| {
                        vec![
                            Some(r.info.server_id.to_string()),
                            Some(r.info.host),
                            Some(r.info.port.to_string()),
                            Some(self.shared.identity.server_id.to_string()),
                            Some(r.uuid),
                        ]
                    })
                    .collect();
                Reply::Rows {
                    columns: vec![
                        ColumnSpec::unsigned(names[0]),
                        ColumnSpec::text(names[1]),
                        ColumnSpec::unsigned(names[2]),
                        ColumnSpec::unsigned(names[3]),
                        ColumnSpec::text(names[4]),
                    ],
                    rows,
                }
            }
            ["GRANTS"]
            | ["GRANTS", "FOR", "CURRENT_USER"]
            | ["GRANTS", "FOR", "CURRENT_USER", ..] => {
                let u = &self.info.user;
                Reply::text(
                    &[&format!("Grants for {u}@%")],
                    vec![vec![Some(format!(
                        "GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, \
                         REPLICATION CLIENT ON *.* TO `{u}`@`%`"
                    ))]],
                )
            }
            ["WARNINGS"] | ["ERRORS"] => Reply::Rows {
                columns: vec![
                    ColumnSpec::text("Level"),
                    ColumnSpec::unsigned("Code"),
                    ColumnSpec::text("Message"),
                ],
                rows: Vec::new(),
            },
            _ => {
                let _ = session;
                unsupported(&format!("SHOW {}", words.join(" ")))
            }
        }
    }

    fn qualify(&self, session: &Session, parts: &[String]) -> Option<(String, String)> {
        match parts {
            [db, t] => Some((db.clone(), t.clone())),
            [t] => session.database.clone().map(|db| (db, t.clone())),
            _ => None,
        }
    }

    /// `SHOW [FULL] COLUMNS {FROM|IN} t [{FROM|IN} db]`, read from tokens.
    fn show_columns(&self, session: &Session, full: bool, w: &Words) -> Reply {
        let froms: Vec<usize> = (0..w.len())
            .filter(|&i| w.is_kw(i, "FROM") || w.is_kw(i, "IN"))
            .collect();
        let table = froms.first().and_then(|&i| w.get(i + 1));
        let db = froms.get(1).and_then(|&i| w.get(i + 1));
        let Some(table) = table else {
            return unsupported("SHOW COLUMNS without a table");
        };
        let mut parts: Vec<String> = table.split('.').map(str::to_string).collect();
        if let Some(db) = db {
            parts = vec![db.to_string(), parts.pop().unwrap_or_default()];
        }
        let Some((db, table)) = self.qualify(session, &parts) else {
            return Reply::err(ER_NO_DB_ERROR, "No database selected");
        };
        let Some(cols) = self.schema(session).columns(&db, &table) else {
            return no_such_table(&db, &table);
        };
        let rows = cols
            .into_iter()
            .map(|c| {
                let null = Some(if c.nullable { "YES" } else { "NO" }.to_string());
                if full {
                    vec![
                        Some(c.field),
                        Some(c.column_type),
                        c.collation,
                        null,
                        Some(c.key),
                        c.default,
                        Some(c.extra),
                        Some("select".into()),
                        Some(c.comment),
                    ]
                } else {
                    vec![
                        Some(c.field),
                        Some(c.column_type),
                        null,
                        Some(c.key),
                        c.default,
                        Some(c.extra),
                    ]
                }
            })
            .collect();
        if full {
            Reply::text(
                &[
                    "Field",
                    "Type",
                    "Collation",
                    "Null",
                    "Key",
                    "Default",
                    "Extra",
                    "Privileges",
                    "Comment",
                ],
                rows,
            )
        } else {
            Reply::text(&["Field", "Type", "Null", "Key", "Default", "Extra"], rows)
        }
    }

    fn purge(&self, w: &Words) -> Reply {
        let ok_prefix = w.starts_with(&["PURGE", "BINARY", "LOGS"])
            || w.starts_with(&["PURGE", "MASTER", "LOGS"]);
        if !ok_prefix || w.len() != 5 {
            return parse_error_near(w.raw(), w.offset(1));
        }
        let arg = w.get(4).unwrap_or_default();
        let res = if w.is_kw(3, "TO") {
            self.shared.source.purge_to(arg)
        } else if w.is_kw(3, "BEFORE") {
            match parse_datetime(arg) {
                Some(t) => self.shared.source.purge_before(t),
                None => {
                    return Reply::err(
                        ER_WRONG_VALUE_FOR_VAR,
                        format!("Incorrect datetime value: '{arg}'"),
                    )
                }
            }
        } else {
            return parse_error_near(w.raw(), w.offset(3));
        };
        match res {
            Ok(()) => Reply::ok(),
            Err(SourceError::UnknownFile { .. }) => Reply::err(
                ER_UNKNOWN_TARGET_BINLOG,
                "Target log not found in binlog index",
            ),
            Err(e) => Reply::err(ER_UNKNOWN_ERROR, e.to_string()),
        }
    }

    fn select(&self, session: &Session, q: &sqlparser::ast::Query) -> Reply {
        let SetExpr::Select(sel) = q.body.as_ref() else {
            return unsupported("this query form");
        };
        if let Some(reply) = self.select_schemata(session, sel) {
            return reply;
        }
        if !sel.from.is_empty() || sel.selection.is_some() {
            return unsupported("SELECT from tables");
        }
        let mut columns = Vec::with_capacity(sel.projection.len());
        let mut row = Vec::with_capacity(sel.projection.len());
        for item in &sel.projection {
            let (expr, label) = match item {
                SelectItem::UnnamedExpr(e) => (e, e.to_string()),
                SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
                _ => return unsupported("SELECT *"),
            };
            let v = match self.eval(session, expr) {
                Ok(v) => v,
                Err(r) => return r,
            };
            let numeric = v
                .as_deref()
                .is_some_and(|s| !s.is_empty() && s.parse::<i64>().is_ok());
            columns.push(if numeric {
                ColumnSpec::signed(label)
            } else {
                ColumnSpec::text(label)
            });
            row.push(v);
        }
        Reply::Rows {
            columns,
            rows: vec![row],
        }
    }

    /// `SELECT <columns> FROM information_schema.schemata` (Debezium's snapshot reads the
    /// default character set and collation of every database this way; an error is fatal for
    /// it). Columns are named or aliased identifiers; no WHERE. `None` for any other query.
    fn select_schemata(&self, session: &Session, sel: &sqlparser::ast::Select) -> Option<Reply> {
        let [from] = sel.from.as_slice() else {
            return None;
        };
        let sqlparser::ast::TableFactor::Table { name, .. } = &from.relation else {
            return None;
        };
        let parts = name_parts(name);
        let is_schemata = parts.len() == 2
            && parts[0].eq_ignore_ascii_case("information_schema")
            && parts[1].eq_ignore_ascii_case("schemata");
        if !is_schemata {
            return None;
        }
        if !from.joins.is_empty() || sel.selection.is_some() {
            return Some(unsupported("joins or WHERE on information_schema.schemata"));
        }
        let charset = self.globals.get("character_set_database").cloned();
        let collation = self.globals.get("collation_database").cloned();
        let mut dbs = vec!["information_schema".to_string()];
        dbs.extend(self.schema(session).databases());
        // Per projected column: its label and how a database's value is made.
        let mut columns = Vec::with_capacity(sel.projection.len());
        let mut getters: Vec<SchemataColumn> = Vec::new();
        for item in &sel.projection {
            let (expr, alias) = match item {
                SelectItem::UnnamedExpr(e) => (e, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
                _ => return Some(unsupported("SELECT * from information_schema.schemata")),
            };
            let column = match expr {
                Expr::Identifier(id) => id.value.clone(),
                Expr::CompoundIdentifier(ids) => ids.last().map(|i| i.value.clone())?,
                _ => return Some(unsupported(&format!("the expression {expr}"))),
            };
            let getter: SchemataColumn = match column.to_ascii_lowercase().as_str() {
                "catalog_name" => Box::new(|_| Some("def".to_owned())),
                "schema_name" => Box::new(|db| Some(db.to_owned())),
                "default_character_set_name" => {
                    let c = charset.clone();
                    Box::new(move |_| c.clone())
                }
                "default_collation_name" => {
                    let c = collation.clone();
                    Box::new(move |_| c.clone())
                }
                "sql_path" => Box::new(|_| None),
                "default_encryption" => Box::new(|_| Some("NO".to_owned())),
                _ => {
                    return Some(Reply::err(
                        tibinlog_protocol::wire::errors::ER_BAD_FIELD_ERROR,
                        format!("Unknown column '{column}' in 'field list'"),
                    ))
                }
            };
            columns.push(ColumnSpec::text(
                alias.unwrap_or_else(|| column.to_uppercase()),
            ));
            getters.push(getter);
        }
        let rows = dbs
            .iter()
            .map(|db| getters.iter().map(|g| g(db)).collect())
            .collect();
        Some(Reply::Rows { columns, rows })
    }

    /// Evaluates the expressions clients SELECT or SET.
    fn eval(&self, session: &Session, e: &Expr) -> Result<SqlValue, Reply> {
        match e {
            Expr::Identifier(id) => self.variable(session, &[id.value.as_str()]),
            Expr::CompoundIdentifier(ids) => {
                let parts: Vec<&str> = ids.iter().map(|i| i.value.as_str()).collect();
                self.variable(session, &parts)
            }
            Expr::Value(v) => Ok(literal(&v.value)),
            Expr::Nested(inner) => self.eval(session, inner),
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => match self.eval(session, expr)? {
                Some(s) => Ok(Some(format!("-{s}"))),
                None => Ok(None),
            },
            Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_uppercase();
                let args = match &f.args {
                    FunctionArguments::List(l) => l
                        .args
                        .iter()
                        .map(|a| match a {
                            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => self.eval(session, e),
                            _ => Err(unsupported("this function argument")),
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    FunctionArguments::None => Vec::new(),
                    FunctionArguments::Subquery(_) => return Err(unsupported("subqueries")),
                };
                self.function(session, &name, &args)
            }
            _ => Err(unsupported(&format!("the expression {e}"))),
        }
    }

    fn variable(&self, session: &Session, parts: &[&str]) -> Result<SqlValue, Reply> {
        let (scope, name) = match parts {
            [one] => {
                if let Some(n) = one.strip_prefix("@@") {
                    (Some(Scope::Session), n)
                } else if let Some(n) = one.strip_prefix('@') {
                    return Ok(session.user_var(n.trim_matches(['`', '\'', '"'])));
                } else {
                    return Err(Reply::err(
                        tibinlog_protocol::wire::errors::ER_BAD_FIELD_ERROR,
                        format!("Unknown column '{one}' in 'field list'"),
                    ));
                }
            }
            [scope, name] => match scope.to_ascii_lowercase().as_str() {
                "@@session" | "@@local" => (Some(Scope::Session), *name),
                "@@global" => (Some(Scope::Global), *name),
                _ => (None, *name),
            },
            _ => (None, ""),
        };
        let Some(scope) = scope else {
            return Err(unsupported("qualified column references"));
        };
        session
            .system_var(&self.globals, name, scope)
            .ok_or_else(|| unknown_variable(name))
    }

    /// MariaDB's `BINLOG_GTID_POS(file, pos)`: the GTID position (`0-<server_id>-<gno>`, empty
    /// before the first transaction) of a replica that has read up to `file:pos`, found by
    /// reading the file from its start as MariaDB does. NULL when the file is unknown or `pos`
    /// is not an event boundary of it.
    fn binlog_gtid_pos(&self, file: &str, pos: u64) -> Option<String> {
        let source = self.shared.source.as_ref();
        let file = if file.is_empty() {
            source.files().into_iter().next()?.name
        } else {
            file.to_owned()
        };
        let pos = pos.max(4);
        let sid = Sid::parse(&self.shared.identity.server_uuid).unwrap_or(Sid::ZERO);
        let mut reader = source.open(&file, 4).ok()?;
        let mut last = 0u64;
        let mut at = 4u64;
        while at < pos {
            let ev = reader.next_event().ok()??;
            at += ev.len() as u64;
            match ev.get(4).map(|t| EventType(*t)) {
                Some(EventType::PREVIOUS_GTIDS) => {
                    let crc = if source.checksum_alg() == ChecksumAlg::Crc32 {
                        4
                    } else {
                        0
                    };
                    let body = ev.get(HEADER_LEN..ev.len().saturating_sub(crc))?;
                    last = super::dump::last_gno(&GtidSet::decode(body).ok()?, &sid);
                }
                Some(EventType::GTID) => {
                    let gno = ev.get(HEADER_LEN + 17..HEADER_LEN + 25)?;
                    let sid_bytes = ev.get(HEADER_LEN + 1..HEADER_LEN + 17)?;
                    if sid_bytes == sid.0 {
                        last = u64::from_le_bytes(gno.try_into().ok()?);
                    }
                }
                _ => {}
            }
        }
        if at != pos {
            return None;
        }
        Some(match last {
            0 => String::new(),
            n => format!("0-{}-{n}", self.shared.identity.server_id),
        })
    }

    fn function(
        &self,
        session: &Session,
        name: &str,
        args: &[SqlValue],
    ) -> Result<SqlValue, Reply> {
        let arg = |i: usize| args.get(i).cloned().flatten().unwrap_or_default();
        Ok(match name {
            "VERSION" if self.info.mariadb_client && !self.shared.identity.mariadb => {
                Some(mariadb_tool_version())
            }
            "VERSION" => Some(self.shared.identity.version.clone()),
            "UNIX_TIMESTAMP" => Some(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
                    .to_string(),
            ),
            "DATABASE" | "SCHEMA" => session.database.clone(),
            "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => {
                Some(format!("{}@{}", self.info.user, self.info.host))
            }
            "CONNECTION_ID" => Some(self.info.id.to_string()),
            "UUID" => Some(pseudo_uuid(self.info.id)),
            "BINLOG_GTID_POS" => {
                let pos = arg(1).trim().parse::<u64>().ok();
                pos.and_then(|p| self.binlog_gtid_pos(&arg(0), p))
            }
            "GTID_SUBTRACT" => {
                let (Ok(a), Ok(b)) = (GtidSet::parse(&arg(0)), GtidSet::parse(&arg(1))) else {
                    return Err(Reply::err(
                        ER_UNKNOWN_ERROR,
                        "Malformed GTID set specification",
                    ));
                };
                Some(a.subtract(&b).to_string())
            }
            "GTID_SUBSET" => {
                let (Ok(a), Ok(b)) = (GtidSet::parse(&arg(0)), GtidSet::parse(&arg(1))) else {
                    return Err(Reply::err(
                        ER_UNKNOWN_ERROR,
                        "Malformed GTID set specification",
                    ));
                };
                Some(u8::from(a.is_subset_of(&b)).to_string())
            }
            _ => {
                return Err(Reply::err(
                    tibinlog_protocol::wire::errors::ER_SP_DOES_NOT_EXIST,
                    format!("FUNCTION {name} does not exist"),
                ))
            }
        })
    }

    fn set(&self, session: &mut Session, set: &Set) -> Reply {
        let assignments: Vec<(Option<ContextModifier>, Vec<String>, &Expr)> = match set {
            Set::SingleAssignment {
                scope,
                variable,
                values,
                ..
            } => match values.as_slice() {
                [v] => vec![(*scope, name_parts(variable), v)],
                _ => return unsupported("SET with several values"),
            },
            Set::MultipleAssignments { assignments } => assignments
                .iter()
                .map(|a| (a.scope, name_parts(&a.name), &a.value))
                .collect(),
            Set::SetNames { .. } | Set::SetNamesDefault {} | Set::SetTransaction { .. } => {
                return Reply::ok()
            }
            _ => return unsupported("this SET form"),
        };
        // Evaluate every right-hand side first, as MySQL does, then assign.
        let mut values = Vec::with_capacity(assignments.len());
        for (_, _, e) in &assignments {
            match self.eval_set_value(session, e) {
                Ok(v) => values.push(v),
                Err(r) => return r,
            }
        }
        for ((scope, parts, _), value) in assignments.into_iter().zip(values) {
            let global = scope == Some(ContextModifier::Global);
            let (name, global) = match parts.as_slice() {
                [one] if one.starts_with("@@") => (one[2..].to_string(), global),
                [one] if one.starts_with('@') => {
                    session.user_vars.insert(
                        one[1..].trim_matches(['`', '\'', '"']).to_ascii_lowercase(),
                        value,
                    );
                    continue;
                }
                [one] => (one.clone(), global),
                [scope, name] => {
                    let s = scope.to_ascii_lowercase();
                    (name.clone(), global || s == "@@global")
                }
                _ => return unsupported("this SET target"),
            };
            let name = name.to_ascii_lowercase();
            if !self.globals.contains_key(&name) && !SESSION_ONLY_VARS.contains(&name.as_str()) {
                return unknown_variable(&name);
            }
            if global {
                return Reply::err(
                    ER_SPECIFIC_ACCESS_DENIED_ERROR,
                    "Access denied; you need (at least one of) the SUPER or \
                     SYSTEM_VARIABLES_ADMIN privilege(s) for this operation",
                );
            }
            session.overrides.insert(name, value);
        }
        Reply::ok()
    }

    /// A SET right-hand side: like [`Self::eval`], but a bare word (`SET x = ON`) is a string.
    fn eval_set_value(&self, session: &Session, e: &Expr) -> Result<SqlValue, Reply> {
        match e {
            Expr::Identifier(id) if !id.value.starts_with('@') => Ok(Some(id.value.clone())),
            _ => self.eval(session, e),
        }
    }
}

/// How one column of `information_schema.schemata` is made from a database name.
type SchemataColumn = Box<dyn Fn(&str) -> SqlValue>;

/// Session variables clients set that have no global twin in our table.
const SESSION_ONLY_VARS: &[&str] = &[
    "names",
    "skip_replication",
    "sql_log_bin",
    "foreign_key_checks",
    "unique_checks",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
    "session_track_transaction_info",
    "sql_safe_updates",
    "sql_quote_show_create",
    "sql_auto_is_null",
    "group_concat_max_len",
    "transaction_read_only",
];

/// What `SELECT VERSION()` answers to MariaDB's client library.
///
/// MariaDB's `mariadb-binlog` accepts only a major version 5, 10 or 11 there ("Master reported
/// unrecognized MariaDB version" otherwise). A 5.7 version keeps it on its position-based
/// path, which reads our MySQL-flavoured stream. (A MariaDB replica takes the master's version
/// from the greeting, not from here, and uses GTIDs only when `MASTER_USE_GTID` asks for them.)
fn mariadb_tool_version() -> String {
    format!("5.7.99-tibinlog-{}", env!("CARGO_PKG_VERSION"))
}

fn unsupported(what: &str) -> Reply {
    Reply::err(
        ER_UNKNOWN_ERROR,
        format!("tibinlog does not support {what}"),
    )
}

fn unknown_variable(name: &str) -> Reply {
    Reply::err(
        ER_UNKNOWN_SYSTEM_VARIABLE,
        format!("Unknown system variable '{name}'"),
    )
}

fn no_such_table(db: &str, table: &str) -> Reply {
    Reply::err(
        ER_NO_SUCH_TABLE,
        format!("Table '{db}.{table}' doesn't exist"),
    )
}

pub(super) fn parse_error_near(sql: &str, offset: usize) -> Reply {
    let near: String = sql.get(offset..).unwrap_or("").chars().take(80).collect();
    Reply::err(
        ER_PARSE_ERROR,
        format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your \
             MySQL server version for the right syntax to use near '{near}' at line 1"
        ),
    )
}

fn name_parts(n: &ObjectName) -> Vec<String> {
    n.0.iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.clone())
        .collect()
}

fn literal(v: &Value) -> SqlValue {
    match v {
        Value::Null => None,
        Value::Number(n, _) => Some(n.to_string()),
        Value::Boolean(b) => Some(u8::from(*b).to_string()),
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `SHOW VARIABLES` / `SHOW STATUS` rows filtered by LIKE or a simple WHERE.
fn name_value_rows(vars: BTreeMap<String, String>, filter: Option<&ShowStatementFilter>) -> Reply {
    let like = match filter {
        Some(
            ShowStatementFilter::Like(p)
            | ShowStatementFilter::ILike(p)
            | ShowStatementFilter::NoKeyword(p),
        ) => match name_pattern(p) {
            Ok(like) => Some(like),
            Err(reply) => return reply,
        },
        _ => None,
    };
    let mut rows = Vec::new();
    for (k, v) in vars {
        let keep = match (filter, &like) {
            (_, Some(like)) => like.matches(&k),
            (Some(ShowStatementFilter::Where(e)), None) => match where_matches(e, &k, &v) {
                Ok(b) => b,
                Err(reply) => return reply,
            },
            _ => true,
        };
        if keep {
            rows.push(vec![Some(k), Some(v)]);
        }
    }
    Reply::text(&["Variable_name", "Value"], rows)
}

/// A LIKE pattern over a name column (`Variable_name`: a case-insensitive collation).
fn name_pattern(pattern: &str) -> Result<LikePattern, Reply> {
    LikePattern::compile(pattern, Some('\\'), CaseRule::Insensitive).map_err(|e| {
        Reply::err(
            ER_WRONG_ARGUMENTS,
            format!("Incorrect arguments to LIKE: {e}"),
        )
    })
}

/// Evaluates a WHERE over the two columns `Variable_name` and `Value`; the reply to send
/// instead if the expression uses anything else. The expression tree is walked with an explicit
/// stack: a client's `a=1 OR a=1 OR …` nests as deep as it is long.
fn where_matches(e: &Expr, name: &str, value: &str) -> Result<bool, Reply> {
    let column = |e: &Expr| -> Result<String, Reply> {
        match e {
            Expr::Identifier(i) => match i.value.to_ascii_lowercase().as_str() {
                "variable_name" => Ok(name.to_string()),
                "value" => Ok(value.to_string()),
                _ => Err(unsupported("this WHERE clause")),
            },
            Expr::Value(v) => {
                literal(&v.value).ok_or_else(|| unsupported("NULL in this WHERE clause"))
            }
            _ => Err(unsupported("this WHERE clause")),
        }
    };
    // Post-order evaluation: `Visit` expands a node, `And`/`Or` combine the two results on top.
    enum Step<'a> {
        Visit(&'a Expr),
        And,
        Or,
    }
    let mut work = vec![Step::Visit(e)];
    let mut results: Vec<bool> = Vec::new();
    while let Some(step) = work.pop() {
        let e = match step {
            Step::And | Step::Or => {
                let (Some(r), Some(l)) = (results.pop(), results.pop()) else {
                    return Err(unsupported("this WHERE clause"));
                };
                results.push(if matches!(step, Step::And) {
                    l && r
                } else {
                    l || r
                });
                continue;
            }
            Step::Visit(e) => e,
        };
        let b = match e {
            Expr::Nested(inner) => {
                work.push(Step::Visit(inner));
                continue;
            }
            Expr::BinaryOp { left, op, right } => match op {
                BinaryOperator::And | BinaryOperator::Or => {
                    work.push(if *op == BinaryOperator::And {
                        Step::And
                    } else {
                        Step::Or
                    });
                    work.push(Step::Visit(right));
                    work.push(Step::Visit(left));
                    continue;
                }
                BinaryOperator::Eq => column(left)?.eq_ignore_ascii_case(&column(right)?),
                BinaryOperator::NotEq => !column(left)?.eq_ignore_ascii_case(&column(right)?),
                _ => return Err(unsupported("this WHERE clause")),
            },
            Expr::In {
                expr,
                target: InTarget::List(list),
                negated,
                ..
            } => {
                let l = column(expr)?;
                let mut found = false;
                for item in list {
                    found |= column(item)?.eq_ignore_ascii_case(&l);
                }
                found != *negated
            }
            Expr::Like {
                negated,
                expr,
                pattern,
                ..
            } => name_pattern(&column(pattern)?)?.matches(&column(expr)?) != *negated,
            _ => return Err(unsupported("this WHERE clause")),
        };
        results.push(b);
    }
    results
        .pop()
        .ok_or_else(|| unsupported("this WHERE clause"))
}

/// `YYYY-MM-DD[ HH:MM:SS]` (UTC) → seconds since the epoch.
fn parse_datetime(s: &str) -> Option<u64> {
    let (date, time) = s.trim().split_once(' ').unwrap_or((s.trim(), "00:00:00"));
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, dd) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (
        t.next()??,
        t.next().flatten().unwrap_or(0),
        t.next().flatten().unwrap_or(0),
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&dd) {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + dd - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

/// A UUID-shaped string for `SELECT UUID()` (clients use it as an opaque unique id).
fn pseudo_uuid(conn: u32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let hi = (nanos as u64) ^ (u64::from(conn) << 32);
    let lo = (nanos >> 64) as u64 ^ u64::from(conn);
    format!(
        "{:08x}-{:04x}-1{:03x}-8{:03x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xfff,
        lo & 0xfff,
        (lo >> 12) & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_error_points_at_the_rest() {
        let sql = "SELECT FROM WHERE";
        let Err(ParseFailure::Syntax(e)) = parse(sql) else {
            panic!("should not parse");
        };
        let Reply::Err(err) = syntax_error(sql, &e) else {
            panic!("expected an error");
        };
        assert_eq!(err.error.code, 1064);
        assert!(err.message.contains("near '"), "{}", err.message);
        assert!(err.message.ends_with("at line 1"), "{}", err.message);
    }

    #[test]
    fn datetime_to_epoch() {
        assert_eq!(parse_datetime("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_datetime("2023-11-14 22:13:20"), Some(1_700_000_000));
        assert_eq!(parse_datetime("nope"), None);
    }
}

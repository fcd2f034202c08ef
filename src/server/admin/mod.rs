//! The SQL surface: what binlog clients run before streaming, executed for a session.
//!
//! Which statement a text is, and its arguments, is decided by the SQL engine
//! ([`crate::sql::statement::classify`]); this module executes the [`Stmt`]: queries and the
//! SHOW forms over information_schema are planned and run by the engine at the session's read
//! point, the binlog administration statements read the binlog source, the session and
//! transaction statements change the session.
//!
//! `FLUSH TABLES WITH READ LOCK` and `LOCK TABLES` cannot stop the cluster's commits; the session
//! instead keeps the binlog end and the catalog of the moment it locked until `UNLOCK TABLES`, which
//! is what a snapshotting client (Debezium) relies on the lock for (see [`super::session::ReadLock`]).
//!
//! Layout: this file takes a statement to its execution (parse, classify, run, the read
//! point, the privileges); `shows.rs` answers the server's SHOW forms, SHOW CREATE and PURGE,
//! `set.rs` the SET, session, transaction and KILL statements, `env.rs` what expressions read
//! from the session and the server.
//!
//! Answers follow MySQL 8.0: labels as written (or the alias), canonical lower-case variable
//! names, 1064 for what does not parse, 1290 for writes, 1193 for unknown variables, 1105 for
//! statements we do not implement. Never a silent OK for a statement we did not understand.

use std::collections::BTreeMap;

use sqlparser::ast::{ContextModifier, Expr, Set, Statement};
use tibinlog_protocol::binlog::{ChecksumAlg, EventType, GtidSet, Sid, HEADER_LEN};
use tibinlog_protocol::wire::errors::{
    ER_BAD_DB_ERROR, ER_DBACCESS_DENIED_ERROR, ER_GLOBAL_VARIABLE, ER_KILL_DENIED_ERROR,
    ER_NONEXISTING_GRANT, ER_NO_DB_ERROR, ER_NO_SUCH_TABLE, ER_NO_SUCH_THREAD,
    ER_OPTION_PREVENTS_STATEMENT, ER_PARSE_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR,
    ER_TABLEACCESS_DENIED_ERROR, ER_UNKNOWN_ERROR, ER_UNKNOWN_SYSTEM_VARIABLE,
    ER_UNKNOWN_TARGET_BINLOG, ER_WRONG_OBJECT, ER_WRONG_VALUE_FOR_VAR,
};
use tibinlog_protocol::wire::response::ColumnSpec;

use super::binlog_events::show_binlog_events;
use super::reply::{QueryReply, Reply};
use super::session::{ConnInfo, Diagnostic, Session};
use super::source::SourceError;
use super::users::{need_message, Privileges};
use super::vars::{global_variables, Scope, VarType};
use super::Shared;
use crate::sql::charset;
use crate::sql::error::SqlError;
use crate::sql::expr::{Compiler, Env, NoColumns};
use crate::sql::infoschema;
use crate::sql::parse::{parse, split_statements};
use crate::sql::perfschema::VarView;
use crate::sql::plan::{plan_query, QueryCtx};
use crate::sql::show::{self, ShowForm};
use crate::sql::statement::{self, Purge, ServerShow, Stmt};
use crate::sql::tokens::Tokens;
use crate::sql::types::SqlType;
use tibinlog_protocol::value::Value as SqlValueTyped;
use tibinlog_protocol::wire::stmt::Param;
use tracing::debug;

mod env;
mod set;
mod shows;

/// The TSO of a `@@tidb_snapshot` value: a TSO number, or a datetime (`YYYY-MM-DD
/// hh:mm:ss[.ffffff]`, UTC) whose milliseconds are the TSO's physical part.
fn snapshot_tso(text: &str) -> Option<u64> {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().filter(|&t| t > 0);
    }
    let dt = crate::tidb::time::parse_datetime(text).ok()?;
    let days = crate::sql::func::unix_days(&dt.date)?;
    let secs = days.checked_mul(86_400)?
        + i64::from(dt.hour) * 3600
        + i64::from(dt.minute) * 60
        + i64::from(dt.second);
    let ms = u64::try_from(secs).ok()?.checked_mul(1000)? + u64::from(dt.micros / 1000);
    ms.checked_mul(1 << 18)
}

/// The TSO `SET @@tidb_snapshot` pinned in `session` (kept as digits), if any.
fn pinned_tso(session: &Session) -> Option<u64> {
    session
        .overrides
        .get("tidb_snapshot")?
        .as_deref()?
        .trim()
        .parse()
        .ok()
}

/// MySQL's read-only refusal.
const MSG_READ_ONLY: &str =
    "The MySQL server is running with the --read-only option so it cannot execute this statement";

/// The global variables as `session` sees them: `@@gtid_executed` (and MariaDB's GTID
/// positions) at its read lock's point, or at the visible point.
fn session_globals(shared: &Shared, session: &Session) -> BTreeMap<String, String> {
    let executed = match &session.read_lock {
        Some(l) => l.gtid_executed.clone(),
        None => shared.source.visible_status().1,
    };
    global_variables(&shared.identity, shared.source.as_ref(), &executed)
}

/// Runs the statements of one COM_QUERY (several with CLIENT_MULTI_STATEMENTS): one reply
/// each, stopping at the first error as MySQL does.
pub fn execute(shared: &Shared, info: &ConnInfo, session: &mut Session, sql: &str) -> Vec<Reply> {
    let ctx = Ctx {
        shared,
        info,
        globals: session_globals(shared, session),
    };
    let sql = executable(shared, sql);
    let mut out = Vec::new();
    for stmt in split_statements(&sql) {
        let tokens = Tokens::new(stmt);
        // A statement clears the conditions of the one before, except the ones that read them.
        let diagnostic = statement::reads_diagnostics(&tokens);
        let r = match ctx.snapshot_refusal(session) {
            Some(refused) if !tokens.kw(0, "SET") => refused,
            _ => ctx.one(session, stmt),
        };
        shared.note_reply(info, stmt, &r);
        if !diagnostic {
            session.diagnostics = conditions(&r);
        }
        let stop = matches!(r, Reply::Err(_));
        out.push(r);
        if stop {
            break;
        }
    }
    if out.is_empty() {
        out.push(Reply::err(ER_PARSE_ERROR, "Query was empty"));
    }
    // The session's snapshot, if it pinned one, holds the upstream's GC.
    shared.registry.set_hold(info.id, ctx.pinned_ts(session));
    out
}

/// What COM_STMT_PREPARE answers: the number of `?` parameters and the result columns (as
/// the statement would give them with every parameter NULL; none when that cannot be planned).
#[derive(Debug)]
pub struct Prepared {
    pub params: usize,
    pub columns: Vec<ColumnSpec>,
}

/// The conditions a reply leaves for `SHOW WARNINGS`.
fn conditions(r: &Reply) -> Vec<Diagnostic> {
    match r {
        Reply::Ok { warnings, .. } => warnings
            .iter()
            .map(|w| Diagnostic {
                level: "Warning",
                code: w.code.code,
                message: w.message.clone(),
            })
            .collect(),
        Reply::Err(e) => vec![Diagnostic {
            level: "Error",
            code: e.error.code,
            message: e.message.clone(),
        }],
        _ => Vec::new(),
    }
}

/// Prepares `sql`: counts its parameters and plans it with NULLs for its result columns.
pub fn prepare(
    shared: &Shared,
    info: &ConnInfo,
    session: &mut Session,
    sql: &str,
) -> Result<Prepared, Reply> {
    let sql = &*executable(shared, sql);
    let marks = placeholders(sql).map_err(Reply::from)?;
    if split_statements(sql).len() > 1 {
        return Err(Reply::err(
            ER_PARSE_ERROR,
            "a prepared statement holds one statement",
        ));
    }
    // Planned with every parameter bound to 0: a number fits every place a parameter may stand
    // (LIMIT ?, comparisons, function arguments), so names are resolved and unknown tables or
    // columns fail here, as MySQL fails them at prepare.
    let zeros: Vec<Param> = vec![Param::Int(0); marks.len()];
    let bound = bind_text(sql, &marks, &zeros);
    let ctx = Ctx {
        shared,
        info,
        globals: session_globals(shared, session),
    };
    // Planning must not change the session (a prepared SET is only run at execute).
    let mut scratch = session.clone();
    let columns = match parse(&bound) {
        Ok(stmts) => match stmts.as_slice() {
            [Statement::Query(_)] => match ctx.one(&mut scratch, &bound) {
                Reply::Query(q) => q.columns,
                Reply::Rows { columns, .. } => columns,
                Reply::Err(e) => return Err(Reply::Err(e)),
                Reply::Ok { .. } => Vec::new(),
            },
            _ => Vec::new(),
        },
        Err(e) => return Err(statement::parse_failure(sql, &e).into()),
    };
    Ok(Prepared {
        params: marks.len(),
        columns,
    })
}

/// `sql` with its executable comments expanded as this server's version runs them.
fn executable<'a>(shared: &Shared, sql: &'a str) -> std::borrow::Cow<'a, str> {
    use crate::sql::parse::{expand_executable_comments, version_id};
    expand_executable_comments(
        sql,
        version_id(&shared.identity.version),
        shared.identity.mariadb,
    )
}

/// The statement text of a prepared statement with its parameters bound as literals.
pub fn bind(sql: &str, params: &[Param]) -> Result<String, Reply> {
    let marks = placeholders(sql).map_err(Reply::from)?;
    if marks.len() != params.len() {
        return Err(Reply::err(
            tibinlog_protocol::wire::errors::ER_WRONG_ARGUMENTS,
            "Incorrect arguments to mysqld_stmt_execute",
        ));
    }
    Ok(bind_text(sql, &marks, params))
}

/// Byte offsets of the `?` parameter markers of `sql`.
fn placeholders(sql: &str) -> Result<Vec<usize>, SqlError> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&sqlparser::dialect::MySqlDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| SqlError::new(ER_PARSE_ERROR, e.to_string()))?;
    let mut line_starts = vec![0usize];
    for (i, b) in sql.bytes().enumerate() {
        if b == b'\n' {
            line_starts.push(i + 1);
        }
    }
    let mut out = Vec::new();
    for t in &tokens {
        if matches!(&t.token, Token::Placeholder(p) if p == "?") {
            let loc = t.span.start;
            let line = line_starts
                .get(loc.line.saturating_sub(1) as usize)
                .copied()
                .unwrap_or(0);
            let off = sql[line..]
                .char_indices()
                .nth(loc.column.saturating_sub(1) as usize)
                .map_or(sql.len(), |(b, _)| line + b);
            out.push(off);
        }
    }
    Ok(out)
}

/// `sql` with the marker at each offset replaced by its parameter as a literal.
fn bind_text(sql: &str, marks: &[usize], params: &[Param]) -> String {
    let mut out = String::with_capacity(sql.len() + 16 * params.len());
    let mut at = 0;
    for (&m, p) in marks.iter().zip(params) {
        out.push_str(&sql[at..m]);
        out.push_str(&param_literal(p));
        at = m + 1;
    }
    out.push_str(&sql[at..]);
    out
}

/// A parameter as a SQL literal.
fn param_literal(p: &Param) -> String {
    match p {
        Param::Null => "NULL".into(),
        Param::Int(i) => i.to_string(),
        Param::UInt(u) => u.to_string(),
        Param::Float(f) => format!("{:e}", f64::from(*f)),
        Param::Double(f) => format!("{f:e}"),
        Param::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => show::quote_str(s),
            Err(_) => format!("X'{}'", hex::encode(b)),
        },
        Param::Date(d) => format!("'{:04}-{:02}-{:02}'", d.year, d.month, d.day),
        Param::DateTime(dt) => format!(
            "'{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}'",
            dt.date.year, dt.date.month, dt.date.day, dt.hour, dt.minute, dt.second, dt.micros
        ),
        Param::Time(t) => format!(
            "'{}{:02}:{:02}:{:02}.{:06}'",
            if t.negative { "-" } else { "" },
            t.hours,
            t.minutes,
            t.seconds,
            t.micros
        ),
    }
}

struct Ctx<'a> {
    shared: &'a Shared,
    info: &'a ConnInfo,
    globals: BTreeMap<String, String>,
}

/// A value computed for a SELECT item or a SET right-hand side.
type SqlValue = Option<String>;

impl Ctx<'_> {
    /// One statement.
    fn one(&self, session: &mut Session, stmt: &str) -> Reply {
        match statement::classify(stmt) {
            Ok(st) => self.run(session, st, stmt),
            Err(e) => e.into(),
        }
    }

    /// The catalog this session sees: its transaction's snapshot, the one it locked, or the
    /// current one.
    fn schema(&self, session: &Session) -> std::sync::Arc<dyn super::source::SchemaProvider> {
        if let Some(p) = self.chosen_snapshot(session) {
            return p.schema;
        }
        if let Some(snap) = session
            .transaction
            .as_ref()
            .and_then(|t| t.snapshot.as_ref())
        {
            return snap.schema.clone();
        }
        match &session.read_lock {
            Some(l) => l.schema.clone(),
            None => self.shared.schema.clone(),
        }
    }

    /// The current snapshot point: the newest durable checkpoint with its binlog position, or
    /// (before the first checkpoint) the binlog end without a timestamp.
    fn current_point(&self) -> super::session::Snapshot {
        match self.shared.source.snapshot_point() {
            Some(p) => super::session::Snapshot {
                ts: Some(p.ts),
                schema: self.shared.schema.at(&p.end),
                end: p.end,
            },
            None => {
                let end = self.shared.source.end_position();
                super::session::Snapshot {
                    ts: None,
                    schema: self.shared.schema.at(&end),
                    end,
                }
            }
        }
    }

    /// Where a read of this session reads: its transaction's snapshot (taken now if the
    /// transaction has none yet), its read lock's point, or the current point.
    fn read_point(&self, session: &mut Session) -> super::session::Snapshot {
        if let Some(p) = self.chosen_snapshot(session) {
            return p;
        }
        if session.transaction.is_none() && !autocommit(session) {
            session.transaction = Some(super::session::Transaction::default());
        }
        let locked = session
            .read_lock
            .as_ref()
            .map(|l| super::session::Snapshot {
                ts: l.ts,
                end: l.end.clone(),
                schema: l.schema.clone(),
            });
        if let Some(t) = session.transaction.as_mut() {
            if t.snapshot.is_none() {
                t.snapshot = Some(locked.clone().unwrap_or_else(|| self.current_point()));
            }
            if let Some(s) = &t.snapshot {
                return s.clone();
            }
        }
        locked.unwrap_or_else(|| self.current_point())
    }

    /// `SHOW …` forms answered from information_schema, and `SHOW CREATE DATABASE`.
    /// A SHOW/DESCRIBE form: its query over information_schema, run at the catalog's point.
    fn show(&self, session: &mut Session, form: ShowForm, text: &str) -> Reply {
        let t = Tokens::new(text);
        if !self.may_select() && form.is_table_level() {
            let at = if t.kw(1, "FULL") || t.kw(1, "EXTENDED") {
                2
            } else {
                1
            };
            let from = (at + 1..t.len()).find(|i| t.kw(*i, "FROM") || t.kw(*i, "IN"));
            let table = from.and_then(|i| t.get(i + 1)).unwrap_or_default();
            let table = table.rsplit('.').next().unwrap_or(table);
            if let Err(denied) = self.require_select("SELECT", table) {
                return denied;
            }
        }
        let point = self.read_point_for_catalog(session);
        let catalog = self.visible_catalog(&point);
        match show::query(form, &t, &catalog, session.database.as_deref()) {
            Ok(sql) => self.run_query_text(session, &sql, &point),
            Err(e) => e.into(),
        }
    }

    /// What `SET @@tidb_snapshot = value` keeps: the TSO (a TSO number, or a datetime in UTC,
    /// TiDB's two forms), which must line up with a binlog position; '' (or NULL) unpins.
    fn snapshot_setting(&self, value: Option<&str>) -> Result<Option<String>, Reply> {
        let text = value.unwrap_or("").trim();
        if text.is_empty() {
            return Ok(Some(String::new()));
        }
        let ts = snapshot_tso(text).ok_or_else(|| {
            Reply::err(
                ER_WRONG_VALUE_FOR_VAR,
                format!("Variable 'tidb_snapshot' can't be set to the value of '{text}'"),
            )
        })?;
        self.snapshot_position(ts)?;
        Ok(Some(ts.to_string()))
    }

    /// The binlog position where the history splits at `ts`; an error giving the range the
    /// binlog covers when it cannot be told (never a fallback to the current point).
    fn snapshot_position(&self, ts: u64) -> Result<super::source::BinlogPosition, Reply> {
        self.shared.source.position_for_ts(ts).map_err(|e| {
            Reply::err(
                ER_UNKNOWN_ERROR,
                format!("cannot read at snapshot ts {ts}: {e}"),
            )
        })
    }

    /// A statement of a session whose `@@tidb_snapshot` no longer lines up with the binlog
    /// (purged since it was set) is refused rather than read at another point.
    fn snapshot_refusal(&self, session: &Session) -> Option<Reply> {
        self.snapshot_position(pinned_tso(session)?).err()
    }

    /// The point `SET @@tidb_snapshot = <ts>` chose: reads at `ts`, with the catalog of the
    /// binlog position where the history splits at it.
    fn chosen_snapshot(&self, session: &Session) -> Option<super::session::Snapshot> {
        let ts = pinned_tso(session)?;
        let end = self.shared.source.position_for_ts(ts).ok()?;
        Some(super::session::Snapshot {
            ts: Some(ts),
            schema: self.shared.schema.at(&end),
            end,
        })
    }

    /// The timestamp this session's reads use now, if pinned (`@@tidb_snapshot`).
    pub(super) fn pinned_ts(&self, session: &Session) -> Option<u64> {
        if let Some(p) = self.chosen_snapshot(session) {
            return p.ts;
        }
        if let Some(s) = session
            .transaction
            .as_ref()
            .and_then(|t| t.snapshot.as_ref())
        {
            return s.ts;
        }
        session.read_lock.as_ref().and_then(|l| l.ts)
    }

    /// The point catalog answers use (no transaction is started for them).
    fn read_point_for_catalog(&self, session: &Session) -> super::session::Snapshot {
        if let Some(p) = self.chosen_snapshot(session) {
            return p;
        }
        if let Some(s) = session
            .transaction
            .as_ref()
            .and_then(|t| t.snapshot.clone())
        {
            return s;
        }
        match &session.read_lock {
            Some(l) => super::session::Snapshot {
                ts: l.ts,
                end: l.end.clone(),
                schema: l.schema.clone(),
            },
            None => super::session::Snapshot {
                ts: None,
                end: self.shared.source.end_position(),
                schema: self.shared.schema.clone(),
            },
        }
    }

    /// Plans and answers a query given as text (a rewritten SHOW).
    fn run_query_text(
        &self,
        session: &Session,
        sql: &str,
        point: &super::session::Snapshot,
    ) -> Reply {
        // The client's WHERE text is in it: its errors are the client's, as for any statement.
        let stmts = match parse(sql) {
            Ok(s) => s,
            Err(e) => return statement::parse_failure(sql, &e).into(),
        };
        match stmts.as_slice() {
            [Statement::Query(q)] => self.plan(session, q, sql, point),
            _ => unsupported("the rewritten statement"),
        }
    }

    /// Plans a query read at `point`.
    fn plan(
        &self,
        session: &Session,
        q: &sqlparser::ast::Query,
        sql: &str,
        point: &super::session::Snapshot,
    ) -> Reply {
        let catalog = self.visible_catalog(point);
        let env = self.env(session);
        let mut facts = self.shared.server_facts();
        if !self.info.privileges.contains(Privileges::PROCESS) {
            facts.processlist.retain(|p| p.user == self.info.user);
        }
        let who = self.who();
        let qctx = QueryCtx {
            select_denied_to: (!self.may_select()).then_some(who.as_str()),
            catalog: &catalog,
            env: &env,
            database: session.database.as_deref(),
            snapshot: self.shared.snapshot.as_deref(),
            read_ts: point.ts,
            info: &facts,
            sql,
            cancel: self.info.cancel.clone(),
        };
        match plan_query(&qctx, q) {
            Ok(planned) => {
                let columns = planned
                    .columns
                    .iter()
                    .map(|c| {
                        let mut spec = c.ty.column_spec(&c.name);
                        if let Some((db, alias, table, org)) = &c.origin {
                            spec.schema.clone_from(db);
                            spec.table.clone_from(alias);
                            spec.org_table.clone_from(table);
                            spec.org_name.clone_from(org);
                        }
                        if self.shared.identity.mariadb || self.info.mariadb_client {
                            spec.charset = mariadb_collation(spec.charset);
                        }
                        spec
                    })
                    .collect();
                let types = planned.columns.into_iter().map(|c| c.ty).collect();
                Reply::Query(QueryReply {
                    columns,
                    types,
                    op: planned.op,
                })
            }
            Err(e) => e.into(),
        }
    }

    /// The catalog this session may see: none of it without the SELECT privilege (MySQL shows
    /// only the databases and tables a user has privileges on).
    fn visible_catalog(
        &self,
        point: &super::session::Snapshot,
    ) -> std::sync::Arc<crate::sql::catalog::CatalogSnapshot> {
        if self.may_select() {
            point.schema.catalog()
        } else {
            std::sync::Arc::default()
        }
    }

    fn may_select(&self) -> bool {
        self.info.privileges.contains(Privileges::SELECT)
    }

    /// `'user'@'host'` as access-denied messages name the session.
    fn who(&self) -> String {
        format!("'{}'@'{}'", self.info.user, self.info.host)
    }

    /// 1227 unless the session holds one of `any` (`names` as MySQL lists them).
    fn require(&self, any: Privileges, names: &str) -> Result<(), Reply> {
        if self.info.privileges.any(any) {
            Ok(())
        } else {
            Err(Reply::err(
                ER_SPECIFIC_ACCESS_DENIED_ERROR,
                need_message(names),
            ))
        }
    }

    /// 1142 for `command` on `table` without the SELECT privilege.
    fn require_select(&self, command: &str, table: &str) -> Result<(), Reply> {
        if self.may_select() {
            Ok(())
        } else {
            Err(Reply::err(
                ER_TABLEACCESS_DENIED_ERROR,
                format!(
                    "{command} command denied to user {} for table '{table}'",
                    self.who()
                ),
            ))
        }
    }

    /// Takes the session's read lock: keeps the binlog end and the catalog of that end (a
    /// second lock statement keeps the first one, as MySQL's lock stays in place).
    fn lock_reads(&self, session: &mut Session) {
        if session.read_lock.is_some() {
            return;
        }
        let (end, gtid_executed, ts) = match self.shared.source.snapshot_point() {
            Some(p) => (p.end, p.gtid_executed, Some(p.ts)),
            None => {
                let (end, gtids) = self.shared.source.status();
                (end, gtids, None)
            }
        };
        let schema = self.shared.schema.at(&end);
        session.read_lock = Some(super::session::ReadLock {
            end,
            gtid_executed,
            schema,
            ts,
        });
    }

    /// Executes one classified statement.
    fn run(&self, session: &mut Session, st: Stmt, text: &str) -> Reply {
        match st {
            Stmt::Query(q) => {
                let point = self.read_point(session);
                self.plan(session, &q, text, &point)
            }
            Stmt::Show(form) => self.show(session, form, text),
            Stmt::ShowCreateDatabase {
                name,
                if_not_exists,
            } => self.show_create_database(session, &name, if_not_exists),
            Stmt::ShowCreate { view, name } => self.show_create(session, view, &name),
            Stmt::Server(what) => self.server_show(session, what),
            Stmt::ShowGrants { user } => self.show_grants(user),
            Stmt::BinlogEvents(args) => {
                if let Err(denied) =
                    self.require(Privileges::REPLICATION_SLAVE, "REPLICATION SLAVE")
                {
                    return denied;
                }
                show_binlog_events(self.shared.source.as_ref(), &args)
            }
            Stmt::Purge(to) => {
                if let Err(denied) = self.require(
                    Privileges::SUPER | Privileges::BINLOG_ADMIN,
                    "SUPER or BINLOG_ADMIN",
                ) {
                    return denied;
                }
                self.purge(to)
            }
            Stmt::Set(set) => self.set(session, &set),
            Stmt::Kill { id, query } => self.kill(id, query),
            Stmt::Use(db) => {
                let i = self.info;
                if let Some(msg) =
                    super::users::db_access_denied(i.privileges, &i.user, &i.host, &db)
                {
                    return Reply::err(ER_DBACCESS_DENIED_ERROR, msg);
                }
                session.database = Some(db);
                Reply::ok()
            }
            Stmt::Write => Reply::err(ER_OPTION_PREVENTS_STATEMENT, MSG_READ_ONLY),
            Stmt::Unsupported(what) => unsupported(&what),
            other => self.session_statement(session, other),
        }
    }

    fn qualify(&self, session: &Session, parts: &[String]) -> Option<(String, String)> {
        match parts {
            [db, t] => Some((db.clone(), t.clone())),
            [t] => session.database.clone().map(|db| (db, t.clone())),
            _ => None,
        }
    }
}

/// `@@autocommit` of the session (on unless it set 0/OFF).
fn autocommit(session: &Session) -> bool {
    match session.overrides.get("autocommit") {
        Some(Some(v)) => !matches!(v.to_ascii_uppercase().as_str(), "0" | "OFF" | "FALSE"),
        _ => true,
    }
}

/// The collation a MariaDB client is told a result column has: MySQL 8.0's own ones become
/// ones MariaDB 10.11 knows (`utf8mb3_tolower_ci` its nearest, `utf8mb3_general_ci`).
fn mariadb_collation(id: u16) -> u16 {
    if id == charset::UTF8MB3_TOLOWER_CI {
        return charset::UTF8MB3_GENERAL_CI;
    }
    tibinlog_protocol::binlog::mariadb_stream::collation_for_mariadb(id)
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

#[cfg(test)]
mod tests;

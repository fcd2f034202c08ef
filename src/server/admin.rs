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

    fn show_create_database(&self, session: &Session, db: &str, if_not_exists: bool) -> Reply {
        let (cs, coll) = if infoschema::is_schema(db) {
            ("utf8mb3".to_owned(), "utf8mb3_general_ci".to_owned())
        } else {
            let catalog = self.schema(session).catalog();
            match catalog.database(db) {
                Some(d) => (d.charset.clone(), d.collation.clone()),
                None => return Reply::err(ER_BAD_DB_ERROR, format!("Unknown database '{db}'")),
            }
        };
        Reply::text(
            &["Database", "Create Database"],
            vec![vec![
                Some(db.to_owned()),
                Some(show::create_database(db, &cs, &coll, if_not_exists)),
            ]],
        )
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
        let env = SqlEnv { ctx: self, session };
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

    /// `SHOW GRANTS [FOR CURRENT_USER[()] | FOR 'user'[@'host']]`.
    fn show_grants(&self, user: Option<String>) -> Reply {
        let own = &self.info.user;
        let target = user.unwrap_or_else(|| own.clone());
        if target != *own && !self.may_select() {
            return Reply::err(
                ER_DBACCESS_DENIED_ERROR,
                format!("Access denied for user {} to database 'mysql'", self.who()),
            );
        }
        let Some(user) = self.shared.users.get(&target) else {
            return Reply::err(
                ER_NONEXISTING_GRANT,
                format!("There is no such grant defined for user '{target}' on host '%'"),
            );
        };
        let rows = user
            .privileges
            .grant_rows(&target)
            .into_iter()
            .map(|g| vec![Some(g)])
            .collect();
        Reply::text(&[&format!("Grants for {target}@%")], rows)
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

    /// Statements handled from tokens (see the module docs), or `None`.
    /// `performance_schema.{global,session}_variables`: the server's variables, the session's
    /// own values over them unless `global`.
    fn variable_pairs(&self, session: &Session, global: bool) -> BTreeMap<String, String> {
        let mut vars = self.globals.clone();
        for (k, v) in super::vars::mysql_defaults() {
            vars.entry(k.to_owned()).or_insert(v);
        }
        if !global {
            for (k, v) in &session.overrides {
                vars.insert(k.clone(), v.clone().unwrap_or_default());
            }
        }
        vars
    }

    /// `performance_schema.{global,session}_status`: the server's counters, this connection's
    /// own unless `global`.
    fn status_pairs(&self, session: &Session, global: bool) -> BTreeMap<String, String> {
        let mut vars = BTreeMap::new();
        let tls = session.tls.clone().unwrap_or_default();
        vars.insert("Ssl_cipher".into(), tls.cipher);
        if let Some(key) = &self.shared.rsa_key {
            vars.insert(
                "Caching_sha2_password_rsa_public_key".into(),
                String::from_utf8_lossy(key.public_pem()).into_owned(),
            );
        }
        vars.insert("Ssl_version".into(), tls.version);
        vars.insert(
            "Threads_connected".into(),
            self.shared.registry.connection_count().to_string(),
        );
        let processes = self.shared.registry.processes();
        let running = processes.iter().filter(|p| p.command != "Sleep").count();
        vars.insert("Threads_running".into(), running.to_string());
        let m = &self.shared.metrics;
        let counters = [
            ("Bytes_sent", m.sent_bytes.get()),
            ("Bytes_received", m.received_bytes.get()),
            ("Connections", m.connections_total.get()),
            ("Aborted_connects", m.aborted_connects.get()),
            // Ours: statements not answered (see `super::Unanswered`).
            ("Tibinlog_unanswered_statements", m.unanswered.get()),
        ];
        for (k, v) in counters {
            vars.insert(k.into(), v.to_string());
        }
        let commands = crate::metrics::ServerMetrics::counts(&m.commands);
        let questions: u64 = commands
            .iter()
            .filter(|(c, _)| c == "COM_QUERY" || c == "COM_STMT_EXECUTE")
            .map(|(_, n)| n)
            .sum();
        vars.insert("Questions".into(), questions.to_string());
        vars.insert(
            "Max_used_connections".into(),
            self.shared.registry.max_used_sessions().to_string(),
        );
        for name in COM_NAMES {
            vars.insert(format!("Com_{name}"), "0".into());
        }
        for (name, n) in crate::metrics::ServerMetrics::counts(&m.statements) {
            vars.insert(format!("Com_{name}"), n.to_string());
        }
        if !global {
            // Session scope (MySQL's default): this connection's own counters.
            let c = self.info.activity.counters();
            vars.insert("Bytes_sent".into(), c.bytes_sent.to_string());
            vars.insert("Bytes_received".into(), c.bytes_received.to_string());
            vars.insert("Questions".into(), c.questions.to_string());
            for name in COM_NAMES {
                let n = c.statements.get(name).copied().unwrap_or(0);
                vars.insert(format!("Com_{name}"), n.to_string());
            }
            for (name, n) in &c.statements {
                vars.insert(format!("Com_{name}"), n.to_string());
            }
        }
        let uptime = self.shared.started.elapsed().as_secs();
        vars.insert("Uptime".into(), uptime.to_string());
        if let Some(capture) = &self.shared.capture {
            for (k, v) in capture.status_vars() {
                vars.insert(k.to_owned(), v);
            }
        }
        vars
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
                    super::conn::db_access_denied(i.privileges, &i.user, &i.host, &db)
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

    /// The statements that change only the session: locks and transactions.
    fn session_statement(&self, session: &mut Session, st: Stmt) -> Reply {
        match st {
            Stmt::Flush { read_lock } => {
                if let Err(denied) = self.require(Privileges::RELOAD, "RELOAD") {
                    return denied;
                }
                if read_lock {
                    self.lock_reads(session);
                }
                Reply::ok()
            }
            Stmt::LockTables => {
                if !self
                    .info
                    .privileges
                    .contains(Privileges::LOCK_TABLES | Privileges::SELECT)
                {
                    let db = session.database.clone().unwrap_or_default();
                    return Reply::err(
                        ER_DBACCESS_DENIED_ERROR,
                        format!("Access denied for user {} to database '{db}'", self.who()),
                    );
                }
                self.lock_reads(session);
                Reply::ok()
            }
            Stmt::UnlockTables => {
                session.read_lock = None;
                Reply::ok()
            }
            Stmt::Begin { consistent } => {
                session.transaction = Some(super::session::Transaction::default());
                if consistent {
                    // The snapshot is the read lock's point when one is held (FTWRL first, as
                    // Debezium and mysqldump do), else the current one.
                    let point = self.read_point(session);
                    debug!(ts = ?point.ts, end = %point.end.file, pos = point.end.pos, "consistent snapshot");
                }
                Reply::ok()
            }
            Stmt::End => {
                session.transaction = None;
                Reply::ok()
            }
            Stmt::Savepoint(name) => {
                if let Some(t) = session.transaction.as_mut() {
                    let name = name.to_ascii_lowercase();
                    t.savepoints.retain(|s| *s != name);
                    t.savepoints.push(name);
                }
                Reply::ok()
            }
            Stmt::RollbackTo(name) => savepoint_op(session, &name, false),
            Stmt::Release(name) => savepoint_op(session, &name, true),
            other => unsupported(&format!("{other:?}")),
        }
    }

    /// `KILL [QUERY] id`: a thread of another user needs SUPER or CONNECTION_ADMIN.
    fn kill(&self, id: u64, query: bool) -> Reply {
        let owner = u32::try_from(id).ok().and_then(|id| {
            self.shared
                .registry
                .processes()
                .into_iter()
                .find(|p| p.id == id)
                .map(|p| p.user)
        });
        if owner.is_some_and(|o| o != self.info.user)
            && !self
                .info
                .privileges
                .any(Privileges::SUPER | Privileges::CONNECTION_ADMIN)
        {
            return Reply::err(
                ER_KILL_DENIED_ERROR,
                format!("You are not owner of thread {id}"),
            );
        }
        match u32::try_from(id) {
            Ok(id) if query && self.shared.registry.kill_query(id) => Reply::ok(),
            Ok(id) if !query && self.shared.registry.kill(id) => Reply::ok(),
            _ => Reply::err(ER_NO_SUCH_THREAD, format!("Unknown thread id: {id}")),
        }
    }

    /// `SHOW CREATE TABLE` (of a table or, as MySQL answers it, of a view) and
    /// `SHOW CREATE VIEW`.
    fn show_create(&self, session: &Session, view_wanted: bool, name: &[String]) -> Reply {
        let Some((db, table)) = self.qualify(session, name) else {
            return Reply::err(ER_NO_DB_ERROR, "No database selected");
        };
        if let Err(denied) = self.require_select("SHOW", &table) {
            return denied;
        }
        let catalog = self.schema(session).catalog();
        let Some(meta) = catalog
            .tables
            .iter()
            .find(|t| t.db.eq_ignore_ascii_case(&db) && t.name.eq_ignore_ascii_case(&table))
        else {
            return no_such_table(&db, &table);
        };
        if meta.is_view() {
            return Reply::text(
                &[
                    "View",
                    "Create View",
                    "character_set_client",
                    "collation_connection",
                ],
                vec![vec![
                    Some(meta.name.clone()),
                    Some(meta.create_sql.clone()),
                    Some(meta.charset.clone()),
                    Some(meta.collation.clone()),
                ]],
            );
        }
        if view_wanted {
            return Reply::err(
                ER_WRONG_OBJECT,
                format!("'{}.{}' is not VIEW", meta.db, meta.name),
            );
        }
        Reply::text(
            &["Table", "Create Table"],
            vec![vec![Some(meta.name.clone()), Some(meta.create_sql.clone())]],
        )
    }

    /// The server's own SHOW forms: the binlog's end and files, the replicas, the conditions.
    fn server_show(&self, session: &Session, what: ServerShow) -> Reply {
        let client = self
            .info
            .privileges
            .any(Privileges::SUPER | Privileges::REPLICATION_CLIENT);
        match what {
            ServerShow::MasterStatus
            | ServerShow::BinaryLogs
            | ServerShow::ReplicaStatus { .. }
                if !client =>
            {
                Reply::err(
                    ER_SPECIFIC_ACCESS_DENIED_ERROR,
                    need_message("SUPER, REPLICATION CLIENT"),
                )
            }
            // A source that replicates from nothing: MySQL's empty set.
            ServerShow::ReplicaStatus { old } => Reply::Rows {
                columns: super::replica_status::columns(old),
                rows: Vec::new(),
            },
            ServerShow::Replicas { .. }
                if !self.info.privileges.contains(Privileges::REPLICATION_SLAVE) =>
            {
                Reply::err(
                    ER_SPECIFIC_ACCESS_DENIED_ERROR,
                    need_message("REPLICATION SLAVE"),
                )
            }
            ServerShow::MasterStatus => {
                let (end, gtids) = match &session.read_lock {
                    Some(l) => (l.end.clone(), l.gtid_executed.to_string()),
                    None => {
                        let (end, gtids) = self.shared.source.visible_status();
                        (end, gtids.to_string())
                    }
                };
                let mut columns = vec![
                    ColumnSpec::text("File"),
                    ColumnSpec::unsigned("Position"),
                    ColumnSpec::text("Binlog_Do_DB"),
                    ColumnSpec::text("Binlog_Ignore_DB"),
                    ColumnSpec::text("Executed_Gtid_Set"),
                ];
                let mut row = vec![
                    Some(end.file),
                    Some(end.pos.to_string()),
                    Some(String::new()),
                    Some(String::new()),
                    Some(gtids),
                ];
                // In an HA group a sixth column names the owner (clients read the first five
                // by position or by name).
                if let Some(owner) = self.shared.capture.as_ref().and_then(|c| c.ha_owner_text()) {
                    columns.push(ColumnSpec::text("Tibinlog_Owner"));
                    row.push(Some(owner));
                }
                Reply::Rows {
                    columns,
                    rows: vec![row],
                }
            }
            ServerShow::BinaryLogs => Reply::Rows {
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
            ServerShow::Replicas { old } => {
                let names: [&str; 5] = if old {
                    ["Server_id", "Host", "Port", "Master_id", "Slave_UUID"]
                } else {
                    ["Server_Id", "Host", "Port", "Source_Id", "Replica_UUID"]
                };
                let rows = self
                    .shared
                    .registry
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
            ServerShow::Conditions { errors } => Reply::Rows {
                columns: vec![
                    ColumnSpec::text("Level"),
                    ColumnSpec::unsigned("Code"),
                    ColumnSpec::text("Message"),
                ],
                rows: session
                    .diagnostics
                    .iter()
                    .filter(|d| !errors || d.level == "Error")
                    .map(|d| {
                        vec![
                            Some(d.level.to_owned()),
                            Some(d.code.to_string()),
                            Some(d.message.clone()),
                        ]
                    })
                    .collect(),
            },
        }
    }

    fn qualify(&self, session: &Session, parts: &[String]) -> Option<(String, String)> {
        match parts {
            [db, t] => Some((db.clone(), t.clone())),
            [t] => session.database.clone().map(|db| (db, t.clone())),
            _ => None,
        }
    }

    fn purge(&self, to: Purge) -> Reply {
        let res = match to {
            Purge::To(file) => self.shared.source.purge_to(&file),
            Purge::Before(text) => match parse_datetime(&text) {
                Some(t) => self.shared.source.purge_before(t),
                None => {
                    return Reply::err(
                        ER_WRONG_VALUE_FOR_VAR,
                        format!("Incorrect datetime value: '{text}'"),
                    )
                }
            },
        };
        match res {
            Ok(warnings) => Reply::ok_warning(warnings),
            Err(SourceError::UnknownFile { .. }) => Reply::err(
                ER_UNKNOWN_TARGET_BINLOG,
                "Target log not found in binlog index",
            ),
            Err(e) => Reply::err(ER_UNKNOWN_ERROR, e.to_string()),
        }
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
                    last = GtidSet::decode(body).ok()?.last_gno(&sid);
                }
                Some(EventType::GTID) => {
                    let (event_sid, gno) =
                        tibinlog_protocol::binlog::read::gtid(ev.get(HEADER_LEN..)?)?;
                    if event_sid == sid {
                        last = gno;
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

    fn set(&self, session: &mut Session, set: &Set) -> Reply {
        let assignments: Vec<(Option<ContextModifier>, Vec<String>, &Expr)> = match set {
            Set::SingleAssignment {
                scope,
                variable,
                values,
                ..
            } => match values.as_slice() {
                [v] => vec![(*scope, statement::name_parts(variable), v)],
                _ => return unsupported("SET with several values"),
            },
            Set::MultipleAssignments { assignments } => assignments
                .iter()
                .map(|a| (a.scope, statement::name_parts(&a.name), &a.value))
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
            if super::vars::var_type(&name).is_none() {
                return unknown_variable(&name);
            }
            let value = match super::vars::normalize(&name, value) {
                Ok(v) => v,
                Err((code, msg)) => return Reply::err(code, msg),
            };
            if !global && !self.shared.identity.mariadb {
                if let Some(why) = super::vars::session_refusal(&name) {
                    return Reply::err(ER_GLOBAL_VARIABLE, why);
                }
            }
            if global {
                return Reply::err(
                    ER_SPECIFIC_ACCESS_DENIED_ERROR,
                    "Access denied; you need (at least one of) the SUPER or \
                     SYSTEM_VARIABLES_ADMIN privilege(s) for this operation",
                );
            }
            let value = if name == "tidb_snapshot" {
                match self.snapshot_setting(value.as_deref()) {
                    Ok(v) => v,
                    Err(r) => return r,
                }
            } else {
                value
            };
            session.overrides.insert(name, value);
        }
        Reply::ok()
    }

    /// A SET right-hand side: a bare word (`SET x = ON`) is a string; anything else is an
    /// expression, evaluated by the SQL engine as in a SELECT (the one evaluator).
    fn eval_set_value(&self, session: &Session, e: &Expr) -> Result<SqlValue, Reply> {
        if let Expr::Identifier(id) = e {
            if !id.value.starts_with('@') {
                return Ok(Some(id.value.clone()));
            }
        }
        let env = SqlEnv { ctx: self, session };
        let compiled = Compiler::new(&NoColumns, &env).compile(e)?;
        let value = compiled.eval(&[])?;
        Ok(crate::sql::text::to_text(&value, &compiled.ty))
    }
}

/// `ROLLBACK TO SAVEPOINT name` (forgets the later savepoints) or `RELEASE SAVEPOINT name`
/// (forgets it and the later ones); the transaction and its snapshot stay. 1305 when the
/// transaction has no such savepoint.
fn savepoint_op(session: &mut Session, name: &str, release: bool) -> Reply {
    let lower = name.to_ascii_lowercase();
    let at = session
        .transaction
        .as_ref()
        .and_then(|t| t.savepoints.iter().position(|s| *s == lower));
    match (at, session.transaction.as_mut()) {
        (Some(i), Some(t)) => {
            t.savepoints.truncate(if release { i } else { i + 1 });
            Reply::ok()
        }
        _ => Reply::err(
            tibinlog_protocol::wire::errors::ER_SP_DOES_NOT_EXIST,
            format!("SAVEPOINT {name} does not exist"),
        ),
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

/// A variable's value typed as its registry entry says: booleans as 1/0, numbers as BIGINT,
/// the rest as strings.
fn typed_var(ty: VarType, v: Option<String>) -> (SqlValueTyped, SqlType) {
    let Some(t) = v else {
        return (SqlValueTyped::Null, SqlType::null());
    };
    match ty {
        VarType::Bool => (
            SqlValueTyped::Int(i64::from(matches!(
                t.to_ascii_uppercase().as_str(),
                "ON" | "1" | "TRUE"
            ))),
            SqlType::bigint().not_null(),
        ),
        VarType::Int => match t.trim().parse::<i64>() {
            Ok(n) => (SqlValueTyped::Int(n), SqlType::bigint().not_null()),
            Err(_) => text_value(Some(t)),
        },
        VarType::UInt => match t.trim().parse::<u64>() {
            Ok(n) => (SqlValueTyped::UInt(n), SqlType::ubigint().not_null()),
            Err(_) => text_value(Some(t)),
        },
        VarType::Text => text_value(Some(t)),
    }
}

/// A text value (NULL when absent) as a VARCHAR of its length.
fn text_value(v: Option<String>) -> (SqlValueTyped, SqlType) {
    match v {
        None => (SqlValueTyped::Null, SqlType::null()),
        Some(t) => {
            let len = t.chars().count() as u32;
            (
                SqlValueTyped::Bytes(t.into_bytes()),
                SqlType::varchar(len.max(1), charset::UTF8MB4_0900_AI_CI),
            )
        }
    }
}

/// What expressions read from the session and the server.
struct SqlEnv<'a> {
    ctx: &'a Ctx<'a>,
    session: &'a Session,
}

impl SqlEnv<'_> {
    /// The session variables whose value is the session's state, not a setting: the
    /// conditions of the statement before (`warning_count` counts every condition,
    /// `error_count` the errors), the session's clock and its connection id.
    fn session_state_var(&self, name: &str, scope: Scope) -> Option<(SqlValueTyped, SqlType)> {
        if scope != Scope::Session {
            return None;
        }
        let count = |errors_only: bool| {
            let n = self
                .session
                .diagnostics
                .iter()
                .filter(|d| !errors_only || d.level == "Error")
                .count();
            Some((SqlValueTyped::UInt(n as u64), SqlType::ubigint().not_null()))
        };
        match name.to_ascii_lowercase().as_str() {
            "warning_count" => count(false),
            "error_count" => count(true),
            "timestamp" => {
                let d = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                let secs = d.as_secs() as f64 + f64::from(d.subsec_micros()) / 1e6;
                Some((SqlValueTyped::Double(secs), SqlType::double().not_null()))
            }
            "pseudo_thread_id" => Some((
                SqlValueTyped::UInt(u64::from(self.ctx.info.id)),
                SqlType::ubigint().not_null(),
            )),
            _ => None,
        }
    }
}

impl Env for SqlEnv<'_> {
    fn server_variables(&self, view: VarView) -> Vec<(String, String)> {
        let pairs = match view {
            VarView::Variables { global } => self.ctx.variable_pairs(self.session, global),
            VarView::Status { global } => self.ctx.status_pairs(self.session, global),
        };
        pairs.into_iter().collect()
    }

    fn system_variable(
        &self,
        scope: Option<&str>,
        name: &str,
    ) -> Result<(SqlValueTyped, SqlType), SqlError> {
        let scope = match scope.map(str::to_ascii_lowercase).as_deref() {
            None | Some("session") | Some("local") => Scope::Session,
            Some("global") => Scope::Global,
            Some(other) => {
                return Err(SqlError::new(
                    ER_UNKNOWN_SYSTEM_VARIABLE,
                    format!("Unknown system variable '{other}.{name}'"),
                ))
            }
        };
        if name.eq_ignore_ascii_case("tidb_snapshot") {
            let ts = self.ctx.pinned_ts(self.session);
            return Ok(text_value(Some(
                ts.map(|t| t.to_string()).unwrap_or_default(),
            )));
        }
        if let Some(v) = self.session_state_var(name, scope) {
            return Ok(v);
        }
        match self.session.system_var(&self.ctx.globals, name, scope) {
            Some(v) => Ok(typed_var(
                super::vars::var_type(&name.to_ascii_lowercase()).unwrap_or(VarType::Text),
                v,
            )),
            None => Err(SqlError::new(
                ER_UNKNOWN_SYSTEM_VARIABLE,
                format!("Unknown system variable '{name}'"),
            )),
        }
    }

    fn user_variable(&self, name: &str) -> (SqlValueTyped, SqlType) {
        match self.session.user_var(name) {
            Some(v) => {
                let len = v.chars().count() as u32;
                (
                    SqlValueTyped::Bytes(v.into_bytes()),
                    SqlType::string(len.max(1)).with_collation(charset::UTF8MB4_0900_AI_CI),
                )
            }
            None => (SqlValueTyped::Null, SqlType::null()),
        }
    }

    fn context_function(
        &self,
        name: &str,
        args: &[SqlValueTyped],
    ) -> Option<Result<(SqlValueTyped, SqlType), SqlError>> {
        let now = || {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let secs = u32::try_from(d.as_secs()).unwrap_or(u32::MAX);
            (secs, crate::tidb::time::timestamp_to_datetime(secs, 0))
        };
        let text = |i: usize| -> String {
            match args.get(i) {
                Some(SqlValueTyped::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(SqlValueTyped::Int(n)) => n.to_string(),
                Some(SqlValueTyped::UInt(n)) => n.to_string(),
                Some(SqlValueTyped::Decimal(d)) => d.clone(),
                _ => String::new(),
            }
        };
        let s = text_value;
        let string = |v: String| {
            let len = v.chars().count() as u32;
            (
                SqlValueTyped::Bytes(v.into_bytes()),
                SqlType::string(len.max(1)).not_null(),
            )
        };
        Some(Ok(match name {
            "VERSION" | "DATABASE" | "SCHEMA" | "USER" | "CURRENT_USER" | "SESSION_USER"
            | "SYSTEM_USER" | "UUID"
                if !args.is_empty() =>
            {
                return Some(Err(SqlError::new(
                    ER_PARSE_ERROR,
                    format!("Incorrect parameter count in the call to native function '{name}'"),
                )))
            }
            "VERSION" => string(
                if self.ctx.info.mariadb_client && !self.ctx.shared.identity.mariadb {
                    mariadb_tool_version()
                } else {
                    self.ctx.shared.identity.version.clone()
                },
            ),
            "DATABASE" | "SCHEMA" => match &self.session.database {
                Some(d) => string(d.clone()),
                None => (SqlValueTyped::Null, SqlType::string(64)),
            },
            "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => {
                string(format!("{}@{}", self.ctx.info.user, self.ctx.info.host))
            }
            "CONNECTION_ID" => (
                SqlValueTyped::UInt(u64::from(self.ctx.info.id)),
                SqlType::ubigint().not_null(),
            ),
            "UUID" => string(pseudo_uuid(self.ctx.info.id)),
            "UNIX_TIMESTAMP" if args.is_empty() => (
                SqlValueTyped::Int(i64::from(now().0)),
                SqlType::bigint().not_null(),
            ),
            "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" | "SYSDATE"
            | "UTC_TIMESTAMP"
                if args.is_empty() =>
            {
                (
                    SqlValueTyped::DateTime(now().1),
                    SqlType::datetime(0).not_null(),
                )
            }
            "CURDATE" | "CURRENT_DATE" | "UTC_DATE" if args.is_empty() => (
                SqlValueTyped::Date(now().1.date),
                SqlType::new(crate::sql::types::TypeKind::Date).not_null(),
            ),
            "LAST_INSERT_ID" | "FOUND_ROWS" if args.is_empty() => {
                (SqlValueTyped::UInt(0), SqlType::ubigint().not_null())
            }
            "ROW_COUNT" if args.is_empty() => {
                (SqlValueTyped::Int(-1), SqlType::bigint().not_null())
            }
            "TIBINLOG_POS_FOR_TS" if args.len() == 1 => {
                let Ok(ts) = text(0).trim().parse::<u64>() else {
                    return Some(Err(SqlError::wrong_arguments(name)));
                };
                match self.ctx.shared.source.position_for_ts(ts) {
                    Ok(p) => string(format!("{}:{}", p.file, p.pos)),
                    Err(e) => {
                        return Some(Err(SqlError::new(
                            ER_UNKNOWN_ERROR,
                            format!("no binlog position for ts {ts}: {e}"),
                        )))
                    }
                }
            }
            "TIBINLOG_POS_FOR_GTIDS" if args.len() == 1 => {
                let found = GtidSet::parse(text(0).trim())
                    .map_err(|e| e.to_string())
                    .and_then(|set| {
                        self.ctx
                            .shared
                            .source
                            .position_for_gtids(&set)
                            .map_err(|e| e.to_string())
                    });
                match found {
                    Ok(p) => string(format!("{}:{}", p.file, p.pos)),
                    Err(e) => {
                        return Some(Err(SqlError::new(
                            ER_UNKNOWN_ERROR,
                            format!("no binlog position for GTID set '{}': {e}", text(0)),
                        )))
                    }
                }
            }
            "TIBINLOG_TS_FOR_POS" if args.len() == 2 => {
                let pos = super::source::BinlogPosition::new(
                    text(0),
                    text(1).trim().parse().unwrap_or(0),
                );
                match self.ctx.shared.source.ts_for_position(&pos) {
                    Some(ts) => (SqlValueTyped::UInt(ts), SqlType::ubigint()),
                    None => (SqlValueTyped::Null, SqlType::ubigint()),
                }
            }
            "BINLOG_GTID_POS" => {
                let pos = text(1).trim().parse::<u64>().ok();
                s(pos.and_then(|p| self.ctx.binlog_gtid_pos(&text(0), p)))
            }
            _ => return None,
        }))
    }
}

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

/// `Com_*` counters `SHOW STATUS` lists even at zero (those the statements we serve count).
const COM_NAMES: [&str; 27] = [
    "begin",
    "change_db",
    "commit",
    "execute_sql",
    "flush",
    "kill",
    "lock_tables",
    "prepare_sql",
    "purge",
    "rollback",
    "select",
    "set_option",
    "set_password",
    "show_binlog_events",
    "show_binlogs",
    "show_create_table",
    "show_databases",
    "show_fields",
    "show_grants",
    "show_master_status",
    "show_processlist",
    "show_replicas",
    "show_status",
    "show_tables",
    "show_variables",
    "show_other",
    "unlock_tables",
];

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
    fn datetime_to_epoch() {
        assert_eq!(parse_datetime("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_datetime("2023-11-14 22:13:20"), Some(1_700_000_000));
        assert_eq!(parse_datetime("nope"), None);
    }
}

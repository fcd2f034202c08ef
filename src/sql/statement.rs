//! The one entrance for statement text. Every statement the server answers is classified here
//! into a [`Stmt`] — by `sqlparser`'s AST where it parses the statement, by [`Tokens`] for
//! the forms it leaves generic (the binlog administration statements, `SHOW GRANTS`,
//! `START TRANSACTION WITH CONSISTENT SNAPSHOT`) — and the server executes the [`Stmt`]: its
//! effects (the binlog source, the session, the process list) are the server's, the
//! decision which statement it is and what its arguments are is made only here. Queries and
//! the SHOW/DESCRIBE forms of [`show`](super::show) are then planned and run by the engine.
//!
//! A malformed statement is MySQL's 1064 with the text near the error; a statement that
//! writes is refused as on a read-only server by the caller ([`Stmt::Write`]).

use sqlparser::ast::{KillType, ObjectName, Set, ShowCreateObject, Statement};
use sqlparser::parser::ParserError;
use tibinlog_protocol::wire::errors::{ER_PARSE_ERROR, ER_STACK_OVERRUN_NEED_MORE};

use super::error::SqlError;
use super::parse::{parse, ParseFailure};
use super::show::{self, ShowForm};
use super::tokens::Tokens;

/// What one statement asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// A SELECT (any query).
    Query(Box<sqlparser::ast::Query>),
    /// A SHOW or DESCRIBE form answered by a query over information_schema.
    Show(ShowForm),
    /// `SHOW CREATE {DATABASE|SCHEMA} [IF NOT EXISTS] db`.
    ShowCreateDatabase { name: String, if_not_exists: bool },
    /// `SHOW CREATE TABLE` (`view` false) or `SHOW CREATE VIEW` of the name's parts.
    ShowCreate { view: bool, name: Vec<String> },
    /// A SHOW form about the binlog, its replicas or the session's conditions.
    Server(ServerShow),
    /// `SHOW GRANTS [FOR user]` (`None`: the current user).
    ShowGrants { user: Option<String> },
    /// `SHOW BINLOG EVENTS [IN 'file'] [FROM pos] [LIMIT [offset,] count]`.
    BinlogEvents(BinlogEvents),
    /// `SET …`.
    Set(Box<Set>),
    /// `KILL [CONNECTION|QUERY] id`.
    Kill { id: u64, query: bool },
    /// `USE db`.
    Use(String),
    /// `FLUSH …` (`read_lock`: `FLUSH TABLES WITH READ LOCK`).
    Flush { read_lock: bool },
    /// `LOCK TABLES …`.
    LockTables,
    /// `UNLOCK TABLES`.
    UnlockTables,
    /// `START TRANSACTION` / `BEGIN` (`consistent`: `WITH CONSISTENT SNAPSHOT`).
    Begin { consistent: bool },
    /// `COMMIT` or `ROLLBACK`.
    End,
    /// `SAVEPOINT name`.
    Savepoint(String),
    /// `ROLLBACK TO [SAVEPOINT] name`.
    RollbackTo(String),
    /// `RELEASE SAVEPOINT name`.
    Release(String),
    /// `PURGE {BINARY|MASTER} LOGS …`.
    Purge(Purge),
    /// A statement that writes data, schema or users.
    Write,
    /// A statement this server does not answer (named for the error).
    Unsupported(String),
}

/// The server's own SHOW forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerShow {
    /// `SHOW MASTER STATUS` / `SHOW BINARY LOG STATUS` / `SHOW BINLOG STATUS`.
    MasterStatus,
    /// `SHOW BINARY LOGS` / `SHOW MASTER LOGS`.
    BinaryLogs,
    /// `SHOW {SLAVE|REPLICA} STATUS` (`old`: the SLAVE words).
    ReplicaStatus { old: bool },
    /// `SHOW SLAVE HOSTS` (`old`) / `SHOW REPLICAS`.
    Replicas { old: bool },
    /// `SHOW WARNINGS` (`errors`: `SHOW ERRORS`).
    Conditions { errors: bool },
}

/// Where `PURGE … LOGS` cuts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purge {
    /// `TO 'file'`: every file before it.
    To(String),
    /// `BEFORE 'datetime'` (the text as given).
    Before(String),
}

/// The arguments of `SHOW BINLOG EVENTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogEvents {
    pub file: Option<String>,
    pub from: u64,
    pub offset: usize,
    pub limit: usize,
}

/// Whether a statement reads the conditions of the one before (so it does not clear them).
pub fn reads_diagnostics(t: &Tokens<'_>) -> bool {
    t.starts_with(&["SHOW", "WARNINGS"])
        || t.starts_with(&["SHOW", "ERRORS"])
        || t.starts_with(&["SHOW", "COUNT"])
}

/// Classifies one statement (without its `;`).
pub fn classify(text: &str) -> Result<Stmt, SqlError> {
    let t = Tokens::new(text);
    if let Some(stmt) = by_tokens(&t)? {
        return Ok(stmt);
    }
    match parse(text) {
        Ok(stmts) => match stmts.as_slice() {
            [] => Err(SqlError::new(ER_PARSE_ERROR, "Query was empty")),
            [st] => Ok(parsed(st, &t)),
            _ => Ok(Stmt::Unsupported(
                "several statements without a separator".into(),
            )),
        },
        Err(e) => Err(parse_failure(text, &e)),
    }
}

/// MySQL's error for a text `sqlparser` refused.
pub fn parse_failure(text: &str, e: &ParseFailure) -> SqlError {
    match e {
        ParseFailure::Syntax(e) => syntax_error(text, e),
        e @ ParseFailure::TooComplex { .. } => {
            SqlError::new(ER_STACK_OVERRUN_NEED_MORE, e.to_string())
        }
    }
}

/// The forms read from tokens (before `sqlparser`, which parses some of them differently).
fn by_tokens(t: &Tokens<'_>) -> Result<Option<Stmt>, SqlError> {
    if t.starts_with(&["PURGE"]) {
        return purge(t).map(Some);
    }
    if t.starts_with(&["SHOW", "GRANTS"]) {
        return show_grants(t).map(Some);
    }
    if t.starts_with(&["START", "TRANSACTION", "WITH", "CONSISTENT", "SNAPSHOT"]) {
        return Ok(Some(Stmt::Begin { consistent: true }));
    }
    if t.starts_with(&["SHOW", "BINLOG", "EVENTS"]) {
        return binlog_events(t).map(|e| Some(Stmt::BinlogEvents(e)));
    }
    if t.starts_with(&["SHOW", "CREATE", "DATABASE"])
        || t.starts_with(&["SHOW", "CREATE", "SCHEMA"])
    {
        return show_create_database(t).map(Some);
    }
    Ok(show::form(t).map(Stmt::Show))
}

/// A statement `sqlparser` parsed.
fn parsed(st: &Statement, t: &Tokens<'_>) -> Stmt {
    match st {
        Statement::Query(q) => Stmt::Query(q.clone()),
        Statement::Set(set) => Stmt::Set(Box::new(set.clone())),
        Statement::ShowVariable { variable } => {
            let words: Vec<String> = variable.iter().map(|i| i.value.to_uppercase()).collect();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            server_show(&words)
        }
        Statement::ShowCreate { obj_type, obj_name } => match obj_type {
            ShowCreateObject::Table => Stmt::ShowCreate {
                view: false,
                name: name_parts(obj_name),
            },
            ShowCreateObject::View => Stmt::ShowCreate {
                view: true,
                name: name_parts(obj_name),
            },
            _ => Stmt::Unsupported("SHOW CREATE other than TABLE and VIEW".into()),
        },
        Statement::Kill { id, modifier } => Stmt::Kill {
            id: *id,
            query: matches!(modifier, Some(KillType::Query)),
        },
        // The name is the token after USE, unquoted.
        Statement::Use(_) => match t.get(1) {
            Some(db) => Stmt::Use(db.to_owned()),
            None => Stmt::Unsupported("USE without a database".into()),
        },
        Statement::Flush { read_lock, .. } => Stmt::Flush {
            read_lock: *read_lock,
        },
        Statement::LockTables { .. } => Stmt::LockTables,
        Statement::UnlockTables => Stmt::UnlockTables,
        Statement::StartTransaction { .. } => Stmt::Begin { consistent: false },
        Statement::Rollback {
            savepoint: Some(name),
            ..
        } => Stmt::RollbackTo(name.value.clone()),
        Statement::ReleaseSavepoint { name } => Stmt::Release(name.value.clone()),
        Statement::Commit { .. } | Statement::Rollback { .. } => Stmt::End,
        Statement::Savepoint { name } => Stmt::Savepoint(name.value.clone()),
        st if writes(st) => Stmt::Write,
        _ => Stmt::Unsupported("this statement".into()),
    }
}

fn writes(st: &Statement) -> bool {
    matches!(
        st,
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
            | Statement::Load { .. }
    )
}

/// The identifiers of a (possibly qualified) name, unquoted.
pub fn name_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.clone()))
        .collect()
}

/// `SHOW <words>` forms `sqlparser` leaves generic.
fn server_show(words: &[&str]) -> Stmt {
    Stmt::Server(match words {
        ["MASTER", "STATUS"] | ["BINARY", "LOG", "STATUS"] | ["BINLOG", "STATUS"] => {
            ServerShow::MasterStatus
        }
        ["BINARY", "LOGS"] | ["MASTER", "LOGS"] => ServerShow::BinaryLogs,
        [kind @ ("SLAVE" | "REPLICA"), "STATUS", ..] => ServerShow::ReplicaStatus {
            old: *kind == "SLAVE",
        },
        ["SLAVE", "HOSTS"] => ServerShow::Replicas { old: true },
        ["REPLICAS"] => ServerShow::Replicas { old: false },
        [kind @ ("WARNINGS" | "ERRORS"), ..] => ServerShow::Conditions {
            errors: *kind == "ERRORS",
        },
        _ => return Stmt::Unsupported(format!("SHOW {}", words.join(" "))),
    })
}

/// `PURGE {BINARY|MASTER} LOGS {TO 'file' | BEFORE 'datetime'}`.
fn purge(t: &Tokens<'_>) -> Result<Stmt, SqlError> {
    let prefix =
        t.starts_with(&["PURGE", "BINARY", "LOGS"]) || t.starts_with(&["PURGE", "MASTER", "LOGS"]);
    if !prefix || t.len() != 5 {
        return Err(near(t, 1));
    }
    let arg = t.get(4).unwrap_or_default().to_owned();
    if t.kw(3, "TO") {
        Ok(Stmt::Purge(Purge::To(arg)))
    } else if t.kw(3, "BEFORE") {
        Ok(Stmt::Purge(Purge::Before(arg)))
    } else {
        Err(near(t, 3))
    }
}

/// `SHOW GRANTS [FOR CURRENT_USER[()] | FOR 'user'[@'host']]`.
fn show_grants(t: &Tokens<'_>) -> Result<Stmt, SqlError> {
    let user = match t.get(3) {
        None => None,
        Some(_) if !t.kw(2, "FOR") => return Err(near(t, 2)),
        Some(u) if u.eq_ignore_ascii_case("CURRENT_USER") => None,
        Some(u) => Some(u.strip_suffix('@').unwrap_or(u).to_owned()),
    };
    Ok(Stmt::ShowGrants { user })
}

/// `SHOW CREATE {DATABASE|SCHEMA} [IF NOT EXISTS] db`.
fn show_create_database(t: &Tokens<'_>) -> Result<Stmt, SqlError> {
    let if_not_exists = t.kw(3, "IF") && t.kw(4, "NOT") && t.kw(5, "EXISTS");
    let i = if if_not_exists { 6 } else { 3 };
    let Some(name) = t.get(i) else {
        return Err(near(t, i));
    };
    if t.len() != i + 1 {
        return Err(near(t, i + 1));
    }
    Ok(Stmt::ShowCreateDatabase {
        name: name.to_owned(),
        if_not_exists,
    })
}

/// `SHOW BINLOG EVENTS [IN 'f'] [FROM p] [LIMIT [o,] n]`.
fn binlog_events(t: &Tokens<'_>) -> Result<BinlogEvents, SqlError> {
    let mut e = BinlogEvents {
        file: None,
        from: 4,
        offset: 0,
        limit: usize::MAX,
    };
    let mut i = 3;
    while i < t.len() {
        let arg = t.get(i + 1);
        if t.kw(i, "IN") && arg.is_some() {
            e.file = arg.map(str::to_string);
            i += 2;
        } else if t.kw(i, "FROM") {
            e.from = arg.and_then(|a| a.parse().ok()).ok_or_else(|| near(t, i))?;
            i += 2;
        } else if t.kw(i, "LIMIT") {
            let a: usize = arg.and_then(|a| a.parse().ok()).ok_or_else(|| near(t, i))?;
            if t.get(i + 2) == Some(",") {
                e.offset = a;
                e.limit = t
                    .get(i + 3)
                    .and_then(|b| b.parse().ok())
                    .ok_or_else(|| near(t, i))?;
                i += 4;
            } else {
                e.limit = a;
                i += 2;
            }
        } else {
            return Err(near(t, i));
        }
    }
    Ok(e)
}

/// ERR 1064 near token `i` of the statement.
fn near(t: &Tokens<'_>, i: usize) -> SqlError {
    parse_error_near(t.sql, t.offset(i))
}

/// ERR 1064 in MySQL's shape, near byte `offset` of `sql`, on line 1.
pub fn parse_error_near(sql: &str, offset: usize) -> SqlError {
    let near: String = sql.get(offset..).unwrap_or("").chars().take(80).collect();
    SqlError::new(
        ER_PARSE_ERROR,
        format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your \
             MySQL server version for the right syntax to use near '{near}' at line 1"
        ),
    )
}

/// ERR 1064 in MySQL's shape from a `sqlparser` error: `… near '<rest>' at line N`.
pub fn syntax_error(sql: &str, e: &ParserError) -> SqlError {
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
    SqlError::new(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(sql: &str) -> Stmt {
        classify(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"))
    }

    #[test]
    fn binlog_statements_and_their_arguments() {
        assert_eq!(
            ok("SHOW MASTER STATUS"),
            Stmt::Server(ServerShow::MasterStatus)
        );
        assert_eq!(
            ok("show binary log status"),
            Stmt::Server(ServerShow::MasterStatus)
        );
        assert_eq!(ok("SHOW MASTER LOGS"), Stmt::Server(ServerShow::BinaryLogs));
        assert_eq!(
            ok("SHOW SLAVE STATUS"),
            Stmt::Server(ServerShow::ReplicaStatus { old: true })
        );
        assert_eq!(
            ok("SHOW REPLICA STATUS FOR CHANNEL ''"),
            Stmt::Server(ServerShow::ReplicaStatus { old: false })
        );
        assert_eq!(
            ok("SHOW REPLICAS"),
            Stmt::Server(ServerShow::Replicas { old: false })
        );
        assert_eq!(
            ok("SHOW ERRORS"),
            Stmt::Server(ServerShow::Conditions { errors: true })
        );
        assert_eq!(
            ok("/* x */ SHOW BINLOG EVENTS IN 'b.000002' FROM 120 LIMIT 2, 5;"),
            Stmt::BinlogEvents(BinlogEvents {
                file: Some("b.000002".into()),
                from: 120,
                offset: 2,
                limit: 5
            })
        );
        assert_eq!(
            ok("PURGE BINARY LOGS TO 'b.000003'"),
            Stmt::Purge(Purge::To("b.000003".into()))
        );
        assert_eq!(
            ok("purge master logs before '2026-01-01 00:00:00'"),
            Stmt::Purge(Purge::Before("2026-01-01 00:00:00".into()))
        );
        assert!(matches!(
            ok("SHOW ENGINE INNODB STATUS"),
            Stmt::Unsupported(_)
        ));
    }

    #[test]
    fn malformed_admin_statements_are_1064_near_the_fault() {
        for (sql, near) in [
            ("PURGE BINARY LOGS AFTER 'x'", "AFTER 'x'"),
            ("PURGE LOGS TO 'x'", "LOGS TO 'x'"),
            ("SHOW BINLOG EVENTS FROM abc", "FROM abc"),
            ("SHOW BINLOG EVENTS LIMIT 1,", "LIMIT 1,"),
            ("SHOW GRANTS TO x", "TO x"),
            ("SHOW CREATE DATABASE a b", "b"),
        ] {
            let e = classify(sql).expect_err(sql);
            assert_eq!(e.code, ER_PARSE_ERROR, "{sql}");
            assert!(
                e.message.contains(&format!("near '{near}'")),
                "{sql}: {}",
                e.message
            );
        }
        let e = classify("SELEKT 1").expect_err("not SQL");
        assert_eq!(e.code, ER_PARSE_ERROR);
        assert!(
            e.message.contains("near 'SELEKT 1' at line 1"),
            "{}",
            e.message
        );
    }

    #[test]
    fn sessions_transactions_and_writes() {
        assert_eq!(ok("USE `my db`"), Stmt::Use("my db".into()));
        assert_eq!(ok("KILL QUERY 7"), Stmt::Kill { id: 7, query: true });
        assert_eq!(
            ok("KILL 7"),
            Stmt::Kill {
                id: 7,
                query: false
            }
        );
        assert_eq!(
            ok("START TRANSACTION WITH CONSISTENT SNAPSHOT"),
            Stmt::Begin { consistent: true }
        );
        assert_eq!(ok("BEGIN"), Stmt::Begin { consistent: false });
        assert_eq!(
            ok("ROLLBACK TO SAVEPOINT s1"),
            Stmt::RollbackTo("s1".into())
        );
        assert_eq!(ok("ROLLBACK"), Stmt::End);
        assert_eq!(
            ok("FLUSH TABLES WITH READ LOCK"),
            Stmt::Flush { read_lock: true }
        );
        assert_eq!(ok("INSERT INTO t VALUES (1)"), Stmt::Write);
        assert_eq!(ok("DROP TABLE t"), Stmt::Write);
        assert_eq!(
            ok("SHOW GRANTS FOR 'u'@'%'"),
            Stmt::ShowGrants {
                user: Some("u".into())
            }
        );
        assert_eq!(
            ok("SHOW CREATE SCHEMA IF NOT EXISTS d"),
            Stmt::ShowCreateDatabase {
                name: "d".into(),
                if_not_exists: true
            }
        );
        assert_eq!(
            ok("SHOW CREATE VIEW d.v"),
            Stmt::ShowCreate {
                view: true,
                name: vec!["d".into(), "v".into()]
            }
        );
        assert!(matches!(
            ok("SHOW FULL TABLES FROM d"),
            Stmt::Show(ShowForm::Tables { full: true, .. })
        ));
        assert!(matches!(ok("DESC t"), Stmt::Show(ShowForm::Describe)));
        assert!(matches!(ok("SELECT 1"), Stmt::Query(_)));
    }
}

//! SET (variables, names, the transaction's characteristics), the session and transaction
//! statements (USE, BEGIN/COMMIT/ROLLBACK, savepoints, LOCK/UNLOCK) and KILL.

use super::*;

impl Ctx<'_> {
    /// The statements that change only the session: locks and transactions.
    pub(super) fn session_statement(&self, session: &mut Session, st: Stmt) -> Reply {
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
                session.transaction = Some(crate::server::session::Transaction::default());
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
    pub(super) fn kill(&self, id: u64, query: bool) -> Reply {
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

    pub(super) fn set(&self, session: &mut Session, set: &Set) -> Reply {
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
            if crate::server::vars::var_type(&name).is_none() {
                return unknown_variable(&name);
            }
            let value = match crate::server::vars::normalize(&name, value) {
                Ok(v) => v,
                Err((code, msg)) => return Reply::err(code, msg),
            };
            if !global && !self.shared.identity.mariadb {
                if let Some(why) = crate::server::vars::session_refusal(&name) {
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
    pub(super) fn eval_set_value(&self, session: &Session, e: &Expr) -> Result<SqlValue, Reply> {
        if let Expr::Identifier(id) = e {
            if !id.value.starts_with('@') {
                return Ok(Some(id.value.clone()));
            }
        }
        let env = self.env(session);
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

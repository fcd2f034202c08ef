//! What expressions read from the session and the server: variables (`@@x`), the session's
//! state, and the functions whose value is the server's (`DATABASE()`, `USER()`, …).

use super::*;

impl<'a> Ctx<'a> {
    /// The environment expressions of `session` are evaluated in.
    pub(super) fn env(&'a self, session: &'a Session) -> SqlEnv<'a> {
        SqlEnv { ctx: self, session }
    }
}

/// What expressions read from the session and the server.
pub(super) struct SqlEnv<'a> {
    ctx: &'a Ctx<'a>,
    session: &'a Session,
}

impl SqlEnv<'_> {
    /// The session variables whose value is the session's state, not a setting: the
    /// conditions of the statement before (`warning_count` counts every condition,
    /// `error_count` the errors), the session's clock and its connection id.
    pub(super) fn session_state_var(
        &self,
        name: &str,
        scope: Scope,
    ) -> Option<(SqlValueTyped, SqlType)> {
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
                crate::server::vars::var_type(&name.to_ascii_lowercase()).unwrap_or(VarType::Text),
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
                let pos = crate::server::source::BinlogPosition::new(
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

/// What `SELECT VERSION()` answers to MariaDB's client library.
///
/// MariaDB's `mariadb-binlog` accepts only a major version 5, 10 or 11 there ("Master reported
/// unrecognized MariaDB version" otherwise). A 5.7 version keeps it on its position-based
/// path, which reads our MySQL-flavoured stream. (A MariaDB replica takes the master's version
/// from the greeting, not from here, and uses GTIDs only when `MASTER_USE_GTID` asks for them.)
fn mariadb_tool_version() -> String {
    format!("5.7.99-tibinlog-{}", env!("CARGO_PKG_VERSION"))
}

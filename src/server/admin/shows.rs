//! The server's own SHOW forms (binlog files and status, replicas, variables, status,
//! processes, grants), SHOW CREATE TABLE/VIEW/DATABASE and PURGE BINARY LOGS.

use super::*;

impl Ctx<'_> {
    pub(super) fn show_create_database(
        &self,
        session: &Session,
        db: &str,
        if_not_exists: bool,
    ) -> Reply {
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

    /// `SHOW GRANTS [FOR CURRENT_USER[()] | FOR 'user'[@'host']]`.
    pub(super) fn show_grants(&self, user: Option<String>) -> Reply {
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

    /// Statements handled from tokens (see the module docs), or `None`.
    /// `performance_schema.{global,session}_variables`: the server's variables, the session's
    /// own values over them unless `global`.
    pub(super) fn variable_pairs(
        &self,
        session: &Session,
        global: bool,
    ) -> BTreeMap<String, String> {
        let mut vars = self.globals.clone();
        for (k, v) in crate::server::vars::mysql_defaults() {
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
    pub(super) fn status_pairs(&self, session: &Session, global: bool) -> BTreeMap<String, String> {
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

    /// `SHOW CREATE TABLE` (of a table or, as MySQL answers it, of a view) and
    /// `SHOW CREATE VIEW`.
    pub(super) fn show_create(
        &self,
        session: &Session,
        view_wanted: bool,
        name: &[String],
    ) -> Reply {
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
    pub(super) fn server_show(&self, session: &Session, what: ServerShow) -> Reply {
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
                columns: crate::server::replica_status::columns(old),
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

    pub(super) fn purge(&self, to: Purge) -> Reply {
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
    pub(super) fn binlog_gtid_pos(&self, file: &str, pos: u64) -> Option<String> {
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
pub(super) fn parse_datetime(s: &str) -> Option<u64> {
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

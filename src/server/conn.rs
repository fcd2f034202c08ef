//! One client connection: handshake, TLS upgrade, authentication, the command loop.
//!
//! The top of a connection: it reads packets through [`super::transport`] and hands commands
//! to the SQL surface ([`super::admin`]) and replication commands to [`super::dump`]; neither
//! of those imports this module.
//!
//! ```text
//!  greeting ─► [SSLRequest ─► TLS handshake] ─► HandshakeResponse ─► auth exchange ─► OK | ERR 1045
//!     └─► command loop: COM_QUERY → admin, COM_REGISTER_SLAVE → registry,
//!                       COM_BINLOG_DUMP(_GTID) → dump session (the connection ends with it)
//! ```
//! Nothing a client sends can panic the task: undecodable commands get an ERR and the loop
//! goes on; a broken framing (sequence mismatch, oversized packet) closes the connection.

use std::net::SocketAddr;
use std::sync::Arc;

use tibinlog_protocol::wire::auth_exchange::{AuthExchange, AuthStep};
use tibinlog_protocol::wire::command::{decode_command, Command};
use tibinlog_protocol::wire::errors::{
    access_denied_message, ErrorCode, ER_ACCESS_DENIED_ERROR, ER_CLIENT_INTERACTION_TIMEOUT,
    ER_CON_COUNT_ERROR, ER_DBACCESS_DENIED_ERROR, ER_HANDSHAKE_ERROR, ER_MALFORMED_PACKET,
    ER_MAX_PREPARED_STMT_COUNT_REACHED, ER_NET_PACKET_TOO_LARGE, ER_SECURE_TRANSPORT_REQUIRED,
    ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_STMT_HAS_NO_OPEN_CURSOR, ER_UNKNOWN_COM_ERROR,
    ER_UNKNOWN_STMT_HANDLER, MSG_UNKNOWN_COMMAND,
};
use tibinlog_protocol::wire::handshake::{
    decode_client_hello, negotiate, server_capabilities, ClientHello, Greeting, Scramble,
};
use tibinlog_protocol::wire::packet::DEFAULT_MAX_PAYLOAD;
use tibinlog_protocol::wire::response::{
    encode_eof_into, text_result_set, ColumnSpec, ErrResponse, OkResponse,
};
use tibinlog_protocol::wire::{ColumnFlags, ColumnType, StatusFlags, WireError};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace};

use super::activity::{command_name, Activity};
use super::admin;
use super::dump;
use super::reply::{QueryReply, Reply};
use super::session::{ConnInfo, Session};
use super::transport::{ConnError, PacketIo};
use super::users::Privileges;
use super::{SessionSlot, Shared};

/// Serves one accepted TCP connection until the client quits, a dump ends, or `cancel` fires.
pub async fn serve(
    shared: Arc<Shared>,
    tcp: TcpStream,
    peer: SocketAddr,
    (id, activity): (u32, Arc<Activity>),
    cancel: CancellationToken,
) -> Result<(), ConnError> {
    let mut io = PacketIo::new(Box::new(tcp));
    io.count_into(&shared.metrics);
    if shared.registry.sessions_full() {
        // As MySQL does, in place of the greeting.
        send_err(&mut io, ER_CON_COUNT_ERROR, "Too many connections").await?;
        return Ok(());
    }
    // Until the client has authenticated it may send only small packets, and only for
    // connect_timeout: an idle or trickling socket holds a few KiB, and not for long.
    io.codec.set_max_payload(super::PRE_AUTH_MAX_PAYLOAD);
    let limit = shared.limits.connect_timeout;
    let handshake = tokio::time::timeout(
        limit,
        handshake(&shared, &mut io, peer, (id, activity), cancel.clone()),
    );
    let aborted = || shared.metrics.aborted_connects.inc();
    let (info, _slot) = tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        r = handshake => match r {
            Ok(Ok(x)) => x,
            Ok(Err(ConnError::Wire(e @ WireError::PayloadTooLarge { .. }))) => {
                aborted();
                let msg = "Got a packet bigger than 'max_allowed_packet' bytes";
                let _ = send_err(&mut io, ER_NET_PACKET_TOO_LARGE, msg).await;
                return Err(ConnError::Wire(e));
            }
            Ok(Err(e)) => {
                aborted();
                return Err(e);
            }
            Err(_elapsed) => {
                aborted();
                debug!(conn = id, %peer, ?limit, "no login within connect_timeout");
                return Ok(());
            }
        },
    };
    io.codec.set_max_payload(DEFAULT_MAX_PAYLOAD);
    info.activity
        .logged_in(&info.user, info.database.as_deref());
    tracing::Span::current().record("user", info.user.as_str());
    debug!(conn = id, user = %info.user, %peer, "authenticated");
    command_loop(shared, io, info, cancel).await
}

async fn send_err(io: &mut PacketIo, code: ErrorCode, msg: &str) -> std::io::Result<()> {
    io.send(&ErrResponse::new(code, msg).to_payload()).await
}

async fn handshake(
    shared: &Arc<Shared>,
    io: &mut PacketIo,
    peer: SocketAddr,
    (id, activity): (u32, Arc<Activity>),
    cancel: CancellationToken,
) -> Result<(ConnInfo, SessionSlot), ConnError> {
    let scramble = Scramble::generate();
    let version = if shared.identity.mariadb {
        format!("5.5.5-{}", shared.identity.version)
    } else {
        shared.identity.version.clone()
    };
    let mut greeting = Greeting::new(version, id, scramble);
    let ours = server_capabilities(shared.tls_enabled());
    greeting.capabilities = ours;
    greeting.auth_method = shared.auth_plugin;
    let mut payload = Vec::with_capacity(128);
    greeting.encode_into(&mut payload);
    io.send(&payload).await?;

    let first = io.read_packet().await?;
    let mut tls = None;
    let hello = match decode_client_hello(&first.payload) {
        Ok(ClientHello::Response(h)) => h,
        Ok(ClientHello::SslRequest { .. }) => {
            let Some(acceptor) = shared.tls.clone() else {
                send_err(io, ER_HANDSHAKE_ERROR, "Bad handshake").await?;
                return Err(ConnError::Tls(
                    "client asked for TLS, none configured".into(),
                ));
            };
            tls = Some(io.upgrade_tls(&acceptor).await?);
            let second = io.read_packet().await?;
            match decode_client_hello(&second.payload) {
                Ok(ClientHello::Response(h)) => h,
                Ok(ClientHello::SslRequest { .. }) | Err(_) => {
                    send_err(io, ER_HANDSHAKE_ERROR, "Bad handshake").await?;
                    return Err(ConnError::Tls("no handshake response after TLS".into()));
                }
            }
        }
        Err(e) => {
            send_err(io, ER_HANDSHAKE_ERROR, "Bad handshake").await?;
            return Err(e.into());
        }
    };

    let host = peer.ip().to_string();
    if shared.require_secure_transport && tls.is_none() {
        send_err(
            io,
            ER_SECURE_TRANSPORT_REQUIRED,
            "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
        )
        .await?;
        return Err(ConnError::Tls(
            "plain connection refused: require_secure_transport".into(),
        ));
    }
    let credential = shared.users.credential(&hello.user);
    let mut auth = AuthExchange::new(scramble, shared.auth_plugin, credential, tls.is_some())
        .with_rsa_key(shared.rsa_key.clone());
    let mut step = match auth.on_handshake_response(&hello) {
        Ok(s) => s,
        Err(e) => {
            send_err(io, ER_HANDSHAKE_ERROR, "Bad handshake").await?;
            return Err(e.into());
        }
    };
    let slot = loop {
        match step {
            AuthStep::Send(p) => {
                io.send(&p).await?;
                let reply = io.read_packet().await?;
                step = match auth.on_client_packet(&reply.payload) {
                    Ok(s) => s,
                    Err(e) => {
                        send_err(io, ER_HANDSHAKE_ERROR, "Bad handshake").await?;
                        return Err(e.into());
                    }
                };
            }
            AuthStep::Accept { .. } if !shared.certificate_accepted(tls.as_ref()) => {
                // MySQL answers a user whose REQUIRE X509/SUBJECT the connection does not meet
                // with the access-denied error, after the password checked out.
                let msg = access_denied_message(&hello.user, &host, true);
                send_err(io, ER_ACCESS_DENIED_ERROR, &msg).await?;
                return Err(ConnError::AuthFailed { user: hello.user });
            }
            AuthStep::Accept { before_ok } => {
                if let Some(digest) = auth.learned_fast_digest() {
                    shared.users.remember(&hello.user, digest);
                }
                let privileges = shared.users.privileges(&hello.user);
                let denied = hello
                    .database
                    .as_deref()
                    .and_then(|db| db_access_denied(privileges, &hello.user, &host, db));
                if let Some(msg) = denied {
                    send_err(io, ER_DBACCESS_DENIED_ERROR, &msg).await?;
                    return Err(ConnError::AuthFailed { user: hello.user });
                }
                let Some(slot) = shared.registry.admit_session() else {
                    send_err(io, ER_CON_COUNT_ERROR, "Too many connections").await?;
                    return Err(ConnError::Internal("max_connections reached".into()));
                };
                if let Some(p) = before_ok {
                    io.queue(&p);
                }
                io.queue(&OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).to_payload());
                io.flush().await?;
                break slot;
            }
            AuthStep::Reject(r) => {
                let msg = access_denied_message(&hello.user, &host, r.using_password);
                send_err(io, r.reason.error_code(), &msg).await?;
                return Err(ConnError::AuthFailed { user: hello.user });
            }
        }
    };
    let mariadb_client = is_mariadb_client(&hello.connect_attrs);
    debug!(conn = id, attrs = ?hello.connect_attrs, "client attributes");
    let privileges = shared.users.privileges(&hello.user);
    let info = ConnInfo {
        id,
        privileges,
        cancel,
        interrupt: shared.registry.interrupt_flag(id),
        mariadb_client,
        user: hello.user,
        host,
        capabilities: negotiate(ours, hello.capabilities),
        database: hello.database,
        tls,
        activity,
    };
    Ok((info, slot))
}

/// MySQL's 1044 text when an account may not use database `db` (no SELECT privilege).
pub(super) fn db_access_denied(
    privileges: Privileges,
    user: &str,
    host: &str,
    db: &str,
) -> Option<String> {
    (!privileges.contains(Privileges::SELECT) && !crate::sql::infoschema::is_schema(db))
        .then(|| format!("Access denied for user '{user}'@'{host}' to database '{db}'"))
}

/// True for MariaDB's client libraries, by their connect attributes: Connector/C (what
/// `mariadb-binlog` and the `mariadb` client use) says `_client_name=libmariadb`; the client
/// built into the MariaDB server (a replica's I/O thread) says `_client_name=libmysql` with
/// the server's own `_client_version` (10.x, 11.x), where MySQL's libmysqlclient says 5.x–9.x.
pub fn is_mariadb_client(attrs: &[(String, String)]) -> bool {
    let attr = |name: &str| {
        attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    match attr("_client_name") {
        Some(n) if n.eq_ignore_ascii_case("libmariadb") => true,
        Some(n) if n.eq_ignore_ascii_case("libmysql") => attr("_client_version")
            .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
            .is_some_and(|major| major >= 10),
        _ => false,
    }
}

async fn command_loop(
    shared: Arc<Shared>,
    mut io: PacketIo,
    info: ConnInfo,
    cancel: CancellationToken,
) -> Result<(), ConnError> {
    let mut session = Session {
        database: info.database.clone(),
        tls: info.tls.clone(),
        ..Session::default()
    };
    let mut stmts = Statements::default();
    // One timer for the session, re-armed before each read.
    let idle_timer = tokio::time::sleep(std::time::Duration::ZERO);
    tokio::pin!(idle_timer);
    loop {
        io.codec.reset_seq();
        info.activity.idle(session.database.as_deref());
        let idle = session.wait_timeout(shared.limits.wait_timeout);
        let now = tokio::time::Instant::now();
        // A session may set any number of seconds; past the clock's range it never expires.
        let deadline = now
            .checked_add(idle)
            .unwrap_or(now + std::time::Duration::from_secs(86_400 * 365 * 30));
        idle_timer.as_mut().reset(deadline);
        let packet = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            r = io.read_packet() => match r {
                Ok(p) => p,
                Err(ConnError::Closed) => return Ok(()),
                Err(e) => return Err(e),
            },
            () = &mut idle_timer => {
                // MySQL 8.0.24+ tells the client why before closing.
                let msg = "The client was disconnected by the server because of inactivity. \
                           See wait_timeout and interactive_timeout for configuring this \
                           behavior.";
                let _ = send_err(&mut io, ER_CLIENT_INTERACTION_TIMEOUT, msg).await;
                debug!(conn = info.id, ?idle, "idle past wait_timeout");
                return Ok(());
            }
        };
        // A KILL QUERY that found no statement running is forgotten, as MySQL forgets it.
        info.interrupt
            .store(false, std::sync::atomic::Ordering::Relaxed);
        io.set_write_timeout(session.net_write_timeout(shared.net_write_timeout));
        let cmd = match decode_command(&packet.payload) {
            Ok(c) => c,
            Err(e) if !e.is_fatal() => {
                send_err(
                    &mut io,
                    ER_MALFORMED_PACKET,
                    "Malformed communication packet.",
                )
                .await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        trace!(conn = info.id, command = cmd.name(), "command");
        let statement = match &cmd {
            Command::Query(sql) => Some(sql.as_str()),
            _ => None,
        };
        info.activity.begin(command_name(&cmd), statement);
        let com = statement.map(super::activity::com_name);
        shared.metrics.count_command(cmd.name(), com);
        info.activity
            .count((io.sent_bytes(), io.received_bytes()), cmd.name(), com);
        match cmd {
            Command::Quit => return Ok(()),
            Command::Ping => send_ok(&mut io).await?,
            Command::InitDb(db) => {
                if let Some(msg) = db_access_denied(info.privileges, &info.user, &info.host, &db) {
                    send_err(&mut io, ER_DBACCESS_DENIED_ERROR, &msg).await?;
                } else {
                    session.database = Some(db);
                    send_ok(&mut io).await?;
                }
            }
            Command::ResetConnection => {
                session = Session::default();
                send_ok(&mut io).await?;
            }
            Command::SetOption(_) => {
                let mut p = Vec::new();
                encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p);
                io.send(&p).await?;
            }
            Command::Query(sql) => {
                debug!(conn = info.id, user = %info.user, sql = %sql, "query");
                // Statements may read binlog files (SHOW BINLOG EVENTS) or the schema store:
                // run them on the blocking pool, with the session moved there and back.
                let (sh, inf) = (shared.clone(), info.clone());
                let task = tokio::task::spawn_blocking(move || {
                    let replies = admin::execute(&sh, &inf, &mut session, &sql);
                    (session, replies)
                });
                let (s, replies) = task
                    .await
                    .map_err(|e| ConnError::Internal(format!("query task failed: {e}")))?;
                session = s;
                send_replies(&mut io, &info, replies).await?;
            }
            Command::RegisterSlave(_) | Command::BinlogDump(_) | Command::BinlogDumpGtid(_)
                if !info.privileges.contains(Privileges::REPLICATION_SLAVE) =>
            {
                let msg = super::users::need_message("REPLICATION SLAVE");
                send_err(&mut io, ER_SPECIFIC_ACCESS_DENIED_ERROR, &msg).await?;
            }
            Command::RegisterSlave(r) => {
                let uuid = session
                    .user_var("replica_uuid")
                    .or_else(|| session.user_var("slave_uuid"))
                    .unwrap_or_default();
                shared.registry.register_replica(info.id, r, uuid);
                send_ok(&mut io).await?;
            }
            Command::BinlogDump(d) => {
                shared.registry.start_dump(info.id, d.server_id, false);
                tracing::Span::current().record("server_id", d.server_id);
                let req = dump::DumpRequest::Position {
                    file: d.filename,
                    pos: u64::from(d.pos),
                    flags: d.flags,
                    server_id: d.server_id,
                };
                return dump::run(shared, io, &info, &session, req, cancel).await;
            }
            Command::BinlogDumpGtid(d) => {
                shared.registry.start_dump(info.id, d.server_id, true);
                tracing::Span::current().record("server_id", d.server_id);
                let req = dump::DumpRequest::Gtid {
                    sids: d.sids,
                    flags: d.flags,
                    server_id: d.server_id,
                };
                return dump::run(shared, io, &info, &session, req, cancel).await;
            }
            Command::StmtPrepare(sql) => {
                debug!(conn = info.id, sql = %sql, "prepare");
                let (sh, inf) = (shared.clone(), info.clone());
                let task = tokio::task::spawn_blocking(move || {
                    let r = admin::prepare(&sh, &inf, &mut session, &sql);
                    (session, sql, r)
                });
                let (s, sql, r) = task
                    .await
                    .map_err(|e| ConnError::Internal(format!("prepare task failed: {e}")))?;
                session = s;
                match r {
                    Ok(p) => stmts.prepared(&mut io, &info, sql, p).await?,
                    Err(reply) => {
                        shared.note_reply(&info, &sql, &reply);
                        send_replies(&mut io, &info, vec![reply]).await?
                    }
                }
            }
            Command::StmtExecute(ex) => {
                let Some(stmt) = stmts.map.get_mut(&ex.stmt_id) else {
                    send_err(
                        &mut io,
                        ER_UNKNOWN_STMT_HANDLER,
                        &format!(
                            "Unknown prepared statement handler ({}) given to mysqld_stmt_execute",
                            ex.stmt_id
                        ),
                    )
                    .await?;
                    continue;
                };
                stmt.cursor = None;
                let params = match tibinlog_protocol::wire::stmt::decode_params(
                    &ex.params,
                    stmt.params,
                    &mut stmt.types,
                    &stmt.long_data,
                ) {
                    Ok(p) => p,
                    Err(e) => {
                        send_err(&mut io, ER_MALFORMED_PACKET, &e.to_string()).await?;
                        continue;
                    }
                };
                stmt.long_data.iter_mut().for_each(|d| *d = None);
                let sql = match admin::bind(&stmt.sql, &params) {
                    Ok(sql) => sql,
                    Err(reply) => {
                        send_replies(&mut io, &info, vec![reply]).await?;
                        continue;
                    }
                };
                debug!(conn = info.id, sql = %sql, "execute");
                let (sh, inf) = (shared.clone(), info.clone());
                let task = tokio::task::spawn_blocking(move || {
                    let replies = admin::execute(&sh, &inf, &mut session, &sql);
                    (session, replies)
                });
                let (s, mut replies) = task
                    .await
                    .map_err(|e| ConnError::Internal(format!("query task failed: {e}")))?;
                session = s;
                let cursor = ex.flags & tibinlog_protocol::wire::stmt::CURSOR_TYPE_READ_ONLY != 0;
                match replies.pop() {
                    Some(Reply::Query(q)) if cursor => {
                        send_cursor_header(&mut io, &info, &q.columns).await?;
                        if let Some(stmt) = stmts.map.get_mut(&ex.stmt_id) {
                            stmt.cursor = Some(q);
                        }
                    }
                    Some(reply) => send_binary_reply(&mut io, &info, reply).await?,
                    None => send_ok(&mut io).await?,
                }
            }
            Command::StmtFetch { stmt_id, rows } => {
                let Some(q) = stmts.map.get_mut(&stmt_id).and_then(|s| s.cursor.take()) else {
                    send_err(
                        &mut io,
                        ER_STMT_HAS_NO_OPEN_CURSOR,
                        &format!("The statement ({stmt_id}) has no open cursor."),
                    )
                    .await?;
                    continue;
                };
                let deprecate_eof =
                    tibinlog_protocol::wire::response::deprecate_eof(info.capabilities);
                if let Some(q) =
                    fetch(&mut io, q, rows, deprecate_eof, info.interrupt.clone()).await?
                {
                    if let Some(stmt) = stmts.map.get_mut(&stmt_id) {
                        stmt.cursor = Some(q);
                    }
                }
            }
            Command::StmtClose(id) => {
                stmts.map.remove(&id);
            }
            Command::StmtReset(id) => {
                match stmts.map.get_mut(&id) {
                    Some(stmt) => {
                        stmt.cursor = None;
                        stmt.long_data.iter_mut().for_each(|d| *d = None);
                        send_ok(&mut io).await?;
                    }
                    None => {
                        send_err(
                        &mut io,
                        ER_UNKNOWN_STMT_HANDLER,
                        &format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_reset"),
                    )
                    .await?;
                    }
                }
            }
            Command::StmtSendLongData {
                stmt_id,
                param,
                data,
            } => {
                if let Some(slot) = stmts
                    .map
                    .get_mut(&stmt_id)
                    .and_then(|s| s.long_data.get_mut(usize::from(param)))
                {
                    let total = slot.as_ref().map_or(0, Vec::len) + data.len();
                    if total <= MAX_LONG_DATA {
                        slot.get_or_insert_with(Vec::new).extend_from_slice(&data);
                    }
                }
            }
            Command::FieldList { table, wildcard } => {
                let mut sql = format!(
                    "SHOW FULL COLUMNS FROM {}",
                    crate::sql::show::quote_ident(&table)
                );
                if !wildcard.is_empty() {
                    sql.push_str(&format!(" LIKE {}", crate::sql::show::quote_str(&wildcard)));
                }
                let (sh, inf) = (shared.clone(), info.clone());
                let task = tokio::task::spawn_blocking(move || {
                    let replies = admin::execute(&sh, &inf, &mut session, &sql);
                    (session, replies)
                });
                let (s, replies) = task
                    .await
                    .map_err(|e| ConnError::Internal(format!("field list task failed: {e}")))?;
                session = s;
                send_field_list(&mut io, &info, replies).await?;
            }
            Command::Statistics | Command::Unknown(_) => {
                send_err(&mut io, ER_UNKNOWN_COM_ERROR, MSG_UNKNOWN_COMMAND).await?;
            }
        }
    }
}

async fn send_ok(io: &mut PacketIo) -> std::io::Result<()> {
    io.send(&OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).to_payload())
        .await
}

/// Sends the answers to one COM_QUERY: every reply but the last carries
/// SERVER_MORE_RESULTS_EXISTS. An ERR ends the batch (MySQL stops at the first error).
async fn send_replies(
    io: &mut PacketIo,
    info: &ConnInfo,
    replies: Vec<Reply>,
) -> Result<(), ConnError> {
    let n = replies.len();
    for (i, reply) in replies.into_iter().enumerate() {
        let mut status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        if i + 1 < n {
            status |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        }
        match reply {
            Reply::Ok { affected, warnings } => {
                let mut ok = OkResponse::new(status);
                ok.affected_rows = affected;
                ok.warnings = u16::try_from(warnings.len()).unwrap_or(u16::MAX);
                io.queue(&ok.to_payload());
            }
            Reply::Err(e) => {
                io.queue(&e.to_payload());
                break;
            }
            Reply::Query(q) => {
                if !send_query(io, info, q, status).await? {
                    break;
                }
            }
            Reply::Rows { columns, rows } => {
                match text_result_set(&columns, rows, info.capabilities, status) {
                    Ok(payloads) => payloads.iter().for_each(|p| io.queue(p)),
                    Err(e) => {
                        let err = ErrResponse::new(
                            tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR,
                            e.to_string(),
                        );
                        io.queue(&err.to_payload());
                        break;
                    }
                }
            }
        }
    }
    io.flush().await?;
    Ok(())
}

/// One text-protocol row.
fn encode_text_row(
    row: &[tibinlog_protocol::value::Value],
    types: &[crate::sql::types::SqlType],
    payload: &mut Vec<u8>,
    cell: &mut Vec<u8>,
) {
    for (v, ty) in row.iter().zip(types) {
        cell.clear();
        if crate::sql::text::write_text(v, ty, cell) {
            tibinlog_protocol::wire::response::put_lenenc_bytes(payload, cell);
        } else {
            payload.push(0xFB);
        }
    }
}

/// Most bytes COM_STMT_SEND_LONG_DATA may collect for one parameter (max_allowed_packet).
const MAX_LONG_DATA: usize = 64 << 20;

/// A prepared statement of a session.
struct Stmt {
    sql: String,
    params: usize,
    /// Parameter types bound by the last execute that sent them.
    types: Vec<(u8, bool)>,
    long_data: Vec<Option<Vec<u8>>>,
    /// The open cursor (CURSOR_TYPE_READ_ONLY), rows fetched by COM_STMT_FETCH.
    cursor: Option<QueryReply>,
}

/// The prepared statements of a session.
#[derive(Default)]
struct Statements {
    map: std::collections::HashMap<u32, Stmt>,
    next_id: u32,
}

/// Most prepared statements one session may hold (MySQL's max_prepared_stmt_count is global).
const MAX_STATEMENTS: usize = 16_382;

impl Statements {
    /// Stores a prepared statement and answers COM_STMT_PREPARE.
    async fn prepared(
        &mut self,
        io: &mut PacketIo,
        info: &ConnInfo,
        sql: String,
        p: admin::Prepared,
    ) -> Result<(), ConnError> {
        if self.map.len() >= MAX_STATEMENTS {
            return Ok(send_err(
                io,
                ER_MAX_PREPARED_STMT_COUNT_REACHED,
                &format!("Can't create more than max_prepared_stmt_count statements (current value: {MAX_STATEMENTS})"),
            )
            .await?);
        }
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let id = self.next_id;
        let no_eof = tibinlog_protocol::wire::response::deprecate_eof(info.capabilities);
        let mut p_buf = Vec::with_capacity(64);
        tibinlog_protocol::wire::stmt::encode_prepare_ok_into(
            id,
            u16::try_from(p.columns.len()).unwrap_or(u16::MAX),
            u16::try_from(p.params).unwrap_or(u16::MAX),
            &mut p_buf,
        );
        io.queue(&p_buf);
        for defs in [
            (0..p.params)
                .map(|_| ColumnSpec::new("?", ColumnType::MYSQL_TYPE_VAR_STRING, 63, 0))
                .collect::<Vec<_>>(),
            p.columns,
        ] {
            if defs.is_empty() {
                continue;
            }
            for c in &defs {
                p_buf.clear();
                c.encode_into(&mut p_buf);
                io.queue(&p_buf);
            }
            if !no_eof {
                p_buf.clear();
                encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p_buf);
                io.queue(&p_buf);
            }
        }
        io.flush().await?;
        self.map.insert(
            id,
            Stmt {
                sql,
                params: p.params,
                types: Vec::new(),
                long_data: vec![None; p.params],
                cursor: None,
            },
        );
        Ok(())
    }
}

/// Column definitions of a cursor's result set, ending with SERVER_STATUS_CURSOR_EXISTS.
async fn send_cursor_header(
    io: &mut PacketIo,
    info: &ConnInfo,
    columns: &[ColumnSpec],
) -> Result<(), ConnError> {
    let mut p = Vec::with_capacity(256);
    tibinlog_protocol::wire::response::encode_column_count_into(columns.len(), &mut p);
    io.queue(&p);
    for c in columns {
        p.clear();
        c.encode_into(&mut p);
        io.queue(&p);
    }
    p.clear();
    let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_STATUS_CURSOR_EXISTS;
    if tibinlog_protocol::wire::response::deprecate_eof(info.capabilities) {
        OkResponse::new(status).encode_as_eof_into(&mut p);
    } else {
        encode_eof_into(0, status, &mut p);
    }
    io.queue(&p);
    io.flush().await?;
    Ok(())
}

/// COM_STMT_FETCH: up to `rows` binary rows of the cursor, then EOF or its OK form (with
/// SERVER_STATUS_LAST_ROW_SENT when the rows are exhausted). The cursor, if rows remain.
async fn fetch(
    io: &mut PacketIo,
    q: QueryReply,
    rows: u32,
    deprecate_eof: bool,
    interrupt: Arc<std::sync::atomic::AtomicBool>,
) -> Result<Option<QueryReply>, ConnError> {
    let codec = io.codec.clone();
    let task = tokio::task::spawn_blocking(move || {
        let mut q = q;
        let mut codec = codec;
        let mut out = Vec::new();
        let mut row = Vec::new();
        let (mut payload, mut cell) = (Vec::new(), Vec::new());
        let mut sent = 0u32;
        let mut done = false;
        let mut err = None;
        while sent < rows.max(1) {
            if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                err = Some(interrupted());
                break;
            }
            match q.op.next(&mut row) {
                Ok(true) => {
                    payload.clear();
                    crate::sql::binary::write_binary_row(&row, &q.types, &mut payload, &mut cell);
                    codec.encode(&payload, &mut out);
                    sent += 1;
                }
                Ok(false) => {
                    done = true;
                    break;
                }
                Err(e) => {
                    err = Some(ErrResponse::new(e.code, e.message));
                    break;
                }
            }
        }
        (q, codec, out, done, err)
    });
    let (q, codec, out, done, err) = task
        .await
        .map_err(|e| ConnError::Internal(format!("fetch task failed: {e}")))?;
    io.queue_framed(&out);
    io.codec = codec;
    let mut p = Vec::new();
    if let Some(e) = err {
        e.encode_into(&mut p);
        io.queue(&p);
        io.flush().await?;
        return Ok(None);
    }
    let mut status =
        StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_STATUS_CURSOR_EXISTS;
    if done {
        status |= StatusFlags::SERVER_STATUS_LAST_ROW_SENT;
    }
    // As after any rows: an OK packet with the 0xFE header when the client asked for
    // CLIENT_DEPRECATE_EOF (Connector/J takes a 5-byte EOF there for a row), else an EOF.
    if deprecate_eof {
        OkResponse::new(status).encode_as_eof_into(&mut p);
    } else {
        encode_eof_into(0, status, &mut p);
    }
    io.queue(&p);
    io.flush().await?;
    Ok((!done).then_some(q))
}

/// The answer to COM_STMT_EXECUTE without a cursor: a binary result set, OK or ERR.
async fn send_binary_reply(
    io: &mut PacketIo,
    info: &ConnInfo,
    reply: Reply,
) -> Result<(), ConnError> {
    let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
    match reply {
        Reply::Query(q) => {
            send_result_set(io, info, q, status, true).await?;
            io.flush().await?;
            Ok(())
        }
        Reply::Rows { columns, rows } => {
            // Static answers (SHOW MASTER STATUS …): text cells typed as their columns say.
            let types: Vec<crate::sql::types::SqlType> = columns
                .iter()
                .map(|c| match c.column_type {
                    ColumnType::MYSQL_TYPE_LONGLONG => {
                        let t = crate::sql::types::SqlType::bigint();
                        if c.flags.contains(ColumnFlags::UNSIGNED_FLAG) {
                            t.unsigned()
                        } else {
                            t
                        }
                    }
                    _ => crate::sql::types::SqlType::string(1024),
                })
                .collect();
            let values: Vec<Vec<tibinlog_protocol::value::Value>> = rows
                .into_iter()
                .map(|r| {
                    r.into_iter()
                        .zip(&types)
                        .map(|(v, t)| match v {
                            None => tibinlog_protocol::value::Value::Null,
                            Some(s) if t.is_integer() && t.unsigned => s
                                .parse()
                                .map(tibinlog_protocol::value::Value::UInt)
                                .unwrap_or(tibinlog_protocol::value::Value::Bytes(s.into_bytes())),
                            Some(s) if t.is_integer() => s
                                .parse()
                                .map(tibinlog_protocol::value::Value::Int)
                                .unwrap_or(tibinlog_protocol::value::Value::Bytes(s.into_bytes())),
                            Some(s) => tibinlog_protocol::value::Value::Bytes(s.into_bytes()),
                        })
                        .collect()
                })
                .collect();
            let q = QueryReply {
                columns,
                types,
                op: Box::new(crate::sql::exec::Values::new(values)),
            };
            send_result_set(io, info, q, status, true).await?;
            io.flush().await?;
            Ok(())
        }
        other => send_replies(io, info, vec![other]).await,
    }
}

/// COM_FIELD_LIST: the table's column definitions, then EOF (no rows).
async fn send_field_list(
    io: &mut PacketIo,
    info: &ConnInfo,
    replies: Vec<Reply>,
) -> Result<(), ConnError> {
    let mut p = Vec::new();
    match replies.into_iter().next() {
        Some(Reply::Query(mut q)) => {
            let mut row = Vec::new();
            while let Ok(true) = q.op.next(&mut row) {
                let name = row
                    .first()
                    .map(|v| crate::sql::text::to_text(v, &q.types[0]).unwrap_or_default())
                    .unwrap_or_default();
                let spec = ColumnSpec::text(name);
                p.clear();
                spec.encode_into(&mut p);
                p.push(0xFB);
                io.queue(&p);
            }
            p.clear();
            encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p);
            io.queue(&p);
            io.flush().await?;
            Ok(())
        }
        Some(other) => send_replies(io, info, vec![other]).await,
        None => send_ok(io).await.map_err(Into::into),
    }
}

/// Bytes of framed rows a query hands over at once.
const QUERY_CHUNK: usize = 64 << 10;
/// Chunks in flight between the query and the socket (the back-pressure bound).
const QUERY_CHUNKS_IN_FLIGHT: usize = 4;

/// Streams a query's result set: the column definitions, then rows as the operator produces
/// them on the blocking pool, framed there and handed over in chunks through a bounded channel
/// (a client that reads slowly holds the query back; one that goes away stops it), then the
/// end packet, or an ERR if the query fails midway. False when it ended with an ERR.
async fn send_query(
    io: &mut PacketIo,
    info: &ConnInfo,
    q: QueryReply,
    status: StatusFlags,
) -> Result<bool, ConnError> {
    send_result_set(io, info, q, status, false).await
}

/// MySQL's answer to a statement stopped by `KILL QUERY`.
fn interrupted() -> ErrResponse {
    ErrResponse::new(
        tibinlog_protocol::wire::errors::ER_QUERY_INTERRUPTED,
        "Query execution was interrupted",
    )
}

/// [`send_query`] in the text (`binary = false`) or binary row format.
async fn send_result_set(
    io: &mut PacketIo,
    info: &ConnInfo,
    q: QueryReply,
    status: StatusFlags,
    binary: bool,
) -> Result<bool, ConnError> {
    use tibinlog_protocol::wire::response::encode_column_count_into;
    let no_eof = tibinlog_protocol::wire::response::deprecate_eof(info.capabilities);
    let mut p = Vec::with_capacity(256);
    encode_column_count_into(q.columns.len(), &mut p);
    io.queue(&p);
    for c in &q.columns {
        p.clear();
        c.encode_into(&mut p);
        io.queue(&p);
    }
    if !no_eof {
        p.clear();
        encode_eof_into(0, status, &mut p);
        io.queue(&p);
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(QUERY_CHUNKS_IN_FLIGHT);
    let codec = io.codec.clone();
    let types = q.types;
    let mut op = q.op;
    let interrupt = info.interrupt.clone();
    let producer = tokio::task::spawn_blocking(move || {
        let mut codec = codec;
        let mut row = Vec::new();
        let mut payload = Vec::with_capacity(1024);
        let mut cell = Vec::with_capacity(256);
        let mut chunk = Vec::with_capacity(QUERY_CHUNK + 1024);
        let result = loop {
            if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                break Err(interrupted());
            }
            match op.next(&mut row) {
                Ok(true) => {
                    payload.clear();
                    if binary {
                        crate::sql::binary::write_binary_row(&row, &types, &mut payload, &mut cell);
                    } else {
                        encode_text_row(&row, &types, &mut payload, &mut cell);
                    }
                    codec.encode(&payload, &mut chunk);
                    if chunk.len() >= QUERY_CHUNK {
                        let full =
                            std::mem::replace(&mut chunk, Vec::with_capacity(QUERY_CHUNK + 1024));
                        if tx.blocking_send(full).is_err() {
                            break Ok(());
                        }
                    }
                }
                Ok(false) => break Ok(()),
                Err(e) => break Err(ErrResponse::new(e.code, e.message)),
            }
        };
        if !chunk.is_empty() {
            let _ = tx.blocking_send(chunk);
        }
        (codec, result)
    });
    // The rows go out while they are produced; a client that stops reading for the session's
    // net_write_timeout, or a KILL of the connection, ends the statement (the producer stops
    // at its next send) and the connection.
    let mut write_failed = None;
    loop {
        let chunk = tokio::select! {
            c = rx.recv() => c,
            _ = info.cancel.cancelled() => {
                write_failed = Some(ConnError::Closed);
                break;
            }
        };
        let Some(chunk) = chunk else { break };
        io.queue_framed(&chunk);
        if io.pending() >= QUERY_CHUNK {
            let flushed = tokio::select! {
                r = io.flush_timed() => r,
                _ = info.cancel.cancelled() => {
                    write_failed = Some(ConnError::Closed);
                    break;
                }
            };
            if let Err(e) = flushed {
                write_failed = Some(e.into());
                break;
            }
        }
    }
    drop(rx);
    let (codec, result) = producer
        .await
        .map_err(|e| ConnError::Internal(format!("query task failed: {e}")))?;
    if let Some(e) = write_failed {
        return Err(e);
    }
    io.codec = codec;
    p.clear();
    let ok = match result {
        Ok(()) => {
            if no_eof {
                OkResponse::new(status).encode_as_eof_into(&mut p);
            } else {
                encode_eof_into(0, status, &mut p);
            }
            true
        }
        Err(e) => {
            e.encode_into(&mut p);
            false
        }
    };
    io.queue(&p);
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::is_mariadb_client;

    fn attrs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn mariadb_client_libraries_are_recognised_by_their_attributes() {
        // mariadb-binlog, the mariadb CLI (Connector/C)
        assert!(is_mariadb_client(&attrs(&[
            ("_client_name", "libmariadb"),
            ("_client_version", "3.3.14")
        ])));
        // a MariaDB 10.11 replica's I/O thread (as captured from mariadbd 10.11.19)
        assert!(is_mariadb_client(&attrs(&[
            ("_client_name", "libmysql"),
            ("_client_version", "10.11.19"),
            ("_os", "debian-linux-gnu")
        ])));
        assert!(is_mariadb_client(&attrs(&[
            ("_client_name", "libmysql"),
            ("_client_version", "11.4.2")
        ])));
        // MySQL's libmysqlclient (mysqlbinlog, a MySQL replica), other drivers, no attributes
        for not in [
            attrs(&[("_client_name", "libmysql"), ("_client_version", "8.0.36")]),
            attrs(&[("_client_name", "libmysql"), ("_client_version", "5.7.44")]),
            attrs(&[("_client_name", "libmysql")]),
            attrs(&[("_client_name", "pymysql"), ("_client_version", "1.1.1")]),
            attrs(&[("_client_name", "mysql_async")]),
            attrs(&[]),
        ] {
            assert!(!is_mariadb_client(&not), "{not:?}");
        }
    }
}

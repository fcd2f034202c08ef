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
//!
//! `send`: the answers a connection sends (OK, ERR, result sets); `stmt`: prepared statements
//! and their cursors.

mod send;
mod stmt;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use tibinlog_protocol::wire::auth_exchange::{AuthExchange, AuthStep};
use tibinlog_protocol::wire::command::{
    decode_command, BinlogDump, BinlogDumpGtid, Command, RegisterSlave,
};
use tibinlog_protocol::wire::errors::{
    access_denied_message, ER_ACCESS_DENIED_ERROR, ER_CLIENT_INTERACTION_TIMEOUT,
    ER_CON_COUNT_ERROR, ER_DBACCESS_DENIED_ERROR, ER_HANDSHAKE_ERROR, ER_MALFORMED_PACKET,
    ER_NET_PACKET_TOO_LARGE, ER_SECURE_TRANSPORT_REQUIRED, ER_SPECIFIC_ACCESS_DENIED_ERROR,
    ER_UNKNOWN_COM_ERROR, MSG_UNKNOWN_COMMAND,
};
use tibinlog_protocol::wire::handshake::{
    decode_client_hello, negotiate, server_capabilities, ClientHello, Greeting, Scramble,
};
use tibinlog_protocol::wire::packet::{Packet, DEFAULT_MAX_PAYLOAD};
use tibinlog_protocol::wire::response::{encode_eof_into, OkResponse};
use tibinlog_protocol::wire::stmt::Execute;
use tibinlog_protocol::wire::{StatusFlags, WireError};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace};

use super::activity::{command_name, Activity};
use super::admin;
use super::dump;
use super::session::{ConnInfo, Session};
use super::transport::{ConnError, PacketIo};
use super::users::{db_access_denied, Privileges};
use super::{SessionSlot, Shared};
use send::{send_err, send_field_list, send_ok, send_replies};
use stmt::Statements;

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

/// Serves the commands of an authenticated session until the client quits, the connection
/// ends, or a dump takes the connection over.
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
        let read = next_packet(
            &shared,
            &mut io,
            &info,
            &session,
            &cancel,
            idle_timer.as_mut(),
        );
        let Some(packet) = read.await? else {
            return Ok(());
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
        note_command(&shared, &io, &info, &cmd);
        match cmd {
            Command::Quit => return Ok(()),
            Command::Ping => send_ok(&mut io).await?,
            Command::InitDb(db) => init_db(&mut io, &info, &mut session, db).await?,
            Command::ResetConnection => {
                session = Session::default();
                send_ok(&mut io).await?;
            }
            Command::SetOption(_) => {
                let mut p = Vec::new();
                encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p);
                io.send(&p).await?;
            }
            Command::Query(sql) => query(&shared, &mut io, &info, &mut session, sql).await?,
            Command::RegisterSlave(_) | Command::BinlogDump(_) | Command::BinlogDumpGtid(_)
                if !info.privileges.contains(Privileges::REPLICATION_SLAVE) =>
            {
                let msg = super::users::need_message("REPLICATION SLAVE");
                send_err(&mut io, ER_SPECIFIC_ACCESS_DENIED_ERROR, &msg).await?;
            }
            Command::RegisterSlave(r) => {
                register_replica(&shared, &mut io, &info, &session, r).await?;
            }
            Command::BinlogDump(d) => {
                let req = dump_from_position(&shared, &info, d);
                return dump::run(shared, io, &info, &session, req, cancel).await;
            }
            Command::BinlogDumpGtid(d) => {
                let req = dump_from_gtids(&shared, &info, d);
                return dump::run(shared, io, &info, &session, req, cancel).await;
            }
            Command::StmtPrepare(sql) => {
                prepare(&shared, &mut io, &info, &mut session, &mut stmts, sql).await?;
            }
            Command::StmtExecute(ex) => {
                execute(&shared, &mut io, &info, &mut session, &mut stmts, ex).await?;
            }
            Command::StmtFetch { stmt_id, rows } => {
                stmts.fetch_cursor(&mut io, &info, stmt_id, rows).await?;
            }
            Command::StmtClose(id) => stmts.close(id),
            Command::StmtReset(id) => stmts.reset(&mut io, id).await?,
            Command::StmtSendLongData {
                stmt_id,
                param,
                data,
            } => stmts.append_long_data(stmt_id, param, &data),
            Command::FieldList { table, wildcard } => {
                field_list(&shared, &mut io, &info, &mut session, &table, &wildcard).await?;
            }
            Command::Statistics | Command::Unknown(_) => {
                send_err(&mut io, ER_UNKNOWN_COM_ERROR, MSG_UNKNOWN_COMMAND).await?;
            }
        }
    }
}

/// The next packet of the session, read with the idle timer re-armed for the session's
/// `wait_timeout`; `None` when the connection is to end (the client closed it, `cancel`
/// fired, or it idled past the timeout, which it is told).
async fn next_packet(
    shared: &Shared,
    io: &mut PacketIo,
    info: &ConnInfo,
    session: &Session,
    cancel: &CancellationToken,
    mut idle_timer: Pin<&mut Sleep>,
) -> Result<Option<Packet>, ConnError> {
    io.codec.reset_seq();
    info.activity.idle(session.database.as_deref());
    let idle = session.wait_timeout(shared.limits.wait_timeout);
    let now = tokio::time::Instant::now();
    // A session may set any number of seconds; past the clock's range it never expires.
    let deadline = now
        .checked_add(idle)
        .unwrap_or(now + std::time::Duration::from_secs(86_400 * 365 * 30));
    idle_timer.as_mut().reset(deadline);
    tokio::select! {
        _ = cancel.cancelled() => Ok(None),
        r = io.read_packet() => match r {
            Ok(p) => Ok(Some(p)),
            Err(ConnError::Closed) => Ok(None),
            Err(e) => Err(e),
        },
        () = &mut idle_timer => {
            // MySQL 8.0.24+ tells the client why before closing.
            let msg = "The client was disconnected by the server because of inactivity. \
                       See wait_timeout and interactive_timeout for configuring this \
                       behavior.";
            let _ = send_err(io, ER_CLIENT_INTERACTION_TIMEOUT, msg).await;
            debug!(conn = info.id, ?idle, "idle past wait_timeout");
            Ok(None)
        }
    }
}

/// Notes a command as the session's activity and in the command counters.
fn note_command(shared: &Shared, io: &PacketIo, info: &ConnInfo, cmd: &Command) {
    trace!(conn = info.id, command = cmd.name(), "command");
    let statement = match cmd {
        Command::Query(sql) => Some(sql.as_str()),
        _ => None,
    };
    info.activity.begin(command_name(cmd), statement);
    let com = statement.map(super::activity::com_name);
    shared.metrics.count_command(cmd.name(), com);
    info.activity
        .count((io.sent_bytes(), io.received_bytes()), cmd.name(), com);
}

/// Runs `work` on the blocking pool with the session moved there and back (statements may
/// read binlog files or the schema store); `task` names it in the error if the task fails.
async fn on_blocking_pool<T: Send + 'static>(
    session: &mut Session,
    task: &str,
    work: impl FnOnce(&mut Session) -> T + Send + 'static,
) -> Result<T, ConnError> {
    let mut moved = std::mem::take(session);
    let (moved, out) = tokio::task::spawn_blocking(move || {
        let out = work(&mut moved);
        (moved, out)
    })
    .await
    .map_err(|e| ConnError::Internal(format!("{task} task failed: {e}")))?;
    *session = moved;
    Ok(out)
}

/// COM_INIT_DB: the session's database, if the account may use it.
async fn init_db(
    io: &mut PacketIo,
    info: &ConnInfo,
    session: &mut Session,
    db: String,
) -> Result<(), ConnError> {
    if let Some(msg) = db_access_denied(info.privileges, &info.user, &info.host, &db) {
        send_err(io, ER_DBACCESS_DENIED_ERROR, &msg).await?;
    } else {
        session.database = Some(db);
        send_ok(io).await?;
    }
    Ok(())
}

/// COM_QUERY: the statements run by the SQL surface, their replies sent.
async fn query(
    shared: &Arc<Shared>,
    io: &mut PacketIo,
    info: &ConnInfo,
    session: &mut Session,
    sql: String,
) -> Result<(), ConnError> {
    debug!(conn = info.id, user = %info.user, sql = %sql, "query");
    let (sh, inf) = (shared.clone(), info.clone());
    let replies = on_blocking_pool(session, "query", move |session| {
        admin::execute(&sh, &inf, session, &sql)
    })
    .await?;
    send_replies(io, info, replies).await
}

/// COM_REGISTER_SLAVE: the replica registered (for `SHOW REPLICAS`) with the UUID it set.
async fn register_replica(
    shared: &Shared,
    io: &mut PacketIo,
    info: &ConnInfo,
    session: &Session,
    r: RegisterSlave,
) -> Result<(), ConnError> {
    let uuid = session
        .user_var("replica_uuid")
        .or_else(|| session.user_var("slave_uuid"))
        .unwrap_or_default();
    shared.registry.register_replica(info.id, r, uuid);
    send_ok(io).await?;
    Ok(())
}

/// COM_BINLOG_DUMP: the dump noted as started, and what it asks for.
fn dump_from_position(shared: &Shared, info: &ConnInfo, d: BinlogDump) -> dump::DumpRequest {
    shared.registry.start_dump(info.id, d.server_id, false);
    tracing::Span::current().record("server_id", d.server_id);
    dump::DumpRequest::Position {
        file: d.filename,
        pos: u64::from(d.pos),
        flags: d.flags,
        server_id: d.server_id,
    }
}

/// COM_BINLOG_DUMP_GTID: the dump noted as started, and what it asks for.
fn dump_from_gtids(shared: &Shared, info: &ConnInfo, d: BinlogDumpGtid) -> dump::DumpRequest {
    shared.registry.start_dump(info.id, d.server_id, true);
    tracing::Span::current().record("server_id", d.server_id);
    dump::DumpRequest::Gtid {
        sids: d.sids,
        flags: d.flags,
        server_id: d.server_id,
    }
}

/// COM_STMT_PREPARE: the statement prepared by the SQL surface and kept, or its error sent.
async fn prepare(
    shared: &Arc<Shared>,
    io: &mut PacketIo,
    info: &ConnInfo,
    session: &mut Session,
    stmts: &mut Statements,
    sql: String,
) -> Result<(), ConnError> {
    debug!(conn = info.id, sql = %sql, "prepare");
    let (sh, inf) = (shared.clone(), info.clone());
    let (sql, r) = on_blocking_pool(session, "prepare", move |session| {
        let r = admin::prepare(&sh, &inf, session, &sql);
        (sql, r)
    })
    .await?;
    match r {
        Ok(p) => stmts.prepared(io, info, sql, p).await?,
        Err(reply) => {
            shared.note_reply(info, &sql, &reply);
            send_replies(io, info, vec![reply]).await?
        }
    }
    Ok(())
}

/// COM_STMT_EXECUTE: the statement bound to its parameters, run by the SQL surface, and
/// answered in the binary protocol (or as a cursor).
async fn execute(
    shared: &Arc<Shared>,
    io: &mut PacketIo,
    info: &ConnInfo,
    session: &mut Session,
    stmts: &mut Statements,
    ex: Execute,
) -> Result<(), ConnError> {
    let Some(sql) = stmts.bind(io, info, &ex).await? else {
        return Ok(());
    };
    debug!(conn = info.id, sql = %sql, "execute");
    let (sh, inf) = (shared.clone(), info.clone());
    let replies = on_blocking_pool(session, "query", move |session| {
        admin::execute(&sh, &inf, session, &sql)
    })
    .await?;
    stmts.executed(io, info, &ex, replies).await
}

/// COM_FIELD_LIST: `SHOW FULL COLUMNS` of the table, answered as column definitions.
async fn field_list(
    shared: &Arc<Shared>,
    io: &mut PacketIo,
    info: &ConnInfo,
    session: &mut Session,
    table: &str,
    wildcard: &str,
) -> Result<(), ConnError> {
    let mut sql = format!(
        "SHOW FULL COLUMNS FROM {}",
        crate::sql::show::quote_ident(table)
    );
    if !wildcard.is_empty() {
        sql.push_str(&format!(" LIKE {}", crate::sql::show::quote_str(wildcard)));
    }
    let (sh, inf) = (shared.clone(), info.clone());
    let replies = on_blocking_pool(session, "field list", move |session| {
        admin::execute(&sh, &inf, session, &sql)
    })
    .await?;
    send_field_list(io, info, replies).await
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

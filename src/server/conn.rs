//! One client connection: framing, handshake, TLS upgrade, authentication, command dispatch.
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

use tibinlog_protocol::wire::auth::Credential;
use tibinlog_protocol::wire::auth_exchange::{AuthExchange, AuthStep};
use tibinlog_protocol::wire::command::{decode_command, Command};
use tibinlog_protocol::wire::errors::{
    access_denied_message, ErrorCode, ER_HANDSHAKE_ERROR, ER_MALFORMED_PACKET,
    ER_UNKNOWN_COM_ERROR, MSG_UNKNOWN_COMMAND,
};
use tibinlog_protocol::wire::handshake::{
    decode_client_hello, negotiate, server_capabilities, ClientHello, Greeting, Scramble,
};
use tibinlog_protocol::wire::packet::{Packet, PacketCodec, DEFAULT_MAX_PAYLOAD};
use tibinlog_protocol::wire::response::{
    encode_eof_into, text_result_set, ErrResponse, OkResponse,
};
use tibinlog_protocol::wire::{CapabilityFlags, StatusFlags, WireError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace};

use super::admin::{self, Reply};
use super::dump;
use super::vars::Session;
use super::Shared;

/// A byte stream: plain TCP or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Why a connection ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol: {0}")]
    Wire(#[from] WireError),
    #[error("client closed the connection")]
    Closed,
    #[error("TLS handshake: {0}")]
    Tls(String),
    #[error("authentication failed for user {user}")]
    AuthFailed { user: String },
    #[error("dump: {0}")]
    Dump(String),
    #[error("internal: {0}")]
    Internal(String),
}

/// Packet-level I/O over a (possibly TLS) stream with one sequence counter.
pub struct PacketIo {
    stream: Box<dyn Io>,
    rbuf: Vec<u8>,
    /// Bytes of `rbuf` already consumed.
    rpos: usize,
    pub(crate) codec: PacketCodec,
    wbuf: Vec<u8>,
}

impl std::fmt::Debug for PacketIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketIo")
            .field("buffered", &(self.rbuf.len() - self.rpos))
            .field("pending_write", &self.wbuf.len())
            .finish()
    }
}

impl PacketIo {
    fn new(stream: Box<dyn Io>) -> Self {
        Self {
            stream,
            rbuf: Vec::with_capacity(4096),
            rpos: 0,
            codec: PacketCodec::new(DEFAULT_MAX_PAYLOAD),
            wbuf: Vec::with_capacity(4096),
        }
    }

    /// Reads one complete payload; `Err(Closed)` at end of stream.
    pub async fn read_packet(&mut self) -> Result<Packet, ConnError> {
        loop {
            if let Some(p) = self.codec.decode(&self.rbuf[self.rpos..])? {
                self.rpos += p.wire_len;
                if self.rpos == self.rbuf.len() {
                    self.rbuf.clear();
                    self.rpos = 0;
                }
                return Ok(p);
            }
            if self.rpos > 0 {
                self.rbuf.drain(..self.rpos);
                self.rpos = 0;
            }
            let n = self.stream.read_buf(&mut self.rbuf).await?;
            if n == 0 {
                return Err(ConnError::Closed);
            }
        }
    }

    /// Reads raw bytes, bypassing framing (0 = the client closed the stream).
    pub async fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.stream.read(buf).await
    }

    /// Frames `payload` into the write buffer.
    pub fn queue(&mut self, payload: &[u8]) {
        self.codec.encode(payload, &mut self.wbuf);
    }

    /// Frames a payload made of `parts` (e.g. the 0x00 of a binlog event packet and the event).
    pub fn queue_parts(&mut self, parts: &[&[u8]]) {
        self.codec.encode_parts(parts, &mut self.wbuf);
    }

    /// Bytes queued but not yet flushed.
    pub fn pending(&self) -> usize {
        self.wbuf.len()
    }

    /// Writes everything queued.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        self.stream.flush().await
    }

    /// Queues and flushes one payload.
    pub async fn send(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.queue(payload);
        self.flush().await
    }

    /// The stream, with any bytes already read but not consumed put back in front of it (a
    /// client starts its TLS handshake right behind its SSLRequest, without waiting).
    fn into_stream(self) -> Box<dyn Io> {
        let rest = self.rbuf[self.rpos..].to_vec();
        if rest.is_empty() {
            self.stream
        } else {
            Box::new(Prefixed {
                prefix: rest,
                pos: 0,
                inner: self.stream,
            })
        }
    }
}

/// A stream whose first bytes come from a buffer.
struct Prefixed {
    prefix: Vec<u8>,
    pos: usize,
    inner: Box<dyn Io>,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = buf.remaining().min(self.prefix.len() - self.pos);
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Per-connection facts the command handlers need.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub id: u32,
    pub user: String,
    pub host: String,
    /// Our capabilities ∩ the client's.
    pub capabilities: CapabilityFlags,
    /// The schema named in the handshake (CLIENT_CONNECT_WITH_DB).
    pub database: Option<String>,
    /// The client uses one of MariaDB's client libraries ([`is_mariadb_client`]).
    pub mariadb_client: bool,
}

/// Serves one accepted TCP connection until the client quits, a dump ends, or `cancel` fires.
pub async fn serve(
    shared: Arc<Shared>,
    tcp: TcpStream,
    peer: SocketAddr,
    id: u32,
    cancel: CancellationToken,
) -> Result<(), ConnError> {
    let mut io = PacketIo::new(Box::new(tcp));
    let info = tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        r = handshake(&shared, &mut io, peer, id) => r?,
    };
    debug!(conn = id, user = %info.user, %peer, "authenticated");
    command_loop(shared, io, info, cancel).await
}

async fn send_err(io: &mut PacketIo, code: ErrorCode, msg: &str) -> std::io::Result<()> {
    io.send(&ErrResponse::new(code, msg).to_payload()).await
}

async fn handshake(
    shared: &Shared,
    io: &mut PacketIo,
    peer: SocketAddr,
    id: u32,
) -> Result<ConnInfo, ConnError> {
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
    let mut tls = false;
    let hello = match decode_client_hello(&first.payload) {
        Ok(ClientHello::Response(h)) => h,
        Ok(ClientHello::SslRequest { .. }) => {
            let Some(acceptor) = shared.tls.clone() else {
                send_err(io, ER_HANDSHAKE_ERROR, "Bad handshake").await?;
                return Err(ConnError::Tls(
                    "client asked for TLS, none configured".into(),
                ));
            };
            // The client starts the TLS handshake right after its SSLRequest: nothing may be
            // buffered, and the packet sequence goes on inside the tunnel.
            let codec = io.codec.clone();
            let old = std::mem::replace(io, PacketIo::new(Box::new(tokio::io::empty())));
            let stream = acceptor
                .accept(old.into_stream())
                .await
                .map_err(|e| ConnError::Tls(e.to_string()))?;
            *io = PacketIo::new(Box::new(stream));
            io.codec = codec;
            tls = true;
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
    let credential = shared
        .users
        .get(&hello.user)
        .map(|p| Credential::Password(p.as_bytes().to_vec()));
    let mut auth = AuthExchange::new(scramble, shared.auth_plugin, credential, tls);
    let mut step = match auth.on_handshake_response(&hello) {
        Ok(s) => s,
        Err(e) => {
            send_err(io, ER_HANDSHAKE_ERROR, "Bad handshake").await?;
            return Err(e.into());
        }
    };
    loop {
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
            AuthStep::Accept { before_ok } => {
                if let Some(p) = before_ok {
                    io.queue(&p);
                }
                io.queue(&OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).to_payload());
                io.flush().await?;
                break;
            }
            AuthStep::Reject(r) => {
                let msg = access_denied_message(&hello.user, &host, r.using_password);
                send_err(io, r.reason.error_code(), &msg).await?;
                return Err(ConnError::AuthFailed { user: hello.user });
            }
        }
    }
    let mariadb_client = is_mariadb_client(&hello.connect_attrs);
    debug!(conn = id, attrs = ?hello.connect_attrs, "client attributes");
    Ok(ConnInfo {
        id,
        mariadb_client,
        user: hello.user,
        host,
        capabilities: negotiate(ours, hello.capabilities),
        database: hello.database,
    })
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
        ..Session::default()
    };
    loop {
        io.codec.reset_seq();
        let packet = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            r = io.read_packet() => match r {
                Ok(p) => p,
                Err(ConnError::Closed) => return Ok(()),
                Err(e) => return Err(e),
            },
        };
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
        match cmd {
            Command::Quit => return Ok(()),
            Command::Ping => send_ok(&mut io).await?,
            Command::InitDb(db) => {
                session.database = Some(db);
                send_ok(&mut io).await?;
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
            Command::RegisterSlave(r) => {
                let uuid = session
                    .user_var("replica_uuid")
                    .or_else(|| session.user_var("slave_uuid"))
                    .unwrap_or_default();
                shared.register_replica(info.id, r, uuid);
                send_ok(&mut io).await?;
            }
            Command::BinlogDump(d) => {
                shared.start_dump(info.id, d.server_id);
                let req = dump::DumpRequest::Position {
                    file: d.filename,
                    pos: u64::from(d.pos),
                    flags: d.flags,
                    server_id: d.server_id,
                };
                return dump::run(shared, io, &info, &session, req, cancel).await;
            }
            Command::BinlogDumpGtid(d) => {
                shared.start_dump(info.id, d.server_id);
                let req = dump::DumpRequest::Gtid {
                    sids: d.sids,
                    flags: d.flags,
                    server_id: d.server_id,
                };
                return dump::run(shared, io, &info, &session, req, cancel).await;
            }
            Command::FieldList { .. }
            | Command::StmtPrepare(_)
            | Command::Statistics
            | Command::Unknown(_) => {
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
            Reply::Ok { affected } => {
                let mut ok = OkResponse::new(status);
                ok.affected_rows = affected;
                io.queue(&ok.to_payload());
            }
            Reply::Err(e) => {
                io.queue(&e.to_payload());
                break;
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

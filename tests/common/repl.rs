//! A tibinlog server on loopback over an in-memory binlog, and a raw protocol client for the
//! cases a driver cannot produce (unknown commands, malformed packets, auth switches).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tibinlog::server::testing::{MemSource, MemTables};
use tibinlog::server::users::{Privileges, User, Users};
use tibinlog::server::{EmptySchema, Server, ServerConfig};
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::{scramble_native, AuthMethod, Credential};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const PASSWORD: &str = "s3cret!";
pub const SERVER_ID: u32 = 4242;
pub const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

pub struct Fixture {
    pub addr: SocketAddr,
    pub source: MemSource,
    cancel: CancellationToken,
    handle: Option<JoinHandle<()>>,
}

impl Fixture {
    /// Starts a server; `checksum` selects CRC32 files, `plugin` the greeting's auth plugin.
    pub async fn start(checksum: bool, plugin: AuthMethod) -> Fixture {
        Self::start_with(checksum, plugin, None).await
    }

    /// Like [`Fixture::start`], with TLS material.
    pub async fn start_with(
        checksum: bool,
        plugin: AuthMethod,
        tls: Option<tibinlog::server::TlsFiles>,
    ) -> Fixture {
        Self::start_full(checksum, plugin, tls, None).await
    }

    /// A server whose catalog and table rows are `tables` (SQL front tests).
    pub async fn start_with_tables(tables: MemTables) -> Fixture {
        Self::start_full(true, AuthMethod::CachingSha2Password, None, Some(tables)).await
    }

    /// A server with these connection limits.
    pub async fn start_with_limits(limits: tibinlog::server::Limits) -> Fixture {
        Self::start_limited(true, AuthMethod::NativePassword, None, None, limits).await
    }

    async fn start_full(
        checksum: bool,
        plugin: AuthMethod,
        tls: Option<tibinlog::server::TlsFiles>,
        tables: Option<MemTables>,
    ) -> Fixture {
        let limits = tibinlog::server::Limits::default();
        Self::start_limited(checksum, plugin, tls, tables, limits).await
    }

    /// A server with these accounts and RSA key (and `tables`), greeting with caching_sha2.
    pub async fn start_with_users(
        users: Users,
        rsa_key: Option<Arc<dyn tibinlog_protocol::wire::auth_exchange::RsaKey>>,
        tables: Option<MemTables>,
    ) -> Fixture {
        let limits = tibinlog::server::Limits::default();
        let plugin = AuthMethod::CachingSha2Password;
        Self::start_inner(true, plugin, None, tables, limits, Arc::new(users), rsa_key).await
    }

    async fn start_limited(
        checksum: bool,
        plugin: AuthMethod,
        tls: Option<tibinlog::server::TlsFiles>,
        tables: Option<MemTables>,
        limits: tibinlog::server::Limits,
    ) -> Fixture {
        let users = Arc::new(Users::new([
            User {
                name: "root".into(),
                credential: Credential::Password(PASSWORD.as_bytes().to_vec()),
                privileges: Privileges::ALL,
            },
            User {
                name: "repl".into(),
                credential: Credential::Password(Vec::new()),
                privileges: Privileges::ALL,
            },
        ]));
        Self::start_inner(checksum, plugin, tls, tables, limits, users, None).await
    }

    async fn start_inner(
        checksum: bool,
        plugin: AuthMethod,
        tls: Option<tibinlog::server::TlsFiles>,
        tables: Option<MemTables>,
        limits: tibinlog::server::Limits,
        users: Arc<Users>,
        rsa_key: Option<Arc<dyn tibinlog_protocol::wire::auth_exchange::RsaKey>>,
    ) -> Fixture {
        let sid = Sid::parse(UUID).expect("uuid");
        let source = MemSource::new(SERVER_ID, sid, checksum);
        let cfg = ServerConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            users,
            rsa_key,
            server_id: SERVER_ID,
            server_uuid: sid,
            mariadb: false,
            tls,
            auth_plugin: plugin,
            default_heartbeat: None,
            max_binlog_size: 1 << 29,
            expire_logs_seconds: 0,
            net_write_timeout: tibinlog::server::session::NET_WRITE_TIMEOUT,
            limits,
            capture: None,
            metrics: Default::default(),
            snapshot: tables
                .clone()
                .map(|t| Arc::new(t) as Arc<dyn tibinlog::sql::plan::SnapshotSource>),
        };
        let schema: Arc<dyn tibinlog::server::SchemaProvider> = match tables {
            Some(t) => Arc::new(t),
            None => Arc::new(EmptySchema),
        };
        let server = Server::bind(cfg, Arc::new(source.clone()), schema)
            .await
            .expect("bind");
        let addr = server.local_addr();
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        let handle = tokio::spawn(async move {
            server.run(c).await.expect("server run");
        });
        Fixture {
            addr,
            source,
            cancel,
            handle: Some(handle),
        }
    }

    pub fn opts(&self, user: &str, pass: &str) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.addr.port())
            .user(Some(user))
            .pass(Some(pass))
            .prefer_socket(false)
            .into()
    }

    pub async fn conn(&self) -> mysql_async::Conn {
        mysql_async::Conn::new(self.opts("root", PASSWORD))
            .await
            .expect("connect")
    }

    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), h)
                .await
                .expect("server stops")
                .expect("server task");
        }
    }
}

/// A hand-driven client: packets in and out, native-password login.
pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

pub struct RawClient {
    stream: Box<dyn Io>,
    /// The server's capability flags from the greeting.
    pub caps: u32,
    /// Add CLIENT_SSL to our capability flags (after a TLS upgrade).
    pub tls: bool,
    pub seq: u8,
    pub nonce: Vec<u8>,
    pub plugin: String,
    /// The capability flags of our last HandshakeResponse.
    pub client_caps: u32,
    /// The connection id from the greeting.
    pub id: u32,
}

/// One result of a COM_QUERY as raw packets.
#[derive(Debug, Clone)]
pub struct QueryReply {
    /// Column count (0 for OK / ERR).
    pub columns: usize,
    /// Every packet of the result, the first (OK, ERR or column count) included.
    pub packets: Vec<Vec<u8>>,
    /// Status flags of the terminating OK / EOF.
    pub status: u16,
}

impl QueryReply {
    /// The rows' values as text (`None` = NULL); panics for OK / ERR.
    pub fn rows(&self) -> Vec<Vec<Option<String>>> {
        assert!(self.columns > 0, "a result set, got {:?}", self.packets);
        let body = &self.packets[1 + self.columns..self.packets.len() - 1];
        body.iter()
            .filter(|p| p[0] != 0xFE || p.len() >= 9)
            .map(|p| {
                let mut at = 0;
                (0..self.columns)
                    .map(|_| {
                        if p[at] == 0xFB {
                            at += 1;
                            return None;
                        }
                        let (n, w) = lenenc(&p[at..]);
                        let v = String::from_utf8_lossy(&p[at + w..at + w + n]).into_owned();
                        at += w + n;
                        Some(v)
                    })
                    .collect()
            })
            .collect()
    }

    /// The column labels.
    pub fn labels(&self) -> Vec<String> {
        self.packets[1..=self.columns]
            .iter()
            .map(|p| {
                // catalog, schema, table, org_table, name
                let mut at = 0;
                for _ in 0..4 {
                    let (n, w) = lenenc(&p[at..]);
                    at += w + n;
                }
                let (n, w) = lenenc(&p[at..]);
                String::from_utf8_lossy(&p[at + w..at + w + n]).into_owned()
            })
            .collect()
    }
}

/// A length-encoded integer at the start of `b`: (value, bytes used).
pub fn lenenc(b: &[u8]) -> (usize, usize) {
    match b[0] {
        0xFC => (usize::from(u16::from_le_bytes([b[1], b[2]])), 3),
        0xFD => (
            usize::from(b[1]) | usize::from(b[2]) << 8 | usize::from(b[3]) << 16,
            4,
        ),
        0xFE => (
            u64::from_le_bytes(b[1..9].try_into().expect("8 bytes")) as usize,
            9,
        ),
        n => (usize::from(n), 1),
    }
}

/// Status flags of an OK packet (after affected rows and last insert id).
fn status_of_ok(p: &[u8]) -> u16 {
    if p[0] == 0xFF {
        return 0;
    }
    let (_, a) = lenenc(&p[1..]);
    let (_, b) = lenenc(&p[1 + a..]);
    let at = 1 + a + b;
    u16::from_le_bytes([p[at], p[at + 1]])
}

/// A COM_BINLOG_DUMP payload.
pub fn dump_command(file: &[u8], pos: u32, flags: u16, server_id: u32) -> Vec<u8> {
    let mut cmd = vec![0x12];
    cmd.extend_from_slice(&pos.to_le_bytes());
    cmd.extend_from_slice(&flags.to_le_bytes());
    cmd.extend_from_slice(&server_id.to_le_bytes());
    cmd.extend_from_slice(file);
    cmd
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> RawClient {
        let stream = TcpStream::connect(addr).await.expect("tcp connect");
        let mut c = RawClient {
            stream: Box::new(stream),
            caps: 0,
            tls: false,
            seq: 0,
            nonce: Vec::new(),
            plugin: String::new(),
            client_caps: 0,
            id: 0,
        };
        let g = c.read().await;
        assert_eq!(g[0], 10, "protocol version");
        let nul = g[1..].iter().position(|b| *b == 0).expect("version NUL") + 1;
        c.id = u32::from_le_bytes(g[nul + 1..nul + 5].try_into().expect("id"));
        let mut at = nul + 1 + 4;
        let mut nonce = g[at..at + 8].to_vec();
        let lo = u32::from(u16::from_le_bytes([g[at + 9], g[at + 10]]));
        let hi = u32::from(u16::from_le_bytes([g[at + 14], g[at + 15]]));
        c.caps = lo | hi << 16;
        at += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
        nonce.extend_from_slice(&g[at..at + 12]);
        at += 13;
        let end = g[at..].iter().position(|b| *b == 0).unwrap_or(g.len() - at);
        c.plugin = String::from_utf8_lossy(&g[at..at + end]).into_owned();
        c.nonce = nonce;
        c
    }

    /// Sends a HandshakeResponse41 for `user` whose auth data was computed with `plugin`.
    pub async fn login(&mut self, user: &str, plugin: &str, auth: &[u8]) -> Vec<u8> {
        // PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | LONG_PASSWORD | TRANSACTIONS
        let mut caps: u32 = 0x200 | 0x8000 | 0x80000 | 0x1 | 0x2000;
        if self.tls {
            caps |= 0x800;
        }
        self.client_caps = caps;
        let mut p = Vec::new();
        p.extend_from_slice(&caps.to_le_bytes());
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(255);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(auth.len() as u8);
        p.extend_from_slice(auth);
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
        self.write(&p).await;
        self.read().await
    }

    /// Sends an SSLRequest and runs the TLS handshake, trusting the PEM certificate `ca`.
    pub async fn upgrade_tls(&mut self, ca: &std::path::Path) {
        self.upgrade_tls_as(ca, None).await;
    }

    /// [`Self::upgrade_tls`] presenting the client certificate and key `client` (PEM files).
    pub async fn upgrade_tls_as(
        &mut self,
        ca: &std::path::Path,
        client: Option<(&std::path::Path, &std::path::Path)>,
    ) {
        use rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls;
        let caps: u32 = 0x200 | 0x8000 | 0x80000 | 0x1 | 0x2000 | 0x800;
        let mut p = Vec::new();
        p.extend_from_slice(&caps.to_le_bytes());
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(255);
        p.extend_from_slice(&[0; 23]);
        self.write(&p).await;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).expect("ca file") {
            roots.add(cert.expect("ca cert")).expect("add ca");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = rustls::pki_types::CertificateDer::pem_file_iter(cert)
                    .expect("cert file")
                    .collect::<Result<Vec<_>, _>>()
                    .expect("cert");
                let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key).expect("key");
                builder
                    .with_client_auth_cert(chain, key)
                    .expect("client identity")
            }
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let plain = std::mem::replace(&mut self.stream, Box::new(tokio::io::empty()));
        let tls = connector.connect(name, plain).await.expect("TLS handshake");
        self.stream = Box::new(tls);
        self.tls = true;
    }

    /// Sends a HandshakeResponse41 with mysql_native_password for `user`/`password`, adding
    /// `extra_caps` to the base capability set and `attrs` as connect attributes
    /// (CLIENT_CONNECT_ATTRS when non-empty). Returns the server's reply, and keeps the
    /// capability flags sent in `self.client_caps`.
    pub async fn login_with(
        &mut self,
        user: &str,
        password: &str,
        extra_caps: u32,
        attrs: &[(&str, &str)],
    ) -> Vec<u8> {
        // PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | LONG_PASSWORD | TRANSACTIONS
        let mut caps: u32 = 0x200 | 0x8000 | 0x80000 | 0x1 | 0x2000 | extra_caps;
        if !attrs.is_empty() {
            caps |= 0x10_0000;
        }
        self.client_caps = caps;
        let auth = if password.is_empty() {
            Vec::new()
        } else {
            scramble_native(&self.nonce, password.as_bytes())
        };
        let mut p = Vec::new();
        p.extend_from_slice(&caps.to_le_bytes());
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(255);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(auth.len() as u8);
        p.extend_from_slice(&auth);
        p.extend_from_slice(b"mysql_native_password\0");
        if !attrs.is_empty() {
            let mut a = Vec::new();
            for (k, v) in attrs {
                for s in [k, v] {
                    a.push(s.len() as u8);
                    a.extend_from_slice(s.as_bytes());
                }
            }
            p.push(a.len() as u8);
            p.extend_from_slice(&a);
        }
        self.write(&p).await;
        let reply = self.read().await;
        // An AuthSwitchRequest to mysql_native_password (0xFE, plugin name NUL, nonce NUL), as
        // a server whose greeting announced another plugin sends a client that answered with
        // no data: answer with the scramble over its nonce, as every client does.
        let switch = b"\xfemysql_native_password\0";
        if reply.starts_with(switch) {
            let nonce = &reply[switch.len()..];
            let nonce = nonce.strip_suffix(&[0]).unwrap_or(nonce);
            let auth = if password.is_empty() {
                Vec::new()
            } else {
                scramble_native(nonce, password.as_bytes())
            };
            self.write(&auth).await;
            return self.read().await;
        }
        reply
    }

    /// Sends COM_QUERY and reads the whole answer: one [`QueryReply`] per result (several for a
    /// multi-statement), framed as the capabilities negotiated at login require.
    pub async fn query(&mut self, sql: &str) -> Vec<QueryReply> {
        let deprecate_eof = self.caps & self.client_caps & 0x100_0000 != 0;
        let mut q = vec![0x03];
        q.extend_from_slice(sql.as_bytes());
        let mut first = self.command(&q).await;
        let mut out = Vec::new();
        loop {
            let reply = match first[0] {
                0x00 | 0xFF => QueryReply {
                    columns: 0,
                    packets: vec![first.clone()],
                    status: status_of_ok(&first),
                },
                _ => {
                    let columns = usize::from(first[0]);
                    let mut packets = vec![first.clone()];
                    // Column definitions, then EOF unless DEPRECATE_EOF.
                    for _ in 0..columns {
                        packets.push(self.read().await);
                    }
                    if !deprecate_eof {
                        packets.push(self.read().await);
                    }
                    // Rows until EOF / the OK with a 0xFE header.
                    let status = loop {
                        let p = self.read().await;
                        let end =
                            p[0] == 0xFE && p.len() < 0xFF_FFFF && (p.len() < 9 || deprecate_eof);
                        packets.push(p.clone());
                        if end {
                            break if deprecate_eof {
                                status_of_ok(&p)
                            } else {
                                u16::from_le_bytes([p[3], p[4]])
                            };
                        }
                        if p[0] == 0xFF {
                            break 0;
                        }
                    };
                    QueryReply {
                        columns,
                        packets,
                        status,
                    }
                }
            };
            let more = reply.status & 0x0008 != 0;
            out.push(reply);
            if !more {
                return out;
            }
            first = self.read().await;
        }
    }

    /// Reads one packet, `None` when nothing came within `wait`, `Some(Err)` when the server
    /// closed the connection.
    pub async fn try_read(&mut self, wait: Duration) -> Option<std::io::Result<Vec<u8>>> {
        let mut h = [0u8; 4];
        match tokio::time::timeout(wait, self.stream.read_exact(&mut h)).await {
            Err(_) => return None,
            Ok(Err(e)) => return Some(Err(e)),
            Ok(Ok(_)) => {}
        }
        let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
        self.seq = h[3].wrapping_add(1);
        let mut p = vec![0u8; len];
        Some(self.stream.read_exact(&mut p).await.map(|_| p))
    }

    /// Writes raw bytes, outside any packet framing.
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
        self.stream.flush().await.expect("flush");
    }

    /// Logs in as root with mysql_native_password; panics unless OK.
    pub async fn login_native(&mut self) {
        let auth = scramble_native(&self.nonce, PASSWORD.as_bytes());
        let r = self.login("root", "mysql_native_password", &auth).await;
        assert_eq!(r[0], 0, "login OK, got {r:?}");
    }

    pub async fn write(&mut self, payload: &[u8]) {
        let len = payload.len() as u32;
        let mut p = len.to_le_bytes()[..3].to_vec();
        p.push(self.seq);
        self.seq = self.seq.wrapping_add(1);
        p.extend_from_slice(payload);
        self.stream.write_all(&p).await.expect("write");
        self.stream.flush().await.expect("flush");
    }

    /// Sends a command (sequence restarts at 0) and reads the first reply packet.
    pub async fn command(&mut self, payload: &[u8]) -> Vec<u8> {
        self.seq = 0;
        self.write(payload).await;
        self.read().await
    }

    pub async fn read(&mut self) -> Vec<u8> {
        let mut h = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(10), self.stream.read_exact(&mut h))
            .await
            .expect("reply in time")
            .expect("read header");
        let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
        self.seq = h[3].wrapping_add(1);
        let mut p = vec![0u8; len];
        self.stream.read_exact(&mut p).await.expect("read body");
        p
    }
}

/// The error code of an ERR packet payload.
pub fn err_code(p: &[u8]) -> Option<u16> {
    (p.first() == Some(&0xFF) && p.len() >= 3).then(|| u16::from_le_bytes([p[1], p[2]]))
}

/// The error code of a mysql_async error, if the server sent one.
pub fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

/// Native-password scramble, re-exported for tests.
pub fn native(nonce: &[u8], password: &str) -> Vec<u8> {
    scramble_native(nonce, password.as_bytes())
}

pub fn native_method() -> AuthMethod {
    AuthMethod::NativePassword
}

//! A tibinlog server on loopback over an in-memory binlog, and a raw protocol client for the
//! cases a driver cannot produce (unknown commands, malformed packets, auth switches).

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tibinlog::server::testing::MemSource;
use tibinlog::server::{EmptySchema, Server, ServerConfig};
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::{scramble_native, AuthMethod};
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
        let sid = Sid::parse(UUID).expect("uuid");
        let source = MemSource::new(SERVER_ID, sid, checksum);
        let cfg = ServerConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            users: HashMap::from([
                ("root".to_string(), PASSWORD.to_string()),
                ("repl".to_string(), String::new()),
            ]),
            server_id: SERVER_ID,
            server_uuid: sid,
            mariadb: false,
            tls,
            auth_plugin: plugin,
            default_heartbeat: None,
        };
        let server = Server::bind(cfg, Arc::new(source.clone()), Arc::new(EmptySchema))
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
        };
        let g = c.read().await;
        assert_eq!(g[0], 10, "protocol version");
        let nul = g[1..].iter().position(|b| *b == 0).expect("version NUL") + 1;
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
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let plain = std::mem::replace(&mut self.stream, Box::new(tokio::io::empty()));
        let tls = connector.connect(name, plain).await.expect("TLS handshake");
        self.stream = Box::new(tls);
        self.tls = true;
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

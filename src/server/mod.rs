//! The MySQL-protocol front: makes the binlog look like a MySQL 8.0 master.
//!
//! In: TCP connections from SQL clients and replicas (Debezium, Maxwell, Canal, mysqlbinlog,
//! MySQL/MariaDB replicas). Out: handshake and authentication, answers to the SQL those clients
//! send before streaming, and binlog dumps read from a [`BinlogSource`].
//!
//! We own the command loop (no generic MySQL server framework can route the replication
//! commands). Each connection is one task; a connection that asks for a dump becomes a dump
//! session in the same task, reading files through the source (never the capture pipeline), so
//! a slow replica only slows itself.
//!
//! # Layout
//! Each module imports only the ones below it (a module never imports its caller):
//! - [`conn`]: the top of a connection: handshake, authentication, the command loop; calls
//!   [`admin`] for SQL and [`dump`] for replication commands.
//! - [`admin`]: the SQL surface (SELECT @@…, SHOW …, SET …), parsed with `sqlparser`;
//!   `binlog_events`: `SHOW BINLOG EVENTS`; `words`: the tokenizer for statements sqlparser
//!   does not parse; `reply`: the answers they return.
//! - [`dump`]: COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID sessions.
//! - [`mariadb`]: the size-preserving rewrites a MariaDB replica or tool needs.
//! - [`session`]: what is known of one connection and its session state.
//! - [`transport`]: the byte stream (TCP or TLS) cut into packets; imports none of the above.
//! - [`vars`]: system variables. [`source`]: the traits the binlog store and schema store
//!   implement. [`testing`]: an in-memory binlog for tests (not the product's store).
//!
//! # Shutdown
//! [`Server::run`] stops accepting when its token is cancelled; every connection task gets a
//! child token (also used by `KILL`) and `run` returns after all of them ended.

pub mod activity;
pub mod admin;
mod binlog_events;
pub mod conn;
pub mod dump;
mod mysql_vars;
pub mod registry;
mod replica_status;
mod reply;
pub mod rsa_key;
pub mod session;
pub mod source;
pub mod status;
#[cfg(any(test, feature = "sim"))]
pub mod testing;
pub mod transport;
pub mod users;
pub mod vars;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::AuthMethod;
use tibinlog_protocol::wire::command::RegisterSlave;
use tokio::net::TcpListener;
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

pub use source::{
    BinlogFile, BinlogPosition, BinlogReader, BinlogSource, EmptySchema, EventBatch,
    SchemaProvider, SnapshotPoint, SourceError,
};

/// MySQL version we claim: clients pick their statements by the greeting's version, and an
/// 8.0.x version keeps every client on its MySQL 8.0 path.
pub const MYSQL_VERSION: &str = "8.0.36";

/// The version string of the greeting and `@@version`: `8.0.36-tibinlog-<crate version>`.
pub fn server_version() -> String {
    format!("{MYSQL_VERSION}-tibinlog-{}", env!("CARGO_PKG_VERSION"))
}

/// The version a MariaDB-flavoured listener claims ([`ServerConfig::mariadb`]):
/// `10.11.99-MariaDB-tibinlog-<crate version>`; the greeting carries it behind MariaDB's
/// `5.5.5-` prefix, which MariaDB's client library strips.
pub fn mariadb_server_version() -> String {
    format!("10.11.99-MariaDB-tibinlog-{}", env!("CARGO_PKG_VERSION"))
}

/// TLS of the listener: PEM certificate chain and key, and what clients must show.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// `@@ssl_ca`: clients are asked for a certificate, and one they present must verify
    /// against this CA.
    pub client_ca: Option<PathBuf>,
    /// Common names a client certificate must carry (non-empty: a certificate is required).
    pub allowed_cn: Vec<String>,
    /// `@@require_secure_transport`: plain connections are refused (ERROR 3159).
    pub require_secure_transport: bool,
}

/// Server configuration, passed by value into [`Server::bind`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Accounts, their password hashes and privileges.
    pub users: Arc<users::Users>,
    /// The key pair of caching_sha2 full authentication on plain connections; `None` leaves
    /// full authentication to TLS.
    pub rsa_key: Option<Arc<dyn tibinlog_protocol::wire::auth_exchange::RsaKey>>,
    /// Greet as MariaDB 10.11 instead of MySQL 8.0. A MariaDB replica uses GTIDs
    /// (`MASTER_USE_GTID`) only with a master whose greeting says version 10 or more, which
    /// would send MySQL clients down their pre-5.6 paths: a MariaDB-flavoured listener is a
    /// second port over the same binlog (MariaDB's `sql/slave.cc`; see `server/mariadb.rs`).
    pub mariadb: bool,
    /// `@@server_id`, in every event header; must differ from every replica's.
    pub server_id: u32,
    /// `@@server_uuid`, the SID of our GTIDs.
    pub server_uuid: Sid,
    /// TLS is offered (CLIENT_SSL) only when set.
    pub tls: Option<TlsFiles>,
    /// The plugin the greeting announces (clients answer with it first); users can still log in
    /// with the other one through an auth switch.
    pub auth_plugin: AuthMethod,
    /// Heartbeat period for dump sessions whose client did not set
    /// `@master_heartbeat_period`; `None` = no heartbeats for them.
    pub default_heartbeat: Option<Duration>,
    /// Reads of TiDB tables at a snapshot timestamp (`SELECT … FROM db.t`); `None` refuses them.
    pub snapshot: Option<Arc<dyn crate::sql::plan::SnapshotSource>>,
    /// `@@max_binlog_size`: the binlog store's rotation size.
    pub max_binlog_size: u64,
    /// `@@binlog_expire_logs_seconds`: the binlog store's expiry (0 = never).
    pub expire_logs_seconds: u64,
    /// `@@net_write_timeout` of sessions that do not set their own.
    pub net_write_timeout: Duration,
    /// Capture's state for `SHOW STATUS`; `None` where nothing captures (tests, benchmarks).
    pub capture: Option<Arc<status::CaptureStatus>>,
    /// Connection limits.
    pub limits: Limits,
    /// Connections, bytes and commands are counted here (shared by both listeners).
    pub metrics: crate::metrics::ServerMetrics,
}

/// Connection limits, with MySQL's names and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `@@max_connections`: authenticated sessions at once; a client past it gets error 1040.
    /// Connections still in the handshake do not count (they are bounded by
    /// `connect_timeout` and a small packet limit), so idle sockets cannot lock users out.
    pub max_connections: u32,
    /// `@@connect_timeout`: the handshake and authentication must end within it.
    pub connect_timeout: Duration,
    /// `@@wait_timeout`: a session idle this long between commands is closed (error 4031, as
    /// MySQL 8.0.24+ tells the client); sessions may set their own. Dump sessions never idle.
    pub wait_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
        }
    }
}

/// MySQL's default `max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 151;
/// MySQL's default `connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// MySQL's default `wait_timeout`.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(28800);
/// Largest packet a client may send before it has authenticated (a handshake response with
/// connect attributes is a few hundred bytes; MySQL caps the attributes at 64 KiB).
pub const PRE_AUTH_MAX_PAYLOAD: usize = 64 << 10;

/// Errors of the server shell (not of a single connection).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("accept failed: {0}")]
    Accept(#[source] std::io::Error),
}

/// A replica registered with COM_REGISTER_SLAVE (for `SHOW REPLICAS`).
#[derive(Debug, Clone)]
pub struct Registration {
    pub connection_id: u32,
    pub info: RegisterSlave,
    /// The replica's `@slave_uuid` / `@replica_uuid`, if it set one.
    pub uuid: String,
}

/// State shared by every connection.
pub struct Shared {
    pub identity: vars::ServerIdentity,
    pub users: Arc<users::Users>,
    pub rsa_key: Option<Arc<dyn tibinlog_protocol::wire::auth_exchange::RsaKey>>,
    pub source: Arc<dyn BinlogSource>,
    pub schema: Arc<dyn SchemaProvider>,
    pub default_heartbeat: Option<Duration>,
    /// `@@net_write_timeout` of sessions that do not set their own.
    pub net_write_timeout: Duration,
    pub auth_plugin: AuthMethod,
    /// Snapshot reads of TiDB tables.
    pub snapshot: Option<Arc<dyn crate::sql::plan::SnapshotSource>>,
    /// Capture's state, when something captures.
    pub capture: Option<Arc<status::CaptureStatus>>,
    pub limits: Limits,
    pub metrics: crate::metrics::ServerMetrics,
    /// Connections, sessions, replicas and snapshot holds: one registry for every listener
    /// of the server (one id space, one process list, one `max_connections`).
    pub registry: Arc<registry::Registry>,
    /// When the server started (`Uptime`).
    pub started: std::time::Instant,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Plain connections are refused.
    pub require_secure_transport: bool,
    /// Common names a client certificate must carry (empty: none is required).
    allowed_cn: Vec<String>,
}

/// A statement the server could not answer: it did not parse (1064), or it asks for a
/// statement (1105) or a variable (1193) the server does not implement — what a tool sent that
/// tibinlog lacks. Each is logged as a warning and counted; the latest are kept for
/// [`Shared::unanswered`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanswered {
    pub conn: u32,
    pub user: String,
    pub statement: String,
    pub code: u16,
    pub message: String,
}

/// How many [`Unanswered`] statements a server keeps.
pub const UNANSWERED_KEPT: usize = 64;

/// True for the error codes that mean "could not answer" rather than a refusal MySQL would
/// give too (unknown table, access denied, …).
pub fn is_unanswered(code: u16) -> bool {
    use tibinlog_protocol::wire::errors::{
        ER_PARSE_ERROR, ER_UNKNOWN_ERROR, ER_UNKNOWN_SYSTEM_VARIABLE,
    };
    [ER_PARSE_ERROR, ER_UNKNOWN_ERROR, ER_UNKNOWN_SYSTEM_VARIABLE]
        .iter()
        .any(|c| c.code == code)
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("identity", &self.identity)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

pub(crate) use registry::SessionSlot;

impl Shared {
    /// Notes `reply` to `statement` of session `info` if it is an error that means the server
    /// could not answer ([`is_unanswered`]): a warning naming the statement, the counter, and
    /// the list of [`Shared::unanswered`].
    pub(crate) fn note_reply(
        &self,
        info: &session::ConnInfo,
        statement: &str,
        reply: &reply::Reply,
    ) {
        let reply::Reply::Err(e) = reply else {
            return;
        };
        if !is_unanswered(e.error.code) {
            return;
        }
        // A hostile or generated statement may be megabytes: the log and the list keep a
        // prefix and the length.
        let statement = bounded(statement);
        let message = bounded(&e.message);
        tracing::warn!(
            conn = info.id,
            user = %info.user,
            code = e.error.code,
            error = %message,
            statement = %statement,
            "statement not answered"
        );
        self.metrics.unanswered.inc();
        self.registry.note_unanswered(Unanswered {
            conn: info.id,
            user: info.user.clone(),
            statement,
            code: e.error.code,
            message,
        });
    }

    /// True when the connection's TLS meets what the listener requires of client
    /// certificates (always, when it requires nothing).
    pub fn certificate_accepted(&self, tls: Option<&transport::TlsSession>) -> bool {
        self.allowed_cn.is_empty()
            || tls.is_some_and(|t| {
                t.peer_certificate
                    && crate::security::cn_allowed(&self.allowed_cn, t.peer_common_name.as_deref())
            })
    }

    /// What information_schema shows of the server's sessions.
    pub fn server_facts(&self) -> crate::sql::infoschema::ServerFacts {
        let processlist = self
            .registry
            .processes()
            .into_iter()
            .map(|r| crate::sql::infoschema::ProcessInfo {
                id: u64::from(r.id),
                user: r.user,
                host: r.host,
                db: r.db,
                command: r.command.into(),
                time: i64::try_from(r.time).unwrap_or(i64::MAX),
                state: r.state,
                info: r.info,
            })
            .collect();
        crate::sql::infoschema::ServerFacts { processlist }
    }

    /// True if TLS is configured.
    pub fn tls_enabled(&self) -> bool {
        self.tls.is_some()
    }
}

/// A bound server; [`Server::run`] serves until cancelled.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the listener and loads the TLS material.
    pub async fn bind(
        cfg: ServerConfig,
        source: Arc<dyn BinlogSource>,
        schema: Arc<dyn SchemaProvider>,
    ) -> Result<Server, ServerError> {
        let registry = Arc::new(registry::Registry::new(cfg.limits.max_connections));
        Self::bind_with(cfg, source, schema, registry).await
    }

    /// Binds a second listener of the same server (the MariaDB-flavoured one): it shares this
    /// server's connections, sessions, `max_connections`, replicas and snapshot holds.
    pub async fn bind_beside(
        &self,
        cfg: ServerConfig,
        source: Arc<dyn BinlogSource>,
        schema: Arc<dyn SchemaProvider>,
    ) -> Result<Server, ServerError> {
        Self::bind_with(cfg, source, schema, self.shared.registry.clone()).await
    }

    async fn bind_with(
        cfg: ServerConfig,
        source: Arc<dyn BinlogSource>,
        schema: Arc<dyn SchemaProvider>,
        registry: Arc<registry::Registry>,
    ) -> Result<Server, ServerError> {
        let tls = match &cfg.tls {
            Some(files) => Some(load_tls(files)?),
            None => None,
        };
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| ServerError::Bind {
                addr: cfg.listen,
                source,
            })?;
        let shared = Arc::new(Shared {
            identity: vars::ServerIdentity {
                auth_plugin: cfg.auth_plugin.name(),
                version: if cfg.mariadb {
                    mariadb_server_version()
                } else {
                    server_version()
                },
                mariadb: cfg.mariadb,
                server_id: cfg.server_id,
                server_uuid: cfg.server_uuid.to_string(),
                max_binlog_size: cfg.max_binlog_size,
                expire_logs_seconds: cfg.expire_logs_seconds,
                net_write_timeout: cfg.net_write_timeout.as_secs(),
                limits: cfg.limits,
                tls: cfg.tls.is_some(),
                require_secure_transport: cfg
                    .tls
                    .as_ref()
                    .is_some_and(|t| t.require_secure_transport),
                ssl_ca: cfg
                    .tls
                    .as_ref()
                    .and_then(|t| t.client_ca.as_ref())
                    .map(|p| p.display().to_string()),
            },
            users: cfg.users,
            rsa_key: cfg.rsa_key,
            source,
            schema,
            default_heartbeat: cfg.default_heartbeat,
            net_write_timeout: cfg.net_write_timeout,
            auth_plugin: cfg.auth_plugin,
            snapshot: cfg.snapshot,
            capture: cfg.capture,
            limits: cfg.limits,
            metrics: cfg.metrics,
            registry,
            started: std::time::Instant::now(),
            tls,
            require_secure_transport: cfg.tls.as_ref().is_some_and(|t| t.require_secure_transport),
            allowed_cn: cfg
                .tls
                .as_ref()
                .map(|t| t.allowed_cn.clone())
                .unwrap_or_default(),
        });
        Ok(Server { listener, shared })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// State shared with connections (registrations, kill).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Accepts connections until `cancel` fires, then waits for every connection to end.
    pub async fn run(self, cancel: CancellationToken) -> Result<(), ServerError> {
        let tracker = TaskTracker::new();
        info!(addr = %self.local_addr(), "serving the MySQL protocol");
        loop {
            let accepted = tokio::select! {
                _ = cancel.cancelled() => break,
                r = self.listener.accept() => r,
            };
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    // Per-connection accept errors (e.g. EMFILE, aborted handshakes) are
                    // transient: log and keep serving.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let conn_cancel = cancel.child_token();
            let listener = if self.shared.identity.mariadb {
                "mariadb"
            } else {
                "mysql"
            };
            let (id, activity) =
                self.shared
                    .registry
                    .register_conn(conn_cancel.clone(), peer, listener);
            self.shared.metrics.connections_total.inc();
            let shared = self.shared.clone();
            // Every line a connection logs carries its id, peer, and once known its user and
            // the replica's server id.
            let span = tracing::info_span!(
                "conn",
                conn = id,
                peer = %peer,
                user = tracing::field::Empty,
                server_id = tracing::field::Empty,
            );
            tracker.spawn(tracing::Instrument::instrument(
                async move {
                    let served =
                        conn::serve(shared.clone(), stream, peer, (id, activity), conn_cancel);
                    if let Err(e) = served.await {
                        debug!(conn = id, %peer, error = %e, "connection ended with an error");
                    }
                    shared.registry.unregister_conn(id);
                },
                span,
            ));
        }
        tracker.close();
        tracker.wait().await;
        Ok(())
    }
}

fn load_tls(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, ServerError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let err = |what: &str, e: &dyn std::fmt::Display| ServerError::Tls(format!("{what}: {e}"));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| err("certificate file", &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| err("certificate file", &e))?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| err("key file", &e))?;
    let provider = crate::security::provider();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| err("protocol versions", &e))?;
    let builder = match &files.client_ca {
        // Asked for, verified when given; whether one is required is decided per login
        // (the common names), where the client can be told why.
        Some(ca) => {
            let pem = std::fs::read(ca).map_err(|e| err("client CA file", &e))?;
            let roots = crate::security::root_store("client CA file", &pem)
                .map_err(|e| ServerError::Tls(e.to_string()))?;
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| err("client CA", &e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| err("certificate", &e))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Bytes of a statement or message kept for the log and the unanswered list.
const NOTE_KEPT: usize = 1024;

/// `text` cut to its first [`NOTE_KEPT`] bytes (at a character boundary), with its full
/// length said when cut.
fn bounded(text: &str) -> String {
    if text.len() <= NOTE_KEPT {
        return text.to_owned();
    }
    let mut end = NOTE_KEPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_keep_a_bounded_prefix_and_the_length() {
        assert_eq!(bounded("SELECT nope()"), "SELECT nope()");
        let huge = format!("SELECT '{}'", "é".repeat(1_000_000));
        let kept = bounded(&huge);
        assert!(kept.len() < NOTE_KEPT + 40, "{}", kept.len());
        assert!(kept.starts_with("SELECT 'éé"));
        assert!(kept.ends_with(&format!("({} bytes)", huge.len())), "{kept}");
    }
}

//! The top-level wiring: changefeed → binlog store → MySQL replication server.
//!
//! ```text
//!  PD/TiKV ─► Changefeed ─► relay task ─► writer thread ─► BinlogStore (files, fsync)
//!                 ▲             │  (bounded channel)         │ durable end watch
//!                 └─ checkpoint ┘◄── flushed checkpoint ─────┤
//!                                                            ▼
//!                                    Server ◄── StoreSource (BinlogFiles), SchemaView
//! ```
//!
//! * Start: open the store (recovery); capture from the recovered checkpoint, else the
//!   configured start ts, else PD's current TSO. `server_uuid` is derived from the TiDB
//!   cluster id unless configured, so a restart keeps the GTID source.
//! * Writer thread (blocking: the store fsyncs): row pieces → `begin_txn`/`write_rows`/
//!   `commit_txn`, DDL → `write_ddl`; a transaction the binlog already has (a restart resends
//!   everything after the checkpoint) is skipped whole. `Resolved(ts)` → `flush(ts)` (group
//!   commit + checkpoint), then the changefeed's checkpoint advances to `ts`. Between resolved
//!   ts, a transaction with a higher commit ts than the last one proves that everything up to
//!   `commit_ts - 1` is written (they come in commit order): after
//!   [`INTERMEDIATE_CHECKPOINT`] without a flush, the writer checkpoints there. A catch-up
//!   batch (one resolved ts after minutes of history) thus makes progress that survives a
//!   crash, instead of being redone whole by every restart.
//! * A changefeed error restarts capture from the durable checkpoint (the writer drops an open
//!   transaction first). A store error stops the app.
//! * Stop: cancel the token; the writer closes the store cleanly.

pub mod config;
#[cfg(feature = "sim")]
pub mod demo;
mod status_http;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::AuthMethod;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::binlog_store::{BinlogFiles, BinlogStore, StoreConfig};
use crate::budget::ByteBudget;
use crate::capture::pd::{PdClient, PdConfig};
use crate::capture::puller::PullerConfig;
use crate::changefeed::{catalog_at, ChangefeedConfig};
use crate::model::Ts;
use crate::mounter::TableFilter;
use crate::server::status::{CaptureState, CaptureStatus};
use crate::server::{BinlogSource, SchemaProvider, Server, ServerConfig, Shared, TlsFiles};

use crate::binlog_store::catalog_history::{SchemaHistory, SchemaView};
use crate::binlog_store::sink::{self, Sink, SinkStats};
use crate::binlog_store::source::StoreSource;
use crate::changefeed::supervisor::{
    relay, start_changefeed, Failure, Verdicts, WRITER_CHANNEL, WRITER_QUEUE_BYTES,
};
use crate::ha::gate::OwnerGate;

/// Namespace of the name-based server UUIDs (`uuid5(NAMESPACE, "tidb-cluster:<id>")`).
const UUID_NAMESPACE: [u8; 16] = 0x6f1c_0b2e_52a4_4c4e_9a57_3d0b_7f2e_91c4_u128.to_be_bytes();

/// The GTID source id of a TiDB cluster: a name-based (version 5, RFC 4122) UUID of its
/// cluster id, so that every restart against the same cluster keeps it.
pub fn server_uuid_for_cluster(cluster_id: u64) -> Sid {
    Sid(uuid5(
        UUID_NAMESPACE,
        format!("tidb-cluster:{cluster_id}").as_bytes(),
    ))
}

/// RFC 4122 version 5 UUID of `name` in namespace `ns`.
fn uuid5(ns: [u8; 16], name: &[u8]) -> [u8; 16] {
    uuid::Uuid::new_v5(&uuid::Uuid::from_bytes(ns), name).into_bytes()
}

/// Everything the app needs to run.
#[derive(Debug, Clone)]
pub struct AppConfig {
    pub pd_addrs: Vec<String>,
    pub listen: SocketAddr,
    /// A second listener that greets as MariaDB 10.11, for MariaDB replicas replicating by
    /// GTID (`MASTER_USE_GTID`); none by default.
    pub mariadb_listen: Option<SocketAddr>,
    /// Binlog files go to `<data_dir>/binlog`, the sorter's cache to `<data_dir>/sorter`.
    pub data_dir: PathBuf,
    pub filter: TableFilter,
    pub server_id: u32,
    /// Derived from the cluster id when absent.
    pub server_uuid: Option<Sid>,
    /// This instance's name (its PD service safe point, its place in an HA group); read from
    /// or generated into `<data_dir>/instance-id` when absent.
    pub instance_id: Option<String>,
    /// Where capture starts when the store has no checkpoint; PD's TSO when absent.
    pub start_ts: Option<Ts>,
    /// Accounts with their password hashes and privileges.
    pub users: Arc<crate::server::users::Users>,
    /// The RSA key of caching_sha2 full authentication; `<data_dir>/private_key.pem` (made
    /// when missing) when absent.
    pub rsa_private_key: Option<PathBuf>,
    pub tls: Option<TlsFiles>,
    /// Mutual TLS to PD and TiKV.
    pub cluster_tls: Option<crate::security::ClusterTlsFiles>,
    pub max_binlog_size: u64,
    /// `binlog_expire_logs_seconds` (0 = never).
    pub expire_logs_seconds: u64,
    /// `binlog_row_metadata`: the optional metadata of the TABLE_MAP events written (FULL;
    /// MINIMAL and NONE for consumers whose binlog readers fail on FULL's).
    pub row_metadata: tibinlog_protocol::binlog::RowMetadata,
    /// How often the progress line is logged.
    pub progress_interval: Duration,
    /// Heartbeat for dump sessions that did not ask for a period.
    pub default_heartbeat: Option<Duration>,
    /// Encoded bytes after which the sorter cuts a transaction into another piece.
    pub max_chunk_bytes: Option<usize>,
    /// The filter's rules as configured (empty: every table), recorded in the data directory.
    pub filter_rules: Vec<String>,
    /// The plugin the greeting announces.
    pub auth_plugin: AuthMethod,
    /// `@@net_write_timeout` of sessions that did not set their own.
    pub net_write_timeout: Duration,
    /// `@@max_connections`, `@@connect_timeout`, `@@wait_timeout`.
    pub limits: crate::server::Limits,
    /// TTL of the capture's PD service GC safe point.
    pub gc_ttl: Duration,
    /// Regions per store whose initial scan runs at once.
    pub incremental_scan_limit: usize,
    /// Memory one region may hold for prewrites and cached commits; prewrites past it spill.
    pub pending_txn_bytes: usize,
    /// Memory for prewrites of all regions together; past it transactions spill to disk.
    pub prewrite_memory_bytes: usize,
    /// Rows the sorter accepts before capture waits.
    pub sorter_memory_quota_bytes: usize,
    /// The sorter's RocksDB block cache.
    pub sorter_block_cache_bytes: usize,
    /// A capture stopped for good stops the app with an error (non-zero exit) instead of
    /// leaving the server serving the binlog.
    pub exit_on_capture_stop: bool,
    /// The status listener (Prometheus metrics, JSON API, status page); none when absent.
    pub status_listen: Option<SocketAddr>,
    /// High availability: capture only while this instance owns its group on etcd.
    pub ha: Option<HaConfig>,
}

pub use crate::ha::gate::HaConfig;

impl AppConfig {
    /// Defaults: every table, server id 1, root without password, 1 GiB files.
    pub fn new(pd_addrs: Vec<String>, listen: SocketAddr, data_dir: impl Into<PathBuf>) -> Self {
        AppConfig {
            pd_addrs,
            listen,
            mariadb_listen: None,
            data_dir: data_dir.into(),
            filter: TableFilter::all(),
            server_id: 1,
            server_uuid: None,
            instance_id: None,
            start_ts: None,
            users: Arc::new(crate::server::users::Users::single("root", "")),
            rsa_private_key: None,
            tls: None,
            cluster_tls: None,
            max_binlog_size: crate::binlog_store::DEFAULT_MAX_BINLOG_SIZE,
            expire_logs_seconds: 0,
            row_metadata: tibinlog_protocol::binlog::RowMetadata::Full,
            progress_interval: Duration::from_secs(10),
            default_heartbeat: Some(Duration::from_secs(30)),
            max_chunk_bytes: None,
            filter_rules: Vec::new(),
            auth_plugin: AuthMethod::CachingSha2Password,
            net_write_timeout: crate::server::session::NET_WRITE_TIMEOUT,
            limits: crate::server::Limits::default(),
            gc_ttl: crate::capture::gc_keeper::DEFAULT_GC_TTL,
            incremental_scan_limit: crate::capture::store_stream::DEFAULT_SCAN_LIMIT,
            pending_txn_bytes: crate::capture::matcher::DEFAULT_PENDING_BYTES_LIMIT,
            prewrite_memory_bytes: crate::capture::matcher::DEFAULT_PREWRITE_MEMORY_BYTES,
            sorter_memory_quota_bytes: crate::sorter::DEFAULT_MEMORY_QUOTA_BYTES,
            sorter_block_cache_bytes: crate::sorter::DEFAULT_BLOCK_CACHE_BYTES,
            exit_on_capture_stop: false,
            status_listen: None,
            ha: None,
        }
    }

    /// Directory of the binlog files.
    pub fn binlog_dir(&self) -> PathBuf {
        self.data_dir.join("binlog")
    }
}

/// The PD service id of an instance's capture safe point: one per instance, so each member of
/// an HA group holds the history it still needs.
pub fn gc_service_id(server_uuid: &Sid, instance_id: &str) -> String {
    format!("tibinlog-{server_uuid}-{instance_id}")
}

/// File in the data directory that keeps the generated instance id.
pub const INSTANCE_ID_FILE: &str = "instance-id";

/// `id` when it is a valid instance id: 1 to 64 letters, digits, `.`, `_` or `-` (it becomes
/// part of a PD service id and of etcd keys).
pub fn check_instance_id(id: &str) -> anyhow::Result<&str> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        anyhow::bail!("instance id {id:?}: use 1 to 64 letters, digits, '.', '_' or '-'");
    }
    Ok(id)
}

/// The instance id: the configured one, else the one kept in the data directory, else a new
/// random one written there (so it survives restarts and never depends on the host's name).
pub fn instance_id(configured: Option<&str>, data_dir: &Path) -> anyhow::Result<String> {
    if let Some(id) = configured {
        return Ok(check_instance_id(id)?.to_owned());
    }
    let path = data_dir.join(INSTANCE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            return check_instance_id(text.trim())
                .map(str::to_owned)
                .with_context(|| format!("in {}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    }
    let mut random = [0u8; 6];
    aws_lc_rs::rand::fill(&mut random).map_err(|_| anyhow::anyhow!("no random bytes"))?;
    let id = hex::encode(random);
    std::fs::create_dir_all(data_dir).with_context(|| format!("create {}", data_dir.display()))?;
    let tmp = data_dir.join(format!("{INSTANCE_ID_FILE}.tmp"));
    std::fs::write(&tmp, format!("{id}\n"))
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .with_context(|| format!("write {}", path.display()))?;
    Ok(id)
}

/// File in the data directory that records the table filter its binlog was written with.
pub const FILTER_RECORD: &str = "table-filter.json";

/// The table filter is fixed for the life of a data directory: a binlog whose filter changed
/// midway would start tables without their CREATE and rows, and stop others without a trace.
/// The first start records the rules; a later start with other rules is refused.
pub fn record_filter(data_dir: &Path, rules: &[String]) -> anyhow::Result<()> {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Record {
        rules: Vec<String>,
    }
    let path = data_dir.join(FILTER_RECORD);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let rec: Record = serde_json::from_slice(&bytes)
                .with_context(|| format!("read the recorded table filter {}", path.display()))?;
            if rec.rules != rules {
                let show = |r: &[String]| {
                    if r.is_empty() {
                        "every table".to_owned()
                    } else {
                        format!("{r:?}")
                    }
                };
                anyhow::bail!(
                    "the table filter is {} but the binlog in {} was written with {}: a filter \
                     cannot change for a binlog that exists (tables it adds would start without \
                     their earlier rows, tables it removes would stop without a trace); start \
                     with the recorded rules, or with a new data directory",
                    show(rules),
                    data_dir.display(),
                    show(&rec.rules)
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("create the data directory {}", data_dir.display()))?;
            let tmp = data_dir.join(format!("{FILTER_RECORD}.tmp"));
            let bytes = serde_json::to_vec(&Record {
                rules: rules.to_vec(),
            })?;
            let write = || -> std::io::Result<()> {
                use std::io::Write as _;
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&bytes)?;
                f.sync_all()?;
                std::fs::rename(&tmp, &path)?;
                std::fs::File::open(data_dir)?.sync_all()
            };
            write().with_context(|| format!("record the table filter in {}", path.display()))
        }
        Err(e) => {
            Err(e).with_context(|| format!("read the recorded table filter {}", path.display()))
        }
    }
}

/// A running app.
#[derive(Debug)]
pub struct App {
    local_addr: SocketAddr,
    mariadb_addr: Option<SocketAddr>,
    server_uuid: Sid,
    instance_id: String,
    start_ts: Ts,
    binlog_dir: PathBuf,
    files: BinlogFiles,
    checkpoint: watch::Receiver<Ts>,
    stats: Arc<SinkStats>,
    /// The MySQL listener's connection registry.
    shared: Arc<Shared>,
    /// Cancelled on stop or on a failure of any part.
    stop: CancellationToken,
    /// Set before `stop` fires: the writer drops the store without closing it.
    abrupt: Arc<AtomicBool>,
    failure: Arc<Failure>,
    writer: JoinHandle<()>,
    relay: JoinHandle<()>,
    server: JoinHandle<()>,
    /// The MariaDB-flavoured listener's task, if one was configured.
    mariadb_server: Option<JoinHandle<()>>,
    progress: JoinHandle<()>,
    status_addr: Option<SocketAddr>,
    /// The status listener's task, if configured.
    status: Option<JoinHandle<()>>,
}

impl App {
    /// Opens the store, starts capture and the server. Stops when `cancel` fires (then
    /// [`Self::wait`] returns) or when a part fails. Needs a multi-threaded runtime.
    pub async fn start(cfg: AppConfig, cancel: CancellationToken) -> anyhow::Result<App> {
        let stop = cancel.child_token();
        if cfg.pd_addrs.is_empty() {
            anyhow::bail!("no PD address given");
        }
        let cluster_tls = match &cfg.cluster_tls {
            Some(files) => {
                Some(crate::security::ClusterTls::from_files(files).context("TLS to PD and TiKV")?)
            }
            None => None,
        };
        let pd_config = {
            let mut c = PdConfig::new(cfg.pd_addrs.clone());
            c.tls = cluster_tls.clone();
            c
        };
        let pd_cancel = stop.child_token();
        // Stops the PD client's tasks on every way out of this function.
        let _pd_guard = pd_cancel.clone().drop_guard();
        let pd = PdClient::connect(pd_config.clone(), pd_cancel.clone())
            .await
            .with_context(|| format!("connect to PD at {}", cfg.pd_addrs.join(",")))?;
        let cluster_id = pd.cluster_id();
        let server_uuid = cfg
            .server_uuid
            .unwrap_or_else(|| server_uuid_for_cluster(cluster_id));
        let tso = match cfg.start_ts {
            Some(ts) => ts,
            None => pd.tso().await.context("get a timestamp from PD")?,
        };
        drop(pd);

        // Bound first: a taken port fails the start before anything is opened.
        let status_listener = match cfg.status_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr} for the status API"))?,
            ),
            None => None,
        };
        record_filter(&cfg.data_dir, &cfg.filter_rules)?;
        let instance_id = instance_id(cfg.instance_id.as_deref(), &cfg.data_dir)?;
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let mut store_cfg = StoreConfig::new(cfg.binlog_dir(), cfg.server_id, server_uuid);
        store_cfg.max_binlog_size = cfg.max_binlog_size;
        store_cfg.expire_logs_seconds = cfg.expire_logs_seconds;
        store_cfg.row_metadata = cfg.row_metadata;
        store_cfg.server_version = crate::server::server_version();
        store_cfg.first_file_ts = tso;
        store_cfg.metrics = metrics.binlog.clone();
        let checksum = store_cfg.checksum;
        let (store, recovery) = {
            let c = store_cfg.clone();
            tokio::task::spawn_blocking(move || BinlogStore::open(c))
                .await
                .context("store open task")?
                .with_context(|| {
                    format!("open the binlog store in {}", cfg.binlog_dir().display())
                })?
        };
        let start_ts = match recovery.checkpoint {
            Some(cp) => cp,
            None => {
                if !recovery.created && recovery.last_written.is_some() {
                    warn!("the binlog has transactions but no checkpoint; capture starts at the configured start ts");
                }
                tso
            }
        };
        info!(
            cluster_id,
            %server_uuid,
            start_ts = start_ts.0,
            recovered_checkpoint = ?recovery.checkpoint.map(|t| t.0),
            next_gno = recovery.next_gno,
            truncated_bytes = recovery.truncated_bytes,
            dropped_records = recovery.dropped_records,
            created = recovery.created,
            "binlog store open"
        );
        let files = store.files();

        let sorter_metrics = crate::sorter::MetricsHandle::default();
        let feed_cfg = {
            let mut c = ChangefeedConfig::new(
                cfg.pd_addrs.clone(),
                start_ts,
                cfg.filter.clone(),
                cfg.data_dir.join("sorter"),
            );
            if let Some(b) = cfg.max_chunk_bytes {
                c.sorter.max_chunk_bytes = b;
            }
            c.sorter.memory_quota_bytes = cfg.sorter_memory_quota_bytes;
            c.sorter.block_cache_bytes = cfg.sorter_block_cache_bytes;
            c.sorter.metrics = sorter_metrics.clone();
            // One safe point per instance: the members of an HA group each hold theirs, so
            // the history stays until the slowest of them has it.
            c.gc_service_id = gc_service_id(&server_uuid, &instance_id);
            c.tls = cluster_tls.clone();
            c.gc_ttl = cfg.gc_ttl;
            c.prewrite_memory_bytes = cfg.prewrite_memory_bytes;
            let mut p = PullerConfig::new(cfg.pd_addrs.clone(), Vec::new(), start_ts);
            p.pd = pd_config.clone();
            p.scan_limit_per_store = cfg.incremental_scan_limit;
            p.matcher.pending_bytes_limit = cfg.pending_txn_bytes;
            p.metrics = metrics.capture.clone();
            c.puller = Some(p);
            c
        };
        // A capture that cannot start for good still leaves a binlog to serve, unless there is
        // none yet (a new deployment with, say, a start ts PD already collected: say so now).
        // In an HA group capture starts once this instance owns the group (see `relay`).
        let feed = if cfg.ha.is_some() {
            None
        } else {
            Some(match start_changefeed(&feed_cfg, &stop).await {
                Err(e) if recovery.created && crate::changefeed::is_definite(&e) => return Err(e),
                r => r,
            })
        };
        let capture = Arc::new(CaptureStatus::default());

        // Snapshot reads of tables for SQL clients, on a PD client of their own.
        let sql_pd = PdClient::connect(pd_config.clone(), stop.child_token())
            .await
            .with_context(|| format!("connect to PD at {}", cfg.pd_addrs.join(",")))?;
        let scan_holds = crate::capture::read::scan_holds::ScanHolds::default();
        let snapshot: Option<Arc<dyn crate::sql::plan::SnapshotSource>> = {
            let reader = Arc::new(crate::capture::snapshot::SnapshotReader::new(
                sql_pd.clone(),
                crate::capture::snapshot::SnapshotConfig::default(),
            ));
            Some(Arc::new(crate::capture::read::TableReader::new(
                crate::capture::snapshot::BlockingSnapshotReader::new(
                    reader,
                    tokio::runtime::Handle::current(),
                ),
                sql_pd.clone(),
                tokio::runtime::Handle::current(),
                scan_holds.clone(),
            )))
        };

        let stats = Arc::new(SinkStats::default());
        stats.next_gno.store(recovery.next_gno, Ordering::Relaxed);
        stats.checkpoint.store(start_ts.0, Ordering::Relaxed);
        let failure = Arc::new(Failure::default());
        let abrupt = Arc::new(AtomicBool::new(false));
        let (msg_tx, msg_rx) = mpsc::channel(WRITER_CHANNEL);
        let queue = ByteBudget::new(WRITER_QUEUE_BYTES);
        let (flushed_tx, flushed_rx) = watch::channel(start_ts);
        // The catalog at the checkpoint; DDLs the writer puts in the binlog change it.
        // Without a capture (it could not start) the catalog is unknown: SQL sees no tables.
        let catalog = match &feed {
            Some(Ok(f)) => f.schema().borrow().clone(),
            // An HA member serves reads before (or without) capturing: the schema at its
            // checkpoint.
            None if cfg.ha.is_some() => catalog_at(&sql_pd, start_ts, cfg.filter.clone())
                .await
                .unwrap_or_else(|e| {
                    warn!(error = %format!("{e:#}"), "no catalog for SQL reads until this member captures");
                    Arc::default()
                }),
            _ => Arc::default(),
        };
        let history = Arc::new(SchemaHistory::new(catalog));
        // Set once this instance owns its HA group; the writer checks it before every write.
        let fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>> = Arc::default();
        let writer_fence = cfg.ha.is_some().then(|| fence.clone());
        let mut store = store;
        if let Some(fence) = writer_fence.clone() {
            // Asked right before each system call that changes the files as well: a process
            // paused in the middle of a group commit or a rotation (past its lease) completes
            // at most the one call it was cleared for once it resumes. A standby (no fence
            // yet) writes what it relays.
            store.set_write_guard(crate::binlog_store::WriteGuard::new(move || {
                match fence.get() {
                    Some(f) => f
                        .check()
                        .map_err(|e| format!("lost the ownership of the HA group: {e}")),
                    None => Ok(()),
                }
            }));
        }

        let store_closed = CancellationToken::new();
        let writer = {
            let (stats, failure, stop, abrupt) =
                (stats.clone(), failure.clone(), stop.clone(), abrupt.clone());
            let store_closed = store_closed.clone();
            let (history, queue) = (history.clone(), queue.clone());
            tokio::task::spawn_blocking(move || {
                let mut w = Sink::new(store, queue, flushed_tx, stats, history, writer_fence);
                let result = w.run(msg_rx, &abrupt);
                store_closed.cancel();
                if let Err(e) = result {
                    failure.set(e.context("binlog writer"));
                    stop.cancel();
                }
            })
        };

        let source: Arc<dyn BinlogSource> = Arc::new(
            StoreSource::new(files.clone(), checksum, msg_tx.clone())
                .with_row_metadata(cfg.row_metadata),
        );
        let schema: Arc<dyn SchemaProvider> =
            Arc::new(SchemaView::new(history.clone(), files.clone()));
        let rsa_key: Option<Arc<dyn tibinlog_protocol::wire::auth_exchange::RsaKey>> = {
            let (configured, dir) = (cfg.rsa_private_key.clone(), cfg.data_dir.clone());
            let key = tokio::task::spawn_blocking(move || {
                crate::server::rsa_key::ServerRsaKey::load_or_create(configured.as_deref(), &dir)
            })
            .await
            .context("load the RSA key")??;
            Some(Arc::new(key))
        };
        let server_cfg = |listen, mariadb| ServerConfig {
            listen,
            mariadb,
            users: cfg.users.clone(),
            rsa_key: rsa_key.clone(),
            server_id: cfg.server_id,
            server_uuid,
            tls: cfg.tls.clone(),
            // MariaDB greets with mysql_native_password, and its replicas' client library
            // may not have caching_sha2_password.
            auth_plugin: if mariadb {
                AuthMethod::NativePassword
            } else {
                cfg.auth_plugin
            },
            net_write_timeout: cfg.net_write_timeout,
            limits: cfg.limits,
            metrics: metrics.server.clone(),
            capture: Some(capture.clone()),
            default_heartbeat: cfg.default_heartbeat,
            snapshot: snapshot.clone(),
            max_binlog_size: cfg.max_binlog_size,
            expire_logs_seconds: cfg.expire_logs_seconds,
        };
        let bound = async {
            let main = Server::bind(
                server_cfg(cfg.listen, false),
                source.clone(),
                schema.clone(),
            )
            .await?;
            // One server behind two listeners: the MariaDB-flavoured one shares the MySQL
            // one's connections, sessions and snapshot holds.
            let maria = match cfg.mariadb_listen {
                Some(addr) => Some(
                    main.bind_beside(server_cfg(addr, true), source.clone(), schema.clone())
                        .await?,
                ),
                None => None,
            };
            Ok::<_, crate::server::ServerError>((main, maria))
        };
        let (server, maria) = match bound.await {
            Ok(s) => s,
            Err(e) => {
                stop.cancel();
                if let Some(Ok(f)) = feed {
                    f.close().await;
                }
                drop(msg_tx);
                let _ = writer.await;
                return Err(e).context("start the MySQL server");
            }
        };
        let local_addr = server.local_addr();
        let mariadb_addr = maria.as_ref().map(Server::local_addr);
        let shared = server.shared();
        history.keep_for(shared.registry.snapshot_hold());
        // GC holds for SQL reads: the snapshots sessions pinned on either listener (one
        // registry), and every running scan, each under a service id of its own (PD keeps the
        // oldest of all).
        let sql_holds = [
            ("sql", shared.registry.snapshot_hold()),
            ("sql-scans", scan_holds.watch()),
        ];
        for (what, hold) in sql_holds {
            tokio::spawn(crate::capture::read::hold_snapshots(
                sql_pd.clone(),
                format!("tibinlog-{server_uuid}-{instance_id}-{what}"),
                hold,
                stop.clone(),
            ));
        }
        let mariadb_server = maria.map(|maria| {
            let (failure, stop) = (failure.clone(), stop.clone());
            tokio::spawn(async move {
                if let Err(e) = maria.run(stop.clone()).await {
                    failure.set(anyhow::Error::new(e).context("MariaDB-flavoured server"));
                    stop.cancel();
                }
            })
        });
        let server = {
            let (failure, stop) = (failure.clone(), stop.clone());
            tokio::spawn(async move {
                if let Err(e) = server.run(stop.clone()).await {
                    failure.set(anyhow::Error::new(e).context("MySQL server"));
                    stop.cancel();
                }
            })
        };

        let checkpoint = flushed_rx.clone();
        tokio::spawn(sink::expire_binlogs(
            msg_tx.clone(),
            cfg.expire_logs_seconds,
            stop.clone(),
        ));
        let standby_gc = {
            let mut g = crate::capture::gc_keeper::GcKeeperConfig::new(gc_service_id(
                &server_uuid,
                &instance_id,
            ));
            g.ttl = cfg.gc_ttl;
            g
        };
        let owner = match &cfg.ha {
            Some(ha) => Some(
                match OwnerGate::connect(
                    ha,
                    &cfg.pd_addrs,
                    (server_uuid, cfg.server_id),
                    &instance_id,
                    local_addr,
                    fence,
                    history.clone(),
                    files.clone(),
                    (abrupt.clone(), store_closed.clone()),
                    (sql_pd.clone(), standby_gc, checkpoint.clone()),
                    cfg.filter.clone(),
                )
                .await
                {
                    Ok(gate) => gate,
                    Err(e) => {
                        // Nothing may keep running after a failed start.
                        stop.cancel();
                        drop(msg_tx);
                        let _ = writer.await;
                        return Err(e);
                    }
                },
            ),
            None => None,
        };
        let relay = tokio::spawn(relay(
            feed,
            owner,
            feed_cfg,
            msg_tx,
            queue,
            flushed_rx,
            stop.clone(),
            Verdicts {
                status: capture.clone(),
                exit_on_stop: cfg.exit_on_capture_stop,
                failure: failure.clone(),
            },
        ));
        let progress = tokio::spawn(progress_log(
            stats.clone(),
            capture.clone(),
            files.clone(),
            metrics.capture.clone(),
            cfg.progress_interval,
            stop.clone(),
        ));
        let (status_addr, status) = match status_listener {
            Some(listener) => {
                let server = shared.clone();
                let view = Arc::new(status_http::StatusView {
                    metrics: metrics.clone(),
                    stats: stats.clone(),
                    capture: capture.clone(),
                    files: files.clone(),
                    server,
                    sorter: sorter_metrics,
                    server_id: cfg.server_id,
                    server_uuid: server_uuid.to_string(),
                    started: std::time::Instant::now(),
                    history: Default::default(),
                });
                let (a, t) = status_http::serve(listener, view, stop.clone())?;
                (Some(a), Some(t))
            }
            None => (None, None),
        };
        info!(addr = %local_addr, "tibinlog is serving");
        if let Some(addr) = mariadb_addr {
            info!(%addr, "serving MariaDB replicas (greeting as MariaDB 10.11)");
        }
        Ok(App {
            local_addr,
            mariadb_addr,
            server_uuid,
            instance_id,
            start_ts,
            binlog_dir: cfg.binlog_dir(),
            files,
            checkpoint,
            stats,
            shared,
            stop,
            abrupt,
            failure,
            writer,
            relay,
            server,
            mariadb_server,
            progress,
            status_addr,
            status,
        })
    }

    /// The address of the status listener (metrics, API, page), if configured.
    pub fn status_addr(&self) -> Option<SocketAddr> {
        self.status_addr
    }

    /// The address the MySQL server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The line `tibinlog server` prints on stdout once it serves, so that a script or a test
    /// that passed `--listen …:0` learns the bound port:
    /// `{"event":"serving","listen":"127.0.0.1:41234","server_uuid":"…","start_ts":…,
    /// "mariadb_listen":null}` (the MariaDB-flavoured listener's address when one is configured).
    pub fn serving_line(&self) -> String {
        serde_json::json!({
            "event": "serving",
            "listen": self.local_addr.to_string(),
            "server_uuid": self.server_uuid.to_string(),
            "start_ts": self.start_ts.0,
            "mariadb_listen": self.mariadb_addr.map(|a| a.to_string()),
            "status_listen": self.status_addr.map(|a| a.to_string()),
        })
        .to_string()
    }

    /// The address of the MariaDB-flavoured listener, if configured.
    pub fn mariadb_addr(&self) -> Option<SocketAddr> {
        self.mariadb_addr
    }

    /// The GTID source id.
    pub fn server_uuid(&self) -> Sid {
        self.server_uuid
    }

    /// This instance's id (configured, or kept in the data directory).
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// The PD service id of the capture's GC safe point.
    pub fn gc_service_id(&self) -> String {
        gc_service_id(&self.server_uuid, &self.instance_id)
    }

    /// Where capture started (the recovered checkpoint or the start ts).
    pub fn start_ts(&self) -> Ts {
        self.start_ts
    }

    /// Directory of the binlog files.
    pub fn binlog_dir(&self) -> &Path {
        &self.binlog_dir
    }

    /// The binlog's read side.
    pub fn files(&self) -> BinlogFiles {
        self.files.clone()
    }

    /// A watch of the durable checkpoint: everything with `commit_ts <=` it is in the binlog.
    pub fn checkpoint(&self) -> watch::Receiver<Ts> {
        self.checkpoint.clone()
    }

    /// The latest statements the MySQL listener could not answer (see
    /// [`crate::server::Unanswered`]), oldest first.
    pub fn unanswered_statements(&self) -> Vec<crate::server::Unanswered> {
        self.shared.registry.unanswered()
    }

    /// Server ids of the dump sessions running on the MySQL listener.
    pub fn dump_server_ids(&self) -> Vec<u32> {
        self.shared.registry.dump_server_ids()
    }

    /// A watch of the oldest snapshot timestamp an SQL session reads at (`None`: no session
    /// holds one), e.g. a consistent-snapshot transaction or a read lock.
    pub fn snapshot_hold(&self) -> watch::Receiver<Option<u64>> {
        self.shared.registry.snapshot_hold()
    }

    /// Transactions written since start (skipped resends not counted).
    pub fn txns_written(&self) -> u64 {
        self.stats.txns.load(Ordering::Relaxed)
    }

    /// Resolves when the app stopped itself (a failure) or was cancelled.
    pub async fn stopped(&self) {
        self.stop.cancelled().await;
    }

    /// Runs until cancelled or failed, then stops every part and closes the store cleanly.
    pub async fn wait(self) -> anyhow::Result<()> {
        self.stop.cancelled().await;
        self.shutdown().await
    }

    /// Stops now with a clean close of the store.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.shutdown().await
    }

    /// Stops now without closing the store (unflushed transactions are lost, as after
    /// `kill -9`); for crash tests.
    pub async fn kill(self) {
        self.abrupt.store(true, Ordering::SeqCst);
        self.stop.cancel();
        let _ = self.shutdown().await;
    }

    async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.relay.await;
        let _ = self.writer.await;
        let _ = self.server.await;
        if let Some(m) = self.mariadb_server {
            let _ = m.await;
        }
        let _ = self.progress.await;
        if let Some(t) = self.status {
            let _ = t.await;
        }
        info!(
            txns = self.stats.txns.load(Ordering::Relaxed),
            checkpoint = self.stats.checkpoint.load(Ordering::Relaxed),
            "tibinlog stopped"
        );
        match self.failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Logs a progress line every `every`: transactions written, next GNO, checkpoint, lag.
async fn progress_log(
    stats: Arc<SinkStats>,
    capture: Arc<CaptureStatus>,
    files: BinlogFiles,
    regions: crate::metrics::CaptureMetrics,
    every: Duration,
    stop: CancellationToken,
) {
    if every.is_zero() {
        return;
    }
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let checkpoint = Ts(stats.checkpoint.load(Ordering::Relaxed));
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let lag_ms = now_ms.saturating_sub(checkpoint.physical_ms());
        let (file, pos) = files.current_end();
        let report = capture.report();
        if report.state != CaptureState::Running {
            warn!(
                capture = report.state.name(),
                error = %report.last_error,
                checkpoint = checkpoint.0,
                file,
                pos,
                "progress: capture is not running"
            );
            continue;
        }
        let (queued, initializing, normal) = regions.region_totals();
        if queued + initializing > 0 {
            let total = queued + initializing + normal;
            info!(
                initialized = normal,
                scanning = initializing,
                queued,
                total,
                "initial scan: {:.1}% of regions initialized",
                normal as f64 * 100.0 / total as f64
            );
        }
        info!(
            txns = stats.txns.load(Ordering::Relaxed),
            skipped = stats.skipped.load(Ordering::Relaxed),
            gno = stats.next_gno.load(Ordering::Relaxed).saturating_sub(1),
            checkpoint = checkpoint.0,
            lag_ms,
            file,
            pos,
            "progress"
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_keeps_the_filter_it_was_written_with() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let rules = vec!["shop.*".to_owned(), "!shop.tmp".to_owned()];
        record_filter(&data, &rules).unwrap();
        // The same rules start again; other rules, or none, are refused with both named.
        record_filter(&data, &rules).unwrap();
        let e = format!(
            "{:#}",
            record_filter(&data, &["shop.*".to_owned()]).unwrap_err()
        );
        assert!(
            e.contains("!shop.tmp") && e.contains("new data directory"),
            "{e}"
        );
        let e = format!("{:#}", record_filter(&data, &[]).unwrap_err());
        assert!(e.contains("every table"), "{e}");
        // A damaged record is an error, not a fresh start.
        std::fs::write(data.join(FILTER_RECORD), b"{").unwrap();
        assert!(record_filter(&data, &rules).is_err());
    }

    #[test]
    fn the_instance_id_is_made_once_and_kept_in_the_data_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let made = instance_id(None, dir.path()).expect("made");
        assert_eq!(made.len(), 12);
        assert_eq!(instance_id(None, dir.path()).expect("kept"), made);
        let other = tempfile::tempdir().expect("tempdir");
        assert_ne!(instance_id(None, other.path()).expect("made"), made);
        // A configured one wins (and is not written).
        assert_eq!(
            instance_id(Some("node-b.1"), dir.path()).expect("configured"),
            "node-b.1"
        );
        assert_eq!(instance_id(None, dir.path()).expect("kept"), made);
        for bad in ["", "a/b", "a b", &"x".repeat(65)] {
            assert!(instance_id(Some(bad), dir.path()).is_err(), "{bad:?}");
        }
        std::fs::write(dir.path().join(INSTANCE_ID_FILE), "bad id\n").expect("write");
        assert!(instance_id(None, dir.path()).is_err());
        assert_eq!(
            gc_service_id(&server_uuid_for_cluster(1), "n1"),
            format!("tibinlog-{}-n1", server_uuid_for_cluster(1))
        );
    }

    #[test]
    fn server_uuid_is_a_stable_v5_uuid_of_the_cluster_id() {
        let a = server_uuid_for_cluster(7);
        assert_eq!(a, server_uuid_for_cluster(7));
        assert_ne!(a, server_uuid_for_cluster(8));
        // The RFC 4122 example: uuid5(NAMESPACE_DNS, "python.org").
        let dns = 0x6ba7_b810_9dad_11d1_80b4_00c0_4fd4_30c8_u128.to_be_bytes();
        assert_eq!(
            Sid(uuid5(dns, b"python.org")).to_string(),
            "886313e1-3b8a-5372-9b90-0c9aee199e5d"
        );
        // Version 5, RFC 4122 variant.
        assert_eq!(a.0[6] >> 4, 5);
        assert_eq!(a.0[8] >> 6, 0b10);
    }
}

//! The top-level wiring: changefeed → binlog sink → MySQL replication server. Each part lives
//! in its stage; this module only starts them, joins them and stops them.
//!
//! ```text
//!  PD/TiKV ─► Changefeed ─► relay task ─────► binlog sink ─► BinlogStore (files, fsync)
//!             (changefeed)  (changefeed::     (binlog_store::  │ durable end watch
//!                 ▲          supervisor)       sink)           │
//!                 └─ checkpoint ◄── flushed checkpoint ────────┤
//!                                                              ▼
//!                        Server ◄── StoreSource (binlog_store::source), SchemaView
//!                        (server)   snapshot reads (capture::read)
//! ```
//!
//! * Start ([`App::start`], its steps in `start.rs`): reach PD, open the store (recovery);
//!   capture from the recovered checkpoint, else the configured start ts, else PD's current
//!   TSO. `server_uuid` is derived from the TiDB cluster id unless configured, so a restart
//!   keeps the GTID source. Then the sink, the listeners, in an HA group the owner gate
//!   (`ha::gate`), the relay task, the progress log and the status listener.
//! * The sink and the relay are documented where they live: `binlog_store/sink.rs` (group
//!   commit, intermediate checkpoints, purges, relayed transactions) and
//!   `changefeed/supervisor.rs` (restarts after errors, a capture stopped for good).
//! * Stop: cancel the token; the sink closes the store cleanly.

pub mod config;
mod data_dir;
#[cfg(feature = "sim")]
pub mod demo;
mod progress;
mod start;
mod status_http;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::AuthMethod;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::binlog_store::BinlogFiles;
use crate::model::Ts;
use crate::mounter::TableFilter;
use crate::server::{BinlogSource, SchemaProvider, Server, Shared, TlsFiles};

use crate::binlog_store::catalog_history::SchemaView;
use crate::binlog_store::sink::{self, SinkStats};
use crate::binlog_store::source::StoreSource;
use crate::changefeed::supervisor::{relay, Failure, Verdicts};

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
pub use data_dir::{
    check_instance_id, instance_id, record_filter, FILTER_RECORD, INSTANCE_ID_FILE,
};

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
        let prepared = start::prepare(&cfg, &stop).await?;
        Self::assemble(cfg, stop, prepared).await
    }

    /// Starts the sink, the listeners, the HA gate, the relay and the status listener.
    async fn assemble(
        cfg: AppConfig,
        stop: CancellationToken,
        p: start::Prepared,
    ) -> anyhow::Result<App> {
        let start::Prepared {
            cluster,
            status_listener,
            instance_id,
            metrics,
            opened,
            sorter_metrics,
            feed_cfg,
            feed,
            capture,
            reads,
        } = p;
        let (server_uuid, start_ts) = (cluster.server_uuid, opened.start_ts);
        let files = opened.store.files();
        // The catalog at the checkpoint; DDLs the writer puts in the binlog change it.
        let catalog = start::first_catalog(&cfg, &feed, &reads.pd, start_ts).await;
        let next_gno = opened.recovery.next_gno;
        let w = start::start_sink(
            opened.store,
            (next_gno, start_ts),
            catalog,
            cfg.ha.is_some(),
            &stop,
        );

        let source: Arc<dyn BinlogSource> = Arc::new(
            StoreSource::new(files.clone(), opened.checksum, w.msg_tx.clone())
                .with_row_metadata(cfg.row_metadata),
        );
        let schema: Arc<dyn SchemaProvider> =
            Arc::new(SchemaView::new(w.history.clone(), files.clone()));
        let servers = start::bind_servers(
            &cfg,
            server_uuid,
            (source, schema),
            (&metrics, &capture, &reads.source),
        )
        .await;
        let (server, maria) = match servers {
            Ok(s) => s,
            Err(e) => return Err(start::abandon(e, &stop, feed, w.msg_tx, w.writer).await),
        };
        let local_addr = server.local_addr();
        let mariadb_addr = maria.as_ref().map(Server::local_addr);
        let shared = server.shared();
        w.history.keep_for(shared.registry.snapshot_hold());
        start::hold_sql_snapshots(
            &reads,
            &shared,
            &format!("tibinlog-{server_uuid}-{instance_id}"),
            &stop,
        );
        let mariadb_server =
            maria.map(|m| start::run_server(m, "MariaDB-flavoured server", &w.failure, &stop));
        let server = start::run_server(server, "MySQL server", &w.failure, &stop);

        let checkpoint = w.flushed_rx.clone();
        tokio::spawn(sink::expire_binlogs(
            w.msg_tx.clone(),
            cfg.expire_logs_seconds,
            stop.clone(),
        ));
        let standby = start::Standby {
            fence: w.fence,
            history: w.history.clone(),
            files: files.clone(),
            abrupt: w.abrupt.clone(),
            store_closed: w.store_closed.clone(),
            pd: reads.pd.clone(),
            checkpoint: checkpoint.clone(),
        };
        let owner =
            match start::join_if_ha(&cfg, (server_uuid, &instance_id, local_addr), standby).await {
                Ok(owner) => owner,
                // Nothing may keep running after a failed start.
                Err(e) => return Err(start::abandon(e, &stop, None, w.msg_tx, w.writer).await),
            };
        let relay = tokio::spawn(relay(
            feed,
            owner,
            feed_cfg,
            w.msg_tx,
            w.queue,
            w.flushed_rx,
            stop.clone(),
            Verdicts {
                status: capture.clone(),
                exit_on_stop: cfg.exit_on_capture_stop,
                failure: w.failure.clone(),
            },
        ));
        let progress = tokio::spawn(progress::progress_log(
            w.stats.clone(),
            capture.clone(),
            files.clone(),
            metrics.capture.clone(),
            cfg.progress_interval,
            stop.clone(),
        ));
        let (status_addr, status) = match status_listener {
            Some(listener) => {
                let view = status_http::StatusView {
                    metrics: metrics.clone(),
                    stats: w.stats.clone(),
                    capture: capture.clone(),
                    files: files.clone(),
                    server: shared.clone(),
                    sorter: sorter_metrics,
                    server_id: cfg.server_id,
                    server_uuid: server_uuid.to_string(),
                    started: std::time::Instant::now(),
                    history: Default::default(),
                };
                let (a, t) = status_http::serve(listener, Arc::new(view), stop.clone())?;
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
            stats: w.stats,
            shared,
            stop,
            abrupt: w.abrupt,
            failure: w.failure,
            writer: w.writer,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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

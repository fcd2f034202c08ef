//! The named steps of [`super::App::start`]: reach the cluster, open the binlog store, configure
//! the changefeed, set up snapshot reads, start the binlog sink and the MySQL listeners.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::AuthMethod;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{gc_service_id, server_uuid_for_cluster, AppConfig};
use crate::binlog_store::catalog_history::SchemaHistory;
use crate::binlog_store::recovery::Recovery;
use crate::binlog_store::sink::{Sink, SinkStats};
use crate::binlog_store::source::WriterMsg;
use crate::binlog_store::{BinlogStore, StoreConfig};
use crate::budget::ByteBudget;
use crate::capture::pd::{PdClient, PdConfig};
use crate::capture::puller::PullerConfig;
use crate::capture::read::scan_holds::ScanHolds;
use crate::changefeed::supervisor::{Failure, WRITER_CHANNEL, WRITER_QUEUE_BYTES};
use crate::changefeed::{ChangeEvent, Changefeed, ChangefeedConfig};
use crate::ha::follow::catalog_at;
use crate::metrics::Metrics;
use crate::model::Ts;
use crate::server::status::CaptureStatus;
use crate::server::{BinlogSource, SchemaProvider, Server, ServerConfig, Shared};
use crate::sql::plan::SnapshotSource;

/// What the start learnt from PD.
pub(super) struct Cluster {
    pub tls: Option<crate::security::ClusterTls>,
    pub pd_config: PdConfig,
    pub cluster_id: u64,
    /// Configured, or derived from the cluster id.
    pub server_uuid: Sid,
    /// The configured start ts, else PD's current TSO.
    pub tso: Ts,
}

/// Connects to PD once: the cluster id (for the server UUID) and a timestamp to start from.
pub(super) async fn connect_cluster(
    cfg: &AppConfig,
    stop: &CancellationToken,
) -> anyhow::Result<Cluster> {
    if cfg.pd_addrs.is_empty() {
        anyhow::bail!("no PD address given");
    }
    let tls = match &cfg.cluster_tls {
        Some(files) => {
            Some(crate::security::ClusterTls::from_files(files).context("TLS to PD and TiKV")?)
        }
        None => None,
    };
    let mut pd_config = PdConfig::new(cfg.pd_addrs.clone());
    pd_config.tls = tls.clone();
    let pd_cancel = stop.child_token();
    // Stops the PD client's tasks on every way out of this function.
    let _pd_guard = pd_cancel.clone().drop_guard();
    let pd = PdClient::connect(pd_config.clone(), pd_cancel)
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
    Ok(Cluster {
        tls,
        pd_config,
        cluster_id,
        server_uuid,
        tso,
    })
}

/// The status listener's socket, if configured.
pub(super) async fn bind_status(
    cfg: &AppConfig,
) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    match cfg.status_listen {
        Some(addr) => Ok(Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for the status API"))?,
        )),
        None => Ok(None),
    }
}

/// The opened (recovered) binlog store and where capture starts.
pub(super) struct Opened {
    pub store: BinlogStore,
    pub recovery: Recovery,
    /// The recovered checkpoint, else the cluster's start timestamp.
    pub start_ts: Ts,
    /// Events carry CRC32 checksums.
    pub checksum: bool,
}

/// Opens the binlog store (recovering it) on the blocking pool.
pub(super) async fn open_store(
    cfg: &AppConfig,
    cluster: &Cluster,
    metrics: &Metrics,
) -> anyhow::Result<Opened> {
    let mut store_cfg = StoreConfig::new(cfg.binlog_dir(), cfg.server_id, cluster.server_uuid);
    store_cfg.max_binlog_size = cfg.max_binlog_size;
    store_cfg.expire_logs_seconds = cfg.expire_logs_seconds;
    store_cfg.row_metadata = cfg.row_metadata;
    store_cfg.server_version = crate::server::server_version();
    store_cfg.first_file_ts = cluster.tso;
    store_cfg.metrics = metrics.binlog.clone();
    let checksum = store_cfg.checksum;
    let (store, recovery) = tokio::task::spawn_blocking(move || BinlogStore::open(store_cfg))
        .await
        .context("store open task")?
        .with_context(|| format!("open the binlog store in {}", cfg.binlog_dir().display()))?;
    let start_ts = match recovery.checkpoint {
        Some(cp) => cp,
        None => {
            if !recovery.created && recovery.last_written.is_some() {
                warn!("the binlog has transactions but no checkpoint; capture starts at the configured start ts");
            }
            cluster.tso
        }
    };
    info!(
        cluster_id = cluster.cluster_id,
        server_uuid = %cluster.server_uuid,
        start_ts = start_ts.0,
        recovered_checkpoint = ?recovery.checkpoint.map(|t| t.0),
        next_gno = recovery.next_gno,
        truncated_bytes = recovery.truncated_bytes,
        dropped_records = recovery.dropped_records,
        created = recovery.created,
        "binlog store open"
    );
    Ok(Opened {
        store,
        recovery,
        start_ts,
        checksum,
    })
}

/// The changefeed's configuration: capture from `start_ts`, its sorter cache under the data
/// directory.
pub(super) fn changefeed_config(
    cfg: &AppConfig,
    cluster: &Cluster,
    instance_id: &str,
    start_ts: Ts,
    (metrics, sorter_metrics): (&Metrics, &crate::sorter::MetricsHandle),
) -> ChangefeedConfig {
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
    // One safe point per instance: the members of an HA group each hold theirs, so the
    // history stays until the slowest of them has it.
    c.gc_service_id = gc_service_id(&cluster.server_uuid, instance_id);
    c.tls = cluster.tls.clone();
    c.gc_ttl = cfg.gc_ttl;
    c.prewrite_memory_bytes = cfg.prewrite_memory_bytes;
    let mut p = PullerConfig::new(cfg.pd_addrs.clone(), Vec::new(), start_ts);
    p.pd = cluster.pd_config.clone();
    p.scan_limit_per_store = cfg.incremental_scan_limit;
    p.matcher.pending_bytes_limit = cfg.pending_txn_bytes;
    p.metrics = metrics.capture.clone();
    c.puller = Some(p);
    c
}

/// Snapshot reads of tables for SQL clients, on a PD client of their own.
pub(super) struct Reads {
    pub pd: PdClient,
    /// Every running scan holds its timestamp here.
    pub holds: ScanHolds,
    pub source: Option<Arc<dyn SnapshotSource>>,
}

pub(super) async fn snapshot_reads(
    cfg: &AppConfig,
    cluster: &Cluster,
    stop: &CancellationToken,
) -> anyhow::Result<Reads> {
    let pd = PdClient::connect(cluster.pd_config.clone(), stop.child_token())
        .await
        .with_context(|| format!("connect to PD at {}", cfg.pd_addrs.join(",")))?;
    let holds = ScanHolds::default();
    let reader = Arc::new(crate::capture::snapshot::SnapshotReader::new(
        pd.clone(),
        crate::capture::snapshot::SnapshotConfig::default(),
    ));
    let source: Arc<dyn SnapshotSource> = Arc::new(crate::capture::read::TableReader::new(
        crate::capture::snapshot::BlockingSnapshotReader::new(
            reader,
            tokio::runtime::Handle::current(),
        ),
        pd.clone(),
        tokio::runtime::Handle::current(),
        holds.clone(),
    ));
    Ok(Reads {
        pd,
        holds,
        source: Some(source),
    })
}

/// The catalog SQL answers start with. Without a capture (it could not start) the catalog is
/// unknown: SQL sees no tables.
pub(super) async fn first_catalog(
    cfg: &AppConfig,
    feed: &Option<anyhow::Result<Changefeed>>,
    pd: &PdClient,
    start_ts: Ts,
) -> crate::mounter::Catalog {
    match feed {
        Some(Ok(f)) => f.schema().borrow().clone(),
        // An HA member serves reads before (or without) capturing: the schema at its
        // checkpoint.
        None if cfg.ha.is_some() => catalog_at(pd, start_ts, cfg.filter.clone())
            .await
            .unwrap_or_else(|e| {
                warn!(error = %format!("{e:#}"), "no catalog for SQL reads until this member captures");
                Arc::default()
            }),
        _ => Arc::default(),
    }
}

/// An HA member's store asks the fence right before each system call that changes the files
/// as well: a process paused in the middle of a group commit or a rotation (past its lease)
/// completes at most the one call it was cleared for once it resumes. A standby (no fence
/// yet) writes what it relays.
pub(super) fn guard_writes(
    store: &mut BinlogStore,
    fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>>,
) {
    store.set_write_guard(crate::binlog_store::WriteGuard::new(move || {
        match fence.get() {
            Some(f) => f
                .check()
                .map_err(|e| format!("lost the ownership of the HA group: {e}")),
            None => Ok(()),
        }
    }));
}

/// The sink's view of the ownership `fence` slot (set once the campaign is won).
fn owner_fence(
    fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>>,
) -> crate::binlog_store::sink::OwnerFence {
    Arc::new(move || fence.get().map(|f| f.check().map_err(|e| e.to_string())))
}

/// How the sink's thread ends: its failure stops the app; `closed` fires once the store is
/// closed (or dropped, when `abrupt`).
pub(super) struct SinkEnd {
    pub failure: Arc<Failure>,
    pub stop: CancellationToken,
    pub abrupt: Arc<AtomicBool>,
    pub closed: CancellationToken,
}

/// Runs the sink on the blocking pool (the store fsyncs).
pub(super) fn spawn_sink(
    mut sink: Sink,
    rx: mpsc::Receiver<WriterMsg<ChangeEvent>>,
    end: SinkEnd,
) -> JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        let result = sink.run(rx, &end.abrupt);
        end.closed.cancel();
        if let Err(e) = result {
            end.failure.set(e.context("binlog writer"));
            end.stop.cancel();
        }
    })
}

/// Binds the MySQL listener and, if configured, the MariaDB-flavoured one beside it.
pub(super) async fn bind_servers(
    cfg: &AppConfig,
    server_uuid: Sid,
    (source, schema): (Arc<dyn BinlogSource>, Arc<dyn SchemaProvider>),
    (metrics, capture, snapshot): (
        &Metrics,
        &Arc<CaptureStatus>,
        &Option<Arc<dyn SnapshotSource>>,
    ),
) -> anyhow::Result<(Server, Option<Server>)> {
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
        // MariaDB greets with mysql_native_password, and its replicas' client library may not
        // have caching_sha2_password.
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
        // One server behind two listeners: the MariaDB-flavoured one shares the MySQL one's
        // connections, sessions and snapshot holds.
        let maria = match cfg.mariadb_listen {
            Some(addr) => Some(
                main.bind_beside(server_cfg(addr, true), source.clone(), schema.clone())
                    .await?,
            ),
            None => None,
        };
        Ok::<_, crate::server::ServerError>((main, maria))
    };
    bound.await.context("start the MySQL server")
}

/// GC holds for SQL reads: the snapshots sessions pinned on either listener (one registry),
/// and every running scan, each under a service id of its own (PD keeps the oldest of all).
pub(super) fn hold_sql_snapshots(
    reads: &Reads,
    shared: &Shared,
    service_prefix: &str,
    stop: &CancellationToken,
) {
    let holds = [
        ("sql", shared.registry.snapshot_hold()),
        ("sql-scans", reads.holds.watch()),
    ];
    for (what, hold) in holds {
        tokio::spawn(crate::capture::read::hold_snapshots(
            reads.pd.clone(),
            format!("{service_prefix}-{what}"),
            hold,
            stop.clone(),
        ));
    }
}

/// Runs a bound listener until `stop`; its failure stops the app.
pub(super) fn run_server(
    server: Server,
    what: &'static str,
    failure: &Arc<Failure>,
    stop: &CancellationToken,
) -> JoinHandle<()> {
    let (failure, stop) = (failure.clone(), stop.clone());
    tokio::spawn(async move {
        if let Err(e) = server.run(stop.clone()).await {
            failure.set(anyhow::Error::new(e).context(what));
            stop.cancel();
        }
    })
}

/// What an HA member's gate shares with the rest of the app.
pub(super) struct Standby {
    pub fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>>,
    pub history: Arc<SchemaHistory>,
    pub files: crate::binlog_store::BinlogFiles,
    pub abrupt: Arc<AtomicBool>,
    pub store_closed: CancellationToken,
    /// Holds the member's safe point while it stands by.
    pub pd: PdClient,
    pub checkpoint: tokio::sync::watch::Receiver<Ts>,
}

/// In an HA group, connects to its etcd: the gate this member campaigns through.
pub(super) async fn join_if_ha(
    cfg: &AppConfig,
    (server_uuid, instance_id, local_addr): (Sid, &str, std::net::SocketAddr),
    standby: Standby,
) -> anyhow::Result<Option<crate::ha::gate::OwnerGate>> {
    let Some(ha) = &cfg.ha else {
        return Ok(None);
    };
    let mut gc =
        crate::capture::gc_keeper::GcKeeperConfig::new(gc_service_id(&server_uuid, instance_id));
    gc.ttl = cfg.gc_ttl;
    crate::ha::gate::OwnerGate::connect(
        ha,
        &cfg.pd_addrs,
        (server_uuid, cfg.server_id),
        instance_id,
        local_addr,
        standby.fence,
        standby.history,
        standby.files,
        (standby.abrupt, standby.store_closed),
        (standby.pd, gc, standby.checkpoint),
        cfg.filter.clone(),
    )
    .await
    .map(Some)
}

/// A start that failed after the sink started: stops everything, closes the changefeed, lets
/// the sink close the store; `e` back.
pub(super) async fn abandon(
    e: anyhow::Error,
    stop: &CancellationToken,
    feed: Option<anyhow::Result<Changefeed>>,
    msg_tx: mpsc::Sender<WriterMsg<ChangeEvent>>,
    writer: JoinHandle<()>,
) -> anyhow::Error {
    stop.cancel();
    if let Some(Ok(f)) = feed {
        f.close().await;
    }
    drop(msg_tx);
    let _ = writer.await;
    e
}

/// Everything the start sets up before the sink: the cluster reached, the store open, the
/// first changefeed asked for, snapshot reads ready.
pub(super) struct Prepared {
    pub cluster: Cluster,
    pub status_listener: Option<tokio::net::TcpListener>,
    pub instance_id: String,
    pub metrics: Arc<Metrics>,
    pub opened: Opened,
    pub sorter_metrics: crate::sorter::MetricsHandle,
    pub feed_cfg: ChangefeedConfig,
    /// `None` in an HA group: capture starts once this member owns it.
    pub feed: Option<anyhow::Result<Changefeed>>,
    pub capture: Arc<CaptureStatus>,
    pub reads: Reads,
}

pub(super) async fn prepare(cfg: &AppConfig, stop: &CancellationToken) -> anyhow::Result<Prepared> {
    let cluster = connect_cluster(cfg, stop).await?;
    // Bound first: a taken port fails the start before anything is opened.
    let status_listener = bind_status(cfg).await?;
    super::record_filter(&cfg.data_dir, &cfg.filter_rules)?;
    let instance_id = super::instance_id(cfg.instance_id.as_deref(), &cfg.data_dir)?;
    let metrics = Arc::new(Metrics::new());
    let opened = open_store(cfg, &cluster, &metrics).await?;
    let sorter_metrics = crate::sorter::MetricsHandle::default();
    let feed_cfg = changefeed_config(
        cfg,
        &cluster,
        &instance_id,
        opened.start_ts,
        (&metrics, &sorter_metrics),
    );
    // A capture that cannot start for good still leaves a binlog to serve, unless there is
    // none yet (a new deployment with, say, a start ts PD already collected: say so now).
    // In an HA group capture starts once this instance owns the group (see `relay`).
    let feed = if cfg.ha.is_some() {
        None
    } else {
        Some(
            match crate::changefeed::supervisor::start_changefeed(&feed_cfg, stop).await {
                Err(e) if opened.recovery.created && crate::changefeed::is_definite(&e) => {
                    return Err(e)
                }
                r => r,
            },
        )
    };
    let capture = Arc::new(CaptureStatus::default());
    let reads = snapshot_reads(cfg, &cluster, stop).await?;
    Ok(Prepared {
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
    })
}

/// The running sink and what the rest of the app shares with it.
pub(super) struct SinkUp {
    pub stats: Arc<SinkStats>,
    pub failure: Arc<Failure>,
    /// Set before `stop` fires: the sink drops the store without closing it.
    pub abrupt: Arc<AtomicBool>,
    pub msg_tx: mpsc::Sender<WriterMsg<ChangeEvent>>,
    /// The byte bound of the sink's queue.
    pub queue: ByteBudget,
    /// Each durable checkpoint.
    pub flushed_rx: watch::Receiver<Ts>,
    pub history: Arc<SchemaHistory>,
    /// Set once this instance owns its HA group; the sink checks it before every write.
    pub fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>>,
    /// Fires once the sink has closed the store.
    pub store_closed: CancellationToken,
    pub writer: JoinHandle<()>,
}

/// Starts the binlog sink on `store` (recovered up to `next_gno`, checkpoint `start_ts`).
pub(super) fn start_sink(
    mut store: BinlogStore,
    (next_gno, start_ts): (u64, Ts),
    catalog: crate::mounter::Catalog,
    ha: bool,
    stop: &CancellationToken,
) -> SinkUp {
    let stats = Arc::new(SinkStats::default());
    stats.next_gno.store(next_gno, Ordering::Relaxed);
    stats.checkpoint.store(start_ts.0, Ordering::Relaxed);
    let failure = Arc::new(Failure::default());
    let abrupt = Arc::new(AtomicBool::new(false));
    let (msg_tx, msg_rx) = mpsc::channel(WRITER_CHANNEL);
    let queue = ByteBudget::new(WRITER_QUEUE_BYTES);
    let (flushed_tx, flushed_rx) = watch::channel(start_ts);
    let history = Arc::new(SchemaHistory::new(catalog));
    let fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>> = Arc::default();
    let writer_fence = ha.then(|| {
        guard_writes(&mut store, fence.clone());
        owner_fence(fence.clone())
    });
    let store_closed = CancellationToken::new();
    let sink = Sink::new(
        store,
        queue.clone(),
        flushed_tx,
        stats.clone(),
        history.clone(),
        writer_fence,
    );
    let writer = spawn_sink(
        sink,
        msg_rx,
        SinkEnd {
            failure: failure.clone(),
            stop: stop.clone(),
            abrupt: abrupt.clone(),
            closed: store_closed.clone(),
        },
    );
    SinkUp {
        stats,
        failure,
        abrupt,
        msg_tx,
        queue,
        flushed_rx,
        history,
        fence,
        store_closed,
        writer,
    }
}

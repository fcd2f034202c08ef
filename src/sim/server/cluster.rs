//! [`SimCluster`]: the handle on a running simulated cluster (its PD, its TiKV stores, their
//! gRPC servers and the driver task), with its faults and its configuration ([`SimConfig`]).
//! Transactions on it are in `txn.rs`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tibinlog_proto::cdcpb::change_data_server::ChangeDataServer;
use tibinlog_proto::pdpb::pd_server::PdServer;
use tibinlog_proto::tikvpb::tikv_server::TikvServer;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use super::cdc::ChangeDataService;
use super::cdc_stream::DEFAULT_SINK_MEMORY_QUOTA;
use super::kv::KvService;
use super::pd::PdService;
use super::state::{PdMember, Shared};
use crate::sim::cdc::{CdcConfig, RegionFaults};
use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::mvcc::{PrewriteRequest, PrewriteResult};
use crate::sim::region::RegionInfo;
use crate::sim::ts::{Clock, SimRng, SystemClock};
use crate::sim::{SimError, Ts};

use super::error::{Result, ServerError};
/// TiKV's `cdc.min-ts-interval` default.
pub const DEFAULT_RESOLVED_TS_INTERVAL: Duration = Duration::from_secs(1);
/// Pause between scan steps while scans run: one 32 KiB chunk per scan per step.
pub const DEFAULT_SCAN_STEP_INTERVAL: Duration = Duration::from_millis(2);
/// How long a stopping gRPC server may take to close its connections before it is aborted.
const SERVER_STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// How to build a [`SimCluster`].
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Number of TiKV stores (ids 1..=n).
    pub stores: usize,
    /// PD port on 127.0.0.1; 0 = a free port.
    pub pd_port: u16,
    /// Seed of every random choice (cluster id, faults).
    pub seed: u64,
    /// `min-ts-interval`: how often resolved ts is computed and sent.
    pub resolved_ts_interval: Duration,
    /// Pause between scan steps.
    pub scan_step_interval: Duration,
    /// Store-wide byte budget of queued change events (TiKV `sink-memory-quota`).
    pub sink_memory_quota: usize,
    /// `incremental-scan-concurrency`.
    pub scan_concurrency: usize,
    /// `incremental-scan-concurrency-limit`.
    pub scan_pending_limit: usize,
    /// Wall clock of the TSO and GC TTLs.
    pub clock: Arc<dyn Clock>,
    /// PD members (the first, on `pd_port`, leads at start; the others on free ports).
    pub pd_members: usize,
    /// Serve PD and TiKV over mutual TLS with these certificates (URLs become `https://`).
    pub tls: Option<super::tls::SimTls>,
}

impl Default for SimConfig {
    fn default() -> Self {
        let cdc = CdcConfig::default();
        Self {
            stores: 3,
            pd_port: 0,
            seed: 0,
            resolved_ts_interval: DEFAULT_RESOLVED_TS_INTERVAL,
            scan_step_interval: DEFAULT_SCAN_STEP_INTERVAL,
            sink_memory_quota: DEFAULT_SINK_MEMORY_QUOTA,
            scan_concurrency: cdc.scan_concurrency,
            scan_pending_limit: cdc.scan_pending_limit,
            clock: Arc::new(SystemClock),
            pd_members: 1,
            tls: None,
        }
    }
}

/// A running gRPC server (a store's or a PD member's).
#[derive(Debug)]
struct Running {
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

impl Running {
    /// Stops accepting and closes the connections; aborted if that takes too long.
    async fn stop(self) {
        self.cancel.cancel();
        let mut handle = self.handle;
        if tokio::time::timeout(SERVER_STOP_TIMEOUT, &mut handle)
            .await
            .is_err()
        {
            handle.abort();
        }
    }
}

#[derive(Debug)]
struct StoreServer {
    addr: SocketAddr,
    running: Option<Running>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    pd_addr: SocketAddr,
    stores: Mutex<HashMap<u64, StoreServer>>,
    /// PD members by member id (a stopped one keeps its address for its restart).
    pds: Mutex<std::collections::BTreeMap<u64, StoreServer>>,
    tls: Option<Tls>,
}

/// The acceptors of a TLS cluster and TiKV's `cert-allowed-cn`.
#[derive(Clone)]
struct Tls {
    pd: tokio_rustls::TlsAcceptor,
    store: tokio_rustls::TlsAcceptor,
    tikv_allowed_cn: Arc<Vec<String>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("tikv_allowed_cn", &self.tikv_allowed_cn)
            .finish_non_exhaustive()
    }
}

/// Handle of a running simulated cluster; clones share it.
#[derive(Debug, Clone)]
pub struct SimCluster {
    inner: Arc<Inner>,
}

async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

fn local_addr(l: &TcpListener, asked: SocketAddr) -> Result<SocketAddr> {
    l.local_addr().map_err(|source| ServerError::Bind {
        addr: asked,
        source,
    })
}

/// A PD-looking cluster id (non-zero, below 2^63) derived from the seed.
pub fn cluster_id_from_seed(seed: u64) -> u64 {
    let mut rng = SimRng::new(seed ^ 0x5EED_C1D5);
    (rng.next_u64() >> 1) | 1
}

impl SimCluster {
    /// Starts PD, the stores and the driver on loopback.
    pub async fn start(cfg: SimConfig) -> Result<Self> {
        let store_ids: Vec<u64> = (1..=cfg.stores.max(1) as u64).collect();
        let cluster_id = cluster_id_from_seed(cfg.seed);
        let cdc = CdcConfig {
            cluster_id,
            scan_pending_limit: cfg.scan_pending_limit,
            scan_concurrency: cfg.scan_concurrency.max(1),
            // TiKV's speed limit spread over the steps the driver takes, and never more than
            // a small share of the sink quota per step: TiKV's scan waits for its sink between
            // batches, so a scan alone does not congest it (tests shrink the quota to kilobytes).
            scan_step_bytes: ((crate::sim::cdc::INCREMENTAL_SCAN_SPEED_LIMIT as f64
                * cfg.scan_step_interval.as_secs_f64()) as usize)
                .min(cfg.sink_memory_quota / 8),
        };
        let mut core = SimCore::new(&store_ids, cdc, cfg.clock.clone(), cfg.seed)?;

        let mut pd_listeners = Vec::new();
        let mut member_ids = SimRng::new(cfg.seed ^ 0x9D);
        for i in 0..cfg.pd_members.max(1) {
            let port = if i == 0 { cfg.pd_port } else { 0 };
            let asked = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let l = bind(asked).await?;
            let addr = local_addr(&l, asked)?;
            pd_listeners.push((member_ids.next_u64() | 1, addr, l));
        }
        let pd_addr = pd_listeners[0].1;
        let mut listeners = Vec::new();
        for &id in &store_ids {
            let asked = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            let l = bind(asked).await?;
            let addr = local_addr(&l, asked)?;
            core.cluster.set_store_address(id, addr.to_string())?;
            listeners.push((id, addr, l));
        }

        let shared = Arc::new(Shared::new(
            core,
            cluster_id,
            &store_ids,
            cfg.sink_memory_quota,
        ));
        let tls = match &cfg.tls {
            Some(t) => Some(Tls {
                pd: t.acceptor(true)?,
                store: t.acceptor(false)?,
                tikv_allowed_cn: Arc::new(t.tikv_allowed_cn.clone()),
            }),
            None => None,
        };
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let inner = Arc::new(Inner {
            shared: shared.clone(),
            cancel: cancel.clone(),
            tracker: tracker.clone(),
            pd_addr,
            stores: Mutex::new(HashMap::new()),
            pds: Mutex::new(std::collections::BTreeMap::new()),
            tls,
        });
        let this = SimCluster { inner };

        for (i, (id, addr, l)) in pd_listeners.into_iter().enumerate() {
            shared.pd.join(PdMember {
                id,
                name: format!("pd-{}", i + 1),
                url: this.url_of(addr),
            });
            let running = this.spawn_pd(id, l);
            this.pd_servers().insert(
                id,
                StoreServer {
                    addr,
                    running: Some(running),
                },
            );
        }
        // The first member leads.
        if let Some((&first, _)) = this.pd_servers().iter().find(|(_, s)| s.addr == pd_addr) {
            shared.pd.transfer(first);
        }

        for (id, addr, l) in listeners {
            let running = this.spawn_store(id, l);
            this.servers().insert(
                id,
                StoreServer {
                    addr,
                    running: Some(running),
                },
            );
        }

        tracker.spawn(super::driver::run(
            shared,
            cfg.scan_step_interval,
            cfg.resolved_ts_interval,
            cancel.child_token(),
        ));
        tracing::info!(%pd_addr, cluster_id, stores = store_ids.len(), "simulated cluster up");
        Ok(this)
    }

    fn servers(&self) -> MutexGuard<'_, HashMap<u64, StoreServer>> {
        self.inner
            .stores
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn pd_servers(&self) -> MutexGuard<'_, std::collections::BTreeMap<u64, StoreServer>> {
        self.inner.pds.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn_pd(&self, member_id: u64, listener: TcpListener) -> Running {
        let cancel = self.inner.cancel.child_token();
        let pd = PdService::new(
            self.inner.shared.clone(),
            member_id,
            cancel.clone(),
            self.inner.tracker.clone(),
        );
        // PD serves its HTTP API on the same port as gRPC.
        let routes =
            tonic::service::Routes::from(super::pd_http::router(self.inner.shared.clone()))
                .add_service(PdServer::new(pd));
        let router = Server::builder().accept_http1(true).add_routes(routes);
        let acceptor = self.inner.tls.as_ref().map(|t| t.pd.clone());
        self.serve(
            router,
            listener,
            acceptor,
            cancel,
            format!("PD member {member_id}"),
        )
    }

    /// Serves `router` on `listener` (over TLS with `acceptor`) until `cancel` fires.
    fn serve(
        &self,
        router: tonic::transport::server::Router,
        listener: TcpListener,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        cancel: CancellationToken,
        what: String,
    ) -> Running {
        let stop = cancel.clone();
        let handle = self.inner.tracker.spawn(async move {
            let r = match acceptor {
                None => {
                    router
                        .serve_with_incoming_shutdown(
                            TcpIncoming::from(listener).with_nodelay(Some(true)),
                            stop.cancelled_owned(),
                        )
                        .await
                }
                Some(acceptor) => {
                    let (incoming, accept) = super::tls::incoming(listener, acceptor, stop.clone());
                    let serve =
                        router.serve_with_incoming_shutdown(incoming, stop.cancelled_owned());
                    tokio::join!(serve, accept).0
                }
            };
            if let Err(e) = r {
                tracing::warn!(server = what, error = %e, "simulated server failed");
            }
        });
        Running { cancel, handle }
    }

    /// PD members that are up: `(member id, client URL)`, in id order.
    pub fn pd_members(&self) -> Vec<(u64, String)> {
        self.inner
            .shared
            .pd
            .members()
            .into_iter()
            .map(|m| (m.id, m.url))
            .collect()
    }

    /// Pairs every store's `KvScan` has returned since start.
    pub fn scanned_pairs(&self) -> u64 {
        self.inner
            .shared
            .scanned_pairs
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The PD leader's member id (0 when no member is up).
    pub fn pd_leader(&self) -> u64 {
        self.inner.shared.pd.leader()
    }

    /// Moves PD's leadership to member `member_id` (which must be up): the old leader's TSO
    /// streams end, it answers "not leader" from now on.
    pub fn transfer_pd_leader(&self, member_id: u64) -> Result<()> {
        self.check_alive()?;
        if !self.inner.shared.pd.transfer(member_id) {
            return Err(ServerError::PdMember {
                member_id,
                state: "not up",
            });
        }
        tracing::info!(member_id, "simulated PD leader moved");
        Ok(())
    }

    /// Stops PD member `member_id`: its server stops, its connections break; if it led, the
    /// lowest other member takes over.
    pub async fn stop_pd(&self, member_id: u64) -> Result<()> {
        self.check_alive()?;
        let running = {
            let mut pds = self.pd_servers();
            let s = pds.get_mut(&member_id).ok_or(ServerError::PdMember {
                member_id,
                state: "unknown",
            })?;
            s.running.take().ok_or(ServerError::PdMember {
                member_id,
                state: "already stopped",
            })?
        };
        self.inner.shared.pd.leave(member_id);
        running.stop().await;
        tracing::info!(
            member_id,
            leader = self.pd_leader(),
            "simulated PD member stopped"
        );
        Ok(())
    }

    /// Restarts a stopped PD member on its old port (as a follower).
    pub async fn restart_pd(&self, member_id: u64) -> Result<()> {
        self.check_alive()?;
        let (addr, index) = {
            let pds = self.pd_servers();
            let s = pds.get(&member_id).ok_or(ServerError::PdMember {
                member_id,
                state: "unknown",
            })?;
            if s.running.is_some() {
                return Err(ServerError::PdMember {
                    member_id,
                    state: "running",
                });
            }
            (
                s.addr,
                pds.keys().position(|&k| k == member_id).unwrap_or(0),
            )
        };
        let listener = bind(addr).await?;
        let running = self.spawn_pd(member_id, listener);
        if let Some(s) = self.pd_servers().get_mut(&member_id) {
            s.running = Some(running);
        }
        self.inner.shared.pd.join(PdMember {
            id: member_id,
            name: format!("pd-{}", index + 1),
            url: self.url_of(addr),
        });
        tracing::info!(member_id, "simulated PD member restarted");
        Ok(())
    }

    fn spawn_store(&self, store_id: u64, listener: TcpListener) -> Running {
        let cancel = self.inner.cancel.child_token();
        let shared = self.inner.shared.clone();
        let cdc = ChangeDataService::new(
            shared.clone(),
            store_id,
            cancel.clone(),
            self.inner.tracker.clone(),
        );
        let kv = KvService::new(shared, store_id);
        let allowed = self
            .inner
            .tls
            .as_ref()
            .map(|t| t.tikv_allowed_cn.clone())
            .unwrap_or_default();
        let check =
            move |req: tonic::Request<()>| super::tls::check_tikv_cn(&allowed, &req).map(|()| req);
        let router = Server::builder()
            .add_service(ChangeDataServer::with_interceptor(cdc, check.clone()))
            .add_service(TikvServer::with_interceptor(kv, check));
        let acceptor = self.inner.tls.as_ref().map(|t| t.store.clone());
        self.serve(
            router,
            listener,
            acceptor,
            cancel,
            format!("TiKV store {store_id}"),
        )
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.inner.tracker
    }

    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    pub(super) fn check_alive(&self) -> Result<()> {
        if self.inner.cancel.is_cancelled() {
            return Err(ServerError::Shutdown);
        }
        Ok(())
    }

    /// The PD cluster id (from the seed).
    pub fn cluster_id(&self) -> u64 {
        self.inner.shared.cluster_id
    }

    /// PD's `host:port`.
    pub fn pd_addr(&self) -> SocketAddr {
        self.inner.pd_addr
    }

    /// PD's URL as clients dial it: `http://127.0.0.1:PORT` (`https://` over TLS).
    pub fn pd_url(&self) -> String {
        self.url_of(self.inner.pd_addr)
    }

    /// A member's client URL as PD lists it.
    fn url_of(&self, addr: SocketAddr) -> String {
        let scheme = if self.inner.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{addr}")
    }

    /// True when PD and the stores serve mutual TLS.
    pub fn tls(&self) -> bool {
        self.inner.tls.is_some()
    }

    /// Store ids in ascending order.
    pub fn store_ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.servers().keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// A store's gRPC address (also while it is stopped: it comes back on the same port).
    pub fn store_addr(&self, store_id: u64) -> Option<SocketAddr> {
        self.servers().get(&store_id).map(|s| s.addr)
    }

    /// The fullest store's CDC queue, as a fraction of its memory quota.
    pub fn sink_fill(&self) -> f64 {
        self.inner
            .shared
            .quotas
            .values()
            .map(|q| q.used() as f64 / q.capacity().max(1) as f64)
            .fold(0.0, f64::max)
    }

    /// Runs `f` on the core under the lock. Outputs of core calls made inside are **not**
    /// delivered: use [`SimCluster::apply`] for anything that writes or changes regions.
    pub fn with_core<R>(&self, f: impl FnOnce(&mut SimCore) -> R) -> R {
        f(&mut self.inner.shared.lock().core)
    }

    /// Runs a core call and delivers its outputs to the streams, under one lock.
    pub fn apply<R>(
        &self,
        f: impl FnOnce(&mut SimCore) -> crate::sim::Result<(R, Vec<StoreOutput>)>,
    ) -> Result<R> {
        self.check_alive()?;
        Ok(self.inner.shared.apply(f)?)
    }

    /// A region by id.
    pub fn region(&self, region_id: u64) -> Option<RegionInfo> {
        self.with_core(|c| c.cluster.region(region_id).cloned())
    }

    /// The region holding a raw key.
    pub fn region_by_raw_key(&self, raw: &[u8]) -> Option<RegionInfo> {
        self.with_core(|c| c.cluster.region_by_raw_key(raw).cloned())
    }

    /// Every region in key order.
    pub fn regions(&self) -> Vec<RegionInfo> {
        self.with_core(|c| {
            c.cluster
                .scan_regions(b"", b"", 0)
                .into_iter()
                .cloned()
                .collect()
        })
    }

    /// One timestamp from the TSO.
    pub fn tso(&self) -> Ts {
        self.with_core(|c| c.ts())
    }

    pub(crate) fn prewrite(&self, req: &PrewriteRequest) -> Result<PrewriteResult> {
        self.apply(|core| {
            let (r, out) = core.prewrite(req)?;
            Ok((r, out))
        })
    }

    // ---- faults -------------------------------------------------------------------------

    /// Splits `region_id` at a raw key (the original id keeps the right part).
    pub async fn split_region(&self, region_id: u64, raw_split_key: &[u8]) -> Result<()> {
        self.apply(|c| c.split_region(region_id, raw_split_key).map(|o| ((), o)))
    }

    /// Splits whichever region holds `raw_split_key` at it; returns `(left, right)` ids.
    pub async fn split_at(&self, raw_split_key: &[u8]) -> Result<(u64, u64)> {
        let right = self
            .region_by_raw_key(raw_split_key)
            .ok_or(SimError::InvalidRequest("no region holds the key"))?
            .id();
        self.split_region(right, raw_split_key).await?;
        let left = self.with_core(|c| {
            c.cluster
                .prev_region(&crate::sim::region::encode_key(raw_split_key))
                .map(|r| r.id())
        });
        Ok((left.ok_or(SimError::RegionNotFound(0))?, right))
    }

    /// Merges `source` into the adjacent `target`.
    pub async fn merge_regions(&self, source: u64, target: u64) -> Result<()> {
        self.apply(|c| c.merge_regions(source, target).map(|o| ((), o)))
    }

    /// Moves a region's leader to its peer on `store_id`.
    pub async fn transfer_leader(&self, region_id: u64, store_id: u64) -> Result<()> {
        self.apply(|c| c.transfer_leader(region_id, store_id).map(|o| ((), o)))
    }

    /// Stops a store: leaders move away, its gRPC server stops and its streams break.
    pub async fn stop_store(&self, store_id: u64) -> Result<()> {
        self.check_alive()?;
        let running = {
            let mut servers = self.servers();
            let s = servers
                .get_mut(&store_id)
                .ok_or(SimError::StoreNotFound(store_id))?;
            s.running.take().ok_or(ServerError::StoreState {
                store_id,
                state: "already stopped",
            })?
        };
        self.apply(|c| c.stop_store(store_id).map(|o| ((), o)))?;
        running.stop().await;
        tracing::info!(store_id, "simulated store stopped");
        Ok(())
    }

    /// Restarts a stopped store on its old port.
    pub async fn restart_store(&self, store_id: u64) -> Result<()> {
        self.restart_store_on(store_id, false).await
    }

    /// Restarts a stopped store on a new port (a TiKV that comes back on another address): PD
    /// reports the new address, nothing answers on the old one.
    pub async fn restart_store_elsewhere(&self, store_id: u64) -> Result<SocketAddr> {
        self.restart_store_on(store_id, true).await?;
        self.store_addr(store_id)
            .ok_or(SimError::StoreNotFound(store_id).into())
    }

    async fn restart_store_on(&self, store_id: u64, new_port: bool) -> Result<()> {
        self.check_alive()?;
        let addr = {
            let servers = self.servers();
            let s = servers
                .get(&store_id)
                .ok_or(SimError::StoreNotFound(store_id))?;
            if s.running.is_some() {
                return Err(ServerError::StoreState {
                    store_id,
                    state: "running",
                });
            }
            s.addr
        };
        let (listener, addr) = if new_port {
            let asked = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            let l = bind(asked).await?;
            let at = local_addr(&l, asked)?;
            self.apply(|c| {
                c.cluster
                    .set_store_address(store_id, at.to_string())
                    .map(|()| ((), Vec::new()))
            })?;
            (l, at)
        } else {
            (bind(addr).await?, addr)
        };
        self.apply(|c| c.start_store(store_id).map(|o| ((), o)))?;
        let running = self.spawn_store(store_id, listener);
        if let Some(s) = self.servers().get_mut(&store_id) {
            s.running = Some(running);
            s.addr = addr;
        }
        tracing::info!(store_id, "simulated store restarted");
        Ok(())
    }

    fn update_faults(&self, region_id: u64, f: impl FnOnce(&mut RegionFaults)) {
        let mut st = self.inner.shared.lock();
        let mut faults = st.faults.get(&region_id).cloned().unwrap_or_default();
        f(&mut faults);
        st.faults.insert(region_id, faults.clone());
        st.core.set_region_faults(region_id, faults);
    }

    /// Replaces every fault of a region.
    pub async fn set_region_faults(&self, region_id: u64, faults: RegionFaults) {
        self.update_faults(region_id, |f| *f = faults);
    }

    /// Resolved ts of the region lags the TSO by `lag` (zero clears it).
    pub async fn delay_resolved_ts(&self, region_id: u64, lag: Duration) {
        let ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
        self.update_faults(region_id, |f| f.resolved_ts_lag_ms = ms);
    }

    /// Each resolved-ts tick skips the region with this probability (1.0 = never sent).
    pub async fn drop_resolved_ts(&self, region_id: u64, probability: f64) {
        self.update_faults(region_id, |f| f.drop_resolved_ts = probability);
    }

    /// Resolved ts of the region stops advancing (as under a long-held lock) until cleared.
    pub async fn stall_resolved_ts(&self, region_id: u64, stall: bool) {
        self.update_faults(region_id, |f| f.stall_resolved_ts = stall);
    }

    /// True while some downstream of `region_id` runs its incremental scan (registered, not
    /// yet INITIALIZED), on any store.
    pub fn scan_running(&self, region_id: u64) -> bool {
        let stores = self.store_ids();
        self.with_core(|core| {
            stores.iter().any(|s| {
                core.endpoint(*s)
                    .is_ok_and(|ep| ep.initializing().iter().any(|d| d.region_id == region_id))
            })
        })
    }

    /// Each scan step of the region makes no progress with this probability, letting
    /// realtime rows overtake the scan.
    pub async fn stall_scan(&self, region_id: u64, probability: f64) {
        self.update_faults(region_id, |f| f.stall_scan = probability);
    }

    /// Every stream of `store_id` waits `delay` before each message (zero clears it).
    pub async fn slow_stream(&self, store_id: u64, delay: Duration) -> Result<()> {
        let d = self
            .inner
            .shared
            .stream_delay_us
            .get(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))?;
        d.store(
            u64::try_from(delay.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        Ok(())
    }

    /// Advances the GC safe point towards `target` (capped by service safe points) and drops
    /// history below it; returns the safe point used.
    pub async fn run_gc(&self, target: Ts) -> Ts {
        self.with_core(|c| c.run_gc(target))
    }

    /// Stops every server and task and waits for them.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        self.inner.tracker.close();
        if tokio::time::timeout(Duration::from_secs(5), self.inner.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("simulated cluster tasks did not stop in time");
            let handles: Vec<JoinHandle<()>> = self
                .servers()
                .values_mut()
                .filter_map(|s| s.running.take().map(|r| r.handle))
                .collect();
            for h in handles {
                h.abort();
            }
        }
    }
}

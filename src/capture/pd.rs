//! PD client: cluster id, leader failover, TSO, region and store lookups, GC safe points
//! (docs/upstream-facts.md, "PD").
//!
//! * **Membership.** [`PdClient::connect`] tries each configured address in turn with
//!   `GetMembers` (the only call PD serves before the cluster id is known), learns the
//!   cluster id from the response header and dials the leader's first reachable client URL.
//!   Every later request carries the cluster id in its header.
//! * **Failover.** A call that fails with `UNAVAILABLE` (PD's "not leader" / "server not
//!   started"), a transport error, or a deadline drops the leader connection; the next attempt
//!   re-runs discovery over every address. `FAILED_PRECONDITION` "mismatch cluster id" is fatal.
//! * **TSO.** One task owns the `Tso` bidi stream. Callers queue a oneshot; the task takes every
//!   queued caller (up to [`TSO_MAX_BATCH`]) into one `TsoRequest{count}` and hands out
//!   `(physical, logical − count + 1) … (physical, logical)` (the response carries the last of
//!   the batch). Each handed-out ts must exceed the previous one, else
//!   [`PdError::TsoRegression`] (fatal).
//!
//! # Error handling
//! [`PdError::is_retryable`] splits "PD is unreachable right now" (retry with backoff) from
//! "this is the wrong cluster or PD broke a promise" (stop).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tibinlog_proto::pdpb::{self, pd_client::PdClient as PdGrpc};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};

use super::pd_http;
use super::region_cache::RegionInfo;
use crate::model::{Span, Ts};

/// Largest gRPC message accepted from PD or TiKV: 256 MiB, what TiCDC sets.
pub const MAX_DECODING_MESSAGE_SIZE: usize = 256 << 20;
/// Dial timeout of one PD address.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Timeout of one unary PD call.
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts of one call across leader changes before giving up with [`PdError::Unavailable`].
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Most TSO callers merged into one request (client-go's `maxMergeTSORequests` is 10000).
pub const TSO_MAX_BATCH: usize = 10_000;
/// Regions asked per `ScanRegions` page.
const SCAN_REGIONS_PAGE: i32 = 1024;

/// Errors of PD calls.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PdError {
    /// No PD member answered (or the leader kept changing): retry later.
    #[error("PD unavailable at {addrs:?}: {last}")]
    Unavailable { addrs: Vec<String>, last: String },
    /// PD belongs to another cluster than the one we talk to: stop. `got` is 0 when PD only
    /// said so in a `FAILED_PRECONDITION` status.
    #[error("PD cluster id mismatch: expected {expected}, PD has {got}")]
    ClusterIdMismatch { expected: u64, got: u64 },
    /// PD answered with an error in the response header.
    #[error("PD error {kind}: {message}")]
    Server { kind: i32, message: String },
    /// A call failed with a status that is not a leader change.
    #[error("PD call failed")]
    Rpc(#[source] Status),
    /// The TSO went backwards: stop (every ordering guarantee depends on it).
    #[error("TSO regressed from {prev} to {next}")]
    TsoRegression { prev: Ts, next: Ts },
    /// PD answered without a required field.
    #[error("PD response without {0}")]
    Malformed(&'static str),
    /// The client's TSO task stopped (shutdown).
    #[error("PD client closed")]
    Closed,
    /// A PD member refused our TLS (its certificate or ours): stop, retrying cannot help.
    #[error("PD refused the connection: {0}")]
    Refused(String),
    /// PD's HTTP API answered something this client cannot read.
    #[error("PD HTTP API: {0}")]
    Api(String),
}

impl PdError {
    /// True if the call may succeed later (PD restarting, leader election, network).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unavailable { .. } | Self::Rpc(_) | Self::Closed => true,
            Self::Server { kind, .. } => *kind != pdpb::ErrorType::IncompatibleVersion as i32,
            Self::ClusterIdMismatch { .. }
            | Self::TsoRegression { .. }
            | Self::Malformed(_)
            | Self::Refused(_)
            | Self::Api(_) => false,
        }
    }
}

/// Result of PD calls.
pub type Result<T> = std::result::Result<T, PdError>;

/// How to reach PD.
#[derive(Debug, Clone)]
pub struct PdConfig {
    /// `host:port` or `http(s)://host:port` of any PD members; tried in order.
    pub addrs: Vec<String>,
    /// Mutual TLS towards PD and TiKV (every URL is then `https://`).
    pub tls: Option<crate::security::ClusterTls>,
    /// Refuse a PD whose cluster id differs (e.g. the one recorded at the last run).
    pub expected_cluster_id: Option<u64>,
    pub connect_timeout: Duration,
    pub rpc_timeout: Duration,
    pub max_attempts: u32,
}

impl PdConfig {
    /// Defaults for `addrs`.
    pub fn new(addrs: Vec<String>) -> PdConfig {
        PdConfig {
            addrs,
            tls: None,
            expected_cluster_id: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            rpc_timeout: DEFAULT_RPC_TIMEOUT,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}

/// A store as PD describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    pub id: u64,
    /// gRPC `host:port` of `tikvpb.Tikv` and `cdcpb.ChangeData`.
    pub address: String,
    /// TiFlash stores (label `engine=tiflash`) serve no change data.
    pub is_tiflash: bool,
}

/// The URL of `addr` (`host:port` or a URL): `https://` whenever TLS is on, whatever the
/// scheme given (a TLS cluster's PD lists `https://` URLs; a plain URL there is a slip).
fn url_of(addr: &str, tls: bool) -> String {
    let bare = addr.split_once("://").map_or(addr, |(_, rest)| rest);
    if tls {
        format!("https://{bare}")
    } else if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    }
}

/// Dials `addr` (`host:port` or a URL), over TLS with `tls`. A certificate refusal comes back
/// as `UNAUTHENTICATED` naming the address (see [`crate::security::classify`]).
pub async fn dial(
    addr: &str,
    connect_timeout: Duration,
    tls: Option<&crate::security::ClusterTls>,
) -> std::result::Result<Channel, Status> {
    let mut ep = Endpoint::from_shared(url_of(addr, tls.is_some()))
        .map_err(|e| Status::invalid_argument(e.to_string()))?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(3));
    if let Some(tls) = tls {
        let bare = addr.split_once("://").map_or(addr, |(_, rest)| rest);
        tls.probe(bare.trim_end_matches('/'), connect_timeout)
            .await
            .map_err(|why| Status::unauthenticated(format!("TLS to {addr}: {why}")))?;
        ep = ep
            .tls_config(tls.client_config(connect_timeout))
            .map_err(|e| Status::invalid_argument(format!("TLS for {addr}: {e}")))?;
    }
    ep.connect()
        .await
        .map_err(|e| match crate::security::refusal(&e) {
            Some(why) => Status::unauthenticated(format!("TLS to {addr}: {why}")),
            None => Status::unavailable(format!("connect {addr}: {e}")),
        })
}

fn grpc(ch: Channel) -> PdGrpc<Channel> {
    PdGrpc::new(ch).max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE)
}

/// A status that means "ask another PD member".
fn is_leader_change(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled
    )
}

fn check_header(h: Option<&pdpb::ResponseHeader>) -> Result<()> {
    match h.and_then(|h| h.error.as_ref()) {
        Some(e) if e.r#type != pdpb::ErrorType::Ok as i32 => Err(PdError::Server {
            kind: e.r#type,
            message: e.message.clone(),
        }),
        _ => Ok(()),
    }
}

/// State shared by the client handles and the TSO task.
#[derive(Debug)]
struct Conn {
    cfg: PdConfig,
    cluster_id: u64,
    /// The current leader connection; `None` after a failure until rediscovered.
    leader: Mutex<Option<PdGrpc<Channel>>>,
    /// Client URLs of every member the last `GetMembers` listed: rediscovery asks them too,
    /// so the client follows the cluster when the configured members go down.
    members: Mutex<Vec<String>>,
}

impl Conn {
    fn header(&self) -> Option<pdpb::RequestHeader> {
        Some(pdpb::RequestHeader {
            cluster_id: self.cluster_id,
            ..Default::default()
        })
    }

    fn cached(&self) -> Option<PdGrpc<Channel>> {
        self.leader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set(&self, c: Option<PdGrpc<Channel>>) {
        *self.leader.lock().unwrap_or_else(|p| p.into_inner()) = c;
    }

    async fn client(&self) -> Result<PdGrpc<Channel>> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let known = self
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (cid, c, members) = discover(&self.cfg, &known).await?;
        if cid != self.cluster_id {
            return Err(PdError::ClusterIdMismatch {
                expected: self.cluster_id,
                got: cid,
            });
        }
        *self.members.lock().unwrap_or_else(|p| p.into_inner()) = members;
        self.set(Some(c.clone()));
        Ok(c)
    }

    /// Runs a unary call on the leader, rediscovering it on leader-change statuses.
    async fn call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: Fn(PdGrpc<Channel>) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, Status>>,
    {
        let mut last = String::new();
        for attempt in 0..self.cfg.max_attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(50 << attempt.min(5))).await;
            }
            let c = match self.client().await {
                Ok(c) => c,
                Err(PdError::Unavailable { last: l, .. }) => {
                    last = l;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let called = tokio::time::timeout(self.cfg.rpc_timeout, f(c))
                .await
                .map(|r| r.map_err(|s| crate::security::classify(s, "PD")));
            match called {
                Ok(Ok(r)) => return Ok(r.into_inner()),
                Ok(Err(s)) if crate::security::is_refusal(&s) => {
                    return Err(PdError::Refused(s.message().to_string()))
                }
                Ok(Err(s)) if s.code() == Code::FailedPrecondition => {
                    return Err(PdError::ClusterIdMismatch {
                        expected: self.cluster_id,
                        got: 0,
                    })
                }
                Ok(Err(s)) if is_leader_change(&s) => {
                    tracing::debug!(status = %s, "PD call failed, rediscovering leader");
                    last = s.to_string();
                    self.set(None);
                }
                Ok(Err(s)) => return Err(PdError::Rpc(s)),
                Err(_) => {
                    last = "PD call timed out".into();
                    self.set(None);
                }
            }
        }
        Err(PdError::Unavailable {
            addrs: self.cfg.addrs.clone(),
            last,
        })
    }
}

/// Finds the leader through any member, the configured ones first, then those `known` from an
/// earlier `GetMembers`: `(cluster id, leader client, every member's client URL)`.
async fn discover(cfg: &PdConfig, known: &[String]) -> Result<(u64, PdGrpc<Channel>, Vec<String>)> {
    let mut last = String::from("no PD address configured");
    let mut tried: Vec<String> = Vec::new();
    let tls = cfg.tls.as_ref();
    for addr in cfg.addrs.iter().chain(known) {
        let url = url_of(addr, tls.is_some());
        if tried.contains(&url) {
            continue;
        }
        tried.push(url);
        let ch = match dial(addr, cfg.connect_timeout, tls).await {
            Ok(ch) => ch,
            Err(s) if crate::security::is_refusal(&s) => {
                return Err(PdError::Refused(s.message().to_string()))
            }
            Err(s) => {
                tracing::debug!(pd = %addr, status = %s, "PD member unreachable");
                last = s.message().to_string();
                continue;
            }
        };
        let mut member = grpc(ch.clone());
        let members = match tokio::time::timeout(
            cfg.rpc_timeout,
            member.get_members(pdpb::GetMembersRequest::default()),
        )
        .await
        {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(s)) => {
                let s = crate::security::classify(s, addr);
                if crate::security::is_refusal(&s) {
                    return Err(PdError::Refused(s.message().to_string()));
                }
                last = s.to_string();
                continue;
            }
            Err(_) => {
                last = format!("GetMembers on {addr} timed out");
                continue;
            }
        };
        let cluster_id = members.header.as_ref().map_or(0, |h| h.cluster_id);
        if let Some(expected) = cfg.expected_cluster_id {
            if expected != cluster_id {
                return Err(PdError::ClusterIdMismatch {
                    expected,
                    got: cluster_id,
                });
            }
        }
        let all: Vec<String> = members
            .members
            .iter()
            .flat_map(|m| m.client_urls.iter().cloned())
            .collect();
        let urls = members.leader.map(|l| l.client_urls).unwrap_or_default();
        if urls.is_empty() {
            last = format!("PD at {addr} knows no leader");
            continue;
        }
        for url in &urls {
            if url_of(url, tls.is_some()) == url_of(addr, tls.is_some()) {
                return Ok((cluster_id, member, all));
            }
            match dial(url, cfg.connect_timeout, tls).await {
                Ok(ch) => return Ok((cluster_id, grpc(ch), all)),
                Err(s) if crate::security::is_refusal(&s) => {
                    return Err(PdError::Refused(s.message().to_string()))
                }
                Err(s) => last = s.message().to_string(),
            }
        }
    }
    Err(PdError::Unavailable {
        addrs: cfg.addrs.clone(),
        last,
    })
}

type TsoWaiter = oneshot::Sender<Result<Ts>>;

/// A PD client; clones share the leader connection and the TSO stream.
#[derive(Debug, Clone)]
pub struct PdClient {
    conn: Arc<Conn>,
    tso: mpsc::Sender<TsoWaiter>,
}

impl PdClient {
    /// Discovers the cluster and its leader; the TSO task stops with `cancel` or when the last
    /// handle is dropped.
    pub async fn connect(cfg: PdConfig, cancel: CancellationToken) -> Result<PdClient> {
        let (cluster_id, leader, members) = discover(&cfg, &[]).await?;
        tracing::info!(cluster_id, members = members.len(), "connected to PD");
        let conn = Arc::new(Conn {
            cfg,
            cluster_id,
            leader: Mutex::new(Some(leader)),
            members: Mutex::new(members),
        });
        let (tx, rx) = mpsc::channel(TSO_MAX_BATCH);
        tokio::spawn(run_tso(conn.clone(), rx, cancel));
        Ok(PdClient { conn, tso: tx })
    }

    /// The PD cluster id (also what TiKV checks in `cdcpb.Header`).
    pub fn cluster_id(&self) -> u64 {
        self.conn.cluster_id
    }

    /// PD's statistics of the regions overlapping the raw key range `[start, end)`, from the
    /// first member whose HTTP API answers (every member serves it): the configured addresses,
    /// then the members PD listed.
    pub async fn region_stats(&self, start: &[u8], end: &[u8]) -> Result<pd_http::RangeStats> {
        let path = pd_http::stats_region_path(start, end);
        let tls = self.conn.cfg.tls.as_ref();
        let members = self
            .conn
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut tried: Vec<String> = Vec::new();
        let mut last = String::from("no PD address configured");
        for addr in self.conn.cfg.addrs.iter().chain(&members) {
            let url = url_of(addr, tls.is_some());
            if tried.contains(&url) {
                continue;
            }
            tried.push(url);
            match pd_http::get(addr, &path, tls, self.conn.cfg.rpc_timeout).await {
                Ok(body) => return pd_http::parse_stats(&body).map_err(PdError::Api),
                Err(e) => last = e,
            }
        }
        Err(PdError::Unavailable {
            addrs: self.conn.cfg.addrs.clone(),
            last,
        })
    }

    /// The TLS this client speaks, which TiKV connections use too.
    pub fn tls(&self) -> Option<&crate::security::ClusterTls> {
        self.conn.cfg.tls.as_ref()
    }

    /// One timestamp from the TSO, strictly above every one this client handed out before.
    pub async fn tso(&self) -> Result<Ts> {
        let (tx, rx) = oneshot::channel();
        self.tso.send(tx).await.map_err(|_| PdError::Closed)?;
        rx.await.map_err(|_| PdError::Closed)?
    }

    /// The region holding the encoded key, or `None` if PD knows none.
    pub async fn get_region(&self, key: &[u8]) -> Result<Option<RegionInfo>> {
        self.region_call(key, false).await
    }

    /// The region before the one holding encoded `key` (`GetPrevRegion`): where a reverse
    /// scan continues when `key` is a region's start.
    pub async fn get_prev_region(&self, key: &[u8]) -> Result<Option<RegionInfo>> {
        self.region_call(key, true).await
    }

    /// `GetRegion`, or `GetPrevRegion` when `prev`.
    async fn region_call(&self, key: &[u8], prev: bool) -> Result<Option<RegionInfo>> {
        let header = self.conn.header();
        let r = self
            .conn
            .call(|mut c| {
                let req = pdpb::GetRegionRequest {
                    header: header.clone(),
                    region_key: key.to_vec(),
                    need_buckets: false,
                };
                async move {
                    if prev {
                        c.get_prev_region(req).await
                    } else {
                        c.get_region(req).await
                    }
                }
            })
            .await?;
        check_header(r.header.as_ref())?;
        Ok(r.region.map(|reg| RegionInfo::from_pd(reg, r.leader)))
    }

    /// Up to `limit` regions overlapping `span` (encoded), in key order (one `ScanRegions`).
    pub async fn scan_regions(&self, span: &Span, limit: i32) -> Result<Vec<RegionInfo>> {
        let header = self.conn.header();
        let r = self
            .conn
            .call(|mut c| {
                let req = pdpb::ScanRegionsRequest {
                    header: header.clone(),
                    start_key: span.start.clone(),
                    end_key: span.end.clone(),
                    limit,
                };
                async move { c.scan_regions(req).await }
            })
            .await?;
        check_header(r.header.as_ref())?;
        let regions = if !r.regions.is_empty() {
            r.regions
                .into_iter()
                .filter_map(|x| x.region.map(|reg| RegionInfo::from_pd(reg, x.leader)))
                .collect()
        } else {
            // Old PD: parallel arrays.
            let mut leaders = r.leaders.into_iter();
            r.region_metas
                .into_iter()
                .map(|reg| RegionInfo::from_pd(reg, leaders.next()))
                .collect()
        };
        Ok(regions)
    }

    /// Every region overlapping `span`, paging through `ScanRegions`. The result may have holes
    /// while PD learns of a split; callers check with [`super::span::first_gap`].
    pub async fn regions_in(&self, span: &Span) -> Result<Vec<RegionInfo>> {
        let mut out: Vec<RegionInfo> = Vec::new();
        let mut at = span.clone();
        loop {
            let page = self.scan_regions(&at, SCAN_REGIONS_PAGE).await?;
            let full = page.len() >= SCAN_REGIONS_PAGE as usize;
            let Some(last_end) = page.last().map(|r| r.span.end.clone()) else {
                return Ok(out);
            };
            out.extend(page);
            if !full
                || last_end.is_empty()
                || (!span.end.is_empty() && last_end >= span.end)
                || last_end <= at.start
            {
                return Ok(out);
            }
            at.start = last_end;
        }
    }

    /// A store's address.
    pub async fn get_store(&self, store_id: u64) -> Result<StoreInfo> {
        let header = self.conn.header();
        let r = self
            .conn
            .call(|mut c| {
                let req = pdpb::GetStoreRequest {
                    header: header.clone(),
                    store_id,
                };
                async move { c.get_store(req).await }
            })
            .await?;
        check_header(r.header.as_ref())?;
        let s = r.store.ok_or(PdError::Malformed("store"))?;
        let is_tiflash = s
            .labels
            .iter()
            .any(|l| l.key == "engine" && l.value == "tiflash");
        Ok(StoreInfo {
            id: s.id,
            address: s.address,
            is_tiflash,
        })
    }

    /// The cluster's GC safe point: versions below it may be gone.
    pub async fn get_gc_safe_point(&self) -> Result<Ts> {
        let header = self.conn.header();
        let r = self
            .conn
            .call(|mut c| {
                let req = pdpb::GetGcSafePointRequest {
                    header: header.clone(),
                };
                async move { c.get_gc_safe_point(req).await }
            })
            .await?;
        check_header(r.header.as_ref())?;
        Ok(Ts(r.safe_point))
    }

    /// Sets (`ttl_secs > 0`) or removes (`ttl_secs <= 0`) a service safe point; returns the
    /// minimum service safe point afterwards. PD ≤ 8.5 refuses (silently) a value below the
    /// current minimum: then the returned minimum is above `safe_point`.
    pub async fn update_service_gc_safe_point(
        &self,
        service_id: &str,
        ttl_secs: i64,
        safe_point: Ts,
    ) -> Result<Ts> {
        let header = self.conn.header();
        let r = self
            .conn
            .call(|mut c| {
                let req = pdpb::UpdateServiceGcSafePointRequest {
                    header: header.clone(),
                    service_id: service_id.as_bytes().to_vec(),
                    ttl: ttl_secs,
                    safe_point: safe_point.0,
                };
                async move { c.update_service_gc_safe_point(req).await }
            })
            .await?;
        check_header(r.header.as_ref())?;
        Ok(Ts(r.min_safe_point))
    }
}

/// The timestamps of a batch answered with `(physical, logical)` = its last one.
pub fn tso_batch(physical: i64, logical: i64, count: u32) -> Result<Vec<Ts>> {
    let first = logical - i64::from(count) + 1;
    if physical < 0 || first < 0 || count == 0 {
        return Err(PdError::Malformed("timestamp"));
    }
    Ok((0..u64::from(count))
        .map(|i| Ts::compose(physical as u64, first as u64 + i))
        .collect())
}

type TsoStream = (mpsc::Sender<pdpb::TsoRequest>, Streaming<pdpb::TsoResponse>);

async fn open_tso(conn: &Conn) -> Result<TsoStream> {
    let mut c = conn.client().await?;
    let (tx, rx) = mpsc::channel(4);
    let stream = c
        .tso(ReceiverStream::new(rx))
        .await
        .map_err(|s| {
            conn.set(None);
            PdError::Rpc(s)
        })?
        .into_inner();
    Ok((tx, stream))
}

async fn fetch_tso(conn: &Conn, stream: &mut Option<TsoStream>, count: u32) -> Result<Vec<Ts>> {
    let mut last = PdError::Closed;
    for _ in 0..conn.cfg.max_attempts.max(1) {
        if stream.is_none() {
            match open_tso(conn).await {
                Ok(s) => *stream = Some(s),
                Err(e) if e.is_retryable() => {
                    last = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        let Some((tx, rx)) = stream.as_mut() else {
            continue;
        };
        let req = pdpb::TsoRequest {
            header: conn.header(),
            count,
            dc_location: String::new(),
        };
        let got = async {
            tx.send(req).await.map_err(|_| PdError::Closed)?;
            match rx.message().await {
                Ok(Some(r)) => Ok(r),
                Ok(None) => Err(PdError::Closed),
                Err(s) => Err(PdError::Rpc(s)),
            }
        };
        match tokio::time::timeout(conn.cfg.rpc_timeout, got).await {
            Ok(Ok(r)) => {
                check_header(r.header.as_ref())?;
                let t = r.timestamp.ok_or(PdError::Malformed("timestamp"))?;
                if r.count != count {
                    return Err(PdError::Malformed("count"));
                }
                return tso_batch(t.physical, t.logical, count);
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = PdError::Closed,
        }
        tracing::debug!(error = %last, "TSO stream failed, reconnecting");
        *stream = None;
        conn.set(None);
    }
    Err(last)
}

async fn run_tso(conn: Arc<Conn>, mut rx: mpsc::Receiver<TsoWaiter>, cancel: CancellationToken) {
    let mut stream: Option<TsoStream> = None;
    let mut last = Ts::ZERO;
    let mut batch: Vec<TsoWaiter> = Vec::new();
    loop {
        let first = tokio::select! {
            _ = cancel.cancelled() => return,
            w = rx.recv() => match w { Some(w) => w, None => return },
        };
        batch.push(first);
        while batch.len() < TSO_MAX_BATCH {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let count = batch.len() as u32;
        let r = tokio::select! {
            _ = cancel.cancelled() => return,
            r = fetch_tso(&conn, &mut stream, count) => r,
        };
        match r {
            Ok(tss) => {
                for (w, ts) in batch.drain(..).zip(tss) {
                    if ts <= last {
                        let _ = w.send(Err(PdError::TsoRegression {
                            prev: last,
                            next: ts,
                        }));
                        continue;
                    }
                    last = ts;
                    let _ = w.send(Ok(ts));
                }
            }
            Err(e) => {
                for w in batch.drain(..) {
                    let _ = w.send(Err(e.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tso_batch_counts_back_from_the_last() {
        let v = tso_batch(1000, 10, 3).expect("batch");
        assert_eq!(
            v,
            vec![
                Ts::compose(1000, 8),
                Ts::compose(1000, 9),
                Ts::compose(1000, 10)
            ]
        );
        assert!(tso_batch(1000, 1, 3).is_err(), "logical would go negative");
        assert!(tso_batch(1000, 1, 0).is_err());
    }

    #[test]
    fn statuses_and_errors_are_classified() {
        assert!(is_leader_change(&Status::unavailable("not leader")));
        assert!(!is_leader_change(&Status::failed_precondition("mismatch")));
        assert!(!PdError::ClusterIdMismatch {
            expected: 1,
            got: 2
        }
        .is_retryable());
        assert!(PdError::Unavailable {
            addrs: vec![],
            last: String::new()
        }
        .is_retryable());
        assert!(!PdError::TsoRegression {
            prev: Ts(2),
            next: Ts(1)
        }
        .is_retryable());
        assert_eq!(url_of("127.0.0.1:1", false), "http://127.0.0.1:1");
        assert_eq!(url_of("http://h:2", false), "http://h:2");
        assert_eq!(url_of("127.0.0.1:1", true), "https://127.0.0.1:1");
        assert_eq!(url_of("http://h:2", true), "https://h:2");
    }
}

//! The owner election on etcd, its lease and the fence (see [`super`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, LeaderKey, PutOptions, ResignOptions,
    Txn, TxnOp,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Default TTL of an owner's lease: how long a group can be without a writer after the owner
/// dies without resigning.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);
/// Share of the TTL not counted on, for the rate difference of this host's and etcd's clocks.
const DRIFT_ALLOWANCE: u32 = 20; // 1/20 = 5 %
/// Timeout of a single etcd request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before a broken keep-alive or observe stream is opened again.
const RETRY: Duration = Duration::from_millis(200);

/// Where the group meets and who this member is.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// etcd client URLs (`http://host:2379`; a bare `host:port` gets `http://`).
    pub endpoints: Vec<String>,
    /// Key prefix of the group, e.g. `/tibinlog/<server_uuid>` (no trailing `/`).
    pub prefix: String,
    pub member: MemberInfo,
    /// TTL of the lease an owner holds.
    pub lease_ttl: Duration,
}

/// A member as the others see it: the election value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberInfo {
    pub instance_id: String,
    /// Its MySQL protocol address, where standbys follow the owner's binlog.
    pub mysql: String,
}

/// Why the election could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    #[error("etcd ({what}): {source}")]
    Etcd {
        what: &'static str,
        #[source]
        source: etcd_client::Error,
    },
    #[error("etcd ({what}): no answer in {timeout:?}")]
    Timeout {
        what: &'static str,
        timeout: Duration,
    },
    /// The lease expired (or was lost) before the campaign was won.
    #[error("the lease was lost before the campaign was won")]
    LeaseLost,
    #[error("the election was stopped")]
    Stopped,
    #[error("owner record at {key}: {reason}")]
    BadRecord { key: String, reason: String },
}

type Result<T> = std::result::Result<T, ElectionError>;

async fn call<T>(
    what: &'static str,
    f: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
) -> Result<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(r) => r.map_err(|source| ElectionError::Etcd { what, source }),
        Err(_) => Err(ElectionError::Timeout {
            what,
            timeout: REQUEST_TIMEOUT,
        }),
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    #[error("the owner's lease is past its deadline (no keep-alive answered in time)")]
    Expired,
    #[error("ownership was lost (lease gone, owner key deleted or taken)")]
    Lost,
}

/// Whether the owner may still write; shared by the writer and the keep-alive task.
#[derive(Debug)]
pub struct Fence {
    base: Instant,
    /// Microseconds after `base` until which the lease is known to be alive at etcd.
    valid_until_us: AtomicU64,
    lost: AtomicBool,
    lost_tx: watch::Sender<bool>,
}

impl Fence {
    fn new() -> Fence {
        Fence {
            base: Instant::now(),
            valid_until_us: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            lost_tx: watch::channel(false).0,
        }
    }

    /// `Ok` while the lease is provably alive: call it before every write that makes bytes
    /// visible. A passed deadline loses the fence for good.
    pub fn check(&self) -> std::result::Result<(), Fenced> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(Fenced::Lost);
        }
        if self.now_us() >= self.valid_until_us.load(Ordering::SeqCst) {
            self.lose();
            return Err(Fenced::Expired);
        }
        Ok(())
    }

    /// True once the fence is lost (by [`Self::check`], the keep-alive task or a failed
    /// conditional write).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Waits until the fence is lost: a lost lease, a deleted owner key, or the deadline passed
    /// without a keep-alive answer extending it.
    pub async fn lost(&self) {
        let mut rx = self.lost_tx.subscribe();
        loop {
            if self.is_lost() {
                return;
            }
            let until = self.valid_until_us.load(Ordering::SeqCst);
            let at = self.base + Duration::from_micros(until);
            tokio::select! {
                _ = rx.changed() => {}
                () = tokio::time::sleep_until(at.into()) => {
                    if self.check().is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// The instant from which writes are refused: the end of the lease as last extended (the
    /// fence may be lost earlier, never later).
    pub fn valid_until(&self) -> Instant {
        self.base + Duration::from_micros(self.valid_until_us.load(Ordering::SeqCst))
    }

    /// How long the lease is still counted on (zero when lost).
    pub fn remaining(&self) -> Duration {
        if self.is_lost() {
            return Duration::ZERO;
        }
        let until = self.valid_until_us.load(Ordering::SeqCst);
        Duration::from_micros(until.saturating_sub(self.now_us()))
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The lease answered a keep-alive (or grant) sent at `sent` with `ttl`.
    fn extend(&self, sent: Instant, ttl: Duration) {
        if self.is_lost() {
            return;
        }
        let counted = ttl - ttl / DRIFT_ALLOWANCE;
        let until = sent.saturating_duration_since(self.base) + counted;
        let until = u64::try_from(until.as_micros()).unwrap_or(u64::MAX);
        self.valid_until_us.fetch_max(until, Ordering::SeqCst);
    }

    fn lose(&self) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            self.lost_tx.send_replace(true);
        }
    }
}

/// A member of the group: campaigns, and observes who owns.
#[derive(Clone)]
pub struct Candidate {
    client: Client,
    cfg: ElectionConfig,
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate").field("cfg", &self.cfg).finish()
    }
}

impl Candidate {
    /// Connects to etcd (lazily: an unreachable etcd shows in the first request).
    pub async fn connect(cfg: ElectionConfig) -> Result<Candidate> {
        let endpoints: Vec<String> = cfg
            .endpoints
            .iter()
            .map(|e| {
                if e.contains("://") {
                    e.clone()
                } else {
                    format!("http://{e}")
                }
            })
            .collect();
        let opts = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        let client = call("connect", Client::connect(endpoints, Some(opts))).await?;
        Ok(Candidate { client, cfg })
    }

    fn election(&self) -> String {
        format!("{}/owner", self.cfg.prefix)
    }

    fn end_key(&self) -> String {
        format!("{}/end", self.cfg.prefix)
    }

    /// This member.
    pub fn member(&self) -> &MemberInfo {
        &self.cfg.member
    }

    /// Campaigns until this member owns the group (etcd's election: the oldest key wins), or
    /// until `cancel`. The returned ownership keeps its lease alive until it is dropped,
    /// resigned, or lost.
    pub async fn campaign(&self, cancel: &CancellationToken) -> Result<Ownership> {
        let mut client = self.client.clone();
        let ttl = i64::try_from(self.cfg.lease_ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        let sent = Instant::now();
        let grant = call("grant a lease", client.lease_grant(ttl, None)).await?;
        let lease = grant.id();
        let fence = Arc::new(Fence::new());
        fence.extend(sent, secs(grant.ttl()));
        let stop = CancellationToken::new();
        tokio::spawn(keep_alive(
            client.clone(),
            lease,
            secs(grant.ttl()),
            fence.clone(),
            stop.clone(),
        ));
        let value = serde_json::to_vec(&self.cfg.member).unwrap_or_default();
        debug!(lease = format!("{lease:x}"), "campaigning");
        let won = tokio::select! {
            r = client.campaign(self.election(), value, lease) => r,
            () = cancel.cancelled() => {
                stop.cancel();
                let _ = call("revoke the lease", client.lease_revoke(lease)).await;
                return Err(ElectionError::Stopped);
            }
            () = fence.lost() => {
                stop.cancel();
                return Err(ElectionError::LeaseLost);
            }
        };
        let mut won = match won {
            Ok(w) => w,
            Err(source) => {
                stop.cancel();
                let _ = call("revoke the lease", client.lease_revoke(lease)).await;
                return Err(ElectionError::Etcd {
                    what: "campaign",
                    source,
                });
            }
        };
        let Some(leader) = won.take_leader() else {
            stop.cancel();
            return Err(ElectionError::BadRecord {
                key: self.election(),
                reason: "campaign answered without a leader key".into(),
            });
        };
        if fence.check().is_err() {
            stop.cancel();
            return Err(ElectionError::LeaseLost);
        }
        tokio::spawn(watch_owner_key(
            client.clone(),
            leader.key().to_vec(),
            fence.clone(),
            stop.clone(),
        ));
        info!(
            instance = %self.cfg.member.instance_id,
            revision = leader.rev(),
            lease = format!("{lease:x}"),
            "won the ownership"
        );
        Ok(Ownership {
            client,
            leader,
            lease,
            fence,
            stop,
            end_key: self.end_key(),
        })
    }

    /// The current owner, if any.
    pub async fn owner(&self) -> Result<Option<MemberInfo>> {
        let mut client = self.client.clone();
        match call("leader", client.leader(self.election())).await {
            Ok(r) => r
                .kv()
                .map(|kv| parse_member(kv.key(), kv.value()))
                .transpose(),
            // etcd answers "election: no leader" as an error.
            Err(ElectionError::Etcd {
                source: etcd_client::Error::GRpcStatus(s),
                ..
            }) if s.message().contains("no leader") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The owner's published binlog end, if any.
    pub async fn published_end(&self) -> Result<Option<String>> {
        let mut client = self.client.clone();
        let r = call("get the end", client.get(self.end_key(), None)).await?;
        Ok(r.kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
    }

    /// A watch of the owner: each new owner as etcd's election reports it, until `cancel`.
    /// Broken streams are opened again.
    pub fn observe(&self, cancel: CancellationToken) -> watch::Receiver<Option<MemberInfo>> {
        let (tx, rx) = watch::channel(None);
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let mut client = this.client.clone();
                let stream = tokio::select! {
                    r = client.observe(this.election()) => r,
                    () = cancel.cancelled() => return,
                };
                match stream {
                    Ok(mut s) => loop {
                        let m = tokio::select! {
                            m = s.message() => m,
                            () = cancel.cancelled() => return,
                        };
                        match m {
                            Ok(Some(r)) => {
                                if let Some(kv) = r.kv() {
                                    match parse_member(kv.key(), kv.value()) {
                                        Ok(m) => {
                                            tx.send_if_modified(|cur| {
                                                let changed = cur.as_ref() != Some(&m);
                                                *cur = Some(m);
                                                changed
                                            });
                                        }
                                        Err(e) => warn!("{e}"),
                                    }
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                debug!("observing the owner: {e}");
                                break;
                            }
                        }
                    },
                    Err(e) => debug!("observing the owner: {e}"),
                }
                tokio::select! {
                    () = tokio::time::sleep(RETRY) => {}
                    () = cancel.cancelled() => return,
                }
            }
        });
        rx
    }
}

fn secs(ttl: i64) -> Duration {
    Duration::from_secs(u64::try_from(ttl).unwrap_or(0))
}

fn parse_member(key: &[u8], value: &[u8]) -> Result<MemberInfo> {
    serde_json::from_slice(value).map_err(|e| ElectionError::BadRecord {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: e.to_string(),
    })
}

/// Keeps the lease alive every third of its TTL, extending the fence with each answer; a
/// TTL-0 answer (the lease is gone) loses it. Broken streams are opened again while the fence
/// holds; past the deadline there is nothing left to keep.
async fn keep_alive(
    mut client: Client,
    lease: i64,
    ttl: Duration,
    fence: Arc<Fence>,
    stop: CancellationToken,
) {
    let every = (ttl / 3).max(Duration::from_millis(100));
    while !fence.is_lost() && !stop.is_cancelled() {
        let opened = tokio::select! {
            r = call("keep-alive", client.lease_keep_alive(lease)) => r,
            () = stop.cancelled() => return,
            () = fence.lost() => return,
        };
        let (mut keeper, mut stream) = match opened {
            Ok(s) => s,
            Err(e) => {
                debug!("lease keep-alive: {e}");
                tokio::select! {
                    () = tokio::time::sleep(RETRY) => continue,
                    () = stop.cancelled() => return,
                    () = fence.lost() => return,
                }
            }
        };
        loop {
            let sent = Instant::now();
            if keeper.keep_alive().await.is_err() {
                break;
            }
            let answer = tokio::select! {
                a = tokio::time::timeout(every, stream.message()) => a,
                () = stop.cancelled() => return,
                () = fence.lost() => return,
            };
            match answer {
                Ok(Ok(Some(r))) if r.ttl() > 0 => fence.extend(sent, secs(r.ttl())),
                Ok(Ok(Some(_))) => {
                    warn!(lease = format!("{lease:x}"), "the lease expired at etcd");
                    fence.lose();
                    return;
                }
                Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
            }
            let wait = every.saturating_sub(sent.elapsed());
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stop.cancelled() => return,
                () = fence.lost() => return,
            }
        }
    }
}

/// Loses the fence when the owner key is deleted (resigned, expired, removed by hand).
async fn watch_owner_key(
    mut client: Client,
    key: Vec<u8>,
    fence: Arc<Fence>,
    stop: CancellationToken,
) {
    while !fence.is_lost() && !stop.is_cancelled() {
        let opened = tokio::select! {
            r = call("watch the owner key", client.watch(key.clone(), None)) => r,
            () = stop.cancelled() => return,
            () = fence.lost() => return,
        };
        if let Ok(mut stream) = opened {
            // The key may have gone before the watch started.
            if let Ok(r) = call("get the owner key", client.get(key.clone(), None)).await {
                if r.kvs().is_empty() {
                    fence.lose();
                    return;
                }
            }
            loop {
                let m = tokio::select! {
                    m = stream.message() => m,
                    () = stop.cancelled() => return,
                    () = fence.lost() => return,
                };
                match m {
                    Ok(Some(r)) => {
                        if r.events()
                            .iter()
                            .any(|e| e.event_type() == EventType::Delete)
                        {
                            warn!("the owner key was deleted");
                            fence.lose();
                            return;
                        }
                    }
                    Ok(None) | Err(_) => break,
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            () = stop.cancelled() => return,
            () = fence.lost() => return,
        }
    }
}

/// This member owns the group while [`Self::fence`] holds.
pub struct Ownership {
    client: Client,
    leader: LeaderKey,
    lease: i64,
    fence: Arc<Fence>,
    stop: CancellationToken,
    end_key: String,
}

impl std::fmt::Debug for Ownership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ownership")
            .field("key", &String::from_utf8_lossy(self.leader.key()))
            .field("revision", &self.leader.rev())
            .field("lease", &self.lease)
            .finish()
    }
}

impl Ownership {
    /// The fence writers check.
    pub fn fence(&self) -> Arc<Fence> {
        self.fence.clone()
    }

    /// The create revision of the owner key: the ownership's identity.
    pub fn revision(&self) -> i64 {
        self.leader.rev()
    }

    /// Writes `end` (the durable binlog end) under `<prefix>/end` only if the owner key still
    /// has the revision this member won with; `Ok(false)` (and the fence lost) when it has not.
    pub async fn publish_end(&self, end: &str) -> Result<bool> {
        self.fence.check().map_err(|_| ElectionError::LeaseLost)?;
        let mut client = self.client.clone();
        let txn = Txn::new()
            .when([Compare::create_revision(
                self.leader.key().to_vec(),
                CompareOp::Equal,
                self.leader.rev(),
            )])
            .and_then([TxnOp::put(
                self.end_key.clone(),
                end,
                Some(PutOptions::new().with_lease(self.lease)),
            )]);
        let r = call("publish the end", client.txn(txn)).await?;
        if !r.succeeded() {
            warn!("the owner key changed: ownership lost");
            self.fence.lose();
        }
        Ok(r.succeeded())
    }

    /// Gives the ownership up at once (a clean stop): resigns and revokes the lease, so a
    /// standby's campaign wins without waiting for the TTL.
    pub async fn resign(self) -> Result<()> {
        self.fence.lose();
        self.stop.cancel();
        let mut client = self.client.clone();
        let resigned = call(
            "resign",
            client.resign(Some(ResignOptions::new().with_leader(self.leader.clone()))),
        )
        .await;
        let revoked = call("revoke the lease", client.lease_revoke(self.lease)).await;
        resigned?;
        revoked?;
        Ok(())
    }
}

impl Drop for Ownership {
    fn drop(&mut self) {
        self.fence.lose();
        self.stop.cancel();
    }
}

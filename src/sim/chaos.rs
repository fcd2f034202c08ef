//! Seeded fault injection for a running [`SimCluster`]: every interval one fault, chosen by a
//! [`SimRng`], from the repertoire a TiCDC-like client must survive.
//!
//! | fault              | what happens                                                       |
//! |--------------------|--------------------------------------------------------------------|
//! | `split`            | a random region splits at a random existing key inside it          |
//! | `merge`            | a random region merges into its right (or left) neighbour          |
//! | `transfer_leader`  | a random region's leader moves to another live store               |
//! | `restart_store`    | a random live store stops, and restarts after a short pause        |
//! | `hold_lock`        | a lock sits in a workload table's key span, then rolls back        |
//! | `delay_resolved_ts`| a random region's resolved ts lags the TSO for a while             |
//! | `stall_scan`       | a random region's incremental scan mostly stalls for a while       |
//!
//! Replay: the *choices* (which fault, which index into the candidate list) come from the seed
//! only; the candidate lists (regions, stores, keys) are the cluster's state at that moment, so a
//! replay repeats the same choices on whatever state the run reached.
//!
//! The held lock is written at `t{table}_r` + eight `0xFF` + a sequence number: past every
//! handle the workload can write (an int handle encodes to at most eight `0xFF`, common handles
//! start with a datum flag below `0xFF`), so no workload transaction ever meets it; and it is
//! rolled back, never committed, so no client ever has to decode it as a row.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::sim::core::SimCore;
use crate::sim::mvcc::{Mutation, PrewriteRequest};
use crate::sim::region::{encode_key, raw_lower_bound, RegionInfo};
use crate::sim::server::SimCluster;
use crate::sim::ts::SimRng;
use crate::sim::{SimError, Ts};

/// How long a timed fault (held lock, resolved-ts delay, scan stall) lasts.
pub const DEFAULT_FAULT_HOLD: Duration = Duration::from_secs(3);
/// How long a stopped store stays down.
pub const DEFAULT_STORE_PAUSE: Duration = Duration::from_secs(1);
/// Probability that a scan step of a stalled region makes no progress.
const STALL_SCAN_PROBABILITY: f64 = 0.9;
/// Keys sampled (reservoir) when looking for a split key; bounds the time under the core lock.
const SPLIT_KEY_SCAN_LIMIT: usize = 100_000;
/// Mixed into the seed so chaos choices do not replay the workload's.
const CHAOS_SEED_SALT: u64 = 0xC4A0_5EED;

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Split,
    Merge,
    TransferLeader,
    RestartStore,
    HoldLock,
    DelayResolvedTs,
    StallScan,
}

impl FaultKind {
    /// Every fault, in the order the RNG indexes them.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Split,
        FaultKind::Merge,
        FaultKind::TransferLeader,
        FaultKind::RestartStore,
        FaultKind::HoldLock,
        FaultKind::DelayResolvedTs,
        FaultKind::StallScan,
    ];

    /// Name used in logs.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Split => "split",
            FaultKind::Merge => "merge",
            FaultKind::TransferLeader => "transfer_leader",
            FaultKind::RestartStore => "restart_store",
            FaultKind::HoldLock => "hold_lock",
            FaultKind::DelayResolvedTs => "delay_resolved_ts",
            FaultKind::StallScan => "stall_scan",
        }
    }
}

/// Chaos parameters.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Time between faults.
    pub interval: Duration,
    /// Seed of the choices (salted internally).
    pub seed: u64,
    /// Duration of timed faults.
    pub hold: Duration,
    /// Down time of a restarted store.
    pub store_pause: Duration,
    /// Raw record prefixes (`t{id}_r`) of the workload's physical tables: where locks go.
    pub lock_prefixes: Vec<Vec<u8>>,
}

/// What [`Chaos::inject`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The fault was injected.
    Injected,
    /// The cluster offered no candidate (one region, one live store…).
    Skipped(&'static str),
}

/// The fault injector.
#[derive(Debug)]
pub struct Chaos {
    cluster: SimCluster,
    cfg: ChaosConfig,
    rng: SimRng,
    lock_seq: u64,
    injected: Arc<AtomicU64>,
}

impl Chaos {
    /// An injector; `injected` counts the faults injected.
    pub fn new(cluster: SimCluster, cfg: ChaosConfig, injected: Arc<AtomicU64>) -> Self {
        Chaos {
            rng: SimRng::new(cfg.seed ^ CHAOS_SEED_SALT),
            cluster,
            cfg,
            lock_seq: 0,
            injected,
        }
    }

    /// Injects one fault every interval until `cancel` fires. Timed faults revert on tasks of
    /// `tracker` (which also stop on `cancel`).
    pub async fn run(mut self, cancel: CancellationToken, tracker: TaskTracker) {
        let start = tokio::time::Instant::now() + self.cfg.interval;
        let mut tick = tokio::time::interval_at(start, self.cfg.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!(interval = ?self.cfg.interval, seed = self.cfg.seed, "chaos starts");
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            let kind = FaultKind::ALL[self.rng.below(FaultKind::ALL.len() as u64) as usize];
            match self.inject(kind, &cancel, &tracker).await {
                Ok(Outcome::Injected) => {
                    self.injected.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Outcome::Skipped(reason)) => {
                    tracing::info!(fault = kind.name(), reason, "chaos fault skipped");
                }
                Err(e) => {
                    tracing::warn!(fault = kind.name(), error = %e, "chaos fault failed");
                }
            }
        }
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            return None;
        }
        Some(items[self.rng.below(items.len() as u64) as usize].clone())
    }

    fn live_stores(&self) -> Vec<u64> {
        self.cluster
            .with_core(|c| c.cluster.stores().filter(|s| s.up).map(|s| s.id).collect())
    }

    /// Injects one fault of `kind`.
    pub async fn inject(
        &mut self,
        kind: FaultKind,
        cancel: &CancellationToken,
        tracker: &TaskTracker,
    ) -> crate::sim::server::Result<Outcome> {
        let regions = self.cluster.regions();
        match kind {
            FaultKind::Split => self.split(&regions).await,
            FaultKind::Merge => self.merge(&regions).await,
            FaultKind::TransferLeader => self.transfer_leader(&regions).await,
            FaultKind::RestartStore => self.restart_store(cancel, tracker).await,
            FaultKind::HoldLock => self.hold_lock(cancel, tracker),
            FaultKind::DelayResolvedTs | FaultKind::StallScan => {
                self.slow_region(kind, &regions, cancel, tracker).await
            }
        }
    }

    /// `split`: a random region splits at a random existing key inside it.
    async fn split(&mut self, regions: &[RegionInfo]) -> crate::sim::server::Result<Outcome> {
        let fault = FaultKind::Split.name();
        let Some(r) = self.pick(regions) else {
            return Ok(Outcome::Skipped("no region"));
        };
        let draw = self.rng.next_u64();
        let key = self.cluster.with_core(|c| split_key_in(c, &r, draw));
        let Some(key) = key else {
            return Ok(Outcome::Skipped("region holds no key to split at"));
        };
        self.cluster.split_region(r.id(), &key).await?;
        tracing::info!(
            fault,
            region_id = r.id(),
            split_key = %hex::encode(&key),
            "chaos fault injected"
        );
        Ok(Outcome::Injected)
    }

    /// `merge`: a random region merges into its right (or left) neighbour.
    async fn merge(&mut self, regions: &[RegionInfo]) -> crate::sim::server::Result<Outcome> {
        let fault = FaultKind::Merge.name();
        if regions.len() < 2 {
            return Ok(Outcome::Skipped("one region"));
        }
        let i = self.rng.below(regions.len() as u64) as usize;
        let source = &regions[i];
        // Prefer the right neighbour; the last region merges into its left one.
        let target = regions
            .get(i + 1)
            .or_else(|| regions.get(i.wrapping_sub(1)));
        let Some(target) = target else {
            return Ok(Outcome::Skipped("no neighbour"));
        };
        self.cluster.merge_regions(source.id(), target.id()).await?;
        tracing::info!(
            fault,
            region_id = source.id(),
            target_region_id = target.id(),
            "chaos fault injected"
        );
        Ok(Outcome::Injected)
    }

    /// `transfer_leader`: a random region's leader moves to another live store.
    async fn transfer_leader(
        &mut self,
        regions: &[RegionInfo],
    ) -> crate::sim::server::Result<Outcome> {
        let fault = FaultKind::TransferLeader.name();
        let Some(r) = self.pick(regions) else {
            return Ok(Outcome::Skipped("no region"));
        };
        let candidates: Vec<u64> = self
            .live_stores()
            .into_iter()
            .filter(|&s| r.has_peer_on(s) && Some(s) != r.leader_store())
            .collect();
        let Some(store_id) = self.pick(&candidates) else {
            return Ok(Outcome::Skipped("no other live store"));
        };
        self.cluster.transfer_leader(r.id(), store_id).await?;
        tracing::info!(
            fault,
            region_id = r.id(),
            from_store_id = r.leader_store().unwrap_or(0),
            store_id,
            "chaos fault injected"
        );
        Ok(Outcome::Injected)
    }

    /// `restart_store`: a random live store stops, and restarts after a short pause.
    async fn restart_store(
        &mut self,
        cancel: &CancellationToken,
        tracker: &TaskTracker,
    ) -> crate::sim::server::Result<Outcome> {
        let fault = FaultKind::RestartStore.name();
        let live = self.live_stores();
        if live.len() < 2 {
            return Ok(Outcome::Skipped("fewer than two live stores"));
        }
        let Some(store_id) = self.pick(&live) else {
            return Ok(Outcome::Skipped("no live store"));
        };
        self.cluster.stop_store(store_id).await?;
        let pause = self.cfg.store_pause;
        tracing::info!(fault, store_id, ?pause, "chaos fault injected");
        let cluster = self.cluster.clone();
        let cancel = cancel.clone();
        tracker.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            match cluster.restart_store(store_id).await {
                Ok(()) => tracing::info!(fault, store_id, "chaos fault reverted"),
                Err(e) => {
                    tracing::warn!(fault, store_id, error = %e, "store restart failed")
                }
            }
        });
        Ok(Outcome::Injected)
    }

    /// `hold_lock`: a lock sits in a workload table's key span, then rolls back.
    fn hold_lock(
        &mut self,
        cancel: &CancellationToken,
        tracker: &TaskTracker,
    ) -> crate::sim::server::Result<Outcome> {
        let fault = FaultKind::HoldLock.name();
        let Some(prefix) = self.pick(&self.cfg.lock_prefixes.clone()) else {
            return Ok(Outcome::Skipped("no workload table"));
        };
        self.lock_seq += 1;
        let mut key = prefix;
        key.extend_from_slice(&[0xFF; 8]);
        key.extend_from_slice(&self.lock_seq.to_be_bytes());
        let hold = self.cfg.hold;
        let start_ts = self.prewrite_lock(&key, hold)?;
        let region_id = self.cluster.region_by_raw_key(&key).map_or(0, |r| r.id());
        tracing::info!(
            fault,
            region_id,
            start_ts = start_ts.0,
            key = %hex::encode(&key),
            ?hold,
            "chaos fault injected"
        );
        let cluster = self.cluster.clone();
        let cancel = cancel.clone();
        tracker.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(hold) => {}
            }
            let keys = vec![key];
            match cluster.apply(|c| c.rollback(&keys, start_ts).map(|o| ((), o))) {
                Ok(()) => {
                    tracing::info!(fault, start_ts = start_ts.0, "chaos fault reverted")
                }
                Err(e) => tracing::debug!(fault, error = %e, "lock rollback failed"),
            }
        });
        Ok(Outcome::Injected)
    }

    /// `delay_resolved_ts` or `stall_scan` (`kind`): a random region's resolved ts lags the
    /// TSO, or its incremental scan mostly stalls, for a while.
    async fn slow_region(
        &mut self,
        kind: FaultKind,
        regions: &[RegionInfo],
        cancel: &CancellationToken,
        tracker: &TaskTracker,
    ) -> crate::sim::server::Result<Outcome> {
        let fault = kind.name();
        let Some(r) = self.pick(regions) else {
            return Ok(Outcome::Skipped("no region"));
        };
        let region_id = r.id();
        let hold = self.cfg.hold;
        if kind == FaultKind::DelayResolvedTs {
            self.cluster.delay_resolved_ts(region_id, hold).await;
        } else {
            self.cluster
                .stall_scan(region_id, STALL_SCAN_PROBABILITY)
                .await;
        }
        tracing::info!(fault, region_id, ?hold, "chaos fault injected");
        let cluster = self.cluster.clone();
        let cancel = cancel.clone();
        tracker.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(hold) => {}
            }
            if kind == FaultKind::DelayResolvedTs {
                cluster.delay_resolved_ts(region_id, Duration::ZERO).await;
            } else {
                cluster.stall_scan(region_id, 0.0).await;
            }
            tracing::info!(fault, region_id, "chaos fault reverted");
        });
        Ok(Outcome::Injected)
    }

    /// Prewrites `key` with a TTL covering `hold`; returns the lock's start ts.
    fn prewrite_lock(&self, key: &[u8], hold: Duration) -> crate::sim::server::Result<Ts> {
        let ttl = u64::try_from(hold.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(crate::sim::server::txn::DEFAULT_LOCK_TTL_MS);
        self.cluster.apply(|c| {
            let start_ts = c.ts();
            let req = PrewriteRequest {
                mutations: vec![Mutation::Put(key.to_vec(), b"chaos".to_vec())],
                primary: key.to_vec(),
                start_ts,
                lock_ttl_ms: ttl,
                txn_size: 1,
                min_commit_ts: start_ts.next(),
                ..Default::default()
            };
            let (_, out) = c.prewrite(&req)?;
            Ok::<_, SimError>((start_ts, out))
        })
    }
}

/// A key of the store strictly inside `region` (not its start key), chosen uniformly by
/// reservoir sampling with `draw` as the random source; `None` if the region holds none.
fn split_key_in(core: &SimCore, region: &RegionInfo, draw: u64) -> Option<Vec<u8>> {
    let start = raw_lower_bound(&region.region.start_key);
    let mut rng = SimRng::new(draw);
    let mut chosen: Option<&[u8]> = None;
    let mut seen = 0u64;
    for (key, _) in core.mvcc.entries_from(&start).take(SPLIT_KEY_SCAN_LIMIT) {
        let encoded = encode_key(key);
        if !region.contains_encoded(&encoded) {
            break;
        }
        if encoded == region.region.start_key {
            continue;
        }
        seen += 1;
        if rng.below(seen) == 0 {
            chosen = Some(key);
        }
    }
    chosen.map(<[u8]>::to_vec)
}

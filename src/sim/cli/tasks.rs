//! The tasks a running simulation spawns: the workload loop (or the one huge transaction), the
//! idle clock, the GC worker and the progress log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::sim::server::SimCluster;
use crate::sim::tidb::Tidb;
use crate::sim::ts::ManualClock;
use crate::sim::workload::huge::HugeConfig;
use crate::sim::workload::Workload;

use super::report::Stats;
use super::shared::{apply_tidb, lock};

/// How often the idle virtual clock catches up with the wall clock.
const IDLE_CLOCK_TICK: Duration = Duration::from_millis(20);

/// The workload loop: one transaction per step, paced at `rate`, each inside
/// [`SimCluster::apply`] on a blocking thread (the core lock is never held across `.await`).
pub(super) struct WorkloadTask {
    pub(super) cluster: SimCluster,
    pub(super) tidb: Arc<Mutex<Tidb>>,
    pub(super) workload: Arc<Mutex<Workload>>,
    pub(super) txns: Option<u64>,
    pub(super) rate: f64,
    pub(super) stats: Arc<Stats>,
    pub(super) active: Arc<AtomicBool>,
    pub(super) done: CancellationToken,
    pub(super) failed: CancellationToken,
    pub(super) failure: Arc<Mutex<Option<String>>>,
    /// True while the workload may run.
    pub(super) running: watch::Receiver<bool>,
    /// Ends the workload early (a child of `cancel`).
    pub(super) end: CancellationToken,
    pub(super) cancel: CancellationToken,
}

impl WorkloadTask {
    /// Waits while the workload is paused; false if it was cancelled meanwhile.
    async fn wait_running(&mut self) -> bool {
        let paused = !*self.running.borrow_and_update();
        if paused {
            self.active.store(false, Ordering::SeqCst);
        }
        while !*self.running.borrow_and_update() {
            tokio::select! {
                _ = self.cancel.cancelled() => return false,
                _ = self.end.cancelled() => break,
                r = self.running.changed() => if r.is_err() { return false },
            }
        }
        if paused {
            self.active.store(true, Ordering::SeqCst);
        }
        true
    }

    /// Runs the workload until it is done, fails, or is cancelled.
    pub(super) async fn run(mut self) {
        if !self.wait_running().await {
            self.active.store(false, Ordering::SeqCst);
            return;
        }
        self.active.store(true, Ordering::SeqCst);
        let mut started = tokio::time::Instant::now();
        let seed = lock(&self.workload).seed();
        tracing::info!(seed, txns = ?self.txns, rate = self.rate, "workload starts");
        let mut i: u64 = 0;
        // Pacing counts from the last (re)start.
        let mut paced_from: u64 = 0;
        loop {
            if self.cancel.is_cancelled() {
                break;
            }
            // `end` is a child of `cancel`: only an end without a shutdown completes the run.
            if self.txns.is_some_and(|n| i >= n) || self.end.is_cancelled() {
                tracing::info!(txns = i, "workload done");
                self.done.cancel();
                break;
            }
            if !*self.running.borrow() {
                if !self.wait_running().await {
                    break;
                }
                started = tokio::time::Instant::now();
                paced_from = i;
                continue;
            }
            if self.rate > 0.0 {
                let due = started + Duration::from_secs_f64((i - paced_from) as f64 / self.rate);
                tokio::select! {
                    _ = self.end.cancelled() => continue,
                    r = self.running.changed() => {
                        if r.is_err() {
                            break;
                        }
                        continue;
                    }
                    _ = tokio::time::sleep_until(due) => {}
                }
            } else {
                // Let the driver and the gRPC services take the core lock between steps.
                tokio::task::yield_now().await;
                if self.end.is_cancelled() {
                    continue;
                }
            }
            let (cluster, tidb, wl) = (
                self.cluster.clone(),
                self.tidb.clone(),
                self.workload.clone(),
            );
            let r = tokio::task::spawn_blocking(move || {
                let mut tidb = lock(&tidb);
                let mut wl = lock(&wl);
                apply_tidb(&cluster, |core| {
                    let mut rep = wl.step(&mut tidb, core)?;
                    let out = std::mem::take(&mut rep.outputs);
                    Ok((rep, out))
                })
            })
            .await;
            match r {
                Ok(Ok(rep)) => self.stats.record(&rep),
                Ok(Err(e)) => {
                    self.fail(format!("{e:#}"), i, seed);
                    break;
                }
                Err(e) => {
                    self.fail(e.to_string(), i, seed);
                    break;
                }
            }
            i += 1;
        }
        self.active.store(false, Ordering::SeqCst);
    }

    fn fail(&self, error: String, txn: u64, seed: u64) {
        tracing::error!(seed, txn, error = %error, "workload failed");
        *lock(&self.failure) = Some(error);
        self.failed.cancel();
    }
}

/// Moves the virtual clock with the wall clock while no workload runs, from `origin` (now when
/// absent).
pub(super) async fn idle_clock(
    clock: ManualClock,
    origin: Option<Instant>,
    active: Arc<AtomicBool>,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(IDLE_CLOCK_TICK);
    let mut last = origin.unwrap_or_else(Instant::now);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let ms = last.elapsed().as_millis() as u64;
        if ms == 0 {
            continue;
        }
        last += Duration::from_millis(ms);
        if !active.load(Ordering::SeqCst) {
            clock.advance(ms);
        }
    }
}

/// PD's GC as TiDB's GC worker drives it: every `interval`, the GC safe point moves to
/// `now − life_time` on the virtual clock (capped by the service safe points) and older MVCC
/// versions are dropped.
pub(super) async fn gc_worker(
    cluster: SimCluster,
    clock: ManualClock,
    interval: Duration,
    life_time: Duration,
    cancel: CancellationToken,
) {
    let interval = interval.max(Duration::from_millis(10));
    let life_ms = u64::try_from(life_time.as_millis()).unwrap_or(u64::MAX);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    let mut last = crate::sim::ts::Ts::ZERO;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let now_ms = crate::sim::ts::Clock::now_ms(&clock);
        let target = crate::sim::ts::Ts::compose(now_ms.saturating_sub(life_ms), 0);
        let sp = cluster.run_gc(target).await;
        if sp > last {
            tracing::debug!(
                safe_point = sp.0,
                target = target.0,
                "GC safe point advanced"
            );
            last = sp;
        }
    }
}

/// Logs a progress line every `interval`.
pub(super) async fn progress(
    cluster: SimCluster,
    stats: Arc<Stats>,
    interval: Duration,
    cancel: CancellationToken,
) {
    let interval = interval.max(Duration::from_millis(100));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    let mut last = (Instant::now(), 0u64);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let txns = stats.txns.load(Ordering::Relaxed);
        let now = Instant::now();
        let rate = (txns - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-3);
        last = (now, txns);
        tracing::info!(
            txns,
            row_changes = stats.row_changes.load(Ordering::Relaxed),
            ddls = stats.ddls.load(Ordering::Relaxed),
            rate = format_args!("{rate:.1}"),
            regions = cluster.with_core(|c| c.cluster.region_count()),
            faults = stats.faults.load(Ordering::Relaxed),
            "sim progress"
        );
    }
}

/// `--workload huge`: runs the one huge transaction, then marks the workload done (or failed,
/// with the reason in `failure`).
pub(super) async fn run_huge(
    cluster: SimCluster,
    tidb: Arc<Mutex<Tidb>>,
    cfg: HugeConfig,
    done: CancellationToken,
    failed: CancellationToken,
    failure: Arc<Mutex<Option<String>>>,
) {
    tracing::info!(
        rows = cfg.rows(),
        bytes = cfg.bytes,
        "huge transaction starts"
    );
    match crate::sim::workload::huge::run(&cluster, &tidb, cfg).await {
        Ok(s) => {
            tracing::info!(
                start_ts = s.start_ts.0,
                commit_ts = s.commit_ts.0,
                rows = s.rows,
                value_bytes = s.value_bytes,
                "huge transaction committed"
            );
            done.cancel();
        }
        Err(e) => {
            *lock(&failure) = Some(format!("huge transaction: {e:#}"));
            failed.cancel();
        }
    }
}

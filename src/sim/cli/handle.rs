//! The handle of a running simulation: its cluster and TiDB, workload control, totals and
//! shutdown.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::sim::server::SimCluster;
use crate::sim::tidb::Tidb;

use super::report::{ClusterInfo, SimSummary, Stats};
use super::shared::lock;

/// Handle of a running simulation.
pub struct SimHandle {
    pub(super) cluster: SimCluster,
    pub(super) tidb: Arc<Mutex<Tidb>>,
    pub(super) info: ClusterInfo,
    pub(super) stats: Arc<Stats>,
    pub(super) cancel: CancellationToken,
    pub(super) tracker: TaskTracker,
    pub(super) done: CancellationToken,
    pub(super) failed: CancellationToken,
    pub(super) failure: Arc<Mutex<Option<String>>>,
    /// True while the workload may run (from the start unless the builder was `paused`).
    pub(super) go: watch::Sender<bool>,
    /// Cancelled to end the workload early ([`SimHandle::end_workload`]).
    pub(super) end_workload: CancellationToken,
    pub(super) truth_file: Option<File>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl SimHandle {
    /// The cluster (faults, reads, transactions).
    pub fn cluster(&self) -> &SimCluster {
        &self.cluster
    }

    /// Addresses, cluster id, seed.
    pub fn info(&self) -> &ClusterInfo {
        &self.info
    }

    /// The simulated TiDB; lock it only briefly and never across `.await` (the workload task
    /// locks it for every transaction).
    pub fn tidb(&self) -> Arc<Mutex<Tidb>> {
        self.tidb.clone()
    }

    /// Lets a workload held back by [`SimBuilder::paused`] or [`Self::pause_workload`] run.
    ///
    /// [`SimBuilder::paused`]: crate::sim::cli::SimBuilder::paused
    pub fn start_workload(&self) {
        self.go.send_replace(true);
    }

    /// Holds the workload back after the transaction it is running (until
    /// [`Self::start_workload`]); its pacing starts over when it resumes.
    pub fn pause_workload(&self) {
        self.go.send_replace(false);
    }

    /// Ends the workload after the transaction it is running, as if `--txns` were reached:
    /// [`Self::workload_done`] resolves once it stopped, and the cluster keeps serving.
    pub fn end_workload(&self) {
        self.end_workload.cancel();
        self.go.send_replace(true);
    }

    /// Resolves when the workload has run `--txns` transactions (at once for
    /// `--workload none`) or has failed.
    pub async fn workload_done(&self) {
        tokio::select! {
            _ = self.done.cancelled() => {}
            _ = self.failed.cancelled() => {}
        }
    }

    /// Why the workload failed, if it did.
    pub fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Resolves when the workload has failed.
    pub async fn workload_failed(&self) {
        self.failed.cancelled().await;
    }

    /// Totals so far.
    pub fn summary(&self) -> SimSummary {
        let s = &self.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SimSummary {
            seed: self.info.seed,
            cluster_id: self.info.cluster_id,
            txns: get(&s.txns),
            row_changes: get(&s.row_changes),
            ddls: get(&s.ddls),
            one_pc: get(&s.one_pc),
            async_commit: get(&s.async_commit),
            two_pc: get(&s.two_pc),
            faults: get(&s.faults),
            truth_lines: get(&s.truth_lines),
            regions: self.cluster.with_core(|c| c.cluster.region_count()),
        }
    }

    /// Stops the workload, chaos and progress tasks, syncs the truth log and shuts the
    /// cluster down. Fails if the workload failed.
    pub async fn shutdown(self) -> anyhow::Result<SimSummary> {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        drop(lock(&self.tidb).take_truth_sink());
        let summary = self.summary();
        let synced = match &self.truth_file {
            Some(f) => f.sync_all().context("sync the truth log"),
            None => Ok(()),
        };
        self.cluster.shutdown().await;
        if let Some(e) = lock(&self.failure).take() {
            anyhow::bail!("workload failed: {e}");
        }
        synced?;
        tracing::info!(
            txns = summary.txns,
            row_changes = summary.row_changes,
            faults = summary.faults,
            truth_lines = summary.truth_lines,
            "simulated cluster stopped"
        );
        Ok(summary)
    }
}

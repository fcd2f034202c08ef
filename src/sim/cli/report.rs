//! What a run reports: the `ready` line's cluster info, the totals, the live counters behind
//! them, and the truth sinks that count lines.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::sim::tidb::{CommitMode, TruthSink, TruthTxn};
use crate::sim::workload::StepReport;

/// A store as printed in the `ready` line.
#[derive(Debug, Clone, Serialize)]
pub struct StoreAddr {
    /// Store id.
    pub id: u64,
    /// gRPC `host:port`.
    pub addr: SocketAddr,
}

/// Where the running cluster answers.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterInfo {
    /// Seed of the run.
    pub seed: u64,
    /// PD cluster id (every request header must carry it).
    pub cluster_id: u64,
    /// PD `host:port`.
    pub pd: SocketAddr,
    /// PD URL as clients dial it.
    pub pd_url: String,
    /// The stores.
    pub stores: Vec<StoreAddr>,
    /// Regions after the pre-split.
    pub regions: usize,
}

/// Totals of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimSummary {
    /// Seed of the run.
    pub seed: u64,
    /// PD cluster id.
    pub cluster_id: u64,
    /// Workload transactions run (DDLs included).
    pub txns: u64,
    /// Row changes (statements) applied.
    pub row_changes: u64,
    /// DDL statements run by the workload (setup excluded).
    pub ddls: u64,
    /// Transactions by commit protocol.
    pub one_pc: u64,
    /// Transactions by commit protocol.
    pub async_commit: u64,
    /// Transactions by commit protocol.
    pub two_pc: u64,
    /// Chaos faults injected.
    pub faults: u64,
    /// Lines written to the truth log (setup DDLs included).
    pub truth_lines: u64,
    /// Regions at the end.
    pub regions: usize,
}

/// The live counters of a run.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) txns: AtomicU64,
    pub(super) row_changes: AtomicU64,
    pub(super) ddls: AtomicU64,
    pub(super) one_pc: AtomicU64,
    pub(super) async_commit: AtomicU64,
    pub(super) two_pc: AtomicU64,
    pub(super) faults: Arc<AtomicU64>,
    pub(super) truth_lines: Arc<AtomicU64>,
}

impl Stats {
    /// Counts one workload step.
    pub(super) fn record(&self, rep: &StepReport) {
        self.txns.fetch_add(1, Ordering::Relaxed);
        self.row_changes
            .fetch_add(rep.row_changes as u64, Ordering::Relaxed);
        let counter = match rep.mode {
            Some(CommitMode::OnePc) => &self.one_pc,
            Some(CommitMode::AsyncCommit) => &self.async_commit,
            Some(CommitMode::TwoPc) => &self.two_pc,
            None => &self.ddls,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts the lines its inner sink records.
pub(super) struct CountingSink {
    pub(super) inner: Box<dyn TruthSink>,
    pub(super) count: Arc<AtomicU64>,
}

impl TruthSink for CountingSink {
    fn record(&mut self, txn: &TruthTxn) -> std::io::Result<()> {
        self.inner.record(txn)?;
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Several sinks in order.
pub(super) struct TeeSink(pub(super) Vec<Box<dyn TruthSink>>);

impl TruthSink for TeeSink {
    fn record(&mut self, txn: &TruthTxn) -> std::io::Result<()> {
        self.0.iter_mut().try_for_each(|s| s.record(txn))
    }
}

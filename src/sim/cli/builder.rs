//! The library face of `tibinlog sim`: a builder that starts the cluster, runs the setup and
//! spawns the tasks of a run.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::sim::chaos::{self, Chaos, ChaosConfig};
use crate::sim::server::{SimCluster, SimConfig};
use crate::sim::tidb::TruthSink;
use crate::sim::ts::ManualClock;
use crate::sim::workload::huge::HugeConfig;

use super::args::{seed_from_time, Epoch, SimArgs, WorkloadKind};
use super::handle::SimHandle;
use super::prepare::prepare;
use super::report::{ClusterInfo, Stats, StoreAddr};
use super::tasks::{gc_worker, idle_clock, progress, run_huge, WorkloadTask};

/// Builds and starts a simulated cluster with its workload; the library face of `tibinlog sim`
/// (the demo embeds the same thing).
pub struct SimBuilder {
    args: SimArgs,
    extra_truth: Option<Box<dyn TruthSink>>,
    paused: bool,
}

impl std::fmt::Debug for SimBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBuilder")
            .field("args", &self.args)
            .field("extra_truth", &self.extra_truth.is_some())
            .finish()
    }
}

impl SimBuilder {
    /// A builder from the command-line arguments.
    pub fn new(args: SimArgs) -> Self {
        SimBuilder {
            args,
            extra_truth: None,
            paused: false,
        }
    }

    /// Prepares everything but holds the workload back until [`SimHandle::start_workload`]
    /// (a test can then start its consumers before the first transaction).
    pub fn paused(mut self) -> Self {
        self.paused = true;
        self
    }

    /// Also sends the truth log to `sink` (e.g. a `TruthCollector`), besides `--truth`.
    pub fn truth_sink(mut self, sink: Box<dyn TruthSink>) -> Self {
        self.extra_truth = Some(sink);
        self
    }

    /// Starts the cluster, bootstraps TiDB, creates and splits the workload tables, and spawns
    /// the workload (plus chaos and progress) tasks. They stop when `shutdown` (or
    /// [`SimHandle::shutdown`]) fires; the cluster itself stops only in
    /// [`SimHandle::shutdown`].
    pub async fn start(self, shutdown: CancellationToken) -> anyhow::Result<SimHandle> {
        let args = self.args;
        let seed = args.seed.unwrap_or_else(seed_from_time);
        check_args(&args)?;
        let epoch_ms = match args.epoch_ms {
            Epoch::Ms(ms) => ms,
            Epoch::Now => crate::sim::ts::Clock::now_ms(&crate::sim::ts::SystemClock),
        };
        // A clock that starts at the wall clock keeps up with it from here, the setup included
        // (a fixed epoch keeps its runs alike, and counts only idle time).
        let clock_origin = (args.epoch_ms == Epoch::Now).then(Instant::now);
        let clock = ManualClock::new(epoch_ms);
        let cluster = start_cluster(&args, seed, &clock).await?;
        let stats = Arc::new(Stats::default());
        let truth_file = create_truth_file(&args)?;
        let prepared = prepare(
            &cluster,
            &args,
            seed,
            &clock,
            truth_file.as_ref(),
            self.extra_truth,
            &stats,
        )
        .await;
        let (tidb, workload, lock_prefixes) = match prepared {
            Ok(p) => p,
            Err(e) => {
                cluster.shutdown().await;
                return Err(e);
            }
        };
        let info = cluster_info(&cluster, seed);

        let cancel = shutdown.child_token();
        let tracker = TaskTracker::new();
        let done = CancellationToken::new();
        let failed = CancellationToken::new();
        let failure = Arc::new(Mutex::new(None));
        let tidb = Arc::new(Mutex::new(tidb));
        // The virtual clock follows the wall clock while no workload runs (a paused one too).
        let active = Arc::new(AtomicBool::new(workload.is_some() && !self.paused));
        let (go, running) = watch::channel(!self.paused);
        let end_workload = cancel.child_token();
        match workload {
            Some(wl) => {
                tracker.spawn(
                    WorkloadTask {
                        cluster: cluster.clone(),
                        tidb: tidb.clone(),
                        workload: Arc::new(Mutex::new(wl)),
                        txns: args.txns,
                        rate: args.rate,
                        stats: stats.clone(),
                        active: active.clone(),
                        done: done.clone(),
                        failed: failed.clone(),
                        failure: failure.clone(),
                        running,
                        end: end_workload.clone(),
                        cancel: cancel.clone(),
                    }
                    .run(),
                );
            }
            None if args.workload == WorkloadKind::Huge => {
                let cfg = HugeConfig {
                    bytes: args.huge_bytes,
                    row_bytes: args.huge_row_bytes,
                    seed,
                };
                tracker.spawn(run_huge(
                    cluster.clone(),
                    tidb.clone(),
                    cfg,
                    done.clone(),
                    failed.clone(),
                    failure.clone(),
                ));
            }
            None => done.cancel(),
        }
        if let Some(interval) = args.gc_interval {
            tracker.spawn(gc_worker(
                cluster.clone(),
                clock.clone(),
                interval,
                args.gc_life_time,
                cancel.clone(),
            ));
        }
        tracker.spawn(idle_clock(clock, clock_origin, active, cancel.clone()));
        tracker.spawn(progress(
            cluster.clone(),
            stats.clone(),
            args.progress_interval,
            cancel.clone(),
        ));
        if let Some(interval) = args.chaos_interval {
            let chaos = Chaos::new(
                cluster.clone(),
                ChaosConfig {
                    interval,
                    seed,
                    hold: chaos::DEFAULT_FAULT_HOLD,
                    store_pause: chaos::DEFAULT_STORE_PAUSE,
                    lock_prefixes,
                },
                stats.faults.clone(),
            );
            tracker.spawn(chaos.run(cancel.clone(), tracker.clone()));
        }
        Ok(SimHandle {
            cluster,
            tidb,
            info,
            stats,
            cancel,
            tracker,
            done,
            failed,
            failure,
            go,
            end_workload,
            truth_file,
        })
    }
}

/// Refuses a `--pd-listen` other than IPv4 loopback and a `--rate` that is not a finite
/// number ≥ 0.
fn check_args(args: &SimArgs) -> anyhow::Result<()> {
    if !args.pd_listen.ip().is_loopback() {
        anyhow::bail!(
            "--pd-listen {}: the simulated cluster listens on loopback only",
            args.pd_listen
        );
    }
    if args.pd_listen.ip() != IpAddr::V4(Ipv4Addr::LOCALHOST) {
        anyhow::bail!(
            "--pd-listen {}: use 127.0.0.1 (the simulated cluster binds IPv4 loopback)",
            args.pd_listen
        );
    }
    if !(args.rate.is_finite() && args.rate >= 0.0) {
        anyhow::bail!("--rate {} must be a finite number ≥ 0", args.rate);
    }
    Ok(())
}

/// Starts the PD and TiKV servers of the cluster on `clock`.
async fn start_cluster(
    args: &SimArgs,
    seed: u64,
    clock: &ManualClock,
) -> anyhow::Result<SimCluster> {
    SimCluster::start(SimConfig {
        stores: args.stores.max(1),
        pd_port: args.pd_listen.port(),
        seed,
        resolved_ts_interval: args.resolved_ts_interval,
        clock: Arc::new(clock.clone()),
        pd_members: args.pd_members.max(1),
        tls: sim_tls(args)?,
        ..SimConfig::default()
    })
    .await
    .context("start the simulated cluster")
}

/// Creates the `--truth` file, if given.
fn create_truth_file(args: &SimArgs) -> anyhow::Result<Option<File>> {
    Ok(match &args.truth {
        Some(p) => {
            Some(File::create(p).with_context(|| format!("create truth log {}", p.display()))?)
        }
        None => None,
    })
}

/// Where the started cluster answers, as the `ready` line prints it.
fn cluster_info(cluster: &SimCluster, seed: u64) -> ClusterInfo {
    ClusterInfo {
        seed,
        cluster_id: cluster.cluster_id(),
        pd: cluster.pd_addr(),
        pd_url: cluster.pd_url(),
        stores: cluster
            .store_ids()
            .into_iter()
            .filter_map(|id| cluster.store_addr(id).map(|addr| StoreAddr { id, addr }))
            .collect(),
        regions: cluster.with_core(|c| c.cluster.region_count()),
    }
}

/// The TLS of `--ca`, `--cert`, `--key`, if given.
fn sim_tls(args: &SimArgs) -> anyhow::Result<Option<crate::sim::server::tls::SimTls>> {
    let (Some(ca), Some(cert), Some(key)) = (&args.ca, &args.cert, &args.key) else {
        return Ok(None);
    };
    let files = crate::security::ClusterTlsFiles {
        ca: ca.clone(),
        cert: cert.clone(),
        key: key.clone(),
    };
    Ok(Some(crate::sim::server::tls::SimTls::from_files(
        &files,
        args.pd_cert_allowed_cn.clone(),
        args.tikv_cert_allowed_cn.clone(),
    )?))
}

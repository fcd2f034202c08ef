//! `tibinlog sim`: a simulated TiDB cluster (PD + TiKV stores on loopback gRPC) running a seeded
//! OLTP workload, optionally under seeded chaos, for a capture client to follow.
//!
//! ```text
//! tibinlog sim --pd-listen 127.0.0.1:2379 --stores 3 --regions-per-table 4 \
//!              --workload oltp --rate 500 --txns 10000 --seed 7 --truth truth.jsonl \
//!              --resolved-ts-interval 1s --chaos-interval 5s --gc-interval 1s --exit-when-done
//! ```
//!
//! # Output
//!
//! stdout carries these lines, in this order (logs go to stderr):
//!
//! ```text
//! seed=7
//! {"event":"ready","seed":7,"cluster_id":…,"pd":"127.0.0.1:2379","pd_url":"http://127.0.0.1:2379",
//!  "stores":[{"id":1,"addr":"127.0.0.1:41234"},…],"regions":23}
//! {"event":"workload_done","seed":7,"cluster_id":…,"txns":10000,…,"truth_lines":…,…}
//! {"event":"done","seed":7,"cluster_id":…,"txns":10000,"row_changes":…,"ddls":…,"faults":…,…}
//! ```
//!
//! The `ready` line is printed once the TiDB layer is bootstrapped, the workload tables exist and
//! are pre-split, and the workload is about to start: from then on PD answers at `pd`. The
//! `workload_done` line (the totals so far) is printed when `--txns` transactions are done (at
//! once for `--workload none`), or when SIGUSR1 ends the workload early (between two
//! transactions): the truth log is then complete, and the cluster keeps serving unless
//! `--exit-when-done`. A run stopped or failed before that has no `workload_done` line.
//!
//! # GC
//!
//! With `--gc-interval`, PD's GC runs as TiDB's GC worker drives it: every interval the GC safe
//! point moves to `now − --gc-life-time` on the virtual clock, capped by the service safe points
//! clients hold in PD (`UpdateServiceGCSafePoint`), and MVCC versions below it are dropped;
//! reads below it fail. A client that resumes from a timestamp its service safe point did not
//! protect finds the history gone.
//!
//! # Determinism and the virtual clock
//!
//! The TSO runs on a virtual clock that starts at `--epoch-ms` and that the workload moves by
//! `1000 / rate` ms (at least 1 ms) before each transaction. By default it starts at the wall
//! clock, as a real PD's TSO physical part is the wall clock (so lag figures, event times and
//! GC lifetimes mean what they say). With a fixed `--epoch-ms` (say 1735689600000,
//! 2025-01-01T00:00:00Z) every `start_ts`/`commit_ts` in the truth log depends on the seed
//! only: the same seed gives a byte-identical truth file. Timestamps other clients take from PD
//! between two transactions do not shift the workload's (each transaction starts a new
//! millisecond). While no workload runs (`--workload none`, or after `--txns`) the virtual
//! clock follows the wall clock. In-process clusters ([`SimArgs::default`]) keep the fixed epoch
//! [`DEFAULT_EPOCH_MS`], so a seed replays a test run exactly.
//!
//! # Regions
//!
//! Each workload table's record span (each partition's, for partitioned tables) becomes its own
//! region, split into `--regions-per-table` regions at evenly spaced handles over the handles
//! the workload is expected to reach ([`presplit_handle_span`]).
//!
//! # Shutdown
//!
//! Ctrl-C, SIGTERM, or the end of `--txns` with `--exit-when-done`: the workload stops between
//! two transactions, chaos stops, the truth file is synced, the cluster shuts down, exit 0.
//!
//! # Layout
//!
//! * `args`: the arguments, their defaults and parsers.
//! * `builder`: [`SimBuilder`], which starts a run; `prepare`: its setup.
//! * `handle`: [`SimHandle`], a running simulation.
//! * `tasks`: the workload loop and the background tasks; `report`: the `ready` info, the
//!   totals and their counters; `shared`: helpers they share.

mod args;
mod builder;
mod handle;
mod prepare;
mod report;
mod shared;
mod tasks;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

pub use args::{
    parse_duration, parse_size, presplit_handle_span, Epoch, SimArgs, WorkloadKind,
    DEFAULT_EPOCH_MS, DEFAULT_GC_LIFE_TIME, DEFAULT_PROGRESS_INTERVAL, DEFAULT_RATE,
    DEFAULT_STORES, UNLIMITED_HANDLE_SPAN,
};
pub use builder::SimBuilder;
pub use handle::SimHandle;
pub use report::{ClusterInfo, SimSummary, StoreAddr};

use args::seed_from_time;

/// `tibinlog sim`: prints `seed=N`, starts, prints the `ready` line, runs until `shutdown`
/// (or the workload is done with `--exit-when-done`, or fails), stops, prints the `done` line.
pub async fn run(mut args: SimArgs, shutdown: CancellationToken) -> anyhow::Result<SimSummary> {
    let seed = *args.seed.get_or_insert_with(seed_from_time);
    println!("seed={seed}");
    let exit_when_done = args.exit_when_done;
    // SIGUSR1 ends the workload early; registered before `ready`, so none sent after it is lost.
    #[cfg(unix)]
    let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        .context("listen for SIGUSR1")?;
    let handle = SimBuilder::new(args).start(shutdown.clone()).await?;
    let mut ready = serde_json::to_value(handle.info())?;
    if let Some(o) = ready.as_object_mut() {
        o.insert("event".into(), "ready".into());
    }
    println!("{ready}");
    let mut workload_running = true;
    #[cfg(unix)]
    let end_requested = usr1.recv();
    #[cfg(not(unix))]
    let end_requested = std::future::pending::<Option<()>>();
    tokio::pin!(end_requested);
    let mut end_pending = true;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                tracing::info!("shutdown requested");
                break;
            }
            _ = &mut end_requested, if end_pending => {
                end_pending = false;
                tracing::info!("SIGUSR1: ending the workload");
                handle.end_workload();
            }
            _ = handle.workload_failed() => break,
            _ = handle.workload_done(), if workload_running => {
                workload_running = false;
                if handle.failure().is_some() {
                    break;
                }
                let mut line = serde_json::to_value(handle.summary())?;
                if let Some(o) = line.as_object_mut() {
                    o.insert("event".into(), "workload_done".into());
                }
                println!("{line}");
                if exit_when_done {
                    break;
                }
            }
        }
    }
    let summary = handle.shutdown().await?;
    let mut done = serde_json::to_value(&summary)?;
    if let Some(o) = done.as_object_mut() {
        o.insert("event".into(), "done".into());
    }
    println!("{done}");
    Ok(summary)
}

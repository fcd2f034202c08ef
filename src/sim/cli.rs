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

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::builder::TypedValueParser as _;
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::sim::chaos::{self, Chaos, ChaosConfig};
use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::server::{SimCluster, SimConfig, DEFAULT_RESOLVED_TS_INTERVAL};
use crate::sim::tidb::catalog::{key_datum, HandleKind, TableMeta};
use crate::sim::tidb::{CommitMode, Tidb, TidbConfig, TruthLog, TruthSink, TruthTxn};
use crate::sim::ts::ManualClock;
use crate::sim::workload::{StepReport, Workload, WorkloadConfig};
use crate::tidb::key::{record_key, record_span, Handle};

/// Default `--rate`: transactions per second (0 = unthrottled).
pub const DEFAULT_RATE: f64 = 1000.0;
/// The fixed epoch of in-process clusters ([`SimArgs::default`]): 2025-01-01T00:00:00Z.
pub const DEFAULT_EPOCH_MS: u64 = 1_735_689_600_000;
/// Default `--stores`.
pub const DEFAULT_STORES: usize = 3;
/// Default `--progress-interval`.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(5);
/// Pre-split handle span when `--txns` is unlimited.
pub const UNLIMITED_HANDLE_SPAN: i64 = 100_000;
/// Default `--gc-life-time` (TiDB's `tidb_gc_life_time`).
pub const DEFAULT_GC_LIFE_TIME: Duration = Duration::from_secs(10 * 60);
/// How often the idle virtual clock catches up with the wall clock.
const IDLE_CLOCK_TICK: Duration = Duration::from_millis(20);

/// Which workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadKind {
    /// Tables are created and split, then the cluster stays idle.
    None,
    /// The seeded OLTP mix (inserts, updates, deletes, PK changes, DDL now and then).
    Oltp,
    /// One transaction of `--huge-bytes` into `huge.big`, prewritten batch by batch, then
    /// committed; the cluster then stays idle.
    Huge,
}

/// Start of the virtual clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epoch {
    /// The wall clock at start.
    Now,
    /// Unix milliseconds.
    Ms(u64),
}

impl FromStr for Epoch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("now") {
            return Ok(Epoch::Now);
        }
        s.parse::<u64>()
            .map(Epoch::Ms)
            .map_err(|_| format!("expected `now` or Unix milliseconds, got {s:?}"))
    }
}

/// Arguments of `tibinlog sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// PD's listen address; the host must be loopback, port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub pd_listen: SocketAddr,
    /// Number of TiKV stores (each on a free loopback port).
    #[arg(long, default_value_t = DEFAULT_STORES, value_parser = clap::value_parser!(u16).range(1..).map(usize::from))]
    pub stores: usize,
    /// Regions per workload table record span (each partition's span for partitioned tables).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..).map(usize::from))]
    pub regions_per_table: usize,
    /// Idle tables `scale.t00001` … `scale.tN` (BIGINT primary key, INT, VARCHAR(32)), created
    /// in batches of one CREATE TABLES job each and split like the workload tables, with the
    /// leaders of their regions spread over the stores as PD's balancer leaves them: the
    /// many-tables, many-regions cluster of the scale benchmark.
    #[arg(long, default_value_t = 0)]
    pub tables: usize,
    /// Workload to run.
    #[arg(long, value_enum, default_value_t = WorkloadKind::Oltp)]
    pub workload: WorkloadKind,
    /// Transactions per second; 0 = as fast as possible.
    #[arg(long, default_value_t = DEFAULT_RATE)]
    pub rate: f64,
    /// Transactions to run (setup DDLs not counted); unlimited when absent.
    #[arg(long)]
    pub txns: Option<u64>,
    /// Seed of every random choice; from the time when absent (printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Truth log: one JSON line per committed user transaction or DDL, written as it commits.
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// TiKV `cdc.min-ts-interval`: how often resolved ts is sent.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub resolved_ts_interval: Duration,
    /// Inject one random fault every interval (off when absent).
    #[arg(long, value_parser = parse_duration)]
    pub chaos_interval: Option<Duration>,
    /// Run GC every interval (off when absent): the GC safe point moves to
    /// `now − --gc-life-time`, capped by the PD service safe points.
    #[arg(long, value_parser = parse_duration)]
    pub gc_interval: Option<Duration>,
    /// History GC keeps (TiDB's `tidb_gc_life_time`), on the virtual clock.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub gc_life_time: Duration,
    /// Exit once `--txns` transactions are done (otherwise keep serving until a signal).
    #[arg(long)]
    pub exit_when_done: bool,
    /// Start of the virtual TSO clock: Unix milliseconds (a fixed value makes runs of one seed
    /// byte-identical), or `now`, like a real PD.
    #[arg(long, default_value = "now")]
    pub epoch_ms: Epoch,
    /// How often a progress line is logged.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub progress_interval: Duration,
    /// Create the workload tables without their JSON columns (for MariaDB replicas and
    /// `mariadb-binlog`, which cannot read MySQL's binary JSON).
    #[arg(long)]
    pub no_json: bool,
    /// Keep to the DDL that leaves every row in its table: no RENAME TABLES, TRUNCATE
    /// PARTITION or EXCHANGE PARTITION (for consumers that track tables by name).
    #[arg(long)]
    pub basic_ddl: bool,
    /// Run no EXCHANGE PARTITION (its `CREATE TABLES` make plain tables instead of exchange
    /// pairs), for consumers whose DDL parser rejects it (Maxwell 1.22).
    #[arg(long)]
    pub no_exchange_partition: bool,
    /// Keep at most this many live rows per workload table: an insert into a full table
    /// deletes a row instead, so that a long run's data stays bounded (the store is in memory).
    #[arg(long)]
    pub max_live_rows: Option<usize>,
    /// Keep at most this many workload tables: a DDL that would create one more drops one
    /// the workload created instead, so that a long run's tables stay bounded.
    #[arg(long)]
    pub max_tables: Option<usize>,
    /// PD members: the first listens on --pd-listen and leads at start, the others on free
    /// ports (a client given the first learns them through GetMembers).
    #[arg(long, default_value_t = 1)]
    pub pd_members: usize,
    /// Serve PD and TiKV over mutual TLS: the CA that signs every certificate (with --cert and
    /// --key; `tibinlog certs` makes a set). URLs become `https://`.
    #[arg(long, requires_all = ["cert", "key"])]
    pub ca: Option<PathBuf>,
    /// The servers' certificate (for 127.0.0.1 and localhost).
    #[arg(long, requires = "ca")]
    pub cert: Option<PathBuf>,
    /// Its private key.
    #[arg(long, requires = "ca")]
    pub key: Option<PathBuf>,
    /// PD's `cert-allowed-cn`: client certificate names PD accepts, checked in the handshake
    /// (empty: any the CA signed).
    #[arg(long, value_delimiter = ',', requires = "ca")]
    pub pd_cert_allowed_cn: Vec<String>,
    /// TiKV's `cert-allowed-cn`, checked on every call (UNAUTHENTICATED otherwise).
    #[arg(long, value_delimiter = ',', requires = "ca")]
    pub tikv_cert_allowed_cn: Vec<String>,
    /// `--workload huge`: bytes of row values in the one transaction (suffixes K, M, G).
    #[arg(long, value_parser = parse_size, default_value = "1G")]
    pub huge_bytes: u64,
    /// `--workload huge`: bytes of each row's value.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..=(64 << 20)).map(|v| v as usize))]
    pub huge_row_bytes: usize,
}

/// Parses a byte count such as `512`, `64K`, `100M`, `5G` (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("expected a byte count such as 512, 64K, 100M or 5G, got {s:?}"))
}

impl Default for SimArgs {
    fn default() -> Self {
        SimArgs {
            pd_listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            stores: DEFAULT_STORES,
            regions_per_table: 1,
            tables: 0,
            workload: WorkloadKind::Oltp,
            rate: DEFAULT_RATE,
            txns: None,
            seed: None,
            truth: None,
            resolved_ts_interval: DEFAULT_RESOLVED_TS_INTERVAL,
            chaos_interval: None,
            gc_interval: None,
            gc_life_time: DEFAULT_GC_LIFE_TIME,
            exit_when_done: false,
            epoch_ms: Epoch::Ms(DEFAULT_EPOCH_MS),
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
            no_json: false,
            basic_ddl: false,
            no_exchange_partition: false,
            max_live_rows: None,
            max_tables: None,
            pd_members: 1,
            ca: None,
            cert: None,
            key: None,
            pd_cert_allowed_cn: Vec::new(),
            tikv_cert_allowed_cn: Vec::new(),
            huge_bytes: 1 << 30,
            huge_row_bytes: 8192,
        }
    }
}

/// Parses a duration such as `250ms`, `1s`, `1.5s`, `2m`, `1h30m` (humantime's units).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (e.g. 250ms, 1s, 1.5s, 2m, 1h30m)");
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match rest[..unit_end].trim() {
            "ns" | "nsec" => 1e-9,
            "us" | "usec" | "µs" => 1e-6,
            "ms" | "msec" => 1e-3,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            "" if num == 0.0 => 0.0,
            _ => return Err(bad()),
        };
        total += num * secs;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
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

/// A seed from the wall clock and the process id.
fn seed_from_time() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut rng = crate::sim::ts::SimRng::new(nanos ^ (u64::from(std::process::id()) << 32));
    rng.next_u64() >> 1
}

/// The handle span the pre-split spreads over: roughly the largest handle `txns` transactions
/// reach in one table (each inserts ~1.4 rows per table touched and bumps the next key by 1–3).
pub fn presplit_handle_span(txns: Option<u64>) -> i64 {
    match txns {
        Some(n) => i64::try_from(n)
            .unwrap_or(i64::MAX / 2)
            .clamp(16, i64::MAX / 2),
        None => UNLIMITED_HANDLE_SPAN,
    }
}

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

#[derive(Debug, Default)]
struct Stats {
    txns: AtomicU64,
    row_changes: AtomicU64,
    ddls: AtomicU64,
    one_pc: AtomicU64,
    async_commit: AtomicU64,
    two_pc: AtomicU64,
    faults: Arc<AtomicU64>,
    truth_lines: Arc<AtomicU64>,
}

impl Stats {
    fn record(&self, rep: &StepReport) {
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
struct CountingSink {
    inner: Box<dyn TruthSink>,
    count: Arc<AtomicU64>,
}

impl TruthSink for CountingSink {
    fn record(&mut self, txn: &TruthTxn) -> std::io::Result<()> {
        self.inner.record(txn)?;
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Several sinks in order.
struct TeeSink(Vec<Box<dyn TruthSink>>);

impl TruthSink for TeeSink {
    fn record(&mut self, txn: &TruthTxn) -> std::io::Result<()> {
        self.0.iter_mut().try_for_each(|s| s.record(txn))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs a TiDB-layer call on the core through [`SimCluster::apply`], so that its writes reach
/// the change streams; TiDB errors travel inside the closure's result.
fn apply_tidb<R>(
    cluster: &SimCluster,
    f: impl FnOnce(&mut SimCore) -> crate::sim::tidb::Result<(R, Vec<StoreOutput>)>,
) -> anyhow::Result<R> {
    let r = cluster.apply(|core| {
        Ok::<_, crate::sim::SimError>(match f(core) {
            Ok((r, out)) => (Ok(r), out),
            Err(e) => (Err(e), Vec::new()),
        })
    })?;
    Ok(r?)
}

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
        let epoch_ms = match args.epoch_ms {
            Epoch::Ms(ms) => ms,
            Epoch::Now => crate::sim::ts::Clock::now_ms(&crate::sim::ts::SystemClock),
        };
        // A clock that starts at the wall clock keeps up with it from here, the setup included
        // (a fixed epoch keeps its runs alike, and counts only idle time).
        let clock_origin = (args.epoch_ms == Epoch::Now).then(Instant::now);
        let clock = ManualClock::new(epoch_ms);
        let cluster = SimCluster::start(SimConfig {
            stores: args.stores.max(1),
            pd_port: args.pd_listen.port(),
            seed,
            resolved_ts_interval: args.resolved_ts_interval,
            clock: Arc::new(clock.clone()),
            pd_members: args.pd_members.max(1),
            tls: sim_tls(&args)?,
            ..SimConfig::default()
        })
        .await
        .context("start the simulated cluster")?;
        let stats = Arc::new(Stats::default());
        let truth_file = match &args.truth {
            Some(p) => {
                Some(File::create(p).with_context(|| format!("create truth log {}", p.display()))?)
            }
            None => None,
        };
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
        let info = ClusterInfo {
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
        };

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
                let cfg = crate::sim::workload::huge::HugeConfig {
                    bytes: args.huge_bytes,
                    row_bytes: args.huge_row_bytes,
                    seed,
                };
                let (cluster, tidb, done, failed, failure) = (
                    cluster.clone(),
                    tidb.clone(),
                    done.clone(),
                    failed.clone(),
                    failure.clone(),
                );
                tracker.spawn(async move {
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
                });
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

type Prepared = (Tidb, Option<Workload>, Vec<Vec<u8>>);

/// Bootstrap, truth sink, workload tables, pre-split. Returns the TiDB, the workload (None for
/// `--workload none`) and the key prefixes where chaos may hold locks (one per physical table).
async fn prepare(
    cluster: &SimCluster,
    args: &SimArgs,
    seed: u64,
    clock: &ManualClock,
    truth_file: Option<&File>,
    extra_truth: Option<Box<dyn TruthSink>>,
    stats: &Stats,
) -> anyhow::Result<Prepared> {
    let mut tidb = apply_tidb(cluster, |core| {
        // A fresh millisecond: TSOs handed out before (PD clients) cannot shift bootstrap's.
        clock.advance(1);
        Tidb::bootstrap(core, TidbConfig::default())
    })
    .context("bootstrap the simulated TiDB")?;
    let mut sinks: Vec<Box<dyn TruthSink>> = Vec::new();
    if let Some(f) = truth_file {
        sinks.push(Box::new(TruthLog::new(
            f.try_clone().context("clone the truth log handle")?,
        )));
    }
    sinks.extend(extra_truth);
    tidb.set_truth_sink(Box::new(CountingSink {
        inner: Box::new(TeeSink(sinks)),
        count: stats.truth_lines.clone(),
    }));

    let tick_ms = if args.rate > 0.0 {
        (1000.0 / args.rate).round().max(1.0) as u64
    } else {
        1
    };
    let cfg = WorkloadConfig {
        seed,
        txns: args.txns.unwrap_or(u64::MAX),
        rate: None,
        tick_ms,
        json_columns: !args.no_json,
        moving_ddl: !args.basic_ddl,
        no_exchange: args.no_exchange_partition,
        max_live_rows: args.max_live_rows,
        max_tables: args.max_tables,
        ..WorkloadConfig::default()
    };
    let db = cfg.db.clone();
    let mut wl = Workload::new(cfg, Some(clock.clone()));
    apply_tidb(cluster, |core| Ok(((), wl.setup(&mut tidb, core)?)))
        .context("create the workload tables")?;

    if args.workload == WorkloadKind::Huge {
        for ddl in crate::sim::workload::huge::ddls() {
            apply_tidb(cluster, |core| {
                clock.advance(1);
                let out = tidb.execute_ddl(core, &ddl)?;
                Ok(((), out.outputs))
            })
            .context("create the huge table")?;
        }
    }

    let tables: Vec<Arc<TableMeta>> = tidb
        .catalog()
        .db(&db)
        .map(|d| d.tables.values().cloned().collect())
        .unwrap_or_default();
    let span = presplit_handle_span(args.txns);
    for ddl in crate::sim::workload::scale::ddls(args.tables) {
        apply_tidb(cluster, |core| {
            clock.advance(1);
            let out = tidb.execute_ddl(core, &ddl)?;
            Ok(((), out.outputs))
        })
        .context("create the scale tables")?;
    }
    let scale_tables: Vec<Arc<TableMeta>> = tidb
        .catalog()
        .db(crate::sim::workload::scale::DB)
        .map(|d| d.tables.values().cloned().collect())
        .unwrap_or_default();
    let mut leader = 0usize;
    for t in &scale_tables {
        let pid = t.info.id;
        let (start, end) = record_span(pid);
        let mut keys = vec![start];
        for i in 1..args.regions_per_table {
            let h = span.saturating_mul(i as i64) / args.regions_per_table as i64;
            keys.push(handle_key(t, pid, h)?);
        }
        keys.push(end);
        for k in &keys {
            split_once(cluster, k).await?;
        }
        // Every region of the table's span, its leader on the next store in turn.
        for k in &keys[..keys.len() - 1] {
            let region = cluster
                .region_by_raw_key(k)
                .map(|r| r.id())
                .context("a region holds the split key")?;
            let store = 1 + (leader % args.stores.max(1)) as u64;
            leader += 1;
            cluster
                .transfer_leader(region, store)
                .await
                .with_context(|| format!("move region {region}'s leader to store {store}"))?;
        }
    }
    let mut prefixes = Vec::new();
    for t in &tables {
        for pid in t.physical_ids() {
            let (start, end) = record_span(pid);
            let mut keys = vec![start.clone()];
            for i in 1..args.regions_per_table {
                let h = span.saturating_mul(i as i64) / args.regions_per_table as i64;
                keys.push(handle_key(t, pid, h)?);
            }
            keys.push(end);
            for k in keys {
                split_once(cluster, &k).await?;
            }
            // Chaos holds its locks under an index id no index has: the lock stalls resolved
            // ts like any other, but no row read or DDL backfill scan of the workload meets it.
            let mut lock_prefix = crate::tidb::key::table_prefix(pid);
            lock_prefix.extend_from_slice(crate::tidb::key::INDEX_SEP);
            prefixes.push(lock_prefix);
        }
    }
    let regions = cluster.with_core(|c| c.cluster.region_count());
    tracing::info!(
        tables = tables.len(),
        scale_tables = scale_tables.len(),
        physical_tables = prefixes.len(),
        regions_per_table = args.regions_per_table,
        handle_span = span,
        regions,
        "workload tables created and split"
    );
    let wl = (args.workload == WorkloadKind::Oltp).then_some(wl);
    Ok((tidb, wl, prefixes))
}

/// The record key of handle `h` in physical table `pid`, built the way the workload builds
/// primary keys (strings `k{h:08}`, the other columns `h`).
fn handle_key(t: &TableMeta, pid: i64, h: i64) -> anyhow::Result<Vec<u8>> {
    let handle = match &t.handle {
        HandleKind::Int(_) | HandleKind::RowId => Handle::Int(h),
        HandleKind::Common(pos) => {
            let datums = pos
                .iter()
                .map(|&p| {
                    let ft = &t.types[p];
                    let v = if ft.is_string_kind() {
                        tibinlog_protocol::value::Value::Bytes(format!("k{h:08}").into_bytes())
                    } else if ft.is_unsigned() {
                        tibinlog_protocol::value::Value::UInt(h as u64)
                    } else {
                        tibinlog_protocol::value::Value::Int(h)
                    };
                    key_datum(&v, ft)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Handle::common_from_datums(&datums)?
        }
    };
    Ok(record_key(pid, &handle))
}

/// Splits at raw `key` unless a region already starts there.
async fn split_once(cluster: &SimCluster, key: &[u8]) -> anyhow::Result<()> {
    let encoded = crate::sim::region::encode_key(key);
    let at_boundary = cluster
        .region_by_raw_key(key)
        .is_some_and(|r| r.region.start_key == encoded);
    if !at_boundary {
        cluster
            .split_at(key)
            .await
            .with_context(|| format!("pre-split at {}", hex::encode(key)))?;
    }
    Ok(())
}

/// Handle of a running simulation.
pub struct SimHandle {
    cluster: SimCluster,
    tidb: Arc<Mutex<Tidb>>,
    info: ClusterInfo,
    stats: Arc<Stats>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    done: CancellationToken,
    failed: CancellationToken,
    failure: Arc<Mutex<Option<String>>>,
    /// True while the workload may run (from the start unless the builder was `paused`).
    go: watch::Sender<bool>,
    /// Cancelled to end the workload early ([`SimHandle::end_workload`]).
    end_workload: CancellationToken,
    truth_file: Option<File>,
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

/// The workload loop: one transaction per step, paced at `rate`, each inside
/// [`SimCluster::apply`] on a blocking thread (the core lock is never held across `.await`).
struct WorkloadTask {
    cluster: SimCluster,
    tidb: Arc<Mutex<Tidb>>,
    workload: Arc<Mutex<Workload>>,
    txns: Option<u64>,
    rate: f64,
    stats: Arc<Stats>,
    active: Arc<AtomicBool>,
    done: CancellationToken,
    failed: CancellationToken,
    failure: Arc<Mutex<Option<String>>>,
    /// True while the workload may run.
    running: watch::Receiver<bool>,
    /// Ends the workload early (a child of `cancel`).
    end: CancellationToken,
    cancel: CancellationToken,
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

    async fn run(mut self) {
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
async fn idle_clock(
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
async fn gc_worker(
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
async fn progress(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn epoch() {
        assert_eq!("now".parse::<Epoch>(), Ok(Epoch::Now));
        assert_eq!("12".parse::<Epoch>(), Ok(Epoch::Ms(12)));
        assert!("yesterday".parse::<Epoch>().is_err());
    }
}

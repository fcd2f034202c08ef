//! The whole product in one process for end-to-end tests: a simulated cluster running a seeded
//! OLTP workload (DDL and faults included) with its truth log, and `tibinlog`'s app (changefeed →
//! binlog store → MySQL server) on loopback, plus what the tests ask of them.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use serde_json::{json, Value as Json};
use tibinlog::app::{App, AppConfig};
use tibinlog::model::Ts;
use tibinlog::mounter::ddl_sql::normalize_ddl;
use tibinlog::sim::cli::{SimArgs, SimBuilder, SimHandle, WorkloadKind};
use tibinlog::sim::tidb::{Ddl, TruthCollector, Txn};
use tokio_util::sync::CancellationToken;

/// Upper bound of any wait on the pipeline.
pub const WAIT: Duration = Duration::from_secs(240);

/// A running simulated cluster, its truth log, and the ts capture starts from.
pub struct Run {
    pub sim: SimHandle,
    pub truth: TruthCollector,
    pub start_ts: Ts,
}

/// Starts a cluster of 3 stores running `txns` transactions of the seeded workload as fast as it
/// can, with faults every 150 ms.
pub async fn start_sim(seed: u64, txns: u64) -> Run {
    start_sim_at_rate(seed, txns, 0.0).await
}

/// Like [`start_sim`], at `rate` transactions per second (0 = unlimited).
pub async fn start_sim_at_rate(seed: u64, txns: u64, rate: f64) -> Run {
    let run = start_sim_paused(seed, txns, rate).await;
    run.sim.start_workload();
    run
}

/// Like [`start_sim_at_rate`], with the workload held back until `run.sim.start_workload()`.
pub async fn start_sim_paused(seed: u64, txns: u64, rate: f64) -> Run {
    start_sim_paused_ddl(seed, txns, rate, false).await
}

/// [`start_sim_paused`] with `basic_ddl`: no DDL that moves rows between tables or partitions
/// unseen (renames, partition truncation and exchange), for checks of a consumer's per-table
/// view.
pub async fn start_sim_paused_ddl(seed: u64, txns: u64, rate: f64, basic_ddl: bool) -> Run {
    let Sim { handle: sim, truth } = start_sim_paused_with(SimArgs {
        basic_ddl,
        stores: 3,
        regions_per_table: 2,
        rate,
        txns: Some(txns),
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        chaos_interval: Some(Duration::from_millis(150)),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    })
    .await;
    let start_ts = Ts(sim.cluster().tso().0);
    Run {
        sim,
        truth,
        start_ts,
    }
}

/// A running simulated cluster and its truth log.
pub struct Sim {
    pub handle: SimHandle,
    pub truth: TruthCollector,
}

/// Starts a simulated cluster as `args` describe (tables created, workload running) with its
/// truth log collected in memory.
pub async fn start_sim_with(args: SimArgs) -> Sim {
    let sim = start_sim_paused_with(args).await;
    sim.handle.start_workload();
    sim
}

/// Like [`start_sim_with`], with the workload held back until `start_workload()`.
pub async fn start_sim_paused_with(args: SimArgs) -> Sim {
    let seed = args.seed;
    let truth = TruthCollector::new();
    let handle = SimBuilder::new(args)
        .truth_sink(Box::new(truth.clone()))
        .paused()
        .start(CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("sim start (seed {seed:?}): {e:#}"));
    Sim { handle, truth }
}

/// A simulated cluster with no workload, written to statement by statement: schema changes
/// and transactions the test scripts, each applied and delivered under the cluster's lock.
pub struct Scripted {
    pub run: Run,
}

/// Starts a cluster of `stores` stores without a workload; capture may start at `start_ts`.
pub async fn start_scripted(stores: usize, seed: u64) -> Scripted {
    let sim = start_sim_with(SimArgs {
        stores,
        workload: WorkloadKind::None,
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    })
    .await;
    let start_ts = Ts(sim.handle.cluster().tso().0);
    Scripted {
        run: Run {
            sim: sim.handle,
            truth: sim.truth,
            start_ts,
        },
    }
}

impl Scripted {
    /// Runs one DDL statement through the simulated TiDB.
    pub fn ddl(&self, ddl: Ddl) {
        let tidb = self.run.sim.tidb();
        self.run
            .sim
            .cluster()
            .apply(move |core| {
                let out = tidb
                    .lock()
                    .expect("tidb")
                    .execute_ddl(core, &ddl)
                    .expect("ddl");
                Ok(((), out.outputs))
            })
            .expect("ddl applied")
    }

    /// Runs one transaction: `statements` writes into it, then it commits.
    pub fn txn(&self, statements: impl FnOnce(&mut Txn<'_>)) {
        let tidb = self.run.sim.tidb();
        self.run
            .sim
            .cluster()
            .apply(move |core| {
                let mut t = tidb.lock().expect("tidb");
                let mut txn = t.begin(core);
                statements(&mut txn);
                Ok(((), txn.commit().expect("commit").outputs))
            })
            .expect("transaction applied")
    }
}

/// The app's configuration for `run`: small binlog files and sorter pieces, so that rotation
/// and multi-piece transactions happen.
pub fn app_config(run: &Run, dir: &Path) -> AppConfig {
    let mut cfg = AppConfig::new(
        vec![run.sim.cluster().pd_url()],
        "127.0.0.1:0".parse().expect("addr"),
        dir,
    );
    cfg.start_ts = Some(run.start_ts);
    cfg.max_binlog_size = 256 << 10;
    cfg.max_chunk_bytes = Some(64 << 10);
    cfg.progress_interval = Duration::from_secs(3600);
    cfg
}

/// Starts the app on `run` with its data in `dir`.
pub async fn start_app(run: &Run, dir: &Path) -> App {
    start_app_with(app_config(run, dir)).await
}

/// Starts the app with an explicit configuration.
pub async fn start_app_with(cfg: AppConfig) -> App {
    tokio::time::timeout(
        Duration::from_secs(60),
        App::start(cfg, CancellationToken::new()),
    )
    .await
    .expect("app start timed out")
    .expect("app start")
}

/// Truth-log transactions after `after` that reach the binlog (rows or DDL), DDL text
/// normalised as the binlog carries it.
pub fn truth_after(lines: &[String], after: Ts) -> Vec<Json> {
    lines.iter().filter_map(|l| truth_line(l, after)).collect()
}

/// A truth log line as [`truth_after`] keeps it, or `None` if it commits at or before `after`
/// or writes nothing.
pub fn truth_line(line: &str, after: Ts) -> Option<Json> {
    let mut v: Json = serde_json::from_str(line).expect("truth json");
    if let Some(q) = v.get("ddl").and_then(Json::as_str) {
        v["ddl"] = json!(normalize_ddl(q));
    }
    let commits_after = v["commit_ts"].as_u64().is_some_and(|c| c > after.0);
    let writes = v["rows"].as_array().is_some_and(|r| !r.is_empty()) || !v["ddl"].is_null();
    (commits_after && writes).then_some(v)
}

/// The largest commit ts in the truth log.
pub fn max_commit_ts(lines: &[String]) -> u64 {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok()?["commit_ts"].as_u64())
        .max()
        .unwrap_or(0)
}

/// Pauses the workload and waits until everything committed before the pause is durable:
/// the truth log's transactions that reach the binlog, in binlog order (GNO = index + 1).
pub async fn pause_and_settle(run: &Run, app: &App) -> Vec<Json> {
    run.sim.pause_workload();
    let deadline = Instant::now() + WAIT;
    loop {
        let lines = run.truth.lines();
        let last = max_commit_ts(&lines);
        let settled = lines.len() == run.truth.lines().len();
        if settled && app.checkpoint().borrow().0 >= last {
            return truth_after(&lines, run.start_ts);
        }
        assert!(
            Instant::now() < deadline,
            "the binlog never caught up with the pause"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Fails naming every statement the app could not answer (it did not parse, or it asks for a
/// statement or variable tibinlog does not implement): a peer sent something tibinlog lacks.
pub fn assert_all_answered(app: &App, tool: &str) {
    let missed = app.unanswered_statements();
    assert!(
        missed.is_empty(),
        "{tool}: statements tibinlog could not answer:\n{}",
        missed
            .iter()
            .map(|u| format!("  [{}] {} -> {} {}", u.user, u.statement, u.code, u.message))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Polls until `cond` holds or `WAIT` passes.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the app's durable checkpoint reaches `ts`.
pub async fn wait_checkpoint(app: &App, ts: u64) {
    let mut rx = app.checkpoint();
    tokio::time::timeout(WAIT, rx.wait_for(|c| c.0 >= ts))
        .await
        .expect("checkpoint reaches the last commit in time")
        .expect("checkpoint watch open");
}

/// Waits until the workload finished and everything it committed is in the binlog; returns the
/// truth transactions the binlog holds (those after the run's start ts).
pub async fn finish_workload(run: &Run, app: &App) -> Vec<Json> {
    tokio::time::timeout(WAIT, run.sim.workload_done())
        .await
        .expect("workload finishes");
    assert_eq!(run.sim.failure(), None, "the workload failed");
    let lines = run.truth.lines();
    wait_checkpoint(app, max_commit_ts(&lines)).await;
    truth_after(&lines, run.start_ts)
}

/// Connection options for `user` (empty password) at `addr`.
pub fn opts(addr: SocketAddr, user: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(Some(""))
        .prefer_socket(false)
        .into()
}

/// `Executed_Gtid_Set` of `SHOW MASTER STATUS`.
pub async fn master_gtids(addr: SocketAddr) -> Result<String, mysql_async::Error> {
    Ok(master_status(addr).await?.gtids)
}

/// `SHOW MASTER STATUS` of the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterStatus {
    pub file: String,
    pub position: u64,
    pub gtids: String,
}

/// Asks the app for `SHOW MASTER STATUS` as root.
pub async fn master_status(addr: SocketAddr) -> Result<MasterStatus, mysql_async::Error> {
    let mut conn = mysql_async::Conn::new(opts(addr, "root")).await?;
    let row: Option<mysql_async::Row> = conn.query_first("SHOW MASTER STATUS").await?;
    let _ = conn.disconnect().await;
    let row = row.expect("SHOW MASTER STATUS row");
    let file: String = row.get("File").expect("File column");
    let position: u64 = row.get("Position").expect("Position column");
    let gtids: Option<String> = row
        .get("Executed_Gtid_Set")
        .expect("Executed_Gtid_Set column");
    Ok(MasterStatus {
        file,
        position,
        gtids: gtids.unwrap_or_default(),
    })
}

/// `uuid:1-n` as MySQL prints it (empty for 0, `uuid:1` for 1).
pub fn dense_set(uuid: &str, n: usize) -> String {
    match n {
        0 => String::new(),
        1 => format!("{uuid}:1"),
        n => format!("{uuid}:1-{n}"),
    }
}

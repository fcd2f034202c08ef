//! The whole product in one process for end-to-end tests: the simulated cluster running its
//! seeded OLTP workload (every column type, DDL, faults) with a truth log, and `tibinlog`'s app
//! (changefeed → binlog store → MySQL server) on a loopback port.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use serde_json::{json, Value as Json};
use tibinlog::app::{App, AppConfig};
use tibinlog::model::Ts;
use tibinlog::mounter::ddl_sql::normalize_ddl;
use tibinlog::sim::cli::{SimArgs, SimBuilder, SimHandle};
use tibinlog::sim::tidb::TruthCollector;
use tokio_util::sync::CancellationToken;

/// Upper bound of any wait on the pipeline.
pub const WAIT: Duration = Duration::from_secs(240);

/// A running simulated cluster and the truth log of its workload.
pub struct Run {
    pub sim: SimHandle,
    pub truth: TruthCollector,
    /// TSO when the workload started: the app captures everything after it.
    pub start_ts: Ts,
}

/// A 3-store cluster running `txns` OLTP transactions as fast as it can, with faults injected.
pub async fn start_sim(seed: u64, txns: u64) -> Run {
    let truth = TruthCollector::new();
    let args = SimArgs {
        stores: 3,
        regions_per_table: 2,
        rate: 0.0,
        txns: Some(txns),
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        chaos_interval: Some(Duration::from_millis(150)),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    };
    let sim = SimBuilder::new(args)
        .truth_sink(Box::new(truth.clone()))
        .start(CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("sim start (seed {seed}): {e:#}"));
    let start_ts = Ts(sim.cluster().tso().0);
    Run {
        sim,
        truth,
        start_ts,
    }
}

/// The app's config for `run`, with small binlog files and sorter pieces so that rotation and
/// multi-piece transactions happen.
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
    tokio::time::timeout(
        Duration::from_secs(60),
        App::start(app_config(run, dir), CancellationToken::new()),
    )
    .await
    .expect("app start timed out")
    .expect("app start")
}

/// Truth-log transactions after `after` that reach the binlog (rows or DDL), DDL text
/// normalised as the binlog carries it.
pub fn truth_after(lines: &[String], after: Ts) -> Vec<Json> {
    lines
        .iter()
        .map(|l| {
            let mut v: Json = serde_json::from_str(l).expect("truth json");
            if let Some(q) = v.get("ddl").and_then(Json::as_str) {
                v["ddl"] = json!(normalize_ddl(q));
            }
            v
        })
        .filter(|v| v["commit_ts"].as_u64().is_some_and(|c| c > after.0))
        .filter(|v| v["rows"].as_array().is_some_and(|r| !r.is_empty()) || !v["ddl"].is_null())
        .collect()
}

/// The largest commit ts in the truth log.
pub fn max_commit_ts(lines: &[String]) -> u64 {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok()?["commit_ts"].as_u64())
        .max()
        .unwrap_or(0)
}

/// Polls until `cond` holds or `WAIT` passes.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the app's checkpoint reaches `ts` (everything up to it is in the binlog).
pub async fn wait_checkpoint(app: &App, ts: u64) {
    let mut rx = app.checkpoint();
    tokio::time::timeout(WAIT, rx.wait_for(|c| c.0 >= ts))
        .await
        .expect("checkpoint reaches the last commit in time")
        .expect("checkpoint watch open");
}

/// Waits for the workload to finish and the binlog to cover it; returns the truth-log
/// transactions the binlog must hold, in order (GNO i+1 for element i).
pub async fn finish_workload(run: &Run, app: &App) -> Vec<Json> {
    tokio::time::timeout(WAIT, run.sim.workload_done())
        .await
        .expect("workload finishes");
    let lines = run.truth.lines();
    wait_checkpoint(app, max_commit_ts(&lines)).await;
    truth_after(&lines, run.start_ts)
}

/// mysql_async options for `user` (empty password) at `addr`.
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
    let mut conn = mysql_async::Conn::new(opts(addr, "root")).await?;
    let row: Option<mysql_async::Row> = conn.query_first("SHOW MASTER STATUS").await?;
    let _ = conn.disconnect().await;
    let row = row.expect("SHOW MASTER STATUS row");
    let v: Option<String> = row
        .get("Executed_Gtid_Set")
        .expect("Executed_Gtid_Set column");
    Ok(v.unwrap_or_default())
}

/// `uuid:1-n` (MySQL's text of a dense GTID set).
pub fn dense_set(uuid: &str, n: usize) -> String {
    match n {
        0 => String::new(),
        1 => format!("{uuid}:1"),
        n => format!("{uuid}:1-{n}"),
    }
}

//! The product end to end in one process: the simulated cluster with its seeded workload (truth
//! log collected in memory) and the app serving its binlog; the SQL the tests ask the app and
//! the truth-log arithmetic they compare with.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use mysql_async::prelude::*;
use serde_json::{json, Value as Json};
use tibinlog::app::{App, AppConfig};
use tibinlog::model::Ts;
use tibinlog::mounter::ddl_sql::normalize_ddl;
use tibinlog::sim::cli::{SimArgs, SimBuilder, SimHandle};
use tibinlog::sim::tidb::TruthCollector;
use tokio_util::sync::CancellationToken;

/// A running simulated cluster and its truth log.
pub struct Sim {
    pub handle: SimHandle,
    pub truth: TruthCollector,
}

/// Starts the simulated cluster (tables created, workload running) with its truth log
/// collected in memory.
pub async fn start_sim(args: SimArgs) -> Sim {
    let seed = args.seed;
    let truth = TruthCollector::new();
    let handle = SimBuilder::new(args)
        .truth_sink(Box::new(truth.clone()))
        .start(CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("sim start (seed {seed:?}): {e:#}"));
    Sim { handle, truth }
}

/// Starts the app (changefeed, binlog store, server).
pub async fn start_app(cfg: AppConfig) -> App {
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

/// The highest commit ts in the truth log (0 when empty).
pub fn max_commit_ts(lines: &[String]) -> u64 {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok()?["commit_ts"].as_u64())
        .max()
        .unwrap_or(0)
}

/// Waits until the app's checkpoint reaches `ts` (everything up to it is in the binlog).
pub async fn wait_checkpoint(app: &App, ts: u64, wait: Duration) {
    let mut rx = app.checkpoint();
    tokio::time::timeout(wait, rx.wait_for(|c| c.0 >= ts))
        .await
        .expect("checkpoint reaches the last commit in time")
        .expect("checkpoint watch open");
}

/// Connection options for the app's SQL surface (no password).
pub fn sql_opts(addr: SocketAddr, user: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(Some(""))
        .prefer_socket(false)
        .into()
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
    let mut conn = mysql_async::Conn::new(sql_opts(addr, "root")).await?;
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

/// `uuid:1-n` as MySQL prints a dense GTID set.
pub fn dense_set(uuid: &str, n: usize) -> String {
    match n {
        0 => String::new(),
        1 => format!("{uuid}:1"),
        n => format!("{uuid}:1-{n}"),
    }
}

//! The whole product under a live workload for the tests of replicas and dump tools: the
//! simulated cluster's seeded workload (DDL included) → changefeed → binlog → server, with both
//! listeners (MySQL, and MariaDB-flavoured for MariaDB GTIDs), the truth log of everything the
//! binlog holds, and `mariadb-dump` taken of it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::Value as Json;
use tibinlog::app::{App, AppConfig};
use tibinlog::model::Ts;
use tibinlog::sim::cli::SimArgs;

use super::app::{
    dense_set, master_status, max_commit_ts, start_app_with as start_app, start_sim_paused_with,
    truth_after, wait_checkpoint, MasterStatus, Sim,
};

/// Upper bound of any wait on the pipeline or a peer.
pub const WAIT: Duration = Duration::from_secs(120);
/// Workload transactions per run.
pub const TXNS: u64 = 400;
/// Our server's `@@server_id` (AppConfig's default); a replica's must differ.
pub const MASTER_SERVER_ID: u32 = 1;

/// The workload seed of this run: `TIBINLOG_PEER_SEED`, else drawn from the clock. Printed, so
/// that a failure replays.
pub fn fresh_seed(test: &str) -> u64 {
    let seed = std::env::var("TIBINLOG_PEER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970");
            now.as_nanos() as u64 % 1_000_000_007
        });
    eprintln!("{test}: seed {seed} (TIBINLOG_PEER_SEED={seed} replays it)");
    seed
}

/// Warnings and errors of the app go to the test's output (shown when a test fails);
/// `RUST_LOG` sets another filter.
pub fn log_warnings() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// A finished workload and the app serving its whole binlog.
pub struct Demo {
    pub sim: Sim,
    pub app: App,
    _dir: tempfile::TempDir,
    /// Every truth-log transaction that reaches the binlog, in binlog order.
    pub truth: Vec<Json>,
    /// `SHOW MASTER STATUS` once everything is written.
    pub end: MasterStatus,
    pub seed: u64,
}

impl Demo {
    pub fn addr(&self) -> SocketAddr {
        self.app.local_addr()
    }

    pub async fn stop(self) {
        self.app.stop().await.expect("app stops cleanly");
        self.sim.handle.shutdown().await.expect("sim shutdown");
    }
}

/// Starts the simulated cluster (its workload with JSON columns when `json`) and the app, capturing from
/// just before the workload's `CREATE DATABASE`; `before_wait` runs once the app serves, with
/// the MySQL and the MariaDB-flavoured listen addresses (e.g. to start a replica while the
/// workload is still running).
pub async fn run_demo<F, Fut>(seed: u64, json: bool, before_wait: F) -> Demo
where
    F: FnOnce(SocketAddr, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    log_warnings();
    // The workload starts with the app, right before `before_wait` (a replica started there
    // streams the workload live), and is paced (4 s), so that it is still running when a replica
    // acts on it.
    let sim = start_sim_paused_with(SimArgs {
        stores: 2,
        regions_per_table: 2,
        rate: 100.0,
        txns: Some(TXNS),
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        progress_interval: Duration::from_secs(3600),
        no_json: !json,
        ..SimArgs::default()
    })
    .await;
    // The tables exist when the sim has started: the first truth line is their CREATE DATABASE.
    let lines = sim.truth.lines();
    let first: Json = serde_json::from_str(lines.first().expect("setup DDL in the truth log"))
        .expect("truth json");
    assert_eq!(
        first["ddl"].as_str(),
        Some("CREATE DATABASE `wl`"),
        "seed {seed}: the truth log starts with the workload's database"
    );
    let start_ts = Ts(first["start_ts"].as_u64().expect("start_ts") - 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = AppConfig::new(
        vec![sim.handle.cluster().pd_url()],
        "127.0.0.1:0".parse().expect("addr"),
        dir.path(),
    );
    cfg.start_ts = Some(start_ts);
    // Small files: the peers follow rotations.
    cfg.max_binlog_size = 256 << 10;
    cfg.progress_interval = Duration::from_secs(3600);
    // MariaDB replicas use GTIDs only with a master that greets as version 10 or more.
    cfg.mariadb_listen = Some("127.0.0.1:0".parse().expect("addr"));
    assert_eq!(cfg.server_id, MASTER_SERVER_ID);
    let app = start_app(cfg).await;
    let mariadb_addr = app.mariadb_addr().expect("MariaDB-flavoured listener");
    sim.handle.start_workload();
    before_wait(app.local_addr(), mariadb_addr).await;

    tokio::time::timeout(WAIT, sim.handle.workload_done())
        .await
        .expect("workload finishes");
    assert_eq!(
        sim.handle.failure(),
        None,
        "seed {seed}: the workload failed"
    );
    let lines = sim.truth.lines();
    wait_checkpoint(&app, max_commit_ts(&lines)).await;
    let truth = truth_after(&lines, start_ts);
    let end = master_status(app.local_addr())
        .await
        .expect("SHOW MASTER STATUS");
    assert_eq!(
        end.gtids,
        dense_set(&app.server_uuid().to_string(), truth.len()),
        "seed {seed}: the binlog holds every truth transaction"
    );
    assert!(
        app.files().list().len() > 1,
        "seed {seed}: the binlog rotates"
    );
    Demo {
        sim,
        app,
        _dir: dir,
        truth,
        end,
        seed,
    }
}

/// `mariadb-dump --single-transaction --master-data=2 [extra] --databases wl` from `addr`.
pub fn dump(tool: &Path, addr: SocketAddr, extra: &[&str]) -> Vec<u8> {
    dump_database(tool, addr, "wl", extra)
}

/// `mariadb-dump --single-transaction --master-data=2` of database `db` of the server at
/// `addr`: the dump's bytes.
pub fn dump_database(tool: &Path, addr: SocketAddr, db: &str, extra: &[&str]) -> Vec<u8> {
    let mut args = vec![
        "--no-defaults".to_owned(),
        "--protocol=TCP".to_owned(),
        "-h127.0.0.1".to_owned(),
        format!("-P{}", addr.port()),
        "-uroot".to_owned(),
        "--single-transaction".to_owned(),
        "--master-data=2".to_owned(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args.extend(["--databases".to_owned(), db.to_owned()]);
    let out = std::process::Command::new(tool)
        .args(&args)
        .output()
        .expect("run mariadb-dump");
    assert!(
        out.status.success(),
        "mariadb-dump {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The value of `key='…'` or `key=…` in the dump's commented coordinates.
pub fn dump_coordinate(dump: &[u8], key: &str) -> Option<String> {
    let dump = String::from_utf8_lossy(dump);
    let line = dump
        .lines()
        .find(|l| l.starts_with("-- ") && l.contains(key))?;
    let (_, rest) = line.split_once(&format!("{key}="))?;
    let v = rest.trim_start_matches('\'');
    let end = v.find(['\'', ',', ';']).unwrap_or(v.len());
    Some(v[..end].to_owned())
}

/// Loads `dump` with a command-line client (`mariadb`, connected to the replica).
pub fn load(mut client: std::process::Command, dump: &[u8]) {
    use std::io::Write;
    let mut child = client
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run mariadb");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(dump)
        .expect("write the dump");
    let out = child.wait_with_output().expect("mariadb");
    assert!(
        out.status.success(),
        "loading the dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

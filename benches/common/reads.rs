//! What the SQL read benchmarks share: a simulated cluster and the app on it, DDL into the
//! simulator, streaming reads through `mysql_async`, the resident set and its peak.

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use tibinlog::app::{App, AppConfig};
use tibinlog::model::Ts;
use tibinlog::sim::cli::{SimArgs, SimBuilder, SimHandle, WorkloadKind};
use tibinlog::sim::server::SimCluster;
use tibinlog::sim::tidb::{Ddl, TableDef};
use tokio_util::sync::CancellationToken;

use super::util;

/// A simulated cluster of three stores without a workload.
pub async fn start_sim() -> SimHandle {
    SimBuilder::new(SimArgs {
        stores: 3,
        workload: WorkloadKind::None,
        seed: Some(1),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    })
    .start(CancellationToken::new())
    .await
    .expect("sim")
}

pub fn ddl(sim: &SimHandle, ddl: Ddl) {
    let tidb = sim.tidb();
    sim.cluster()
        .apply(|core| {
            let mut t = tidb.lock().expect("tidb");
            let out = t.execute_ddl(core, &ddl).expect("ddl");
            Ok(((), out.outputs))
        })
        .expect("ddl");
}

pub fn create(sim: &SimHandle, db: &str, table: TableDef) {
    ddl(
        sim,
        Ddl::CreateTable {
            db: db.into(),
            table,
        },
    );
}

/// The app on `sim`, started after everything there is (its catalog holds every table), with
/// a snapshot point to read at.
pub async fn start_app(cluster: &SimCluster, dir: &std::path::Path) -> App {
    let mut cfg = AppConfig::new(
        vec![cluster.pd_url()],
        "127.0.0.1:0".parse().expect("addr"),
        dir,
    );
    let start = Ts(cluster.tso().0);
    cfg.start_ts = Some(start);
    cfg.progress_interval = Duration::from_secs(3600);
    let app = App::start(cfg, CancellationToken::new())
        .await
        .expect("app start");
    let mut cp = app.checkpoint();
    tokio::time::timeout(Duration::from_secs(120), cp.wait_for(|c| c.0 > start.0))
        .await
        .expect("a checkpoint after the start")
        .expect("app running");
    app
}

/// Resident set of this process, bytes.
pub fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Samples the resident set every 5 ms until stopped; the peak.
pub struct RssPeak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssPeak {
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss()));
        let thread = {
            let (stop, peak) = (stop.clone(), peak.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        RssPeak {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// One streaming read of `sql` on `conn`: (rows, value bytes).
pub async fn stream_rows(conn: &mut mysql_async::Conn, sql: &str) -> (u64, u64) {
    use futures_util::StreamExt;
    let mut result = conn.query_iter(sql).await.expect("query");
    let mut rows = 0u64;
    let mut bytes = 0u64;
    let mut stream = result
        .stream::<mysql_async::Row>()
        .await
        .expect("stream")
        .expect("a result set");
    while let Some(row) = stream.next().await {
        let row = row.expect("row");
        rows += 1;
        for i in 0..row.len() {
            if let Some(mysql_async::Value::Bytes(b)) = row.as_ref(i) {
                bytes += b.len() as u64;
            }
        }
    }
    (rows, bytes)
}

/// One streaming read of `sql` on a new connection: (rows, value bytes, seconds).
pub async fn read_all(port: u16, user: &str, sql: &str) -> (u64, u64, f64) {
    let mut conn = mysql_async::Conn::new(util::mysql_opts(port, user))
        .await
        .expect("connect");
    let began = Instant::now();
    let (rows, bytes) = stream_rows(&mut conn, sql).await;
    let secs = began.elapsed().as_secs_f64();
    conn.disconnect().await.expect("disconnect");
    (rows, bytes, secs)
}

/// Inserts `rows` rows made by `row` (from 1 up) into `db`.`table` of the simulator, in
/// transactions of `per_txn` rows.
pub fn load(
    sim: &SimHandle,
    db: &str,
    table: &str,
    rows: u64,
    per_txn: u64,
    mut row: impl FnMut(u64) -> Vec<tibinlog_protocol::value::Value>,
) {
    let cluster = sim.cluster().clone();
    let tidb = sim.tidb();
    let mut i = 0u64;
    while i < rows {
        let n = per_txn.min(rows - i);
        cluster
            .apply(|core| {
                let mut t = tidb.lock().expect("tidb");
                let mut txn = t.begin(core);
                for _ in 0..n {
                    i += 1;
                    txn.insert(db, table, &row(i)).expect("insert");
                }
                let c = txn.commit().expect("commit");
                Ok(((), c.outputs))
            })
            .expect("load");
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

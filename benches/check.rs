//! `tibinlog check` of a large table against an equal copy. Prints figures; asserts no time
//! limit.
//!
//! A narrow table (BIGINT primary key, INT, VARCHAR(32)) of `CHECK_ROWS` (10,000,000) rows is
//! written into the simulated cluster and the app started on it; the same rows are loaded into
//! a throwaway MariaDB 10.11 (InnoDB), which is not a replica, so the check names the position
//! it reflects (`--at` the newest snapshot point). Printed: one full streamed `SELECT *` of the
//! table through tibinlog, the check (chunks of `CHECK_CHUNK_ROWS`, 10,000, `CHECK_THREADS`, 4,
//! at once), their ratio, and the peak growth of this process's resident set during the check
//! (the simulator, the server and the check share the process; the data is loaded before the
//! baseline).
//!
//! `cargo bench --bench check`.
//!
//! Measured (2 cores; simulator, server and check in one process, MariaDB beside it),
//! 10,000,000 rows: `SELECT *` 4.6 s; the check 38.2 s (1,001 chunks of 10,000 rows, 4 at
//! once; 262,004 rows/s), 8.26× the `SELECT *`; RSS +15.6 MB during the check. Each row is read
//! twice on the source (once for its chunk's end key, once for the chunk's checksum, an MD5
//! over the row's text per row in the SQL engine) and once on MariaDB. 1,000,000 rows: 3.8 s,
//! 5.85× a 0.6 s `SELECT *`, RSS +11.8 MB.

use std::time::Instant;

use tibinlog::check::CheckArgs;

#[path = "common/narrow.rs"]
mod narrow;
#[path = "common/reads.rs"]
mod reads;
#[path = "common/util.rs"]
mod util;
use narrow::{mariadb_with, narrow_row, narrow_table};
use reads::{create, read_all, rss, start_app, start_sim, RssPeak};
use util::{env_num, mb};

/// Rows per simulated transaction while loading.
const LOAD_TXN_ROWS: u64 = 10_000;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let rows: i64 = env_num("CHECK_ROWS", 10_000_000);
    println!("== tibinlog check of a {rows}-row narrow table against an equal MariaDB");
    let Some((_maria, port)) = mariadb_with(rows, 1_073_741_824) else {
        println!("  skipped: mariadbd is not installed (run scripts/install-deps.sh)");
        return;
    };
    let sim = start_sim().await;
    create(&sim, "test", narrow_table());
    let began = Instant::now();
    reads::load(
        &sim,
        "test",
        "narrow",
        rows as u64,
        LOAD_TXN_ROWS,
        narrow_row,
    );
    println!(
        "  simulated cluster loaded {rows} rows in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let app = start_app(sim.cluster(), dir.path()).await;
    let ours = app.local_addr();

    let (n, _, select) = read_all(ours.port(), "root", "SELECT * FROM test.narrow").await;
    assert_eq!(n, rows as u64, "SELECT * read every row");
    println!("  SELECT * through tibinlog: {select:.1} s");

    let status = {
        use mysql_async::prelude::*;
        let mut conn = mysql_async::Conn::new(util::mysql_opts(ours.port(), "root"))
            .await
            .expect("connect");
        let row: mysql_async::Row = conn
            .query_first("SHOW MASTER STATUS")
            .await
            .expect("status")
            .expect("a row");
        let (file, pos): (String, u64) = (row.get(0).expect("file"), row.get(1).expect("pos"));
        format!("{file}:{pos}")
    };
    let args = CheckArgs {
        source: ours.to_string(),
        source_user: "root".into(),
        source_password: String::new(),
        target: format!("127.0.0.1:{port}"),
        target_user: "bench".into(),
        target_password: String::new(),
        databases: vec!["test".into()],
        tables: Vec::new(),
        chunk_rows: env_num("CHECK_CHUNK_ROWS", 10_000),
        threads: env_num("CHECK_THREADS", 4),
        at: Some(status),
        repair: false,
        apply: false,
        json: None,
        max_listed: 100,
        status_addr: None,
    };
    let base = rss();
    let peak = RssPeak::start();
    let began = Instant::now();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut progress = std::io::stderr();
    let watch = tibinlog::check::run::Watch::new(
        &mut progress,
        tibinlog::check::metrics::CheckMetrics::default(),
    );
    let report = tibinlog::check::run::check(&args, watch, &stop)
        .await
        .expect("check");
    let secs = began.elapsed().as_secs_f64();
    let growth = peak.finish().saturating_sub(base);
    assert!(report.equal, "the copy is equal");
    assert_eq!(report.rows_source, rows as u64);
    println!(
        "  check: {secs:.1} s ({} chunks, {:.0} rows/s), {:.2}× the SELECT *; RSS +{:.1} MB",
        report.chunks,
        rows as f64 / secs,
        secs / select,
        mb(growth)
    );
    app.stop().await.expect("app stops");
}

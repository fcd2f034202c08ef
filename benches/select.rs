//! Benchmarks of the SQL read side. Prints figures; asserts no time limit.
//!
//! Sections (`SELECT_BENCH=scan,catalog`, both by default):
//!
//! * `scan`: a narrow table (BIGINT primary key, INT, VARCHAR(32)) of `SELECT_ROWS`
//!   (1,000,000) rows written into the simulated cluster, then the app started on it; one
//!   `mysql_async` client reads `SELECT * FROM test.narrow` as a stream (text protocol), which
//!   the server answers from a KvScan at the snapshot point. The same rows are loaded into a
//!   throwaway MariaDB 10.11 (InnoDB) and read the same way by the same client. Prints rows/s
//!   and MB/s (bytes of the values received) of both, the ratio, and the peak growth of this
//!   process's resident set during our read (the app, the simulator and the client share the
//!   process; the simulator's data is loaded before the baseline). Rounds alternate
//!   (`SELECT_ROUNDS`, 3) and medians are printed. CPU per row is printed too, a figure a busy
//!   machine disturbs less than rows/s: ours for the whole process and split by thread into
//!   the simulated TiKV, the server and the client (each on a runtime of its own), MariaDB's
//!   for mariadbd plus the same client.
//! * `catalog`: `CATALOG_TABLES` (10,000) tables of 8 columns created in the simulated
//!   cluster before the app starts; times `SELECT … FROM information_schema.COLUMNS` over all
//!   of them (the first answer builds the SQL catalog, the second reuses it) and one table's
//!   `SHOW FULL COLUMNS`.
//!
//! `cargo bench --bench select` (each figure is one run over a large volume).

use std::net::SocketAddr;
use std::time::Instant;

use mysql_async::prelude::*;
use tibinlog::sim::tidb::types as ty;
use tibinlog::sim::tidb::{ColumnDef, Ddl, TableDef};
use tibinlog::tidb::schema::mysql::{TYPE_LONG, TYPE_LONGLONG};

#[path = "common/narrow.rs"]
mod narrow;
#[path = "common/reads.rs"]
mod reads;
#[path = "common/util.rs"]
mod util;
use narrow::{mariadb_with, narrow_row, narrow_table};
use reads::{create, ddl, median, read_all, rss, start_app, start_sim, RssPeak};
use util::{env_num, mb};

/// Rows per simulated transaction while loading.
const LOAD_TXN_ROWS: u64 = 10_000;

/// CPU seconds (user + system, every thread) process `pid` has used ("self" for this one),
/// from `/proc/<pid>/stat` in the kernel's fixed 100 Hz user clock ticks.
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse().ok())
        .collect();
    f.iter().sum::<u64>() as f64 / 100.0
}

/// Runtimes of their own for the simulated TiKV and for the server, so that the CPU each uses
/// can be told apart by thread name from the client's (the bench's own runtime).
struct Runtimes {
    sim: tokio::runtime::Runtime,
    app: tokio::runtime::Runtime,
}

const SIM_THREADS: &str = "sim-tikv";
const CLIENT_THREADS: &str = "bench-client";

fn runtime(name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("runtime")
}

/// CPU seconds of this process's threads: (simulated TiKV, client, everything else = the
/// server). Threads inherit their creator's name, so what the simulator or the server start
/// is counted with them; the client is the bench's main thread and runtime.
fn cpu_by_part() -> (f64, f64, f64) {
    let total = cpu_secs("self");
    let (mut sim, mut client) = (0.0, 0.0);
    let main = std::process::id().to_string();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            let tid = t.file_name().to_string_lossy().into_owned();
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            let secs = cpu_secs(&format!("self/task/{tid}"));
            if comm.starts_with(SIM_THREADS) {
                sim += secs;
            } else if comm.starts_with(CLIENT_THREADS) || tid == main {
                client += secs;
            }
        }
    }
    (sim, client, total - sim - client)
}

async fn scan(rts: &Runtimes) {
    let rows: i64 = env_num("SELECT_ROWS", 1_000_000);
    let rounds: usize = env_num("SELECT_ROUNDS", 3);
    println!("== SELECT * of a {rows}-row narrow table, streamed to one mysql_async client");
    let sim = rts
        .sim
        .spawn(start_sim())
        .await
        .expect("simulator start task");
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
    let app = {
        let (cluster, dir) = (sim.cluster().clone(), dir.path().to_owned());
        rts.app
            .spawn(async move { start_app(&cluster, &dir).await })
            .await
            .expect("app start task")
    };
    let ours: SocketAddr = app.local_addr();
    let maria = mariadb_with(rows, 536_870_912);
    if maria.is_none() {
        println!("  MariaDB side skipped: mariadbd is not installed (run scripts/install-deps.sh)");
    }
    let sql = "SELECT * FROM test.narrow";
    let (mut ours_s, mut theirs_s, mut growth) = (Vec::new(), Vec::new(), Vec::new());
    // CPU seconds per read: ours is this whole process (simulated TiKV, server and client),
    // MariaDB's is mariadbd plus this process (the same client).
    let (mut ours_cpu, mut theirs_cpu) = (Vec::new(), Vec::new());
    let mut parts = Vec::new();
    let mut bytes = (0, 0);
    for round in 0..rounds {
        let base = rss();
        let peak = RssPeak::start();
        let cpu = cpu_secs("self");
        let part = cpu_by_part();
        let (n, b, s) = read_all(ours.port(), "root", sql).await;
        ours_cpu.push(cpu_secs("self") - cpu);
        let after = cpu_by_part();
        parts.push((after.0 - part.0, after.1 - part.1, after.2 - part.2));
        let top = peak.finish();
        assert_eq!(n, rows as u64, "our server sent every row");
        growth.push(top.saturating_sub(base) as f64);
        ours_s.push(s);
        bytes.0 = b;
        if let Some((db, port)) = &maria {
            let server = db.pid().to_string();
            let cpu = cpu_secs("self") + cpu_secs(&server);
            let (n, b, s) = read_all(*port, "bench", sql).await;
            theirs_cpu.push(cpu_secs("self") + cpu_secs(&server) - cpu);
            assert_eq!(n, rows as u64, "MariaDB sent every row");
            theirs_s.push(s);
            bytes.1 = b;
        }
        println!(
            "  round {}: ours {:.2} s (RSS +{:.1} MB){}",
            round + 1,
            ours_s[round],
            mb(growth[round] as u64),
            theirs_s
                .get(round)
                .map(|s| format!(", MariaDB {s:.2} s"))
                .unwrap_or_default()
        );
    }
    let ours_t = median(ours_s);
    let ours_c = median(ours_cpu);
    println!(
        "  tibinlog: {:.0} rows/s, {:.1} MB/s of values; {:.2} µs of CPU per row (simulated TiKV, server and client); peak RSS growth during a read {:.1} MB (the largest of {rounds}: the first, which warms the allocator; times are medians)",
        rows as f64 / ours_t,
        mb(bytes.0) / ours_t,
        ours_c * 1e6 / rows as f64,
        mb(growth.iter().copied().fold(0.0, f64::max) as u64)
    );
    let per_row =
        |f: fn(&(f64, f64, f64)) -> f64| median(parts.iter().map(f).collect()) * 1e6 / rows as f64;
    println!(
        "    of which the simulated TiKV {:.2} µs, the server {:.2} µs, the client {:.2} µs",
        per_row(|p| p.0),
        per_row(|p| p.2),
        per_row(|p| p.1)
    );
    if !theirs_s.is_empty() {
        let theirs_t = median(theirs_s);
        let theirs_c = median(theirs_cpu);
        println!(
            "  MariaDB:  {:.0} rows/s, {:.1} MB/s of values; {:.2} µs of CPU per row (mariadbd and client)",
            rows as f64 / theirs_t,
            mb(bytes.1) / theirs_t,
            theirs_c * 1e6 / rows as f64
        );
        println!(
            "  ratio tibinlog / MariaDB: {:.2}x rows/s, {:.2}x CPU per row",
            theirs_t / ours_t,
            ours_c / theirs_c
        );
    }
    app.stop().await.expect("app stop");
    sim.shutdown().await.expect("sim shutdown");
}

async fn catalog() {
    let tables: usize = env_num("CATALOG_TABLES", 10_000);
    println!("== information_schema.COLUMNS over {tables} tables of 8 columns");
    let sim = start_sim().await;
    let began = Instant::now();
    for d in 0..10 {
        ddl(
            &sim,
            Ddl::CreateDatabase {
                name: format!("db{d}"),
            },
        );
    }
    for i in 0..tables {
        let mut columns = vec![ColumnDef::new("id", ty::int(TYPE_LONGLONG, false)).not_null()];
        for c in 1..8 {
            columns.push(if c % 2 == 0 {
                ColumnDef::new(&format!("c{c}"), ty::int(TYPE_LONG, false))
            } else {
                ColumnDef::new(&format!("c{c}"), ty::varchar(64))
            });
        }
        create(
            &sim,
            &format!("db{}", i % 10),
            TableDef {
                name: format!("t{i}"),
                columns,
                primary_key: vec!["id".into()],
                clustered: true,
                indexes: Vec::new(),
                partition: None,
                foreign_keys: Vec::new(),
                checks: Vec::new(),
            },
        );
    }
    println!(
        "  created {tables} tables in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let began = Instant::now();
    let app = start_app(sim.cluster(), dir.path()).await;
    println!(
        "  app started on them in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    let port = app.local_addr().port();
    let sql = "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, \
               COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY FROM information_schema.COLUMNS";
    for what in ["first (builds the SQL catalog)", "second"] {
        let (n, _, s) = read_all(port, "root", sql).await;
        assert!(n >= tables as u64 * 8, "a row per column ({n})");
        println!("  {what}: {n} rows in {s:.3} s");
    }
    let mut conn = mysql_async::Conn::new(util::mysql_opts(port, "root"))
        .await
        .expect("connect");
    let began = Instant::now();
    let cols: Vec<mysql_async::Row> = conn
        .query("SHOW FULL COLUMNS FROM db7.t4567")
        .await
        .expect("show columns");
    println!(
        "  SHOW FULL COLUMNS of one table: {} rows in {:.3} s",
        cols.len(),
        began.elapsed().as_secs_f64()
    );
    conn.disconnect().await.expect("disconnect");
    app.stop().await.expect("app stop");
    sim.shutdown().await.expect("sim shutdown");
}

fn main() {
    let sections = std::env::var("SELECT_BENCH").unwrap_or_else(|_| "scan,catalog".into());
    let on = |s: &str| sections.split(',').any(|x| x.trim() == s);
    let rt = runtime(CLIENT_THREADS);
    if on("scan") {
        let rts = Runtimes {
            sim: runtime(SIM_THREADS),
            app: runtime("tibinlog"),
        };
        rt.block_on(scan(&rts));
        rts.sim.shutdown_background();
        rts.app.shutdown_background();
    }
    if on("catalog") {
        rt.block_on(catalog());
    }
}

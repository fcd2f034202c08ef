//! Keyed reads of a large table, as CDC tools make them: Debezium's incremental snapshot opens
//! with `SELECT … ORDER BY pk DESC LIMIT 1`; Flink's splitter walks a VARCHAR key in chunks of
//! 8,096 rows (`SELECT MAX(pk) FROM (SELECT pk … WHERE pk >= ? ORDER BY pk LIMIT 8096) AS T`)
//! and reads each chunk (`WHERE pk >= ? AND NOT (pk = ?) AND pk <= ?`). Prints figures;
//! asserts no time limit.
//!
//! A table of `KEYED_ROWS` (10,000,000) rows keyed by a clustered VARCHAR(32) primary key in
//! a random order of insertion, and the same rows under a non-clustered key (an index
//! lookup per read) when `KEYED_NONCLUSTERED=1`. For each: the `DESC LIMIT 1` latency (median
//! of 9), one full streamed `SELECT *`, and the whole table read in Flink's chunks (splitting
//! included), with the ratio of the two, and the peak growth of the resident set of this
//! process (simulator, server and client) during each.
//!
//! `cargo bench --bench keyed`.
//!
//! Measured (2 cores; simulator, server and client in one process), 10,000,000 rows:
//! - clustered: `DESC LIMIT 1` 0.9 ms; full scan 7.7 s (RSS +7.3 MB); Flink's chunks 24.1 s,
//!   3.12× the full scan (RSS +1.9 MB; per chunk: bound 8.3 ms, next start 1.1 ms, read
//!   10.1 ms). Every row is read twice (once to find its chunk's end, once in the chunk), by
//!   three statements per chunk;
//! - non-clustered (index lookups): `DESC LIMIT 1` 1.0 ms; full scan 7.3 s; chunks 130.0 s,
//!   17.7× (per chunk: bound 49.6 ms, read 54.1 ms: the bound query fetches the rows of 8,096
//!   index entries although the index holds the key).

use std::time::Instant;

use mysql_async::prelude::*;
use tibinlog::sim::tidb::types as ty;
use tibinlog::sim::tidb::{ColumnDef, TableDef};
use tibinlog::tidb::schema::mysql::TYPE_LONGLONG;
use tibinlog_protocol::value::Value;

#[path = "common/reads.rs"]
mod reads;
#[path = "common/util.rs"]
mod util;
use reads::{create, median, read_all, rss, start_app, start_sim, RssPeak};
use util::{env_num, mb};

/// Rows per simulated transaction while loading.
const LOAD_TXN_ROWS: u64 = 10_000;
/// Flink's default `scan.incremental.snapshot.chunk.size`.
const CHUNK: u64 = 8_096;

fn table(name: &str, clustered: bool) -> TableDef {
    TableDef {
        name: name.into(),
        columns: vec![
            ColumnDef::new("code", ty::varchar(32)).not_null(),
            ColumnDef::new("n", ty::int(TYPE_LONGLONG, false)),
            ColumnDef::new("s", ty::varchar(32)),
        ],
        primary_key: vec!["code".into()],
        clustered,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// The key of row `i`: 16 hex digits of a bijective mix of `i`, so insertion order is random
/// in key order.
fn code(i: u64) -> String {
    let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z ^= z >> 29;
    format!("k{z:016x}")
}

fn load(sim: &tibinlog::sim::cli::SimHandle, name: &str, rows: u64) {
    reads::load(sim, "test", name, rows, LOAD_TXN_ROWS, |i| {
        vec![
            Value::Bytes(code(i).into_bytes()),
            Value::Int(i as i64),
            Value::Bytes(b"some narrow name".to_vec()),
        ]
    });
}

/// Median latency of `sql` (one row expected), seconds.
async fn latency(conn: &mut mysql_async::Conn, sql: &str) -> f64 {
    let mut times = Vec::new();
    for _ in 0..9 {
        let began = Instant::now();
        let row: Option<mysql_async::Row> = conn.query_first(sql).await.expect("query");
        times.push(began.elapsed().as_secs_f64());
        assert!(row.is_some(), "{sql} gives a row");
    }
    median(times)
}

/// Seconds spent in each of a chunk's three queries.
#[derive(Default)]
struct Split {
    end: f64,
    next: f64,
    read: f64,
    chunks: u64,
}

/// Reads `t` in Flink's chunks, splitting as it goes: (rows, seconds, where they went).
async fn chunked(conn: &mut mysql_async::Conn, t: &str) -> (u64, f64, Split) {
    let mut split = Split::default();
    let began = Instant::now();
    let first: Option<String> = conn
        .query_first(format!("SELECT MIN(`code`) FROM `test`.`{t}`"))
        .await
        .expect("min");
    let mut start = first.expect("a first key");
    let mut rows = 0u64;
    loop {
        split.chunks += 1;
        let at = Instant::now();
        let end: Option<String> = conn
            .query_first(format!(
                "SELECT MAX(`code`) FROM (SELECT `code` FROM `test`.`{t}` WHERE `code` >= \
                 '{start}' ORDER BY `code` ASC LIMIT {CHUNK}) AS T"
            ))
            .await
            .expect("chunk end");
        let end = end.expect("a chunk end");
        split.end += at.elapsed().as_secs_f64();
        let at = Instant::now();
        let next: Option<Option<String>> = conn
            .query_first(format!(
                "SELECT MIN(`code`) FROM `test`.`{t}` WHERE `code` > '{end}'"
            ))
            .await
            .expect("next start");
        let next = next.flatten();
        split.next += at.elapsed().as_secs_f64();
        let at = Instant::now();
        let sql = match &next {
            Some(_) => format!(
                "SELECT * FROM `test`.`{t}` WHERE `code` >= '{start}' AND NOT (`code` = \
                 '{end}') AND `code` <= '{end}'"
            ),
            None => format!("SELECT * FROM `test`.`{t}` WHERE `code` >= '{start}'"),
        };
        // Streamed and counted, as the full scan is read.
        rows += reads::stream_rows(conn, &sql).await.0;
        split.read += at.elapsed().as_secs_f64();
        match next {
            // The chunk end is the next chunk's first row.
            Some(_) => start = end,
            None => break,
        }
    }
    (rows, began.elapsed().as_secs_f64(), split)
}

async fn measure(port: u16, t: &str, rows: u64) {
    let mut conn = mysql_async::Conn::new(util::mysql_opts(port, "root"))
        .await
        .expect("connect");
    let desc = latency(
        &mut conn,
        &format!("SELECT * FROM `test`.`{t}` ORDER BY `code` DESC LIMIT 1"),
    )
    .await;
    println!(
        "  {t}: ORDER BY code DESC LIMIT 1: {:.1} ms (median of 9)",
        desc * 1e3
    );
    let base = rss();
    let peak = RssPeak::start();
    let (n, _, full) = read_all(port, "root", &format!("SELECT * FROM `test`.`{t}`")).await;
    let full_growth = peak.finish().saturating_sub(base);
    assert_eq!(n, rows, "the full scan reads every row");
    let base = rss();
    let peak = RssPeak::start();
    let (n, split, parts) = chunked(&mut conn, t).await;
    let chunk_growth = peak.finish().saturating_sub(base);
    assert_eq!(n, rows, "the chunks cover every row once");
    println!(
        "  {t}: full scan {full:.1} s (RSS +{:.1} MB); in {CHUNK}-row chunks {split:.1} s \
         (RSS +{:.1} MB): {:.2}x the full scan",
        mb(full_growth),
        mb(chunk_growth),
        split / full
    );
    let per = |s: f64| s * 1e3 / parts.chunks as f64;
    println!(
        "    per chunk ({} chunks): chunk end {:.1} ms, next start {:.1} ms, chunk read {:.1} ms",
        parts.chunks,
        per(parts.end),
        per(parts.next),
        per(parts.read)
    );
    conn.disconnect().await.expect("disconnect");
}

fn main() {
    let rows: u64 = env_num("KEYED_ROWS", 10_000_000);
    let nonclustered = env_num("KEYED_NONCLUSTERED", 0u8) == 1;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        println!("== keyed reads of a {rows}-row table with a VARCHAR(32) primary key");
        let sim = start_sim().await;
        let mut tables = vec![("clustered", true)];
        if nonclustered {
            tables.push(("nonclustered", false));
        }
        for &(name, clustered) in &tables {
            create(&sim, "test", table(name, clustered));
            let began = Instant::now();
            load(&sim, name, rows);
            println!("  {name}: loaded in {:.1} s", began.elapsed().as_secs_f64());
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let app = start_app(sim.cluster(), dir.path()).await;
        for &(name, _) in &tables {
            measure(app.local_addr().port(), name, rows).await;
        }
        app.stop().await.expect("app stop");
        sim.shutdown().await.expect("sim shutdown");
    });
}

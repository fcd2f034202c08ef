//! Capture end to end: rows per second from TiKV change streams to typed transactions in binlog
//! order (puller → matcher → frontier → RocksDB sorter → mounter), over real gRPC against the
//! simulated cluster.
//!
//! The event stream is pre-built: `ROWS` narrow rows (BIGINT pk, INT, VARCHAR(32)) are
//! committed in transactions of `TXN_ROWS` across `REGIONS` regions spread over 3 stores
//! before capture starts. The changefeed then starts at a ts below them, so the stores replay
//! everything as incremental scans, which is the stream a restarted or lagging capture sees.
//! The clock runs from `Changefeed::start` until the changefeed yields a resolved ts at or
//! above the last commit.
//!
//! `cargo bench --bench capture` (one measured run per size; not criterion: each run moves
//! hundreds of megabytes through a cluster, and the figure is a throughput, printed). Each size
//! runs in plain gRPC and with PD and TiKV serving mutual TLS (`CAPTURE_BENCH_TLS=plain`,
//! `tls` or `both`, the default), and the ratio of the two is printed.
//!
//! `CAPTURE_BENCH_SHAPE=wide` writes wide rows instead: a BIGINT key and 19 VARCHAR(128)
//! columns of 106 bytes each, about 2 KiB of row value. `CAPTURE_BENCH_SINK=binlog` runs the
//! whole server instead of the changefeed alone: rows go on into binlog files, each group
//! commit fsynced, and the clock stops when the durable checkpoint reaches the last commit.
//! `CAPTURE_BENCH_SINK=process` does the same with the server as a child process (`tibinlog
//! server --start-ts`, default settings; the clock stops when its status API reports the
//! checkpoint at the last commit), so that its own peak RSS is printed apart from the
//! simulator's data.
//! Besides rows/s, each run prints MiB/s of column values (8 bytes per integer, a string's
//! length) and the process's peak RSS (`VmHWM`) before capture starts (the simulated cluster holds
//! the rows in memory) and at the end.

use std::time::{Duration, Instant};

#[path = "common/child.rs"]
mod child;
#[path = "common/util.rs"]
mod util;

use tibinlog::changefeed::{ChangeEvent, Changefeed, ChangefeedConfig};
use tibinlog::model::Ts;
use tibinlog::mounter::TableFilter;
use tibinlog::sim::cli::{SimArgs, SimBuilder, WorkloadKind};
use tibinlog::sim::tidb::types as ty;
use tibinlog::sim::tidb::{ColumnDef, Ddl, TableDef};
use tibinlog::tidb::key::{record_key, Handle};
use tibinlog::tidb::schema::mysql;
use tibinlog_protocol::value::Value;
use tokio_util::sync::CancellationToken;

const TXN_ROWS: usize = 100;
const REGIONS: usize = 8;
/// Wide rows: string columns besides the key, and the bytes of each.
const WIDE_COLUMNS: usize = 19;
const WIDE_BYTES: usize = 106;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Narrow,
    Wide,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Sink {
    /// The changefeed's typed transactions.
    Changefeed,
    /// The server's binlog files, fsynced.
    Binlog,
    /// The same, the server in a child process.
    Process,
}

fn table(shape: Shape) -> TableDef {
    let mut columns = vec![ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null()];
    match shape {
        Shape::Narrow => {
            columns.push(ColumnDef::new("n", ty::int(mysql::TYPE_LONG, false)));
            columns.push(ColumnDef::new("s", ty::varchar(32)));
        }
        Shape::Wide => {
            for c in 0..WIDE_COLUMNS {
                columns.push(ColumnDef::new(&format!("c{c:02}"), ty::varchar(128)));
            }
        }
    }
    TableDef {
        name: "narrow".into(),
        columns,
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// `VmHWM` of this process, in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

struct Run {
    took: Duration,
    value_bytes: u64,
    rss_before: u64,
    rss_after: u64,
    /// The child server's peak RSS (`Sink::Process`).
    server_rss: Option<u64>,
}

/// Runs `tibinlog server` against `pd` from `start_ts` until its checkpoint reaches
/// `last_commit`; returns the time from its start and its peak RSS.
async fn run_process(
    pd: &str,
    tls: Option<[&std::path::Path; 3]>,
    start_ts: Ts,
    last_commit: u64,
) -> (Duration, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let status_port = util::free_port();
    let mut args: Vec<String> = [
        "server",
        "--pd",
        pd,
        "--listen",
        &format!("127.0.0.1:{}", util::free_port()),
        "--status-listen",
        &format!("127.0.0.1:{status_port}"),
        "--data-dir",
        dir.path().join("data").to_str().expect("utf-8 path"),
        "--start-ts",
        &start_ts.0.to_string(),
    ]
    .map(String::from)
    .into();
    if let Some(files) = tls {
        for (flag, path) in ["--ca", "--cert", "--key"].into_iter().zip(files) {
            args.push(flag.into());
            args.push(path.to_str().expect("utf-8 path").into());
        }
    }
    let log = dir.path().join("server.log");
    let began = Instant::now();
    let mut server = child::Proc::spawn(&args, &log);
    server.wait_event("serving", &log).await;
    let pid = server.pid().to_string();
    loop {
        let checkpoint = util::status(status_port)
            .and_then(|s| s["capture"]["checkpoint_ts"].as_u64())
            .unwrap_or(0);
        if checkpoint >= last_commit {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(3600),
            "the server did not reach the last commit within an hour; log in {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = began.elapsed();
    (took, util::rss(&pid).1)
}

async fn run(rows: usize, tls: bool, shape: Shape, sink: Sink) -> Run {
    let certs = tempfile::tempdir().expect("tempdir");
    let files = tls.then(|| {
        tibinlog::sim::pki::write_set(certs.path(), "tidb-server", &[], "tibinlog").expect("certs")
    });
    let sim = SimBuilder::new(SimArgs {
        stores: 3,
        workload: WorkloadKind::None,
        seed: Some(1),
        resolved_ts_interval: Duration::from_millis(100),
        progress_interval: Duration::from_secs(3600),
        ca: files.as_ref().map(|f| f.ca.clone()),
        cert: files.as_ref().map(|f| f.server_cert.clone()),
        key: files.as_ref().map(|f| f.server_key.clone()),
        ..SimArgs::default()
    })
    .start(CancellationToken::new())
    .await
    .expect("sim");
    let cluster = sim.cluster().clone();
    let tidb = sim.tidb();
    let table_id = cluster
        .apply(|core| {
            let mut t = tidb.lock().expect("tidb");
            let out = t
                .execute_ddl(
                    core,
                    &Ddl::CreateTable {
                        db: "test".into(),
                        table: table(shape),
                    },
                )
                .expect("create");
            let id = t.table("test", "narrow").expect("narrow").info.id;
            Ok((id, out.outputs))
        })
        .expect("ddl");
    for i in 1..REGIONS {
        let at = record_key(table_id, &Handle::Int((rows * i / REGIONS) as i64));
        cluster.split_at(&at).await.expect("split");
    }
    let regions = cluster.regions();
    for (i, r) in regions.iter().enumerate() {
        let _ = cluster.transfer_leader(r.id(), 1 + (i as u64 % 3)).await;
    }
    let start_ts = Ts(cluster.tso().0);
    let mut last_commit = 0;
    let mut id = 0i64;
    let pad = "x".repeat(24);
    let wide_pad = "w".repeat(WIDE_BYTES - 8);
    let mut row: Vec<Value> = Vec::new();
    // Column values' bytes (8 per integer, a string's length), the figure MiB/s is of.
    let mut value_bytes = 0u64;
    while (id as usize) < rows {
        last_commit = cluster
            .apply(|core| {
                let mut t = tidb.lock().expect("tidb");
                let mut txn = t.begin(core);
                for _ in 0..TXN_ROWS {
                    id += 1;
                    row.clear();
                    row.push(Value::Int(id));
                    match shape {
                        Shape::Narrow => {
                            row.push(Value::Int(id * 7));
                            row.push(Value::Bytes(format!("{pad}{id:08}").into_bytes()));
                        }
                        Shape::Wide => {
                            for c in 0..WIDE_COLUMNS {
                                let v = format!("{wide_pad}{:08}", id as usize * 31 + c);
                                row.push(Value::Bytes(v.into_bytes()));
                            }
                        }
                    }
                    value_bytes += row
                        .iter()
                        .map(|v| match v {
                            Value::Bytes(b) => b.len() as u64,
                            _ => 8,
                        })
                        .sum::<u64>();
                    txn.insert("test", "narrow", &row).expect("insert");
                }
                let c = txn.commit().expect("commit");
                Ok((c.commit_ts.0, c.outputs))
            })
            .expect("load");
    }
    let rss_before = peak_rss();
    if sink == Sink::Process {
        let tls = files.as_ref().map(|f| {
            [
                f.ca.as_path(),
                f.client_cert.as_path(),
                f.client_key.as_path(),
            ]
        });
        let (took, server_rss) = run_process(&cluster.pd_url(), tls, start_ts, last_commit).await;
        let rss_after = peak_rss();
        sim.shutdown().await.expect("shutdown");
        return Run {
            took,
            value_bytes,
            rss_before,
            rss_after,
            server_rss: Some(server_rss),
        };
    }
    if sink == Sink::Binlog {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = tibinlog::app::AppConfig::new(
            vec![cluster.pd_url()],
            "127.0.0.1:0".parse().expect("addr"),
            dir.path(),
        );
        cfg.start_ts = Some(start_ts);
        cfg.progress_interval = Duration::from_secs(3600);
        cfg.cluster_tls = files.as_ref().map(|f| tibinlog::security::ClusterTlsFiles {
            ca: f.ca.clone(),
            cert: f.client_cert.clone(),
            key: f.client_key.clone(),
        });
        let began = Instant::now();
        let app = tibinlog::app::App::start(cfg, CancellationToken::new())
            .await
            .expect("app start");
        let mut cp = app.checkpoint();
        while cp.borrow_and_update().0 < last_commit {
            cp.changed().await.expect("app running");
        }
        let took = began.elapsed();
        let rss_after = peak_rss();
        app.stop().await.expect("app stop");
        sim.shutdown().await.expect("shutdown");
        return Run {
            took,
            value_bytes,
            rss_before,
            rss_after,
            server_rss: None,
        };
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let began = Instant::now();
    let mut cfg = ChangefeedConfig::new(
        vec![cluster.pd_url()],
        start_ts,
        TableFilter::all(),
        dir.path().join("sorter"),
    );
    cfg.tls = files.as_ref().map(|f| {
        tibinlog::security::ClusterTls::from_files(&tibinlog::security::ClusterTlsFiles {
            ca: f.ca.clone(),
            cert: f.client_cert.clone(),
            key: f.client_key.clone(),
        })
        .expect("client TLS")
    });
    let mut feed = Changefeed::start(cfg, CancellationToken::new())
        .await
        .expect("changefeed");
    let mut got = 0usize;
    while let Some(ev) = feed.next().await {
        match ev.expect("changefeed error") {
            ChangeEvent::Rows(p) => got += p.rows.len(),
            ChangeEvent::Resolved(ts) => {
                feed.advance_checkpoint(ts);
                if ts.0 >= last_commit {
                    break;
                }
            }
            ChangeEvent::Ddl(_) => {}
        }
    }
    let took = began.elapsed();
    let rss_after = peak_rss();
    assert_eq!(got, rows, "every row once");
    feed.close().await;
    sim.shutdown().await.expect("shutdown");
    Run {
        took,
        value_bytes,
        rss_before,
        rss_after,
        server_rss: None,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let sizes: Vec<usize> = match std::env::var("CAPTURE_BENCH_ROWS") {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![200_000, 1_000_000],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let modes: Vec<bool> = match std::env::var("CAPTURE_BENCH_TLS").as_deref() {
        Ok("plain") => vec![false],
        Ok("tls") => vec![true],
        _ => vec![false, true],
    };
    let shape = match std::env::var("CAPTURE_BENCH_SHAPE").as_deref() {
        Ok("wide") => Shape::Wide,
        _ => Shape::Narrow,
    };
    let sink = match std::env::var("CAPTURE_BENCH_SINK").as_deref() {
        Ok("binlog") => Sink::Binlog,
        Ok("process") => Sink::Process,
        _ => Sink::Changefeed,
    };
    for rows in sizes {
        let mut rates = Vec::new();
        for &tls in &modes {
            let r = rt.block_on(run(rows, tls, shape, sink));
            let secs = r.took.as_secs_f64();
            let rate = rows as f64 / secs;
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            println!(
                "capture {}{}: {rows} {} rows ({:.0} MiB of column values) in {secs:.2} s = {rate:.0} rows/s, {:.1} MiB/s; peak RSS {:.0} MiB with the cluster loaded, {:.0} MiB at the end",
                match sink {
                    Sink::Changefeed => "end to end",
                    Sink::Binlog => "into fsynced binlog files",
                    Sink::Process => "into fsynced binlog files by a server process",
                },
                if tls { " over mutual TLS" } else { "" },
                match shape {
                    Shape::Narrow => "narrow",
                    Shape::Wide => "wide",
                },
                mib(r.value_bytes),
                mib(r.value_bytes) / secs,
                mib(r.rss_before),
                mib(r.rss_after),
            );
            if let Some(b) = r.server_rss {
                println!("  the server process's peak RSS: {:.0} MiB", mib(b));
            }
            rates.push(rate);
        }
        if let [plain, tls] = rates[..] {
            println!("  mutual TLS / plain: {:.2}x", tls / plain);
        }
    }
}

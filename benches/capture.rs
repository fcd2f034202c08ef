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

use std::time::{Duration, Instant};

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

fn table() -> TableDef {
    TableDef {
        name: "narrow".into(),
        columns: vec![
            ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("n", ty::int(mysql::TYPE_LONG, false)),
            ColumnDef::new("s", ty::varchar(32)),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition: None,
    }
}

async fn run(rows: usize, tls: bool) -> (f64, Duration) {
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
                        table: table(),
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
    while (id as usize) < rows {
        last_commit = cluster
            .apply(|core| {
                let mut t = tidb.lock().expect("tidb");
                let mut txn = t.begin(core);
                for _ in 0..TXN_ROWS {
                    id += 1;
                    let row = [
                        Value::Int(id),
                        Value::Int(id * 7),
                        Value::Bytes(format!("{pad}{id:08}").into_bytes()),
                    ];
                    txn.insert("test", "narrow", &row).expect("insert");
                }
                let c = txn.commit().expect("commit");
                Ok((c.commit_ts.0, c.outputs))
            })
            .expect("load");
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
    assert_eq!(got, rows, "every row once");
    feed.close().await;
    sim.shutdown().await.expect("shutdown");
    (rows as f64 / took.as_secs_f64(), took)
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
    for rows in sizes {
        let mut rates = Vec::new();
        for &tls in &modes {
            let (rate, took) = rt.block_on(run(rows, tls));
            println!(
                "capture end to end{}: {rows} narrow rows in {:.2} s = {:.0} rows/s",
                if tls { " over mutual TLS" } else { "" },
                took.as_secs_f64(),
                rate
            );
            rates.push(rate);
        }
        if let [plain, tls] = rates[..] {
            println!("  mutual TLS / plain: {:.2}x", tls / plain);
        }
    }
}

//! Row changes per second of the seeded workload through the simulated TiDB and `SimCore`
//! (prewrite/commit, CDC routing, no gRPC): unwatched, with the truth log, and watched (the
//! cluster split into regions, one registered downstream per region receiving its rows, and a
//! resolved-ts tick every few transactions), which is how tests and the demo use it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tibinlog::sim::cdc::CdcConfig;
use tibinlog::sim::core::{SimCore, StoreOutput};
use tibinlog::sim::tidb::{Tidb, TidbConfig, TruthLog};
use tibinlog::sim::ts::ManualClock;
use tibinlog::sim::workload::{gen, Workload, WorkloadConfig};
use tibinlog_proto::cdcpb::{self, change_data_request, event, ChangeDataRequest};
use tibinlog_proto::metapb;

const SEED: u64 = 20_240_601;
const TXNS: u64 = 2_000;
/// Watched runs tick resolved ts every this many transactions.
const TICK_EVERY: u64 = 10;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Truth,
    Watched,
}

fn entry_rows(outs: &[StoreOutput]) -> u64 {
    outs.iter()
        .flat_map(|o| o.output.event.events.iter())
        .map(|e| match &e.event {
            Some(event::Event::Entries(en)) => en.entries.len() as u64,
            _ => 0,
        })
        .sum()
}

/// Splits the cluster at every workload table, spreads leaders over the stores and registers
/// one downstream per region on its leader (scans run to completion).
fn watch(core: &mut SimCore, tidb: &Tidb) {
    for t in gen::initial_tables() {
        let Some(meta) = tidb.table("wl", &t.name) else {
            continue;
        };
        let split = tibinlog::tidb::key::table_prefix(meta.info.id);
        let region = core.cluster.region_by_raw_key(&split).expect("region").id();
        core.split_region(region, &split).expect("split");
    }
    let regions: Vec<u64> = core
        .cluster
        .scan_regions(b"", b"", 0)
        .iter()
        .map(|r| r.id())
        .collect();
    for (i, &r) in regions.iter().enumerate() {
        core.transfer_leader(r, 1 + (i as u64 % 3)).expect("leader");
    }
    for store in 1..=3 {
        core.open_conn(store, store, false).expect("conn");
    }
    for &r in &regions {
        let info = core.cluster.region(r).expect("region");
        let store = info.leader_store().expect("leader");
        let req = ChangeDataRequest {
            header: Some(cdcpb::Header {
                cluster_id: 0,
                ticdc_version: "8.5.0".into(),
            }),
            region_id: r,
            region_epoch: Some(metapb::RegionEpoch {
                conf_ver: 1,
                version: info.version(),
            }),
            request_id: r,
            request: Some(change_data_request::Request::Register(Default::default())),
            ..Default::default()
        };
        core.on_cdc_request(store, store, &req).expect("register");
    }
    while !core.drive_scans().is_empty() {}
}

/// Runs the workload once; returns (row changes, CDC rows delivered, time in the run loop).
fn run_once(mode: Mode) -> (u64, u64, Duration) {
    let clock = ManualClock::new(1_700_000_000_000);
    let mut core = SimCore::new(
        &[1, 2, 3],
        CdcConfig::default(),
        Arc::new(clock.clone()),
        SEED,
    )
    .expect("core");
    let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("bootstrap");
    if mode == Mode::Truth {
        tidb.set_truth_sink(Box::new(TruthLog::new(std::io::sink())));
    }
    let cfg = WorkloadConfig {
        seed: SEED,
        txns: TXNS,
        large_rows: 500,
        ..WorkloadConfig::default()
    };
    let mut wl = Workload::new(cfg, Some(clock));
    wl.setup(&mut tidb, &mut core).expect("setup");
    if mode == Mode::Watched {
        watch(&mut core, &tidb);
    }
    let t = Instant::now();
    let (changes, rows) = if mode == Mode::Watched {
        let (mut changes, mut rows) = (0, 0);
        for i in 0..TXNS {
            let rep = wl.step(&mut tidb, &mut core).expect("step");
            changes += rep.row_changes as u64;
            rows += entry_rows(&rep.outputs);
            if i % TICK_EVERY == 0 {
                std::hint::black_box(core.tick_resolved_ts());
            }
        }
        (changes, rows)
    } else {
        let stats = wl.run(&mut tidb, &mut core, |_| {}).expect("run");
        (stats.row_changes, 0)
    };
    (changes, rows, t.elapsed())
}

fn bench(c: &mut Criterion) {
    eprintln!("workload seed {SEED}, {TXNS} transactions");
    let mut g = c.benchmark_group("sim_workload");
    g.sample_size(10);
    for (mode, name) in [
        (Mode::Plain, "rows"),
        (Mode::Truth, "rows_with_truth_log"),
        (Mode::Watched, "rows_watched"),
    ] {
        let (changes, rows, _) = run_once(mode);
        if mode == Mode::Watched {
            assert!(rows > 0, "a watched run delivers rows");
            eprintln!("watched run: {changes} row changes, {rows} CDC rows delivered");
        }
        g.throughput(Throughput::Elements(changes));
        g.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run_once(mode).2).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

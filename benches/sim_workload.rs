//! Row changes per second of the seeded workload through the simulated TiDB and `SimCore`
//! (prewrite/commit, CDC observation, no gRPC), with and without the truth log.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tibinlog::sim::cdc::CdcConfig;
use tibinlog::sim::core::SimCore;
use tibinlog::sim::tidb::{Tidb, TidbConfig, TruthLog};
use tibinlog::sim::ts::ManualClock;
use tibinlog::sim::workload::{Workload, WorkloadConfig};

const SEED: u64 = 20_240_601;
const TXNS: u64 = 2_000;

/// Runs the workload once; returns (row changes, time spent in the run loop).
fn run_once(truth: bool) -> (u64, Duration) {
    let clock = ManualClock::new(1_700_000_000_000);
    let mut core = SimCore::new(
        &[1, 2, 3],
        CdcConfig::default(),
        Arc::new(clock.clone()),
        SEED,
    )
    .expect("core");
    let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("bootstrap");
    if truth {
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
    let t = Instant::now();
    let stats = wl.run(&mut tidb, &mut core, |_| {}).expect("run");
    (stats.row_changes, t.elapsed())
}

fn bench(c: &mut Criterion) {
    eprintln!("workload seed {SEED}, {TXNS} transactions");
    let (rows, _) = run_once(false);
    let mut g = c.benchmark_group("sim_workload");
    g.sample_size(10);
    g.throughput(Throughput::Elements(rows));
    for truth in [false, true] {
        let name = if truth { "rows_with_truth_log" } else { "rows" };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run_once(truth).1).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

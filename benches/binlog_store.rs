//! Binlog store append throughput: narrow rows (INT, VARCHAR, BIGINT) in transactions of 10
//! rows, appended and made durable by group commit (`flush` = map fsync + binlog fsync).
//! Group sizes: every transaction flushed alone, 100 and 1000 transactions per flush.

mod common;
use common::narrow_table;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tibinlog::binlog_store::{BinlogStore, StoreConfig};
use tibinlog::model::Ts;
use tibinlog::mounter::{MountedTable, RowChange, RowOp};
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::value::Value;

const ROWS_PER_TXN: usize = 10;

/// Transactions `first..first + n`, 10 inserts each.
fn txns(t: &Arc<MountedTable>, first: u64, n: u64) -> Vec<(Ts, Ts, Vec<RowChange>)> {
    (first..first + n)
        .map(|k| {
            let commit = Ts::compose(1_700_000_000_000 + k, 1);
            let start = Ts(commit.0 - 1);
            let rows = (0..ROWS_PER_TXN as i64)
                .map(|i| RowChange {
                    table: t.clone(),
                    op: RowOp::Insert,
                    before: None,
                    after: Some(vec![
                        Value::Int(k as i64 * 10 + i),
                        Value::Bytes(b"some narrow name".to_vec()),
                        Value::Int(i * 1_000_003),
                    ]),
                    start_ts: start,
                    commit_ts: commit,
                })
                .collect();
            (start, commit, rows)
        })
        .collect()
}

fn bench_append(c: &mut Criterion) {
    let t = narrow_table();
    let mut g = c.benchmark_group("binlog_store_append");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    for per_flush in [1u64, 100, 1000] {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = StoreConfig::new(dir.path(), 1, Sid([7; 16]));
        let (mut store, _) = BinlogStore::open(cfg).expect("open store");
        let mut next = 1u64;
        g.throughput(Throughput::Elements(per_flush * ROWS_PER_TXN as u64));
        g.bench_function(format!("10_rows_x_{per_flush}_txns_per_fsync"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let batch = txns(&t, next, per_flush);
                    next += per_flush;
                    let t0 = Instant::now();
                    for (start, commit, rows) in &batch {
                        store.begin_txn(*start, *commit).expect("begin");
                        store.write_rows(rows).expect("rows");
                        store.commit_txn().expect("commit");
                    }
                    store.flush(batch[batch.len() - 1].1).expect("flush");
                    total += t0.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_append);
criterion_main!(benches);

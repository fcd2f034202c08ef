//! Sorter throughput: write + ordered read + delete of narrow rows.
//!
//! `cargo bench --bench sorter` reports rows/s for the whole cycle (criterion
//! `Throughput::Elements`): `sorter/write_read_gc_narrow_rows` through the RocksDB core alone,
//! `sorter_facade/*` through the threaded sorter as capture uses it (send rows, send the
//! resolved ts, read every chunk, acknowledge), with the memory tier at its default and off
//! (every row through RocksDB); plus key encoding alone.
//!
//! Big-transaction mode: with `SORTER_BIG_TXN_MB=<n>` set, the binary instead streams one
//! transaction of `n` MiB through the async facade (writer task -> RocksDB -> chunked reader ->
//! ack/GC) and prints its peak RSS (`VmHWM`), e.g.
//! `SORTER_BIG_TXN_MB=2048 /usr/bin/time -v target/release/deps/sorter-<hash>`.
#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use tibinlog::model::{Op, RawRow, RegionId, ResolvedTs, Ts};
use tibinlog::sorter::{key, Config, ReadPosition, SortDb, Sorter, SorterOutput};

/// Rows per measured cycle.
const ROWS: u64 = 200_000;
/// Rows per input batch (one gRPC message's worth).
const BATCH: usize = 1024;
/// Rows per transaction.
const TXN_ROWS: u64 = 16;
/// Value size of a narrow row.
const VALUE_LEN: usize = 100;

fn narrow_row(ts_base: u64, i: u64) -> RawRow {
    let txn = i / TXN_ROWS;
    let table = 100 + (i % 4) as i64;
    let mut key = tibinlog::tidb::key::record_prefix(table);
    key.extend_from_slice(&(i ^ (1 << 63)).to_be_bytes());
    RawRow {
        op: Op::Put,
        key,
        value: vec![(i % 251) as u8; VALUE_LEN],
        old_value: Vec::new(),
        start_ts: Ts(ts_base + txn * 2),
        commit_ts: Ts(ts_base + txn * 2 + 1),
        region_id: RegionId(1),
    }
}

/// Rows of one cycle, shuffled between batches the way regions interleave: batch k holds
/// every (ROWS/BATCH)-th row starting at k, so no batch is in commit order with the next.
fn cycle_rows(ts_base: u64) -> Vec<Vec<RawRow>> {
    let nbatches = ROWS.div_ceil(BATCH as u64);
    (0..nbatches)
        .map(|b| {
            (b..ROWS)
                .step_by(nbatches as usize)
                .map(|i| narrow_row(ts_base, i))
                .collect()
        })
        .collect()
}

fn bench_cycle(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let db = SortDb::open(&Config::new(dir.path().join("sorter"))).unwrap();
    let base = Cell::new(1u64 << 40);
    let mut g = c.benchmark_group("sorter");
    g.throughput(Throughput::Elements(ROWS));
    g.sample_size(20);
    g.bench_function("write_read_gc_narrow_rows", |b| {
        b.iter_batched(
            || {
                let ts = base.get();
                base.set(ts + ROWS * 2 + 10);
                (ts, cycle_rows(ts))
            },
            |(ts, batches)| {
                for batch in &batches {
                    db.write_rows(batch).unwrap();
                }
                let resolved = Ts(ts + ROWS * 2);
                let mut n = 0;
                let mut end = ReadPosition::start();
                for chunk in db.read_up_to(resolved, &ReadPosition::start(), 8 << 20) {
                    let chunk = chunk.unwrap();
                    n += chunk.rows.len();
                    end = chunk.end;
                }
                assert_eq!(n as u64, ROWS);
                db.gc_up_to(&end).unwrap();
                batches
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("sorter_key");
    g.throughput(Throughput::Elements(1));
    let row = narrow_row(1, 12345);
    let mut buf = Vec::with_capacity(64);
    g.bench_function("encode_key_into", |b| {
        b.iter(|| {
            buf.clear();
            key::encode_key_into(black_box(&row), &mut buf);
            black_box(buf.len())
        })
    });
    let mut k = Vec::new();
    key::encode_key_into(&row, &mut k);
    g.bench_function("decode_key", |b| {
        b.iter(|| black_box(key::decode_key(black_box(&k)).unwrap().commit_ts))
    });
    g.finish();
}

fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Streams one transaction of `mb` MiB through the async facade in bounded memory.
fn big_txn(mb: u64) {
    const ROW_VALUE: usize = 1000;
    const ROWS_PER_BATCH: u64 = 1024;
    let rows = (mb << 20) / ROW_VALUE as u64;
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::new(dir.path().join("sorter"));
    println!("big txn: {mb} MiB in {rows} rows of {ROW_VALUE} B, config {cfg:?}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let t0 = Instant::now();
        let (w, mut r) = Sorter::open(cfg).unwrap();
        let writer = tokio::spawn(async move {
            let mut i = 0;
            while i < rows {
                let n = ROWS_PER_BATCH.min(rows - i);
                let batch: Vec<RawRow> = (i..i + n)
                    .map(|h| {
                        let mut key = tibinlog::tidb::key::record_prefix(7);
                        key.extend_from_slice(&(h ^ (1 << 63)).to_be_bytes());
                        RawRow {
                            op: Op::Put,
                            key,
                            value: vec![(h % 251) as u8; ROW_VALUE],
                            old_value: Vec::new(),
                            start_ts: Ts(100),
                            commit_ts: Ts(101),
                            region_id: RegionId(1),
                        }
                    })
                    .collect();
                w.send_rows(batch).await.unwrap();
                i += n;
            }
            w.send_resolved(ResolvedTs(Ts(101))).await.unwrap();
        });
        let (mut got, mut chunks, mut max_chunk_rows) = (0u64, 0u64, 0usize);
        let mut read_start = None;
        while let Some(out) = r.next().await {
            match out.unwrap() {
                SorterOutput::Chunk(c) => {
                    read_start.get_or_insert_with(Instant::now);
                    got += c.rows.len() as u64;
                    chunks += 1;
                    max_chunk_rows = max_chunk_rows.max(c.rows.len());
                    r.ack(c.end.clone());
                }
                SorterOutput::Resolved(_) => break,
            }
        }
        writer.await.unwrap();
        assert_eq!(got, rows);
        let read_s = read_start.map_or(0.0, |s| s.elapsed().as_secs_f64());
        println!(
            "rows {got}, chunks {chunks}, max rows/chunk {max_chunk_rows}, total {:.1} s, read {:.1} s, peak RSS (VmHWM) {} MiB",
            t0.elapsed().as_secs_f64(),
            read_s,
            vm_hwm_kib().unwrap_or(0) / 1024
        );
    });
}

/// The threaded sorter, one cycle per iteration: every batch sent, then the resolved ts that
/// covers them, then every chunk read and the position acknowledged.
fn bench_facade(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("sorter_facade");
    g.throughput(Throughput::Elements(ROWS));
    g.sample_size(20);
    for (name, mem) in [
        (
            "memory_tier_default",
            tibinlog::sorter::DEFAULT_MEMORY_RUN_BYTES,
        ),
        ("memory_tier_off", 0),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = Config::new(dir.path().join("sorter"));
        cfg.memory_run_bytes = mem;
        let (w, mut r) = rt.block_on(async { Sorter::open(cfg) }).unwrap();
        let base = Cell::new(1u64 << 40);
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let ts = base.get();
                    base.set(ts + ROWS * 2 + 10);
                    (ts, cycle_rows(ts))
                },
                |(ts, batches)| {
                    rt.block_on(async {
                        for batch in batches {
                            w.send_rows(batch).await.unwrap();
                        }
                        let resolved = Ts(ts + ROWS * 2);
                        w.send_resolved(ResolvedTs(resolved)).await.unwrap();
                        let mut n = 0;
                        loop {
                            match r.next().await.unwrap().unwrap() {
                                SorterOutput::Chunk(c) => n += c.rows.len(),
                                out @ SorterOutput::Resolved(_) => {
                                    r.ack(out.position());
                                    break;
                                }
                            }
                        }
                        assert_eq!(n as u64, ROWS);
                    })
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench_cycle, bench_facade);

fn main() {
    if let Some(mb) = std::env::var("SORTER_BIG_TXN_MB")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        big_txn(mb);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

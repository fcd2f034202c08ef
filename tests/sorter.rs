//! Sorter: order, chunking, resumption, GC, back-pressure, and a model check.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::task::{Context, Waker};

use proptest::prelude::*;
use tibinlog::model::{Op, RawKvEvent, RawRow, RegionId, ResolvedTs, Ts};
use tibinlog::sorter::quota::{quota_channel, TrySendError};
use tibinlog::sorter::{Config, ReadPosition, SortDb, Sorter, SorterOutput, TxnChunk};

fn row_key(table: i64, handle: u64) -> Vec<u8> {
    let mut k = tibinlog::tidb::key::record_prefix(table);
    k.extend_from_slice(&(handle ^ (1 << 63)).to_be_bytes());
    k
}

fn row(op: Op, table: i64, handle: u64, start: u64, commit: u64, vlen: usize) -> RawRow {
    RawRow {
        op,
        key: row_key(table, handle),
        value: if op == Op::Put {
            vec![(handle % 251) as u8; vlen]
        } else {
            Vec::new()
        },
        old_value: vec![7; handle as usize % 3],
        start_ts: Ts(start),
        commit_ts: Ts(commit),
        region_id: RegionId(table as u64),
    }
}

fn config(dir: &tempfile::TempDir) -> Config {
    let mut c = Config::new(dir.path().join("sorter"));
    c.block_cache_bytes = 8 << 20;
    c.write_buffer_bytes = 4 << 20;
    c
}

fn open() -> (tempfile::TempDir, SortDb) {
    let dir = tempfile::tempdir().unwrap();
    let db = SortDb::open(&config(&dir)).unwrap();
    (dir, db)
}

/// The order the binlog needs, written independently of the sorter's key layout.
type ModelKey = (u64, u64, i64, u8, Vec<u8>);

fn model_key(r: &RawRow) -> ModelKey {
    let table = tibinlog::tidb::key::table_id_of(&r.key).unwrap_or(i64::MIN);
    let op = match r.op {
        Op::Delete => 0,
        Op::Put => 1,
    };
    (r.commit_ts.0, r.start_ts.0, table, op, r.key.clone())
}

/// A deterministic shuffle (xorshift), so failures replay.
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

fn read_all(db: &SortDb, resolved: u64, from: &ReadPosition, max: usize) -> Vec<TxnChunk> {
    db.read_up_to(Ts(resolved), from, max)
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// Many transactions, several tables, deletes and puts of the same keys, shuffled.
fn workload() -> Vec<RawRow> {
    let mut rows = Vec::new();
    for t in 0..200u64 {
        let start = 1000 + t * 3;
        // Every fourth transaction shares its commit_ts with the previous one.
        let commit = 10_000 + (t - t % 4 / 3) * 5;
        for i in 0..(1 + t % 7) {
            let table = [5i64, -2, 9][(i % 3) as usize];
            rows.push(row(Op::Put, table, i, start, commit, 20));
            if i % 2 == 0 {
                rows.push(row(Op::Delete, table, i, start, commit, 0));
            }
        }
    }
    rows
}

#[test]
fn random_order_comes_out_sorted_grouped_and_delete_first() {
    let (_d, db) = open();
    let mut rows = workload();
    let mut expect: Vec<RawRow> = rows.clone();
    expect.sort_by_key(model_key);
    shuffle(&mut rows, 42);
    for batch in rows.chunks(37) {
        db.write_rows(batch).unwrap();
    }
    let txns: Vec<_> = db
        .read_txns_up_to(Ts::MAX, &ReadPosition::start())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let got: Vec<RawRow> = txns.iter().flat_map(|t| t.rows.clone()).collect();
    assert_eq!(got, expect);
    assert_eq!(txns.len(), 200);
    let mut prev = (0, 0);
    for t in &txns {
        assert!((t.commit_ts.0, t.start_ts.0) > prev, "txn order");
        prev = (t.commit_ts.0, t.start_ts.0);
        // Tables are contiguous; deletes precede puts for the same key.
        let mut seen_tables = Vec::new();
        for r in &t.rows {
            assert_eq!((r.start_ts, r.commit_ts), (t.start_ts, t.commit_ts));
            let tid = tibinlog::tidb::key::table_id_of(&r.key).unwrap();
            if seen_tables.last() != Some(&tid) {
                assert!(!seen_tables.contains(&tid), "table {tid} split");
                seen_tables.push(tid);
            }
        }
        for (i, r) in t.rows.iter().enumerate() {
            if r.op == Op::Delete {
                let put = t
                    .rows
                    .iter()
                    .position(|p| p.op == Op::Put && p.key == r.key);
                assert!(put.is_none_or(|p| p > i), "delete after put");
            }
        }
    }
}

#[test]
fn same_commit_ts_orders_by_start_ts_and_never_merges() {
    let (_d, db) = open();
    db.write_rows(&[
        row(Op::Put, 1, 1, 30, 100, 4),
        row(Op::Put, 1, 2, 20, 100, 4),
        row(Op::Put, 1, 3, 25, 99, 4),
    ])
    .unwrap();
    let chunks = read_all(&db, 100, &ReadPosition::start(), usize::MAX);
    let ids: Vec<_> = chunks
        .iter()
        .map(|c| (c.commit_ts.0, c.start_ts.0, c.rows.len(), c.first, c.last))
        .collect();
    assert_eq!(
        ids,
        vec![
            (99, 25, 1, true, true),
            (100, 20, 1, true, true),
            (100, 30, 1, true, true)
        ]
    );
}

#[test]
fn nothing_above_resolved_is_emitted() {
    let (_d, db) = open();
    let rows: Vec<_> = (0..50).map(|i| row(Op::Put, 1, i, i, 100 + i, 8)).collect();
    db.write_rows(&rows).unwrap();
    let chunks = read_all(&db, 120, &ReadPosition::start(), usize::MAX);
    assert_eq!(chunks.len(), 21);
    assert!(chunks.iter().all(|c| c.commit_ts.0 <= 120));
    // The next read from the resolved position starts right after.
    let next = read_all(
        &db,
        130,
        &ReadPosition::after_commit_ts(Ts(120)),
        usize::MAX,
    );
    let ts: Vec<_> = next.iter().map(|c| c.commit_ts.0).collect();
    assert_eq!(ts, (121..=130).collect::<Vec<_>>());
    assert!(read_all(&db, 99, &ReadPosition::start(), 1).is_empty());
}

#[test]
fn resume_after_partial_read_does_not_duplicate() {
    let (_d, db) = open();
    let mut rows = workload();
    db.write_rows(&rows).unwrap();
    rows.sort_by_key(model_key);
    let all = read_all(&db, u64::MAX - 1, &ReadPosition::start(), 100);
    assert!(all.len() > 50);
    for cut in [1, 7, all.len() / 2, all.len() - 1] {
        let mut got: Vec<RawRow> = all[..cut].iter().flat_map(|c| c.rows.clone()).collect();
        let resumed = read_all(&db, u64::MAX - 1, &all[cut - 1].end, 100);
        assert_eq!(
            resumed[0].first, all[cut].first,
            "continuation flag at {cut}"
        );
        got.extend(resumed.iter().flat_map(|c| c.rows.clone()));
        assert_eq!(got, rows, "cut at chunk {cut}");
    }
}

#[test]
fn gc_removes_emitted_keys() {
    let (_d, db) = open();
    let rows: Vec<_> = (0..1000)
        .map(|i| row(Op::Put, 3, i, i, 1000 + i / 10, 50))
        .collect();
    db.write_rows(&rows).unwrap();
    assert_eq!(db.count_keys().unwrap(), 1000);
    let chunks = read_all(&db, 1049, &ReadPosition::start(), usize::MAX);
    assert_eq!(chunks.iter().map(|c| c.rows.len()).sum::<usize>(), 500);
    db.gc_up_to(&chunks.last().unwrap().end).unwrap();
    assert_eq!(db.count_keys().unwrap(), 500);
    db.gc_up_to(&ReadPosition::after_commit_ts(Ts(2000)))
        .unwrap();
    assert_eq!(db.count_keys().unwrap(), 0);
    db.compact_all().unwrap();
    assert_eq!(db.metrics().snapshot().gc_ranges_total, 2);
}

#[test]
fn large_txn_comes_out_in_chunks_with_last_on_the_final_one() {
    let (_d, db) = open();
    let rows: Vec<_> = (0..5000)
        .map(|i| {
            row(
                if i % 5 == 0 { Op::Delete } else { Op::Put },
                1 + (i % 4) as i64,
                i,
                50,
                60,
                100,
            )
        })
        .collect();
    for b in rows.chunks(1000) {
        db.write_rows(b).unwrap();
    }
    db.write_rows(&[row(Op::Put, 1, 1, 70, 80, 1)]).unwrap();
    let chunks = read_all(&db, 80, &ReadPosition::start(), 64 << 10);
    let big: Vec<_> = chunks.iter().filter(|c| c.start_ts.0 == 50).collect();
    assert!(big.len() >= 7, "{} chunks", big.len());
    for (i, c) in big.iter().enumerate() {
        assert_eq!(c.first, i == 0);
        assert_eq!(c.last, i == big.len() - 1);
        let bytes: usize = c.rows.iter().map(|r| 42 + r.payload_len()).sum();
        assert!(bytes < (64 << 10) + 200, "chunk {i} holds {bytes} bytes");
    }
    let mut expect = rows.clone();
    expect.sort_by_key(model_key);
    let got: Vec<RawRow> = big.iter().flat_map(|c| c.rows.clone()).collect();
    assert_eq!(got, expect);
    let tail = chunks.last().unwrap();
    assert_eq!((tail.start_ts.0, tail.first, tail.last), (70, true, true));
}

#[tokio::test]
async fn quota_channel_blocks_sender_until_receiver_drains() {
    let (tx, mut rx) = quota_channel::<u32>(100, Default::default());
    tx.send(1, 60).await.unwrap();
    tx.send(2, 40).await.unwrap();
    assert_eq!(tx.available_bytes(), 0);
    assert!(matches!(tx.try_send(3, 1), Err(TrySendError::Full(3))));
    // A blocked sender, polled by hand: pending, and dropping it holds no quota.
    {
        let mut send = std::pin::pin!(tx.send(3, 50));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(send.as_mut().poll(&mut cx).is_pending());
        assert!(send.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(tx.available_bytes(), 0);
    let sender = {
        let tx = tx.clone();
        tokio::spawn(async move { tx.send(3, 50).await })
    };
    tokio::task::yield_now().await;
    assert!(!sender.is_finished());
    // Receiving alone is not enough: the quota comes back when the message is processed.
    let (v, charge) = rx.recv().await.unwrap();
    assert_eq!(v, 1);
    tokio::task::yield_now().await;
    assert!(!sender.is_finished());
    drop(charge);
    sender.await.unwrap().unwrap();
    assert_eq!(tx.available_bytes(), 10);
    let (v, _c) = rx.recv().await.unwrap();
    assert_eq!(v, 2);
}

#[tokio::test]
async fn sorter_writer_waits_on_a_full_quota() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir);
    cfg.memory_quota_bytes = 4096;
    // Rows go straight to RocksDB, so each batch is one write.
    cfg.memory_run_bytes = 0;
    let (w, mut r) = Sorter::open(cfg).unwrap();
    // Each batch costs more than the quota, so each one waits for the previous one to be
    // written; all of them get through, in order, and the quota returns to zero.
    for b in 0..20u64 {
        let rows: Vec<_> = (0..40)
            .map(|i| row(Op::Put, 1, b * 100 + i, b + 1, b + 10, 100))
            .collect();
        assert!(tibinlog::sorter::batch_cost(&rows) > 4096);
        w.send_rows(rows).await.unwrap();
        assert!(w.in_flight_bytes() <= 4096);
    }
    w.send_resolved(ResolvedTs(Ts(100))).await.unwrap();
    drop(w);
    let mut n = 0;
    while let Some(out) = r.next().await {
        if let SorterOutput::Chunk(c) = out.unwrap() {
            n += c.rows.len();
        }
    }
    assert_eq!(n, 800);
    let m = r.metrics();
    assert_eq!((m.write_batches_total, m.in_flight_bytes), (20, 0));
}

#[tokio::test]
async fn async_facade_streams_acks_and_collects() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir);
    cfg.max_chunk_bytes = 1024;
    let (w, mut r) = Sorter::open(cfg).unwrap();
    let mut events: Vec<RawKvEvent> = Vec::new();
    for t in 0..30u64 {
        for i in 0..(t % 5 + 1) * 10 {
            events.push(RawKvEvent::Row(row(Op::Put, 2, i, 100 + t, 200 + t, 30)));
        }
        if t % 10 == 9 {
            events.push(RawKvEvent::Resolved(ResolvedTs(Ts(200 + t))));
        }
    }
    w.send_events(events).await.unwrap();
    // A late row (commit_ts <= the applied resolved ts) is dropped and counted.
    w.send_rows(vec![row(Op::Put, 2, 999, 1, 150, 3)])
        .await
        .unwrap();
    let mut txns = 0;
    let mut resolved = Vec::new();
    let mut last_commit = 0;
    // Resolved markers are coalesced: a reader that falls behind sees only the newest.
    while resolved.last() != Some(&229) {
        match r.next().await.unwrap().unwrap() {
            SorterOutput::Chunk(c) => {
                assert!(c.commit_ts.0 >= last_commit);
                last_commit = c.commit_ts.0;
                txns += usize::from(c.last);
            }
            out @ SorterOutput::Resolved(ResolvedTs(ts)) => {
                assert!(last_commit <= ts.0);
                resolved.push(ts.0);
                r.ack(out.position());
            }
        }
    }
    assert!(resolved.windows(2).all(|w| w[0] < w[1]), "{resolved:?}");
    assert!(resolved.iter().all(|ts| [209, 219, 229].contains(ts)));
    assert_eq!(txns, 30);
    drop(w);
    assert!(r.next().await.is_none());
    let m = r.metrics();
    assert_eq!(m.late_rows_total, 1);
    assert!(m.gc_ranges_total >= 1);
    assert_eq!(m.resolved_ts, 229);
    // Once the reader thread has collected the last ack, nothing is left.
    let keys = tokio::task::spawn_blocking(move || r.count_keys_blocking().unwrap())
        .await
        .unwrap();
    assert_eq!(keys, 0);
}

/// Resolved ticks with nothing new to delete write no range tombstones, and one busy burst
/// writes at most one per second: an idle capture must not pile tombstones up in the memtable
/// (every new iterator processes them, so the reader would burn ever more CPU per tick).
#[tokio::test]
async fn acknowledged_ticks_do_not_pile_up_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let (w, mut r) = Sorter::open(config(&dir)).unwrap();
    let began = std::time::Instant::now();
    w.send_rows(vec![row(Op::Put, 2, 1, 10, 11, 30)])
        .await
        .unwrap();
    for t in 0..500u64 {
        w.send_resolved(ResolvedTs(Ts(100 + t))).await.unwrap();
        loop {
            match r.next().await.unwrap().unwrap() {
                SorterOutput::Chunk(c) => r.ack(c.end.clone()),
                out @ SorterOutput::Resolved(_) => {
                    r.ack(out.position());
                    break;
                }
            }
        }
    }
    drop(w);
    assert!(r.next().await.is_none());
    let secs = began.elapsed().as_secs();
    let m = r.metrics();
    // One row was emitted: a tombstone for it (perhaps two, if a tick fell between its chunk's
    // ack and the resolved marker's), plus at most one per elapsed second.
    assert!(
        m.gc_ranges_total >= 1 && m.gc_ranges_total <= 2 + secs,
        "{} range deletions in {secs} s",
        m.gc_ranges_total
    );
    let keys = tokio::task::spawn_blocking(move || r.count_keys_blocking().unwrap())
        .await
        .unwrap();
    assert_eq!(keys, 0);
}

// ---------------------------------------------------------------------------------------------
// Model check: random batches and a random resolved-ts sequence against a BTreeMap.

#[derive(Debug, Clone)]
enum Step {
    /// Rows as (table, handle, op is delete, txn index, commit offset above the resolved ts).
    Write(Vec<(i64, u64, bool, u8, u8)>),
    /// Advance the resolved ts by this much and read everything up to it.
    Resolve(u8),
    /// Acknowledge everything read so far.
    Ack,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => prop::collection::vec((-2i64..3, 0u64..6, any::<bool>(), 0u8..4, 1u8..6), 0..30)
            .prop_map(Step::Write),
        2 => (0u8..8).prop_map(Step::Resolve),
        1 => Just(Step::Ack),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn matches_in_memory_model(steps in prop::collection::vec(step(), 1..25), chunk in 1usize..600) {
        let (_d, db) = open();
        let mut model: BTreeMap<ModelKey, RawRow> = BTreeMap::new();
        let mut resolved = 10u64;
        let mut pos = ReadPosition::start();
        let mut emitted_model = 0u64; // rows of the model already emitted (prefix)
        let mut written = 0usize;
        for s in steps {
            match s {
                Step::Write(spec) => {
                    let rows: Vec<RawRow> = spec.iter().map(|&(t, h, del, txn, off)| {
                        let commit = resolved + u64::from(off);
                        // start_ts below commit; several txns may share a commit_ts.
                        let start = commit - 1 - u64::from(txn % 2);
                        let op = if del { Op::Delete } else { Op::Put };
                        let mut r = row(op, t, h, start, commit, usize::from(txn) * 3);
                        r.value.push(off);
                        r
                    }).collect();
                    db.write_rows(&rows).unwrap();
                    written += rows.len();
                    for r in rows {
                        model.insert(model_key(&r), r);
                    }
                }
                Step::Resolve(d) => {
                    resolved += u64::from(d);
                    let chunks = read_all(&db, resolved, &pos, chunk);
                    let mut got = Vec::new();
                    let mut open_txn: Option<(Ts, Ts)> = None;
                    for c in &chunks {
                        prop_assert!(!c.rows.is_empty());
                        prop_assert_eq!(c.first, open_txn.is_none());
                        for r in &c.rows {
                            prop_assert_eq!((r.commit_ts, r.start_ts), (c.commit_ts, c.start_ts));
                        }
                        open_txn = (!c.last).then_some((c.commit_ts, c.start_ts));
                        got.extend(c.rows.iter().cloned());
                    }
                    prop_assert!(open_txn.is_none(), "read ended inside a transaction");
                    let expect: Vec<RawRow> = model
                        .values()
                        .skip(emitted_model as usize)
                        .take_while(|r| r.commit_ts.0 <= resolved)
                        .cloned()
                        .collect();
                    prop_assert_eq!(&got, &expect);
                    emitted_model += got.len() as u64;
                    pos = chunks.last().map(|c| c.end.clone()).unwrap_or(pos);
                    pos = pos.max(ReadPosition::after_commit_ts(Ts(resolved)));
                }
                Step::Ack => {
                    db.gc_up_to(&pos).unwrap();
                    let live = model.len() - emitted_model as usize;
                    prop_assert_eq!(db.count_keys().unwrap(), live);
                }
            }
        }
        prop_assert!(written >= model.len());
    }
}

// ---------------------------------------------------------------------------------------------
// The async facade against the same model, with the memory tier off, tiny (every few rows
// spill, runs spill when the reader has some waiting) and at its default.

async fn facade_matches_model(
    steps: Vec<Step>,
    chunk: usize,
    mem: usize,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir);
    cfg.max_chunk_bytes = chunk;
    cfg.memory_run_bytes = mem;
    let (w, mut r) = Sorter::open(cfg).unwrap();
    let mut model: BTreeMap<ModelKey, RawRow> = BTreeMap::new();
    let mut resolved = 10u64;
    let mut emitted_model = 0usize;
    let mut pos = ReadPosition::start();
    let mut sent = 0u64;
    for s in steps {
        match s {
            Step::Write(spec) => {
                let rows: Vec<RawRow> = spec
                    .iter()
                    .map(|&(t, h, del, txn, off)| {
                        let commit = resolved + u64::from(off);
                        let start = commit - 1 - u64::from(txn % 2);
                        let op = if del { Op::Delete } else { Op::Put };
                        let mut r = row(op, t, h, start, commit, usize::from(txn) * 3);
                        r.value.push(off);
                        r
                    })
                    .collect();
                sent += rows.len() as u64;
                for r in &rows {
                    model.insert(model_key(r), r.clone());
                }
                w.send_rows(rows).await.unwrap();
            }
            Step::Resolve(d) => {
                resolved += u64::from(d) + 1;
                w.send_resolved(ResolvedTs(Ts(resolved))).await.unwrap();
                let mut got = Vec::new();
                let mut open_txn: Option<(Ts, Ts)> = None;
                loop {
                    match r.next().await.unwrap().unwrap() {
                        SorterOutput::Chunk(c) => {
                            prop_assert!(!c.rows.is_empty());
                            prop_assert_eq!(c.first, open_txn.is_none());
                            for row in &c.rows {
                                prop_assert_eq!(
                                    (row.commit_ts, row.start_ts),
                                    (c.commit_ts, c.start_ts)
                                );
                            }
                            open_txn = (!c.last).then_some((c.commit_ts, c.start_ts));
                            pos = c.end.clone();
                            got.extend(c.rows);
                        }
                        out @ SorterOutput::Resolved(ResolvedTs(ts)) => {
                            prop_assert_eq!(ts.0, resolved);
                            pos = pos.max(out.position());
                            break;
                        }
                    }
                }
                prop_assert!(open_txn.is_none(), "read ended inside a transaction");
                let expect: Vec<RawRow> = model
                    .values()
                    .skip(emitted_model)
                    .take_while(|r| r.commit_ts.0 <= resolved)
                    .cloned()
                    .collect();
                prop_assert_eq!(&got, &expect);
                emitted_model += got.len();
            }
            Step::Ack => r.ack(pos.clone()),
        }
    }
    drop(w);
    while r.next().await.is_some() {}
    let m = r.metrics();
    prop_assert_eq!(m.late_rows_total, 0);
    if mem == 0 {
        prop_assert_eq!(m.mem_rows_total, 0);
        prop_assert_eq!(m.write_rows_total, sent);
    } else {
        // Every row went through RocksDB, memory, or both (a spilled row later resent).
        prop_assert!(m.write_rows_total + m.mem_rows_total >= emitted_model as u64);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn facade_matches_in_memory_model(
        steps in prop::collection::vec(step(), 1..25),
        chunk in 1usize..600,
        mem in prop_oneof![Just(0usize), 1usize..400, Just(tibinlog::sorter::DEFAULT_MEMORY_RUN_BYTES)],
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(facade_matches_model(steps, chunk, mem))?;
    }
}

//! The capture shell (PD client, store streams, puller, GC keeper, snapshot reads) against the
//! simulated cluster over loopback gRPC.
//!
//! Every test is bounded by [`TEST_TIMEOUT`]; progress is awaited through the puller's own
//! output (a `Resolved` at or above a commit ts), never through sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tibinlog::capture::gc_keeper::{GcError, GcKeeper, GcKeeperConfig};
use tibinlog::capture::pd::{PdClient, PdConfig, PdError};
use tibinlog::capture::puller::{EventReceiver, Puller, PullerConfig, PullerError, PullerHandle};
use tibinlog::capture::snapshot::{BlockingSnapshotReader, SnapshotConfig, SnapshotReader};
use tibinlog::capture::span::{encode_key_into, table_record_span};
use tibinlog::model::{Op, RawKvEvent, RawRow, Span, TableId, Ts};
use tibinlog::mounter::MetaReader;
use tibinlog::sim::server::{SimCluster, SimConfig};
use tibinlog::tidb::key::{record_key, table_prefix, Handle};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(90);
const WAIT: Duration = Duration::from_secs(30);
const T1: i64 = 100;
const T2: i64 = 200;

async fn timed<F: Future<Output = ()>>(seed: u64, f: F) {
    // RUST_LOG=tibinlog=debug shows the retries when a test fails.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    if tokio::time::timeout(TEST_TIMEOUT, f).await.is_err() {
        panic!("test timed out (seed {seed})");
    }
}

async fn cluster(stores: usize, seed: u64) -> SimCluster {
    SimCluster::start(SimConfig {
        stores,
        seed,
        resolved_ts_interval: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cluster start failed (seed {seed}): {e}"))
}

fn key(table: i64, h: i64) -> Vec<u8> {
    record_key(table, &Handle::Int(h))
}

fn ts(t: tibinlog::sim::Ts) -> Ts {
    Ts(t.0)
}

/// Two tables, `T1`'s region led by store 1 and `T2`'s by store 2.
async fn two_store_layout(c: &SimCluster) {
    let (_left, right) = c.split_at(&table_prefix(T2)).await.expect("split");
    c.transfer_leader(right, 2).await.expect("transfer");
}

fn config(c: &SimCluster, start_ts: Ts, seed: u64) -> PullerConfig {
    let mut cfg = PullerConfig::new(
        vec![c.pd_url()],
        vec![
            table_record_span(TableId(T1)),
            table_record_span(TableId(T2)),
        ],
        start_ts,
    );
    cfg.seed = seed;
    cfg
}

/// Everything read from a puller, with the ordering invariant checked on the fly.
///
/// A row above the watermark may come again (a region re-subscribed from its resolved ts): the
/// copy must be the same row, byte for byte (the sorter collapses it); it is counted, not kept.
#[derive(Default)]
struct Log {
    rows: Vec<RawRow>,
    /// `(commit_ts, start_ts, key)` → index in `rows`.
    index: std::collections::HashMap<(Ts, Ts, Vec<u8>), usize>,
    /// Copies of rows received before.
    repeats: usize,
    resolved: Vec<Ts>,
    /// Highest watermark seen.
    watermark: Ts,
}

impl Log {
    fn on_event(&mut self, ev: RawKvEvent) {
        match ev {
            RawKvEvent::Row(r) => {
                assert!(
                    r.commit_ts > self.watermark,
                    "row {:?}@{} after watermark {}",
                    r.start_ts,
                    r.commit_ts,
                    self.watermark
                );
                let id = (r.commit_ts, r.start_ts, r.key.clone());
                if let Some(&i) = self.index.get(&id) {
                    let first = &self.rows[i];
                    assert!(
                        (first.op, &first.value, &first.old_value)
                            == (r.op, &r.value, &r.old_value),
                        "a repeated row differs from its first copy: {first:?} then {r:?}"
                    );
                    self.repeats += 1;
                    return;
                }
                self.index.insert(id, self.rows.len());
                self.rows.push(r);
            }
            RawKvEvent::Resolved(t) => {
                assert!(t.0 > self.watermark, "watermark must rise");
                self.watermark = t.0;
                self.resolved.push(t.0);
            }
        }
    }

    /// Reads until the watermark reaches `target`.
    async fn until(&mut self, rx: &mut EventReceiver, target: Ts) {
        while self.watermark < target {
            match tokio::time::timeout(WAIT, rx.recv()).await {
                Ok(Some(ev)) => self.on_event(ev),
                Ok(None) => panic!("puller stopped before {target}"),
                Err(_) => panic!("watermark stuck at {} < {target}", self.watermark),
            }
        }
    }

    /// `(start_ts, key)` → how often it arrived.
    fn counts(&self) -> BTreeMap<(Ts, Vec<u8>), usize> {
        let mut m = BTreeMap::new();
        for r in &self.rows {
            *m.entry((r.start_ts, r.key.clone())).or_default() += 1;
        }
        m
    }

    fn assert_exactly(&self, expected: &BTreeMap<(Ts, Vec<u8>), (Ts, Op)>) {
        let counts = self.counts();
        let dups: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
        assert!(dups.is_empty(), "duplicates: {dups:?}");
        let got: BTreeSet<_> = counts.keys().cloned().collect();
        let want: BTreeSet<_> = expected.keys().cloned().collect();
        assert_eq!(
            got.difference(&want).count() + want.difference(&got).count(),
            0,
            "missing {:?}, unexpected {:?}",
            want.difference(&got).collect::<Vec<_>>(),
            got.difference(&want).collect::<Vec<_>>()
        );
        for r in &self.rows {
            let (commit_ts, op) = expected[&(r.start_ts, r.key.clone())];
            assert_eq!((r.commit_ts, r.op), (commit_ts, op), "row {:?}", r.start_ts);
        }
    }
}

/// Writes a few transactions touching both tables with every commit flavour; records the
/// expected rows and returns the highest commit ts.
async fn write_batch(
    c: &SimCluster,
    round: i64,
    expected: &mut BTreeMap<(Ts, Vec<u8>), (Ts, Op)>,
) -> Ts {
    let mut last = Ts::ZERO;
    for i in 0..4i64 {
        let h = round * 10 + i;
        let mut t = c.begin().await.expect("begin");
        let start = ts(t.start_ts());
        let k1 = key(T1, h);
        let k2 = key(T2, h);
        t.put(k1.clone(), format!("v{h}").into_bytes());
        t.put(k2.clone(), format!("w{h}").into_bytes());
        let mut ops = vec![(k1, Op::Put), (k2, Op::Put)];
        if h > 0 {
            let k3 = key(T1, h - 1);
            t.delete(k3.clone());
            ops.push((k3, Op::Delete));
        }
        let commit = match i {
            0 => t.commit().await,
            1 => t.commit_1pc().await,
            2 => t.commit_async().await,
            _ => t.commit().await,
        }
        .expect("commit");
        let commit = ts(commit);
        for (k, op) in ops {
            expected.insert((start, k), (commit, op));
        }
        last = last.max(commit);
    }
    last
}

async fn start_puller(cfg: PullerConfig) -> (PullerHandle, EventReceiver, CancellationToken) {
    let cancel = CancellationToken::new();
    let (h, rx) = Puller::start(cfg, cancel.clone())
        .await
        .expect("puller start");
    (h, rx, cancel)
}

async fn stop(h: PullerHandle, cancel: CancellationToken, c: &SimCluster) {
    cancel.cancel();
    h.join().await.expect("puller ended cleanly");
    c.shutdown().await;
}

#[tokio::test]
async fn rows_arrive_once_after_the_watermark_through_split_leader_move_and_store_restart() {
    let seed = 11;
    timed(seed, async {
        let c = cluster(2, seed).await;
        two_store_layout(&c).await;
        let mut expected = BTreeMap::new();
        // Committed before the start: must not show up.
        let _ = write_batch(&c, 0, &mut BTreeMap::new()).await;
        let start_ts = ts(c.tso());
        let (h, mut rx, cancel) = start_puller(config(&c, start_ts, seed)).await;
        let mut log = Log::default();

        let t = write_batch(&c, 1, &mut expected).await;
        log.until(&mut rx, t).await;

        // A split inside T1 (EpochNotMatch → range reload).
        c.split_at(&key(T1, 25)).await.expect("split");
        let t = write_batch(&c, 2, &mut expected).await;
        log.until(&mut rx, t).await;

        // A leader transfer (NotLeader with a hint → same region on the new store).
        let r = c.region_by_raw_key(&key(T1, 5)).expect("region").id();
        c.transfer_leader(r, 2).await.expect("transfer");
        let t = write_batch(&c, 3, &mut expected).await;
        log.until(&mut rx, t).await;

        // Store 2 stops (its streams break, leaders move to store 1) and comes back.
        c.stop_store(2).await.expect("stop");
        let t = write_batch(&c, 4, &mut expected).await;
        log.until(&mut rx, t).await;
        c.restart_store(2).await.expect("restart");
        let r = c.region_by_raw_key(&key(T2, 1)).expect("region").id();
        c.transfer_leader(r, 2).await.expect("transfer back");
        let t = write_batch(&c, 5, &mut expected).await;
        log.until(&mut rx, t).await;

        log.assert_exactly(&expected);
        assert!(*h.resolved_ts().borrow() >= t);
        stop(h, cancel, &c).await;
    })
    .await;
}

#[tokio::test]
async fn event_feed_v1_fallback_delivers_the_same_rows() {
    let seed = 12;
    timed(seed, async {
        let c = cluster(2, seed).await;
        two_store_layout(&c).await;
        let start_ts = ts(c.tso());
        let mut cfg = config(&c, start_ts, seed);
        cfg.multiplexing = false;
        let (h, mut rx, cancel) = start_puller(cfg).await;
        let mut log = Log::default();
        let mut expected = BTreeMap::new();
        for round in 1..=2 {
            let t = write_batch(&c, round, &mut expected).await;
            log.until(&mut rx, t).await;
        }
        c.split_at(&key(T2, 15)).await.expect("split");
        let t = write_batch(&c, 3, &mut expected).await;
        log.until(&mut rx, t).await;
        log.assert_exactly(&expected);
        stop(h, cancel, &c).await;
    })
    .await;
}

#[tokio::test]
async fn a_held_lock_stalls_the_watermark_until_it_commits() {
    let seed = 13;
    timed(seed, async {
        let c = cluster(2, seed).await;
        two_store_layout(&c).await;
        let start_ts = ts(c.tso());
        let (h, mut rx, cancel) = start_puller(config(&c, start_ts, seed)).await;
        let mut log = Log::default();
        let mut expected = BTreeMap::new();
        let t = write_batch(&c, 1, &mut expected).await;
        log.until(&mut rx, t).await;

        // Held until the checks below are done (`commit_now`), however slow the machine.
        let held = c
            .hold_lock(key(T1, 500), b"locked".to_vec(), Duration::from_secs(600))
            .await
            .expect("lock");
        let lock_ts = ts(held.start_ts());
        // Traffic on the other table keeps flowing meanwhile: its row arrives while the
        // watermark stays at or below the lock.
        let mut other = c.begin().await.expect("begin");
        other.put(key(T2, 500), b"free".to_vec());
        let other_start = ts(other.start_ts());
        let other_commit = ts(other.commit().await.expect("commit"));
        expected.insert((other_start, key(T2, 500)), (other_commit, Op::Put));
        while !log.rows.iter().any(|r| r.start_ts == other_start) {
            let ev = tokio::time::timeout(WAIT, rx.recv())
                .await
                .expect("the other table's row in time")
                .expect("puller alive");
            log.on_event(ev);
            assert!(
                log.watermark <= lock_ts,
                "watermark {} passed the lock {lock_ts}",
                log.watermark
            );
        }
        let lock_commit = ts(held.commit_now().await.expect("commit"));
        expected.insert((lock_ts, key(T1, 500)), (lock_commit, Op::Put));
        log.until(&mut rx, lock_commit).await;
        log.assert_exactly(&expected);
        stop(h, cancel, &c).await;
    })
    .await;
}

#[tokio::test]
async fn commit_before_the_scans_prewrite_is_matched_once() {
    let seed = 14;
    timed(seed, async {
        let c = cluster(2, seed).await;
        two_store_layout(&c).await;
        let mut expected = BTreeMap::new();
        // Lock taken before the puller starts: the incremental scan reports it as PREWRITE.
        let held = c
            .hold_lock(key(T1, 7), b"late".to_vec(), Duration::from_secs(600))
            .await
            .expect("lock");
        let lock_ts = ts(held.start_ts());
        let r = c.region_by_raw_key(&key(T1, 7)).expect("region").id();
        // The region's scan cannot finish until the stall is lifted, so the commit below lands
        // while it runs: before the scan has reported the lock as PREWRITE.
        c.stall_scan(r, 1.0).await;
        let start_ts = ts(c.tso());
        let (h, mut rx, cancel) = start_puller(config(&c, start_ts, seed)).await;
        let deadline = tokio::time::Instant::now() + WAIT;
        while !c.scan_running(r) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "region {r} never scanned"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let lock_commit = ts(held.commit_now().await.expect("commit"));
        expected.insert((lock_ts, key(T1, 7)), (lock_commit, Op::Put));
        let t = write_batch(&c, 1, &mut expected).await;
        c.stall_scan(r, 0.0).await;
        let mut log = Log::default();
        log.until(&mut rx, t.max(lock_commit)).await;
        log.assert_exactly(&expected);
        stop(h, cancel, &c).await;
    })
    .await;
}

#[tokio::test]
async fn pd_fails_over_past_a_dead_address() {
    let seed = 15;
    timed(seed, async {
        let c = cluster(1, seed).await;
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").to_string()
        };
        let cancel = CancellationToken::new();
        let pd = PdClient::connect(
            PdConfig::new(vec![dead.clone(), c.pd_addr().to_string()]),
            cancel.clone(),
        )
        .await
        .expect("failover to the live member");
        assert_eq!(pd.cluster_id(), c.cluster_id());
        // Concurrent callers share TSO batches; every ts is distinct and above the last.
        let before = pd.tso().await.expect("tso");
        let many = futures_join(&pd, 64).await;
        let distinct: BTreeSet<Ts> = many.iter().copied().collect();
        assert_eq!(distinct.len(), many.len());
        assert!(many.iter().all(|t| *t > before));
        let store = pd.get_store(1).await.expect("store");
        assert_eq!(store.address, c.store_addr(1).expect("addr").to_string());

        let mut wrong = PdConfig::new(vec![dead, c.pd_url()]);
        wrong.expected_cluster_id = Some(c.cluster_id() + 1);
        let err = PdClient::connect(wrong, cancel.clone())
            .await
            .expect_err("other cluster");
        assert!(matches!(err, PdError::ClusterIdMismatch { .. }), "{err}");
        cancel.cancel();
        c.shutdown().await;
    })
    .await;
}

async fn futures_join(pd: &PdClient, n: usize) -> Vec<Ts> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let pd = pd.clone();
        set.spawn(async move { pd.tso().await });
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        out.push(r.expect("join").expect("tso"));
    }
    out
}

#[tokio::test]
async fn gc_keeper_holds_and_moves_the_service_safe_point() {
    let seed = 16;
    timed(seed, async {
        let c = cluster(1, seed).await;
        let cancel = CancellationToken::new();
        let pd = PdClient::connect(PdConfig::new(vec![c.pd_url()]), cancel.clone())
            .await
            .expect("pd");
        let first = ts(c.tso());
        let (tx, rx) = watch::channel(first);
        let mut cfg = GcKeeperConfig::new("tibinlog-test");
        cfg.interval = Duration::from_millis(20);
        GcKeeper::hold(&pd, &cfg, first).await.expect("hold");
        let keeper = GcKeeper::spawn(pd.clone(), cfg.clone(), rx, cancel.clone());
        // GC towards "now" stops at our safe point.
        let now = c.tso();
        assert_eq!(ts(c.run_gc(now).await), first.prev());

        let second = ts(c.tso());
        tx.send_replace(second);
        // The keeper picks the new checkpoint up at its next tick.
        let mut held = keeper.held();
        tokio::time::timeout(WAIT, held.wait_for(|t| *t == second.prev()))
            .await
            .expect("keeper moved the safe point in time")
            .expect("keeper alive");
        assert_eq!(ts(c.run_gc(c.tso()).await), second.prev());

        // A checkpoint below what GC already reached is refused.
        let err = GcKeeper::hold(&pd, &cfg, first).await.expect_err("passed");
        assert!(matches!(err, GcError::SafePointPassed { .. }), "{err}");
        cancel.cancel();
        keeper.join().await.expect("keeper ok");
        c.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_start_ts_below_the_gc_safe_point_is_fatal() {
    let seed = 17;
    timed(seed, async {
        let c = cluster(1, seed).await;
        let old = ts(c.tso());
        let sp = c.run_gc(c.tso()).await;
        assert!(ts(sp) > old);
        let err = Puller::start(config(&c, old, seed), CancellationToken::new())
            .await
            .expect_err("history is gone");
        assert!(
            matches!(err, PullerError::StartTsBeforeGcSafePoint { .. }),
            "{err}"
        );
        c.shutdown().await;
    })
    .await;
}

/// A reverse scan reads `[start, end)` downwards page by page across regions (a boundary at a
/// key and one between keys, leaders on different stores) and gives exactly the forward
/// scan's pairs, reversed.
#[tokio::test]
async fn reverse_pages_cross_regions_and_equal_the_forward_scan() {
    let seed = 19;
    timed(seed, async {
        let c = cluster(2, seed).await;
        let mut t = c.begin().await.expect("begin");
        for h in (0..60).step_by(2) {
            t.put(key(T1, h), format!("v{h}").into_bytes());
        }
        let at = ts(t.commit().await.expect("commit"));
        let (_, right) = c.split_at(&key(T1, 20)).await.expect("split at a key");
        c.transfer_leader(right, 2).await.expect("transfer");
        c.split_at(&key(T1, 41)).await.expect("split between keys");
        let cancel = CancellationToken::new();
        let pd = PdClient::connect(PdConfig::new(vec![c.pd_url()]), cancel.clone())
            .await
            .expect("pd");
        let reader = SnapshotReader::new(pd, SnapshotConfig::default());
        for (lo, hi) in [(0, 100), (3, 41), (20, 21), (21, 40), (41, 41), (-5, 1)] {
            let (start, end) = (key(T1, lo), key(T1, hi));
            let mut want = reader.scan(&start, &end, at).await.expect("forward");
            want.reverse();
            let mut got = Vec::new();
            let mut upper = end.clone();
            let mut pages = 0;
            loop {
                let (pairs, next) = reader
                    .scan_page_rev(&start, &upper, at, 3)
                    .await
                    .expect("reverse page");
                pages += 1;
                got.extend(pairs.into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
                match next {
                    Some(n) => upper = n,
                    None => break,
                }
            }
            assert_eq!(got, want, "[{lo}, {hi})");
            assert!(pages <= want.len() / 3 + 4, "[{lo}, {hi}): {pages} pages");
        }
        cancel.cancel();
    })
    .await;
}

#[tokio::test]
async fn snapshot_scan_spans_two_regions_at_a_ts_and_resolves_locks() {
    let seed = 18;
    timed(seed, async {
        let c = cluster(2, seed).await;
        let mut t = c.begin().await.expect("begin");
        for h in 0..10 {
            t.put(key(T1, h), format!("a{h}").into_bytes());
        }
        let first = ts(t.commit().await.expect("commit"));
        let mut t = c.begin().await.expect("begin");
        for h in (0..10).step_by(2) {
            t.put(key(T1, h), format!("b{h}").into_bytes());
        }
        t.delete(key(T1, 9));
        let second = ts(t.commit().await.expect("commit"));
        let (_, right) = c.split_at(&key(T1, 5)).await.expect("split");
        c.transfer_leader(right, 2).await.expect("transfer");

        let cancel = CancellationToken::new();
        let pd = PdClient::connect(PdConfig::new(vec![c.pd_url()]), cancel.clone())
            .await
            .expect("pd");
        let reader = Arc::new(SnapshotReader::new(
            pd,
            SnapshotConfig {
                scan_batch: 3, // several pages per region
                ..SnapshotConfig::default()
            },
        ));
        let start = key(T1, 0);
        let end = key(T1, 100);
        let at_first = reader.scan(&start, &end, first).await.expect("scan");
        let want: Vec<(Vec<u8>, Vec<u8>)> = (0..10)
            .map(|h| (key(T1, h), format!("a{h}").into_bytes()))
            .collect();
        assert_eq!(at_first, want);
        let at_second = reader.scan(&start, &end, second).await.expect("scan");
        let want: Vec<(Vec<u8>, Vec<u8>)> = (0..9)
            .map(|h| {
                let v = if h % 2 == 0 { "b" } else { "a" };
                (key(T1, h), format!("{v}{h}").into_bytes())
            })
            .collect();
        assert_eq!(at_second, want);
        assert_eq!(
            reader.get(&key(T1, 9), first).await.expect("get"),
            Some(b"a9".to_vec())
        );
        assert_eq!(reader.get(&key(T1, 9), second).await.expect("get"), None);

        // A live lock below the read ts: the read asks the primary, which pushes the
        // transaction's min commit ts above the read ts, and reads past the lock (the old value)
        // at once; the transaction then commits after the read ts.
        let held = c
            .hold_lock(key(T1, 6), b"c6".to_vec(), Duration::from_secs(600))
            .await
            .expect("lock");
        let read_ts = ts(c.tso());
        let got = reader.get(&key(T1, 6), read_ts).await.expect("get");
        assert_eq!(got, Some(b"b6".to_vec()));
        let scanned = reader
            .scan(&key(T1, 6), &key(T1, 7), read_ts)
            .await
            .expect("scan past the live lock");
        assert_eq!(scanned, vec![(key(T1, 6), b"b6".to_vec())]);
        let commit = ts(held.commit_now().await.expect("commit"));
        assert!(
            commit > read_ts,
            "the pushed transaction commits after the read"
        );
        let scanned = reader
            .scan(&key(T1, 6), &key(T1, 7), commit)
            .await
            .expect("scan");
        assert_eq!(scanned, vec![(key(T1, 6), b"c6".to_vec())]);

        // A client that died after committing its primary (the smallest key): the read finds
        // the primary committed and commits the secondary lock it meets.
        let mut t = c.begin().await.expect("begin");
        t.put(key(T1, 1), b"d1".to_vec());
        t.put(key(T1, 3), b"d3".to_vec());
        let committed = ts(t
            .commit_primary_only(Duration::from_secs(600))
            .await
            .expect("commit the primary"));
        let after = ts(c.tso());
        assert_eq!(
            reader.get(&key(T1, 3), after).await.expect("get"),
            Some(b"d3".to_vec())
        );
        assert_eq!(
            reader.get(&key(T1, 3), committed).await.expect("get"),
            Some(b"d3".to_vec()),
            "committed at its primary's commit ts"
        );

        // A client that died before its commit point: once the locks' TTL has passed, the read
        // rolls back the lock it meets and sees the value before the transaction.
        let mut t = c.begin().await.expect("begin");
        t.put(key(T1, 2), b"e2".to_vec());
        t.put(key(T1, 4), b"e4".to_vec());
        let abandoned = ts(t.start_ts());
        let ttl = Duration::from_millis(5);
        t.abandon(ttl).await.expect("prewrite");
        // The TTL runs on PD's clock: wait until the TSO is past it.
        while ts(c.tso()).physical_ms() <= abandoned.physical_ms() + 5 {
            tokio::task::yield_now().await;
        }
        let read_ts = ts(c.tso());
        let got = reader
            .scan(&key(T1, 2), &key(T1, 5), read_ts)
            .await
            .expect("scan over the abandoned locks");
        let want: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (key(T1, 2), b"b2".to_vec()),
            (key(T1, 3), b"d3".to_vec()),
            (key(T1, 4), b"b4".to_vec()),
        ];
        assert_eq!(got, want);

        // The mounter's synchronous view, from a blocking thread.
        let blocking =
            BlockingSnapshotReader::new(reader.clone(), tokio::runtime::Handle::current());
        let (all, missing) = tokio::task::spawn_blocking(move || {
            let all = blocking.scan(&key(T1, 0), &key(T1, 100), commit);
            let missing = blocking.get(&key(T1, 9), commit);
            (all, missing)
        })
        .await
        .expect("blocking reads");
        assert_eq!(all.expect("scan").len(), 9);
        assert_eq!(missing.expect("get"), None);
        cancel.cancel();
        c.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn spans_are_added_and_removed_while_running() {
    let seed = 19;
    timed(seed, async {
        const T3: i64 = 300;
        let c = cluster(2, seed).await;
        two_store_layout(&c).await;
        let start_ts = ts(c.tso());
        let (h, mut rx, cancel) = start_puller(config(&c, start_ts, seed)).await;
        let mut log = Log::default();
        let mut expected = BTreeMap::new();
        let t = write_batch(&c, 1, &mut expected).await;
        log.until(&mut rx, t).await;

        // Below the emitted watermark: refused (its rows would come after a Resolved).
        let err = h
            .add_span(table_record_span(TableId(T3)), start_ts)
            .await
            .expect_err("below the watermark");
        assert!(matches!(err, PullerError::Capture(_)), "{err}");
        let at = *h.resolved_ts().borrow();
        let sub = h
            .add_span(table_record_span(TableId(T3)), at)
            .await
            .expect("add");
        assert_eq!(sub, 2, "initial spans are 0 and 1");
        h.remove_span(1).await.expect("remove T2");

        let mut last = Ts::ZERO;
        for i in 0..3 {
            let mut t = c.begin().await.expect("begin");
            let start = ts(t.start_ts());
            t.put(key(T1, 900 + i), b"one".to_vec());
            t.put(key(T2, 900 + i), b"gone".to_vec());
            t.put(key(T3, 900 + i), b"three".to_vec());
            let commit = ts(t.commit().await.expect("commit"));
            expected.insert((start, key(T1, 900 + i)), (commit, Op::Put));
            expected.insert((start, key(T3, 900 + i)), (commit, Op::Put));
            last = commit;
        }
        log.until(&mut rx, last).await;
        log.assert_exactly(&expected);
        stop(h, cancel, &c).await;
    })
    .await;
}

#[tokio::test]
async fn a_full_output_holds_back_the_streams_and_nothing_is_lost() {
    let seed = 20;
    timed(seed, async {
        // TiKV's side congests quickly too (its sink quota), forcing region re-subscriptions.
        let c = SimCluster::start(SimConfig {
            stores: 2,
            seed,
            resolved_ts_interval: Duration::from_millis(50),
            sink_memory_quota: 64 << 10,
            ..SimConfig::default()
        })
        .await
        .expect("cluster");
        two_store_layout(&c).await;
        let start_ts = ts(c.tso());
        let mut cfg = config(&c, start_ts, seed);
        cfg.output_quota_bytes = 8 << 10;
        let (h, mut rx, cancel) = start_puller(cfg).await;
        let mut expected = BTreeMap::new();
        let mut last = Ts::ZERO;
        // Nobody reads while ~5 MiB of rows are written: more than the HTTP/2 windows (hyper's
        // default stream window is 2 MiB) plus both quotas hold.
        for i in 0..300i64 {
            let mut t = c.begin().await.expect("begin");
            let start = ts(t.start_ts());
            let table = if i % 2 == 0 { T1 } else { T2 };
            t.put(key(table, i), vec![b'x'; 16 << 10]);
            let commit = ts(t.commit().await.expect("commit"));
            expected.insert((start, key(table, i)), (commit, Op::Put));
            last = commit;
        }
        let mut log = Log::default();
        log.until(&mut rx, last).await;
        log.assert_exactly(&expected);
        stop(h, cancel, &c).await;
    })
    .await;
}

// ---- TLS refusals ---------------------------------------------------------------------------

#[path = "common/tls.rs"]
mod tls;

/// Starts a one-store cluster serving `server` TLS (plain when `None`).
async fn tls_cluster(server: Option<tibinlog::sim::server::tls::SimTls>) -> SimCluster {
    SimCluster::start(SimConfig {
        stores: 1,
        resolved_ts_interval: Duration::from_millis(50),
        tls: server,
        ..SimConfig::default()
    })
    .await
    .expect("cluster start")
}

/// Each certificate problem between us and PD ends `PdClient::connect` at once with a refusal
/// that names the member and says what is wrong; none is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_problems_with_pd_are_refusals_naming_the_member() {
    use tibinlog::sim::pki::CertSpec;
    use tls::{client_tls, sim_tls, TestPki, CLIENT_CN};
    timed(0, async {
        let pki = TestPki::new();
        let other = TestPki::new();
        let ca = pki.ca.ca_pem();
        let mut renamed = CertSpec::server("tidb-server");
        renamed.names = vec!["pd.example.com".into()];
        let cases = vec![
            (
                "a server certificate of another CA",
                Some(pki.sim_tls()),
                other.cluster_tls(),
                "unknownissuer",
            ),
            (
                "an expired server certificate",
                Some(sim_tls(
                    ca,
                    &pki.issue(&CertSpec::server("tidb-server").expired()),
                )),
                pki.cluster_tls(),
                "expired",
            ),
            (
                "a server certificate for another name",
                Some(sim_tls(ca, &pki.issue(&renamed))),
                pki.cluster_tls(),
                "not valid for name",
            ),
            (
                "an expired client certificate",
                Some(pki.sim_tls()),
                client_tls(ca, &pki.issue(&CertSpec::client(CLIENT_CN).expired())),
                "alert",
            ),
            (
                "a client certificate of another CA",
                Some(pki.sim_tls()),
                client_tls(ca, &other.client),
                "alert",
            ),
            (
                "a common name PD does not allow",
                Some(tibinlog::sim::server::tls::SimTls {
                    pd_allowed_cn: vec!["someone-else".into()],
                    ..pki.sim_tls()
                }),
                pki.cluster_tls(),
                "alert",
            ),
            (
                "TLS to a plain PD",
                None,
                pki.cluster_tls(),
                "does not speak tls",
            ),
        ];
        for (case, server, client, expect) in cases {
            let c = tls_cluster(server).await;
            let addr = c.pd_addr().to_string();
            let mut cfg = PdConfig::new(vec![addr.clone()]);
            cfg.tls = Some(client);
            let cancel = CancellationToken::new();
            let r = tokio::time::timeout(WAIT, PdClient::connect(cfg, cancel.clone()))
                .await
                .unwrap_or_else(|_| panic!("{case}: connect did not end"));
            cancel.cancel();
            match r {
                Err(e @ PdError::Refused(_)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(&addr), "{case}: {msg}");
                    assert!(msg.to_lowercase().contains(expect), "{case}: {msg}");
                    assert!(!e.is_retryable(), "{case}");
                }
                Err(e) => panic!("{case}: not a refusal: {e}"),
                Ok(_) => panic!("{case}: connected"),
            }
            c.shutdown().await;
        }
        // The control: the right certificates connect.
        let c = tls_cluster(Some(pki.sim_tls())).await;
        assert!(c.pd_url().starts_with("https://"), "{}", c.pd_url());
        let mut cfg = PdConfig::new(vec![c.pd_url()]);
        cfg.tls = Some(pki.cluster_tls());
        let cancel = CancellationToken::new();
        let pd = PdClient::connect(cfg, cancel.clone())
            .await
            .expect("mutual TLS");
        pd.tso().await.expect("a timestamp over TLS");
        // PD's HTTP API on the same port, over the same TLS.
        let stats = pd
            .region_stats(b"", b"")
            .await
            .expect("region stats over TLS");
        assert_eq!(stats.count, 1, "{stats:?}");
        cancel.cancel();
        c.shutdown().await;
    })
    .await;
}

/// TiKV checks the common name on every call (UNAUTHENTICATED "Common name check fail"): the
/// snapshot reader and the puller stop with that refusal instead of retrying the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_common_name_tikv_does_not_allow_stops_reads_and_capture() {
    use tls::TestPki;
    timed(0, async {
        let pki = TestPki::new();
        let c = tls_cluster(Some(tibinlog::sim::server::tls::SimTls {
            tikv_allowed_cn: vec!["someone-else".into()],
            ..pki.sim_tls()
        }))
        .await;
        let mut pd_cfg = PdConfig::new(vec![c.pd_url()]);
        pd_cfg.tls = Some(pki.cluster_tls());
        let cancel = CancellationToken::new();
        let pd = PdClient::connect(pd_cfg.clone(), cancel.clone())
            .await
            .expect("PD allows every name");
        let reader = SnapshotReader::new(pd.clone(), SnapshotConfig::default());
        let at = ts(c.tso());
        let err = tokio::time::timeout(WAIT, reader.get(&key(T1, 1), at))
            .await
            .expect("the read ended")
            .expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains("Common name check fail"), "{msg}");
        assert!(
            tibinlog::security::is_refused(&err),
            "a refusal, not a region retry: {msg}"
        );

        let mut cfg = config(&c, at, 0);
        cfg.pd = pd_cfg;
        let (h, _rx) = Puller::start(cfg, cancel.clone())
            .await
            .expect("puller start");
        let err = tokio::time::timeout(WAIT, h.join())
            .await
            .expect("the puller stopped")
            .expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains("Common name check fail"), "{msg}");
        assert!(
            matches!(
                err,
                PullerError::Capture(tibinlog::capture::error::CaptureError::Refused { .. })
            ),
            "{msg}"
        );
        cancel.cancel();
        c.shutdown().await;
    })
    .await;
}

/// Capture accounts the memory of its per-region state: with 40 regions subscribed it reports
/// a small fixed cost per region; prewrites waiting for their commit (4 MiB of values under
/// held locks) show up in it, and leave it once they commit and their rows are passed on.
#[tokio::test]
async fn capture_reports_its_state_bytes_per_region_with_pending_prewrites() {
    let seed = 17;
    timed(seed, async {
        let c = cluster(2, seed).await;
        two_store_layout(&c).await;
        for h in (25..1_000).step_by(50) {
            c.split_at(&key(T1, h)).await.expect("split T1");
            c.split_at(&key(T2, h)).await.expect("split T2");
        }
        let start_ts = ts(c.tso());
        let mut cfg = config(&c, start_ts, seed);
        let metrics = tibinlog::metrics::CaptureMetrics::default();
        cfg.metrics = metrics.clone();
        let (h, mut rx, cancel) = start_puller(cfg).await;
        let mut log = Log::default();
        let mut expected = BTreeMap::new();
        let t = write_batch(&c, 1, &mut expected).await;
        log.until(&mut rx, t).await;
        // Reported once a second; wait for a report that sees every region.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let regions = loop {
            let (_, _, normal) = metrics.region_totals();
            let per = metrics.state_bytes_per_region.get();
            if normal >= 40 && per > 0 && metrics.state_bytes.get() >= per * normal {
                break normal;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no state report for every region"
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let idle = metrics.state_bytes.get();
        let idle_per_region = metrics.state_bytes_per_region.get();
        assert!(
            idle_per_region < 8 << 10,
            "{idle_per_region} bytes per idle region"
        );

        // 4 MiB of prewrites held: 64 keys of 64 KiB across the regions of T1.
        const VALUE: usize = 64 << 10;
        let mut txn = c.begin().await.expect("begin");
        for i in 0..64i64 {
            txn.put(key(T1, i * 15), vec![b'x'; VALUE]);
        }
        let held = txn
            .commit_after(Duration::from_secs(600))
            .await
            .expect("prewrite and hold");
        let pending = 64 * VALUE as i64;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while metrics.state_bytes.get() < idle + pending {
            assert!(
                std::time::Instant::now() < deadline,
                "held prewrites never showed in the state bytes: {} (idle {idle})",
                metrics.state_bytes.get()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let with_prewrites = metrics.state_bytes.get();

        let commit = ts(held.commit_now().await.expect("commit"));
        let t = write_batch(&c, 2, &mut expected).await;
        log.until(&mut rx, commit.max(t)).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while metrics.state_bytes.get() > idle + pending / 4 {
            assert!(
                std::time::Instant::now() < deadline,
                "committed prewrites stayed in the state bytes: {} (idle {idle})",
                metrics.state_bytes.get()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!(
            "{regions} regions: {idle} state bytes idle ({idle_per_region} per region), \
             {with_prewrites} with {pending} bytes of prewrites held, {} after their commit",
            metrics.state_bytes.get()
        );
        stop(h, cancel, &c).await;
    })
    .await;
}

/// Many regions and many subscriptions at once: 30,000 regions of one table over three
/// stores, subscribed as 3,000 spans of ten regions each. Every region initializes once (the
/// count of initialized regions never falls, which it does when a store stream breaks and its
/// regions are subscribed again), no region reports an error, and the watermark passes a ts
/// taken after the start.
///
/// This is the load under which a capture that stopped reading a stream while its puller was
/// busy subscribing lost the stream: HTTP/2 buffered thousands of small messages
/// (INITIALIZED, resolved ts) and closed the connection on its small-frame budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_thousand_regions_initialize_once_without_a_stream_failure() {
    const REGIONS: i64 = 30_000;
    const PER_SPAN: i64 = 10;
    let seed = 18;
    timed(seed, async {
        let c = SimCluster::start(SimConfig {
            stores: 3,
            seed,
            resolved_ts_interval: Duration::from_secs(1),
            ..SimConfig::default()
        })
        .await
        .expect("cluster");
        let setup = std::time::Instant::now();
        for h in 1..=REGIONS {
            let (left, _) = c.split_at(&key(T1, h)).await.expect("split");
            let store = 1 + (h as u64 % 3);
            if store != 1 {
                c.transfer_leader(left, store).await.expect("transfer");
            }
        }
        let setup = setup.elapsed();
        let start_ts = ts(c.tso());
        let mut scratch = Vec::new();
        let mut enc = |h: i64| {
            encode_key_into(&key(T1, h), &mut scratch);
            scratch.clone()
        };
        let spans: Vec<Span> = (0..REGIONS / PER_SPAN)
            .map(|i| Span {
                start: enc(i * PER_SPAN),
                end: enc((i + 1) * PER_SPAN),
            })
            .collect();
        let mut cfg = PullerConfig::new(vec![c.pd_url()], spans, start_ts);
        cfg.seed = seed;
        let metrics = tibinlog::metrics::CaptureMetrics::default();
        cfg.metrics = metrics.clone();
        let began = std::time::Instant::now();
        let (h, mut rx, cancel) = start_puller(cfg).await;
        let mut log = Log::default();
        // Spans [0, 10) … [29990, 30000): the regions starting at handles 1 … 29999 and the
        // one holding handle 0.
        let want = REGIONS;
        let mut normal_seen = 0i64;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (_, _, normal) = metrics.region_totals();
            assert!(
                normal >= normal_seen,
                "initialized regions fell from {normal_seen} to {normal}: a stream was lost"
            );
            normal_seen = normal;
            if normal >= want {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{normal} of {want} regions initialized after 60 s"
            );
            // Drain what the puller emits meanwhile (watermarks only: nothing is written).
            while let Some(ev) = rx.try_recv() {
                log.on_event(ev);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let initialized = began.elapsed();
        let after = ts(c.tso());
        log.until(&mut rx, after).await;
        assert_eq!(metrics.region_errors.get(), 0, "no region error");
        assert_eq!(
            metrics.region_totals().2,
            normal_seen,
            "no region subscribed again"
        );
        assert!(log.rows.is_empty(), "nothing was written");
        eprintln!(
            "{want} regions in {} spans: set up in {:.1} s, initialized in {:.1} s, watermark past \
             a later ts after {:.1} s",
            REGIONS / PER_SPAN,
            setup.as_secs_f64(),
            initialized.as_secs_f64(),
            began.elapsed().as_secs_f64()
        );
        stop(h, cancel, &c).await;
    })
    .await;
}

/// Async-commit transactions abandoned by their clients are decided by their secondaries, not
/// by their primary's TTL: every key prewritten means committed (at the largest min commit ts),
/// a key never prewritten means rolled back (and can no longer be).
#[tokio::test]
async fn async_commit_locks_are_decided_by_their_secondaries() {
    let seed = 48;
    timed(seed, async {
        let c = cluster(1, seed).await;
        let mut t = c.begin().await.expect("begin");
        for h in 0..6 {
            t.put(key(T1, h), format!("a{h}").into_bytes());
        }
        ts(t.commit().await.expect("commit"));
        let cancel = CancellationToken::new();
        let pd = PdClient::connect(PdConfig::new(vec![c.pd_url()]), cancel.clone())
            .await
            .expect("pd");
        let reader = SnapshotReader::new(pd, SnapshotConfig::default());
        let ttl = Duration::from_millis(1);

        // Every key prewritten, then the client died: committed, whatever the primary's TTL.
        let mut t = c.begin().await.expect("begin");
        for h in 0..3 {
            t.put(key(T1, h), format!("b{h}").into_bytes());
        }
        let commit = ts(t.abandon_async(ttl, true).await.expect("prewrite"));
        let read_ts = ts(c.tso());
        assert!(read_ts >= commit);
        let got = reader
            .scan(&key(T1, 0), &key(T1, 3), read_ts)
            .await
            .expect("scan over the async-commit locks");
        let want: Vec<(Vec<u8>, Vec<u8>)> = (0..3)
            .map(|h| (key(T1, h), format!("b{h}").into_bytes()))
            .collect();
        assert_eq!(
            got, want,
            "an async-commit transaction with every key prewritten"
        );
        assert_eq!(
            reader.get(&key(T1, 2), commit).await.expect("get"),
            Some(b"b2".to_vec()),
            "committed at the commit ts its prewrite computed"
        );

        // The last key never prewritten: rolled back, the old values stay.
        let mut t = c.begin().await.expect("begin");
        for h in 3..6 {
            t.put(key(T1, h), format!("c{h}").into_bytes());
        }
        t.abandon_async(ttl, false).await.expect("prewrite");
        let read_ts = ts(c.tso());
        let got = reader
            .scan(&key(T1, 3), &key(T1, 6), read_ts)
            .await
            .expect("scan over the half-prewritten transaction");
        let want: Vec<(Vec<u8>, Vec<u8>)> = (3..6)
            .map(|h| (key(T1, h), format!("a{h}").into_bytes()))
            .collect();
        assert_eq!(got, want, "an async-commit transaction missing a prewrite");
        cancel.cancel();
        c.shutdown().await;
    })
    .await;
}

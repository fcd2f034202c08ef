//! The capture core end to end against the simulated cluster over real gRPC: seeded OLTP
//! workloads (multi-table, large, 1PC and async-commit transactions, DDL) with random faults
//! (splits, merges, leader moves, store restarts, held locks, delayed resolved ts, commit
//! before prewrite) go through puller → sorter → mounter, and what comes out must equal the
//! simulator's truth log: same transactions, same order, same values, nothing missing,
//! nothing doubled, never a partial transaction, never a transaction at or below a
//! watermark already yielded.

mod common;

use common::tls::TestPki;
use common::truth::{self, row_json};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use serde_json::{json, Value as Json};
use tibinlog::changefeed::{ChangeEvent, Changefeed, ChangefeedConfig};
use tibinlog::model::Ts;
use tibinlog::mounter::TableFilter;
use tibinlog::sim::cli::{SimArgs, SimBuilder, SimHandle};
use tibinlog::sim::tidb::TruthCollector;
use tokio_util::sync::CancellationToken;

/// Numbers the sorter dirs of one run (two feeds may start at the same ts).
static SORTER_DIRS: AtomicU64 = AtomicU64::new(0);

/// Upper bound of the whole catch-up after the workload ends.
const CATCH_UP: Duration = Duration::from_secs(120);

/// Truth-log transactions committed after `after`, normalised as the consumer renders its own.
fn truth_after(lines: &[String], after: Ts) -> Vec<Json> {
    truth::normalized(lines)
        .into_iter()
        .filter(|v| v["commit_ts"].as_u64().is_some_and(|c| c > after.0))
        .collect()
}

/// What a consumer saw, with the stream invariants checked as it goes.
#[derive(Debug, Default)]
struct Consumer {
    txns: Vec<Json>,
    /// Rows of the open transaction: (start_ts, commit_ts, rows).
    open: Option<(u64, u64, Vec<String>)>,
    /// Last (commit_ts, start_ts) finished.
    last: (u64, u64),
    /// Last resolved ts yielded.
    resolved: u64,
    pieces: u64,
}

impl Consumer {
    fn on_event(&mut self, ev: ChangeEvent) {
        match ev {
            ChangeEvent::Rows(p) => {
                let (s, c) = (p.start_ts.0, p.commit_ts.0);
                assert!(
                    c > self.resolved,
                    "txn {s}@{c} at or below resolved {}",
                    self.resolved
                );
                self.pieces += 1;
                if p.first {
                    assert!(
                        self.open.is_none(),
                        "piece opens {s}@{c} inside another txn"
                    );
                    assert!(
                        (c, s) > self.last,
                        "txn {s}@{c} out of order after {:?}",
                        self.last
                    );
                    self.open = Some((s, c, Vec::new()));
                }
                let open = self
                    .open
                    .as_mut()
                    .expect("continuation without a first piece");
                assert_eq!((open.0, open.1), (s, c), "piece of another transaction");
                // Grouped by table, deletes before puts inside a table.
                open.2
                    .extend(p.rows.iter().map(|r| row_json(r).to_string()));
                if p.last {
                    let (s, c, mut rows) = self.open.take().expect("open");
                    rows.sort();
                    let rows: Vec<Json> = rows
                        .iter()
                        .map(|r| serde_json::from_str(r).expect("json"))
                        .collect();
                    self.txns
                        .push(json!({"start_ts": s, "commit_ts": c, "rows": rows, "ddl": null}));
                    self.last = (c, s);
                }
            }
            ChangeEvent::Ddl(d) => {
                assert!(self.open.is_none(), "DDL inside a transaction");
                let (s, c) = (d.start_ts.0, d.commit_ts.0);
                assert!(
                    c > self.resolved,
                    "DDL {s}@{c} at or below resolved {}",
                    self.resolved
                );
                assert!(
                    (c, s) >= self.last,
                    "DDL {s}@{c} out of order after {:?}",
                    self.last
                );
                self.txns
                    .push(json!({"start_ts": s, "commit_ts": c, "rows": [], "ddl": d.query}));
                self.last = (c, s);
            }
            ChangeEvent::Resolved(ts) => {
                assert!(self.open.is_none(), "resolved ts inside a transaction");
                assert!(ts.0 >= self.resolved, "resolved ts went back");
                self.resolved = ts.0;
            }
        }
    }

    /// Keeps what a restart from `checkpoint` does not yield again.
    fn cut_at(&mut self, checkpoint: u64) {
        self.open = None;
        self.txns
            .retain(|t| t["commit_ts"].as_u64().is_some_and(|c| c <= checkpoint));
        self.resolved = checkpoint;
        self.last = (checkpoint, u64::MAX);
    }
}

struct Run {
    sim: SimHandle,
    truth: TruthCollector,
    start_ts: Ts,
    sorter_dir: tempfile::TempDir,
    /// Set when PD and TiKV serve mutual TLS.
    tls: Option<TestPki>,
    /// The changefeed's `prewrite_memory_bytes` (0: every prewrite goes to the sorter's disk).
    prewrite_memory_bytes: usize,
}

/// A cluster ready to run `txns` transactions at `rate` per second (0 = as fast as it can) once
/// the test calls `start_workload`.
async fn start_sim(seed: u64, txns: u64, rate: f64, chaos: bool) -> Run {
    start_sim_with(seed, txns, rate, chaos, 1, false).await
}

/// [`start_sim`] with `pd_members` PD members, over mutual TLS when `tls`.
async fn start_sim_with(
    seed: u64,
    txns: u64,
    rate: f64,
    chaos: bool,
    pd_members: usize,
    tls: bool,
) -> Run {
    let truth = TruthCollector::new();
    let pki = tls.then(TestPki::new);
    let args = SimArgs {
        ca: pki.as_ref().map(|p| p.file("ca.pem", p.ca.ca_pem())),
        cert: pki
            .as_ref()
            .map(|p| p.file("server.pem", &p.server.cert_pem)),
        key: pki
            .as_ref()
            .map(|p| p.file("server-key.pem", &p.server.key_pem)),
        pd_members,
        stores: 3,
        regions_per_table: 2,
        rate,
        txns: Some(txns),
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        chaos_interval: chaos.then(|| Duration::from_millis(150)),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    };
    // Held back until the test's feed is running (`start_workload`).
    let sim = SimBuilder::new(args)
        .truth_sink(Box::new(truth.clone()))
        .paused()
        .start(CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("sim start (seed {seed}): {e:#}"));
    let start_ts = sim.cluster().tso();
    assert_eq!(sim.cluster().tls(), tls);
    Run {
        sim,
        truth,
        start_ts: Ts(start_ts.0),
        sorter_dir: tempfile::tempdir().expect("tempdir"),
        tls: pki,
        prewrite_memory_bytes: tibinlog::capture::matcher::DEFAULT_PREWRITE_MEMORY_BYTES,
    }
}

async fn start_feed(run: &Run, start_ts: Ts) -> Changefeed {
    start_feed_with(run, start_ts, TableFilter::all(), |_| {}).await
}

/// [`start_feed`] with a filter and a last change to the configuration.
async fn start_feed_with(
    run: &Run,
    start_ts: Ts,
    filter: TableFilter,
    tune: impl FnOnce(&mut ChangefeedConfig),
) -> Changefeed {
    // A fresh sorter dir per start: a restarted process would not share the old one's handle.
    let mut cfg = ChangefeedConfig::new(
        vec![run.sim.cluster().pd_url()],
        start_ts,
        filter,
        run.sorter_dir.path().join(format!(
            "sorter-{}-{}",
            start_ts.0,
            SORTER_DIRS.fetch_add(1, Relaxed)
        )),
    );
    // Small chunks so that large transactions come out in several pieces.
    cfg.sorter.max_chunk_bytes = 64 << 10;
    cfg.tls = run.tls.as_ref().map(TestPki::cluster_tls);
    cfg.prewrite_memory_bytes = run.prewrite_memory_bytes;
    tune(&mut cfg);
    tokio::time::timeout(
        Duration::from_secs(30),
        Changefeed::start(cfg, CancellationToken::new()),
    )
    .await
    .expect("changefeed start timed out")
    .expect("changefeed start")
}

/// Consumes until the resolved ts passes `until`, advancing the checkpoint on each resolved ts.
/// With `stop_after_txns = Some(n)` it returns at the first resolved ts once the consumer holds
/// at least n transactions instead.
async fn consume(
    feed: &mut Changefeed,
    c: &mut Consumer,
    until: Option<u64>,
    stop_after_txns: Option<usize>,
) {
    loop {
        let ev = tokio::time::timeout(CATCH_UP, feed.next())
            .await
            .expect("no event in time")
            .expect("changefeed ended")
            .expect("changefeed error");
        let resolved = matches!(ev, ChangeEvent::Resolved(_));
        c.on_event(ev);
        if resolved {
            feed.advance_checkpoint(Ts(c.resolved));
            if until.is_some_and(|u| c.resolved >= u) {
                return;
            }
            if stop_after_txns.is_some_and(|n| c.txns.len() >= n) {
                return;
            }
        }
    }
}

fn max_commit_ts(lines: &[String]) -> u64 {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok()?["commit_ts"].as_u64())
        .max()
        .unwrap_or(0)
}

/// The capture's debug lines (its silent drops name the transaction they drop), kept in memory
/// for a failure to quote; at most [`CAPTURE_LOG_LIMIT`] bytes.
static CAPTURE_LOG: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
const CAPTURE_LOG_LIMIT: usize = 64 << 20;

struct CaptureLog;

impl std::io::Write for CaptureLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut log = CAPTURE_LOG.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() + buf.len() <= CAPTURE_LOG_LIMIT {
            log.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Routes the capture's debug lines to [`CAPTURE_LOG`] (once per process).
fn keep_capture_log() {
    let filter = tracing_subscriber::EnvFilter::new("warn,tibinlog::capture=debug");
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(|| CaptureLog)
        .try_init();
}

/// The capture's debug lines that name start ts `start_ts`.
fn capture_lines_about(start_ts: u64) -> Vec<String> {
    let log = CAPTURE_LOG.lock().unwrap_or_else(|p| p.into_inner());
    let needle = format!("start_ts={start_ts}");
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_owned)
        .collect()
}

fn assert_same(ours: &[Json], want: &[Json], seed: u64) {
    // Each transaction once (the DDLs of a `CREATE TABLES` batch share one start and commit ts:
    // as many as the truth log has).
    let count = |txns: &[Json]| {
        let mut by_txn: BTreeMap<(u64, u64), usize> = BTreeMap::new();
        for t in txns {
            *by_txn
                .entry((
                    t["commit_ts"].as_u64().expect("commit_ts"),
                    t["start_ts"].as_u64().expect("start_ts"),
                ))
                .or_default() += 1;
        }
        by_txn
    };
    let (have, should) = (count(ours), count(want));
    if let Some((k, n)) = have.iter().find(|(k, &n)| should.get(k) != Some(&n)) {
        panic!(
            "seed {seed}: transaction {k:?} came out {n} times, the truth log has it {} times",
            should.get(k).copied().unwrap_or(0)
        );
    }
    let missing: Vec<&(u64, u64)> = should.keys().filter(|k| !have.contains_key(k)).collect();
    assert!(
        missing.is_empty(),
        "seed {seed}: {} transactions (commit ts, start ts) never came out: {:?}\n\
         the capture's drops of them:\n{}",
        missing.len(),
        &missing[..missing.len().min(20)],
        missing
            .iter()
            .take(20)
            .flat_map(|(_, s)| capture_lines_about(*s))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for (i, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(a, b, "seed {seed}: transaction {i} differs (order)");
    }
    assert_eq!(ours.len(), want.len(), "seed {seed}: transaction count");
}

async fn run_seed(seed: u64, txns: u64, chaos: bool) {
    run_seed_over(seed, txns, chaos, false).await;
}

/// [`run_seed`], over mutual TLS when `tls`.
async fn run_seed_over(seed: u64, txns: u64, chaos: bool, tls: bool) {
    run_seed_with(seed, txns, chaos, tls, None).await;
}

/// [`run_seed_over`] with the changefeed's prewrite memory budget set.
async fn run_seed_with(
    seed: u64,
    txns: u64,
    chaos: bool,
    tls: bool,
    prewrite_memory_bytes: Option<usize>,
) {
    keep_capture_log();
    let mut run = start_sim_with(seed, txns, 0.0, chaos, 1, tls).await;
    if let Some(b) = prewrite_memory_bytes {
        run.prewrite_memory_bytes = b;
    }
    let mut feed = start_feed(&run, run.start_ts).await;
    run.sim.start_workload();
    let mut c = Consumer::default();
    tokio::select! {
        _ = consume(&mut feed, &mut c, None, None) => unreachable!("consume without a bound"),
        _ = run.sim.workload_done() => {}
    }
    assert_eq!(run.sim.failure(), None, "seed {seed}: the workload failed");
    let lines = run.truth.lines();
    consume(&mut feed, &mut c, Some(max_commit_ts(&lines)), None).await;
    assert!(c.open.is_none());
    let want = truth_after(&lines, run.start_ts);
    let summary = run.sim.summary();
    assert!(
        want.len() as u64 >= txns * 9 / 10,
        "seed {seed}: only {} truth transactions after the start ts",
        want.len()
    );
    assert_same(&c.txns, &want, seed);
    if chaos {
        assert!(summary.faults > 0, "seed {seed}: no fault was injected");
    }
    assert!(summary.ddls > 0, "seed {seed}: no DDL in the run");
    let (lines, drops) = {
        let log = CAPTURE_LOG.lock().unwrap_or_else(|p| p.into_inner());
        let text = String::from_utf8_lossy(&log);
        let drops = text.lines().filter(|l| l.contains(" dropped")).count();
        (text.lines().count(), drops)
    };
    eprintln!(
        "seed {seed}: {} txns, {} row changes, {} faults, {} pieces; capture debug lines so far \
         (all tests of this binary): {lines}, {drops} of them drops",
        want.len(),
        summary.row_changes,
        summary.faults,
        c.pieces
    );
    feed.close().await;
    run.sim.shutdown().await.expect("sim shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workload_with_faults_equals_truth_seed_1() {
    run_seed(1, 10_000, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workload_with_faults_equals_truth_seed_2() {
    run_seed(2, 10_000, true).await;
}

/// The same with no memory for prewrites: every one goes to the sorter's RocksDB and every
/// commit, rollback and scan replay reads it back (the huge-transaction path, under faults).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workload_with_faults_and_every_prewrite_spilled_equals_truth() {
    run_seed_with(3, 10_000, true, false, Some(0)).await;
}

/// The same workload and faults with PD and TiKV serving mutual TLS (client certificates,
/// `https://` member URLs, store reconnects after restarts all over TLS).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workload_with_faults_over_mutual_tls_equals_truth() {
    run_seed_over(4, 10_000, true, true).await;
}

/// Stop at a seeded random point, restart from the checkpoint: the combined output still
/// equals the truth log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_from_checkpoint_loses_and_doubles_nothing() {
    for seed in [7u64, 8] {
        // Started once the feed runs and paced (3,000 transactions take 10 s), so that the stop
        // lands inside the stream on a loaded machine too.
        let run = start_sim(seed, 3_000, 300.0, true).await;
        let mut feed = start_feed(&run, run.start_ts).await;
        run.sim.start_workload();
        let mut c = Consumer::default();
        // A seeded stop point: the first resolved ts after 200..=1100 transactions.
        let stop_after = 200 + (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 900) as usize;
        consume(&mut feed, &mut c, None, Some(stop_after)).await;
        // Some output past the checkpoint may have been seen but not checkpointed.
        let checkpoint = feed.checkpoint();
        feed.close().await;
        c.cut_at(checkpoint.0);
        let kept = c.txns.len();

        let mut feed = start_feed(&run, checkpoint).await;
        // A consumer still writing what the first feed yielded may report a checkpoint past
        // anything this feed has yielded: the feed stays at its start until it yields more.
        feed.advance_checkpoint(Ts(u64::MAX - 1));
        assert_eq!(
            feed.checkpoint(),
            checkpoint,
            "seed {seed}: a checkpoint past what the feed yielded"
        );
        tokio::select! {
            _ = consume(&mut feed, &mut c, None, None) => unreachable!(),
            _ = run.sim.workload_done() => {}
        }
        assert_eq!(run.sim.failure(), None, "seed {seed}: the workload failed");
        let lines = run.truth.lines();
        consume(&mut feed, &mut c, Some(max_commit_ts(&lines)), None).await;
        let want = truth_after(&lines, run.start_ts);
        assert!(
            kept > 0 && kept < want.len(),
            "seed {seed}: stop point {kept} of {}",
            want.len()
        );
        assert_same(&c.txns, &want, seed);
        feed.close().await;
        run.sim.shutdown().await.expect("sim shutdown");
    }
}

/// A restart whose checkpoint is the commit ts of a CREATE TABLE job's done record: TiDB moves
/// the job to its history table in a later transaction, so the restarted feed sees only that
/// copy, of a job its starting schema snapshot already has. It must not come out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_at_a_create_table_does_not_replay_it_from_the_ddl_history() {
    let seed = 12;
    let run = start_sim(seed, 1_500, 0.0, false).await;
    run.sim.start_workload();
    tokio::time::timeout(CATCH_UP, run.sim.workload_done())
        .await
        .expect("workload finishes");
    assert_eq!(run.sim.failure(), None, "seed {seed}: the workload failed");
    let lines = run.truth.lines();
    let end = max_commit_ts(&lines);
    let mut creates: Vec<u64> = truth_after(&lines, run.start_ts)
        .iter()
        .filter(|t| {
            t["ddl"]
                .as_str()
                .is_some_and(|q| q.starts_with("CREATE TABLE"))
        })
        .filter_map(|t| t["commit_ts"].as_u64())
        .collect();
    creates.dedup();
    assert!(
        !creates.is_empty(),
        "seed {seed}: the workload creates tables"
    );
    // Spread over the run: the first, a middle one and the last.
    let picks: std::collections::BTreeSet<u64> = [0, creates.len() / 2, creates.len() - 1]
        .map(|i| creates[i])
        .into();
    for checkpoint in picks {
        let mut feed = start_feed(&run, Ts(checkpoint)).await;
        let mut c = Consumer::default();
        consume(&mut feed, &mut c, Some(end), None).await;
        assert_same(&c.txns, &truth_after(&lines, Ts(checkpoint)), seed);
        feed.close().await;
    }
    run.sim.shutdown().await.expect("sim shutdown");
}

/// PD as a 3-member cluster under the running workload and TiKV faults: the leader moves, the
/// leader dies, the member the client was configured with dies while another leads (the client
/// finds the others through what `GetMembers` told it), members come back as followers; and
/// TiKV stores come back on new addresses. A TSO
/// client keeps getting strictly increasing timestamps across every change (the old leader's
/// TSO stream ends), and the changefeed's output equals the truth log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pd_leader_changes_and_member_deaths_lose_nothing() {
    pd_faults_under_load(31, false).await;
}

/// The PD-cluster faults over mutual TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pd_leader_changes_over_mutual_tls_lose_nothing() {
    pd_faults_under_load(31, true).await;
}

async fn pd_faults_under_load(seed: u64, tls: bool) {
    use tibinlog::capture::pd::{PdClient, PdConfig};
    let run = start_sim_with(seed, 1_500, 500.0, true, 3, tls).await;
    let cluster = run.sim.cluster().clone();
    let listed = cluster.pd_members();
    let members: Vec<u64> = listed.iter().map(|(id, _)| *id).collect();
    assert_eq!(members.len(), 3);
    let first = listed
        .iter()
        .find(|(_, url)| *url == cluster.pd_url())
        .map(|(id, _)| *id)
        .expect("the configured member is listed");
    assert_eq!(
        cluster.pd_leader(),
        first,
        "the configured member leads at start"
    );
    let mut feed = start_feed(&run, run.start_ts).await;
    let stop = CancellationToken::new();
    let client_stop = CancellationToken::new();
    let _client_guard = client_stop.clone().drop_guard();
    let mut tso_cfg = PdConfig::new(vec![cluster.pd_url()]);
    tso_cfg.tls = run.tls.as_ref().map(TestPki::cluster_tls);
    let tso_client = PdClient::connect(tso_cfg, client_stop.clone())
        .await
        .expect("PD client");
    run.sim.start_workload();

    // TSO calls all along.
    let tso = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut last, mut n) = (Ts(0), 0u64);
            while !stop.is_cancelled() {
                let ts = tso_client
                    .tso()
                    .await
                    .expect("a timestamp across PD changes");
                assert!(ts > last, "TSO went from {last:?} to {ts:?}");
                (last, n) = (ts, n + 1);
                tokio::task::yield_now().await;
            }
            n
        })
    };
    // PD faults, one every 150 ms while the workload runs.
    let faults = {
        let (cluster, stop) = (cluster.clone(), stop.clone());
        let members = members.clone();
        tokio::spawn(async move {
            let (mut done, mut moved) = (0u32, 0u32);
            let mut tick = tokio::time::interval(Duration::from_millis(150));
            for step in 0usize.. {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let leader = cluster.pd_leader();
                let other = |not: &[u64]| members.iter().copied().find(|m| !not.contains(m));
                if step % 5 == 4 {
                    // A TiKV store comes back on another address (PD tells where).
                    let stores = cluster.store_ids();
                    let store = stores[(step / 5) % stores.len()];
                    let old = cluster.store_addr(store);
                    if cluster.stop_store(store).await.is_ok() {
                        let new = cluster
                            .restart_store_elsewhere(store)
                            .await
                            .expect("restart");
                        assert_ne!(Some(new), old);
                        moved += 1;
                    }
                    continue;
                }
                let pd_step = step - step / 5;
                match pd_step % 4 {
                    // The leadership moves away from the configured member.
                    0 => cluster
                        .transfer_pd_leader(other(&[leader, first]).expect("a member"))
                        .expect("transfer"),
                    // The configured member (a follower now) dies.
                    1 => cluster.stop_pd(first).await.expect("stop the first member"),
                    // The leader dies: the last member left leads.
                    2 => cluster.stop_pd(leader).await.expect("stop the leader"),
                    // Everyone is back; the first member leads again.
                    _ => {
                        for m in &members {
                            if !cluster.pd_members().iter().any(|(id, _)| id == m) {
                                cluster.restart_pd(*m).await.expect("restart");
                            }
                        }
                        cluster.transfer_pd_leader(first).expect("transfer back");
                    }
                }
                done += 1;
            }
            // Leave every member up.
            for m in &members {
                if !cluster.pd_members().iter().any(|(id, _)| id == m) {
                    cluster.restart_pd(*m).await.expect("restart");
                }
            }
            (done, moved)
        })
    };
    let mut c = Consumer::default();
    tokio::select! {
        _ = consume(&mut feed, &mut c, None, None) => unreachable!("consume without a bound"),
        _ = run.sim.workload_done() => {}
    }
    stop.cancel();
    let (pd_faults, stores_moved) = faults.await.expect("PD faults");

    // The configured member down for good and the leadership moved on: a client finds the
    // leader through the members PD listed to it, not only through its configuration.
    let mut pd_cfg = PdConfig::new(vec![cluster.pd_url()]);
    pd_cfg.tls = run.tls.as_ref().map(TestPki::cluster_tls);
    let pd = PdClient::connect(pd_cfg, client_stop.clone())
        .await
        .expect("PD client");
    let others: Vec<u64> = members.iter().copied().filter(|m| *m != first).collect();
    cluster.transfer_pd_leader(others[0]).expect("transfer");
    let before = pd.tso().await.expect("a timestamp from the new leader");
    cluster
        .stop_pd(first)
        .await
        .expect("stop the configured member");
    cluster.transfer_pd_leader(others[1]).expect("transfer");
    for _ in 0..3 {
        let ts = pd
            .tso()
            .await
            .expect("a timestamp with the configured member down");
        assert!(ts > before);
    }
    cluster.restart_pd(first).await.expect("restart");
    let tsos = tso.await.expect("TSO client");
    assert_eq!(run.sim.failure(), None, "seed {seed}: the workload failed");
    let lines = run.truth.lines();
    consume(&mut feed, &mut c, Some(max_commit_ts(&lines)), None).await;
    let want = truth_after(&lines, run.start_ts);
    assert_same(&c.txns, &want, seed);
    assert!(pd_faults >= 8, "seed {seed}: only {pd_faults} PD faults");
    assert!(
        stores_moved >= 2,
        "seed {seed}: {stores_moved} stores moved"
    );
    eprintln!(
        "seed {seed}: {} txns, {pd_faults} PD faults, {stores_moved} stores on new addresses, \
         {tsos} timestamps, {} TiKV faults",
        want.len(),
        run.sim.summary().faults
    );
    feed.close().await;
    run.sim.shutdown().await.expect("sim shutdown");
}

/// One transaction of 1,024 rows of 4 KiB into `huge.big`, prewritten batch by batch
/// (`--workload huge`), under a prewrite memory budget of 64 KiB: its prewrites move to the
/// sorter's RocksDB, and the transaction comes out whole, in pieces, every value as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_larger_than_the_prewrite_budget_comes_out_whole() {
    use tibinlog::sim::workload::huge::row_value;
    use tibinlog_protocol::value::Value;

    const ROWS: usize = 1024;
    const ROW_BYTES: usize = 4096;
    let args = SimArgs {
        workload: tibinlog::sim::cli::WorkloadKind::Huge,
        huge_bytes: (ROWS * ROW_BYTES) as u64,
        huge_row_bytes: ROW_BYTES,
        seed: Some(9),
        resolved_ts_interval: Duration::from_millis(50),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    };
    let sim = SimBuilder::new(args)
        .start(CancellationToken::new())
        .await
        .expect("sim start");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = ChangefeedConfig::new(
        vec![sim.cluster().pd_url()],
        Ts(sim.cluster().tso().0),
        TableFilter::all(),
        dir.path().join("sorter"),
    );
    cfg.prewrite_memory_bytes = 64 << 10;
    cfg.sorter.max_chunk_bytes = 256 << 10;
    let mut feed = Changefeed::start(cfg, CancellationToken::new())
        .await
        .expect("changefeed start");
    let (mut ids, mut pieces, mut expected) = (Vec::new(), 0, Vec::new());
    loop {
        let ev = tokio::time::timeout(CATCH_UP, feed.next())
            .await
            .expect("no event in time")
            .expect("changefeed ended")
            .expect("changefeed error");
        let ChangeEvent::Rows(t) = ev else { continue };
        pieces += 1;
        for r in &t.rows {
            assert_eq!(r.table.def.table, "big");
            let after = r.after.as_ref().expect("an insert");
            let Value::Int(id) = after[0] else {
                panic!("id {:?}", after[0])
            };
            row_value(9, id, ROW_BYTES, &mut expected);
            assert!(
                matches!(&after[1], Value::Bytes(b) if *b == expected),
                "row {id}: value differs"
            );
            ids.push(id);
        }
        if t.last {
            break;
        }
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=ROWS as i64).collect::<Vec<_>>(), "every row once");
    assert!(pieces > 1, "a 4 MiB transaction comes in several pieces");
    feed.close().await;
    sim.shutdown().await.expect("sim shutdown");
}

/// A lock held for a long time under a write load with faults: the watermark stays below it,
/// so every row written meanwhile waits in the sorter, and the rows TiKV sends again above the
/// watermark (regions re-subscribed after splits, leader moves and store restarts) go to the
/// sorter too, which collapses the copies. The sorter's memory in use stays within its quota
/// while the rest goes to its RocksDB; once the lock commits, every transaction comes out once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_held_lock_under_load_stays_within_the_sorter_budget_and_doubles_nothing() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    const SEED: u64 = 31;
    const QUOTA: usize = 1 << 20;
    let run = start_sim(SEED, 1_500, 0.0, true).await;
    let mut cfg = ChangefeedConfig::new(
        vec![run.sim.cluster().pd_url()],
        run.start_ts,
        TableFilter::all(),
        run.sorter_dir.path().join("sorter"),
    );
    cfg.sorter.memory_quota_bytes = QUOTA;
    cfg.sorter.memory_run_bytes = 256 << 10;
    cfg.sorter.max_chunk_bytes = 64 << 10;
    let metrics = cfg.sorter.metrics.clone();
    let mut feed = Changefeed::start(cfg, CancellationToken::new())
        .await
        .expect("changefeed start");
    // An index key: it holds the resolved ts of its region back and produces no row.
    let mut key = tibinlog::tidb::key::index_prefix(100_000, 1);
    key.extend_from_slice(b"held");
    let held = run
        .sim
        .cluster()
        .hold_lock(key, b"held".to_vec(), Duration::from_secs(600))
        .await
        .expect("hold a lock");
    let lock_ts = held.start_ts().0;
    // The most the sorter's quota had in use, sampled while the lock is held.
    let peak = Arc::new(AtomicU64::new(0));
    let sampling = CancellationToken::new();
    let sampler = tokio::spawn({
        let (peak, metrics, sampling) = (peak.clone(), metrics.clone(), sampling.clone());
        async move {
            while !sampling.is_cancelled() {
                let now = metrics.0.snapshot().in_flight_bytes;
                peak.fetch_max(now, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    run.sim.start_workload();
    let mut c = Consumer::default();
    tokio::select! {
        _ = consume(&mut feed, &mut c, None, None) => unreachable!("consume without a bound"),
        _ = run.sim.workload_done() => {}
    }
    assert_eq!(run.sim.failure(), None, "the workload failed");
    assert!(
        c.resolved <= lock_ts,
        "the watermark {} passed the held lock {lock_ts}",
        c.resolved
    );
    assert!(
        c.txns.is_empty(),
        "a transaction came out past the held lock"
    );
    sampling.cancel();
    sampler.await.expect("sampler");
    let during = metrics.0.snapshot();
    let lock_commit = held.commit_now().await.expect("commit the lock").0;
    let lines = run.truth.lines();
    consume(
        &mut feed,
        &mut c,
        Some(max_commit_ts(&lines).max(lock_commit)),
        None,
    )
    .await;
    assert!(c.open.is_none());
    let want = truth_after(&lines, run.start_ts);
    assert!(want.len() >= 1_350, "only {} transactions", want.len());
    assert_same(&c.txns, &want, SEED);
    let summary = run.sim.summary();
    assert!(summary.faults > 0, "no fault was injected");
    let peak = peak.load(Ordering::Relaxed);
    assert!(
        peak <= QUOTA as u64,
        "the sorter had {peak} bytes in flight, past its quota of {QUOTA}"
    );
    assert!(
        during.write_rows_total > 0,
        "the rows that waited for the lock went to the sorter's RocksDB"
    );
    eprintln!(
        "held lock: {} transactions, {} row changes, {} faults; while held: {} rows ({} bytes) \
         in the sorter's RocksDB, at most {peak} bytes of its {QUOTA} quota in flight",
        want.len(),
        summary.row_changes,
        summary.faults,
        during.write_rows_total,
        during.write_bytes_total
    );
    feed.close().await;
    run.sim.shutdown().await.expect("sim shutdown");
}

/// Filter push-down under the DDL mix that moves data in and out of the filter (renames that
/// swap two tables' names, CREATE TABLES, truncates, partition truncation and exchange) with
/// faults. A feed with a filter captures only the included tables' spans and the DDL jobs',
/// adding spans as jobs create or rename tables; a second feed captures the whole key space.
/// Both must yield exactly the truth's rows of the included tables (by the names they had at
/// commit), and the filtered one must receive fewer rows from TiKV.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_filter_captures_only_included_tables_through_renames_creates_and_exchanges() {
    let seed = 6;
    let run = start_sim(seed, 2_000, 0.0, true).await;
    let rules = ["wl.t_hash", "wl.t_common", "wl.t_xp*", "wl.t_batch*a"];
    let filter = TableFilter::parse(&rules).expect("filter");
    let metrics = |push_down: bool| {
        let m = tibinlog::metrics::CaptureMetrics::default();
        let mc = m.clone();
        let pd = vec![run.sim.cluster().pd_url()];
        let tune = move |cfg: &mut ChangefeedConfig| {
            let mut p = tibinlog::capture::puller::PullerConfig::new(pd, Vec::new(), cfg.start_ts);
            p.metrics = mc;
            cfg.puller = Some(p);
            cfg.push_down = push_down;
        };
        (m, tune)
    };
    let (pushed_metrics, tune) = metrics(true);
    let mut pushed = start_feed_with(&run, run.start_ts, filter.clone(), tune).await;
    let (all_metrics, tune) = metrics(false);
    let mut all = start_feed_with(&run, run.start_ts, filter, tune).await;
    run.sim.start_workload();
    let (mut cp, mut ca) = (Consumer::default(), Consumer::default());
    tokio::select! {
        _ = async {
            tokio::join!(
                consume(&mut pushed, &mut cp, None, None),
                consume(&mut all, &mut ca, None, None)
            )
        } => unreachable!("consume without a bound"),
        _ = run.sim.workload_done() => {}
    }
    assert_eq!(run.sim.failure(), None, "seed {seed}: the workload failed");
    let lines = run.truth.lines();
    let until = Some(max_commit_ts(&lines));
    tokio::join!(
        consume(&mut pushed, &mut cp, until, None),
        consume(&mut all, &mut ca, until, None)
    );

    // The truth's row transactions, each with its rows of included tables only.
    let check = TableFilter::parse(&rules).expect("filter");
    let want: Vec<Json> = truth_after(&lines, run.start_ts)
        .into_iter()
        .filter(|t| t["ddl"].is_null())
        .filter_map(|mut t| {
            let rows: Vec<Json> = t["rows"]
                .as_array()
                .expect("rows")
                .iter()
                .filter(|r| {
                    check.matches(
                        r["db"].as_str().expect("db"),
                        r["table"].as_str().expect("table"),
                    )
                })
                .cloned()
                .collect();
            (!rows.is_empty()).then(|| {
                t["rows"] = json!(rows);
                t
            })
        })
        .collect();
    // Tables created after the start had rows in the filter (their spans were added as their
    // jobs passed), and names moved between tables (renames, exchanges).
    let ddls: Vec<String> = truth_after(&lines, run.start_ts)
        .iter()
        .filter_map(|t| t["ddl"].as_str().map(str::to_owned))
        .collect();
    let created_rows = want
        .iter()
        .flat_map(|t| t["rows"].as_array().expect("rows"))
        .filter(|r| {
            r["table"]
                .as_str()
                .is_some_and(|n| n.starts_with("t_xp") || n.starts_with("t_batch"))
        })
        .count();
    assert!(
        created_rows > 0,
        "seed {seed}: no rows in tables created after the start"
    );
    let moved = |what: &str| ddls.iter().filter(|d| d.contains(what)).count();
    assert!(
        moved("RENAME TABLE") > 0 && moved("EXCHANGE PARTITION") > 0,
        "seed {seed}: the DDLs moved no table: {ddls:?}"
    );
    let rows_only = |c: &Consumer| -> Vec<Json> {
        c.txns
            .iter()
            .filter(|t| t["ddl"].is_null())
            .cloned()
            .collect()
    };
    assert!(
        want.len() > 100,
        "seed {seed}: only {} included transactions",
        want.len()
    );
    assert_same(&rows_only(&cp), &want, seed);
    assert_same(&rows_only(&ca), &want, seed);
    let summary = run.sim.summary();
    assert!(
        summary.ddls > 0 && summary.faults > 0,
        "seed {seed}: DDLs and faults ran"
    );
    let (p, a) = (pushed_metrics.rows.get(), all_metrics.rows.get());
    assert!(
        p < a,
        "the filtered feed received {p} rows from TiKV, the whole key space {a}"
    );
    eprintln!(
        "seed {seed}: {} included transactions of {} row changes ({created_rows} rows in tables \
         created after the start); rows received from TiKV: {p} with push-down, {a} without \
         ({:.0}%); {} DDLs ({} renames, {} exchanges), {} faults",
        want.len(),
        summary.row_changes,
        100.0 * p as f64 / a as f64,
        summary.ddls,
        moved("RENAME TABLE"),
        moved("EXCHANGE PARTITION"),
        summary.faults
    );
    pushed.close().await;
    all.close().await;
    run.sim.shutdown().await.expect("sim shutdown");
}

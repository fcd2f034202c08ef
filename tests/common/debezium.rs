//! Values as replication clients render them compared with the truth log's text, and
//! Debezium's MySQL connector run by `tests/java/DebeziumTail.java`: its records grouped by
//! transaction and compared with the truth log.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::app::WAIT;
use super::java;

/// The outcome of comparing one value.
#[derive(Debug, PartialEq)]
pub enum Cmp {
    Equal,
    /// Not comparable: the library is known to lose information (see the call site).
    Skipped,
    Different,
}

/// How a column's values are compared, from a client's type annotation: a MySQL column type
/// code (BinlogTail) or a kind name (DebeziumTail).
pub fn kind_of(tp: &Json) -> &str {
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
pub fn compare(kind: &str, got: &Json, want: &Json) -> Cmp {
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
pub fn micros6(t: &str) -> String {
    match t.split_once('.') {
        Some((a, f)) => format!("{a}.{f:0<6}"),
        None => format!("{t}.000000"),
    }
}

/// A decimal's sign and digits without insignificant zeros (`-01.50` → `-1.5`).
pub fn decimal_digits(d: &str) -> String {
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
pub fn unpadded(text: &str) -> Vec<u8> {
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
pub struct Counts {
    pub compared: u64,
    pub skipped: u64,
    pub rows: u64,
    /// Updates of a primary key, which Debezium delivers as a delete and a create.
    pub key_changes: u64,
}

/// Whether a client image equals a truth image (every column, by type); counts into `counts`.
pub fn image_matches(types: &Json, got: &Json, want: &Json, counts: &mut Counts) -> bool {
    match (got, want) {
        (Json::Null, Json::Null) => true,
        (Json::Object(g), Json::Object(w)) => {
            g.len() == w.len()
                && g.iter().all(|(col, gv)| {
                    let Some(wv) = w.get(col) else { return false };
                    column_matches(types, col, gv, wv, counts)
                })
        }
        _ => false,
    }
}

/// Whether two truth images are the same row: equal on every column both have (a column added
/// or dropped later is in one image only).
pub fn same_row(a: &Json, b: &Json) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(x), Some(y)) => x.iter().all(|(k, v)| y.get(k).is_none_or(|w| w == v)),
        _ => a == b,
    }
}

/// Whether a client image agrees with a truth image on every column both have (the client's
/// current schema may have columns added after the row was last written, or lack dropped ones).
pub fn image_covers(types: &Json, got: &Json, want: &Json, counts: &mut Counts) -> bool {
    let (Some(g), Some(w)) = (got.as_object(), want.as_object()) else {
        return got == want;
    };
    w.iter().all(|(col, wv)| match g.get(col) {
        None => true,
        Some(gv) => column_matches(types, col, gv, wv, counts),
    })
}

/// One column's value against the truth's, counted as compared or skipped when it matches.
fn column_matches(types: &Json, col: &str, got: &Json, want: &Json, counts: &mut Counts) -> bool {
    match compare(kind_of(&types[col]), got, want) {
        Cmp::Equal => counts.compared += 1,
        Cmp::Skipped => counts.skipped += 1,
        Cmp::Different => return false,
    }
    true
}

/// One transaction as Debezium delivered it (BEGIN … END around its change records).
#[derive(Debug, Default)]
pub struct DebeziumTxn {
    pub gtid: String,
    pub rows: Vec<Json>,
    pub ended: bool,
}

/// Debezium's records grouped by its transaction metadata, checking their shape.
pub fn debezium_transactions(lines: &[Json]) -> Vec<DebeziumTxn> {
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
            "row" if l["op"] == "read" => {
                assert!(
                    out.is_empty(),
                    "a snapshot record after streaming began: {l}"
                );
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

pub fn gno_of(gtid: &str) -> usize {
    gtid.rsplit_once(':')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or_else(|| panic!("GTID {gtid}"))
}

/// A running `DebeziumTail`: its stdout lines and the tail of its log.
pub struct Debezium {
    child: tokio::process::Child,
    pub reader: tokio::task::JoinHandle<Vec<Json>>,
    log: tokio::task::JoinHandle<String>,
    /// Transactions it has ended so far (it streams once this moves).
    pub ended: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Producer failures it logged so far: with retries on, each restarts its streaming from
    /// the offsets it committed.
    pub failures: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Debezium {
    /// Starts Debezium's MySQL connector against `addr` as replica `server_id`, with its
    /// offsets and schema history in `work` and snapshot mode `mode`.
    pub fn start(
        prog: &java::JavaProgram,
        addr: SocketAddr,
        server_id: u32,
        work: &std::path::Path,
        mode: &str,
        props: &[&str],
    ) -> Debezium {
        std::fs::create_dir_all(work).expect("work dir");
        let mut cmd = prog.command("DebeziumTail");
        cmd.arg(addr.ip().to_string())
            .arg(addr.port().to_string())
            .arg("root")
            .arg("")
            .arg(server_id.to_string())
            .arg(work)
            .arg(mode)
            .args(props)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start java DebeziumTail");
        let stdout = child.stdout.take().expect("stdout");
        let ended = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = ended.clone();
        let reader = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            let mut out = Vec::new();
            while let Some(line) = lines.next_line().await.expect("read Debezium output") {
                let v = serde_json::from_str::<Json>(&line)
                    .unwrap_or_else(|e| panic!("non-JSON line {line:?}: {e}"));
                if v["ev"] == "tx" && v["status"] == "END" {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                out.push(v);
            }
            out
        });
        // Debezium logs a lot; keep it for a failure message only: the warnings and errors,
        // the first error's exception with its causes, and the tail.
        let stderr = child.stderr.take().expect("stderr");
        let failures = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let failed = failures.clone();
        let log = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            let mut flagged = Vec::new();
            let mut first_error: Vec<String> = Vec::new();
            let mut tail = std::collections::VecDeque::new();
            while let Ok(Some(line)) = lines.next_line().await {
                let error = line.contains(" ERROR ");
                if error && line.ends_with("ERROR Producer failure") {
                    failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if flagged.len() < 30 && (error || line.contains(" WARN ")) {
                    flagged.push(line.clone());
                }
                // Its stack frames start with a tab; the exception and its causes do not.
                if (error && first_error.is_empty())
                    || (!first_error.is_empty()
                        && first_error.len() < 40
                        && !line.starts_with('\t'))
                {
                    first_error.push(line.clone());
                }
                if tail.len() == 40 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            format!(
                "--- warnings and errors ---\n{}\n--- the first error and its causes ---\n{}\n\
                 --- last lines ---\n{}",
                flagged.join("\n"),
                first_error.join("\n"),
                tail.into_iter().collect::<Vec<_>>().join("\n")
            )
        });
        Debezium {
            child,
            reader,
            log,
            ended,
            failures,
        }
    }

    /// Waits until its dump session (`server_id`) runs on `app`, or it failed (its output
    /// says why, at [`Self::finish`]).
    pub async fn wait_dump(&self, app: &tibinlog::app::App, server_id: u32) {
        let deadline = Instant::now() + WAIT;
        while !app.dump_server_ids().contains(&server_id) && !self.reader.is_finished() {
            assert!(Instant::now() < deadline, "Debezium never started its dump");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until it has ended `n` transactions (it is streaming); panics with its log if
    /// it ended or did not get there in time.
    pub async fn wait_streaming(&mut self, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.ended.load(std::sync::atomic::Ordering::Relaxed) < n {
            let ended = self.reader.is_finished();
            if ended || Instant::now() >= deadline {
                let _ = self.child.kill().await;
                let log = (&mut self.log).await.unwrap_or_default();
                panic!(
                    "Debezium {} before it streamed {n} transactions\n{log}",
                    if ended { "ended" } else { "timed out" }
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Tells it to stop once transaction `last_gtid` ended, waits, and returns its output
    /// (panics with its log tail if it failed or did not get there).
    pub async fn finish(mut self, last_gtid: &str) -> Vec<Json> {
        // A client that already failed has closed its stdin; its output says why (below).
        let stdin = self.child.stdin.as_mut().expect("stdin");
        let _ = stdin.write_all(format!("{last_gtid}\n").as_bytes()).await;
        let _ = stdin.flush().await;
        let status = match tokio::time::timeout(WAIT, self.child.wait()).await {
            Ok(status) => Some(status.expect("wait for java")),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        };
        let lines = self.reader.await.expect("reader");
        let log = self.log.await.expect("log");
        if let Some(err) = lines.iter().find(|l| l["ev"] == "error") {
            panic!("Debezium failed: {}\n--- log tail ---\n{log}", err["what"]);
        }
        let Some(status) = status else {
            let last = lines.iter().rev().find(|l| l["ev"] == "tx");
            // An incremental snapshot it waits for shows in its notifications and reads.
            let notes: Vec<String> = lines
                .iter()
                .filter(|l| l["ev"] == "notification")
                .map(|l| format!("{} {}", l["aggregate"], l["type"]))
                .collect();
            let reads = lines.iter().filter(|l| l["op"] == "read").count();
            panic!(
                "Debezium did not reach {last_gtid} in time; last transaction event {last:?}; \
                 notifications {notes:?}; {reads} snapshot reads\n--- log tail ---\n{log}"
            );
        };
        assert!(status.success(), "java exited with {status}\n{log}");
        lines
    }
}

/// Asserts that Debezium's transactions `txns` are every row transaction of the truth `want`
/// (GNO `i + 1` for `want[i]`) from `first_gno` on, once, in order, each with the truth's rows
/// and values; returns what was compared.
pub fn assert_debezium_equals_truth(
    txns: &[DebeziumTxn],
    want: &[Json],
    uuid: &str,
    first_gno: usize,
) -> Counts {
    check_debezium(txns, want, uuid, first_gno)
}

/// How Debezium's output repeated itself across cut connections and task restarts.
#[derive(Debug, Default)]
pub struct Redelivery {
    /// Times its stream resumed inside a transaction without a BEGIN: a restart from stored
    /// offsets after a producer failure.
    pub resumes: usize,
    /// Records delivered again (same GTID, file, position and row as one before).
    pub records: usize,
    /// Transactions with at least one record delivered again.
    pub txns: usize,
}

/// [`assert_debezium_equals_truth`] for a Debezium whose connection was cut (a failover, or a
/// connection dropped in the middle of an event) with retries on, as a Kafka Connect worker runs
/// it. Its binlog client reconnects with the GTIDs of the transactions it finished, so a
/// transaction cut in the middle comes again from its BEGIN; after a producer failure (a cut
/// inside an event) it restarts its streaming from the offsets it last committed, inside a
/// transaction or at one's start, so what it delivered since comes again. Delivery is at least
/// once: each such segment must repeat the transaction's records from some point on, record
/// for record, before it adds new ones, and a transaction's END comes only once all its
/// records have (again). Each resume inside a transaction without a BEGIN must be explained
/// by one of `explained`: the producer failures Debezium logged (each restarts its stream) and
/// the connections its binlog client made (each reconnect resumes from the GTIDs it finished,
/// inside the transaction it was cut in; the caller counts them at its proxy). With the copies dropped, the records are every row transaction
/// of the truth from the first one Debezium saw, in order, each with the truth's rows and
/// values. A transaction first seen out of order, a copy that differs from its original, or a
/// row missing fails.
pub fn assert_debezium_equals_truth_at_least_once(
    lines: &[Json],
    want: &[Json],
    uuid: &str,
    explained: usize,
) -> (Counts, Redelivery, usize) {
    let mut txns: Vec<DebeziumTxn> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut redelivery = Redelivery::default();
    let mut repeated_txn: Vec<bool> = Vec::new();
    // The transaction being delivered and the index of its next record; `None` as the index
    // when a segment has just begun (BEGIN) and the next record says where.
    let mut current: Option<(usize, Option<usize>)> = None;
    let mut open = |gtid: &str, txns: &mut Vec<DebeziumTxn>, repeated: &mut Vec<bool>| {
        *index.entry(gtid.to_owned()).or_insert_with(|| {
            txns.push(DebeziumTxn {
                gtid: gtid.to_owned(),
                ..DebeziumTxn::default()
            });
            repeated.push(false);
            txns.len() - 1
        })
    };
    for l in lines {
        match l["ev"].as_str().expect("ev") {
            "row" if l["op"] == "read" => {
                assert!(
                    txns.is_empty(),
                    "a snapshot record after streaming began: {l}"
                );
            }
            "row" => {
                let gtid = l["gtid"]
                    .as_str()
                    .unwrap_or_else(|| panic!("row without GTID: {l}"));
                let at = open(gtid, &mut txns, &mut repeated_txn);
                let place = |txn: &DebeziumTxn| txn.rows.iter().position(|r| r == l);
                let next = match current {
                    // The segment goes on, or (a record seen before, where a new one was due)
                    // the stream resumed inside this transaction.
                    Some((t, Some(next))) if t == at => {
                        match place(&txns[at]).filter(|_| next == txns[at].rows.len()) {
                            Some(k) => {
                                redelivery.resumes += 1;
                                k
                            }
                            None => next,
                        }
                    }
                    // After BEGIN: from its start (a new transaction, or one cut by a reconnect).
                    Some((t, None)) if t == at => place(&txns[at]).unwrap_or(txns[at].rows.len()),
                    // Rows of a transaction without its BEGIN: resumed inside it.
                    _ => {
                        redelivery.resumes += 1;
                        place(&txns[at]).unwrap_or(txns[at].rows.len())
                    }
                };
                let t = &mut txns[at];
                if next < t.rows.len() {
                    assert_eq!(&t.rows[next], l, "{gtid}: a record delivered again differs");
                    redelivery.records += 1;
                    repeated_txn[at] = true;
                } else {
                    assert!(!t.ended, "{gtid}: a new record after its END: {l}");
                    t.rows.push(l.clone());
                }
                current = Some((at, Some(next + 1)));
            }
            "tx" if l["status"] == "BEGIN" => {
                let gtid = l["id"].as_str().expect("id");
                current = Some((open(gtid, &mut txns, &mut repeated_txn), None));
            }
            "tx" => {
                let gtid = l["id"].as_str().expect("id");
                let at = open(gtid, &mut txns, &mut repeated_txn);
                if let Some((t, Some(next))) = current.filter(|(t, _)| *t == at) {
                    assert_eq!(
                        next,
                        txns[t].rows.len(),
                        "{gtid}: END before every record of a repeat came again"
                    );
                }
                txns[at].ended = true;
                current = None;
            }
            _ => {}
        }
    }
    // Transactions without rows (DDL) deliver no records.
    let txns: Vec<DebeziumTxn> = txns.into_iter().filter(|t| !t.rows.is_empty()).collect();
    assert!(
        redelivery.resumes <= explained,
        "{} resumes inside a transaction, {explained} restarts and reconnects to explain them",
        redelivery.resumes
    );
    redelivery.txns = repeated_txn.iter().filter(|r| **r).count();
    let first_gno = gno_of(&txns.first().expect("Debezium streamed").gtid);
    let counts = check_debezium(&txns, want, uuid, first_gno);
    (counts, redelivery, first_gno)
}

fn check_debezium(txns: &[DebeziumTxn], want: &[Json], uuid: &str, first_gno: usize) -> Counts {
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
        let mut c = Counts::default();
        let result = match_records(&t.rows, w, &mut c);
        if let Err(e) = result {
            panic!("{ctx}: {e}");
        }
        counts.compared += c.compared;
        counts.skipped += c.skipped;
        counts.rows += c.rows;
        counts.key_changes += c.key_changes;
    }
    counts
}

/// Matches one transaction's records with the truth transaction `w`'s rows (an UPDATE that
/// changes the primary key is a delete and a create for Debezium); counts into `counts`.
fn match_records(records: &[Json], w: &Json, counts: &mut Counts) -> Result<(), String> {
    let mut left: Vec<&Json> = records.iter().collect();
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
            image_matches(&r["types"], &r["before"], &tr["before"], counts);
            image_matches(&r["types"], &r["after"], &tr["after"], counts);
            counts.rows += 1;
            continue;
        }
        if op != "update" {
            return Err(format!(
                "no Debezium record for truth row {tr}; records left: {left:?}"
            ));
        }
        let Some(del) = left
            .iter()
            .position(|r| matches(r, "delete", tr, &tr["before"], &Json::Null))
        else {
            return Err(format!("no record for truth row {tr}"));
        };
        let r = left.remove(del);
        image_matches(&r["types"], &r["before"], &tr["before"], counts);
        let Some(ins) = left
            .iter()
            .position(|r| matches(r, "insert", tr, &Json::Null, &tr["after"]))
        else {
            return Err(format!("no create record for truth row {tr}"));
        };
        let r = left.remove(ins);
        image_matches(&r["types"], &r["after"], &tr["after"], counts);
        counts.rows += 1;
        counts.key_changes += 1;
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!("{} records beyond the truth: {left:?}", left.len()))
    }
}

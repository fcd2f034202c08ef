//! MariaDB as a real peer of the whole product: the simulated cluster's seeded workload (DDL
//! included) → changefeed → binlog → server, read by `mariadb-binlog --read-from-remote-server`
//! (decoded, and `--raw`) and replicated by a MariaDB 10.11 replica set up with `CHANGE MASTER TO
//! … MASTER_LOG_FILE/POS`, and by one set up with `MASTER_USE_GTID=slave_pos` (through the
//! MariaDB-flavoured listener, which greets as MariaDB 10.11) that is stopped and started
//! again mid-stream; all are compared with the simulator's truth log.
//!
//! The workload runs without its JSON columns: MariaDB reads MySQL's binary JSON neither in
//! `mariadb-binlog` nor in a replica (MariaDB's JSON is LONGTEXT; its replica cannot convert
//! binlog type 245). Everything else of the demo's workload is there: every other column type,
//! partitioned tables, inserts, updates, primary-key changes, deletes, large transactions, and
//! the DDL it runs (CREATE DATABASE / CREATE TABLE from the start, then the seeds pinned here
//! give ADD/MODIFY COLUMN, TRUNCATE TABLE, CREATE TABLE, a `CREATE TABLES` batch (several
//! DDLs of one commit ts), multi-table RENAME TABLE, TRUNCATE PARTITION and EXCHANGE
//! PARTITION; the replica tests assert which). The binlog starts before the
//! workload's first DDL, so a replica set up at `binlog.000001:4` gets every table from the
//! stream.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use serde_json::Value as Json;
use tibinlog_protocol::binlog::checksum::verify_event;
use tibinlog_protocol::binlog::{EventType, HEADER_LEN};

use common::app::master_status;
use common::demo::{dump, dump_coordinate, load, run_demo, Demo, MASTER_SERVER_ID, WAIT};
use common::mariadb::{require_tool, MariaDb};
use common::mariadb_binlog::{image_matches, parse_listing, Item};
use common::replica::{assert_replica_equals_model, Model};

/// The replica's `@@server_id`: it must differ from ours.
const REPLICA_SERVER_ID: u32 = 2;

// ---------------------------------------------------------------------------------------------
// mariadb-binlog

fn run_tool(tool: &PathBuf, args: &[String]) -> Output {
    let out = std::process::Command::new(tool)
        .args(args)
        .output()
        .expect("run mariadb-binlog");
    assert!(
        out.status.success(),
        "mariadb-binlog {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn remote_args(addr: SocketAddr) -> Vec<String> {
    [
        "--no-defaults",
        "--read-from-remote-server",
        "--host=127.0.0.1",
        &format!("--port={}", addr.port()),
        "--user=root",
        "--to-last-log",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

const DECODE: [&str; 3] = [
    "-vv",
    "--base64-output=decode-rows",
    "--print-table-metadata",
];

/// The seed's workload ran each DDL kind in `kinds` and a `CREATE TABLES` batch (several
/// DDLs of one commit ts), so the replica compared equal after applying them.
fn assert_ddl_kinds(seed: u64, truth: &[Json], kinds: &[&str]) {
    let ddls: Vec<(u64, &str)> = truth
        .iter()
        .filter_map(|t| Some((t["commit_ts"].as_u64()?, t["ddl"].as_str()?)))
        .collect();
    for kind in kinds {
        assert!(
            ddls.iter().any(|(_, d)| d.contains(kind)),
            "seed {seed}: no {kind} in {ddls:?}"
        );
    }
    assert!(
        ddls.windows(2).any(|w| w[0].0 == w[1].0
            && w[0].1.starts_with("CREATE TABLE ")
            && w[1].1.starts_with("CREATE TABLE ")),
        "seed {seed}: no CREATE TABLES batch in {ddls:?}"
    );
}

/// Every listed item equals the truth transaction at its place: DDL text, XID = start_ts, and
/// the same rows value by value. Returns the number of values compared.
fn assert_listing_equals_truth(listing: &[u8], truth: &[Json], what: &str) -> u64 {
    let items = parse_listing(listing);
    assert_eq!(
        items.len(),
        truth.len(),
        "{what}: one listed statement or transaction per truth transaction"
    );
    let mut compared = 0u64;
    for (i, (item, want)) in items.iter().zip(truth).enumerate() {
        let ctx = format!("{what}: transaction {i} (truth {want})");
        match (item, want["ddl"].as_str()) {
            (Item::Statement(q), Some(ddl)) => assert_eq!(q, ddl, "{ctx}: DDL"),
            (Item::Transaction { xid, rows }, None) => {
                assert_eq!(
                    Some(*xid),
                    want["start_ts"].as_u64(),
                    "{ctx}: XID = start_ts"
                );
                let mut truth_rows = want["rows"].as_array().cloned().unwrap_or_default();
                assert_eq!(rows.len(), truth_rows.len(), "{ctx}: row count");
                for r in rows {
                    assert!(!r.columns.is_empty(), "{ctx}: column names listed");
                    let at = truth_rows.iter().position(|t| {
                        t["db"] == r.db.as_str()
                            && t["table"] == r.table.as_str()
                            && t["op"] == r.op
                            && image_matches(&r.before, &r.columns, &t["before"], &mut 0)
                            && image_matches(&r.after, &r.columns, &t["after"], &mut 0)
                    });
                    let Some(at) = at else {
                        panic!("{ctx}: listed row {r:?} is not in the truth transaction");
                    };
                    let t = truth_rows.remove(at);
                    image_matches(&r.before, &r.columns, &t["before"], &mut compared);
                    image_matches(&r.after, &r.columns, &t["after"], &mut compared);
                }
            }
            (item, _) => panic!("{ctx}: listed {item:?}"),
        }
    }
    compared
}

/// The events of a binlog file (after the 4-byte magic).
fn events(file: &[u8]) -> Vec<&[u8]> {
    assert_eq!(&file[..4], b"\xfebin", "binlog magic");
    let mut out = Vec::new();
    let mut at = 4;
    while at < file.len() {
        let size = u32::from_le_bytes(file[at + 9..at + 13].try_into().expect("size")) as usize;
        out.push(&file[at..at + size]);
        at += size;
    }
    assert_eq!(at, file.len(), "events end at the end of the file");
    out
}

/// A `--raw` copy is the MariaDB-flavoured stream a GTID-aware MariaDB peer gets (see
/// `protocol/src/binlog/mariadb_stream.rs`), checked event by event against our file: MariaDB's
/// FORMAT_DESCRIPTION (log_pos 0, our server version); the PREVIOUS_GTIDS as a GTID_LIST of
/// the same size and end; each GTID + BEGIN as one MariaDB GTID (TRANSACTIONAL, MariaDB's 42
/// bytes: the peer reads the rest as a hole) ending where BEGIN ended, a DDL's GTID as a
/// STANDALONE one ending where it ended; QUERY
/// events with MariaDB collation ids (`utf8mb4_bin` 46 for MySQL's 255); every other event
/// byte for byte. So every log_pos is the offset in our file. Returns the sequence numbers of
/// the GTIDs and the number of QUERY events whose collations were rewritten.
fn assert_raw_copy(name: &str, raw: &[u8], ours: &[u8]) -> (Vec<u64>, usize) {
    let (raw_events, our_events) = (events(raw), events(ours));
    let log_pos = |e: &[u8]| u32::from_le_bytes(e[13..17].try_into().expect("log_pos"));
    let (fde, our_fde) = (raw_events[0], our_events[0]);
    assert_eq!(EventType(fde[4]), EventType::FORMAT_DESCRIPTION, "{name}");
    assert_eq!(log_pos(fde), 0, "{name}: MariaDB's FDE is not counted");
    assert_eq!(fde.len(), 252, "{name}: MariaDB 10.11's FDE");
    assert_eq!(&fde[21..71], &our_fde[21..71], "{name}: our server version");
    assert!(verify_event(fde).is_ok(), "{name}: FDE CRC");
    let (mut gtids, mut rewritten) = (Vec::new(), 0);
    // Bytes of our file the copy has as holes (the MySQL GTID + BEGIN a GTID stands for).
    let mut holes = 0;
    let (mut i, mut j) = (1, 1);
    while i < our_events.len() {
        let (o, r) = (our_events[i], raw_events[j]);
        let ctx = format!("{name}: our event {i}, copy's event {j}");
        assert!(verify_event(r).is_ok(), "{ctx}: CRC of the copy");
        match EventType(o[4]) {
            EventType::PREVIOUS_GTIDS => {
                assert_eq!(EventType(r[4]), EventType::MARIADB_GTID_LIST, "{ctx}");
                assert_eq!((r.len(), log_pos(r)), (o.len(), log_pos(o)), "{ctx}");
                i += 1;
            }
            EventType::GTID => {
                assert_eq!(EventType(r[4]), EventType::MARIADB_GTID, "{ctx}");
                let gno = u64::from_le_bytes(
                    o[HEADER_LEN + 17..HEADER_LEN + 25].try_into().expect("gno"),
                );
                let seq =
                    u64::from_le_bytes(r[HEADER_LEN..HEADER_LEN + 8].try_into().expect("seq"));
                assert_eq!(seq, gno, "{ctx}: the GNO is the sequence number");
                gtids.push(seq);
                let next = our_events[i + 1];
                let begin = EventType(next[4]) == EventType::QUERY
                    && next[..next.len() - 4].ends_with(b"BEGIN");
                assert_eq!(r.len(), 42, "{ctx}: MariaDB's GTID size");
                if begin {
                    assert_eq!(
                        r[HEADER_LEN + 12],
                        0x0c,
                        "{ctx}: TRANSACTIONAL | ALLOW_PARALLEL"
                    );
                    assert_eq!(log_pos(r), log_pos(next), "{ctx}: ends where BEGIN ended");
                    holes += o.len() + next.len() - r.len();
                    i += 2;
                } else {
                    assert_eq!(r[HEADER_LEN + 12] & 1, 1, "{ctx}: STANDALONE");
                    assert_eq!(log_pos(r), log_pos(o), "{ctx}: ends where the GTID ended");
                    holes += o.len() - r.len();
                    i += 1;
                }
            }
            EventType::QUERY => {
                assert_eq!(r.len(), o.len(), "{ctx}: size");
                let body = r.len() - 4;
                let diff: Vec<usize> = (0..body).filter(|&k| r[k] != o[k]).collect();
                i += 1;
                j += 1;
                if diff.is_empty() {
                    continue;
                }
                // The differences lie in one Q_CHARSET value: code 4, then three ids 255 → 46
                // (little-endian, so the first difference is the value's first byte).
                let start = diff[0];
                let window = (start..start + 6).collect::<Vec<_>>();
                assert!(
                    diff.iter().all(|k| window.contains(k)),
                    "{ctx}: only the collation ids differ ({diff:?})"
                );
                assert_eq!(o[start - 1], 4, "{ctx}: Q_CHARSET code");
                assert_eq!(&o[start..start + 6], &[255, 0, 255, 0, 255, 0], "{ctx}");
                assert_eq!(&r[start..start + 6], &[46, 0, 46, 0, 46, 0], "{ctx}");
                rewritten += 1;
                continue;
            }
            _ => {
                assert_eq!(r, o, "{ctx}: bytes");
                i += 1;
            }
        }
        j += 1;
    }
    assert_eq!(j, raw_events.len(), "{name}: no event more in the copy");
    assert_eq!(
        raw.len() - fde.len() + holes,
        ours.len() - our_fde.len(),
        "{name}: after the FDE, the copy and its holes have our file's size"
    );
    (gtids, rewritten)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_binlog_decodes_the_whole_stream_with_and_without_raw() {
    let Some(tool) = require_tool("mariadb-binlog") else {
        return;
    };
    let seed = 6;
    let started = Instant::now();
    let demo = run_demo(seed, false, |_, _| async {}).await;
    let addr = demo.addr();

    // Decoded while reading from the server.
    let mut args = remote_args(addr);
    args.extend(DECODE.iter().map(|s| s.to_string()));
    args.push("binlog.000001".into());
    let out = run_tool(&tool, &args);
    let compared = assert_listing_equals_truth(&out.stdout, &demo.truth, "remote -vv");

    // --raw: the files as a MariaDB peer receives them, then decoded from disk.
    let raw_dir = tempfile::tempdir().expect("tempdir");
    let mut args = remote_args(addr);
    args.push("--raw".into());
    args.push(format!("--result-file={}/", raw_dir.path().display()));
    args.push("binlog.000001".into());
    run_tool(&tool, &args);
    let files = demo.app.files().list();
    let (mut gtids, mut rewritten) = (Vec::new(), 0);
    let mut local_args: Vec<String> = ["--no-defaults"]
        .iter()
        .chain(DECODE.iter())
        .map(|s| s.to_string())
        .collect();
    for (name, size) in &files {
        let raw_path = raw_dir.path().join(name);
        let raw = std::fs::read(&raw_path).unwrap_or_else(|e| panic!("--raw wrote {name}: {e}"));
        let ours = std::fs::read(demo.app.binlog_dir().join(name)).expect("our binlog file");
        assert!(ours.len() as u64 >= *size);
        let (g, r) = assert_raw_copy(name, &raw, &ours[..*size as usize]);
        gtids.extend(g);
        rewritten += r;
        local_args.push(raw_path.to_string_lossy().into_owned());
    }
    let ddls = demo.truth.iter().filter(|t| t["ddl"].is_string()).count();
    assert_eq!(
        gtids,
        (1..=demo.truth.len() as u64).collect::<Vec<_>>(),
        "one MariaDB GTID per transaction, in order"
    );
    assert_eq!(rewritten, ddls, "every DDL carries MariaDB collation ids");
    let out = run_tool(&tool, &local_args);
    let compared_raw = assert_listing_equals_truth(&out.stdout, &demo.truth, "--raw, then -vv");
    assert_eq!(compared_raw, compared);
    assert!(
        compared > 10_000,
        "seed {seed}: only {compared} values compared"
    );
    eprintln!(
        "seed {}: {} transactions ({ddls} DDL), {} files, {compared} values compared twice, {:?}",
        demo.seed,
        demo.truth.len(),
        files.len(),
        started.elapsed()
    );
    common::app::assert_all_answered(&demo.app, "MariaDB tools and replicas");
    demo.stop().await;
}

// ---------------------------------------------------------------------------------------------
// MariaDB replica

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_replica_replicates_the_workload_by_file_and_position() {
    let started = Instant::now();
    let replica = tokio::task::spawn_blocking(|| {
        MariaDb::start(&[&format!("--server-id={REPLICA_SERVER_ID}")])
    });
    let Some(db) = replica.await.expect("start MariaDB") else {
        return;
    };
    assert_ne!(REPLICA_SERVER_ID, MASTER_SERVER_ID);
    let seed = 77;
    // The replica starts while the workload runs: it streams live, across rotations.
    let demo = run_demo(seed, false, |addr, _| {
        let sql = format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_PASSWORD='', MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, \
             MASTER_USE_GTID=no; START SLAVE",
            addr.port()
        );
        let db = &db;
        async move {
            let mut conn = db.conn().await;
            conn.query_drop(sql)
                .await
                .expect("CHANGE MASTER TO, START SLAVE");
            let _ = conn.disconnect().await;
        }
    })
    .await;

    // Wait until the replica has executed everything we wrote.
    let deadline = Instant::now() + WAIT;
    let status = loop {
        let s = db.slave_status().await.expect("replication configured");
        assert!(
            s.last_error.is_empty() && s.last_io_error.is_empty(),
            "seed {seed}: replica error: {s:?}\n{}",
            db.error_log()
        );
        assert_eq!(s.sql_running, "Yes", "seed {seed}: SQL thread: {s:?}");
        if s.relay_master_log_file == demo.end.file && s.exec_master_log_pos == demo.end.position {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: replica stuck at {s:?}, master at {:?}",
            demo.end
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status.io_running, "Yes", "{status:?}");
    assert_eq!(status.sql_running, "Yes", "{status:?}");
    assert_eq!(status.last_error, "", "{status:?}");
    assert_eq!(
        (status.master_log_file.as_str(), status.read_master_log_pos),
        (demo.end.file.as_str(), demo.end.position),
        "the I/O thread read up to our end"
    );
    // Set up by file and position, it still records our GTIDs (the MariaDB flavour), so it
    // could switch to MASTER_USE_GTID=slave_pos.
    let slave_pos = gtid_slave_pos(&db).await;
    assert_eq!(
        slave_pos,
        Some(mariadb_gtid(demo.truth.len())),
        "seed {seed}: gtid_slave_pos of a file/position replica"
    );

    let mut model = Model::default();
    for txn in &demo.truth {
        model.apply(txn);
    }
    let compared = assert_replica_equals_model(db.conn().await, &model).await;
    let rows: usize = model.tables.values().map(BTreeMap::len).sum();
    let ddls: Vec<&str> = demo
        .truth
        .iter()
        .filter_map(|t| t["ddl"].as_str())
        .collect();
    assert!(
        ddls.iter().any(|d| d.starts_with("ALTER TABLE")),
        "seed {seed}: the workload altered a table: {ddls:?}"
    );
    assert_ddl_kinds(seed, &demo.truth, &["RENAME TABLE", "TRUNCATE PARTITION"]);
    assert!(rows > 1000, "seed {seed}: only {rows} rows at the end");
    // The drift checkers' chunk checksums (sync-diff-inspector, pt-table-checksum) agree on
    // every table between tibinlog and its replica.
    let tables: Vec<(String, String)> = model.tables.keys().cloned().collect();
    let mut ours = mysql_async::Conn::new(common::app::opts(demo.addr(), "root"))
        .await
        .expect("connect to tibinlog");
    let (checked, differences) =
        common::checksum::compare(&mut ours, &mut db.conn().await, &tables).await;
    assert!(
        differences.is_empty(),
        "seed {seed}: checksums differ:\n{}",
        differences.join("\n")
    );
    let _ = ours.disconnect().await;
    // Still replicating, without errors, after the comparison.
    let s = db.slave_status().await.expect("status");
    assert_eq!(
        (s.io_running.as_str(), s.sql_running.as_str()),
        ("Yes", "Yes")
    );
    assert_eq!(s.last_error, "");
    let workload_ddls: Vec<String> = ddls
        .iter()
        .filter(|d| !d.starts_with("CREATE DATABASE") && !d.contains("` (`"))
        .map(|d| d.chars().take(60).collect())
        .collect();
    eprintln!(
        "seed {seed}: {} transactions ({} DDL, after the setup: {workload_ddls:?}), {} tables, \
         {rows} rows, {compared} values equal on the replica, {checked} tables' checksums \
         equal, {:?}",
        demo.truth.len(),
        ddls.len(),
        model.tables.len(),
        started.elapsed()
    );
    common::app::assert_all_answered(&demo.app, "MariaDB tools and replicas");
    demo.stop().await;
}

// ---------------------------------------------------------------------------------------------
// MariaDB replica by GTID

/// The MariaDB GTID of our last transaction: domain 0, our server id, the last GNO.
fn mariadb_gtid(seq_no: usize) -> String {
    format!("0-{MASTER_SERVER_ID}-{seq_no}")
}

/// The sequence number of domain 0 in a MariaDB GTID position (`0-1-57` → 57).
fn domain0_seq(pos: &str) -> Option<u64> {
    pos.split(',')
        .filter_map(|g| g.trim().strip_prefix("0-"))
        .find_map(|rest| rest.split('-').nth(1)?.parse().ok())
}

/// The replica's `@@gtid_slave_pos`.
async fn gtid_slave_pos(db: &MariaDb) -> Option<String> {
    let mut conn = db.conn().await;
    let pos = conn
        .query_first("SELECT @@gtid_slave_pos")
        .await
        .expect("gtid_slave_pos");
    let _ = conn.disconnect().await;
    pos
}

/// Runs SQL on the replica.
async fn replica_sql(db: &MariaDb, sql: &str) {
    let mut conn = db.conn().await;
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let _ = conn.disconnect().await;
}

/// Polls `SHOW SLAVE STATUS` until `done` holds; fails on a replication error or after
/// [`WAIT`].
async fn wait_status(
    db: &MariaDb,
    what: &str,
    done: impl Fn(&common::mariadb::SlaveStatus) -> bool,
) -> common::mariadb::SlaveStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = db.slave_status().await.expect("replication configured");
        assert!(
            s.last_error.is_empty() && s.last_io_error.is_empty(),
            "{what}: replica error: {s:?}\n{}",
            db.error_log()
        );
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: replica stuck at {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the replica has read and executed everything and checks the coordinates it
/// shows: the files' positions and our last GTID.
async fn assert_caught_up(db: &MariaDb, demo: &Demo, what: &str) {
    let last = mariadb_gtid(demo.truth.len());
    let s = wait_status(db, what, |s| {
        s.gtid_io_pos == last
            && s.relay_master_log_file == demo.end.file
            && s.exec_master_log_pos == demo.end.position
    })
    .await;
    assert_eq!(
        (s.io_running.as_str(), s.sql_running.as_str()),
        ("Yes", "Yes"),
        "{what}: {s:?}"
    );
    assert_eq!(
        (s.master_log_file.as_str(), s.read_master_log_pos),
        (demo.end.file.as_str(), demo.end.position),
        "{what}: the I/O thread's position is the files' end"
    );
    let slave_pos = gtid_slave_pos(db).await;
    assert_eq!(
        slave_pos.as_deref(),
        Some(last.as_str()),
        "{what}: gtid_slave_pos"
    );
}

/// Points the stopped replica at `gtid` and starts it; returns the I/O error it stops with.
async fn start_from_gtid_expecting_error(db: &MariaDb, gtid: &str) -> (u64, String) {
    replica_sql(db, "STOP SLAVE").await;
    replica_sql(db, &format!("SET GLOBAL gtid_slave_pos = '{gtid}'")).await;
    replica_sql(db, "START SLAVE").await;
    let deadline = Instant::now() + WAIT;
    loop {
        let s = db.slave_status().await.expect("status");
        // The I/O thread records the error, then exits: wait until it has, so that a thread
        // that goes on retrying instead (a non-fatal error) is caught.
        if s.last_io_errno != 0 && s.io_running == "No" {
            return (s.last_io_errno, s.last_io_error);
        }
        assert!(
            Instant::now() < deadline,
            "no I/O error that stops the I/O thread for start at {gtid}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_replica_replicates_by_gtid_and_resumes_after_stop_start() {
    let started = Instant::now();
    let replica = tokio::task::spawn_blocking(|| {
        MariaDb::start(&[&format!("--server-id={REPLICA_SERVER_ID}")])
    });
    let Some(db) = replica.await.expect("start MariaDB") else {
        return;
    };
    let seed = 58;
    let stopped_at = std::sync::Mutex::new(None::<u64>);
    // The replica starts by GTID while the workload runs, is stopped once it has some
    // transactions, and started again: it resumes from its own GTID position.
    let demo = run_demo(seed, false, |_, addr| {
        let db = &db;
        let stopped_at = &stopped_at;
        async move {
            replica_sql(
                db,
                &format!(
                    "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, \
                     MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos",
                    addr.port()
                ),
            )
            .await;
            replica_sql(db, "START SLAVE").await;
            let s = wait_status(db, "first transactions", |s| {
                domain0_seq(&s.gtid_io_pos).is_some_and(|n| n >= 40)
            })
            .await;
            assert_eq!(s.using_gtid, "Slave_Pos");
            replica_sql(db, "STOP SLAVE").await;
            let s = db.slave_status().await.expect("status");
            assert_eq!(
                (s.io_running.as_str(), s.sql_running.as_str()),
                ("No", "No")
            );
            *stopped_at.lock().expect("lock") = domain0_seq(&s.gtid_io_pos);
            replica_sql(db, "START SLAVE").await;
        }
    })
    .await;
    let stopped_at = stopped_at
        .lock()
        .expect("lock")
        .expect("stopped with a GTID position");
    // The stop comes once the replica has 40 transactions, inside the stream (the paced
    // workload has hundreds more to write); whether the restart skips part of a file is
    // timing, the dump tests in repl_server.rs cover every start point exactly.
    assert!(stopped_at >= 40, "seed {seed}: stopped at {stopped_at}");
    let mid_stream = stopped_at < demo.truth.len() as u64;
    assert!(
        mid_stream,
        "seed {seed}: the replica stopped at the end of the stream ({stopped_at})"
    );
    assert_caught_up(&db, &demo, "after STOP/START SLAVE").await;

    let mut model = Model::default();
    for txn in &demo.truth {
        model.apply(txn);
    }
    let compared = assert_replica_equals_model(db.conn().await, &model).await;
    let rows: usize = model.tables.values().map(BTreeMap::len).sum();
    assert!(rows > 1000, "seed {seed}: only {rows} rows at the end");
    assert_ddl_kinds(
        seed,
        &demo.truth,
        &["EXCHANGE PARTITION", "TRUNCATE PARTITION"],
    );

    // A restart at the very end (the start GTID is the last one), by current_pos.
    replica_sql(&db, "STOP SLAVE").await;
    replica_sql(&db, "CHANGE MASTER TO MASTER_USE_GTID=current_pos").await;
    replica_sql(&db, "START SLAVE").await;
    let s = wait_status(&db, "current_pos", |s| s.io_running == "Yes").await;
    assert_eq!(s.using_gtid, "Current_Pos");
    assert_caught_up(&db, &demo, "after a restart by current_pos").await;
    assert_eq!(
        assert_replica_equals_model(db.conn().await, &model).await,
        compared
    );

    // The coordinates it shows are the files': a file/position restart there is accepted and
    // finds nothing more to do (and the replica's BINLOG_GTID_POS lookup gives our last GTID).
    replica_sql(&db, "STOP SLAVE").await;
    replica_sql(
        &db,
        &format!(
            "CHANGE MASTER TO MASTER_LOG_FILE='{}', MASTER_LOG_POS={}, MASTER_USE_GTID=no",
            demo.end.file, demo.end.position
        ),
    )
    .await;
    replica_sql(&db, "START SLAVE").await;
    let s = wait_status(&db, "file/position restart", |s| {
        s.io_running == "Yes" && s.using_gtid == "No"
    })
    .await;
    assert_eq!(
        (s.master_log_file.as_str(), s.read_master_log_pos),
        (demo.end.file.as_str(), demo.end.position)
    );
    assert_eq!(
        assert_replica_equals_model(db.conn().await, &model).await,
        compared
    );
    replica_sql(&db, "STOP SLAVE").await;
    replica_sql(&db, "CHANGE MASTER TO MASTER_USE_GTID=slave_pos").await;

    // Starts we cannot serve stop the I/O thread with 1236 and MariaDB's wording.
    let beyond = mariadb_gtid(demo.truth.len() + 10);
    let (errno, msg) = start_from_gtid_expecting_error(&db, &beyond).await;
    assert_eq!(errno, 1236, "{msg}");
    assert!(
        msg.contains(&format!(
            "connecting slave requested to start from GTID {beyond}, which is not in the \
             master's binlog"
        )),
        "{msg}"
    );
    let other_server = format!("0-{}-3", MASTER_SERVER_ID + 40);
    let (errno, msg) = start_from_gtid_expecting_error(&db, &other_server).await;
    assert_eq!(errno, 1236, "{msg}");
    assert!(
        msg.contains("probably means that the slave has diverged"),
        "{msg}"
    );
    // Purge the first file: a start at GTID 1 needs transactions that are gone.
    let files = demo.app.files().list();
    let (first, second) = (&files[0].0, &files[1].0);
    let mut conn = mysql_async::Conn::new(common::app::opts(demo.addr(), "root"))
        .await
        .expect("connect to the app");
    conn.query_drop(format!("PURGE BINARY LOGS TO '{second}'"))
        .await
        .expect("purge");
    let _ = conn.disconnect().await;
    assert_ne!(first, second);
    let (errno, msg) = start_from_gtid_expecting_error(&db, &mariadb_gtid(1)).await;
    assert_eq!(errno, 1236, "{msg}");
    assert!(
        msg.contains("required binlog files have been purged"),
        "{msg}"
    );

    eprintln!(
        "seed {seed}: {} transactions by GTID (stopped at 0-{MASTER_SERVER_ID}-{stopped_at}, \
         mid-stream: {mid_stream}, resumed), {} tables, {rows} rows, {compared} values equal \
         on the replica, {:?}",
        demo.truth.len(),
        model.tables.len(),
        started.elapsed()
    );
    common::app::assert_all_answered(&demo.app, "MariaDB tools and replicas");
    demo.stop().await;
}

/// `START SLAVE UNTIL master_gtid_pos`: the replica's I/O and SQL threads stop at that GTID
/// without an error, with exactly the transactions up to it applied; `START SLAVE` then
/// replicates the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_replica_stops_at_until_master_gtid_pos() {
    let replica = tokio::task::spawn_blocking(|| {
        MariaDb::start(&[&format!("--server-id={REPLICA_SERVER_ID}")])
    });
    let Some(db) = replica.await.expect("start MariaDB") else {
        return;
    };
    let seed = 34;
    let demo = run_demo(seed, false, |_, _| async {}).await;
    let addr = demo.app.mariadb_addr().expect("MariaDB-flavoured listener");
    let until = demo.truth.len() / 2;
    replica_sql(
        &db,
        &format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos",
            addr.port()
        ),
    )
    .await;
    replica_sql(
        &db,
        &format!(
            "START SLAVE UNTIL master_gtid_pos = '{}'",
            mariadb_gtid(until)
        ),
    )
    .await;
    let s = wait_status(&db, "UNTIL master_gtid_pos", |s| {
        s.io_running == "No" && s.sql_running == "No"
    })
    .await;
    assert_eq!(s.last_io_errno, 0, "{s:?}");
    assert_eq!(s.last_sql_error, "", "{s:?}");
    let slave_pos = gtid_slave_pos(&db).await;
    assert_eq!(
        slave_pos,
        Some(mariadb_gtid(until)),
        "seed {seed}: stopped there"
    );
    let mut model = Model::default();
    for txn in &demo.truth[..until] {
        model.apply(txn);
    }
    let compared_until = assert_replica_equals_model(db.conn().await, &model).await;

    replica_sql(&db, "START SLAVE").await;
    assert_caught_up(&db, &demo, "START SLAVE after the UNTIL stop").await;
    for txn in &demo.truth[until..] {
        model.apply(txn);
    }
    let compared = assert_replica_equals_model(db.conn().await, &model).await;
    eprintln!(
        "seed {seed}: stopped at {} of {} transactions ({compared_until} values equal), then \
         caught up ({compared} values equal)",
        mariadb_gtid(until),
        demo.truth.len()
    );
    common::app::assert_all_answered(&demo.app, "MariaDB tools and replicas");
    demo.stop().await;
}

/// `tibinlog check` against a MariaDB replica under the running workload (`common::check`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn check_a_mariadb_replica_under_the_workload_finds_exactly_the_drift_and_repairs_it() {
    let replica = tokio::task::spawn_blocking(|| {
        MariaDb::start_tcp_with(&[&format!("--server-id={}", REPLICA_SERVER_ID + 10)])
    });
    let Some((_db, port)) = replica.await.expect("start MariaDB") else {
        return;
    };
    let db = common::check::Replica {
        port,
        mysql8: false,
    };
    common::check::scenario(&db, "check_a_mariadb_replica").await;
}

#[test]
fn format_g_prints_like_c_printf() {
    use common::mariadb_binlog::format_g;
    assert_eq!(format_g(1.5, 6), "1.5");
    assert_eq!(format_g(12345.625, 6), "12345.6");
    assert_eq!(format_g(-0.0000125, 6), "-1.25e-05");
    assert_eq!(format_g(1e20, 6), "1e+20");
    assert_eq!(format_g(123456.0, 6), "123456");
    assert_eq!(format_g(1234567.0, 6), "1.23457e+06");
    assert_eq!(format_g(0.0001, 6), "0.0001");
}

// ---------------------------------------------------------------------------------------------
// mariadb-dump seeding a replica

/// The classic way to seed a replica: `mariadb-dump --single-transaction --master-data=2` taken
/// while the workload runs, loaded into a MariaDB 10.11, then `CHANGE MASTER TO` the recorded
/// file and position; and the same through the MariaDB-flavoured listener with `--gtid` and
/// `MASTER_USE_GTID=slave_pos`. Both replicas end equal to the simulator's tables, so the dump
/// and the binlog from its coordinates hold every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_dump_seeds_replicas_by_position_and_by_gtid() {
    let Some(tool) = require_tool("mariadb-dump") else {
        return;
    };
    let started = Instant::now();
    let replicas = tokio::task::spawn_blocking(|| {
        (
            MariaDb::start(&[&format!("--server-id={REPLICA_SERVER_ID}")]),
            MariaDb::start(&[&format!("--server-id={}", REPLICA_SERVER_ID + 1)]),
        )
    });
    let (Some(by_pos), Some(by_gtid)) = replicas.await.expect("start MariaDB") else {
        return;
    };
    let seed = common::demo::fresh_seed("mariadb-dump seeding");
    let dumps = std::sync::Mutex::new(None);
    let demo = run_demo(seed, false, |addr, maria| {
        let (tool, dumps) = (tool.clone(), &dumps);
        async move {
            // Mid-stream: once a few dozen transactions are in the binlog.
            let deadline = Instant::now() + WAIT;
            loop {
                let s = master_status(addr).await.expect("status");
                if s.gtids
                    .rsplit('-')
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    >= Some(40)
                {
                    break;
                }
                assert!(Instant::now() < deadline, "the workload never got going");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let d = tokio::task::spawn_blocking(move || {
                (dump(&tool, addr, &[]), dump(&tool, maria, &["--gtid"]))
            })
            .await
            .expect("dumps");
            *dumps.lock().expect("dumps") = Some(d);
        }
    })
    .await;
    let (plain, gtid) = dumps.lock().expect("dumps").take().expect("dumped");

    // By file and position.
    let file = dump_coordinate(&plain, "MASTER_LOG_FILE").expect("file in the dump");
    let pos: u64 = dump_coordinate(&plain, "MASTER_LOG_POS")
        .expect("position in the dump")
        .parse()
        .expect("a number");
    assert!(
        (file.as_str(), pos) < (demo.end.file.as_str(), demo.end.position),
        "seed {seed}: the dump is mid-stream ({file}:{pos}, end {:?})",
        demo.end
    );
    load(by_pos.client(), &plain);
    replica_sql(
        &by_pos,
        &format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_PASSWORD='', MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}, \
             MASTER_USE_GTID=no",
            demo.addr().port()
        ),
    )
    .await;
    replica_sql(&by_pos, "START SLAVE").await;
    wait_status(&by_pos, "dump + file/position", |s| {
        s.relay_master_log_file == demo.end.file && s.exec_master_log_pos == demo.end.position
    })
    .await;

    // By GTID, through the MariaDB-flavoured listener.
    let slave_pos = dump_coordinate(&gtid, "gtid_slave_pos").expect("gtid_slave_pos in the dump");
    assert!(slave_pos.starts_with("0-1-"), "{slave_pos}");
    load(by_gtid.client(), &gtid);
    replica_sql(
        &by_gtid,
        &format!("SET GLOBAL gtid_slave_pos = '{slave_pos}'"),
    )
    .await;
    replica_sql(
        &by_gtid,
        &format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos",
            demo.app.mariadb_addr().expect("listener").port()
        ),
    )
    .await;
    replica_sql(&by_gtid, "START SLAVE").await;
    let last = mariadb_gtid(demo.truth.len());
    wait_status(&by_gtid, "dump + GTID", |s| s.gtid_io_pos == last).await;
    let deadline = Instant::now() + WAIT;
    while gtid_slave_pos(&by_gtid).await.as_deref() != Some(last.as_str()) {
        assert!(
            Instant::now() < deadline,
            "the GTID replica never applied {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut model = Model::default();
    for txn in &demo.truth {
        model.apply(txn);
    }
    let a = assert_replica_equals_model(by_pos.conn().await, &model).await;
    let b = assert_replica_equals_model(by_gtid.conn().await, &model).await;
    eprintln!(
        "seed {seed}: dump at {file}:{pos} / {slave_pos}, {} transactions; {a} and {b} values \
         equal on the replicas, {:?}",
        demo.truth.len(),
        started.elapsed()
    );
    common::app::assert_all_answered(&demo.app, "MariaDB tools and replicas");
    demo.stop().await;
}

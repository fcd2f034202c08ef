//! The traps real binlog clients set for a server posing as a MySQL master, one test each, named
//! `trap_NN_<name>`. Each asserts, over a real connection to the real server, the behaviour
//! the trap demands, so that falling into the trap fails its test.
//!
//! Two fixtures:
//! * a server over the in-memory binlog ([`Fixture`], five transactions in two files): fast,
//!   for protocol and SQL-surface traps; driven by `mysql_async` or, where a client library
//!   hides the detail, by raw packets ([`RawClient`]);
//! * one shared pipeline ([`pipe`]): the simulated cluster running a seeded workload (every
//!   column type, DDL, faults) → the app (changefeed → binlog store → server), dumped once as
//!   raw events (and once more after a restart of the app), for the traps about what the
//!   binlog itself contains (types, status variables, table ids, DDL, positions).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::app::{app_config, finish_workload, start_app_with, start_sim};
use common::mysql_binlog::{assert_seen_equals_truth, expected, read_binlog};
use common::raw_binlog::{
    is_rows, rows_table_and_flags, Ev, Fde, Query, TableMap, ANONYMOUS_GTID, ARTIFICIAL,
    DELETE_ROWS, FDE, GTID, HEARTBEAT, PREVIOUS_GTIDS, QUERY, ROTATE, STMT_END_F, TABLE_MAP,
    UPDATE_ROWS, WRITE_ROWS, XID,
};
use common::repl::{dump_command, err_code, server_code, Fixture, RawClient, PASSWORD, UUID};
use mysql_async::prelude::*;
use mysql_async::BinlogStreamRequest;
use serde_json::Value as Json;
use tibinlog::server::BinlogSource;
use tibinlog_protocol::wire::auth::{scramble_caching_sha2, AuthMethod};

/// Upper bound of any single wait.
const WAIT: Duration = Duration::from_secs(20);
/// Workload of the shared pipeline.
const SEED: u64 = 55;
const TXNS: u64 = 1000;

/// Three transactions in binlog.000001, a rotation, two more in binlog.000002.
fn fill(f: &Fixture) {
    f.source.append_insert(&[(1, "a")]);
    f.source.append_insert(&[(2, "b"), (3, "c")]);
    f.source.append_insert(&[(4, "d")]);
    f.source.rotate();
    f.source.append_insert(&[(5, "e")]);
    f.source.append_insert(&[(6, "f")]);
}

/// A server over the in-memory binlog (CRC32 files unless `checksum` is false), filled.
async fn fixture(checksum: bool) -> Fixture {
    let f = Fixture::start(checksum, AuthMethod::CachingSha2Password).await;
    fill(&f);
    f
}

/// A raw client logged in as root (native password) on the in-memory fixture.
async fn raw(f: &Fixture) -> RawClient {
    let mut c = RawClient::connect(f.addr).await;
    let r = c.login_with("root", PASSWORD, 0, &[]).await;
    assert_eq!(r[0], 0, "login OK: {r:?}");
    c
}

/// Sends `sql` and expects OK.
async fn ok(c: &mut RawClient, sql: &str) {
    let r = c.query(sql).await;
    assert_eq!(r.len(), 1, "{sql}");
    assert_eq!(
        r[0].packets[0][0], 0,
        "{sql}: OK, got {:?}",
        r[0].packets[0]
    );
}

/// Reads dump packets until a non-event packet (EOF / ERR); returns the events and that packet.
async fn read_until_end(c: &mut RawClient, first: Vec<u8>) -> (Vec<Ev>, Vec<u8>) {
    let mut p = first;
    let mut events = Vec::new();
    while p[0] == 0 {
        let ev = Ev::parse(&p[1..]);
        assert_eq!(
            ev.size as usize,
            p.len() - 1,
            "event_size is the event's length"
        );
        events.push(ev);
        p = c.read().await;
    }
    (events, p)
}

/// A non-blocking dump from `file`:`pos` after announcing `checksum` (if any).
async fn dump(
    c: &mut RawClient,
    checksum: Option<&str>,
    file: &str,
    pos: u32,
) -> (Vec<Ev>, Vec<u8>) {
    if let Some(a) = checksum {
        ok(c, &format!("SET @master_binlog_checksum = '{a}'")).await;
    }
    let first = c
        .command(&dump_command(file.as_bytes(), pos, 1, 4711))
        .await;
    read_until_end(c, first).await
}

/// The one-row answer of `q` as text.
async fn row(conn: &mut mysql_async::Conn, q: &str) -> Vec<Option<String>> {
    let rows: Vec<mysql_async::Row> = conn.query(q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
    assert_eq!(rows.len(), 1, "{q}: one row");
    rows[0]
        .clone()
        .unwrap()
        .into_iter()
        .map(|v| match v {
            mysql_async::Value::NULL => None,
            mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            other => Some(other.as_sql(true)),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The shared pipeline.

/// The app over the simulated cluster after the seeded workload, kept running for the whole
/// test process, and what a raw dump of it delivered.
struct Pipe {
    addr: SocketAddr,
    uuid: String,
    max_binlog_size: u64,
    /// A non-blocking dump from binlog.000001:4 with CRC32 announced: every event sent.
    stream: Vec<Ev>,
    /// The same dump after the app was stopped and started again on the same files.
    after_restart: Vec<Ev>,
    /// The truth-log transactions the binlog holds.
    want: Vec<Json>,
}

/// The shared pipeline, started by the first test that needs it.
fn pipe() -> &'static Pipe {
    static PIPE: OnceLock<Result<Pipe, String>> = OnceLock::new();
    let p = PIPE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("traps-pipeline");
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).expect("pipeline dir");
                let run = start_sim(SEED, TXNS).await;
                let cfg = app_config(&run, &dir);
                let max_binlog_size = cfg.max_binlog_size;
                let app = start_app_with(cfg).await;
                let want = finish_workload(&run, &app).await;
                let stream = app_dump(app.local_addr()).await;
                app.stop().await.expect("app stops");
                let app = start_app_with(app_config(&run, &dir)).await;
                let after_restart = app_dump(app.local_addr()).await;
                let pipe = Pipe {
                    addr: app.local_addr(),
                    uuid: app.server_uuid().to_string(),
                    max_binlog_size,
                    stream,
                    after_restart,
                    want,
                };
                eprintln!(
                    "pipeline: seed {SEED}, {} transactions, {} events, {} files, {} DDL",
                    pipe.want.len(),
                    pipe.stream.len(),
                    by_file(&pipe.stream).len(),
                    pipe.want.iter().filter(|t| !t["ddl"].is_null()).count()
                );
                tx.send(pipe).expect("hand over the pipeline");
                // Keep the cluster and the app serving until the test process exits.
                let _keep = (run, app);
                std::future::pending::<()>().await;
            });
        });
        rx.recv()
            .map_err(|_| "the shared pipeline failed to start (see the first panic)".to_string())
    });
    match p {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// Logs in to the app as root (empty password).
async fn app_raw(addr: SocketAddr, attrs: &[(&str, &str)]) -> RawClient {
    let mut c = RawClient::connect(addr).await;
    let r = c.login_with("root", "", 0, attrs).await;
    assert_eq!(r[0], 0, "login OK: {r:?}");
    c
}

async fn app_dump(addr: SocketAddr) -> Vec<Ev> {
    let mut c = app_raw(addr, &[]).await;
    let (events, end) = dump(&mut c, Some("CRC32"), "binlog.000001", 4).await;
    assert_eq!(end[0], 0xFE, "EOF ends the non-blocking dump: {end:?}");
    events
}

/// Events of the stream that come from files (no fake ROTATE, no heartbeat).
fn file_events(stream: &[Ev]) -> impl Iterator<Item = &Ev> {
    stream
        .iter()
        .filter(|e| e.flags & ARTIFICIAL == 0 && e.ty != HEARTBEAT)
}

/// The stream split into files: (name, events from offset 4).
fn by_file(stream: &[Ev]) -> Vec<(String, Vec<&Ev>)> {
    let mut out: Vec<(String, Vec<&Ev>)> = Vec::new();
    for e in stream {
        if e.ty == ROTATE && e.flags & ARTIFICIAL != 0 {
            let name = String::from_utf8_lossy(&e.body(true)[8..]).into_owned();
            out.push((name, Vec::new()));
        } else if e.ty != HEARTBEAT {
            out.last_mut().expect("a fake ROTATE first").1.push(e);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------

/// Trap 1: the first fake ROTATE carries a CRC32 exactly when the session announced CRC32
/// (`@master_binlog_checksum` or the 8.0.26+ `@source_binlog_checksum`), not when the files
/// have one; it is artificial, log_pos 0, timestamp 0, body = position + file name.
#[tokio::test]
async fn trap_01_fake_rotate_checksum() {
    let f = fixture(true).await;
    for (var, value, crc) in [
        ("master_binlog_checksum", "CRC32", true),
        ("source_binlog_checksum", "CRC32", true),
        ("master_binlog_checksum", "NONE", false),
        ("source_binlog_checksum", "NONE", false),
    ] {
        let mut c = raw(&f).await;
        ok(&mut c, &format!("SET @{var} = '{value}'")).await;
        let first = c.command(&dump_command(b"binlog.000001", 4, 1, 0)).await;
        let (evs, _) = read_until_end(&mut c, first).await;
        let rot = &evs[0];
        let what = format!("@{var}={value}");
        assert_eq!(rot.ty, ROTATE, "{what}");
        assert_eq!(
            (rot.timestamp, rot.log_pos, rot.flags),
            (0, 0, ARTIFICIAL),
            "{what}"
        );
        let name = b"binlog.000001";
        assert_eq!(
            rot.raw.len(),
            19 + 8 + name.len() + if crc { 4 } else { 0 },
            "{what}"
        );
        assert_eq!(&rot.raw[19..27], &4u64.to_le_bytes(), "{what}: position");
        assert_eq!(&rot.raw[27..27 + name.len()], name, "{what}: file name");
        if crc {
            assert!(rot.crc_ok(), "{what}: a valid CRC32");
        }
        // The FORMAT_DESCRIPTION follows and parses at once: the stream is in sync.
        assert_eq!(evs[1].ty, FDE, "{what}");
        assert!(evs[1].crc_ok(), "{what}: the FDE's CRC");
    }
    // A start past 4 names that position.
    let mut c = raw(&f).await;
    let (all, _) = dump(&mut c, Some("CRC32"), "binlog.000001", 4).await;
    let gtid2 = all
        .iter()
        .filter(|e| e.ty == XID)
        .map(|e| e.log_pos)
        .next()
        .expect("xid");
    let mut c = raw(&f).await;
    let (evs, _) = dump(&mut c, Some("CRC32"), "binlog.000001", gtid2).await;
    assert_eq!(&evs[0].raw[19..27], &u64::from(gtid2).to_le_bytes());
    assert!(evs[0].crc_ok());
    f.stop().await;
}

/// Trap 2: the FORMAT_DESCRIPTION follows the fake ROTATE, always ends with the algorithm byte
/// and 4 CRC bytes (also for NONE files), its own post-header entry is 57 + N, and the array is
/// right for every type emitted (TABLE_MAP 8: a 6-byte table id; rows v2 10; GTID 42; …),
/// in the in-memory files and in every file of the pipeline.
#[tokio::test]
async fn trap_02_format_description() {
    let want: [(u8, u8); 11] = [
        (QUERY, 13),
        (ROTATE, 8),
        (XID, 0),
        (TABLE_MAP, 8),
        (HEARTBEAT, 0),
        (WRITE_ROWS, 10),
        (UPDATE_ROWS, 10),
        (DELETE_ROWS, 10),
        (GTID, 42),
        (ANONYMOUS_GTID, 42),
        (PREVIOUS_GTIDS, 0),
    ];
    let check = |what: &str, evs: &[Ev]| {
        let mut fdes = 0;
        for (i, e) in evs.iter().enumerate() {
            if e.ty != FDE {
                continue;
            }
            fdes += 1;
            let prev = &evs[i - 1];
            assert!(
                prev.ty == ROTATE && prev.flags & ARTIFICIAL != 0,
                "{what}: the FDE directly follows a fake ROTATE"
            );
            assert!(e.crc_ok(), "{what}: the FDE ends with a valid CRC32");
            let fde = Fde::parse(e);
            let n = fde.post_header.len();
            assert_eq!(fde.binlog_version, 4, "{what}");
            assert_eq!(fde.header_len, 19, "{what}");
            assert!(
                fde.server_version.starts_with("8.0."),
                "{what}: {}",
                fde.server_version
            );
            assert_eq!(
                usize::from(fde.post_header_len(FDE)),
                57 + n,
                "{what}: FDE post-header entry"
            );
            for (ty, len) in want {
                assert_eq!(
                    fde.post_header_len(ty),
                    len,
                    "{what}: post-header of type {ty}"
                );
            }
            for t in evs.iter().map(|e| e.ty) {
                assert!(
                    usize::from(t) <= n,
                    "{what}: type {t} is in the FDE's array"
                );
            }
        }
        assert!(fdes > 0, "{what}: FDEs seen");
    };
    for checksum in [true, false] {
        let f = fixture(checksum).await;
        let mut c = raw(&f).await;
        let (evs, _) = dump(&mut c, Some("CRC32"), "binlog.000001", 4).await;
        let fde = Fde::parse(&evs[1]);
        assert_eq!(fde.checksum_alg, u8::from(checksum), "algorithm byte");
        check(&format!("in-memory, checksum {checksum}"), &evs);
        f.stop().await;
    }
    let p = pipe();
    check("pipeline", &p.stream);
    assert_eq!(
        Fde::parse(&p.stream[1]).checksum_alg,
        1,
        "the app writes CRC32"
    );
}

/// Trap 3: log_pos is the exact end offset, offsets are contiguous from 4 in every file, the
/// status statement and `SHOW BINARY LOGS` agree with them, a start inside an event is refused
/// with 1236, and the same (file, offset) addresses the same bytes after a restart.
#[tokio::test]
async fn trap_03_positions() {
    let p = pipe();
    let files = by_file(&p.stream);
    assert!(files.len() > 1, "the pipeline rotated");
    let mut ends = Vec::new();
    for (name, evs) in &files {
        let mut at = 4u64;
        for e in evs {
            at += u64::from(e.size);
            assert_eq!(
                u64::from(e.log_pos),
                at,
                "{name}: log_pos is the end offset"
            );
        }
        ends.push((name.clone(), at));
    }
    let mut conn = mysql_async::Conn::new(common::app::opts(p.addr, "root"))
        .await
        .expect("connect");
    let logs: Vec<(String, u64, String)> = conn.query("SHOW BINARY LOGS").await.expect("logs");
    let sizes: Vec<(String, u64)> = logs.into_iter().map(|l| (l.0, l.1)).collect();
    // The restart may have opened a new file; the files of the first run keep their sizes.
    let status = common::app::master_status(p.addr).await.expect("status");
    assert!(
        sizes.starts_with(&ends[..ends.len() - 1]),
        "{sizes:?} vs {ends:?}"
    );
    assert!(
        sizes.contains(&(status.file.clone(), status.position)),
        "SHOW MASTER STATUS names the end of a file: {status:?} {sizes:?}"
    );
    // Stable across the restart: every event of the first run is at the same place.
    let again = by_file(&p.after_restart);
    for ((name, evs), (name2, evs2)) in files.iter().zip(&again) {
        assert_eq!(name, name2);
        assert!(evs2.len() >= evs.len(), "{name}: nothing lost");
        for (a, b) in evs.iter().zip(evs2) {
            assert_eq!(a.raw, b.raw, "{name}: same bytes at offset {}", a.log_pos);
        }
    }
    // A start inside an event: 1236.
    let (name, evs) = &files[1];
    let mid = evs.iter().find(|e| e.ty == GTID).expect("a GTID").log_pos - 3;
    let mut c = app_raw(p.addr, &[]).await;
    let (none, end) = dump(&mut c, Some("CRC32"), name, mid).await;
    assert!(none.is_empty());
    assert_eq!(err_code(&end), Some(1236), "{end:?}");
    // A start at an event boundary serves that event with its own log_pos.
    let gtid = evs.iter().find(|e| e.ty == GTID).expect("a GTID");
    let start = gtid.log_pos - gtid.size;
    let mut c = app_raw(p.addr, &[]).await;
    let (got, _) = dump(&mut c, Some("CRC32"), name, start).await;
    assert_eq!(got[1].ty, FDE);
    assert_eq!(got[1].log_pos, 0, "FDE of a mid-file start has log_pos 0");
    assert_eq!(got[2].raw, gtid.raw);
}

/// Trap 4: `SHOW MASTER STATUS`, `SHOW BINARY LOG STATUS` and MariaDB's `SHOW BINLOG STATUS`
/// all answer one row with the five MySQL columns, the end position and the GTID set.
#[tokio::test]
async fn trap_04_status_statements() {
    let f = fixture(true).await;
    let end = f.source.end_position();
    let mut c = raw(&f).await;
    for q in [
        "SHOW MASTER STATUS",
        "SHOW BINARY LOG STATUS",
        "SHOW BINLOG STATUS",
        "show master status;",
    ] {
        let r = c.query(q).await;
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].labels(),
            [
                "File",
                "Position",
                "Binlog_Do_DB",
                "Binlog_Ignore_DB",
                "Executed_Gtid_Set"
            ],
            "{q}"
        );
        let rows = r[0].rows();
        assert_eq!(rows.len(), 1, "{q}: exactly one row");
        assert_eq!(rows[0][0].as_deref(), Some(end.file.as_str()), "{q}");
        assert_eq!(rows[0][1], Some(end.pos.to_string()), "{q}");
        assert_eq!(rows[0][4], Some(format!("{UUID}:1-5")), "{q}");
    }
    f.stop().await;
}

/// Trap 5: heartbeats at the period the client set, in nanoseconds (`@master_heartbeat_period`
/// and `@source_heartbeat_period`); v1 body = the current file name, log_pos = current offset,
/// timestamp 0, the file of the last ROTATE, and the CRC32 of the stream.
#[tokio::test]
async fn trap_05_heartbeats() {
    let f = fixture(true).await;
    let end = f.source.end_position();
    for var in ["master_heartbeat_period", "source_heartbeat_period"] {
        let mut c = raw(&f).await;
        ok(&mut c, "SET @master_binlog_checksum = 'CRC32'").await;
        // 200 ms in nanoseconds.
        ok(&mut c, &format!("SET @{var} = 200000000")).await;
        let mut p = c.command(&dump_command(b"binlog.000001", 4, 0, 77)).await;
        let mut last_rotate = String::new();
        let mut beats = Vec::new();
        while beats.len() < 6 {
            assert_eq!(p[0], 0, "{var}: event packet {p:?}");
            let e = Ev::parse(&p[1..]);
            if e.ty == ROTATE {
                last_rotate = String::from_utf8_lossy(&e.body(true)[8..]).into_owned();
            }
            if e.ty == HEARTBEAT {
                assert!(e.crc_ok(), "{var}: heartbeat CRC32");
                assert_eq!(e.timestamp, 0, "{var}");
                assert_eq!(e.flags, 0, "{var}");
                assert_eq!(u64::from(e.log_pos), end.pos, "{var}: current offset");
                assert_eq!(e.body(true), end.file.as_bytes(), "{var}: current file");
                assert_eq!(last_rotate, end.file, "{var}: the file of the last ROTATE");
                beats.push(Instant::now());
            }
            p = c.read().await;
        }
        // Times are taken on receipt, so one gap can look short after a late read; five periods
        // (the server waits a full period after each beat it sends) stay above 700 ms unless the
        // first beat was read over 300 ms late.
        let span = beats[5] - beats[0];
        assert!(
            span >= Duration::from_millis(700),
            "{var}: five heartbeat periods of 200 ms took only {span:?}"
        );
        for w in beats.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                gap <= Duration::from_secs(5),
                "{var}: heartbeat every 200 ms, got {gap:?}"
            );
        }
    }
    f.stop().await;
}

/// Trap 6: the dump socket is one-way (a COM_PING written on it is not answered: only events
/// follow), server id 0 or flag 1 means non-blocking (EOF at the end), and a new dump with the
/// same server id ends the older one while another id does not.
#[tokio::test]
async fn trap_06_one_way_dump_socket() {
    let f = fixture(true).await;
    // Blocking dump, caught up; then a ping, then a new transaction.
    let mut c = raw(&f).await;
    ok(&mut c, "SET @master_binlog_checksum = 'CRC32'").await;
    let end = f.source.end_position();
    let mut p = c.command(&dump_command(b"binlog.000001", 4, 0, 31)).await;
    loop {
        let e = Ev::parse(&p[1..]);
        if e.ty == XID && u64::from(e.log_pos) == end.pos {
            break;
        }
        p = c.read().await;
    }
    c.seq = 0;
    c.write(&[0x0e]).await;
    let (gno, _) = f.source.append_insert(&[(7, "g")]);
    loop {
        let p = c.read().await;
        assert_eq!(p[0], 0, "only events on the dump socket, got {p:?}");
        assert!(p.len() > 19, "an event, not an OK packet: {p:?}");
        let e = Ev::parse(&p[1..]);
        assert_eq!(e.size as usize, p.len() - 1);
        assert!(e.crc_ok());
        if e.ty == GTID {
            assert_eq!(
                u64::from_le_bytes(e.raw[36..44].try_into().expect("gno")),
                gno
            );
            break;
        }
    }
    // Non-blocking: flag 1, or server id 0 without the flag.
    for (flags, server_id) in [(1u16, 5u32), (0, 0)] {
        let mut c = raw(&f).await;
        ok(&mut c, "SET @master_binlog_checksum = 'CRC32'").await;
        let first = c
            .command(&dump_command(b"binlog.000001", 4, flags, server_id))
            .await;
        let (evs, last) = read_until_end(&mut c, first).await;
        assert_eq!(
            last,
            [0xFE, 0, 0, 2, 0],
            "flags {flags} id {server_id}: EOF"
        );
        assert_eq!(evs.iter().filter(|e| e.ty == GTID).count(), 6);
    }
    // Same server id: the older dump ends; another id does not end it.
    let start = |id: u32| {
        let f = &f;
        async move {
            let mut c = raw(f).await;
            ok(&mut c, "SET @master_binlog_checksum = 'CRC32'").await;
            let p = c.command(&dump_command(b"binlog.000002", 4, 0, id)).await;
            assert_eq!(p[0], 0, "dump started");
            c
        }
    };
    let mut old = start(9).await;
    let mut other = start(10).await;
    let _new = start(9).await;
    let deadline = Instant::now() + WAIT;
    loop {
        match old.try_read(Duration::from_millis(200)).await {
            Some(Err(_)) => break,
            Some(Ok(p)) => assert_eq!(p[0], 0, "events until the close"),
            None => assert!(
                Instant::now() < deadline,
                "the older dump with id 9 was not ended"
            ),
        }
    }
    // The dump with id 10 still streams new events.
    f.source.append_insert(&[(8, "h")]);
    loop {
        let p = other.read().await;
        assert_eq!(p[0], 0, "dump 10 lives on");
        if Ev::parse(&p[1..]).ty == GTID && other.try_read(Duration::ZERO).await.is_none() {
            break;
        }
        if Ev::parse(&p[1..]).ty == GTID {
            break;
        }
    }
    f.stop().await;
}

/// Trap 7: exact variable values and labels: upper-case `ROW`/`ON`/`FULL`/`CRC32`, server_id not
/// 0, `Variable_name`/`Value` columns, canonical lower-case names whatever the pattern's case,
/// and Connector/J's session query answered column for column under its aliases.
#[tokio::test]
async fn trap_07_exact_variable_values() {
    for checksum in [true, false] {
        let f = fixture(checksum).await;
        let mut c = raw(&f).await;
        let crc = if checksum { "CRC32" } else { "NONE" };
        for (q, name, value) in [
            (
                "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'",
                "binlog_checksum",
                crc,
            ),
            (
                "show global variables like 'binlog_checksum'",
                "binlog_checksum",
                crc,
            ),
            (
                "SHOW VARIABLES LIKE 'binlog_format'",
                "binlog_format",
                "ROW",
            ),
            (
                "SHOW VARIABLES LIKE 'Binlog_Row_Image'",
                "binlog_row_image",
                "FULL",
            ),
            (
                "SHOW VARIABLES LIKE 'binlog_row_metadata';",
                "binlog_row_metadata",
                "FULL",
            ),
            ("SHOW VARIABLES LIKE 'log_bin'", "log_bin", "ON"),
            ("SHOW GLOBAL VARIABLES LIKE 'GTID_MODE'", "gtid_mode", "ON"),
            ("SHOW VARIABLES LIKE 'server_id'", "server_id", "4242"),
        ] {
            let r = c.query(q).await;
            assert_eq!(r[0].labels(), ["Variable_name", "Value"], "{q}");
            assert_eq!(
                r[0].rows(),
                [[Some(name.to_string()), Some(value.to_string())]],
                "{q}"
            );
        }
        let r = c
            .query("SELECT @@global.binlog_checksum, @@server_id")
            .await;
        assert_eq!(r[0].rows(), [[Some(crc.to_string()), Some("4242".into())]]);
        f.stop().await;
    }
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    let aliases = [
        "auto_increment_increment",
        "character_set_client",
        "character_set_connection",
        "character_set_results",
        "character_set_server",
        "collation_server",
        "collation_connection",
        "init_connect",
        "interactive_timeout",
        "license",
        "lower_case_table_names",
        "max_allowed_packet",
        "net_write_timeout",
        "performance_schema",
        "sql_mode",
        "system_time_zone",
        "time_zone",
        "transaction_isolation",
        "wait_timeout",
    ];
    let select: Vec<String> = aliases
        .iter()
        .map(|a| {
            let scope = if *a == "auto_increment_increment" {
                "session."
            } else {
                ""
            };
            format!("@@{scope}{a} AS {a}")
        })
        .collect();
    let q = format!(
        "/* mysql-connector-j-8.4.0 (Revision: 1c3f5c149e0bfe31c7fbeb24e2d260cd890972c4) */SELECT  {}",
        select.join(", ")
    );
    let r = c.query(&q).await;
    assert_eq!(r[0].labels(), aliases);
    let rows = r[0].rows();
    let v = |a: &str| rows[0][aliases.iter().position(|x| *x == a).expect("alias")].clone();
    assert_eq!(v("lower_case_table_names").as_deref(), Some("0"));
    assert_eq!(v("character_set_server").as_deref(), Some("utf8mb4"));
    assert_eq!(v("collation_server").as_deref(), Some("utf8mb4_0900_ai_ci"));
    assert_eq!(v("max_allowed_packet").as_deref(), Some("67108864"));
    assert_eq!(v("auto_increment_increment").as_deref(), Some("1"));
    f.stop().await;
}

/// Trap 8: authentication: printable-ASCII scramble (no NUL) in every greeting, no CLIENT_SSL
/// without TLS, caching_sha2 always on the fast path (`01 03` then OK, never `01 04`), and
/// mysql_native_password accepted.
#[tokio::test]
async fn trap_08_authentication() {
    let f = fixture(true).await;
    for _ in 0..40 {
        let c = RawClient::connect(f.addr).await;
        assert_eq!(c.nonce.len(), 20);
        assert!(
            c.nonce.iter().all(|b| (0x21..=0x7E).contains(b)),
            "printable scramble: {:?}",
            c.nonce
        );
        assert_eq!(c.caps & 0x800, 0, "no CLIENT_SSL without TLS");
        assert_eq!(c.plugin, "caching_sha2_password");
    }
    let mut c = RawClient::connect(f.addr).await;
    let auth = scramble_caching_sha2(&c.nonce, PASSWORD.as_bytes());
    let r = c.login("root", "caching_sha2_password", &auth).await;
    assert_eq!(
        r,
        [0x01, 0x03],
        "fast auth success, never full authentication"
    );
    assert_eq!(c.read().await[0], 0, "then OK");
    let mut c = RawClient::connect(f.addr).await;
    c.login_native().await;
    f.stop().await;
}

/// Trap 9: result-set framing: EOF packets unless both sides set DEPRECATE_EOF, OK-terminated
/// otherwise; multi-statement results flag MORE_RESULTS on all but the last (also Canal's
/// batch of `show create table`); QUERY_ATTRIBUTES (and COMPRESS) never advertised.
#[tokio::test]
async fn trap_09_result_set_framing() {
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    assert_eq!(c.caps & 0x800_0000, 0, "no CLIENT_QUERY_ATTRIBUTES");
    assert_eq!(c.caps & 0x20, 0, "no CLIENT_COMPRESS");
    let r = c.query("SELECT @@server_id, @@version").await;
    let ps = &r[0].packets;
    assert_eq!(ps.len(), 1 + 2 + 1 + 1 + 1, "count, 2 defs, EOF, row, EOF");
    for eof in [&ps[3], &ps[5]] {
        assert_eq!(eof[0], 0xFE);
        assert_eq!(eof.len(), 5, "classic EOF packet");
    }
    assert_ne!(c.caps & 0x100_0000, 0, "DEPRECATE_EOF offered");
    let mut d = RawClient::connect(f.addr).await;
    let r = d.login_with("root", PASSWORD, 0x100_0000, &[]).await;
    assert_eq!(r[0], 0);
    let r = d.query("SELECT @@server_id, @@version").await;
    let ps = &r[0].packets;
    assert_eq!(ps.len(), 1 + 2 + 1 + 1, "count, 2 defs, row, OK");
    assert_eq!(ps[4][0], 0xFE);
    assert!(
        ps[4].len() >= 7,
        "an OK packet with a 0xFE header: {:?}",
        ps[4]
    );
    assert_eq!(
        r[0].rows(),
        [[
            Some("4242".to_string()),
            Some(tibinlog::server::server_version())
        ]]
    );
    // Multi-statements (CLIENT_MULTI_STATEMENTS).
    for caps in [0x1_0000u32, 0x1_0000 | 0x100_0000] {
        let mut m = RawClient::connect(f.addr).await;
        assert_eq!(m.login_with("root", PASSWORD, caps, &[]).await[0], 0);
        let r = m.query("SELECT 1; SELECT @@server_id;SET @a = 1").await;
        assert_eq!(r.len(), 3, "three results");
        assert_ne!(r[0].status & 0x0008, 0, "MORE_RESULTS on the first");
        assert_ne!(r[1].status & 0x0008, 0, "MORE_RESULTS on the second");
        assert_eq!(r[2].status & 0x0008, 0, "not on the last");
        assert_eq!(r[1].rows(), [[Some("4242".to_string())]]);
    }
    f.stop().await;
    // Canal's batch against real tables.
    let p = pipe();
    let mut conn = mysql_async::Conn::new(common::app::opts(p.addr, "root"))
        .await
        .expect("connect");
    let mut tables = Vec::new();
    let dbs: Vec<String> = conn.query("SHOW DATABASES").await.expect("dbs");
    for db in dbs.iter().filter(|d| *d != "information_schema") {
        let ts: Vec<String> = conn
            .query(format!("SHOW TABLES FROM `{db}`"))
            .await
            .expect("tables");
        tables.extend(ts.into_iter().map(|t| format!("`{db}`.`{t}`")));
    }
    assert!(tables.len() >= 2, "tables to describe: {tables:?}");
    let mut m = app_raw(p.addr, &[]).await;
    m.seq = 0;
    let mut cm = RawClient::connect(p.addr).await;
    assert_eq!(cm.login_with("root", "", 0x1_0000, &[]).await[0], 0);
    let q = format!(
        "show create table {};show create table {}",
        tables[0], tables[1]
    );
    let r = cm.query(&q).await;
    assert_eq!(r.len(), 2);
    assert_ne!(
        r[0].status & 0x0008,
        0,
        "MORE_RESULTS on the first show create table"
    );
    assert_eq!(r[1].status & 0x0008, 0);
    assert_eq!(r[0].labels(), ["Table", "Create Table"]);
    assert!(r[1].rows()[0][1]
        .as_deref()
        .is_some_and(|s| s.starts_with("CREATE TABLE")));
}

/// Trap 10: DML transactions are GTID → QUERY exactly `BEGIN` → … → XID, DDL is GTID → QUERY
/// without BEGIN or XID, and every event read from the files has a non-zero timestamp (the
/// FORMAT_DESCRIPTION included, so a client has one before the first BEGIN).
#[tokio::test]
async fn trap_10_transaction_text_and_timestamps() {
    let p = pipe();
    let evs: Vec<&Ev> = file_events(&p.stream).collect();
    for e in &evs {
        assert_ne!(
            e.timestamp, 0,
            "type {} at {} has a timestamp",
            e.ty, e.log_pos
        );
    }
    let (mut dml, mut ddl) = (0, 0);
    let mut i = 0;
    while i < evs.len() {
        if evs[i].ty != GTID {
            i += 1;
            continue;
        }
        let q = Query::parse(evs[i + 1], true);
        if q.query == "BEGIN" {
            dml += 1;
            let end = evs[i + 1..]
                .iter()
                .position(|e| e.ty == XID || e.ty == GTID)
                .map(|k| k + i + 1)
                .expect("transaction end");
            assert_eq!(evs[end].ty, XID, "a DML transaction ends with XID");
            assert!(evs[i + 2..end]
                .iter()
                .all(|e| e.ty == TABLE_MAP || is_rows(e.ty)));
            i = end;
        } else {
            ddl += 1;
            assert!(
                !q.query.to_ascii_uppercase().starts_with("BEGIN"),
                "{}",
                q.query
            );
            assert!(
                evs.get(i + 2).is_none_or(|e| e.ty != XID),
                "no XID after DDL"
            );
            i += 2;
        }
    }
    let want_dml = p.want.iter().filter(|t| t["ddl"].is_null()).count();
    assert_eq!(dml, want_dml, "every DML transaction has BEGIN … XID");
    assert_eq!(dml + ddl, p.want.len());
    assert!(ddl > 0, "DDL present");
}

/// Trap 11: TABLE_MAP discipline: every statement's rows come after a TABLE_MAP of that table
/// within the same statement (maps are forgotten at STMT_END_F), the last rows event before XID
/// has STMT_END_F, and a table id is never bound to another table (not across DDL, rotation or
/// restart); ids are never 0 or 0xFFFFFFFFFFFF. A table keeps its id through RENAME TABLE (the
/// id is TiDB's, and the table is the same): its id then maps under the new name, after the
/// RENAME's QUERY event, which every client that caches maps by id clears its cache on.
#[tokio::test]
async fn trap_11_table_map_discipline() {
    let p = pipe();
    let mut renames = 0;
    // The whole binlog twice: before the restart, and read again after it.
    for stream in [&p.stream, &p.after_restart] {
        let mut bound: HashMap<u64, (String, String)> = HashMap::new();
        let mut mapped: HashMap<u64, ()> = HashMap::new();
        let mut prev: Option<&Ev> = None;
        let mut statements = 0;
        for e in file_events(stream) {
            if e.ty == QUERY {
                let q = Query::parse(e, true).query;
                if q.starts_with("RENAME TABLE ") {
                    renames += 1;
                    // In statement order, as MySQL applies them (a swap goes through a name
                    // nothing was bound to).
                    let ids = common::truth::idents(&q);
                    for c in ids.chunks(4) {
                        let (from, to) = ((&c[0], &c[1]), (c[2].clone(), c[3].clone()));
                        for name in bound.values_mut() {
                            if (&name.0, &name.1) == from {
                                *name = to.clone();
                            }
                        }
                    }
                }
            }
            if e.ty == TABLE_MAP {
                let tm = TableMap::parse(e, true);
                assert!(
                    tm.table_id != 0 && tm.table_id != 0xFFFF_FFFF_FFFF,
                    "{}",
                    tm.table_id
                );
                let name = (tm.db.clone(), tm.table.clone());
                let old = bound.entry(tm.table_id).or_insert_with(|| name.clone());
                assert_eq!(*old, name, "table id {} re-bound", tm.table_id);
                mapped.insert(tm.table_id, ());
            } else if is_rows(e.ty) {
                let (id, flags) = rows_table_and_flags(e);
                assert!(
                    mapped.contains_key(&id),
                    "rows of table {id} without its TABLE_MAP in this statement"
                );
                if flags & STMT_END_F != 0 {
                    mapped.clear();
                    statements += 1;
                }
            } else if e.ty == XID {
                let last = prev.expect("an event before XID");
                assert!(is_rows(last.ty), "XID follows rows");
                assert_ne!(
                    rows_table_and_flags(last).1 & STMT_END_F,
                    0,
                    "STMT_END_F on the last rows event"
                );
                assert!(mapped.is_empty(), "every statement ended");
            }
            prev = Some(e);
        }
        assert!(statements > 0);
        assert!(bound.len() > 1, "several tables");
    }
    assert!(renames > 0, "seed {SEED} renames tables");
}

/// Trap 12: column types and metadata: no VAR_STRING (253), no legacy temporal types (7, 11,
/// 12), no legacy DECIMAL (0), no top-level ENUM/SET (247/248), no VECTOR (242), optional
/// metadata TLVs ≤ 12; STRING metadata names CHAR/ENUM/SET (with CHAR > 255 bytes folded); and
/// the values (little-endian integers, big-endian DECIMAL/temporal/BIT) decode to the truth log
/// in a real client.
#[tokio::test]
async fn trap_12_types_and_metadata() {
    let p = pipe();
    let mut seen = BTreeSet::new();
    for e in file_events(&p.stream).filter(|e| e.ty == TABLE_MAP) {
        let tm = TableMap::parse(e, true);
        for (i, t) in tm.types.iter().enumerate() {
            seen.insert(*t);
            assert!(
                ![0, 7, 11, 12, 242, 247, 248, 253].contains(t),
                "{}.{} column {i}: type {t}",
                tm.db,
                tm.table
            );
            if *t == 254 {
                let m = &tm.meta[i];
                assert!(
                    [0xFE, 0xF7, 0xF8].contains(&(m[0] | 0x30)),
                    "STRING metadata real type {:#x}",
                    m[0]
                );
            }
        }
        for (t, _) in &tm.tlvs {
            assert!((1..=12).contains(t), "optional metadata TLV {t}");
        }
    }
    // The workload covers the modern types.
    for t in [3u8, 8, 246, 15, 252, 17, 18, 19, 245, 254, 16] {
        assert!(seen.contains(&t), "type {t} emitted: {seen:?}");
    }
    let dump = read_binlog(
        p.addr,
        BinlogStreamRequest::new(0)
            .with_filename(b"binlog.000001")
            .with_pos(4),
        None,
    )
    .await;
    let compared = assert_seen_equals_truth(
        "traps",
        &dump.txns[..p.want.len()],
        &expected(&p.want, 1..=p.want.len() as u64),
    );
    assert!(compared > 100, "{compared} values compared");
}

/// Trap 13: QUERY status variables: only codes MySQL 8.0 writes (never 2, 10, 14, 15 or vendor
/// codes), each once, in MySQL's write order. That order is ascending except that
/// Q_CATALOG_NZ (6) comes before Q_AUTO_INCREMENT (3) and Q_CHARSET (4), as in every MySQL
/// 8.0 file; clients look variables up by code, so this is what they already read. BEGIN and
/// DDL carry sql_mode and the charsets a replica applies.
#[tokio::test]
async fn trap_13_query_status_variables() {
    const ORDER: [u8; 17] = [0, 1, 6, 3, 4, 5, 7, 8, 9, 11, 12, 13, 16, 17, 18, 19, 20];
    let check = |what: &str, q: &Query| {
        let codes: Vec<u8> = q.status_vars.iter().map(|(c, _)| *c).collect();
        let ranks: Vec<usize> = codes
            .iter()
            .map(|c| {
                ORDER
                    .iter()
                    .position(|o| o == c)
                    .unwrap_or_else(|| panic!("{what}: status code {c} in {codes:?}"))
            })
            .collect();
        assert!(
            ranks.windows(2).all(|w| w[0] < w[1]),
            "{what}: order {codes:?}"
        );
        for must in [0u8, 1, 4] {
            assert!(codes.contains(&must), "{what}: code {must} in {codes:?}");
        }
    };
    let p = pipe();
    let mut n = 0;
    for e in file_events(&p.stream).filter(|e| e.ty == QUERY) {
        let q = Query::parse(e, true);
        check(&format!("pipeline {:?}", q.query), &q);
        n += 1;
    }
    assert!(n > 0);
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    let (evs, _) = dump(&mut c, Some("CRC32"), "binlog.000001", 4).await;
    for e in evs.iter().filter(|e| e.ty == QUERY) {
        check("in-memory BEGIN", &Query::parse(e, true));
    }
    f.stop().await;
}

/// True for MySQL's partition maintenance statements, which the SQL parser of the tests does
/// not know: `ALTER TABLE t TRUNCATE PARTITION p[, p…]` and `ALTER TABLE t EXCHANGE PARTITION
/// p WITH TABLE t2 [WITH|WITHOUT VALIDATION]` (MySQL 8.0 reference, ALTER TABLE partition
/// options), tables optionally qualified, every name backquoted.
fn partition_maintenance(sql: &str) -> bool {
    // Each backquoted name becomes `#`; a table, `#` or `#.#`, becomes `T`.
    let mut shape = String::new();
    let mut in_name = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (in_name, c) {
            (true, '`') if chars.peek() == Some(&'`') => {
                chars.next();
            }
            (true, '`') => in_name = false,
            (true, _) => {}
            (false, '`') => {
                in_name = true;
                shape.push('#');
            }
            (false, c) => shape.push(c.to_ascii_uppercase()),
        }
    }
    if in_name {
        return false;
    }
    let shape = shape.replace("#.#", "T").replace('#', "T");
    let Some(rest) = shape.strip_prefix("ALTER TABLE T ") else {
        return false;
    };
    if let Some(names) = rest.strip_prefix("TRUNCATE PARTITION ") {
        return names.split(", ").all(|n| n == "T");
    }
    matches!(
        rest,
        "EXCHANGE PARTITION T WITH TABLE T"
            | "EXCHANGE PARTITION T WITH TABLE T WITH VALIDATION"
            | "EXCHANGE PARTITION T WITH TABLE T WITHOUT VALIDATION"
    )
}

#[test]
fn partition_maintenance_shapes() {
    for ok in [
        "ALTER TABLE `wl`.`t_hash` TRUNCATE PARTITION `p1`",
        "ALTER TABLE `t` TRUNCATE PARTITION `p1`, `p``2`",
        "ALTER TABLE `wl`.`t_xp` EXCHANGE PARTITION `p0` WITH TABLE `wl`.`t_xn`",
        "alter table `a` exchange partition `p` with table `b` without validation",
    ] {
        assert!(partition_maintenance(ok), "{ok}");
    }
    for bad in [
        "ALTER TABLE `t` TRUNCATE PARTITION",
        "ALTER TABLE `t` TRUNCATE PARTITION `p1` `p2`",
        "ALTER TABLE `t` EXCHANGE PARTITION `p` WITH `u`",
        "ALTER TABLE `t` ADD COLUMN `c` int",
        "ALTER TABLE `t TRUNCATE PARTITION `p`",
    ] {
        assert!(!partition_maintenance(bad), "{bad}");
    }
}

/// Trap 14: DDL is MySQL syntax: every DDL QUERY event and every `SHOW CREATE TABLE` parses as
/// MySQL and has no TiDB-only clauses, and the schema answers agree column for column (count
/// and names) with the TABLE_MAPs written after the table's last DDL.
#[tokio::test]
async fn trap_14_ddl_is_mysql_syntax() {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;
    let tidb_only = [
        "/*T!",
        "AUTO_RANDOM",
        "SHARD_ROW_ID_BITS",
        "PLACEMENT POLICY",
        "CLUSTERED",
        "TTL=",
    ];
    let mysql = |what: &str, sql: &str| {
        let up = sql.to_ascii_uppercase();
        for t in tidb_only {
            assert!(
                !up.contains(&t.to_ascii_uppercase()),
                "{what}: TiDB-only {t}: {sql}"
            );
        }
        if partition_maintenance(sql) {
            return;
        }
        // The parser has no grammar for partitioning: the clause SHOW CREATE TABLE ends with
        // (`/*!50100 PARTITION BY …`) is read by a real MySQL 8.0 in `peers::mysql8`.
        let sql = sql
            .split_once("\n/*!50")
            .filter(|(_, rest)| {
                rest.get(3..)
                    .is_some_and(|r| r.starts_with(" PARTITION BY "))
            })
            .map_or(sql, |(head, _)| head);
        Parser::parse_sql(&MySqlDialect {}, sql)
            .unwrap_or_else(|e| panic!("{what}: not MySQL syntax ({e}): {sql}"));
    };
    let p = pipe();
    let evs: Vec<&Ev> = file_events(&p.stream).collect();
    let mut last_ddl: HashMap<String, usize> = HashMap::new();
    let mut last_map: HashMap<(String, String), (usize, TableMap)> = HashMap::new();
    for (i, e) in evs.iter().enumerate() {
        if e.ty == QUERY {
            let q = Query::parse(e, true);
            if q.query != "BEGIN" {
                mysql("DDL event", &q.query);
                assert!(
                    !q.db.is_empty() || q.query.to_ascii_uppercase().contains("DATABASE"),
                    "DDL carries its database: {}",
                    q.query
                );
                last_ddl.insert(q.query.to_ascii_lowercase(), i);
            }
        } else if e.ty == TABLE_MAP {
            let tm = TableMap::parse(e, true);
            last_map.insert((tm.db.clone(), tm.table.clone()), (i, tm));
        }
    }
    let mut conn = mysql_async::Conn::new(common::app::opts(p.addr, "root"))
        .await
        .expect("connect");
    let mut compared = 0;
    for ((db, table), (at, tm)) in &last_map {
        let later_ddl = last_ddl
            .iter()
            .any(|(q, i)| i > at && q.contains(&table.to_ascii_lowercase()));
        let Ok(Some((_, create))) = conn
            .query_first::<(String, String), _>(format!("SHOW CREATE TABLE `{db}`.`{table}`"))
            .await
        else {
            continue; // dropped since
        };
        mysql("SHOW CREATE TABLE", &create);
        if later_ddl {
            continue;
        }
        let fields: Vec<String> = conn
            .query_map(
                format!("SHOW COLUMNS FROM `{table}` FROM `{db}`"),
                |r: mysql_async::Row| r.get::<String, _>(0).expect("Field"),
            )
            .await
            .expect("SHOW COLUMNS");
        assert_eq!(fields.len(), tm.types.len(), "{db}.{table}: column count");
        if let Some(names) = tm.column_names() {
            assert_eq!(fields, names, "{db}.{table}: column names");
        }
        compared += 1;
    }
    assert!(compared > 0, "some table compared with its TABLE_MAP");
}

/// Trap 15: GTID arithmetic on the server: `GTID_SUBTRACT`, `@@global.gtid_purged` (empty, then
/// what PURGE removed), GTID sets printed without newlines, a GTID dump that skips what the
/// client has and sends a heartbeat with the current offset after the skipped run, and 1236
/// for purged GTIDs and for a client with more GTIDs than the master.
#[tokio::test]
async fn trap_15_gtid_arithmetic() {
    let f = fixture(true).await;
    let mut conn = f.conn().await;
    let other = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    let v = row(
        &mut conn,
        &format!("SELECT GTID_SUBTRACT('{UUID}:1-10,{other}:1-5', '{UUID}:1-4')"),
    )
    .await;
    let got = v[0].clone().expect("a set");
    assert!(!got.contains('\n'), "no newline: {got:?}");
    let parts: BTreeSet<&str> = got.split(',').collect();
    assert_eq!(
        parts,
        BTreeSet::from([
            format!("{UUID}:5-10").as_str(),
            format!("{other}:1-5").as_str()
        ])
    );
    assert_eq!(
        row(&mut conn, "SELECT @@global.gtid_purged").await,
        [Some(String::new())]
    );
    let v = row(&mut conn, "SELECT @@GLOBAL.GTID_EXECUTED").await;
    assert_eq!(v, [Some(format!("{UUID}:1-5"))]);

    // GTID dump with 1-4 known: transaction 5 only; with everything known: a heartbeat at the
    // end offset after the skipped run.
    for (have, want_gnos) in [(4u64, vec![5u64]), (5, vec![])] {
        let mut c = raw(&f).await;
        ok(&mut c, "SET @master_binlog_checksum = 'CRC32'").await;
        let uuid = tibinlog_protocol::binlog::Sid::parse(UUID).expect("uuid").0;
        let mut cmd = vec![0x1e];
        cmd.extend_from_slice(&1u16.to_le_bytes()); // NON_BLOCK
        cmd.extend_from_slice(&77u32.to_le_bytes());
        cmd.extend_from_slice(&0u32.to_le_bytes()); // name length
        cmd.extend_from_slice(&4u64.to_le_bytes());
        let mut set = Vec::new();
        set.extend_from_slice(&1u64.to_le_bytes());
        set.extend_from_slice(&uuid);
        set.extend_from_slice(&1u64.to_le_bytes());
        set.extend_from_slice(&1u64.to_le_bytes());
        set.extend_from_slice(&(have + 1).to_le_bytes());
        cmd.extend_from_slice(&(set.len() as u32).to_le_bytes());
        cmd.extend_from_slice(&set);
        let first = c.command(&cmd).await;
        let (evs, end) = read_until_end(&mut c, first).await;
        assert_eq!(end[0], 0xFE, "EOF: {end:?}");
        let gnos: Vec<u64> = evs
            .iter()
            .filter(|e| e.ty == GTID)
            .map(|e| u64::from_le_bytes(e.raw[36..44].try_into().expect("gno")))
            .collect();
        assert_eq!(gnos, want_gnos);
        if want_gnos.is_empty() {
            let hb = evs.last().expect("events");
            assert_eq!(hb.ty, HEARTBEAT, "a heartbeat ends the skipped run");
            assert_eq!(u64::from(hb.log_pos), f.source.end_position().pos);
            assert_eq!(hb.body(true), f.source.end_position().file.as_bytes());
            assert!(hb.crc_ok());
        }
    }
    // More GTIDs than the master.
    let uuid = tibinlog_protocol::binlog::Sid::parse(UUID).expect("uuid").0;
    let sid = mysql_async::Sid::new(uuid).with_interval(mysql_async::GnoInterval::new(1, 100));
    let e = gtid_dump_error(f.conn().await, vec![sid]).await;
    assert_eq!(server_code(&e), Some(1236), "{e}");
    assert!(e.to_string().contains("more GTIDs than the master"), "{e}");
    conn.query_drop("PURGE BINARY LOGS TO 'binlog.000002'")
        .await
        .expect("purge");
    assert_eq!(
        row(&mut conn, "SELECT @@global.gtid_purged").await,
        [Some(format!("{UUID}:1-3"))]
    );
    let e = gtid_dump_error(f.conn().await, vec![]).await;
    assert_eq!(server_code(&e), Some(1236), "{e}");
    assert!(e.to_string().contains("purged binary logs"), "{e}");
    f.stop().await;
}

async fn gtid_dump_error(
    conn: mysql_async::Conn,
    sids: Vec<mysql_async::Sid<'static>>,
) -> mysql_async::Error {
    use futures_util::StreamExt;
    let mut stream = match conn
        .get_binlog_stream(BinlogStreamRequest::new(0).with_gtid().with_gtid_set(sids))
        .await
    {
        Ok(s) => s,
        Err(e) => return e,
    };
    loop {
        match tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("progress")
        {
            Some(Ok(_)) => {}
            Some(Err(e)) => return e,
            None => panic!("the dump ended without an error"),
        }
    }
}

/// Trap 16: `@@GLOBAL.GTID_MODE` matches the stream: ON, and every transaction starts with a
/// GTID event (33) of `@@server_uuid`, numbered 1, 2, 3, … — never ANONYMOUS_GTID (34).
#[tokio::test]
async fn trap_16_gtid_mode_consistency() {
    let p = pipe();
    let mut conn = mysql_async::Conn::new(common::app::opts(p.addr, "root"))
        .await
        .expect("connect");
    let v = row(
        &mut conn,
        "SELECT @@GLOBAL.GTID_MODE, @@GLOBAL.SERVER_UUID, @@enforce_gtid_consistency",
    )
    .await;
    assert_eq!(
        v,
        [Some("ON".into()), Some(p.uuid.clone()), Some("ON".into())]
    );
    let sid = tibinlog_protocol::binlog::Sid::parse(&p.uuid)
        .expect("uuid")
        .0;
    let mut gno = 0;
    for e in file_events(&p.stream) {
        assert_ne!(e.ty, ANONYMOUS_GTID, "no anonymous GTID with GTID_MODE=ON");
        if e.ty == GTID {
            assert_eq!(&e.raw[20..36], &sid, "GTID of @@server_uuid");
            gno += 1;
            assert_eq!(
                u64::from_le_bytes(e.raw[36..44].try_into().expect("gno")),
                gno
            );
        }
    }
    assert_eq!(gno, p.want.len() as u64);
    assert!(file_events(&p.stream).any(|e| e.ty == PREVIOUS_GTIDS));
}

/// Trap 17: dump flag 0x02 (Canal sets it always; heartbeat v2 for MySQL, annotate rows for
/// MariaDB) changes nothing on the MySQL flavour: v1 heartbeats (27), never 41, no MariaDB
/// annotate events.
#[tokio::test]
async fn trap_17_dump_flag_0x02() {
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    ok(
        &mut c,
        "SET @master_binlog_checksum = @@global.binlog_checksum",
    )
    .await;
    ok(&mut c, "SET @master_heartbeat_period = 100000000").await;
    let mut p = c
        .command(&dump_command(b"binlog.000001", 4, 0x02, 88))
        .await;
    let mut types = Vec::new();
    loop {
        assert_eq!(p[0], 0, "{p:?}");
        let e = Ev::parse(&p[1..]);
        types.push(e.ty);
        if e.ty == HEARTBEAT {
            break;
        }
        p = c.read().await;
    }
    assert!(
        types.iter().all(|t| *t <= 35),
        "only MySQL v1 types: {types:?}"
    );
    assert_eq!(types.iter().filter(|t| **t == GTID).count(), 5);
    f.stop().await;
}

/// Trap 18: a MariaDB peer (MariaDB's client library, `@mariadb_slave_capability` set) gets no
/// MySQL-only event types 39–42 and no MySQL 8.0 collation (255–323) in QUERY events. With
/// capability 4 (GTID-aware, what every MariaDB replica and `mariadb-binlog` send) it gets the
/// MariaDB GTID flavour a MariaDB master sends: no MySQL GTID / PREVIOUS_GTIDS, a MariaDB GTID
/// (162) per transaction standing for its BEGIN (MariaDB's 42 bytes: the peer reads the rest
/// of the MySQL GTID + BEGIN as a hole), a GTID_LIST (163), with every log_pos the offset in
/// our files; with a lower capability the files' layout with MariaDB collations.
/// A MySQL client gets the files' collations unchanged.
#[tokio::test]
async fn trap_18_mariadb_replica() {
    let p = pipe();
    let mysql_255 = p
        .stream
        .iter()
        .filter(|y| y.ty == QUERY)
        .filter(|y| {
            Query::parse(y, true)
                .charset()
                .is_some_and(|cs| cs.contains(&255))
        })
        .count();
    assert!(mysql_255 > 0, "the MySQL-flavoured stream does carry 255");
    let mariadb_collations = |m: &Ev| {
        assert!(m.crc_ok(), "CRC redone");
        let cs = Query::parse(m, true).charset().expect("Q_CHARSET_CODE");
        assert!(
            cs.iter().all(|c| !(255..=323).contains(c)),
            "MariaDB collations: {cs:?}"
        );
    };
    for capability in [2, 4] {
        let mut c = app_raw(
            p.addr,
            &[("_client_name", "libmariadb"), ("_client_version", "3.3.8")],
        )
        .await;
        ok(
            &mut c,
            &format!("SET @mariadb_slave_capability = {capability}"),
        )
        .await;
        let (evs, end) = dump(&mut c, Some("CRC32"), "binlog.000001", 4).await;
        assert_eq!(end[0], 0xFE);
        for m in &evs {
            assert!(!(39..=42).contains(&m.ty), "MySQL-only type {}", m.ty);
            if m.ty == QUERY {
                mariadb_collations(m);
            }
        }
        if capability < 4 {
            assert_eq!(evs.len(), p.stream.len());
            for (m, y) in evs.iter().zip(&p.stream) {
                assert_eq!(
                    (m.ty, m.size, m.log_pos),
                    (y.ty, y.size, y.log_pos),
                    "same layout"
                );
            }
            continue;
        }
        // The MariaDB flavour: the MySQL stream's events, GTID + BEGIN merged, same offsets.
        let ours: Vec<&Ev> = p.stream.iter().filter(|y| y.ty != FDE).collect();
        let theirs: Vec<&Ev> = evs.iter().filter(|m| m.ty != FDE).collect();
        let (mut i, mut j, mut gtids) = (0, 0, 0);
        while i < ours.len() {
            let (y, m) = (ours[i], theirs[j]);
            assert!(
                !matches!(m.ty, GTID | ANONYMOUS_GTID | PREVIOUS_GTIDS),
                "MySQL GTID type {} sent",
                m.ty
            );
            match y.ty {
                GTID => {
                    assert_eq!(m.ty, 162, "MariaDB GTID for event {i}");
                    let next = ours[i + 1];
                    let begin = next.ty == QUERY && Query::parse(next, true).query == "BEGIN";
                    // MariaDB's 42-byte GTID event; the peer reads the rest as a hole.
                    assert_eq!(m.size, 42, "MariaDB GTID size");
                    if begin {
                        assert_eq!(m.log_pos, next.log_pos, "ends where BEGIN ended");
                        i += 2;
                    } else {
                        // A DDL: a standalone GTID ending where the MySQL one did, then the QUERY.
                        assert_eq!(m.log_pos, y.log_pos, "DDL's GTID");
                        i += 1;
                    }
                    gtids += 1;
                }
                PREVIOUS_GTIDS => {
                    assert_eq!(m.ty, 163, "GTID_LIST");
                    assert_eq!((m.size, m.log_pos), (y.size, y.log_pos));
                    i += 1;
                }
                _ => {
                    assert_eq!((m.ty, m.size, m.log_pos), (y.ty, y.size, y.log_pos));
                    i += 1;
                }
            }
            j += 1;
        }
        assert_eq!(j, theirs.len(), "no event more");
        assert_eq!(gtids, p.stream.iter().filter(|y| y.ty == GTID).count());
    }
}

/// Trap 19: Connector/J's side effects: its SET statements (sql_mode with
/// STRICT_TRANS_TABLES, NAMES, character_set_results = NULL, autocommit) answer OK with zero
/// warnings, `SHOW WARNINGS` answers an empty Level/Code/Message set, and the time zone is one
/// Java understands (`SYSTEM` + `UTC`).
#[tokio::test]
async fn trap_19_connector_j_side_effects() {
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    for q in [
        "/* mysql-connector-j-8.4.0 */SET sql_mode='ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
        "SET NAMES utf8mb4",
        "SET NAMES utf8mb4 COLLATE utf8mb4_0900_ai_ci",
        "SET character_set_results = NULL",
        "SET autocommit=1",
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    ] {
        let r = c.query(q).await;
        let okp = &r[0].packets[0];
        assert_eq!(okp[0], 0, "{q}: OK, got {okp:?}");
        // OK: header, affected rows, last insert id, status (2), warnings (2).
        assert_eq!(u16::from_le_bytes([okp[5], okp[6]]), 0, "{q}: zero warnings");
        assert_ne!(r[0].status & 0x0002, 0, "{q}: autocommit status");
    }
    let r = c
        .query("SELECT @@character_set_results, @@time_zone, @@system_time_zone")
        .await;
    assert_eq!(
        r[0].rows(),
        [[None, Some("SYSTEM".into()), Some("UTC".into())]]
    );
    let r = c.query("SHOW WARNINGS").await;
    assert_eq!(r[0].labels(), ["Level", "Code", "Message"]);
    assert!(r[0].rows().is_empty());
    f.stop().await;
}

/// Trap 20: Canal's probes: `rds\_%` / `polarx\_%` variables are empty (a row would switch Canal
/// into Aliyun modes), and `KILL CONNECTION <id>` ends exactly that session, a dump included.
#[tokio::test]
async fn trap_20_canal_probes_and_kill() {
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    for q in [
        "show global variables  like 'rds\\_%'",
        "show global variables  like 'polarx\\_%'",
        "show variables like 'rds\\_%'",
    ] {
        let r = c.query(q).await;
        assert_eq!(r[0].labels(), ["Variable_name", "Value"], "{q}");
        assert!(r[0].rows().is_empty(), "{q}: empty");
    }
    let mut a = raw(&f).await;
    let mut b = raw(&f).await;
    let mut d = raw(&f).await;
    ok(&mut d, "SET @master_binlog_checksum = 'CRC32'").await;
    assert_eq!(
        d.command(&dump_command(b"binlog.000002", 4, 0, 12)).await[0],
        0
    );
    for victim in [b.id, d.id] {
        ok(&mut c, &format!("KILL CONNECTION {victim}")).await;
    }
    for (what, v) in [("session", &mut b), ("dump", &mut d)] {
        let deadline = Instant::now() + WAIT;
        loop {
            match v.try_read(Duration::from_millis(200)).await {
                Some(Err(_)) => break,
                Some(Ok(p)) => assert!(p[0] == 0 || p[0] == 0xFF, "{what}: {p:?}"),
                None => assert!(Instant::now() < deadline, "killed {what} still open"),
            }
        }
    }
    let r = a.query("SELECT 1").await;
    assert_eq!(
        r[0].rows(),
        [[Some("1".to_string())]],
        "the other session lives"
    );
    f.stop().await;
}

/// Trap 21: statement normalisation: leading comments, trailing `;`, case, runs of spaces,
/// backslash-escaped LIKE patterns, multi-assignment `SET` (user variables, `@@session`, `uuid()`
/// and `@@global` right-hand sides), `SELECT @@x AS y`, user variables read back.
#[tokio::test]
async fn trap_21_statement_normalisation() {
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    for (q, labels, rows) in [
        (
            "/* mysql-connector-j-8.4.0 (Revision: x) */SELECT @@server_id",
            vec!["@@server_id"],
            vec![vec![Some("4242")]],
        ),
        (
            "select   @@SERVER_ID;",
            vec!["@@SERVER_ID"],
            vec![vec![Some("4242")]],
        ),
        (
            "SELECT @@version_comment AS c LIMIT 1",
            vec!["c"],
            vec![vec![Some("tibinlog")]],
        ),
        (
            "SHOW   GLOBAL   VARIABLES   LIKE 'binlog\\_format';",
            vec!["Variable_name", "Value"],
            vec![vec![Some("binlog_format"), Some("ROW")]],
        ),
        (
            "show variables where Variable_name = 'binlog_row_image'",
            vec!["Variable_name", "Value"],
            vec![vec![Some("binlog_row_image"), Some("FULL")]],
        ),
    ] {
        let r = c.query(q).await;
        assert_eq!(r[0].labels(), labels, "{q}");
        let want: Vec<Vec<Option<String>>> = rows
            .iter()
            .map(|r| r.iter().map(|v| v.map(str::to_string)).collect())
            .collect();
        if q.contains("version_comment") {
            let got = r[0].rows()[0][0].clone().expect("a comment");
            assert!(
                got.contains("tibinlog") && !got.contains("Percona"),
                "{got}"
            );
        } else {
            assert_eq!(r[0].rows(), want, "{q}");
        }
    }
    ok(
        &mut c,
        "SET @master_heartbeat_period= 1000000000, @master_binlog_checksum= @@global.binlog_checksum",
    )
    .await;
    ok(
        &mut c,
        "SET @master_binlog_checksum='NONE', @source_binlog_checksum='NONE';",
    )
    .await;
    ok(&mut c, "SET @slave_uuid = uuid(), @replica_uuid = uuid()").await;
    ok(&mut c, "SET @@session.net_write_timeout = 600, @x = 'y'").await;
    let r = c
        .query("SELECT @master_heartbeat_period, @master_binlog_checksum, @source_binlog_checksum, @slave_uuid, @x, @@net_write_timeout")
        .await;
    let v = &r[0].rows()[0];
    assert_eq!(v[0].as_deref(), Some("1000000000"));
    assert_eq!(v[1].as_deref(), Some("NONE"));
    assert_eq!(v[2].as_deref(), Some("NONE"));
    let uuid = v[3].clone().expect("uuid()");
    assert!(
        tibinlog_protocol::binlog::Sid::parse(&uuid).is_ok(),
        "{uuid}"
    );
    assert_eq!(v[4].as_deref(), Some("y"));
    assert_eq!(v[5].as_deref(), Some("600"));
    // The announced NONE is honoured by the dump that follows.
    let first = c.command(&dump_command(b"binlog.000001", 4, 1, 0)).await;
    let (evs, _) = read_until_end(&mut c, first).await;
    assert_eq!(
        evs[0].raw.len(),
        19 + 8 + 13,
        "fake ROTATE without CRC after NONE"
    );
    f.stop().await;
}

/// Trap 22: Debezium's snapshot locking statements answer OK, and the grants name LOCK TABLES
/// (the fallback path's requirement).
#[tokio::test]
async fn trap_22_snapshot_locking() {
    let f = fixture(true).await;
    let mut conn = f.conn().await;
    for q in [
        "FLUSH TABLES WITH READ LOCK",
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "START TRANSACTION WITH CONSISTENT SNAPSHOT",
        "UNLOCK TABLES",
        "COMMIT",
        "ROLLBACK",
    ] {
        conn.query_drop(q)
            .await
            .unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    let grants: Vec<String> = conn
        .query("SHOW GRANTS FOR CURRENT_USER")
        .await
        .expect("grants");
    assert!(
        grants
            .iter()
            .any(|g| g.contains("LOCK TABLES") || g.contains("ALL")),
        "{grants:?}"
    );
    f.stop().await;
}

/// Trap 23: python-mysql-replication's quirks: `resume_stream=False` re-reads a file from 4
/// (same bytes every time); its MariaDB dump packet (all-NUL file name, one stray byte after
/// the packet) starts at the first file; COLUMN_NAME comes with charset TLVs for the character
/// columns; the app's checksum is CRC32 (python's TLV loop misreads the last TLV with NONE).
#[tokio::test]
async fn trap_23_python_quirks() {
    let f = fixture(true).await;
    let mut c = raw(&f).await;
    let (a, _) = dump(&mut c, Some("CRC32"), "binlog.000002", 4).await;
    let mut c = raw(&f).await;
    let (b, _) = dump(&mut c, Some("CRC32"), "binlog.000002", 4).await;
    assert_eq!(
        a.iter().map(|e| &e.raw).collect::<Vec<_>>(),
        b.iter().map(|e| &e.raw).collect::<Vec<_>>()
    );
    // The 14-byte packet python builds, then its stray fifteenth byte.
    let mut c = raw(&f).await;
    ok(&mut c, "SET @master_binlog_checksum = 'CRC32'").await;
    ok(&mut c, "SET @mariadb_slave_capability = 4").await;
    let mut payload = vec![0x12];
    payload.extend_from_slice(&4u32.to_le_bytes());
    payload.extend_from_slice(&1u16.to_le_bytes());
    payload.extend_from_slice(&1234u32.to_le_bytes());
    payload.extend_from_slice(&[0, 0, 0]);
    let mut bytes = vec![payload.len() as u8, 0, 0, 0];
    bytes.extend_from_slice(&payload);
    bytes.push(0);
    c.write_raw(&bytes).await;
    let first = c.read().await;
    let (evs, end) = read_until_end(&mut c, first).await;
    assert_eq!(end[0], 0xFE, "EOF, got {end:?}");
    assert_eq!(&evs[0].raw[27..40], b"binlog.000001", "from the first file");
    assert_eq!(evs.iter().filter(|e| e.ty == GTID).count(), 5);
    f.stop().await;

    let p = pipe();
    let mut conn = mysql_async::Conn::new(common::app::opts(p.addr, "root"))
        .await
        .expect("connect");
    assert_eq!(
        row(&mut conn, "SELECT @@global.binlog_checksum").await,
        [Some("CRC32".into())]
    );
    let mut with_text = 0;
    for e in file_events(&p.stream).filter(|e| e.ty == TABLE_MAP) {
        let tm = TableMap::parse(e, true);
        if tm.column_names().is_none() {
            continue;
        }
        let text_cols = tm
            .types
            .iter()
            .enumerate()
            .filter(|(i, t)| match **t {
                15 | 254 => {
                    let real = if **t == 254 {
                        tm.meta[*i][0] | 0x30
                    } else {
                        0xFE
                    };
                    real == 0xFE
                }
                252 => true,
                _ => false,
            })
            .count();
        if text_cols > 0 {
            with_text += 1;
            assert!(
                tm.tlvs.iter().any(|(t, _)| *t == 2 || *t == 3),
                "{}.{}: charset TLV next to COLUMN_NAME",
                tm.db,
                tm.table
            );
        }
    }
    assert!(with_text > 0);
}

/// Trap 24: Maxwell's `host` must be a real writable MySQL; what this server can do about it is
/// refuse clearly: writes and CREATE DATABASE get 1290 (read-only), `GET_LOCK` an answer or a
/// MySQL error (never a silent OK or a dropped connection), and the session stays usable.
#[tokio::test]
async fn trap_24_maxwell_host_split() {
    let f = fixture(true).await;
    let mut conn = f.conn().await;
    for q in [
        "CREATE DATABASE IF NOT EXISTS `maxwell`",
        "CREATE TABLE IF NOT EXISTS `maxwell`.`positions` (server_id INT UNSIGNED NOT NULL)",
        "INSERT INTO `maxwell`.`heartbeats` SET server_id=1, heartbeat=1",
        "REPLACE INTO `maxwell`.`heartbeats` SET server_id=1, heartbeat=1",
        "UPDATE `maxwell`.`positions` SET binlog_position = 4",
    ] {
        let e = conn.query_drop(q).await.expect_err(q);
        assert_eq!(server_code(&e), Some(1290), "{q}: {e}");
        assert!(e.to_string().contains("read-only"), "{e}");
    }
    match conn.query_iter("SELECT GET_LOCK('maxwell_1', 10)").await {
        Ok(mut r) => {
            assert!(
                !r.columns_ref().is_empty(),
                "GET_LOCK answers with a result set"
            );
            let _: Vec<mysql_async::Row> = r.collect().await.expect("rows");
        }
        Err(e) => assert!(server_code(&e).is_some(), "a MySQL error: {e}"),
    }
    conn.ping().await.expect("the session stays usable");
    f.stop().await;
}

/// Trap 25: large values: rows events are cut at `max_rows_event_size` (8 KiB, far below the
/// 16 MiB packet limit) with STMT_END_F on the last; an event that ends past 4 GiB (a huge
/// transaction takes its file there) gets its `log_pos` modulo 2^32, as MySQL writes it; a
/// `max_binlog_size` over 4 GiB is rejected; and the pipeline's files rotate once they pass
/// their configured size.
#[tokio::test]
async fn trap_25_large_values() {
    use tibinlog_protocol::binlog::{
        EventWriter, GtidEvent, QueryEvent, RowsKind, Sid, Transaction,
    };
    use tibinlog_protocol::value::Value;
    let table = tibinlog::server::testing::test_table();
    let mut w = EventWriter::new(1, true);
    let mut buf = Vec::new();
    let gtid = GtidEvent::new(Sid::parse(UUID).expect("uuid"), 1, 1, 1, 80036);
    let mut tx = Transaction::begin(&mut w, &mut buf, 4, 1, gtid);
    tx.write(&QueryEvent::begin(1)).expect("begin");
    tx.write(&tibinlog_protocol::binlog::TableMap::new(&table))
        .expect("map");
    let name = "x".repeat(100);
    tx.rows(&table, RowsKind::Write, |r| {
        (0..2000).try_for_each(|i| {
            r.write_row(&[Value::Int(i), Value::Bytes(name.clone().into_bytes())])
        })
    })
    .expect("rows");
    tx.commit(1).expect("commit");
    let mut at = 0;
    let mut rows = Vec::new();
    while at < buf.len() {
        let size = u32::from_le_bytes(buf[at + 9..at + 13].try_into().expect("size")) as usize;
        let e = Ev::parse(&buf[at..at + size]);
        if is_rows(e.ty) {
            rows.push(e);
        }
        at += size;
    }
    assert!(rows.len() > 10, "{} rows events", rows.len());
    for (i, e) in rows.iter().enumerate() {
        assert!(e.size as usize <= 8192, "rows event of {} bytes", e.size);
        let stmt_end = rows_table_and_flags(e).1 & STMT_END_F != 0;
        assert_eq!(stmt_end, i + 1 == rows.len(), "STMT_END_F on the last only");
    }
    // An event ending past 4 GiB: the 32-bit log_pos wraps, the returned offset does not.
    let mut w = EventWriter::new(1, true);
    let mut out = Vec::new();
    let start = u64::from(u32::MAX) - 10;
    let end = w
        .write(&mut out, start, 1, &QueryEvent::begin(1))
        .expect("past 4 GiB");
    assert_eq!(end, start + out.len() as u64);
    let log_pos = u32::from_le_bytes(out[13..17].try_into().expect("log_pos"));
    assert_eq!(u64::from(log_pos), end - (1u64 << 32));
    // The configured cap is checked: 4 GiB - 1 is accepted, 4 GiB refused.
    for (size, accepted) in [
        (u64::from(u32::MAX), true),
        (u64::from(u32::MAX) + 1, false),
    ] {
        let env = move |k: &str| match k {
            "TIBINLOG_PD" => Some("127.0.0.1:2379".to_string()),
            "TIBINLOG_DATA_DIR" => Some("/nonexistent".to_string()),
            "TIBINLOG_MAX_BINLOG_SIZE" => Some(size.to_string()),
            _ => None,
        };
        let r = tibinlog::app::config::resolve(tibinlog::app::config::ServerArgs::default(), &env);
        match r {
            Ok(cfg) => {
                assert!(accepted, "{size} accepted");
                assert_eq!(cfg.max_binlog_size, size);
            }
            Err(e) => {
                assert!(!accepted, "{size}: {e:#}");
                assert!(format!("{e:#}").contains("4 GiB"), "{e:#}");
            }
        }
    }
    // The pipeline's files rotate once they pass max_binlog_size (a transaction never spans two).
    let p = pipe();
    let files = by_file(&p.stream);
    for (name, evs) in &files[..files.len() - 1] {
        let end = evs.last().expect("events").log_pos;
        let last_txn = evs
            .iter()
            .rposition(|e| e.ty == GTID)
            .map(|i| evs[i].log_pos - evs[i].size)
            .expect("a transaction");
        assert!(
            u64::from(last_txn) < p.max_binlog_size,
            "{name}: rotated once past the size"
        );
        assert!(u64::from(end) < u64::from(u32::MAX));
    }
    for e in file_events(&p.stream).filter(|e| is_rows(e.ty)) {
        assert!(e.size < 16 << 20);
    }
}

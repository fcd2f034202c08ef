//! The whole product end to end: the simulated cluster (seeded OLTP workload with DDL and
//! faults) → changefeed → binlog store → MySQL server, read back by a real replication client
//! (`mysql_async`'s binlog stream) and compared with the simulator's truth log.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::binlog::events::{EventData, OptionalMetadataField, RowsEventData};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::consts::ColumnType;
use mysql_async::prelude::*;
use mysql_async::BinlogStreamRequest;
use serde_json::Value as Json;
use tibinlog::app::{App, AppConfig};
use tibinlog::model::Ts;
use tibinlog::sim::cli::{SimArgs, SimHandle};
use tibinlog::sim::tidb::TruthCollector;
use tokio::io::AsyncBufReadExt;

use common::pipeline::{dense_set, master_status, max_commit_ts, sql_opts as opts, truth_after};

/// Upper bound of any wait on the pipeline.
const WAIT: Duration = Duration::from_secs(240);

struct Run {
    sim: SimHandle,
    truth: TruthCollector,
    start_ts: Ts,
}

async fn start_sim(seed: u64, txns: u64) -> Run {
    let args = SimArgs {
        stores: 3,
        regions_per_table: 2,
        rate: 0.0,
        txns: Some(txns),
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        chaos_interval: Some(Duration::from_millis(150)),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    };
    let common::pipeline::Sim { handle: sim, truth } = common::pipeline::start_sim(args).await;
    let start_ts = Ts(sim.cluster().tso().0);
    Run {
        sim,
        truth,
        start_ts,
    }
}

fn app_config(run: &Run, dir: &Path) -> AppConfig {
    let mut cfg = AppConfig::new(
        vec![run.sim.cluster().pd_url()],
        "127.0.0.1:0".parse().expect("addr"),
        dir,
    );
    cfg.start_ts = Some(run.start_ts);
    // Small files and pieces: rotation and multi-piece transactions happen.
    cfg.max_binlog_size = 256 << 10;
    cfg.max_chunk_bytes = Some(64 << 10);
    cfg.progress_interval = Duration::from_secs(3600);
    cfg
}

async fn start_app(run: &Run, dir: &Path) -> App {
    common::pipeline::start_app(app_config(run, dir)).await
}

/// Polls until `cond` holds or `WAIT` passes.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_checkpoint(app: &App, ts: u64) {
    common::pipeline::wait_checkpoint(app, ts, WAIT).await;
}

/// `Executed_Gtid_Set` of `SHOW MASTER STATUS`.
async fn master_gtids(addr: SocketAddr) -> Result<String, mysql_async::Error> {
    Ok(master_status(addr).await?.gtids)
}

/// How a column is compared with the truth log's text.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Integer of this many bytes (the binlog value may be the signed form of an unsigned).
    Int(u32),
    Str,
    /// Only presence is compared.
    Other,
}

fn kind(t: ColumnType) -> Kind {
    match t {
        ColumnType::MYSQL_TYPE_TINY => Kind::Int(1),
        ColumnType::MYSQL_TYPE_SHORT => Kind::Int(2),
        ColumnType::MYSQL_TYPE_INT24 => Kind::Int(3),
        ColumnType::MYSQL_TYPE_LONG => Kind::Int(4),
        ColumnType::MYSQL_TYPE_LONGLONG => Kind::Int(8),
        ColumnType::MYSQL_TYPE_VARCHAR | ColumnType::MYSQL_TYPE_VAR_STRING => Kind::Str,
        _ => Kind::Other,
    }
}

#[derive(Debug, Clone)]
struct Cell {
    name: String,
    kind: Kind,
    /// `None` for NULL.
    value: Option<BinlogValue<'static>>,
}

#[derive(Debug, Clone)]
struct BinRow {
    db: String,
    table: String,
    op: &'static str,
    before: Option<Vec<Cell>>,
    after: Option<Vec<Cell>>,
}

#[derive(Debug, Default)]
struct BinTxn {
    gno: u64,
    xid: Option<u64>,
    ddl: Option<String>,
    rows: Vec<BinRow>,
    /// A rows event of it could not be decoded by the client library.
    undecodable: bool,
}

#[derive(Debug, Default)]
struct Dump {
    txns: Vec<BinTxn>,
    uuid: String,
    rotations: usize,
    undecodable: usize,
}

fn cells(
    row: Option<mysql_async::binlog::row::BinlogRow>,
    names: &[String],
    kinds: &[Kind],
) -> Option<Vec<Cell>> {
    let row = row?;
    let mut out = Vec::with_capacity(row.len());
    for i in 0..row.len() {
        let value = match row.as_ref(i) {
            None | Some(BinlogValue::Value(mysql_async::Value::NULL)) => None,
            Some(v) => Some(v.clone().into_owned()),
        };
        out.push(Cell {
            name: names.get(i).cloned().unwrap_or_default(),
            kind: kinds.get(i).copied().unwrap_or(Kind::Other),
            value,
        });
    }
    Some(out)
}

/// Reads the whole binlog from `binlog.000001` with a non-blocking dump.
async fn read_binlog(addr: SocketAddr) -> Dump {
    let conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let mut stream = conn
        .get_binlog_stream(
            BinlogStreamRequest::new(0)
                .with_filename(b"binlog.000001")
                .with_pos(4),
        )
        .await
        .expect("binlog stream");
    let mut dump = Dump::default();
    let mut open: Option<BinTxn> = None;
    loop {
        let next = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("dump makes progress");
        let Some(ev) = next else { break };
        let ev = ev.expect("event");
        let data = ev.read_data().expect("event decodes");
        match data {
            Some(EventData::RotateEvent(r)) if ev.header().log_pos() != 0 => {
                assert!(open.is_none(), "ROTATE inside a transaction");
                let _ = r;
                dump.rotations += 1;
            }
            Some(EventData::GtidEvent(g)) => {
                assert!(open.is_none(), "GTID inside a transaction");
                let uuid = uuid_text(&g.sid());
                if dump.uuid.is_empty() {
                    dump.uuid = uuid;
                } else {
                    assert_eq!(dump.uuid, uuid, "one GTID source");
                }
                open = Some(BinTxn {
                    gno: g.gno(),
                    ..BinTxn::default()
                });
            }
            Some(EventData::QueryEvent(q)) => {
                let t = open.as_mut().expect("QUERY outside a transaction");
                let text = q.query().into_owned();
                if text != "BEGIN" {
                    t.ddl = Some(text);
                    dump.txns.push(open.take().expect("open"));
                }
            }
            Some(EventData::XidEvent(x)) => {
                let mut t = open.take().expect("XID outside a transaction");
                t.xid = Some(x.xid);
                dump.txns.push(t);
            }
            Some(EventData::RowsEvent(r)) => {
                let t = open.as_mut().expect("rows outside a transaction");
                let tme = stream.get_tme(r.table_id()).expect("TABLE_MAP before rows");
                let mut names = Vec::new();
                for f in tme.iter_optional_meta() {
                    if let Ok(OptionalMetadataField::ColumnName(n)) = f {
                        for name in n.iter_names() {
                            names.push(name.expect("column name").name().into_owned());
                        }
                    }
                }
                let kinds: Vec<Kind> = (0..tme.columns_count() as usize)
                    .map(|i| match tme.get_column_type(i) {
                        Ok(Some(t)) => kind(t),
                        _ => Kind::Other,
                    })
                    .collect();
                let op = match &r {
                    RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => {
                        "insert"
                    }
                    RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => {
                        "delete"
                    }
                    _ => "update",
                };
                // mysql_common's TIME(1|2) decoder overflows on negative values (a client bug,
                // a panic in debug builds): such events are counted, not compared.
                let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    r.rows(tme).collect::<Result<Vec<_>, _>>()
                }));
                let Ok(rows) = decoded else {
                    t.undecodable = true;
                    dump.undecodable += 1;
                    continue;
                };
                for (before, after) in rows.expect("rows decode") {
                    t.rows.push(BinRow {
                        db: tme.database_name().into_owned(),
                        table: tme.table_name().into_owned(),
                        op,
                        before: cells(before, &names, &kinds),
                        after: cells(after, &names, &kinds),
                    });
                }
            }
            _ => {}
        }
    }
    assert!(open.is_none(), "the dump ended inside a transaction");
    dump
}

fn uuid_text(sid: &[u8; 16]) -> String {
    let h = hex::encode(sid);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Whether a binlog cell equals the truth text; `compared` counts value comparisons.
fn cell_matches(c: &Cell, truth: &Json, compared: &mut u64) -> bool {
    let Some(v) = &c.value else {
        return truth.is_null();
    };
    if truth.is_null() {
        return false;
    }
    let Some(text) = truth.as_str() else {
        return false;
    };
    match c.kind {
        Kind::Int(bytes) => {
            let Ok(want) = text.parse::<i128>() else {
                // Not an integer in the truth log (e.g. a BOOLEAN rendered otherwise).
                return true;
            };
            let got = match v {
                BinlogValue::Value(mysql_async::Value::Int(i)) => i128::from(*i),
                BinlogValue::Value(mysql_async::Value::UInt(u)) => i128::from(*u),
                _ => return false,
            };
            *compared += 1;
            (want - got).rem_euclid(1i128 << (8 * bytes)) == 0
        }
        Kind::Str => match v {
            BinlogValue::Value(mysql_async::Value::Bytes(b)) => match std::str::from_utf8(b) {
                Ok(s) => {
                    *compared += 1;
                    s == text
                }
                Err(_) => true,
            },
            _ => false,
        },
        Kind::Other => true,
    }
}

fn image_matches(cells: &Option<Vec<Cell>>, truth: &Json, compared: &mut u64) -> bool {
    match cells {
        None => truth.is_null(),
        Some(cells) => {
            let Some(obj) = truth.as_object() else {
                return false;
            };
            cells.len() == obj.len()
                && cells.iter().all(|c| {
                    obj.get(&c.name)
                        .is_some_and(|t| cell_matches(c, t, compared))
                })
        }
    }
}

/// Every truth transaction once, in order, GNOs dense 1..n, same rows and DDL.
fn assert_binlog_equals_truth(dump: &Dump, want: &[Json], uuid: &str) -> u64 {
    assert_eq!(dump.uuid, uuid, "GTID source is the app's server_uuid");
    let gnos: Vec<u64> = dump.txns.iter().map(|t| t.gno).collect();
    let dense: Vec<u64> = (1..=want.len() as u64).collect();
    if gnos != dense {
        let first_bad = gnos.iter().zip(&dense).position(|(a, b)| a != b);
        panic!(
            "GNOs not dense 1..{}: {} transactions, first difference at {first_bad:?}",
            want.len(),
            gnos.len()
        );
    }
    let mut compared = 0u64;
    for (i, (got, want)) in dump.txns.iter().zip(want).enumerate() {
        let ctx = format!("transaction {i} (gno {}, truth {want})", got.gno);
        match want["ddl"].as_str() {
            Some(q) => {
                assert_eq!(got.ddl.as_deref(), Some(q), "{ctx}: DDL");
                assert!(got.rows.is_empty(), "{ctx}");
            }
            None => {
                assert_eq!(got.ddl, None, "{ctx}: expected rows");
                assert_eq!(got.xid, want["start_ts"].as_u64(), "{ctx}: XID = start_ts");
                let mut truth_rows: Vec<Json> =
                    want["rows"].as_array().cloned().unwrap_or_default();
                if got.undecodable {
                    continue;
                }
                assert_eq!(got.rows.len(), truth_rows.len(), "{ctx}: row count");
                for r in &got.rows {
                    let at = truth_rows.iter().position(|t| {
                        t["db"] == r.db
                            && t["table"] == r.table
                            && t["op"] == r.op
                            && image_matches(&r.before, &t["before"], &mut 0)
                            && image_matches(&r.after, &t["after"], &mut 0)
                    });
                    let Some(at) = at else {
                        panic!("{ctx}: binlog row {r:?} not in the truth transaction");
                    };
                    let t = truth_rows.remove(at);
                    image_matches(&r.before, &t["before"], &mut compared);
                    image_matches(&r.after, &t["after"], &mut compared);
                }
            }
        }
    }
    compared
}

async fn finish_and_check(run: &Run, app: &App, seed: u64) -> Dump {
    tokio::time::timeout(WAIT, run.sim.workload_done())
        .await
        .expect("workload finishes");
    let lines = run.truth.lines();
    wait_checkpoint(app, max_commit_ts(&lines)).await;
    let want = truth_after(&lines, run.start_ts);
    let uuid = app.server_uuid().to_string();
    assert_eq!(
        master_gtids(app.local_addr())
            .await
            .expect("SHOW MASTER STATUS"),
        dense_set(&uuid, want.len()),
        "seed {seed}: SHOW MASTER STATUS covers every transaction"
    );
    let dump = read_binlog(app.local_addr()).await;
    let compared = assert_binlog_equals_truth(&dump, &want, &uuid);
    assert!(
        dump.txns.iter().any(|t| t.ddl.is_some()),
        "seed {seed}: DDL query events present"
    );
    assert!(
        compared > 1000,
        "seed {seed}: only {compared} values compared"
    );
    let undecodable = dump.txns.iter().filter(|t| t.undecodable).count();
    assert!(
        undecodable * 10 < dump.txns.len(),
        "seed {seed}: {undecodable} of {} transactions not decodable",
        dump.txns.len()
    );
    eprintln!(
        "seed {seed}: {} transactions, {} values compared, {} rotations, {} rows events \
         undecodable by the client, summary {:?}",
        want.len(),
        compared,
        dump.rotations,
        dump.undecodable,
        run.sim.summary()
    );
    dump
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn binlog_served_equals_truth_log() {
    let seed = 21;
    let run = start_sim(seed, 3_000).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&run, dir.path()).await;
    let dump = finish_and_check(&run, &app, seed).await;
    assert!(dump.rotations > 0, "small files rotate");
    assert!(run.sim.summary().faults > 0, "faults were injected");

    // The SQL surface sees the schema of the captured tables.
    let mut conn = mysql_async::Conn::new(opts(app.local_addr(), "root"))
        .await
        .expect("connect");
    let dbs: Vec<String> = conn.query("SHOW DATABASES").await.expect("SHOW DATABASES");
    let db = dump
        .txns
        .iter()
        .flat_map(|t| t.rows.iter())
        .map(|r| r.db.clone())
        .find(|d| dbs.contains(d))
        .expect("a database of the binlog rows is listed");
    let tables: Vec<String> = conn
        .query(format!("SHOW TABLES FROM `{db}`"))
        .await
        .expect("SHOW TABLES");
    assert!(!tables.is_empty());
    let row: Option<(String, String)> = conn
        .query_first(format!("SHOW CREATE TABLE `{db}`.`{}`", tables[0]))
        .await
        .expect("SHOW CREATE TABLE");
    let (_, ddl) = row.expect("a row");
    assert!(ddl.starts_with("CREATE TABLE"), "{ddl}");
    drop(conn);

    app.stop().await.expect("clean stop");
    // A clean restart resumes: nothing is written twice.
    let app = start_app(&run, dir.path()).await;
    assert!(
        app.start_ts() > run.start_ts,
        "restart resumes from the checkpoint"
    );
    finish_and_check(&run, &app, seed).await;
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// The last binlog file (highest sequence number) in `dir`.
fn last_binlog_file(dir: &Path) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("binlog dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.len() == 6 && e.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    files.sort();
    files.pop().expect("a binlog file")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_and_restart_keep_every_transaction_exactly_once() {
    let seed = 22;
    let run = start_sim(seed, 3_000).await;
    let dir = tempfile::tempdir().expect("tempdir");
    for round in 0..2 {
        let app = start_app(&run, dir.path()).await;
        // Let it write a few hundred more transactions, then kill it.
        let written_at_start = app.txns_written();
        wait_until("transactions written", || {
            app.txns_written() >= written_at_start + 300 || run.sim.summary().txns >= 3_000
        })
        .await;
        let binlog_dir = app.binlog_dir().to_path_buf();
        app.kill().await;
        // As if killed in the middle of writing a transaction: cut the last file mid-event.
        let last = last_binlog_file(&binlog_dir);
        let len = std::fs::metadata(&last).expect("stat").len();
        if len > 400 {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&last)
                .expect("open binlog file");
            f.set_len(len - 13).expect("truncate");
            f.sync_all().expect("sync");
        }
        eprintln!(
            "round {round}: killed; {} ({len} bytes) {}",
            last.display(),
            if len > 400 {
                "cut by 13 bytes"
            } else {
                "holds only its prologue: not cut"
            }
        );
    }
    let app = start_app(&run, dir.path()).await;
    assert!(
        app.start_ts() > run.start_ts,
        "restart resumes from the checkpoint"
    );
    finish_and_check(&run, &app, seed).await;
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_subcommand_serves_all_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let truth = dir.path().join("truth.jsonl");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tibinlog"))
        .args([
            "demo",
            "--txns",
            "200",
            "--rate",
            "0",
            "--seed",
            "5",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--truth")
        .arg(&truth)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn tibinlog demo");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut addr: Option<SocketAddr> = None;
    let mut start_ts = None;
    let mut uuid = None;
    loop {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("demo output in time")
            .expect("read stdout")
            .expect("demo exited early");
        if let Some(a) = line.strip_prefix("tibinlog demo: MySQL protocol on ") {
            addr = Some(a.trim().parse().expect("address"));
        }
        if line.starts_with("seed=") {
            for part in line.split_whitespace() {
                if let Some(v) = part.strip_prefix("start_ts=") {
                    start_ts = Some(Ts(v.parse().expect("start ts")));
                }
                if let Some(v) = part.strip_prefix("server_uuid=") {
                    uuid = Some(v.to_owned());
                }
            }
        }
        if line.starts_with("workload done") {
            break;
        }
    }
    let addr = addr.expect("address line");
    let (start_ts, uuid) = (start_ts.expect("start ts line"), uuid.expect("uuid line"));
    let text = std::fs::read_to_string(&truth).expect("truth file");
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let n = truth_after(&lines, start_ts).len();
    assert!(n >= 150, "only {n} transactions");
    let want = dense_set(&uuid, n);
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    while last != want {
        assert!(
            Instant::now() < deadline,
            "GTID set stuck at {last:?}, want {want:?}"
        );
        last = master_gtids(addr).await.unwrap_or_default();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().await.expect("kill the demo");
}

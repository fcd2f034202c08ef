//! python-mysql-replication (PyPI `mysql-replication`, on PyMySQL) against the whole product:
//! the simulated cluster (seeded OLTP workload with every column type, DDL and faults) →
//! changefeed → binlog store → MySQL server. The client runs as `tests/clients/pyrepl_dump.py`
//! and prints every transaction it saw, values in MySQL's text form; the test compares them
//! with the simulator's truth log: every row and value, in order, nothing lost or doubled,
//!
//! * by file/pos from the first file,
//! * by GTID set (COM_BINLOG_DUMP_GTID, `auto_position`) with holes in the set,
//! * stopping after K transactions and resuming from the position / GTID set the client
//!   reported, until the end.
//!
//! PyMySQL's unbuffered cursor (`tests/clients/pymysql_stream.py`) reads a large table while
//! the server streams it.
//!
//! The interpreter is the virtualenv made by `scripts/pyrepl-venv.sh install` (run by
//! `scripts/install-deps.sh`); without it the test is skipped, and fails under `CI=true`.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::app::{dense_set, finish_workload, start_app, start_sim};
use common::mysql_binlog::{assert_seen_equals_truth, expected, SeenTxn};
use serde_json::Value as Json;

/// Upper bound of one client run.
const CLIENT_WAIT: Duration = Duration::from_secs(120);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's interpreter, or `None` (after saying why) when it is not installed and we are
/// not under CI.
fn python() -> Option<PathBuf> {
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/pyrepl-venv.sh"))
        .arg("path")
        .output()
        .expect("run scripts/pyrepl-venv.sh");
    assert!(out.status.success(), "scripts/pyrepl-venv.sh path failed");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let py = dir.join("bin/python");
    let ok = py.is_file()
        && std::process::Command::new(&py)
            .args(["-c", "import pymysqlreplication, pymysql"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if ok {
        return Some(py);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "python-mysql-replication is not installed in {}; scripts/install-deps.sh installs it",
        dir.display()
    );
    eprintln!("skipped: python-mysql-replication is not installed (run scripts/install-deps.sh)");
    None
}

/// Where a client run stopped.
#[derive(Debug, Clone)]
struct End {
    file: String,
    pos: u64,
    gtid_set: String,
    eof: bool,
}

#[derive(Debug)]
struct ClientRun {
    txns: Vec<SeenTxn>,
    end: End,
}

/// `uuid:gno` → gno, checking the uuid.
fn gno_of(gtid: &str, uuid: &str) -> u64 {
    let (u, n) = gtid.rsplit_once(':').expect("uuid:gno");
    assert_eq!(u, uuid, "GTID source is the app's server_uuid");
    n.parse().expect("gno")
}

/// Runs the python client with `args` (start and stop options) and parses what it printed.
async fn run_client(py: &Path, addr: SocketAddr, uuid: &str, args: &[String]) -> ClientRun {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(py);
    cmd.arg(repo().join("tests/clients/pyrepl_dump.py"))
        .args(["--host", &addr.ip().to_string()])
        .args(["--port", &addr.port().to_string()])
        .args(args)
        .env("PYTHONIOENCODING", "utf-8")
        .kill_on_drop(true);
    let out = tokio::time::timeout(CLIENT_WAIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("python client {args:?} did not finish in time"))
        .expect("run python client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python client {args:?} failed ({}):\n{stderr}",
        out.status
    );
    let stdout = String::from_utf8(out.stdout).expect("client output is UTF-8");
    let mut txns = Vec::new();
    let mut end = None;
    for line in stdout.lines() {
        let v: Json = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if let Some(e) = v.get("end") {
            end = Some(End {
                file: e["file"].as_str().expect("end file").to_owned(),
                pos: e["pos"].as_u64().expect("end pos"),
                gtid_set: e["gtid_set"].as_str().expect("end gtid_set").to_owned(),
                eof: e["eof"].as_bool().expect("end eof"),
            });
            continue;
        }
        assert!(end.is_none(), "output after the end line");
        txns.push(SeenTxn {
            gno: gno_of(v["gtid"].as_str().expect("gtid"), uuid),
            xid: v["xid"].as_u64(),
            ddl: v["ddl"].as_str().map(str::to_owned),
            rows: v["rows"].as_array().cloned().expect("rows"),
            undecodable: false,
            file: v["file"].as_str().expect("file").to_owned(),
            pos: v["pos"].as_u64().expect("pos"),
            digest: None,
        });
    }
    let end = end.unwrap_or_else(|| panic!("no end line from {args:?}:\n{stderr}"));
    eprintln!(
        "python client {args:?}: {} transactions in {:.1?}, stopped at {}:{} {}",
        txns.len(),
        started.elapsed(),
        end.file,
        end.pos,
        if end.eof { "(EOF)" } else { "" }
    );
    ClientRun { txns, end }
}

fn file_args(file: &str, pos: u64) -> Vec<String> {
    vec![
        "--file".into(),
        file.into(),
        "--pos".into(),
        pos.to_string(),
    ]
}

fn gtid_args(set: &str) -> Vec<String> {
    vec!["--gtid-set".into(), set.into()]
}

fn with_max(mut args: Vec<String>, max: usize) -> Vec<String> {
    args.extend(["--max-txns".into(), max.to_string()]);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_mysql_replication_sees_every_row() {
    let Some(py) = python() else { return };
    let seed = 31;
    let run = start_sim(seed, 1_500).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&run, dir.path()).await;
    let want = finish_workload(&run, &app).await;
    let n = want.len() as u64;
    assert!(n > 500, "seed {seed}: only {n} transactions");
    let uuid = app.server_uuid().to_string();
    let addr = app.local_addr();

    // (a) By file/pos, from the start of the first file to EOF.
    let a = run_client(&py, addr, &uuid, &file_args("binlog.000001", 4)).await;
    assert!(a.end.eof);
    let compared = assert_seen_equals_truth("python file/pos", &a.txns, &expected(&want, 1..=n));
    assert!(compared > 10_000, "only {compared} values compared");
    assert!(a.txns.iter().any(|t| t.ddl.is_some()), "DDL seen");
    let files: std::collections::BTreeSet<&str> = a.txns.iter().map(|t| t.file.as_str()).collect();
    assert!(files.len() > 2, "rotation happened: {files:?}");

    // (b) By GTID set, with holes: the server skips what the set holds.
    let set = format!("{uuid}:1-3:7-9:{}-{}", n / 2, n / 2 + 10);
    let b = run_client(&py, addr, &uuid, &gtid_args(&set)).await;
    assert!(b.end.eof);
    let gnos: Vec<u64> = (4..=6).chain(10..n / 2).chain(n / 2 + 11..=n).collect();
    assert_seen_equals_truth("python GTID set", &b.txns, &expected(&want, gnos));
    assert_eq!(b.end.gtid_set, dense_set(&uuid, n as usize));

    // (c) By file/pos, stopping and resuming from the reported position. The first stop is
    // after the last transaction of the first file (the next event is its ROTATE).
    let last_in_first = a
        .txns
        .iter()
        .position(|t| t.file != a.txns[0].file)
        .expect("more than one file");
    let mut seen = Vec::new();
    let mut args = file_args("binlog.000001", 4);
    for (i, k) in [last_in_first, 777, 1].into_iter().chain([0]).enumerate() {
        let c = run_client(
            &py,
            addr,
            &uuid,
            &if k > 0 { with_max(args, k) } else { args },
        )
        .await;
        if k > 0 {
            assert_eq!(c.txns.len(), k, "leg {i} stopped after {k} transactions");
            assert!(!c.end.eof, "leg {i} stopped before EOF");
        }
        seen.extend(c.txns);
        args = file_args(&c.end.file, c.end.pos);
        if c.end.eof {
            break;
        }
    }
    assert_seen_equals_truth("python file/pos resumed", &seen, &expected(&want, 1..=n));

    // (d) By GTID set, stopping and resuming with the GTID set the client reported.
    let mut seen = Vec::new();
    let mut set = format!("{uuid}:1");
    for (i, k) in [600, 1].into_iter().chain([0]).enumerate() {
        let args = gtid_args(&set);
        let c = run_client(
            &py,
            addr,
            &uuid,
            &if k > 0 { with_max(args, k) } else { args },
        )
        .await;
        if k > 0 {
            assert_eq!(c.txns.len(), k, "leg {i} stopped after {k} transactions");
            assert!(!c.end.eof, "leg {i} stopped before EOF");
        }
        seen.extend(c.txns);
        set = c.end.gtid_set;
        if c.end.eof {
            break;
        }
    }
    assert_eq!(set, dense_set(&uuid, n as usize));
    assert_seen_equals_truth("python GTID resumed", &seen, &expected(&want, 2..=n));

    eprintln!(
        "seed {seed}: {n} transactions, {compared} values compared per full read, {} files, \
         summary {:?}",
        files.len(),
        run.sim.summary()
    );
    common::app::assert_all_answered(&app, "Python clients");
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// PyMySQL's unbuffered cursor (`SSCursor`, what Python CDC tools use for big snapshot reads)
/// reads a 200,000-row table while the server streams it, then the connection goes on (also
/// after a cursor closed early).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymysql_unbuffered_cursor_reads_a_large_table() {
    use tibinlog::server::testing::{MemTable, MemTables};
    use tibinlog::sql::charset::UTF8MB4_BIN;
    use tibinlog::sql::types::SqlType;
    use tibinlog_protocol::value::Value;
    let Some(py) = python() else { return };
    const ROWS: i64 = 200_000;
    let mut want_sum = 0i64;
    let mut want_len = 0usize;
    let rows: Vec<Vec<Value>> = (1..=ROWS)
        .map(|i| {
            let v = format!("row-{i}-{}", "x".repeat((i % 17) as usize));
            want_sum += i;
            want_len += v.len();
            vec![
                Value::Int(i),
                Value::Bytes(v.into_bytes()),
                Value::Double(i as f64 / 4.0),
            ]
        })
        .collect();
    let tables = MemTables::new(vec![MemTable {
        db: "big".into(),
        name: "t".into(),
        columns: vec![
            ("id".into(), SqlType::bigint().not_null(), "bigint".into()),
            (
                "v".into(),
                SqlType::varchar(64, UTF8MB4_BIN),
                "varchar(64)".into(),
            ),
            ("d".into(), SqlType::double(), "double".into()),
        ],
        pk: Some(0),
        rows,
    }]);
    let f = common::repl::Fixture::start_with_tables(tables).await;
    let out = tokio::time::timeout(
        CLIENT_WAIT,
        tokio::process::Command::new(&py)
            .arg(repo().join("tests/clients/pymysql_stream.py"))
            .arg(f.addr.ip().to_string())
            .arg(f.addr.port().to_string())
            .arg("root")
            .arg(common::repl::PASSWORD)
            .arg("SELECT id, v, d FROM big.t")
            .output(),
    )
    .await
    .expect("PyMySQL finishes")
    .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Json = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(got["rows"], ROWS);
    assert_eq!(got["sum"], want_sum);
    assert_eq!(got["length"], want_len);
    assert_eq!(got["one"], 1);
    f.stop().await;
}

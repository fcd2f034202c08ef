//! The whole product end to end: the simulated cluster (seeded OLTP workload with DDL and
//! faults) → changefeed → binlog store → MySQL server, read back by a real replication client
//! (`mysql_async`'s binlog stream) and compared with the simulator's truth log.

mod common;

#[path = "app_server/ordered.rs"]
mod ordered;
#[path = "app_server/reads.rs"]
mod reads;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::app::{
    dense_set, finish_workload, master_gtids, max_commit_ts, opts, pause_and_settle, start_app,
    start_app_with, start_sim, start_sim_paused, truth_after, wait_until, Run, WAIT,
};
use common::mariadb::MariaDb;
use common::mysql_binlog::{assert_seen_equals_truth, expected, read_binlog, Dump};
use common::truth::{apply_effect, DdlReplay};
use mysql_async::prelude::*;
use mysql_async::BinlogStreamRequest;
use tibinlog::app::App;
use tibinlog::model::Ts;
use tokio::io::AsyncBufReadExt;

async fn finish_and_check(run: &Run, app: &App, seed: u64) -> Dump {
    let want = finish_workload(run, app).await;
    let uuid = app.server_uuid().to_string();
    assert_eq!(
        master_gtids(app.local_addr())
            .await
            .expect("SHOW MASTER STATUS"),
        dense_set(&uuid, want.len()),
        "seed {seed}: SHOW MASTER STATUS covers every transaction"
    );
    let dump = read_binlog(
        app.local_addr(),
        BinlogStreamRequest::new(0)
            .with_filename(b"binlog.000001")
            .with_pos(4),
        None,
    )
    .await;
    assert_eq!(dump.uuid, uuid, "GTID source is the app's server_uuid");
    let compared = assert_seen_equals_truth(
        &format!("seed {seed}"),
        &dump.txns,
        &expected(&want, 1..=want.len() as u64),
    );
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
        .filter_map(|r| r["db"].as_str().map(str::to_owned))
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
    // Started with the first incarnation; each round lets it run to a third of its 3,000
    // transactions at most and holds it there, so that however slow the machine, every kill
    // comes before the workload's end (the rest is committed after the last restart).
    let run = start_sim_paused(seed, 3_000, 200.0).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut killed_at = Vec::new();
    for round in 0..2 {
        let app = start_app(&run, dir.path()).await;
        run.sim.start_workload();
        // Kill only once this incarnation has made a few hundred transactions durable: the
        // durable checkpoint moved past where it started, and 300 more were written.
        let written_at_start = app.txns_written();
        let checkpoint_at_start = *app.checkpoint().borrow();
        let cap = 1_000 * (round + 1);
        wait_until("300 transactions written and made durable", || {
            if run.sim.summary().txns >= cap {
                run.sim.pause_workload();
            }
            app.txns_written() >= written_at_start + 300
                && app.checkpoint().borrow().0 > checkpoint_at_start.0
        })
        .await;
        let durable = *app.checkpoint().borrow();
        let workload_running = run.sim.summary().txns < 3_000;
        let binlog_dir = app.binlog_dir().to_path_buf();
        app.kill().await;
        killed_at.push(durable);
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
            "round {round}: killed at durable checkpoint {} (workload still running: \
             {workload_running}); {} ({len} bytes) {}",
            durable.0,
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
        "the restart resumes from a recovered checkpoint ({:?}), not from the first start ts",
        app.start_ts()
    );
    run.sim.start_workload();
    finish_and_check(&run, &app, seed).await;
    // Every kill happened mid-stream: transactions committed after its durable checkpoint
    // reached the binlog only through a later incarnation.
    let last_commit = max_commit_ts(&run.truth.lines());
    for (round, durable) in killed_at.iter().enumerate() {
        assert!(
            durable.0 > run.start_ts.0 && durable.0 < last_commit,
            "round {round}: killed at checkpoint {} outside the stream ({}, {last_commit})",
            durable.0,
            run.start_ts.0
        );
    }
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
            "--status-listen",
            "127.0.0.1:0",
        ])
        .arg("--truth")
        .arg(&truth)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info,tibinlog::server=debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn tibinlog demo");
    // Every log line is a JSON object; kept to check the connection fields below.
    let log_lines = {
        let stderr = child.stderr.take().expect("stderr");
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            let mut out = Vec::new();
            while let Ok(Some(l)) = lines.next_line().await {
                out.push(l);
            }
            out
        })
    };
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut addr: Option<SocketAddr> = None;
    let mut status: Option<SocketAddr> = None;
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
        if let Some(rest) = line.strip_prefix("status page:  http://") {
            let a = rest.split('/').next().expect("status address");
            status = Some(a.parse().expect("status address"));
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
    check_status_page(status.expect("status page line"), addr, n).await;
    child.kill().await.expect("kill the demo");
    let logs = log_lines.await.expect("stderr reader");
    let logs: Vec<serde_json::Value> = logs
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(logs
        .iter()
        .all(|l| l["level"].is_string() && l["timestamp"].is_string()));
    assert!(
        logs.iter().any(|l| l["message"] == "authenticated"
            && l["span"]["user"] == "root"
            && l["span"]["conn"].is_u64()),
        "no login line with the connection's fields"
    );
    assert!(
        logs.iter()
            .any(|l| l["message"] == "dump starts" && l["span"]["server_id"] == 777),
        "no dump line with the replica's server id"
    );
}

/// Loads the status page of a running demo in headless Chromium with a replica attached and
/// checks what it shows; keeps a screenshot (`status-page.png` in the test's temporary
/// directory of the target dir).
async fn check_status_page(status: SocketAddr, addr: SocketAddr, txns: usize) {
    let Some(chromium) = common::peer::find_tool("chromium") else {
        common::peer::missing("chromium (Debian package chromium)");
        return;
    };
    // A GTID replica with server id 777 reads everything and stays.
    let replica = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let mut stream = replica
        .get_binlog_stream(BinlogStreamRequest::new(777).with_gtid())
        .await
        .expect("binlog stream");
    let reader = tokio::spawn(async move {
        use futures_util::StreamExt;
        while let Some(Ok(_)) = stream.next().await {}
    });
    let deadline = Instant::now() + WAIT;
    loop {
        let reps = common::http::get_json(status, "/api/v1/replicas").await;
        let caught_up = reps.as_array().is_some_and(|a| {
            a.iter()
                .any(|r| r["server_id"] == 777 && r["caught_up"] == true)
        });
        // The lag chart draws a line once the sampler (once a second) holds two points.
        let st = common::http::get_json(status, "/api/v1/status").await;
        let samples = st["history"].as_array().map_or(0, |h| h.len());
        if caught_up && samples >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica never caught up or no lag history ({samples} samples): {reps}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let profile = tempfile::tempdir().expect("profile dir");
    let run = |extra: Vec<String>| {
        let mut cmd = tokio::process::Command::new(&chromium);
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1280,1100",
            // Long enough for the first fetches and a few refreshes (2 s each).
            "--virtual-time-budget=7000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("http://{status}/"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
        cmd
    };
    let out = tokio::time::timeout(WAIT, run(vec!["--dump-dom".into()]).output())
        .await
        .expect("chromium in time")
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page never rendered the API (stderr: {})\n{dom}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "class=\"v state-running\" id=\"capture-state\">running<",
        "<td class=\"num\">777</td>",
        "<td>root@127.0.0.1:",
        "Source has sent all binlog to replica; waiting for more updates",
        "<td>binlog.000001</td>",
        "data-series=\"checkpoint_lag\"",
        "data-series=\"resolved_lag\"",
        "% of ",
    ] {
        assert!(dom.contains(want), "the page lacks {want:?}:\n{dom}");
    }
    let gno = format!("GNO {txns}");
    assert!(dom.contains(&gno), "the page lacks {gno:?}:\n{dom}");
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = tokio::time::timeout(
        WAIT,
        run(vec![format!("--screenshot={}", shot.display())]).output(),
    )
    .await
    .expect("chromium in time")
    .expect("run chromium");
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot of {} bytes",
        png.len()
    );
    eprintln!("status page screenshot: {}", shot.display());
    reader.abort();
}

/// `SHOW CREATE TABLE` text of `db.t` on `conn`.
async fn create_table(conn: &mut mysql_async::Conn, table: &str) -> String {
    let row: (String, String) = conn
        .query_first(format!("SHOW CREATE TABLE test.{table}"))
        .await
        .expect("SHOW CREATE TABLE")
        .expect("a row");
    row.1
}

/// `(File, Position, Executed_Gtid_Set)` of `SHOW MASTER STATUS` on `conn`.
async fn status_on(conn: &mut mysql_async::Conn) -> (String, u64, String) {
    let row: mysql_async::Row = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .expect("SHOW MASTER STATUS")
        .expect("a row");
    (
        row.get("File").expect("File"),
        row.get("Position").expect("Position"),
        row.get::<Option<String>, _>("Executed_Gtid_Set")
            .expect("Executed_Gtid_Set")
            .unwrap_or_default(),
    )
}

/// Catalog answers follow the binlog, not the capture: a table changed by a DDL shows the change
/// only once the DDL's event is durable, and a session holding `FLUSH TABLES WITH READ LOCK`
/// (Debezium's snapshot) keeps the position and the table definitions of the moment it locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_lock_pins_master_status_and_catalog() {
    use tibinlog::sim::tidb::types as ty;
    use tibinlog::sim::tidb::{ColumnDef, Ddl};
    use tibinlog::tidb::schema::mysql;
    use tibinlog_protocol::value::Value;

    let cluster = common::app::start_scripted(2, 5).await;
    let insert = |row: Vec<Value>| {
        cluster.txn(|txn| txn.insert("test", "locked", &row).expect("insert"));
    };
    cluster.ddl(Ddl::CreateTable {
        db: "test".into(),
        table: common::sim::small_table("locked", None),
    });
    insert(vec![Value::Int(1), Value::Bytes(b"v".to_vec())]);
    let run = &cluster.run;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(run, &dir.path().join("data")).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    // CREATE TABLE and the insert are gno 1 and 2.
    let mut other = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let deadline = Instant::now() + WAIT;
    while status_on(&mut other).await.2 != dense_set(&uuid, 2) {
        assert!(
            Instant::now() < deadline,
            "first transactions reach the binlog"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut locked = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    locked
        .query_drop("FLUSH TABLES WITH READ LOCK")
        .await
        .expect("FTWRL");
    let at_lock = status_on(&mut locked).await;
    assert_eq!(at_lock.2, dense_set(&uuid, 2));
    let before = create_table(&mut locked, "locked").await;
    assert!(!before.contains("`n`"), "{before}");

    cluster.ddl(Ddl::AddColumn {
        db: "test".into(),
        table: "locked".into(),
        column: ColumnDef::new("n", ty::int(mysql::TYPE_LONG, false)).default(Value::Int(42)),
    });
    insert(vec![
        Value::Int(2),
        Value::Bytes(b"w".to_vec()),
        Value::Int(7),
    ]);
    // Another session reads the table, then the position: once the table shows the new column
    // the ALTER (gno 3) is durable, so the position read after it covers it.
    let mut saw_old = 0;
    loop {
        let text = create_table(&mut other, "locked").await;
        let (_, _, gtids) = status_on(&mut other).await;
        let has_alter = gtids != dense_set(&uuid, 2);
        if text.contains("`n`") {
            assert!(
                has_alter,
                "column shown before the ALTER is in the binlog ({gtids})"
            );
            if gtids == dense_set(&uuid, 4) {
                break;
            }
        } else {
            saw_old += 1;
        }
        assert!(
            Instant::now() < deadline,
            "ALTER and insert reach the binlog"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The locked session still sees the moment it locked.
    assert_eq!(
        status_on(&mut locked).await,
        at_lock,
        "status under the lock"
    );
    assert_eq!(
        create_table(&mut locked, "locked").await,
        before,
        "table under the lock"
    );
    locked.query_drop("UNLOCK TABLES").await.expect("unlock");
    let after = create_table(&mut locked, "locked").await;
    assert!(after.contains("`n` int DEFAULT '42'"), "{after}");
    assert_eq!(status_on(&mut locked).await.2, dense_set(&uuid, 4));
    eprintln!("{saw_old} reads saw the table before the ALTER was durable");

    let _ = locked.disconnect().await;
    let _ = other.disconnect().await;
    app.stop().await.expect("clean stop");
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

/// Virtual generated columns, which TiDB never stores, reach the binlog's row images and
/// snapshot reads computed from the expression TiDB keeps; `SHOW CREATE TABLE` prints the
/// generated clause as MySQL does. A table with one the engine cannot compute is refused, never
/// given a made-up value: its SELECT is an error and its first row stops capture, both naming
/// the column.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn virtual_generated_columns_are_computed_in_row_images_and_reads() {
    use tibinlog::sim::tidb::types as ty;
    use tibinlog::sim::tidb::{ColumnDef, Ddl, TableDef};
    use tibinlog::tidb::schema::mysql;
    use tibinlog_protocol::value::Value;

    let cluster = common::app::start_scripted(1, 9).await;
    let table = TableDef {
        name: "gen".into(),
        columns: vec![
            ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("qty", ty::int(mysql::TYPE_LONG, false)),
            // As TiDB restores the expressions into GeneratedExprString.
            ColumnDef::new("total", ty::int(mysql::TYPE_LONGLONG, false))
                .generated("`qty` * 10 + `id`", false),
            ColumnDef::new("label", ty::varchar(30))
                .generated("concat(_utf8mb4'#', `id`, _utf8mb4'/', `qty`)", false),
            ColumnDef::new("stored", ty::int(mysql::TYPE_LONG, false)).generated("`qty` + 1", true),
            ColumnDef::new("doc_len", ty::int(mysql::TYPE_LONG, false))
                .generated("json_valid(`label`)", false),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    };
    cluster.ddl(Ddl::CreateTable {
        db: "test".into(),
        table,
    });
    // The caller passes every cell; TiDB writes the stored ones only (the sim's encoder skips
    // virtual columns), so the values given for them here never reach TiKV.
    let row = |id: i64, qty: i64| {
        vec![
            Value::Int(id),
            Value::Int(qty),
            Value::Int(-1),
            Value::Bytes(b"ignored".to_vec()),
            Value::Int(qty + 1),
            Value::Int(-1),
        ]
    };
    // One transaction of `(update, row)` changes.
    let write = |changes: Vec<(bool, Vec<Value>)>| {
        cluster.txn(|txn| {
            for (update, r) in &changes {
                if *update {
                    txn.update("test", "gen", &r[..1], r).expect("update");
                } else {
                    txn.insert("test", "gen", r).expect("insert");
                }
            }
        })
    };
    write(vec![(false, row(1, 3)), (false, row(2, 4))]);
    write(vec![(true, row(2, 7))]);
    let run = &cluster.run;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(run, &dir.path().join("data")).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    while master_gtids(addr).await.ok() != Some(dense_set(&uuid, 3)) {
        assert!(
            Instant::now() < deadline,
            "CREATE, insert and update reach the binlog"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let dump = read_binlog(
        addr,
        BinlogStreamRequest::new(0)
            .with_filename(b"binlog.000001")
            .with_pos(4),
        None,
    )
    .await;
    let images: Vec<serde_json::Value> = dump
        .txns
        .iter()
        .flat_map(|t| t.rows.iter().cloned())
        .collect();
    let image = |id: &str, qty: &str, total: &str, label: &str, stored: &str| {
        serde_json::json!({
            "id": id, "qty": qty, "total": total, "label": label, "stored": stored,
            "doc_len": "0",
        })
    };
    assert_eq!(images.len(), 3, "{images:#?}");
    assert_eq!(images[0]["after"], image("1", "3", "31", "#1/3", "4"));
    assert_eq!(images[1]["after"], image("2", "4", "42", "#2/4", "5"));
    assert_eq!(images[2]["before"], image("2", "4", "42", "#2/4", "5"));
    assert_eq!(images[2]["after"], image("2", "7", "72", "#2/7", "8"));

    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let rows: Vec<(i64, i64, i64, String, i64, Option<i64>)> = conn
        .query("SELECT id, qty, total, label, stored, doc_len FROM test.gen ORDER BY id")
        .await
        .expect("SELECT");
    assert_eq!(
        rows,
        [
            (1, 3, 31, "#1/3".to_owned(), 4, Some(0)),
            (2, 7, 72, "#2/7".to_owned(), 8, Some(0))
        ]
    );
    let filtered: Vec<i64> = conn
        .query("SELECT id FROM test.gen WHERE total > 40")
        .await
        .expect("SELECT WHERE");
    assert_eq!(filtered, [2]);
    // The statement names neither `qty` nor `id`: the columns its expression reads are
    // still decoded.
    let totals: Vec<(i64, String)> = conn
        .query("SELECT total, label FROM test.gen ORDER BY total")
        .await
        .expect("SELECT generated only");
    assert_eq!(totals, [(31, "#1/3".to_owned()), (72, "#2/7".to_owned())]);
    let ddl = create_table(&mut conn, "gen").await;
    assert!(
        ddl.contains("`total` bigint GENERATED ALWAYS AS (`qty` * 10 + `id`) VIRTUAL,"),
        "{ddl}"
    );
    assert!(
        ddl.contains("`stored` int GENERATED ALWAYS AS (`qty` + 1) STORED,"),
        "{ddl}"
    );

    // A column the engine cannot compute (SOUNDEX): the table's rows are refused.
    cluster.ddl(Ddl::CreateTable {
        db: "test".into(),
        table: TableDef {
            name: "gen_bad".into(),
            columns: vec![
                ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
                ColumnDef::new("sound", ty::varchar(30)).generated("soundex(`id`)", false),
            ],
            primary_key: vec!["id".into()],
            clustered: true,
            indexes: Vec::new(),
            partition: None,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while master_gtids(addr).await.ok() != Some(dense_set(&uuid, 4)) {
        assert!(Instant::now() < deadline, "the CREATE reaches the binlog");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let read = conn
        .query::<(i64, Option<String>), _>("SELECT id, sound FROM test.gen_bad")
        .await
        .expect_err("refused");
    assert!(read.to_string().contains("test.gen_bad.sound"), "{read}");
    cluster.txn(|txn| {
        txn.insert("test", "gen_bad", &[Value::Int(1), Value::Null])
            .expect("insert");
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = capture_status(addr).await;
        if s["Tibinlog_capture_state"] == "stopped" {
            break s;
        }
        assert!(Instant::now() < deadline, "capture stops: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let error = &status["Tibinlog_capture_last_error"];
    assert!(error.contains("test.gen_bad.sound"), "{error}");
    let _ = conn.disconnect().await;
    app.stop().await.expect("clean stop");
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

/// A batch create (TiDB's `CREATE TABLES` job: several tables, one commit ts) is one binlog
/// transaction per table, each with its GTID and QUERY event, in the job's statement order; the
/// rows written into the new tables follow, and the SQL catalog shows every table. A `RENAME
/// TABLE` of several tables (`RENAME TABLES` job: a swap through a temporary name, a move to
/// another database) is one QUERY event, and rows written afterwards carry the new names.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_create_and_multi_table_rename_reach_the_binlog() {
    use tibinlog::sim::tidb::{Ddl, TableRename};
    use tibinlog_protocol::value::Value;

    let cluster = common::app::start_scripted(2, 13).await;
    let names = ["batch_a", "batch_b", "batch_c"];
    cluster.ddl(Ddl::CreateTables {
        db: "test".into(),
        tables: names
            .iter()
            .map(|n| common::sim::small_table(n, None))
            .collect(),
    });
    let insert = |db: &str, table: &str, id: i64| {
        cluster.txn(|txn| {
            txn.insert(db, table, &[Value::Int(id), Value::Bytes(b"v".to_vec())])
                .expect("insert");
        })
    };
    for (i, name) in names.iter().enumerate() {
        insert("test", name, i as i64);
    }
    // One RENAME TABLE of several: a swap through a temporary name and a move to another
    // database, then rows written under the new names.
    cluster.ddl(Ddl::CreateDatabase {
        name: "other".into(),
    });
    let rename = |db: &str, table: &str, new_db: &str, new_table: &str| TableRename {
        db: db.into(),
        table: table.into(),
        new_db: new_db.into(),
        new_table: new_table.into(),
    };
    cluster.ddl(Ddl::RenameTables {
        renames: vec![
            rename("test", "batch_a", "test", "tmp"),
            rename("test", "batch_b", "test", "batch_a"),
            rename("test", "tmp", "test", "batch_b"),
            rename("test", "batch_c", "other", "batch_c"),
        ],
    });
    insert("test", "batch_a", 10);
    insert("test", "batch_b", 11);
    insert("other", "batch_c", 12);
    let run = &cluster.run;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(run, &dir.path().join("data")).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    let lines = run.truth.lines();
    common::app::wait_checkpoint(&app, max_commit_ts(&lines)).await;
    let want = truth_after(&lines, run.start_ts);
    assert_eq!(
        want.len(),
        11,
        "three statements, three inserts, a database, the rename, three inserts: {want:#?}"
    );
    assert_eq!(
        master_gtids(addr).await.expect("SHOW MASTER STATUS"),
        dense_set(&uuid, 11)
    );
    let dump = read_binlog(
        addr,
        BinlogStreamRequest::new(0)
            .with_filename(b"binlog.000001")
            .with_pos(4),
        None,
    )
    .await;
    common::mysql_binlog::assert_seen_equals_truth(
        "batch create",
        &dump.txns,
        &common::mysql_binlog::expected(&want, 1..=11),
    );
    let ddls: Vec<&str> = dump.txns.iter().filter_map(|t| t.ddl.as_deref()).collect();
    assert_eq!(ddls.len(), 5, "{ddls:?}");
    assert_eq!(
        ddls[4],
        "RENAME TABLE `test`.`batch_a` TO `test`.`tmp`, `test`.`batch_b` TO `test`.`batch_a`, \
         `test`.`tmp` TO `test`.`batch_b`, `test`.`batch_c` TO `other`.`batch_c`",
        "one statement, as MySQL logs it"
    );
    for (ddl, name) in ddls.iter().zip(names) {
        assert!(
            ddl.starts_with(&format!("CREATE TABLE `test`.`{name}`")),
            "{ddl}"
        );
    }
    let commit_ts: Vec<u64> = want[..3]
        .iter()
        .map(|t| t["commit_ts"].as_u64().expect("commit_ts"))
        .collect();
    assert!(
        commit_ts.iter().all(|c| *c == commit_ts[0]),
        "one job, one commit ts"
    );

    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let tables: Vec<String> = conn
        .query("SHOW TABLES FROM test LIKE 'batch%'")
        .await
        .expect("SHOW TABLES");
    assert_eq!(tables, ["batch_a", "batch_b"]);
    let tables: Vec<String> = conn
        .query("SHOW TABLES FROM other")
        .await
        .expect("SHOW TABLES");
    assert_eq!(tables, ["batch_c"]);
    // The swap: each name now holds the other table's rows.
    let ids: Vec<i64> = conn
        .query("SELECT id FROM test.batch_a ORDER BY id")
        .await
        .expect("SELECT");
    assert_eq!(ids, [1, 10]);
    let ids: Vec<i64> = conn
        .query("SELECT id FROM test.batch_b ORDER BY id")
        .await
        .expect("SELECT");
    assert_eq!(ids, [0, 11]);
    let _ = conn.disconnect().await;

    // A MariaDB 10.11 replica runs every statement: the three tables and the renames.
    let replica = tokio::task::spawn_blocking(|| MariaDb::start(&["--server-id=77"]));
    if let Some(db) = replica.await.expect("start MariaDB") {
        let end = common::app::master_status(addr)
            .await
            .expect("master status");
        let mut c = db.conn().await;
        // `test` existed before capture started: the replica is seeded with it.
        c.query_drop(format!(
            "CREATE DATABASE test CHARACTER SET utf8mb4; CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_PASSWORD='', MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, \
             MASTER_USE_GTID=no; START SLAVE",
            addr.port()
        ))
        .await
        .expect("CHANGE MASTER TO");
        let deadline = Instant::now() + WAIT;
        loop {
            let s = db.slave_status().await.expect("replication configured");
            assert!(
                s.last_error.is_empty() && s.last_io_error.is_empty(),
                "replica error: {s:?}\n{}",
                db.error_log()
            );
            if s.relay_master_log_file == end.file && s.exec_master_log_pos == end.position {
                break;
            }
            assert!(Instant::now() < deadline, "replica stuck at {s:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let a: Vec<i64> = c
            .query("SELECT id FROM test.batch_a ORDER BY id")
            .await
            .expect("a");
        let b: Vec<i64> = c
            .query("SELECT id FROM test.batch_b ORDER BY id")
            .await
            .expect("b");
        let moved: Vec<i64> = c
            .query("SELECT id FROM other.batch_c ORDER BY id")
            .await
            .expect("c");
        assert_eq!((a, b, moved), (vec![1, 10], vec![0, 11], vec![2, 12]));
        let tmp: Vec<String> = c
            .query("SHOW TABLES FROM test LIKE 'tmp'")
            .await
            .expect("tmp");
        assert!(tmp.is_empty());
        let _ = c.disconnect().await;
    }
    app.stop().await.expect("clean stop");
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

/// A cell as the truth log renders it: text, or `0x` + upper-case hex for bytes that are not
/// UTF-8 and for BIT values.
fn truth_text(v: &mysql_async::Value, col: &mysql_async::Column) -> serde_json::Value {
    use mysql_async::consts::ColumnType;
    match v {
        mysql_async::Value::NULL => serde_json::Value::Null,
        mysql_async::Value::Bytes(b) => {
            let hex = || format!("0x{}", hex::encode_upper(b));
            let s = if col.column_type() == ColumnType::MYSQL_TYPE_BIT {
                hex()
            } else {
                String::from_utf8(b.clone()).unwrap_or_else(|_| hex())
            };
            serde_json::Value::String(s)
        }
        other => serde_json::Value::String(other.as_sql(true)),
    }
}

/// The rows of every table at a consistent snapshot, pinned the way Debezium and mysqldump pin
/// it (FLUSH TABLES WITH READ LOCK, START TRANSACTION WITH CONSISTENT SNAPSHOT, SHOW MASTER
/// STATUS, UNLOCK TABLES), equal the truth log's state at the snapshot's timestamp, and the
/// binlog position read under the lock holds exactly the transactions up to that timestamp:
/// "snapshot + binlog from that position" is the whole history, nothing missing or twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshot_reads_line_up_with_the_binlog_position() {
    use std::collections::BTreeMap;
    let seed = 23;
    let run = start_sim_paused(seed, 1_500, 300.0).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&run, dir.path()).await;
    run.sim.start_workload();
    // Snapshot in the middle of the workload: a few hundred transactions are durable, the
    // workload is held until the snapshot is pinned and writes on while the tables are read.
    wait_until("transactions written", || run.sim.summary().txns >= 300).await;
    pause_and_settle(&run, &app).await;
    let mut conn = mysql_async::Conn::new(opts(app.local_addr(), "root"))
        .await
        .expect("connect");
    conn.query_drop("FLUSH TABLES WITH READ LOCK")
        .await
        .expect("FTWRL");
    conn.query_drop("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .expect("isolation");
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .expect("consistent snapshot");
    let status: mysql_async::Row = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .expect("status")
        .expect("a row");
    let gtids: String = status.get("Executed_Gtid_Set").expect("gtids");
    let file: String = status.get("File").expect("file");
    let pos: u64 = status.get("Position").expect("position");
    let ts: String = conn
        .query_first("SELECT @@tidb_snapshot")
        .await
        .expect("tidb_snapshot")
        .expect("a row");
    let ts: u64 = ts.parse().expect("a pinned timestamp");
    conn.query_drop("UNLOCK TABLES").await.expect("unlock");
    run.sim.start_workload();
    // Both directions of the mapping agree with the pinned pair.
    let at: Option<u64> = conn
        .query_first(format!("SELECT TIBINLOG_TS_FOR_POS('{file}', {pos})"))
        .await
        .expect("ts for position")
        .flatten();
    // A position stands for a range of timestamps: the pinned one, or (once the resolved ts
    // moved on, or a later transaction was written) another; each maps back to it.
    let at = at.expect("a timestamp for the pinned position");
    for t in [ts, at] {
        let back: Option<String> = conn
            .query_first(format!("SELECT TIBINLOG_POS_FOR_TS({t})"))
            .await
            .expect("position for ts");
        assert_eq!(back, Some(format!("{file}:{pos}")), "position for ts {t}");
    }
    // Outside what the binlog covers there is no such position: before the capture started
    // (the binlog lacks what came between) and past the checkpoint (what comes up to it may
    // not be in yet). Both are errors naming the range, never a read at another point.
    let mut other = mysql_async::Conn::new(opts(app.local_addr(), "root"))
        .await
        .expect("connect");
    let origin = app.start_ts().0;
    for t in [origin - 1, u64::MAX / 2] {
        let e = other
            .query_drop(format!("SET @@tidb_snapshot = {t}"))
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("the binlog covers ts"), "{t}: {e}");
        let e = other
            .query_first::<Option<String>, _>(format!("SELECT TIBINLOG_POS_FOR_TS({t})"))
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("the binlog covers ts"), "{t}: {e}");
    }
    let none: Option<String> = other
        .query_first("SELECT @@tidb_snapshot")
        .await
        .expect("tidb_snapshot")
        .flatten();
    assert_eq!(none.as_deref(), Some(""), "nothing pinned");
    other
        .query_drop(format!("SET @@tidb_snapshot = {origin}"))
        .await
        .expect("the capture's start ts is in range");
    let _ = other.disconnect().await;

    // Every table of every database, read in the transaction.
    let dbs: Vec<String> = conn.query("SHOW DATABASES").await.expect("databases");
    let mut got: BTreeMap<(String, String), Vec<serde_json::Map<String, serde_json::Value>>> =
        BTreeMap::new();
    let mut keys: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for db in dbs.iter().filter(|d| *d != "information_schema") {
        let tables: Vec<String> = conn
            .query(format!("SHOW TABLES FROM `{db}`"))
            .await
            .expect("tables");
        for t in tables {
            let pk: Vec<String> = conn
                .query(format!(
                    "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE \
                     CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{t}' \
                     ORDER BY ORDINAL_POSITION"
                ))
                .await
                .expect("primary key");
            // mysqldump's --single-transaction: a savepoint around every table; rolling back
            // to it keeps the transaction and its snapshot.
            conn.query_drop("SAVEPOINT sp").await.expect("savepoint");
            let mut r = conn
                .query_iter(format!("SELECT * FROM `{db}`.`{t}`"))
                .await
                .expect("select");
            let cols = r.columns().expect("columns");
            let rows: Vec<mysql_async::Row> = r.collect().await.expect("rows");
            let rows = rows
                .into_iter()
                .map(|row| {
                    let vals = row.unwrap();
                    cols.iter()
                        .zip(&vals)
                        .map(|(c, v)| (c.name_str().into_owned(), truth_text(v, c)))
                        .collect()
                })
                .collect();
            conn.query_drop("ROLLBACK TO SAVEPOINT sp")
                .await
                .expect("rollback to savepoint");
            got.insert((db.clone(), t.clone()), rows);
            keys.insert((db.clone(), t), pk);
        }
    }
    let e = conn
        .query_drop("ROLLBACK TO SAVEPOINT nope")
        .await
        .expect_err("no such savepoint");
    assert!(
        matches!(&e, mysql_async::Error::Server(s) if s.code == 1305),
        "{e}"
    );
    conn.query_drop("COMMIT").await.expect("commit");
    drop(conn);

    let want_all = finish_workload(&run, &app).await;
    // The position holds exactly the transactions committed at or before the timestamp.
    let upto: Vec<&serde_json::Value> = want_all
        .iter()
        .filter(|t| t["commit_ts"].as_u64().is_some_and(|c| c <= ts))
        .collect();
    assert!(
        upto.len() > 100 && upto.len() < want_all.len(),
        "a snapshot mid-stream"
    );
    assert_eq!(gtids, dense_set(&app.server_uuid().to_string(), upto.len()));

    // The truth state at the timestamp, by primary key (whole row when there is none).
    let key_of = |pk: &[String], row: &serde_json::Map<String, serde_json::Value>| -> String {
        if pk.is_empty() {
            serde_json::Value::Object(row.clone()).to_string()
        } else {
            pk.iter()
                .map(|k| row.get(k).map(|v| v.to_string()).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("|")
        }
    };
    let mut state: BTreeMap<
        (String, String),
        BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    > = BTreeMap::new();
    // Tables created before the changefeed's start are known to the replay too.
    let mut replay = DdlReplay::default();
    for txn in truth_after(&run.truth.lines(), Ts(0)) {
        if txn["commit_ts"]
            .as_u64()
            .is_some_and(|c| c <= run.start_ts.0)
        {
            if let Some(ddl) = txn["ddl"].as_str() {
                replay.effect(ddl);
            }
        }
    }
    for txn in &upto {
        // TRUNCATE TABLE empties the table, TRUNCATE PARTITION part of it, renames and
        // EXCHANGE PARTITION move rows between names (none of it appears as row events).
        if let Some(ddl) = txn["ddl"].as_str() {
            let effect = replay.effect(ddl);
            apply_effect(&mut state, &effect, |r, c| {
                r.get(c).and_then(|v| v.as_str()).map(str::to_owned)
            });
        }
        for r in txn["rows"].as_array().into_iter().flatten() {
            let id = (
                r["db"].as_str().unwrap_or_default().to_owned(),
                r["table"].as_str().unwrap_or_default().to_owned(),
            );
            let pk = keys.get(&id).cloned().unwrap_or_default();
            let table = state.entry(id).or_default();
            if let Some(b) = r["before"].as_object() {
                table.remove(&key_of(&pk, b));
            }
            if let Some(a) = r["after"].as_object() {
                table.insert(key_of(&pk, a), a.clone());
            }
        }
    }
    let mut compared = 0usize;
    for (id, rows) in &state {
        let pk = keys.get(id).cloned().unwrap_or_default();
        let read = got.get(id).unwrap_or_else(|| panic!("{id:?} was not read"));
        let read: BTreeMap<String, &serde_json::Map<String, serde_json::Value>> =
            read.iter().map(|r| (key_of(&pk, r), r)).collect();
        assert_eq!(
            read.keys().collect::<Vec<_>>(),
            rows.keys().collect::<Vec<_>>(),
            "{id:?}: the rows of the snapshot"
        );
        for (k, want) in rows {
            let have = read[k];
            for (col, v) in want {
                // A column added after the row was last written reads as its default.
                if let Some(h) = have.get(col) {
                    assert_eq!(h, v, "{id:?} row {k} column {col}");
                    compared += 1;
                }
            }
        }
    }
    for (id, rows) in &got {
        if !state.contains_key(id) {
            assert!(rows.is_empty(), "{id:?}: rows the truth log does not have");
        }
    }
    assert!(compared > 1000, "only {compared} values compared");
    eprintln!(
        "snapshot at ts {ts} ({file}:{pos}): {} of {} transactions, {} tables, {compared} values equal",
        upto.len(),
        want_all.len(),
        state.len()
    );
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// `binlog_expire_logs_seconds` and `PURGE BINARY LOGS` never take the file a dump session is
/// reading, nor a later one: a replica that fell far behind still gets every transaction once,
/// a PURGE stops before its file with MySQL's warning 1867, and once it is gone expiry takes
/// every file but the open one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expiry_and_purge_leave_the_files_dump_sessions_read() {
    use common::mysql_binlog::Assembler;
    use futures_util::StreamExt;

    let seed = 29;
    let run = start_sim_paused(seed, 3_000, 0.0).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = common::app::app_config(&run, dir.path());
    cfg.max_binlog_size = 16 << 10;
    // The simulated clock starts in 2025: every closed file is more than a second old.
    cfg.expire_logs_seconds = 1;
    let app = start_app_with(cfg).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();

    // A replica asks for everything from the first file, takes the first events and stops
    // reading: its session stops where its socket fills up, far behind the end.
    let replica = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let mut stream = replica
        .get_binlog_stream(
            BinlogStreamRequest::new(7)
                .with_filename(b"binlog.000001")
                .with_pos(4),
        )
        .await
        .expect("binlog stream");
    let mut asm = Assembler::default();
    let mut txns = Vec::new();
    for _ in 0..2 {
        let ev = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("first events")
            .expect("stream open")
            .expect("event");
        txns.extend(asm.on_event(&ev, &stream));
    }
    run.sim.start_workload();
    let want = finish_workload(&run, &app).await;

    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let expire: u64 = conn
        .query_first("SELECT @@binlog_expire_logs_seconds")
        .await
        .expect("variable")
        .expect("a row");
    assert_eq!(expire, 1);
    let logs = |rows: Vec<(String, u64, String)>| rows.into_iter().map(|r| r.0).collect::<Vec<_>>();
    let listed = logs(
        conn.query("SHOW BINARY LOGS")
            .await
            .expect("SHOW BINARY LOGS"),
    );
    let active = listed.last().expect("a file").clone();
    assert!(
        listed.len() > 1,
        "the replica's file and the ones after it stay ({listed:?})"
    );
    assert_ne!(listed[0], "binlog.000001", "expiry purged files before it");
    eprintln!(
        "the replica's session holds {} of {} files ({} transactions)",
        listed[0],
        listed.len(),
        want.len()
    );
    // PURGE up to the open file stops at the replica's file, which is the first one left.
    conn.query_drop(format!("PURGE BINARY LOGS TO '{active}'"))
        .await
        .expect("PURGE");
    assert_eq!(conn.get_warnings(), 1, "the OK packet counts the warning");
    let warnings: Vec<(String, u16, String)> =
        conn.query("SHOW WARNINGS").await.expect("SHOW WARNINGS");
    assert_eq!(
        warnings,
        vec![(
            "Warning".to_string(),
            1867,
            format!(
                "file {} was not purged because it was being read by 1 thread(s), purged only \
                 0 out of {} files.",
                listed[0],
                listed.len() - 1
            )
        )]
    );
    assert_eq!(
        logs(
            conn.query("SHOW BINARY LOGS")
                .await
                .expect("SHOW BINARY LOGS")
        ),
        listed
    );

    // The replica reads on: every transaction once, in order, nothing missing.
    while txns.len() < want.len() {
        let ev = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the replica makes progress")
            .expect("stream open")
            .expect("no error: its files were kept");
        txns.extend(asm.on_event(&ev, &stream));
    }
    assert_eq!(asm.uuid, uuid);
    common::mysql_binlog::assert_seen_equals_truth(
        &format!("seed {seed}"),
        &txns,
        &common::mysql_binlog::expected(&want, 1..=want.len() as u64),
    );
    drop(stream);
    // Nobody reads the old files any more: the expiry timer takes every one but the open file.
    let deadline = Instant::now() + WAIT;
    loop {
        let now = logs(
            conn.query("SHOW BINARY LOGS")
                .await
                .expect("SHOW BINARY LOGS"),
        );
        if now == vec![active.clone()] {
            break;
        }
        assert!(Instant::now() < deadline, "expiry never purged {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = conn.disconnect().await;
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// `SHOW GLOBAL STATUS LIKE 'Tibinlog_capture%'` as a map.
async fn capture_status(addr: SocketAddr) -> std::collections::HashMap<String, String> {
    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let rows: Vec<(String, String)> = conn
        .query("SHOW GLOBAL STATUS LIKE 'Tibinlog_capture%'")
        .await
        .expect("SHOW STATUS");
    let _ = conn.disconnect().await;
    rows.into_iter().collect()
}

/// A row that cannot be decoded is an error no restart fixes: capture stops for good at it, once,
/// with the error in `SHOW STATUS` and the log, and the server goes on serving every transaction
/// before it (a dump reads them all; the later ones are not written). Restarted with
/// `exit_on_capture_stop`, the app ends with the error instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_definite_error_stops_capture_and_the_binlog_stays_served() {
    use tibinlog::sim::tidb::kv::{CommitMode, KvTxn};
    use tibinlog::sim::tidb::types as ty;
    use tibinlog::sim::tidb::{ColumnDef, Ddl, TableDef};
    use tibinlog::tidb::key::{encode_record_key, Handle};
    use tibinlog::tidb::schema::mysql;
    use tibinlog_protocol::value::Value;

    let cluster = common::app::start_scripted(1, 21).await;
    cluster.ddl(Ddl::CreateTable {
        db: "test".into(),
        table: TableDef {
            name: "t".into(),
            columns: vec![
                ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
                ColumnDef::new("v", ty::varchar(30)),
            ],
            primary_key: vec!["id".into()],
            clustered: true,
            indexes: Vec::new(),
            partition: None,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
    });
    let insert = |id: i64| {
        cluster.txn(|txn| {
            txn.insert(
                "test",
                "t",
                &[Value::Int(id), Value::Bytes(format!("v{id}").into_bytes())],
            )
            .expect("insert");
        })
    };
    for id in 1..=3 {
        insert(id);
    }
    let run = &cluster.run;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let app = start_app(run, &data).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    let before = dense_set(&uuid, 4);
    let deadline = Instant::now() + Duration::from_secs(60);
    while master_gtids(addr).await.ok().as_deref() != Some(before.as_str()) {
        assert!(
            Instant::now() < deadline,
            "CREATE and inserts reach the binlog"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        capture_status(addr).await["Tibinlog_capture_state"],
        "running"
    );

    // A committed record whose value is not a row (a row-format-v2 header and nothing else).
    let table_id = run
        .sim
        .tidb()
        .lock()
        .expect("tidb")
        .table("test", "t")
        .expect("table")
        .info
        .id;
    run.sim
        .cluster()
        .apply(move |core| {
            let mut kv = KvTxn::new(core.ts());
            let mut key = Vec::new();
            encode_record_key(&mut key, table_id, &Handle::Int(99));
            kv.put(key, vec![128, 0, 0xff, 0xff]);
            let done = kv.commit(core, CommitMode::TwoPc).expect("commit");
            Ok(((), done.outputs))
        })
        .expect("corrupt row committed");
    insert(4);
    insert(5);

    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = capture_status(addr).await;
        if s["Tibinlog_capture_state"] == "stopped" {
            break s;
        }
        assert!(Instant::now() < deadline, "capture stops: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let error = &status["Tibinlog_capture_last_error"];
    assert!(error.contains(&format!("table {table_id}")), "{error}");
    assert_eq!(status["Tibinlog_capture_restarts"], "0", "no restart loop");
    // Nothing after the bad row was written; everything before it is served.
    assert_eq!(master_gtids(addr).await.expect("gtids"), before);
    let dump = read_binlog(
        addr,
        BinlogStreamRequest::new(0)
            .with_filename(b"binlog.000001")
            .with_pos(4),
        None,
    )
    .await;
    assert_eq!(dump.txns.len(), 4, "CREATE and three inserts");
    app.stop()
        .await
        .expect("a stopped capture is not a failure of the app");

    // With exit_on_capture_stop the same point ends the app with the error.
    let mut cfg = common::app::app_config(run, &data);
    cfg.exit_on_capture_stop = true;
    let app = start_app_with(cfg).await;
    let r = tokio::time::timeout(Duration::from_secs(60), app.wait())
        .await
        .expect("the app ends");
    let e = format!("{:#}", r.expect_err("ends with the error"));
    assert!(
        e.contains("capture stopped for good") && e.contains(&format!("table {table_id}")),
        "{e}"
    );
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

/// The whole path with PD and TiKV serving mutual TLS: the binlog equals the truth log under
/// faults. A client certificate whose name TiKV's `cert-allowed-cn` does not list stops the
/// start with one error naming the refusal, instead of retrying.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn capture_over_mutual_tls_and_a_name_tikv_refuses() {
    use common::tls::{TestPki, CLIENT_CN};
    use tibinlog::sim::cli::SimArgs;
    use tibinlog::sim::pki::CertSpec;
    let seed = 21;
    let pki = TestPki::new();
    let sim = common::app::start_sim_paused_with(SimArgs {
        stores: 3,
        regions_per_table: 2,
        txns: Some(1_500),
        rate: 0.0,
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        chaos_interval: Some(Duration::from_millis(150)),
        progress_interval: Duration::from_secs(3600),
        ca: Some(pki.file("ca.pem", pki.ca.ca_pem())),
        cert: Some(pki.file("server.pem", &pki.server.cert_pem)),
        key: Some(pki.file("server-key.pem", &pki.server.key_pem)),
        tikv_cert_allowed_cn: vec![CLIENT_CN.into()],
        ..SimArgs::default()
    })
    .await;
    assert!(sim.handle.cluster().pd_url().starts_with("https://"));
    let run = Run {
        start_ts: Ts(sim.handle.cluster().tso().0),
        sim: sim.handle,
        truth: sim.truth,
    };

    // Refused: another name.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = common::app::app_config(&run, &dir.path().join("refused"));
    cfg.cluster_tls = Some(pki.client_files(&pki.issue(&CertSpec::client("stranger"))));
    let started = tokio::time::timeout(
        WAIT,
        App::start(cfg, tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the start ends");
    let Err(err) = started else {
        panic!("a start with a refused name succeeded")
    };
    let msg = format!("{err:#}");
    assert!(msg.contains("Common name check fail"), "{msg}");
    assert!(msg.contains("stranger"), "{msg}");

    let mut cfg = common::app::app_config(&run, &dir.path().join("data"));
    cfg.cluster_tls = Some(pki.client_files(&pki.client));
    let app = start_app_with(cfg).await;
    run.sim.start_workload();
    finish_and_check(&run, &app, seed).await;
    assert!(run.sim.summary().faults > 0, "faults were injected");
    assert_eq!(
        capture_status(app.local_addr()).await["Tibinlog_capture_state"],
        "running"
    );
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// `SHOW PROCESSLIST` rows as (Id, User, Command, State, Info).
async fn processlist(
    conn: &mut mysql_async::Conn,
) -> Vec<(u64, String, String, String, Option<String>)> {
    let rows: Vec<mysql_async::Row> = conn.query("SHOW PROCESSLIST").await.expect("processlist");
    rows.into_iter()
        .map(|r| {
            (
                r.get("Id").expect("Id"),
                r.get("User").expect("User"),
                r.get("Command").expect("Command"),
                r.get::<Option<String>, _>("State")
                    .expect("State")
                    .unwrap_or_default(),
                r.get::<Option<String>, _>("Info").expect("Info"),
            )
        })
        .collect()
}

async fn global_status(conn: &mut mysql_async::Conn) -> std::collections::HashMap<String, u64> {
    let rows: Vec<(String, String)> = conn.query("SHOW GLOBAL STATUS").await.expect("status");
    rows.into_iter()
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect()
}

/// What an operator looks at agrees with what clients see: Prometheus metrics, the JSON API
/// and the page on the status listener, and MySQL's own process list and status counters;
/// `KILL` ends a dump session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operators_see_metrics_api_processlist_and_status() {
    use common::http::{get, get_json, samples};
    let seed = 31;
    let run = start_sim(seed, 300).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = common::app::app_config(&run, dir.path());
    cfg.status_listen = Some("127.0.0.1:0".parse().expect("addr"));
    let app = start_app_with(cfg).await;
    let http = app.status_addr().expect("status listener");
    let addr = app.local_addr();
    let want = finish_workload(&run, &app).await;
    let end = common::app::master_status(addr)
        .await
        .expect("master status");

    // A GTID replica with server id 4242 reads everything and stays connected.
    let replica = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let mut stream = replica
        .get_binlog_stream(BinlogStreamRequest::new(4242).with_gtid())
        .await
        .expect("binlog stream");
    let gtids = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reader = {
        let gtids = gtids.clone();
        tokio::spawn(async move {
            use futures_util::StreamExt;
            while let Some(ev) = stream.next().await {
                let Ok(ev) = ev else { return };
                if matches!(
                    ev.header().event_type(),
                    Ok(mysql_async::binlog::EventType::GTID_EVENT)
                ) {
                    gtids.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        })
    };
    let deadline = Instant::now() + WAIT;
    let replica_view = loop {
        let reps = get_json(http, "/api/v1/replicas").await;
        let mine = reps
            .as_array()
            .expect("array")
            .iter()
            .find(|r| r["server_id"] == 4242)
            .cloned();
        if let Some(r) = mine.filter(|r| r["caught_up"] == true && r["pos"] == end.position) {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "the replica never caught up: {reps}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(gtids.load(std::sync::atomic::Ordering::Relaxed), want.len());
    assert_eq!(replica_view["file"], end.file.as_str());
    assert_eq!(replica_view["gtid"], true);
    assert_eq!(replica_view["lag_bytes"], 0);
    assert_eq!(replica_view["user"], "root");
    assert!(replica_view["sent_bytes"].as_u64().expect("sent") > 0);
    let dump_conn = replica_view["conn"].as_u64().expect("conn id");

    let mut admin = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let binlogs: Vec<(String, u64, String)> =
        admin.query("SHOW BINARY LOGS").await.expect("binary logs");

    // Prometheus: the figures equal what SQL says.
    let text = get(http, "/metrics").await;
    assert_eq!(text.status, 200);
    assert!(
        text.content_type.starts_with("text/plain"),
        "{}",
        text.content_type
    );
    let m = samples(&text.body);
    let val = |k: &str| -> f64 {
        *m.get(k)
            .unwrap_or_else(|| panic!("no {k} in\n{}", text.body))
    };
    assert_eq!(
        val("tibinlog_binlog_transactions_total") as usize,
        want.len()
    );
    assert_eq!(val("tibinlog_binlog_last_gno") as usize, want.len());
    assert_eq!(val("tibinlog_binlog_files") as usize, binlogs.len());
    assert_eq!(
        val("tibinlog_binlog_bytes") as u64,
        binlogs.iter().map(|b| b.1).sum::<u64>()
    );
    let truth_rows: usize = want
        .iter()
        .map(|t| t["rows"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(val("tibinlog_capture_rows_total") as usize >= truth_rows);
    assert!(val("tibinlog_capture_scan_rows_total") >= 0.0);
    assert!(val("tibinlog_binlog_fsync_duration_seconds_count") >= 1.0);
    assert!(val("tibinlog_binlog_group_commit_transactions_sum") as usize >= want.len());
    assert!(val("tibinlog_sorter_read_rows_total") >= truth_rows as f64);
    let normal: f64 = m
        .iter()
        .filter(|(k, _)| {
            k.starts_with("tibinlog_capture_regions{") && k.contains("state=\"normal\"")
        })
        .map(|(_, v)| v)
        .sum();
    assert!(normal >= 1.0, "no initialized region in\n{}", text.body);
    let replica_key = format!("{{conn=\"{dump_conn}\",server_id=\"4242\"}}");
    assert_eq!(
        val(&format!("tibinlog_server_replica_lag_bytes{replica_key}")),
        0.0
    );
    assert_eq!(
        val(&format!("tibinlog_server_replica_binlog_pos{replica_key}")) as u64,
        end.position
    );
    assert_eq!(val("tibinlog_server_dump_sessions"), 1.0);
    assert!(val("tibinlog_server_sent_bytes_total") > 0.0);
    assert!(val("tibinlog_capture_checkpoint_lag_seconds") >= 0.0);
    assert!(text
        .body
        .contains("# TYPE tibinlog_binlog_fsync_duration_seconds histogram"));
    assert!(text
        .body
        .contains("# TYPE tibinlog_sorter_write_rows_total counter"));

    // The JSON API.
    let st = get_json(http, "/api/v1/status").await;
    assert_eq!(st["capture"]["state"], "running");
    assert_eq!(st["binlog"]["gtid_executed"], end.gtids.as_str());
    assert_eq!(st["binlog"]["end_file"], end.file.as_str());
    assert_eq!(st["binlog"]["end_pos"], end.position);
    assert_eq!(st["server"]["dump_sessions"], 1);
    assert_eq!(st["server_uuid"], app.server_uuid().to_string());
    let pct = st["capture"]["regions"]["initialized_percent"].as_f64();
    assert!(pct.is_some_and(|p| p > 0.0), "{st}");
    let bl = get_json(http, "/api/v1/binlogs").await;
    let files: Vec<(String, u64)> = bl["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["name"].as_str().expect("name").to_owned(),
                f["size"].as_u64().expect("size"),
            )
        })
        .collect();
    let sql_files: Vec<(String, u64)> = binlogs.iter().map(|b| (b.0.clone(), b.1)).collect();
    assert_eq!(files, sql_files);
    // The sampler records the lag once a second.
    let deadline = Instant::now() + WAIT;
    loop {
        let st = get_json(http, "/api/v1/status").await;
        if st["history"].as_array().is_some_and(|h| h.len() >= 2) {
            break;
        }
        assert!(Instant::now() < deadline, "no lag history: {st}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let page = get(http, "/").await;
    assert_eq!(page.status, 200);
    assert!(page.content_type.starts_with("text/html"));
    assert!(page.body.contains("/api/v1/") && page.body.contains("lag-chart"));
    assert_eq!(get(http, "/nothing").await.status, 404);

    // MySQL's own views.
    let list = processlist(&mut admin).await;
    let dump = list
        .iter()
        .find(|p| p.0 == dump_conn)
        .unwrap_or_else(|| panic!("dump session missing from {list:?}"));
    assert_eq!(
        (dump.1.as_str(), dump.2.as_str(), dump.3.as_str()),
        (
            "root",
            "Binlog Dump GTID",
            "Source has sent all binlog to replica; waiting for more updates"
        )
    );
    let me = list
        .iter()
        .find(|p| p.4.as_deref() == Some("SHOW PROCESSLIST"))
        .unwrap_or_else(|| panic!("own session missing from {list:?}"));
    assert_eq!(me.2, "Query");
    let info_rows: Vec<(u64, String)> = admin
        .query("SELECT ID, COMMAND FROM information_schema.PROCESSLIST ORDER BY ID")
        .await
        .expect("information_schema.PROCESSLIST");
    assert!(
        info_rows.contains(&(dump_conn, "Binlog Dump GTID".to_owned())),
        "{info_rows:?}"
    );

    let before = global_status(&mut admin).await;
    let _: Option<u64> = admin.query_first("SELECT 1").await.expect("select");
    let after = global_status(&mut admin).await;
    assert_eq!(after["Com_select"], before["Com_select"] + 1);
    assert_eq!(after["Com_show_status"], before["Com_show_status"] + 1);
    assert!(after["Bytes_sent"] > before["Bytes_sent"]);
    assert!(after["Bytes_received"] > before["Bytes_received"]);
    assert!(after["Questions"] >= before["Questions"] + 2);
    assert!(after["Threads_connected"] >= 2);
    assert!(after["Connections"] >= 3);
    assert!(after["Uptime"] < 3600);
    // Session scope (MySQL's default for SHOW STATUS) counts this connection only.
    let mut other = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("second session");
    async fn session_status(c: &mut mysql_async::Conn) -> std::collections::HashMap<String, u64> {
        let rows: Vec<(String, String)> = c.query("SHOW STATUS").await.expect("status");
        rows.into_iter()
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect()
    }
    let first = session_status(&mut other).await;
    for _ in 0..2 {
        let _: Option<u64> = other.query_first("SELECT 1").await.expect("select");
    }
    let mine = session_status(&mut other).await;
    let delta = |k: &str| mine[k] - first[k];
    assert_eq!(delta("Com_select"), 2, "this session's SELECTs only");
    assert_eq!(delta("Com_show_status"), 1);
    assert_eq!(
        delta("Questions"),
        3,
        "two SELECTs and the second SHOW STATUS"
    );
    assert!(delta("Bytes_received") > 0 && delta("Bytes_sent") > 0);
    assert!(
        mine["Bytes_sent"] < after["Bytes_sent"],
        "less than the whole server sent"
    );
    let global_now = global_status(&mut admin).await;
    assert!(global_now["Com_select"] >= after["Com_select"] + 2);
    assert!(
        mine["Com_select"] < global_now["Com_select"],
        "not the global count"
    );
    other.disconnect().await.expect("quit");

    // KILL ends the dump session: the replica's stream ends, the views forget it.
    admin
        .query_drop(format!("KILL {dump_conn}"))
        .await
        .expect("KILL");
    tokio::time::timeout(WAIT, reader)
        .await
        .expect("the killed stream ends")
        .expect("reader task");
    let deadline = Instant::now() + WAIT;
    while processlist(&mut admin)
        .await
        .iter()
        .any(|p| p.0 == dump_conn)
    {
        assert!(Instant::now() < deadline, "killed session still listed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        get_json(http, "/api/v1/replicas").await,
        serde_json::json!([])
    );
    let err = admin
        .query_drop(format!("KILL {dump_conn}"))
        .await
        .expect_err("no such thread");
    assert!(err.to_string().contains("1094"), "{err}");
    admin.disconnect().await.expect("disconnect");
    app.stop().await.expect("stop");
}

/// The MySQL listener and the MariaDB-flavoured one are one server: one connection-id space,
/// one process list, one KILL, one `max_connections`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_listeners_share_one_process_list_kill_and_max_connections() {
    let cluster = common::app::start_scripted(1, 47).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = common::app::app_config(&cluster.run, dir.path());
    cfg.mariadb_listen = Some("127.0.0.1:0".parse().expect("addr"));
    cfg.limits.max_connections = 3;
    let app = common::app::start_app_with(cfg).await;
    let maria_addr = app.mariadb_addr().expect("MariaDB listener");
    let mut mysql = mysql_async::Conn::new(common::app::opts(app.local_addr(), "root"))
        .await
        .expect("mysql");
    let mut maria = mysql_async::Conn::new(common::app::opts(maria_addr, "root"))
        .await
        .expect("mariadb");
    let mysql_id: u64 = mysql
        .query_first("SELECT CONNECTION_ID()")
        .await
        .expect("CONNECTION_ID()")
        .expect("one row");
    let maria_id: u64 = maria
        .query_first("SELECT CONNECTION_ID()")
        .await
        .expect("CONNECTION_ID()")
        .expect("one row");
    assert_ne!(mysql_id, maria_id, "one connection-id space");
    let ids: Vec<u64> = mysql
        .query("SELECT ID FROM information_schema.PROCESSLIST ORDER BY ID")
        .await
        .expect("process list");
    assert!(
        ids.contains(&mysql_id) && ids.contains(&maria_id),
        "{ids:?} lists both listeners' sessions"
    );
    // A third session fills max_connections across the two listeners.
    let third = mysql_async::Conn::new(common::app::opts(maria_addr, "root"))
        .await
        .expect("third");
    let refused = mysql_async::Conn::new(common::app::opts(app.local_addr(), "root")).await;
    match refused {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1040, "{e}"),
        other => panic!("a fourth session must get 1040, got {other:?}"),
    }
    drop(third);
    // KILL on one listener ends a session of the other.
    mysql
        .query_drop(format!("KILL {maria_id}"))
        .await
        .expect("kill the MariaDB listener's session");
    let after = maria.query_drop("SELECT 1").await;
    assert!(after.is_err(), "the killed session still answers");
}

//! `tibinlog check` against a replica of the server (MariaDB 10.11, or MySQL 8.0), replicating
//! the running workload (the whole DDL mix): checks during the workload report nothing; drift
//! written on the replica is reported row for row, `--repair --apply` removes it and the next
//! check passes; an interrupted check lets the replica go on; a target that is not a replica
//! needs `--at`, and bad credentials or addresses are clear errors.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use tibinlog::app::App;
use tibinlog::check::report::Report;
use tibinlog::check::CheckArgs;
use tibinlog::model::Ts;
use tibinlog::sim::cli::SimArgs;

use crate::common;
use crate::common::app::{master_status, max_commit_ts, wait_checkpoint, Sim};
use crate::common::demo::{fresh_seed, log_warnings, WAIT};

/// A replica the scenario drives, over TCP as root.
pub struct Replica {
    pub port: u16,
    /// MySQL 8.0 (else MariaDB): its statements to set up replication.
    pub mysql8: bool,
}

impl Replica {
    pub async fn conn(&self) -> mysql_async::Conn {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .pass(Some(""))
            .prefer_socket(false);
        mysql_async::Conn::new(opts)
            .await
            .expect("connect to the replica")
    }

    /// Its replication state from the source (`SHOW REPLICA STATUS`, either flavour's names).
    async fn status(&self) -> tibinlog::check::align::ReplicaState {
        let mut conn = self.conn().await;
        let rows = tibinlog::check::align::status_rows(&mut conn)
            .await
            .expect("SHOW REPLICA STATUS");
        let _ = conn.disconnect().await;
        tibinlog::check::align::state(rows.first().expect("replicating"))
    }

    /// One column of `SHOW REPLICA STATUS`.
    async fn status_field(&self, name: &str) -> String {
        let mut conn = self.conn().await;
        let rows = tibinlog::check::align::status_rows(&mut conn)
            .await
            .expect("SHOW REPLICA STATUS");
        let _ = conn.disconnect().await;
        rows.first()
            .and_then(|r| r.get(name))
            .cloned()
            .unwrap_or_default()
    }
}

fn args(source: std::net::SocketAddr, target_port: u16) -> CheckArgs {
    CheckArgs {
        source: source.to_string(),
        source_user: "root".into(),
        source_password: String::new(),
        target: format!("127.0.0.1:{target_port}"),
        target_user: "root".into(),
        target_password: String::new(),
        databases: vec!["wl".into()],
        tables: Vec::new(),
        chunk_rows: 40,
        threads: 3,
        at: None,
        repair: false,
        apply: false,
        json: None,
        max_listed: 10_000,
        status_addr: None,
    }
}

async fn check(args: &CheckArgs) -> Result<(Report, String), String> {
    let mut progress = Vec::new();
    let stop = tokio_util::sync::CancellationToken::new();
    let metrics = tibinlog::check::metrics::CheckMetrics::default();
    let watch = tibinlog::check::run::Watch::new(&mut progress, metrics.clone());
    let report = tibinlog::check::run::check(args, watch, &stop)
        .await
        .map_err(|e| e.to_string())?;
    // Its metrics show what its report does.
    let m = crate::common::http::samples(&metrics.render());
    let figure = |name: &str| {
        m.get(&format!("tibinlog_check_{name}"))
            .copied()
            .unwrap_or(-1.0)
    };
    assert_eq!(
        (
            figure("chunks_total") as u64,
            figure("rows_source_total") as u64,
            figure("rows_target_total") as u64,
            figure("differences_total") as u64,
            figure("tables_done") as usize,
            figure("aligned"),
        ),
        (
            report.chunks,
            report.rows_source,
            report.rows_target,
            report.differences,
            report.tables.len(),
            1.0,
        ),
        "metrics of the check"
    );
    let mut text = Vec::new();
    report.write_text(&mut text).expect("render");
    Ok((report, String::from_utf8_lossy(&text).into_owned()))
}

/// The simulated cluster with its workload running (JSON columns only with `json`: MariaDB's
/// replica cannot apply them), and the app serving it from before the workload's first DDL.
async fn live(seed: u64, dir: &std::path::Path, json: bool) -> (Sim, App) {
    log_warnings();
    let sim = common::app::start_sim_paused_with(SimArgs {
        stores: 2,
        regions_per_table: 2,
        rate: 60.0,
        txns: None,
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        progress_interval: Duration::from_secs(3600),
        no_json: !json,
        ..SimArgs::default()
    })
    .await;
    let lines = sim.truth.lines();
    let first: serde_json::Value = serde_json::from_str(&lines[0]).expect("truth json");
    let start_ts = Ts(first["start_ts"].as_u64().expect("start_ts") - 1);
    let mut cfg = tibinlog::app::AppConfig::new(
        vec![sim.handle.cluster().pd_url()],
        "127.0.0.1:0".parse().expect("addr"),
        dir,
    );
    cfg.start_ts = Some(start_ts);
    cfg.max_binlog_size = 256 << 10;
    cfg.progress_interval = Duration::from_secs(3600);
    let app = common::app::start_app_with(cfg).await;
    sim.handle.start_workload();
    (sim, app)
}

async fn sql(db: &Replica, statement: &str) {
    let mut conn = db.conn().await;
    conn.query_drop(statement)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
    let _ = conn.disconnect().await;
}

/// Waits until the replica has executed everything the app wrote.
async fn caught_up(db: &Replica, app: &App) {
    let end = master_status(app.local_addr()).await.expect("status");
    let deadline = Instant::now() + WAIT;
    loop {
        let s = db.status().await;
        assert!(s.last_sql_error.is_empty(), "replica error: {s:?}");
        if s.executed.file == end.file && s.executed.pos == end.position {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica stuck at {s:?}, end {end:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One injected difference: the table, the kind the report must give, the key (column and
/// value text) and the columns that differ.
type Expected = (
    String,
    &'static str,
    Vec<(String, Option<String>)>,
    Vec<String>,
);

/// The key of a row of `wl.t` chosen by `nth` in primary-key order: each key column's name
/// and value text.
async fn nth_key(conn: &mut mysql_async::Conn, t: &str, nth: usize) -> Option<Key> {
    let pk: Vec<String> = conn
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'wl' \
             AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (t,),
        )
        .await
        .expect("pk");
    if pk.is_empty() {
        return None;
    }
    let cols = pk
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let texts = pk
        .iter()
        .map(|c| format!("CAST(`{c}` AS CHAR)"))
        .collect::<Vec<_>>()
        .join(", ");
    let q = format!("SELECT {texts} FROM `wl`.`{t}` ORDER BY {cols} LIMIT 1 OFFSET {nth}");
    let row: mysql_async::Row = conn.query_first(q).await.expect("key")?;
    let values: Vec<Option<String>> = (0..pk.len()).map(|i| row.get(i).expect("cell")).collect();
    Some(pk.into_iter().zip(values).collect())
}

/// A key: each column's name and value text.
type Key = Vec<(String, Option<String>)>;

/// The WHERE condition that picks the row of `key`.
fn key_where(key: &Key) -> String {
    key.iter()
        .map(|(c, v)| match v {
            Some(v) => format!("CAST(`{c}` AS CHAR) = '{}'", v.replace('\'', "''")),
            None => format!("`{c}` IS NULL"),
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// Tables of `wl` with a column of `data_type` (and `extra` condition), as (table, column).
async fn columns_of(conn: &mut mysql_async::Conn, condition: &str) -> Vec<(String, String)> {
    conn.query(format!(
        "SELECT c.TABLE_NAME, c.COLUMN_NAME FROM information_schema.COLUMNS c JOIN \
         information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME) WHERE c.TABLE_SCHEMA = 'wl' \
         AND t.TABLE_TYPE = 'BASE TABLE' AND c.COLUMN_KEY <> 'PRI' AND c.EXTRA NOT LIKE \
         '%GENERATED%' AND {condition} ORDER BY 1, 2"
    ))
    .await
    .expect("columns")
}

/// Writes drift on the replica: one changed value per kind of column, a deleted row, an
/// inserted row, a changed row of a partitioned table, a dropped table. Returns what the
/// check must report, and the dropped table.
async fn inject_drift(db: &Replica) -> (Vec<Expected>, String) {
    let mut conn = db.conn().await;
    conn.query_drop("SET SESSION sql_mode = ''")
        .await
        .expect("sql_mode");
    let mut expected = Vec::new();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut nth = 0;
    let kinds = [
        ("DATA_TYPE = 'decimal'", "IF(`{c}` <=> 0, 1, 0)"),
        ("DATA_TYPE = 'datetime' AND DATETIME_PRECISION = 6", "IF(`{c}` <=> '2001-02-03 04:05:06.789012', '2002-01-01 00:00:00.000001', '2001-02-03 04:05:06.789012')"),
        ("DATA_TYPE = 'float'", "IF(`{c}` <=> 0.5, 0.25, 0.5)"),
        ("DATA_TYPE = 'varchar' AND CHARACTER_MAXIMUM_LENGTH >= 5", "IF(`{c}` <=> 'drift', 'other', 'drift')"),
        ("DATA_TYPE IN ('int', 'bigint') AND IS_NULLABLE = 'YES'", "IF(`{c}` IS NULL, 0, NULL)"),
        // MySQL's JSON only (MariaDB's replica gets no JSON columns).
        ("DATA_TYPE = 'json'", "IF(`{c}` <=> CAST('{\"drift\": 1}' AS JSON), CAST('{\"drift\": 2}' AS JSON), CAST('{\"drift\": 1}' AS JSON))"),
    ];
    for (condition, value) in kinds {
        let candidates = columns_of(&mut conn, condition).await;
        let Some((t, c, key)) = async {
            for (t, c) in candidates {
                if let Some(key) = nth_key(&mut conn, &t, nth).await {
                    return Some((t, c, key));
                }
            }
            None
        }
        .await
        else {
            eprintln!("no column where {condition}: that drift is not injected");
            continue;
        };
        nth += 1;
        let set = value.replace("{c}", &c);
        conn.query_drop(format!(
            "UPDATE `wl`.`{t}` SET `{c}` = {set} WHERE {}",
            key_where(&key)
        ))
        .await
        .expect("update");
        used.insert(t.clone());
        expected.push((format!("wl.{t}"), "changed", key, vec![c]));
    }
    // A deleted row, and a row of a partitioned table (deleted too).
    let partitioned: Vec<String> = conn
        .query(
            "SELECT DISTINCT TABLE_NAME FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = \
             'wl' AND PARTITION_NAME IS NOT NULL ORDER BY 1",
        )
        .await
        .expect("partitions");
    let tables: Vec<String> = conn
        .query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'wl' AND TABLE_TYPE = 'BASE TABLE' ORDER BY 1")
        .await
        .expect("tables");
    let plain: Vec<&String> = tables.iter().filter(|t| !partitioned.contains(t)).collect();
    for t in partitioned
        .iter()
        .take(1)
        .chain(plain.iter().copied().take(1))
    {
        let Some(key) = nth_key(&mut conn, t, nth).await else {
            continue;
        };
        nth += 1;
        conn.query_drop(format!("DELETE FROM `wl`.`{t}` WHERE {}", key_where(&key)))
            .await
            .expect("delete");
        used.insert(t.clone());
        expected.push((format!("wl.{t}"), "missing", key, vec![]));
    }
    // An inserted row: a copy of the first row of a table with a signed INT or BIGINT key
    // under a new key.
    for t in &tables {
        let Some(key) = nth_key(&mut conn, t, 0).await else {
            continue;
        };
        let [(pk, Some(v))] = key.as_slice() else {
            continue;
        };
        let (pk, v) = (pk.clone(), v.clone());
        let ty: Option<String> = conn
            .exec_first(
                "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'wl' AND \
                 TABLE_NAME = ? AND COLUMN_NAME = ?",
                (t, &pk),
            )
            .await
            .expect("type");
        let ty = ty.unwrap_or_default();
        if !(ty.starts_with("int") || ty.starts_with("bigint")) || ty.contains("unsigned") {
            continue;
        }
        let Ok(n) = v.parse::<i64>() else { continue };
        let fresh = n.wrapping_sub(1_000_000).min(-1_000_000);
        let cols: Vec<String> = conn
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'wl' AND \
                 TABLE_NAME = ? AND EXTRA NOT LIKE '%GENERATED%' AND COLUMN_NAME <> ? ORDER BY ORDINAL_POSITION",
                (t, &pk),
            )
            .await
            .expect("cols");
        let list = cols
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let (list, sel) = if cols.is_empty() {
            (format!("`{pk}`"), format!("{fresh}"))
        } else {
            (format!("`{pk}`, {list}"), format!("{fresh}, {list}"))
        };
        let ins = format!(
            "INSERT INTO `wl`.`{t}` ({list}) SELECT {sel} FROM `wl`.`{t}` WHERE `{pk}` = {n}"
        );
        if conn.query_drop(&ins).await.is_err() {
            continue; // a unique index refuses the copy: another table
        }
        expected.push((
            format!("wl.{t}"),
            "extra",
            vec![(pk, Some(fresh.to_string()))],
            vec![],
        ));
        used.insert(t.clone());
        break;
    }
    let dropped = tables
        .iter()
        .find(|t| !used.contains(*t))
        .expect("a table left to drop")
        .clone();
    conn.query_drop(format!("DROP TABLE `wl`.`{dropped}`"))
        .await
        .expect("drop");
    let _ = conn.disconnect().await;
    (expected, format!("wl.{dropped}"))
}

/// Deletes one row of the first table with a key: (table, key).
async fn inject_one_delete(db: &Replica) -> ((String, &'static str), Key) {
    let mut conn = db.conn().await;
    let tables: Vec<String> = conn
        .query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'wl' AND TABLE_TYPE = 'BASE TABLE' ORDER BY 1")
        .await
        .expect("tables");
    for t in tables {
        if let Some(key) = nth_key(&mut conn, &t, 0).await {
            conn.query_drop(format!("DELETE FROM `wl`.`{t}` WHERE {}", key_where(&key)))
                .await
                .expect("delete");
            return ((format!("wl.{t}"), "missing"), key);
        }
    }
    panic!("no table with a row and a key");
}

/// A check interrupted (SIGTERM) while it waits for the replica to reach its position exits
/// with 2 and leaves the replica's applier running, with no UNTIL condition left.
async fn interrupted_check_lets_the_replica_go_on(db: &Replica, base: &CheckArgs, seed: u64) {
    // Without its I/O thread the replica cannot reach a newer position: the check waits.
    sql(db, "STOP SLAVE IO_THREAD").await;
    let read = db.status_field("Read_Source_Log_Pos").await;
    let read = match read.is_empty() {
        true => db.status_field("Read_Master_Log_Pos").await,
        false => read,
    };
    let read: u64 = read.parse().expect("read position");
    let deadline = Instant::now() + WAIT;
    loop {
        let source = mysql_async::Conn::new(
            mysql_async::Opts::from_url(&format!("mysql://root@{}", base.source)).expect("url"),
        );
        let mut source = source.await.expect("connect");
        let row: mysql_async::Row = source
            .query_first("SHOW MASTER STATUS")
            .await
            .expect("status")
            .expect("row");
        let pos: u64 = row.get(1).expect("pos");
        let _ = source.disconnect().await;
        if pos != read {
            break;
        }
        assert!(Instant::now() < deadline, "the workload writes on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let mut child = command(base, &["--status-addr", &status.to_string()])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run tibinlog check");
    // Waiting: the applier runs with the check's UNTIL condition.
    let deadline = Instant::now() + WAIT;
    loop {
        let until = db.status_field("Until_Condition").await;
        if until != "None" {
            // Not aligned yet, on its metrics.
            let m = crate::common::http::get(status, "/metrics").await;
            let aligned = crate::common::http::samples(&m.body)
                .get("tibinlog_check_aligned")
                .copied();
            assert_eq!(aligned, Some(0.0), "{}", m.body);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the check never ran the replica UNTIL"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = tokio::task::spawn_blocking(move || {
        let status = child.wait().expect("wait");
        let mut err = String::new();
        use std::io::Read as _;
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut err)
            .expect("stderr");
        (status, err)
    })
    .await
    .expect("join");
    assert_eq!(out.0.code(), Some(2), "{}", out.1);
    assert!(out.1.contains("interrupted"), "{}", out.1);
    let (running, until) = (
        db.status().await.sql_running,
        db.status_field("Until_Condition").await,
    );
    assert_eq!(
        (running, until.as_str()),
        (true, "None"),
        "seed {seed}: the replica goes on after an interrupted check"
    );
    sql(db, "START SLAVE IO_THREAD").await;
}

fn found(report: &Report) -> Vec<Expected> {
    let mut out: Vec<Expected> = report
        .tables
        .iter()
        .flat_map(|t| {
            t.rows.iter().map(|r| {
                (
                    t.table.clone(),
                    r.kind,
                    r.key.clone(),
                    r.columns.iter().map(|c| c.column.clone()).collect(),
                )
            })
        })
        .collect();
    out.sort();
    out
}

/// The whole scenario (see the module's header) against `db`, a fresh server that is not
/// replicating yet: MariaDB replicates by file and position, MySQL 8.0 by GTID
/// auto-positioning (and with the workload's JSON columns, which MariaDB cannot apply).
pub async fn scenario(db: &Replica, test: &str) {
    let started = Instant::now();
    let seed = fresh_seed(test);
    let dir = tempfile::tempdir().expect("tempdir");
    let (sim, app) = live(seed, dir.path(), db.mysql8).await;
    let port = app.local_addr().port();
    let setup = match db.mysql8 {
        true => format!(
            "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={port}, \
             SOURCE_USER='root', SOURCE_PASSWORD='', SOURCE_AUTO_POSITION=1, \
             GET_SOURCE_PUBLIC_KEY=1; START REPLICA"
        ),
        false => format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='root', \
             MASTER_PASSWORD='', MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, \
             MASTER_USE_GTID=no; START SLAVE"
        ),
    };
    sql(db, &setup).await;
    let base = args(app.local_addr(), db.port);
    let rows = checks_under_the_workload(db, &base, &sim, seed).await;
    interrupted_check_lets_the_replica_go_on(db, &base, seed).await;

    sim.handle.end_workload();
    tokio::time::timeout(WAIT, sim.handle.workload_done())
        .await
        .expect("workload ends");
    wait_checkpoint(&app, max_commit_ts(&sim.truth.lines())).await;
    caught_up(db, &app).await;
    let drift = drift_found_and_repaired(db, &base, &app, seed).await;
    let at = not_a_replica_needs_at(db, &base, &app, seed).await;
    errors_are_clear(&base, &at).await;
    command_line(db, &base, &at, dir.path()).await;
    eprintln!(
        "seed {seed}: 20 checks under the workload ({rows} rows in the last), {drift} \
         differences found and repaired, in {:?}",
        started.elapsed()
    );
    app.stop().await.expect("app stops");
    sim.handle.shutdown().await.expect("sim shutdown");
}

/// Twenty checks while the workload runs: each holds the replica at a position and finds
/// nothing. Returns the rows of the last.
async fn checks_under_the_workload(db: &Replica, base: &CheckArgs, sim: &Sim, seed: u64) -> u64 {
    let mut points = Vec::new();
    let mut rows = 0;
    for i in 0..20 {
        let (report, text) = check(base)
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: check {i}: {e}"));
        if !report.equal {
            // The DDLs around the point, to tell a catalog problem from a data one.
            let ddls: Vec<String> = sim
                .truth
                .lines()
                .into_iter()
                .filter(|l| l.contains("\"ddl\":\""))
                .map(|l| l.chars().take(240).collect())
                .collect();
            panic!(
                "seed {seed}: check {i} of an exact replica found differences:\n{text}\nDDL:\n{}",
                ddls.join("\n")
            );
        }
        assert!(report.tables.len() > 1, "seed {seed}: {text}");
        rows = report.rows_source;
        assert_eq!(report.rows_source, report.rows_target, "{text}");
        points.push(report.point.position.clone());
        assert_eq!(
            sim.handle.failure(),
            None,
            "seed {seed}: the workload failed"
        );
    }
    let moved = points.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        moved >= 10,
        "seed {seed}: the checks ran at moving positions: {points:?}"
    );
    let s = db.status().await;
    assert_eq!(
        (s.io_running, s.sql_running),
        (true, true),
        "seed {seed}: the replica runs on after the checks: {s:?}"
    );
    rows
}

/// Drift written on the replica is reported exactly; `--repair --apply` removes it and the
/// next check passes. Returns the differences injected.
async fn drift_found_and_repaired(db: &Replica, base: &CheckArgs, app: &App, seed: u64) -> usize {
    let (mut expected, dropped) = inject_drift(db).await;
    expected.sort();
    assert!(
        expected.len() >= 6,
        "seed {seed}: drift injected: {expected:?}"
    );
    let (report, text) = check(base).await.expect("check with drift");
    eprintln!("{text}");
    assert!(!report.equal, "{text}");
    assert_eq!(
        found(&report),
        expected,
        "seed {seed}: the differences reported:\n{text}"
    );
    let shapes: Vec<(String, Vec<String>)> = report
        .tables
        .iter()
        .filter(|t| !t.shape.is_empty())
        .map(|t| (t.table.clone(), t.shape.clone()))
        .collect();
    assert_eq!(
        shapes,
        vec![(
            dropped.clone(),
            vec!["table missing on the target".to_owned()]
        )],
        "seed {seed}: {text}"
    );
    let mut repair = base.clone();
    repair.repair = true;
    repair.apply = true;
    let (fixed, text) = check(&repair).await.expect("repair");
    eprintln!("{text}");
    assert!(
        fixed.repaired as usize > expected.len(),
        "seed {seed}: {text}"
    );
    let (after, text) = check(base).await.expect("check after the repair");
    eprintln!("{text}");
    assert!(after.equal, "seed {seed}: after the repair:\n{text}");
    caught_up(db, app).await;
    let s = db.status().await;
    assert!(s.sql_running, "seed {seed}: {s:?}");
    expected.len() + 1
}

/// Once the replica replicates no more, a check needs `--at`: refused without it, equal at the
/// position it stopped at, refused at a position that is no transaction's end. Returns the
/// arguments with that `--at`.
async fn not_a_replica_needs_at(db: &Replica, base: &CheckArgs, app: &App, seed: u64) -> CheckArgs {
    sql(db, "STOP SLAVE; RESET SLAVE ALL").await;
    let err = check(base).await.expect_err("refused");
    assert!(
        err.contains("does not replicate from the source") && err.contains("--at"),
        "{err}"
    );
    let end = master_status(app.local_addr()).await.expect("status");
    let mut at = base.clone();
    at.at = Some(format!("{}:{}", end.file, end.position + 1));
    let err = check(&at).await.expect_err("not a position");
    assert!(err.contains("no TiDB timestamp"), "{err}");
    // The GTID set it has applied names the same position; a set with a gap names none.
    let mut by_gtids = base.clone();
    by_gtids.at = Some(end.gtids.clone());
    let (report, text) = check(&by_gtids).await.expect("check --at GTIDs");
    assert!(report.equal, "seed {seed}: --at {}:\n{text}", end.gtids);
    assert_eq!(
        report.point.position.to_string(),
        format!("{}:{}", end.file, end.position)
    );
    let (uuid, _) = end.gtids.split_once(':').expect("uuid:1-N");
    by_gtids.at = Some(format!("{uuid}:1-2:4"));
    let err = check(&by_gtids).await.expect_err("a set with a gap");
    assert!(err.contains("no single position"), "{err}");
    at.at = Some(format!("{}:{}", end.file, end.position));
    let (report, text) = check(&at).await.expect("check --at");
    assert!(report.equal, "seed {seed}: --at the end:\n{text}");
    at
}

/// A wrong password, an unreachable target and a table on neither side are clear messages.
async fn errors_are_clear(base: &CheckArgs, at: &CheckArgs) {
    let mut wrong = base.clone();
    wrong.target_password = "wrong".into();
    let err = check(&wrong).await.expect_err("bad password");
    assert!(
        err.starts_with("target 127.0.0.1:") && err.contains("Access denied"),
        "{err}"
    );
    let mut nowhere = base.clone();
    nowhere.target = "127.0.0.1:1".into();
    let err = check(&nowhere).await.expect_err("unreachable");
    assert!(err.starts_with("target 127.0.0.1:1:"), "{err}");
    let mut missing = at.clone();
    missing.tables = vec!["wl.no_such_table".into()];
    missing.databases = Vec::new();
    let (report, text) = check(&missing).await.expect("check of a missing table");
    assert!(
        !report.equal && text.contains("wl.no_such_table: table on neither side"),
        "{text}"
    );
}

/// `tibinlog check` of database `wl` between `base`'s sides, with `extra` arguments.
fn command(base: &CheckArgs, extra: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_tibinlog"));
    c.args(["check", "--source", &base.source, "--target", &base.target])
        .args(["--databases", "wl"])
        .args(extra);
    c
}

/// The command line's exit statuses (2 refused, 0 equal, 1 different) and its JSON report.
async fn command_line(db: &Replica, base: &CheckArgs, at: &CheckArgs, dir: &std::path::Path) {
    let run = |extra: &[&str]| command(base, extra).output().expect("run tibinlog check");
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--at"),
        "{out:?}"
    );
    let at_end = at.at.clone().expect("--at");
    let out = run(&["--at", &at_end]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let ((table, _), _) = inject_one_delete(db).await;
    let json = dir.join("report.json");
    let out = run(&[
        "--at",
        &at_end,
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("{table}: missing on the target")),
        "{stdout}"
    );
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("json");
    assert_eq!(written["differences"], 1, "{written}");
    assert_eq!(written["equal"], false, "{written}");
}

//! Alibaba Canal 1.1.7 (`tests/peers/canal/pom.xml`) as a real consumer of the whole product:
//! the simulated cluster's seeded workload with its whole DDL mix (CREATE TABLE, ADD/DROP/MODIFY
//! COLUMN, ADD INDEX, TRUNCATE, multi-table RENAME, `CREATE TABLES` batches, TRUNCATE/EXCHANGE
//! PARTITION) → changefeed → binlog → server, read by two embedded Canal instances at once
//! (`tests/peers/canal/CanalTail.java`, Canal's own server and client API in one JVM each), one
//! **by binlog position** and one **by GTID** (`gtidon`). Both run as Canal ships by default,
//! with its table-meta store (tsdb) on: at its first start Canal snapshots every table's meta
//! from our server (`SHOW CREATE TABLE`) at its start position, then keeps it by parsing every
//! DDL statement of the binlog with its own SQL parser (a statement it cannot parse stops it),
//! storing both in a loopback MariaDB; with FULL row metadata it also checks each TABLE_MAP's
//! column names, signedness and nullability against that meta. (With tsdb off Canal reads a
//! table's meta when it meets the table, so a reader that lags across two DDLs on one table
//! decodes with the wrong columns, against any master: Canal's own limit, why it has the tsdb.)
//!
//! Both start at a known position (`SHOW MASTER STATUS` with the workload paused a third of the
//! way), and both are stopped mid-stream and started again from the cursor they stored: the
//! position instance stopped (SIGTERM) with the workload paused once it has caught up, the GTID
//! instance killed (SIGKILL) under the running workload. The checks, per instance: transaction by transaction Canal's rows equal the truth
//! log's (`tests/common/peer_check.rs`), nothing lost or doubled across the restart, every
//! table's final state equal, every DDL statement handed out as DDL with its text.
//!
//! The workload's seed comes from the clock (printed); `TIBINLOG_PEER_SEED=n` replays one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;
use tibinlog::app::AppConfig;
use tibinlog::model::Ts;
use tibinlog::server::users::{Privileges, User, Users};
use tibinlog::sim::cli::SimArgs;
use tibinlog_protocol::wire::auth::Credential;

use crate::common::app::{
    dense_set, master_status, max_commit_ts, pause_and_settle, start_app_with,
    start_sim_paused_with, truth_after, wait_checkpoint, wait_until, MasterStatus, Run,
};
use crate::common::canal::{self, Canal, Installation};
use crate::common::mariadb::MariaDb;
use crate::common::peer;
use crate::common::peer_check;

/// Workload transactions per run, and their pace (about 15 s of workload).
const TXNS: u64 = 900;
const RATE: f64 = 60.0;
/// Upper bound of any wait on the pipeline or on Canal.
const WAIT: Duration = Duration::from_secs(240);
/// Canal's account (its driver answers an empty password with a scramble, which MySQL refuses
/// for an account without a password, so Canal is always given one).
const USER: &str = "canal";
const PASSWORD: &str = "canal";
/// What Canal logs once it has its start position (and, with tsdb, the table meta there).
const POSITIONED: &str = "find start position successfully";

/// One Canal instance of the run: its arguments, its two output files (before and after the
/// restart) and the running process.
struct Instance {
    name: &'static str,
    args: Vec<String>,
    outs: [PathBuf; 2],
    errs: [PathBuf; 2],
    canal: Option<Canal>,
}

impl Instance {
    fn new(name: &'static str, dir: &Path, args: Vec<String>) -> Instance {
        let f = |s: &str| dir.join(format!("{name}-{s}"));
        Instance {
            name,
            args,
            outs: [f("out1.jsonl"), f("out2.jsonl")],
            errs: [f("err1.log"), f("err2.log")],
            canal: None,
        }
    }

    /// Starts run `i` (0 or 1) and waits until Canal has positioned itself.
    async fn start(&mut self, install: &Installation, i: usize) {
        let mut c = canal::start(install, &self.args, &self.outs[i], &self.errs[i]).await;
        c.wait_for_log(POSITIONED, "find its start position").await;
        self.canal = Some(c);
    }

    async fn stop(&mut self) {
        let c = self.canal.take().expect("running");
        let st = c.stop().await;
        eprintln!("canal peer: {} stopped ({st})", self.name);
    }

    async fn kill(&mut self) {
        let c = self.canal.take().expect("running");
        let st = c.kill().await;
        eprintln!("canal peer: {} killed ({st})", self.name);
    }

    fn output(&self) -> Vec<Vec<Json>> {
        canal::read_runs(&[&self.outs[0], &self.outs[1]])
    }

    /// Waits until Canal has handed out `n` whole transactions.
    async fn wait_committed(&mut self, seed: u64, n: usize) {
        let outs = self.outs.clone();
        let what = format!("seed {seed}: {} catching up", self.name);
        let c = self.canal.as_mut().expect("running");
        peer::wait_until(c, &what, std::time::Instant::now() + WAIT, || {
            let have = canal::committed(&canal::read_runs(&[&outs[0], &outs[1]]));
            (have >= n)
                .then_some(())
                .ok_or_else(|| format!("handed out {have} of {n} transactions"))
        })
        .await;
    }

    /// Canal's errors: its parser logs a failed event with ERROR and retries from the last
    /// position, so a run can end complete and still have failed on the way.
    fn assert_clean_log(&self) {
        for p in &self.errs {
            let log = std::fs::read_to_string(p).unwrap_or_default();
            let bad: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
            assert!(
                bad.is_empty(),
                "{}: Canal logged errors in {}:\n{}\n--- log tail ---\n{}",
                self.name,
                p.display(),
                bad[..bad.len().min(10)].join("\n"),
                log.lines().rev().take(80).collect::<Vec<_>>().join("\n")
            );
        }
    }

    /// Compares the output with the truth log from `start` on; prints the figures.
    fn verify(&self, seed: u64, truth: &[Json], start: usize) {
        self.assert_clean_log();
        let out = self.output();
        let ddl = canal::ddl(&out);
        for d in &ddl {
            assert_ne!(
                d["type"], "QUERY",
                "{}: DDL Canal did not classify: {d}",
                self.name
            );
        }
        let texts: std::collections::BTreeSet<&str> =
            ddl.iter().filter_map(|d| d["sql"].as_str()).collect();
        let seen = peer_check::verify(
            seed,
            self.name,
            truth,
            start,
            canal::canon,
            canal::transactions(&out),
            |q| texts.contains(q),
        );
        assert!(
            seen.ddl_unprinted.is_empty(),
            "seed {seed}: {}: DDL Canal did not hand out: {:?}",
            self.name,
            seen.ddl_unprinted
        );
        eprintln!(
            "canal peer: seed {seed}: {}: from GNO {} on, {} transactions ({} rows) and {} DDL \
             statements compared",
            self.name,
            start + 1,
            seen.txns,
            seen.rows,
            seen.ddl
        );
    }
}

/// The start arguments of both instances at `at` (`tsdb_port`: the MariaDB of their table-meta
/// stores, one database each).
fn instances(dir: &Path, port: u16, at: &MasterStatus, tsdb_port: u16) -> [Instance; 2] {
    // Canal finds the table-meta snapshot by time: every event before the start is older.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    let common = |name: &str, slave_id: u32| {
        vec![
            "host=127.0.0.1".to_owned(),
            format!("port={port}"),
            format!("user={USER}"),
            format!("password={PASSWORD}"),
            format!("data={}", dir.join(name).display()),
            format!("slaveId={slave_id}"),
            format!("file={}", at.file),
            format!("pos={}", at.position),
            format!("timestamp={now_ms}"),
            format!(
                "tsdb=jdbc:mysql://127.0.0.1:{tsdb_port}/{}?useUnicode=true",
                tsdb_db(name)
            ),
            "tsdbUser=root".to_owned(),
        ]
    };
    let mut by_gtid = common("canal-gtid", 1102);
    by_gtid.push(format!("gtid={}", at.gtids));
    [
        Instance::new("canal-by-position", dir, common("canal-position", 1101)),
        Instance::new("canal-by-gtid", dir, by_gtid),
    ]
}

/// The tsdb database of the instance whose data directory is `name`.
fn tsdb_db(name: &str) -> String {
    name.replace('-', "_") + "_tsdb"
}

/// Root without a password (the test's own queries) and Canal's account.
fn users() -> Arc<Users> {
    let user = |name: &str, password: &str| User {
        name: name.to_owned(),
        credential: Credential::Password(password.as_bytes().to_vec()),
        privileges: Privileges::ALL,
    };
    Arc::new(Users::new([user("root", ""), user(USER, PASSWORD)]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn canal_follows_the_workload_by_position_and_by_gtid() {
    let Some(install) = canal::installation() else {
        return;
    };
    let Some((store, store_port)) = MariaDb::start_tcp() else {
        return;
    };
    for name in ["canal-position", "canal-gtid"] {
        store.sql(&format!("CREATE DATABASE {}", tsdb_db(name)));
    }
    let seed = crate::common::demo::fresh_seed("canal peer");
    let sim = start_sim_paused_with(SimArgs {
        stores: 2,
        regions_per_table: 2,
        rate: RATE,
        txns: Some(TXNS),
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    })
    .await;
    let first: Json = serde_json::from_str(&sim.truth.lines()[0]).expect("truth json");
    let start_ts = Ts(first["start_ts"].as_u64().expect("start_ts") - 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = AppConfig::new(
        vec![sim.handle.cluster().pd_url()],
        "127.0.0.1:0".parse().expect("addr"),
        dir.path().join("data"),
    );
    cfg.start_ts = Some(start_ts);
    cfg.max_binlog_size = 256 << 10;
    cfg.progress_interval = Duration::from_secs(3600);
    cfg.users = users();
    let app = start_app_with(cfg).await;
    let addr = app.local_addr();
    let run = Run {
        sim: sim.handle,
        truth: sim.truth,
        start_ts,
    };

    // Both instances start a third of the way in, the workload held back meanwhile.
    run.sim.start_workload();
    wait_until("a third of the workload", || {
        run.truth.lines().len() as u64 >= TXNS / 3
    })
    .await;
    let before = pause_and_settle(&run, &app).await;
    let at = master_status(addr).await.expect("SHOW MASTER STATUS");
    let [mut by_pos, mut by_gtid] = instances(dir.path(), addr.port(), &at, store_port);
    by_pos.start(&install, 0).await;
    by_gtid.start(&install, 0).await;
    run.sim.start_workload();

    // The position instance restarts with the workload paused, once it has caught up.
    wait_until("half of the workload", || {
        run.truth.lines().len() as u64 >= TXNS / 2
    })
    .await;
    let now = pause_and_settle(&run, &app).await;
    let rows_txns = |t: &[Json]| t.iter().filter(|t| t["ddl"].is_null()).count();
    by_pos
        .wait_committed(seed, rows_txns(&now[before.len()..]))
        .await;
    by_pos.stop().await;
    by_pos.start(&install, 1).await;
    run.sim.start_workload();

    // The GTID instance is killed (SIGKILL) under the running workload and started again.
    wait_until("two thirds of the workload", || {
        run.truth.lines().len() as u64 >= 2 * TXNS / 3
    })
    .await;
    by_gtid.kill().await;
    by_gtid.start(&install, 1).await;

    tokio::time::timeout(WAIT, run.sim.workload_done())
        .await
        .expect("workload finishes");
    assert_eq!(run.sim.failure(), None, "seed {seed}: the workload failed");
    let lines = run.truth.lines();
    wait_checkpoint(&app, max_commit_ts(&lines)).await;
    let truth = truth_after(&lines, start_ts);
    let want = rows_txns(&truth[before.len()..]);
    for i in [&mut by_pos, &mut by_gtid] {
        i.wait_committed(seed, want).await;
        i.stop().await;
        i.verify(seed, &truth, before.len());
    }
    crate::common::app::assert_all_answered(&app, "Canal");
    app.stop().await.expect("app stops");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// What Canal without tsdb says about the row written before the DROP COLUMN (3 columns in the
/// binlog, 2 in the table's meta of now).
const STALE_META: &str = "column size is not match for table:test.t,3 vs 2";

/// Canal with its tsdb off reads a table's meta when it meets the table: started before a DROP
/// COLUMN that the master has already run, it decodes the older row with the newer meta and
/// stops on it. The same steps against a MariaDB master and against tibinlog fail the same
/// way — Canal's own limit (why it has the tsdb), not the source's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canal_without_tsdb_stops_behind_a_drop_column_against_mariadb_too() {
    use tibinlog::sim::tidb::{types as ty, ColumnDef, Ddl};
    use tibinlog::tidb::schema::mysql;
    use tibinlog_protocol::value::Value;

    let Some(install) = canal::installation() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");

    // MariaDB 10.11 as the master.
    let Some((maria, maria_port)) =
        MariaDb::start_tcp_with(&["--log-bin=mariadb-bin", "--binlog-format=ROW"])
    else {
        return;
    };
    maria.sql(&format!(
        "CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; \
         CREATE USER '{USER}'@'localhost' IDENTIFIED BY '{PASSWORD}'; \
         GRANT ALL ON *.* TO '{USER}'@'%'; GRANT ALL ON *.* TO '{USER}'@'localhost'; \
         CREATE DATABASE test; \
         CREATE TABLE test.t (id bigint NOT NULL PRIMARY KEY, v varchar(20), n int DEFAULT 42)"
    ));
    let status = maria.query("SHOW MASTER STATUS");
    let cols: Vec<&str> = status.split('\t').collect();
    let (file, pos) = (cols[0].to_owned(), cols[1].trim().to_owned());
    maria.sql(
        "INSERT INTO test.t VALUES (1, 'v', 7); ALTER TABLE test.t DROP COLUMN n; \
         INSERT INTO test.t VALUES (2, 'w')",
    );
    let maria_log =
        canal_behind_a_drop_column(&install, dir.path(), "mariadb", maria_port, &file, &pos).await;
    drop(maria);

    // tibinlog as the master: the same steps on the simulated cluster.
    let cluster = crate::common::app::start_scripted(1, 40).await;
    cluster.ddl(Ddl::CreateTable {
        db: "test".into(),
        table: crate::common::sim::small_table("t", None),
    });
    cluster.ddl(Ddl::AddColumn {
        db: "test".into(),
        table: "t".into(),
        column: ColumnDef::new("n", ty::int(mysql::TYPE_LONG, false)).default(Value::Int(42)),
    });
    let mut cfg = crate::common::app::app_config(&cluster.run, &dir.path().join("data"));
    cfg.users = users();
    let app = start_app_with(cfg).await;
    let addr = app.local_addr();
    let uuid = app.server_uuid().to_string();
    let at = status_with(addr, &dense_set(&uuid, 2)).await;
    cluster.txn(|t| {
        t.insert(
            "test",
            "t",
            &[Value::Int(1), Value::Bytes(b"v".to_vec()), Value::Int(7)],
        )
        .expect("insert")
    });
    cluster.ddl(Ddl::DropColumn {
        db: "test".into(),
        table: "t".into(),
        column: "n".into(),
    });
    cluster.txn(|t| {
        t.insert("test", "t", &[Value::Int(2), Value::Bytes(b"w".to_vec())])
            .expect("insert")
    });
    status_with(addr, &dense_set(&uuid, 5)).await;
    let ours = canal_behind_a_drop_column(
        &install,
        dir.path(),
        "tibinlog",
        addr.port(),
        &at.file,
        &at.position.to_string(),
    )
    .await;
    eprintln!(
        "canal peer: without tsdb, behind a DROP COLUMN: MariaDB and tibinlog both: {STALE_META}"
    );
    assert!(maria_log.contains(STALE_META) && ours.contains(STALE_META));
    crate::common::app::assert_all_answered(&app, "Canal");
    app.stop().await.expect("app stops");
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

/// `SHOW MASTER STATUS` once the executed set is `gtids`.
async fn status_with(addr: std::net::SocketAddr, gtids: &str) -> MasterStatus {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let st = master_status(addr).await.expect("SHOW MASTER STATUS");
        if st.gtids == gtids {
            return st;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the binlog holds {} instead of {gtids}",
            st.gtids
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs Canal with its tsdb off from `file`:`pos` of the master on `port` until it fails on
/// the row before the DROP COLUMN; returns its log. Canal must hand out no row meanwhile.
async fn canal_behind_a_drop_column(
    install: &Installation,
    dir: &Path,
    name: &str,
    port: u16,
    file: &str,
    pos: &str,
) -> String {
    let args = vec![
        "host=127.0.0.1".to_owned(),
        format!("port={port}"),
        format!("user={USER}"),
        format!("password={PASSWORD}"),
        format!("data={}", dir.join(format!("canal-{name}")).display()),
        "slaveId=1201".to_owned(),
        format!("file={file}"),
        format!("pos={pos}"),
    ];
    let (out, err) = (
        dir.join(format!("{name}-out.jsonl")),
        dir.join(format!("{name}-err.log")),
    );
    let mut c = canal::start(install, &args, &out, &err).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let log = std::fs::read_to_string(&err).unwrap_or_default();
        if log.contains(STALE_META) {
            let rows = canal::committed(&canal::read_runs(&[&out]));
            assert_eq!(rows, 0, "{name}: Canal handed out rows it could not decode");
            c.stop().await;
            return log;
        }
        c.assert_running(name);
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: Canal without tsdb did not stop on the row before the DROP COLUMN; log:\n{}",
            c.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn canal_values_read_as_mysql_text() {
    use canal::{canal_text, canon};
    assert_eq!(
        canal_text("datetime(3)", "2020-01-01 00:00:00"),
        "2020-01-01 00:00:00.000"
    );
    assert_eq!(canal_text("blob", "0xDEADBEEF"), "0xDEADBEEF");
    assert_eq!(canal_text("varbinary(8)", "0x6162"), "ab");
    assert_eq!(canon("binary(4)", Some("ab")).as_deref(), Some("ab\0\0"));
    assert_eq!(canon("binary(2)", Some("0xFF")).as_deref(), Some("0xFF00"));
    assert_eq!(canal_text("enum('a,b','c''d')", "2"), "c'd");
    assert_eq!(canal_text("set('a','b','c','d')", "14"), "b,c,d");
    assert_eq!(canal_text("bit(12)", "3659"), "0x0E4B");
    assert_eq!(canal_text("bit(1)", "1"), "0x01");
    assert_eq!(canal_text("decimal(12,3)", "74215241.0"), "74215241.000");
    assert_eq!(canal_text("decimal(20,6)", "-0.000001"), "-0.000001");
    assert_eq!(
        canon("double", Some("1.5E10")).as_deref(),
        Some("15000000000")
    );
    assert_eq!(
        canon("json", Some(r#"{"b": 1, "a": [null]}"#)).as_deref(),
        Some(r#"{"a":[null],"b":1}"#)
    );
}

//! MySQL 8.0.31 replicas of tibinlog, seeded the way a user seeds one: `mariadb-dump
//! --single-transaction --master-data=2` of the running server (the dump tool this machine
//! offers; Oracle's is in no registry reachable here), loaded, then `CHANGE REPLICATION SOURCE
//! TO` the dump's coordinates. One replica follows by GTID auto-position (`gtid_purged` set to
//! the dump's GTIDs) and is killed with SIGKILL once and started again (relay-log recovery);
//! the other follows by file and position and is stopped and started mid-stream. Both apply
//! with `replica_parallel_workers=4`, with the whole DDL mix of the workload (JSON columns
//! included: MySQL reads its binary JSON) after the dump point. At the end every table equals
//! the simulator's truth value for value, `SHOW REPLICA STATUS` holds no error, and MySQL's
//! own reader accepts every event of the relay logs (`SHOW RELAYLOG EVENTS`). Last, a replica
//! whose GTID set is ahead of the binlog is refused with error 1236.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use serde_json::Value as Json;

use crate::common::app::{dense_set, master_status};
use crate::common::demo::{dump, dump_coordinate, load, run_demo, Demo, WAIT};
use crate::common::mariadb::require_tool;
use crate::common::mysql8::{Mysql8, ReplicaStatus};
use crate::common::replica::{assert_replica_equals_model, Model};

const BY_GTID_ID: u32 = 2;
const BY_POS_ID: u32 = 3;

/// Options of both replicas: parallel appliers, relay logs kept for `SHOW RELAYLOG EVENTS`.
const REPLICA_OPTS: [&str; 3] = [
    "--replica-parallel-workers=4",
    "--replica-preserve-commit-order=ON",
    "--relay-log-purge=OFF",
];

/// Polls `SHOW REPLICA STATUS` until `done` holds; fails on a replication error (naming it) or
/// after [`WAIT`].
async fn wait_replica(
    db: &Mysql8,
    what: &str,
    done: impl Fn(&ReplicaStatus) -> bool,
) -> ReplicaStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = db.replica_status().await.expect("replication configured");
        assert!(
            s.last_io_errno == 0 && s.last_sql_errno == 0,
            "{what}: replica error: {s:#?}\n{}",
            db.error_log()
        );
        if done(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: replica stuck at {s:#?}\n{}",
            db.error_log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last transaction number of a dense `uuid:1-N` set (0 when empty).
fn last_gno(set: &str) -> u64 {
    set.rsplit(['-', ':'])
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits until the binlog holds `n` transactions.
async fn wait_binlog(addr: std::net::SocketAddr, n: u64) {
    let deadline = Instant::now() + WAIT;
    while last_gno(&master_status(addr).await.expect("status").gtids) < n {
        assert!(Instant::now() < deadline, "the workload never got going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Seeds `by_pos` from a dump of the MySQL listener and starts it at the dump's file and
/// position; returns them.
async fn seed_by_position(
    tool: &Path,
    by_pos: &Mysql8,
    addr: std::net::SocketAddr,
) -> (String, u64) {
    let (tool2, plain) = (tool.to_owned(), addr);
    let d = tokio::task::spawn_blocking(move || dump(&tool2, plain, &[]))
        .await
        .expect("dump");
    let file = dump_coordinate(&d, "MASTER_LOG_FILE").expect("file in the dump");
    let pos: u64 = dump_coordinate(&d, "MASTER_LOG_POS")
        .expect("position in the dump")
        .parse()
        .expect("a number");
    load(by_pos.client(), &d);
    by_pos
        .sql(&format!(
            "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={}, \
             SOURCE_USER='root', SOURCE_PASSWORD='', SOURCE_LOG_FILE='{file}', \
             SOURCE_LOG_POS={pos}, SOURCE_AUTO_POSITION=0",
            addr.port()
        ))
        .await;
    by_pos.sql("START REPLICA").await;
    (file, pos)
}

/// Seeds `by_gtid` from a `--gtid` dump of the MariaDB-flavoured listener: its
/// `gtid_slave_pos` `0-1-N` is our GTID set `uuid:1-N` (both number the binlog's transactions
/// from 1), which becomes the replica's `gtid_purged`; then auto-positioning. Returns N.
async fn seed_by_gtid(
    tool: &Path,
    by_gtid: &Mysql8,
    maria: std::net::SocketAddr,
    mysql: std::net::SocketAddr,
    uuid: &str,
) -> u64 {
    let tool = tool.to_owned();
    let d = tokio::task::spawn_blocking(move || dump(&tool, maria, &["--gtid"]))
        .await
        .expect("dump");
    let slave_pos = dump_coordinate(&d, "gtid_slave_pos").expect("gtid_slave_pos in the dump");
    let n: u64 = slave_pos
        .strip_prefix("0-1-")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a domain-0 position of server 1: {slave_pos}"));
    load(by_gtid.client(), &d);
    // The load wrote transactions of the replica's own: the executed set becomes the dump's.
    by_gtid.sql("RESET MASTER").await;
    by_gtid
        .sql(&format!(
            "SET GLOBAL gtid_purged = '{}'",
            dense_set(uuid, n as usize)
        ))
        .await;
    by_gtid
        .sql(&format!(
            "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={}, \
             SOURCE_USER='root', SOURCE_PASSWORD='', SOURCE_AUTO_POSITION=1",
            mysql.port()
        ))
        .await;
    by_gtid.sql("START REPLICA").await;
    n
}

/// Every relay log of the replica read back by MySQL (`SHOW RELAYLOG EVENTS`): returns the
/// number of events it listed.
async fn relay_log_events(db: &Mysql8) -> u64 {
    let mut conn = db.conn().await;
    let index: String = conn
        .query_first("SELECT @@relay_log_index")
        .await
        .expect("relay_log_index")
        .expect("a relay log index");
    let files = std::fs::read_to_string(&index).expect("read the relay log index");
    let mut events = 0u64;
    for f in files.lines().filter(|l| !l.trim().is_empty()) {
        let name = Path::new(f.trim())
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let rows: Vec<mysql_async::Row> = conn
            .query(format!("SHOW RELAYLOG EVENTS IN '{name}'"))
            .await
            .unwrap_or_else(|e| panic!("SHOW RELAYLOG EVENTS IN '{name}': {e}"));
        events += rows.len() as u64;
    }
    let _ = conn.disconnect().await;
    events
}

/// The DDL statements of the truth log after the first `after` transactions.
fn ddl_after(truth: &[Json], after: usize) -> Vec<&str> {
    truth[after.min(truth.len())..]
        .iter()
        .filter_map(|t| t["ddl"].as_str())
        .collect()
}

/// Seeds both replicas while the workload runs, then stops and starts one and kills the other.
async fn seed_and_disturb(
    tool: &Path,
    by_gtid: &Mutex<Option<Mysql8>>,
    by_pos: &Mysql8,
    (addr, maria, uuid): (std::net::SocketAddr, std::net::SocketAddr, String),
) -> ((String, u64), u64) {
    wait_binlog(addr, 40).await;
    let at = seed_by_position(tool, by_pos, addr).await;
    let db = by_gtid.lock().expect("replica").take().expect("replica");
    let n = seed_by_gtid(tool, &db, maria, addr, &uuid).await;
    // Stopped and started once it has applied something past the dump.
    let s = wait_replica(by_pos, "by position, first apply", |s| {
        (s.relay_source_log_file.as_str(), s.exec_source_log_pos) > (at.0.as_str(), at.1)
    })
    .await;
    by_pos.sql("STOP REPLICA").await;
    by_pos.sql("START REPLICA").await;
    eprintln!(
        "by position: stopped and started at {}:{}",
        s.relay_source_log_file, s.exec_source_log_pos
    );
    // Killed once it has applied a few transactions past the dump.
    let s = wait_replica(&db, "by GTID, first apply", |s| {
        last_gno(&s.executed_gtid_set) >= n + 5
    })
    .await;
    let mut db = db;
    tokio::task::block_in_place(|| db.restart());
    eprintln!(
        "by GTID: killed with SIGKILL at {} and started again",
        s.executed_gtid_set
    );
    *by_gtid.lock().expect("replica") = Some(db);
    (at, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql8_replicas_from_a_dump_follow_by_gtid_and_position_through_stops_and_a_kill() {
    let Some(tool) = require_tool("mariadb-dump") else {
        return;
    };
    let seed = crate::common::demo::fresh_seed("mysql8 replicas");
    let started = Instant::now();
    let replicas = tokio::task::spawn_blocking(|| {
        (
            Mysql8::start(BY_GTID_ID, &REPLICA_OPTS),
            Mysql8::start(BY_POS_ID, &REPLICA_OPTS),
        )
    });
    let (Some(by_gtid), Some(by_pos)) = replicas.await.expect("start MySQL 8.0") else {
        return;
    };
    let by_gtid = Mutex::new(Some(by_gtid));
    let seeded = Mutex::new(None);
    let demo: Demo = run_demo(seed, true, |addr, maria| {
        let (tool, by_gtid, by_pos, seeded) = (&tool, &by_gtid, &by_pos, &seeded);
        async move {
            // The server's uuid, as SHOW MASTER STATUS names it once a transaction is in.
            wait_binlog(addr, 1).await;
            let gtids = master_status(addr).await.expect("status").gtids;
            let uuid = gtids.split(':').next().expect("uuid").to_owned();
            let r = seed_and_disturb(tool, by_gtid, by_pos, (addr, maria, uuid)).await;
            *seeded.lock().expect("seeded") = Some(r);
        }
    })
    .await;
    let by_gtid = by_gtid.lock().expect("replica").take().expect("replica");
    let ((file, pos), n) = seeded.lock().expect("seeded").take().expect("seeded");
    let uuid = demo.app.server_uuid().to_string();
    let all = dense_set(&uuid, demo.truth.len());

    let g = wait_replica(&by_gtid, "by GTID", |s| s.executed_gtid_set == all).await;
    let p = wait_replica(&by_pos, "by position", |s| {
        s.relay_source_log_file == demo.end.file && s.exec_source_log_pos == demo.end.position
    })
    .await;
    for (s, what) in [(&g, "by GTID"), (&p, "by position")] {
        assert_eq!(
            (s.io_running.as_str(), s.sql_running.as_str()),
            ("Yes", "Yes"),
            "{what}: {s:#?}"
        );
        assert_eq!(
            (s.source_log_file.as_str(), s.read_source_log_pos),
            (demo.end.file.as_str(), demo.end.position),
            "{what}: the I/O thread read to the binlog's end"
        );
    }

    let mut model = Model::default();
    for txn in &demo.truth {
        model.apply(txn);
    }
    let a = assert_replica_equals_model(by_gtid.conn().await, &model).await;
    let b = assert_replica_equals_model(by_pos.conn().await, &model).await;
    let ea = relay_log_events(&by_gtid).await;
    let eb = relay_log_events(&by_pos).await;
    eprintln!(
        "seed {seed}: dump at {file}:{pos} and at {n} transactions of {}; DDL after the GTID \
         dump: {:?}; {a} and {b} values equal; {ea} and {eb} relay log events read back by \
         MySQL; {:?}",
        demo.truth.len(),
        ddl_after(&demo.truth, n as usize),
        started.elapsed()
    );

    // A replica whose GTID set is ahead of the binlog is refused as MySQL refuses it.
    by_gtid.sql("STOP REPLICA").await;
    by_gtid.sql("RESET MASTER").await;
    let ahead = dense_set(&uuid, demo.truth.len() + 10);
    by_gtid
        .sql(&format!("SET GLOBAL gtid_purged = '{ahead}'"))
        .await;
    by_gtid.sql("START REPLICA IO_THREAD").await;
    let deadline = Instant::now() + WAIT;
    let s = loop {
        let s = by_gtid.replica_status().await.expect("status");
        if s.last_io_errno != 0 && s.io_running == "No" {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "no I/O error for a set ahead: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The replica records the source's 1236 under its own code 13114
    // (ER_SERVER_SOURCE_FATAL_ERROR_READING_BINLOG), quoting the source's message.
    assert_eq!(s.last_io_errno, 13114, "{s:#?}");
    assert!(
        s.last_io_error.contains("Got fatal error 1236 from")
            && s.last_io_error
                .contains("Slave has more GTIDs than the master has"),
        "MySQL's words for a replica ahead: {}",
        s.last_io_error
    );
    crate::common::app::assert_all_answered(&demo.app, "MySQL 8.0 replicas and mariadb-dump");
    demo.stop().await;
}

/// `tibinlog check` against a MySQL 8.0 replica (GTID auto-position, parallel applier, JSON
/// columns) under the running workload: the scenario of `common::check`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn check_a_mysql8_replica_under_the_workload_finds_exactly_the_drift_and_repairs_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let opts = [
        "--skip-networking=OFF".to_owned(),
        format!("--port={port}"),
        "--bind-address=127.0.0.1".to_owned(),
    ];
    let started = tokio::task::spawn_blocking(move || {
        let mut all: Vec<&str> = REPLICA_OPTS.to_vec();
        all.extend(opts.iter().map(String::as_str));
        Mysql8::start(BY_POS_ID + 10, &all)
    });
    let Some(server) = started.await.expect("start MySQL 8.0") else {
        return;
    };
    // Root over TCP from 127.0.0.1 (the initialised root is root@localhost).
    server
        .sql(
            "CREATE USER 'root'@'127.0.0.1' IDENTIFIED BY ''; \
             GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
        )
        .await;
    let db = crate::common::check::Replica { port, mysql8: true };
    crate::common::check::scenario(&db, "check_a_mysql8_replica").await;
    drop(server);
}

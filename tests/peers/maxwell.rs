//! Zendesk's Maxwell 1.22.6 (`tests/peers/maxwell/pom.xml`) as a real consumer of the whole
//! product: the simulated cluster's seeded workload (every column type, JSON included, and its
//! DDL: CREATE TABLE, ADD/DROP/MODIFY COLUMN, ADD INDEX, TRUNCATE, multi-table RENAME,
//! `CREATE TABLES` batches, TRUNCATE/EXCHANGE PARTITION) → changefeed → binlog → server, read
//! by the Maxwell daemon (`--producer=stdout --output_ddl=true`). Maxwell keeps its state
//! (positions, schema history) in a throwaway MariaDB on loopback; its schema capture and its
//! binlog come from our server (no `schema_host`).
//!
//! Maxwell starts while the workload is paused part-way, so that its start position is known
//! (`SHOW MASTER STATUS` after n truth transactions); the workload then runs on, Maxwell is
//! stopped (SIGTERM) mid-stream and started again from its stored position. The checks:
//! - transaction by transaction, Maxwell's rows equal the truth log's, value for value after
//!   the normalisations of `maxwell_text` and `canon` in
//!   `tests/common/maxwell.rs`, with nothing lost or doubled
//!   across the restart;
//! - every table's final state, rebuilt from the truth log up to the start position plus
//!   Maxwell's rows (and the row-moving DDL, which has no row events), equals the truth log's;
//! - every DDL statement after the start is accepted (Maxwell stops on DDL it cannot parse),
//!   and those that change a schema are printed;
//! - once caught up, Maxwell's bootstrap (a request row in its state store's `bootstrap`
//!   table; Maxwell then reads the table with a streaming `SELECT *` through our server)
//!   prints every row of each table as the truth log left it.
//!
//! The workload's seed comes from the clock (printed); `TIBINLOG_PEER_SEED=n` replays one.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value as Json};
use tibinlog::app::AppConfig;
use tibinlog::model::Ts;
use tibinlog::sim::cli::SimArgs;
use tibinlog_protocol::binlog::RowMetadata;

use crate::common::app::{
    dense_set, master_status, max_commit_ts, pause_and_settle, start_app_with,
    start_sim_paused_with, truth_after, wait_checkpoint, wait_until, Run,
};
use crate::common::mariadb::MariaDb;
use crate::common::maxwell::{
    self, canon, committed, is_row, julian_gap, maxwell_text, maxwell_time, plain_decimal,
};
use crate::common::peer;
use crate::common::peer_check::{self, PeerTxn, Types};

/// Workload transactions per run, and their pace (the workload lasts about 15 s, so that it
/// is still running while Maxwell starts and restarts).
const TXNS: u64 = 900;
const RATE: f64 = 60.0;
/// Upper bound of any wait on the pipeline or on Maxwell.
const WAIT: Duration = Duration::from_secs(240);

/// Maxwell's rows of one transaction as truth-log rows in [`canon`] form, sorted. An update's
/// `old` holds the changed columns only: its before image is `data` overlaid with `old`.
fn maxwell_rows(types: &Types, rows: &[&Json]) -> Vec<Json> {
    let mut out: Vec<Json> = rows
        .iter()
        .map(|r| {
            let db = r["database"].as_str().expect("database");
            let t = r["table"].as_str().expect("table");
            let image = |m: &serde_json::Map<String, Json>| -> Json {
                Json::Object(
                    m.iter()
                        .map(|(c, v)| {
                            let ty = types.of(db, t, c);
                            (c.clone(), json!(canon(ty, maxwell_text(ty, v).as_deref())))
                        })
                        .collect(),
                )
            };
            let data = r["data"].as_object().expect("data");
            let op = r["type"].as_str().expect("type");
            let (before, after) = match op {
                "insert" => (Json::Null, image(data)),
                "delete" => (image(data), Json::Null),
                _ => {
                    let mut old = data.clone();
                    if let Some(o) = r["old"].as_object() {
                        old.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                    (image(&old), image(data))
                }
            };
            peer_check::row(db, t, op, before, after)
        })
        .collect();
    out.sort_by_key(|r| r.to_string());
    out
}

// ---------------------------------------------------------------------------------------------
// The run

/// Maxwell's output so far, both runs in order.
fn output(files: &[&Path]) -> Vec<Json> {
    files.iter().flat_map(|f| maxwell::read_output(f)).collect()
}

/// The output of a run stopped mid-stream followed by the next run's: rows the first printed
/// after its last commit are dropped, because the next run starts again from its stored
/// position (the transaction's start) and prints that transaction whole.
fn restarted_output(first: &Path, second: &Path) -> Vec<Json> {
    let mut out = maxwell::read_output(first);
    let last_commit = out
        .iter()
        .rposition(|v| is_row(v) && v["commit"] == Json::Bool(true));
    let mut i = out.len();
    while i > last_commit.map_or(0, |c| c + 1) {
        i -= 1;
        if is_row(&out[i]) {
            out.remove(i);
        }
    }
    out.extend(maxwell::read_output(second));
    out
}

/// Fails on Maxwell's swallowed errors: it logs an event it cannot decode as a warning and
/// carries on without its rows.
fn assert_clean_log(path: &Path) {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("deserialization failure") || l.contains(" ERROR "))
        .collect();
    assert!(
        bad.is_empty(),
        "Maxwell logged errors in {}:\n{}\n--- full log tail ---\n{}",
        path.display(),
        bad[..bad.len().min(10)].join("\n"),
        log.lines().rev().take(60).collect::<Vec<_>>().join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn maxwell_follows_the_workload_across_a_restart() {
    let Some(mx_install) = maxwell::installation() else {
        return;
    };
    let (java, classpath) = (&mx_install.java, mx_install.classpath.as_str());
    let Some((state, state_port)) = MariaDb::start_tcp() else {
        return;
    };
    let seed = crate::common::demo::fresh_seed("maxwell peer");
    let sim = start_sim_paused_with(SimArgs {
        stores: 2,
        regions_per_table: 2,
        rate: RATE,
        txns: Some(TXNS),
        seed: Some(seed),
        resolved_ts_interval: Duration::from_millis(50),
        progress_interval: Duration::from_secs(3600),
        // Maxwell 1.22.6's grammar has no `EXCHANGE PARTITION … WITH TABLE` (it stops on the
        // statement; so it does with a MySQL 8.0 master): the workload runs every other DDL.
        no_exchange_partition: true,
        ..SimArgs::default()
    })
    .await;
    // Capture from just before the workload's CREATE DATABASE (its first truth line).
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
    // Maxwell 1.22.6's binlog library (mysql-binlog-connector-java 0.20.0) predates MySQL
    // 8.0.23: FULL's COLUMN_VISIBILITY field is an unknown type to it, and it counts YEAR out
    // of SIGNEDNESS (MySQL counts it in), so a TABLE_MAP it cannot read drops the table's rows
    // with a logged warning. Without optional metadata (MySQL 5.7's TABLE_MAP) it reads all.
    cfg.row_metadata = RowMetadata::None;
    let app = start_app_with(cfg).await;
    let addr = app.local_addr();
    let run = Run {
        sim: sim.handle,
        truth: sim.truth,
        start_ts,
    };

    // Maxwell starts a third of the way in, the workload held back meanwhile.
    run.sim.start_workload();
    wait_until("a third of the workload", || {
        run.truth.lines().len() as u64 >= TXNS / 3
    })
    .await;
    let before = pause_and_settle(&run, &app).await;
    let at_start = master_status(addr).await.expect("SHOW MASTER STATUS");
    let uuid = app.server_uuid().to_string();
    assert_eq!(
        at_start.gtids,
        dense_set(&uuid, before.len()),
        "seed {seed}"
    );
    let config = dir.path().join("maxwell.properties");
    maxwell::write_config(&config, state_port, addr.port());
    let files: Vec<_> = ["out1", "err1", "out2", "err2"]
        .iter()
        .map(|f| dir.path().join(f))
        .collect();
    let (out1, err1, out2, err2) = (&files[0], &files[1], &files[2], &files[3]);
    let mx = maxwell::start(java, classpath, &config, out1, err1).await;
    run.sim.start_workload();

    // Stopped mid-stream once it has printed something and the workload is two thirds done.
    wait_until(
        "two thirds of the workload and Maxwell's first rows",
        || run.truth.lines().len() as u64 >= 2 * TXNS / 3 && committed(&output(&[out1])) > 0,
    )
    .await;
    let status = mx.stop().await;
    eprintln!("maxwell peer: first run stopped ({status})");
    let mut mx = maxwell::start(java, classpath, &config, out2, err2).await;

    tokio::time::timeout(WAIT, run.sim.workload_done())
        .await
        .expect("workload finishes");
    assert_eq!(run.sim.failure(), None, "seed {seed}: the workload failed");
    let lines = run.truth.lines();
    wait_checkpoint(&app, max_commit_ts(&lines)).await;
    let truth = truth_after(&lines, start_ts);
    let want_txns = truth[before.len()..]
        .iter()
        .filter(|t| t["ddl"].is_null())
        .count();
    let deadline = std::time::Instant::now() + WAIT;
    peer::wait_until(&mut mx, "catching up", deadline, || {
        let have = committed(&output(&[out1, out2]));
        (have >= want_txns)
            .then_some(())
            .ok_or(format!("printed {have} of {want_txns} transactions"))
    })
    .await;
    // Caught up: a bootstrap (Maxwell's full-table read) of every table it can print.
    let booted = bootstrap_tables(&truth);
    for (db, t) in &booted {
        state.sql(&format!(
            "INSERT INTO maxwell.bootstrap (database_name, table_name) VALUES ('{db}', '{t}')"
        ));
    }
    peer::wait_until(&mut mx, "bootstrapping", deadline, || {
        let done = output(&[out2])
            .iter()
            .filter(|v| v["type"] == "bootstrap-complete")
            .count();
        (done >= booted.len())
            .then_some(())
            .ok_or(format!("{done} of {} bootstraps complete", booted.len()))
    })
    .await;
    let status = mx.stop().await;
    eprintln!("maxwell peer: second run stopped ({status})");
    assert_clean_log(err1);
    assert_clean_log(err2);

    let out = restarted_output(out1, out2);
    let seen = verify_output(seed, &truth, before.len(), &out);
    check_bootstraps(seed, &seen, &out, &booted);
    crate::common::app::assert_all_answered(&app, "Maxwell");
    app.stop().await.expect("app stops");
    run.sim.shutdown().await.expect("sim shutdown");
}

/// Compares Maxwell's output `out` with the truth log from transaction `start` on (see
/// `peer_check::verify`); every DDL that changes a schema must be printed.
fn verify_output(seed: u64, truth: &[Json], start: usize, out: &[Json]) -> peer_check::Compared {
    let printed: std::collections::BTreeSet<&str> = out
        .iter()
        .filter(|v| !is_row(v))
        .filter_map(|v| v["sql"].as_str())
        .collect();
    let mut rows = out.iter().filter(|v| is_row(v)).peekable();
    let next = |types: &Types| {
        rows.peek()?;
        let mut mine = Vec::new();
        for r in rows.by_ref() {
            mine.push(r);
            if r["commit"] == Json::Bool(true) {
                break;
            }
        }
        Some(PeerTxn {
            // Our XID is the transaction's start ts.
            xid: maxwell::number(&mine[0]["xid"]).unwrap_or("?").to_owned(),
            rows: maxwell_rows(types, &mine),
        })
    };
    let seen = peer_check::verify(seed, "Maxwell", truth, start, canon, next, |ddl| {
        printed.contains(ddl)
    });
    // Maxwell prints the DDL that changes a schema; TRUNCATE TABLE changes none.
    let unprinted: Vec<&String> = seen
        .ddl_unprinted
        .iter()
        .filter(|d| !d.starts_with("TRUNCATE TABLE "))
        .collect();
    assert!(
        unprinted.is_empty(),
        "seed {seed}: DDL Maxwell did not print: {unprinted:?}"
    );
    eprintln!(
        "maxwell peer: seed {seed}: from GNO {} on, {} transactions ({} rows) and {} DDL \
         statements compared; accepted without printing: {:?}",
        start + 1,
        seen.txns,
        seen.rows,
        seen.ddl,
        seen.ddl_unprinted
    );
    seen
}

/// Each bootstrapped table's rows in `out` against its final state in `seen`.
fn check_bootstraps(
    seed: u64,
    seen: &peer_check::Compared,
    out: &[Json],
    booted: &[(String, String)],
) {
    for (db, t) in booted {
        let got = bootstrap_rows(&seen.types, out, db, t);
        let mut want: Vec<Json> = seen.tables[&(db.clone(), t.clone())]
            .values()
            .map(|r| peer_check::row(db, t, "insert", Json::Null, json!(r)))
            .collect();
        want.sort_by_key(|r| r.to_string());
        assert!(
            got == want,
            "seed {seed}: Maxwell's bootstrap of `{db}`.`{t}` differs from the table:\n{}",
            peer_check::rows_diff("Maxwell", &got, &want)
        );
        eprintln!(
            "maxwell peer: bootstrap of `{db}`.`{t}`: {} rows equal",
            got.len()
        );
    }
}

/// The tables at the end of `truth` that a Maxwell bootstrap can be checked on: all but those
/// with a TIME column (Maxwell prints TIME outside a day wrongly, see `maxwell_time`).
fn bootstrap_tables(truth: &[Json]) -> Vec<(String, String)> {
    let mut types = Types::default();
    truth
        .iter()
        .filter_map(|t| t["ddl"].as_str())
        .for_each(|d| types.apply(d));
    types
        .0
        .iter()
        .filter(|(_, cols)| {
            !cols
                .iter()
                .any(|(_, ty)| ty == "time" || ty.starts_with("time("))
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// The rows of Maxwell's bootstrap of `db`.`table` in `out`, as inserts in the compared form.
fn bootstrap_rows(types: &Types, out: &[Json], db: &str, table: &str) -> Vec<Json> {
    let mine: Vec<Json> = out
        .iter()
        .filter(|v| v["type"] == "bootstrap-insert" && v["database"] == db && v["table"] == table)
        .map(|v| json!({"database": db, "table": table, "type": "insert", "data": v["data"]}))
        .collect();
    maxwell_rows(types, &mine.iter().collect::<Vec<_>>())
}

#[test]
fn maxwell_values_read_as_mysql_text() {
    let v = maxwell::parse_line(
        r#"{"d":-12345678901234.000001,"z":0E-6,"b":"3q2+7w==","s":["a","c"],"t":"x\"1",
            "bit":2730,"b1":true,"j":{"k1":[1,2.5,null],"k0":"s"},"f":1234.125,"dt":"2020-01-01 00:00:00"}"#,
    )
    .expect("object");
    let t = |ty: &str, k: &str| maxwell_text(ty, &v[k]);
    assert_eq!(
        t("decimal(20,6)", "d").as_deref(),
        Some("-12345678901234.000001")
    );
    assert_eq!(t("decimal(20,6)", "z").as_deref(), Some("0.000000"));
    assert_eq!(t("blob", "b").as_deref(), Some("0xDEADBEEF"));
    assert_eq!(t("set('a','b','c')", "s").as_deref(), Some("a,c"));
    assert_eq!(t("varchar(8)", "t").as_deref(), Some("x\"1"));
    assert_eq!(t("bit(12)", "bit").as_deref(), Some("0x0AAA"));
    assert_eq!(t("bit(1)", "b1").as_deref(), Some("0x01"));
    assert_eq!(
        t("datetime(3)", "dt").as_deref(),
        Some("2020-01-01 00:00:00.000")
    );
    assert_eq!(
        canon("json", t("json", "j").as_deref()),
        canon("json", Some(r#"{"k0": "s", "k1": [1, 2.5, null]}"#))
    );
    assert_eq!(
        canon("float", t("float", "f").as_deref()).as_deref(),
        Some("1234.125")
    );
    assert_eq!(plain_decimal("1.25E+3", 1), "1250.0");
    assert_eq!(plain_decimal("-0.000", 2), "0.00");
    assert_eq!(plain_decimal("12", 2), "12.00");
    assert_eq!(maxwell::base64_decode("AQI="), vec![1, 2]);
    // As Maxwell 1.22.6 printed these values of a MySQL 8.0.31 master.
    assert_eq!(maxwell_time("-838:59:59", 0), "17:04:05");
    assert_eq!(maxwell_time("-01:02:03.40", 2), "15:02:02.16");
    assert_eq!(maxwell_time("838:59:59.00", 2), "22:59:59.00");
    assert_eq!(maxwell_time("00:00:00", 0), "00:00:00");
    assert_eq!(maxwell_time("-00:00:01.88", 2), "16:04:03.68");
    assert_eq!(maxwell_time("-12:34:56.57", 2), "03:29:08.99");
    assert_eq!(maxwell_time("-100:00:00.99", 2), "12:04:04.57");
    assert_eq!(maxwell_time("-00:00:01", 0), "16:04:03");
    // The first as Maxwell printed a DATETIME of the workload (seed 185997474); the rest the
    // same calendar's rule.
    assert_eq!(julian_gap("1582-10-10 00:06:51"), "1582-10-20 00:06:51");
    assert_eq!(julian_gap("1582-10-05"), "1582-10-15");
    assert_eq!(julian_gap("1582-10-14 23:59:59.5"), "1582-10-24 23:59:59.5");
    assert_eq!(julian_gap("1582-10-04 01:00:00"), "1582-10-04 01:00:00");
    assert_eq!(julian_gap("1582-10-15"), "1582-10-15");
    assert_eq!(julian_gap("1000-01-01"), "1000-01-01");
    assert_eq!(maxwell_time("25:00:00", 0), "01:00:00");
    assert_eq!(
        canon("binary(6)", Some("0xFF02")).as_deref(),
        Some("0xFF0200000000")
    );
}

#[test]
fn types_follow_the_ddl() {
    let mut ty = Types::default();
    ty.apply(
        "CREATE TABLE `wl`.`t` (`id` bigint(20) NOT NULL, `e` enum('a,b','c') DEFAULT 'c', \
         `d` decimal(8,2), PRIMARY KEY (`id`)) PARTITION BY HASH (`id`) PARTITIONS 4",
    );
    assert_eq!(ty.of("wl", "t", "e"), "enum('a,b','c')");
    ty.apply("ALTER TABLE `wl`.`t` ADD COLUMN `x` datetime DEFAULT '2020-02-29 12:00:00'");
    ty.apply("ALTER TABLE `wl`.`t` MODIFY COLUMN `d` decimal(10,2)");
    ty.apply("RENAME TABLE `wl`.`t` TO `wl`.`u`");
    ty.apply("ALTER TABLE `wl`.`u` DROP COLUMN `e`");
    assert_eq!(ty.of("wl", "u", "x"), "datetime");
    assert_eq!(ty.of("wl", "u", "d"), "decimal(10,2)");
    assert_eq!(ty.0[&("wl".into(), "u".into())].len(), 3);
}

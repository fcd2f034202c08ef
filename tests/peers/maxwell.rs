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
//!   and those that change a schema are printed.
//!
//! The workload's seed comes from the clock (printed); `TIBINLOG_PEER_SEED=n` replays one.

use std::collections::BTreeMap;
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
    self, canon, committed, is_row, maxwell_text, maxwell_time, plain_decimal, Maxwell,
};
use crate::common::replica::Model;
use crate::common::truth::{idents, TableId};

/// Workload transactions per run, and their pace (the workload lasts about 15 s, so that it
/// is still running while Maxwell starts and restarts).
const TXNS: u64 = 900;
const RATE: f64 = 60.0;
/// Upper bound of any wait on the pipeline or on Maxwell.
const WAIT: Duration = Duration::from_secs(240);

// ---------------------------------------------------------------------------------------------
// Column types, followed through the truth log's DDL

/// Column types of the truth log's tables: (database, table) → [(column, type as declared,
/// e.g. `decimal(20,6)`, `enum('red','green')`)].
#[derive(Debug, Default)]
struct Types(BTreeMap<TableId, Vec<(String, String)>>);

/// The items of a parenthesised list whose `(` has just been passed: split at commas outside
/// parentheses, quotes and backquotes, up to the matching `)`.
fn list_items(s: &str) -> Vec<&str> {
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0);
    let mut out = Vec::new();
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') if depth == 0 => {
                out.push(s[start..i].trim());
                return out;
            }
            (None, ')') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// `` `name` type … `` → (name, type): the type is the first word, parentheses included.
fn column_def(item: &str) -> (String, String) {
    let rest = item.strip_prefix('`').expect("column name");
    let end = rest.find('`').expect("column name end");
    let after = rest[end + 1..].trim_start();
    let (mut depth, mut quoted) = (0, false);
    for (i, c) in after.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ' ' if !quoted && depth == 0 => {
                return (rest[..end].to_owned(), after[..i].to_owned());
            }
            _ => {}
        }
    }
    (rest[..end].to_owned(), after.to_owned())
}

impl Types {
    fn apply(&mut self, ddl: &str) {
        let ids = idents(ddl);
        let key = || (ids[0].clone(), ids[1].clone());
        if ddl.starts_with("CREATE TABLE ") {
            let list = &ddl[ddl.find(" (").expect("column list") + 2..];
            let cols = list_items(list)
                .into_iter()
                .filter(|i| i.starts_with('`'))
                .map(column_def)
                .collect();
            self.0.insert(key(), cols);
        } else if ddl.starts_with("DROP TABLE ") {
            self.0.remove(&key());
        } else if ddl.starts_with("RENAME TABLE ") {
            for c in ids.chunks(4) {
                let cols = self.0.remove(&(c[0].clone(), c[1].clone()));
                self.0
                    .insert((c[2].clone(), c[3].clone()), cols.expect("renamed table"));
            }
        } else if let Some(rest) = ddl.strip_prefix("ALTER TABLE ") {
            let action = rest.split_once("` ").expect("alter action").1;
            let cols = self.0.get_mut(&key()).expect("altered table");
            if let Some(def) = action.strip_prefix("ADD COLUMN ") {
                cols.push(column_def(def));
            } else if let Some(def) = action.strip_prefix("MODIFY COLUMN ") {
                let (name, ty) = column_def(def);
                let col = cols.iter_mut().find(|(n, _)| *n == name).expect("column");
                col.1 = ty;
            } else if action.starts_with("DROP COLUMN ") {
                cols.retain(|(n, _)| *n != ids[2]);
            }
        }
    }

    fn of(&self, db: &str, table: &str, column: &str) -> &str {
        let cols = self
            .0
            .get(&(db.to_owned(), table.to_owned()))
            .unwrap_or_else(|| panic!("no types for `{db}`.`{table}`"));
        cols.iter()
            .find(|(n, _)| n == column)
            .map(|(_, t)| t.as_str())
            .unwrap_or_else(|| panic!("no column `{db}`.`{table}`.`{column}`"))
    }
}

/// A row image of the truth log with every value in [`canon`] form.
fn canon_image(types: &Types, db: &str, table: &str, image: &Json) -> Json {
    let Some(m) = image.as_object() else {
        return Json::Null;
    };
    Json::Object(
        m.iter()
            .map(|(c, v)| {
                let ty = types.of(db, table, c);
                (c.clone(), json!(canon(ty, v.as_str())))
            })
            .collect(),
    )
}

/// The rows of a truth transaction in [`canon`] form, sorted.
fn canon_rows(types: &Types, txn: &Json) -> Vec<Json> {
    let mut rows: Vec<Json> = txn["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let (db, t) = (
                r["db"].as_str().expect("db"),
                r["table"].as_str().expect("t"),
            );
            json!({"db": db, "table": t, "op": r["op"],
                   "before": canon_image(types, db, t, &r["before"]),
                   "after": canon_image(types, db, t, &r["after"])})
        })
        .collect();
    rows.sort_by_key(|r| r.to_string());
    rows
}

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
            json!({"db": db, "table": t, "op": op, "before": before, "after": after})
        })
        .collect();
    out.sort_by_key(|r| r.to_string());
    out
}

// ---------------------------------------------------------------------------------------------
// The comparison

/// What [`verify`] compared.
#[derive(Debug, Default)]
struct Compared {
    txns: usize,
    rows: usize,
    ddl: usize,
    /// Truth DDL statements Maxwell accepted without printing them.
    ddl_unprinted: Vec<String>,
}

/// Walks the truth log from transaction `start` (Maxwell's start position) along Maxwell's
/// output: each truth transaction with rows must be Maxwell's next transaction, row for row;
/// then compares every table's final state. `seed` names the run in failures.
fn verify(seed: u64, truth: &[Json], start: usize, out: &[Json]) -> Compared {
    let mut types = Types::default();
    let (mut want, mut got) = (Model::default(), Model::default());
    for t in &truth[..start] {
        if let Some(ddl) = t["ddl"].as_str() {
            types.apply(ddl);
        }
        let rows = canon_rows_txn(&types, t);
        want.apply(&rows);
        got.apply(&rows);
    }
    let printed: std::collections::BTreeSet<&str> = out
        .iter()
        .filter(|v| !is_row(v))
        .filter_map(|v| v["sql"].as_str())
        .collect();
    let mut rows = out.iter().filter(|v| is_row(v));
    let mut seen = Compared::default();
    for (i, t) in truth[start..].iter().enumerate() {
        let at = format!("seed {seed}: truth transaction {} (GNO)", start + i + 1);
        if let Some(ddl) = t["ddl"].as_str() {
            types.apply(ddl);
            want.apply(t);
            got.apply(t);
            seen.ddl += 1;
            if !printed.contains(ddl) {
                seen.ddl_unprinted.push(ddl.to_owned());
            }
            continue;
        }
        let mut mine = Vec::new();
        for r in rows.by_ref() {
            mine.push(r);
            if r["commit"] == Json::Bool(true) {
                break;
            }
        }
        assert!(!mine.is_empty(), "{at}: Maxwell printed no more rows");
        // Our XID is the transaction's start ts.
        assert_eq!(
            maxwell::number(&mine[0]["xid"]),
            Some(t["start_ts"].to_string().as_str()),
            "{at}: Maxwell's transaction is another one"
        );
        let w = canon_rows(&types, t);
        let g = maxwell_rows(&types, &mine);
        assert!(
            g == w,
            "{at}: Maxwell's rows differ from the truth log's:\n{}",
            rows_diff(&g, &w)
        );
        want.apply(&json!({"rows": w}));
        got.apply(&json!({"rows": g}));
        seen.txns += 1;
        seen.rows += w.len();
    }
    let extra: Vec<&Json> = rows.collect();
    assert!(
        extra.is_empty(),
        "seed {seed}: Maxwell printed rows past the end of the truth log (doubled?): {:?}",
        &extra[..extra.len().min(3)]
    );
    assert_eq!(
        got.tables.keys().collect::<Vec<_>>(),
        want.tables.keys().collect::<Vec<_>>(),
        "seed {seed}: tables"
    );
    for (t, rows) in &want.tables {
        assert_eq!(&got.tables[t], rows, "seed {seed}: final rows of {t:?}");
    }
    seen
}

/// The differences of two sorted row lists, column by column (Maxwell's value, then the
/// truth log's).
fn rows_diff(got: &[Json], want: &[Json]) -> String {
    let mut out = format!(
        "{} rows from Maxwell, {} in the truth log\n",
        got.len(),
        want.len()
    );
    for (g, w) in got.iter().zip(want) {
        for key in ["db", "table", "op"] {
            if g[key] != w[key] {
                out.push_str(&format!("  {key}: {} vs {}\n", g[key], w[key]));
            }
        }
        for image in ["before", "after"] {
            let (gi, wi) = (&g[image], &w[image]);
            let cols: std::collections::BTreeSet<&String> = [gi, wi]
                .iter()
                .filter_map(|i| i.as_object())
                .flat_map(|m| m.keys())
                .collect();
            for c in cols {
                if gi.get(c) != wi.get(c) {
                    out.push_str(&format!(
                        "  `{}`.{image}.{c}: {:?} vs {:?}\n",
                        w["table"],
                        gi.get(c),
                        wi.get(c)
                    ));
                }
            }
        }
    }
    out
}

/// A truth transaction ready for [`Model::apply`]: DDL as is, rows in [`canon`] form.
fn canon_rows_txn(types: &Types, t: &Json) -> Json {
    if t["ddl"].is_string() {
        return t.clone();
    }
    json!({"rows": canon_rows(types, t)})
}

// ---------------------------------------------------------------------------------------------
// The run

/// A throwaway MariaDB for Maxwell's state, listening on loopback TCP (Maxwell's JDBC driver
/// has no Unix sockets); `None` when MariaDB is missing outside CI.
fn start_state_store() -> Option<(MariaDb, u16)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let db = MariaDb::start(&[
        "--skip-networking=0",
        &format!("--port={port}"),
        "--bind-address=127.0.0.1",
    ])?;
    Some((db, port))
}

/// Maxwell's output so far, both runs in order.
fn output(files: &[&Path]) -> Vec<Json> {
    files.iter().flat_map(|f| maxwell::read_output(f)).collect()
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
    let Some((_state, state_port)) = start_state_store() else {
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
    let mut mx = Maxwell::spawn(java, classpath, &config, out1, err1);
    mx.wait_connected().await;
    run.sim.start_workload();

    // Stopped mid-stream once it has printed something and the workload is two thirds done.
    wait_until(
        "two thirds of the workload and Maxwell's first rows",
        || run.truth.lines().len() as u64 >= 2 * TXNS / 3 && committed(&output(&[out1])) > 0,
    )
    .await;
    let status = mx.stop().await;
    eprintln!("maxwell peer: first run stopped ({status})");
    let mut mx = Maxwell::spawn(java, classpath, &config, out2, err2);
    mx.wait_connected().await;

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
    let deadline = tokio::time::Instant::now() + WAIT;
    while committed(&output(&[out1, out2])) < want_txns {
        mx.assert_running("catching up");
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: Maxwell printed {} of {want_txns} transactions; log:\n{}",
            committed(&output(&[out1, out2])),
            mx.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = mx.stop().await;
    eprintln!("maxwell peer: second run stopped ({status})");
    assert_clean_log(err1);
    assert_clean_log(err2);

    let out = output(&[out1, out2]);
    let seen = verify(seed, &truth, before.len(), &out);
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
        before.len() + 1,
        seen.txns,
        seen.rows,
        seen.ddl,
        seen.ddl_unprinted
    );
    app.stop().await.expect("app stops");
    run.sim.shutdown().await.expect("sim shutdown");
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

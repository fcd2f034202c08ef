//! The catalog round trip: random tables and views from the simulator's schema generator
//! (fresh seed, printed) are created in the simulated TiDB; tibinlog's `SHOW CREATE TABLE` and
//! `SHOW CREATE VIEW` texts are executed on a MySQL 8.0.31 server, and a `mariadb-dump` of the
//! database (tables and views) is loaded into a MariaDB 10.11 server; then each server's
//! information_schema (columns, keys, partitions, foreign keys, CHECK
//! constraints, views) must describe the same schema as tibinlog's own information_schema.
//! MySQL 8.0 is compared in full (column types, defaults, check clauses, view column types,
//! index visibility);
//! MariaDB in what the two dialects share (names, data types, nullability, key membership).

use mysql_async::prelude::*;
use mysql_async::{Conn, Row};
use tibinlog::sim::tidb::Ddl;
use tibinlog::sim::ts::SimRng;
use tibinlog::sim::workload::schema_gen::random_schema;
use tibinlog_protocol::value::Value;

use crate::common::app::{assert_all_answered, opts, start_app, start_scripted};
use crate::common::demo::{dump_database, fresh_seed, load};
use crate::common::mariadb::{require_tool, MariaDb};
use crate::common::mysql8::Mysql8;

const DB: &str = "test";

/// The catalog facts compared, one query per kind; every value as text.
const FACTS: &[(&str, &str)] = &[
    (
        "tables",
        "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = 'test' ORDER BY TABLE_NAME",
    ),
    (
        "columns",
        "SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, \
         COLUMN_DEFAULT, COLUMN_KEY, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, \
         DATETIME_PRECISION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'test' \
         ORDER BY TABLE_NAME, ORDINAL_POSITION",
    ),
    (
        "indexes",
        "SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE \
         FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'test' \
         ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
    ),
    (
        "partitions",
        "SELECT TABLE_NAME, PARTITION_NAME, PARTITION_ORDINAL_POSITION, PARTITION_METHOD, \
         PARTITION_EXPRESSION, PARTITION_DESCRIPTION FROM information_schema.PARTITIONS \
         WHERE TABLE_SCHEMA = 'test' AND PARTITION_NAME IS NOT NULL \
         ORDER BY TABLE_NAME, PARTITION_ORDINAL_POSITION",
    ),
    (
        "foreign keys",
        "SELECT CONSTRAINT_NAME, TABLE_NAME, REFERENCED_TABLE_NAME, UPDATE_RULE, DELETE_RULE \
         FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = 'test' \
         ORDER BY CONSTRAINT_NAME",
    ),
    (
        "key columns",
        "SELECT TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, ORDINAL_POSITION, \
         REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE \
         WHERE TABLE_SCHEMA = 'test' ORDER BY TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION",
    ),
    (
        "constraints",
        "SELECT TABLE_NAME, CONSTRAINT_NAME, CONSTRAINT_TYPE \
         FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = 'test' \
         ORDER BY TABLE_NAME, CONSTRAINT_NAME",
    ),
    (
        "checks",
        "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS \
         WHERE CONSTRAINT_SCHEMA = 'test' ORDER BY CONSTRAINT_NAME",
    ),
];

type Rows = Vec<Vec<Option<String>>>;

async fn rows(conn: &mut Conn, sql: &str) -> Rows {
    let got: Vec<Row> = conn
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    got.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<Option<String>, _>(i).flatten())
                .collect()
        })
        .collect()
}

async fn facts(conn: &mut Conn) -> Vec<Rows> {
    let mut out = Vec::new();
    for (_, sql) in FACTS {
        out.push(rows(conn, sql).await);
    }
    out
}

/// What MariaDB 10.11 and MySQL 8.0 both print: the columns of each fact that mean the same in
/// the two dialects (MariaDB prints display widths, `int(11)`, quotes defaults differently,
/// words CHECK clauses its own way and lists no PRIMARY/UNIQUE keys in KEY_COLUMN_USAGE of
/// other tables' constraints alike).
fn shared(facts: &[Rows]) -> Vec<Rows> {
    let keep: [&[usize]; 8] = [
        &[0, 1],
        &[0, 1, 2, 3, 5, 7],
        &[0, 1, 2, 3, 4],
        &[0, 1, 2, 3, 4, 5],
        &[0, 1, 2, 3, 4],
        &[0, 1, 2, 3, 4, 5],
        &[0, 1, 2],
        &[0],
    ];
    // InnoDB treats NO ACTION as RESTRICT; MariaDB prints RESTRICT for both (and for a key
    // that names no action), MySQL 8.0 NO ACTION.
    let rule = |v: &Option<String>| match v.as_deref() {
        Some("NO ACTION") => Some("RESTRICT".to_owned()),
        _ => v.clone(),
    };
    facts
        .iter()
        .zip(keep)
        .enumerate()
        .map(|(k, (rows, cols))| {
            rows.iter()
                .map(|r| {
                    cols.iter()
                        .map(|&i| if k == 4 { rule(&r[i]) } else { r[i].clone() })
                        .collect()
                })
                .collect()
        })
        .collect()
}

fn assert_same(server: &str, ours: &[Rows], theirs: &[Rows], statements: &str) {
    for (i, (name, _)) in FACTS.iter().enumerate() {
        if ours[i] != theirs[i] {
            let only_ours: Vec<_> = ours[i].iter().filter(|r| !theirs[i].contains(r)).collect();
            let only_theirs: Vec<_> = theirs[i].iter().filter(|r| !ours[i].contains(r)).collect();
            panic!(
                "{name} differ between tibinlog and {server}\n  only tibinlog: {only_ours:?}\n  \
                 only {server}: {only_theirs:?}\nstatements:\n{statements}"
            );
        }
    }
}

/// `SHOW CREATE TABLE`/`VIEW` of every object, in an order that creates referenced tables first.
async fn create_statements(conn: &mut Conn, ddls: &[Ddl]) -> Vec<String> {
    let mut out = Vec::new();
    for d in ddls {
        let sql = match d {
            Ddl::CreateTable { table, .. } => format!("SHOW CREATE TABLE `{DB}`.`{}`", table.name),
            Ddl::CreateView { name, .. } => format!("SHOW CREATE VIEW `{DB}`.`{name}`"),
            other => panic!("unexpected statement {}", other.sql()),
        };
        let r = rows(conn, &sql).await;
        out.push(r[0][1].clone().expect("create text"));
    }
    out
}

/// A `SHOW CREATE TABLE` line declaring an expression index (`` KEY `e` ((lower(`c`))) ``).
fn is_expression_key(line: &str) -> bool {
    let l = line.trim_start();
    (l.starts_with("KEY ") || l.starts_with("UNIQUE KEY ")) && l.contains("` ((")
}

async fn replay(conn: &mut Conn, statements: &[String]) {
    conn.query_drop(format!("CREATE DATABASE `{DB}`"))
        .await
        .expect("create database");
    conn.query_drop(format!("USE `{DB}`")).await.expect("use");
    for s in statements {
        conn.query_drop(s)
            .await
            .unwrap_or_else(|e| panic!("{s}\n: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_create_round_trips_through_mysql8_and_mariadb() {
    let Some(mysql8) = Mysql8::start(1, &[]) else {
        return;
    };
    let Some(mariadb) = MariaDb::start(&[]) else {
        return;
    };
    let seed = fresh_seed("show_create_round_trips_through_mysql8_and_mariadb");
    let mut rng = SimRng::new(seed);
    let mut ddls = random_schema(&mut rng, DB, 8);
    // A view with a filter over rows that exist, read back below.
    ddls.push(Ddl::CreateView {
        db: DB.into(),
        name: "v_parent".into(),
        columns: vec!["id".into(), "label".into()],
        select: "SELECT `id` AS `id`,`label` AS `label` FROM `test`.`parent` WHERE `id` > 3".into(),
    });
    let cluster = start_scripted(1, seed).await;
    for d in &ddls[..1] {
        cluster.ddl(d.clone());
    }
    cluster.txn(|txn| {
        for id in 1..=6i64 {
            let row = [Value::Int(id), Value::Bytes(format!("l{id}").into_bytes())];
            txn.insert(DB, "parent", &row).expect("insert");
        }
    });
    for d in &ddls[1..] {
        cluster.ddl(d.clone());
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&cluster.run, dir.path()).await;
    let mut ours = Conn::new(opts(app.local_addr(), "root"))
        .await
        .expect("connect");
    // The catalog follows the binlog: wait until every statement is in it.
    let deadline = std::time::Instant::now() + crate::common::app::WAIT;
    loop {
        let n = rows(
            &mut ours,
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test'",
        )
        .await;
        if n[0][0].as_deref() == Some(ddls.len().to_string().as_str()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the catalog never listed every table and view: {n:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let statements = create_statements(&mut ours, &ddls).await;
    let text = statements.join(";\n");
    let our_facts = facts(&mut ours).await;
    let read: Vec<(i64, String)> = ours
        .query("SELECT * FROM test.v_parent ORDER BY id DESC")
        .await
        .expect("read the view");
    let want: Vec<(i64, String)> = (4..=6).rev().map(|i| (i, format!("l{i}"))).collect();
    assert_eq!(read, want, "a view reads its SELECT at the same snapshot");
    assert_eq!(
        our_facts[0].len(),
        ddls.len(),
        "every table and view listed"
    );

    let mut my = mysql8.conn().await;
    replay(&mut my, &statements).await;
    let my_facts = facts(&mut my).await;
    assert_same("MySQL 8.0", &our_facts, &my_facts, &text);
    // Index visibility and key expressions (MariaDB has neither invisible nor expression
    // indexes).
    let visible = "SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, IS_VISIBLE, EXPRESSION FROM \
                   information_schema.STATISTICS WHERE TABLE_SCHEMA = 'test' \
                   ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX";
    assert_eq!(
        rows(&mut ours, visible).await,
        rows(&mut my, visible).await,
        "index visibility or key expressions differ between tibinlog and MySQL 8.0\n{text}"
    );

    // MariaDB gets the database the way a user copies one: mariadb-dump of tibinlog (tables,
    // then views), loaded. MariaDB runs MySQL's versioned comments below its own version
    // number (10.11 > 8.0.16) and has no NOT ENFORCED: a check MySQL would not enforce is left
    // out of its copy, as it must be for any MySQL 8.0 dump loaded into MariaDB, and so is
    // an expression index (MariaDB has none).
    let Some(tool) = require_tool("mariadb-dump") else {
        return;
    };
    let dumped =
        String::from_utf8(dump_database(&tool, app.local_addr(), DB, &[])).expect("dump is UTF-8");
    let for_maria = dumped
        .lines()
        .filter(|l| !l.contains("/*!80016 NOT ENFORCED */") && !is_expression_key(l))
        .collect::<Vec<_>>()
        .join("\n")
        .replace(",\n)", "\n)");
    load(mariadb.client(), for_maria.as_bytes());
    assert_all_answered(&app, "mariadb-dump");
    let mut maria = mariadb.conn().await;
    let maria_facts = shared(&facts(&mut maria).await);
    let not_enforced: Vec<String> = text
        .lines()
        .filter(|l| l.contains("/*!80016 NOT ENFORCED */"))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect();
    let mut ours_shared = shared(&our_facts);
    // Integer expressions of views (`x0`, `x1`) are INT or BIGINT by each dialect's own rule
    // (MariaDB makes `100000000` INT, MySQL 8.0 BIGINT): their data types are MySQL's only.
    let mut maria_facts = maria_facts;
    for facts in [&mut ours_shared, &mut maria_facts] {
        for r in facts[1].iter_mut() {
            if r[1].as_deref().is_some_and(|c| c.starts_with('x')) {
                r[3] = None;
            }
        }
    }
    let expression_keys: Vec<String> = text
        .lines()
        .filter(|l| is_expression_key(l))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect();
    ours_shared[2].retain(|r| !expression_keys.iter().any(|k| r[1].as_deref() == Some(k)));
    ours_shared[6].retain(|r| !not_enforced.iter().any(|n| r[1].as_deref() == Some(n)));
    ours_shared[7].retain(|r| !not_enforced.iter().any(|n| r[0].as_deref() == Some(n)));
    assert_same("MariaDB 10.11", &ours_shared, &maria_facts, &text);
}

//! Snapshot reads hold PD's GC for as long as they run: an autocommit `SELECT` streamed to a
//! client that reads slowly keeps its timestamp's history while GC advances as far as every
//! other service lets it, and lets go when the read ends.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use tibinlog::sim::Ts;
use tibinlog_protocol::value::Value;

use crate::common::app::{dense_set, master_gtids, opts, start_app, start_scripted, WAIT};

const ROWS: i64 = 4_000;
/// Wide rows, so that the result is far larger than the socket buffers and the scan is still
/// running while the client has read only its first row.
const WIDTH: usize = 3_000;

fn cell(kind: &str, id: i64) -> Value {
    let mut s = format!("{kind}-{id}-");
    s.extend(std::iter::repeat_n('x', WIDTH - s.len()));
    Value::Bytes(s.into_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_streamed_read_holds_gc_until_it_ends() {
    use tibinlog::sim::tidb::types as ty;
    use tibinlog::sim::tidb::{ColumnDef, Ddl, TableDef};
    use tibinlog::tidb::schema::mysql;

    let cluster = start_scripted(1, 41).await;
    cluster.ddl(Ddl::CreateTable {
        db: "test".into(),
        table: TableDef {
            name: "wide".into(),
            columns: vec![
                ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
                ColumnDef::new("v", ty::varchar(WIDTH as u32)),
            ],
            primary_key: vec!["id".into()],
            clustered: true,
            indexes: Vec::new(),
            partition: None,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
    });
    let write = |kind: &'static str, update: bool| {
        for chunk in (1..=ROWS).collect::<Vec<_>>().chunks(500) {
            cluster.txn(|txn| {
                for &id in chunk {
                    let row = [Value::Int(id), cell(kind, id)];
                    if update {
                        txn.update("test", "wide", &row[..1], &row).expect("update");
                    } else {
                        txn.insert("test", "wide", &row).expect("insert");
                    }
                }
            });
        }
    };
    write("old", false);
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&cluster.run, dir.path()).await;
    let (addr, uuid) = (app.local_addr(), app.server_uuid().to_string());
    let wait_gtids = |n: usize| {
        let uuid = uuid.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while master_gtids(addr).await.ok() != Some(dense_set(&uuid, n)) {
                assert!(Instant::now() < deadline, "{n} transactions in the binlog");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_gtids(9).await;

    // An autocommit read, of which the client takes one row.
    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let mut result = conn
        .query_iter("SELECT id, v FROM test.wide")
        .await
        .expect("select");
    let first: (i64, String) =
        mysql_async::from_row(result.next().await.expect("row").expect("a row"));
    assert!(first.1.starts_with("old-"));
    let sim = cluster.run.sim.cluster();
    let service = format!("tibinlog-{uuid}-{}-sql-scans", app.instance_id());
    let deadline = Instant::now() + WAIT;
    let held = loop {
        if let Some(t) = sim.with_core(|c| c.gc.service(service.as_bytes())) {
            break t;
        }
        assert!(Instant::now() < deadline, "the running scan holds GC");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };

    // Every row changes; the capture's own hold moves past the read (as its checkpoint does),
    // and GC goes as far as the services let it.
    write("new", true);
    wait_gtids(17).await;
    let now = sim.tso();
    sim.with_core(|c| c.update_service_safe_point(app.gc_service_id().as_bytes(), 3600, now));
    let safe_point = sim.run_gc(now).await;
    assert_eq!(safe_point, held, "GC stops at the running read");

    // The rest of the read is the snapshot it started at.
    let mut rows = 1;
    while let Some(row) = result.next().await.expect("row") {
        let (id, v): (i64, String) = mysql_async::from_row(row);
        assert_eq!(Value::Bytes(v.into_bytes()), cell("old", id), "row {id}");
        rows += 1;
    }
    assert_eq!(rows, ROWS);
    drop(result);

    // Ended, the read holds nothing; GC passes its timestamp.
    let deadline = Instant::now() + WAIT;
    while sim
        .with_core(|c| c.gc.service(service.as_bytes()))
        .is_some()
    {
        assert!(Instant::now() < deadline, "the finished scan lets go");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(sim.run_gc(now).await > Ts(held.0 + 1));
    let _ = conn.disconnect().await;
    app.stop().await.expect("clean stop");
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

/// `ORDER BY key DESC` reads the table downwards (TiKV's reverse scan, across region
/// boundaries, one at a key and one between keys, and an UNSIGNED key's values above 2^63
/// first), so `ORDER BY pk DESC LIMIT 1` (an incremental snapshot's first query) reads one
/// page, and every order the scan gives equals what a sort gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn descending_key_order_comes_from_a_reverse_scan() {
    use tibinlog::sim::tidb::types as ty;
    use tibinlog::sim::tidb::{ColumnDef, Ddl, TableDef};
    use tibinlog::tidb::key::{encode_record_key, Handle};
    use tibinlog::tidb::schema::mysql;

    let cluster = start_scripted(1, 43).await;
    for (name, unsigned) in [("signed", false), ("unsigned", true)] {
        cluster.ddl(Ddl::CreateTable {
            db: "test".into(),
            table: TableDef {
                name: name.into(),
                columns: vec![
                    ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, unsigned)).not_null(),
                    ColumnDef::new("v", ty::varchar(20)),
                ],
                primary_key: vec!["id".into()],
                clustered: true,
                indexes: Vec::new(),
                partition: None,
                foreign_keys: Vec::new(),
                checks: Vec::new(),
            },
        });
    }
    let signed: Vec<i64> = (-300..=700).step_by(3).collect();
    let unsigned: Vec<u64> = (0..200u64)
        .map(|i| i * 7)
        .chain((0..200u64).map(|i| u64::MAX - i * 11))
        .collect();
    cluster.txn(|txn| {
        for &id in &signed {
            let row = [Value::Int(id), Value::Bytes(format!("s{id}").into_bytes())];
            txn.insert("test", "signed", &row).expect("insert");
        }
        for &id in &unsigned {
            let row = [Value::UInt(id), Value::Bytes(format!("u{id}").into_bytes())];
            txn.insert("test", "unsigned", &row).expect("insert");
        }
    });
    // Region boundaries inside the signed table: at a row's key and between two rows.
    let table_id = |name: &str| {
        let tidb = cluster.run.sim.tidb();
        let t = tidb.lock().expect("tidb");
        t.table("test", name).expect("table").info.id
    };
    let sim = cluster.run.sim.cluster();
    for h in [99, 301] {
        let mut key = Vec::new();
        encode_record_key(&mut key, table_id("signed"), &Handle::Int(h));
        sim.split_at(&key).await.expect("split");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&cluster.run, dir.path()).await;
    let (addr, uuid) = (app.local_addr(), app.server_uuid().to_string());
    let deadline = Instant::now() + Duration::from_secs(60);
    while master_gtids(addr).await.ok() != Some(dense_set(&uuid, 3)) {
        assert!(Instant::now() < deadline, "the rows reach the binlog");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");

    let mut want = signed.clone();
    want.reverse();
    let got: Vec<i64> = conn
        .query("SELECT id FROM test.signed ORDER BY id DESC")
        .await
        .expect("select");
    assert_eq!(got, want);
    let top: Option<(i64, String)> = conn
        .query_first("SELECT id, v FROM test.signed ORDER BY id DESC LIMIT 1")
        .await
        .expect("top");
    assert_eq!(top, Some((699, "s699".to_owned())));
    let below: Vec<i64> = conn
        .query("SELECT id FROM test.signed WHERE id < 301 AND id > -5 ORDER BY id DESC LIMIT 4, 3")
        .await
        .expect("range");
    let want_below: Vec<i64> = want
        .iter()
        .copied()
        .filter(|&i| i < 301 && i > -5)
        .skip(4)
        .take(3)
        .collect();
    assert_eq!(below, want_below);

    // MIN and MAX of the key read the table's two ends (the WHERE applied before).
    for (filter, want) in [
        ("", (Some(-300), Some(699))),
        ("WHERE id > 100 AND id < 200", (Some(102), Some(198))),
        ("WHERE id > 100 AND v <> 's102'", (Some(105), Some(699))),
        ("WHERE id > 10000", (None, None)),
    ] {
        let got: Option<(Option<i64>, Option<i64>)> = conn
            .query_first(format!("SELECT MIN(id), MAX(id) FROM test.signed {filter}"))
            .await
            .expect("min max");
        assert_eq!(got, Some(want), "{filter}");
    }
    let ends: Option<(u64, u64, u64)> = conn
        .query_first("SELECT MIN(id), MAX(id), MAX(id) - MIN(id) FROM test.unsigned")
        .await
        .expect("unsigned ends");
    assert_eq!(ends, Some((0, u64::MAX, u64::MAX)));

    let mut want = unsigned.clone();
    want.sort_unstable_by(|a, b| b.cmp(a));
    let got: Vec<u64> = conn
        .query("SELECT id FROM test.unsigned ORDER BY id DESC")
        .await
        .expect("select unsigned");
    assert_eq!(got, want);
    // A sort by something else still sorts (and keeps only what the LIMIT shows).
    let by_text: Vec<String> = conn
        .query("SELECT v FROM test.unsigned ORDER BY v DESC LIMIT 2")
        .await
        .expect("sorted");
    let mut texts: Vec<String> = unsigned.iter().map(|i| format!("u{i}")).collect();
    texts.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(by_text, texts[..2]);
    let _ = conn.disconnect().await;
    app.stop().await.expect("clean stop");
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

/// Waits until `SHOW MASTER STATUS` on `conn` shows `n` transactions; returns its position.
async fn wait_gtids(conn: &mut mysql_async::Conn, uuid: &str, n: usize) -> (String, u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let (file, pos, gtids) = crate::status_on(conn).await;
        if gtids == dense_set(uuid, n) {
            return (file, pos);
        }
        assert!(
            Instant::now() < deadline,
            "{n} transactions reach the binlog"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A session that pinned `@@tidb_snapshot` reads the tables as they were at that timestamp
/// however many DDLs the binlog has written since (the catalog versions it reads are kept
/// while it holds them), and a session that pins that timestamp afterwards sees the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pinned_snapshot_keeps_its_catalog_across_later_ddl() {
    use tibinlog::sim::tidb::types as ty;
    use tibinlog::sim::tidb::{ColumnDef, Ddl};
    use tibinlog::tidb::schema::mysql;

    let cluster = start_scripted(1, 43).await;
    cluster.ddl(Ddl::CreateTable {
        db: "test".into(),
        table: crate::common::sim::small_table("pinned", None),
    });
    cluster.txn(|t| {
        t.insert(
            "test",
            "pinned",
            &[Value::Int(1), Value::Bytes(b"v".to_vec())],
        )
        .expect("insert")
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&cluster.run, &dir.path().join("data")).await;
    let uuid = app.server_uuid().to_string();
    let mut conn = mysql_async::Conn::new(opts(app.local_addr(), "root"))
        .await
        .expect("connect");
    let (file, pos) = wait_gtids(&mut conn, &uuid, 2).await;
    let ts: Option<u64> = conn
        .query_first(format!("SELECT TIBINLOG_TS_FOR_POS('{file}', {pos})"))
        .await
        .expect("ts for the position")
        .flatten();
    let ts = ts.expect("the newest position has a timestamp");
    conn.query_drop(format!("SET @@tidb_snapshot = {ts}"))
        .await
        .expect("pin");
    let before = crate::create_table(&mut conn, "pinned").await;
    // More columns added than the versions always kept, each DDL durable (and passed by the
    // snapshot point) before the next.
    let mut other = mysql_async::Conn::new(opts(app.local_addr(), "root"))
        .await
        .expect("connect");
    let added = tibinlog::binlog_store::catalog_history::KEEP_NEWEST + 2;
    for n in 0..added {
        cluster.ddl(Ddl::AddColumn {
            db: "test".into(),
            table: "pinned".into(),
            column: ColumnDef::new(&format!("c{n}"), ty::int(mysql::TYPE_LONG, false)),
        });
        wait_gtids(&mut other, &uuid, 3 + n).await;
    }
    let now = crate::create_table(&mut other, "pinned").await;
    assert!(now.contains(&format!("`c{}`", added - 1)), "{now}");
    assert_eq!(crate::create_table(&mut conn, "pinned").await, before);
    let row: Vec<mysql_async::Row> = conn.query("SELECT * FROM test.pinned").await.expect("read");
    assert_eq!(row.len(), 1);
    assert_eq!(row[0].columns_ref().len(), 2, "the row as it was at {ts}");
    other
        .query_drop(format!("SET @@tidb_snapshot = {ts}"))
        .await
        .expect("pin afterwards");
    assert_eq!(crate::create_table(&mut other, "pinned").await, before);
    app.stop().await.expect("app stops");
}

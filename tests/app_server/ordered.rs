//! Reads in key order for every key shape: an integer key, an UNSIGNED one, a composite and a
//! VARCHAR common handle, a non-clustered primary key and secondary indexes (index lookups),
//! partitioned (the partitions' ordered scans merged) or not, both directions; the chunk
//! queries of Flink and Debezium's incremental snapshots read the rows of their chunk (their
//! LIMIT sizes the pages), not the table (counted at the simulated stores). The catalog's size
//! estimates of the same tables come from PD's region statistics.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use tibinlog::sim::tidb::types as ty;
use tibinlog::sim::tidb::{ColumnDef, Ddl, IndexDef, PartitionDef, TableDef};
use tibinlog::tidb::schema::mysql;
use tibinlog_protocol::value::Value;

use crate::common::app::{dense_set, master_gtids, opts, start_app, start_scripted};
use crate::common::demo::fresh_seed;

/// splitmix64: the test's random choices from the run's seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn word(&mut self, max_len: u64) -> String {
        let len = 1 + self.next() % max_len;
        (0..len)
            .map(|_| {
                char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[(self.next() % 36) as usize])
            })
            .collect()
    }
}

fn table(name: &str, columns: Vec<ColumnDef>, key: &[&str], part: Option<PartitionDef>) -> Ddl {
    nonclustered(name, columns, key, part, true, Vec::new())
}

fn nonclustered(
    name: &str,
    columns: Vec<ColumnDef>,
    key: &[&str],
    part: Option<PartitionDef>,
    clustered: bool,
    indexes: Vec<IndexDef>,
) -> Ddl {
    Ddl::CreateTable {
        db: "test".into(),
        table: TableDef {
            name: name.into(),
            columns,
            primary_key: key.iter().map(|k| (*k).to_owned()).collect(),
            clustered,
            indexes,
            partition: part,
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        },
    }
}

fn distinct<T: Ord + Clone>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

/// The data of the four tables, sorted by key.
struct Data {
    hp: Vec<i64>,
    hu: Vec<u64>,
    ck: Vec<(String, i32)>,
    vk: Vec<String>,
}

fn data(rng: &mut Rng) -> Data {
    let names: Vec<String> = (0..60).map(|_| rng.word(10)).collect();
    Data {
        hp: distinct(
            (0..700)
                .map(|_| (rng.next() % 2_000_001) as i64 - 1_000_000)
                .collect(),
        ),
        hu: distinct(
            (0..300)
                .map(|i| {
                    if i % 2 == 0 {
                        rng.next() >> 1
                    } else {
                        rng.next() | 1 << 63
                    }
                })
                .collect(),
        ),
        ck: distinct(
            (0..6_000)
                .map(|_| {
                    let n = &names[(rng.next() % names.len() as u64) as usize];
                    (n.clone(), (rng.next() % 100_000) as i32 - 50_000)
                })
                .collect(),
        ),
        vk: distinct((0..5_000).map(|_| rng.word(12)).collect()),
    }
}

/// `nk.num` of the `i`th row: unique, every seventh NULL (entries of a unique index that keep
/// their handle in the key), in an order unrelated to the rows'.
fn num(i: usize) -> Value {
    if i % 7 == 3 {
        Value::Null
    } else {
        Value::Int((i as i64 * 7_919) % 100_003 - 50_000)
    }
}

fn create_and_load(cluster: &crate::common::app::Scripted, d: &Data) {
    let int = |unsigned| ty::int(mysql::TYPE_LONGLONG, unsigned);
    let int4 = ty::int(mysql::TYPE_LONG, false);
    let hash = |column: &str, count| {
        Some(PartitionDef::Hash {
            column: column.into(),
            count,
        })
    };
    let id = |unsigned| ColumnDef::new("id", int(unsigned)).not_null();
    let v = ColumnDef::new("v", ty::varchar(20));
    cluster.ddl(table(
        "hp",
        vec![id(false), v.clone()],
        &["id"],
        hash("id", 4),
    ));
    cluster.ddl(table(
        "hu",
        vec![id(true), v.clone()],
        &["id"],
        hash("id", 3),
    ));
    let name = ColumnDef::new("name", ty::varchar(32)).not_null();
    let n = ColumnDef::new("n", int4.clone()).not_null();
    cluster.ddl(table(
        "ck",
        vec![name, n, v.clone()],
        &["name", "n"],
        hash("n", 3),
    ));
    let code = ColumnDef::new("code", ty::varchar(40)).not_null();
    cluster.ddl(table("vk", vec![code.clone(), v.clone()], &["code"], None));
    // The same rows under non-clustered keys: the primary key and a unique and a plain
    // secondary index are index entries pointing at `_tidb_rowid` rows.
    let name = ColumnDef::new("name", ty::varchar(32)).not_null();
    let n = ColumnDef::new("n", int4).not_null();
    let num_col = ColumnDef::new("num", int(false));
    let by = |n: &str, c: &[&str], u| IndexDef::new(n, c, u);
    let ix = vec![by("u_num", &["num"], true), by("k_v", &["v"], false)];
    cluster.ddl(nonclustered(
        "nk",
        vec![name, n, v.clone(), num_col],
        &["name", "n"],
        None,
        false,
        ix,
    ));
    let cols = vec![id(false), code, v];
    let ix = vec![by("k_v", &["v"], false)];
    cluster.ddl(nonclustered(
        "np",
        cols,
        &["code", "id"],
        hash("id", 4),
        false,
        ix,
    ));
    let text = |s: String| Value::Bytes(s.into_bytes());
    cluster.txn(|txn| {
        for &i in &d.hp {
            let row = [Value::Int(i), text(format!("p{i}"))];
            txn.insert("test", "hp", &row).expect("hp");
        }
        for &i in &d.hu {
            let row = [Value::UInt(i), text(format!("u{i}"))];
            txn.insert("test", "hu", &row).expect("hu");
        }
    });
    cluster.txn(|txn| {
        for (name, n) in &d.ck {
            let row = [
                text(name.clone()),
                Value::Int(i64::from(*n)),
                text(name.clone()),
            ];
            txn.insert("test", "ck", &row).expect("ck");
        }
        for code in &d.vk {
            let row = [text(code.clone()), text(code.clone())];
            txn.insert("test", "vk", &row).expect("vk");
        }
    });
    cluster.txn(|txn| {
        for (i, (name, n)) in d.ck.iter().enumerate() {
            let row = [
                text(name.clone()),
                Value::Int(i64::from(*n)),
                text(name.clone()),
                num(i),
            ];
            txn.insert("test", "nk", &row).expect("nk");
        }
        for (i, code) in d.vk.iter().enumerate() {
            let row = [Value::Int(i as i64), text(code.clone()), text(code.clone())];
            txn.insert("test", "np", &row).expect("np");
        }
    });
}

type Conn = mysql_async::Conn;
type Sim = tibinlog::sim::server::SimCluster;

/// A position in the middle half of `len` rows.
fn pick(rng: &mut Rng, len: usize) -> usize {
    (rng.next() % (len as u64 / 2)) as usize + len / 4
}

/// Integer keys, partitions merged, both directions, ranges and the two ends.
async fn integer_keys(conn: &mut Conn, d: &Data, rng: &mut Rng) {
    let got: Vec<i64> = conn
        .query("SELECT id FROM test.hp ORDER BY id")
        .await
        .expect("hp");
    assert_eq!(got, d.hp);
    let got: Vec<i64> = conn
        .query("SELECT id FROM test.hp ORDER BY id DESC LIMIT 5")
        .await
        .expect("hp desc");
    assert_eq!(got, d.hp.iter().rev().take(5).copied().collect::<Vec<_>>());
    let at = pick(rng, d.hp.len());
    let got: Vec<i64> = conn
        .query(format!(
            "SELECT id FROM test.hp WHERE id > {} ORDER BY test.hp.id LIMIT 7",
            d.hp[at]
        ))
        .await
        .expect("hp range");
    assert_eq!(got, d.hp[at + 1..at + 8]);
    let ends: Option<(i64, i64)> = conn
        .query_first("SELECT MIN(id), MAX(id) FROM test.hp")
        .await
        .expect("hp ends");
    assert_eq!(ends, Some((d.hp[0], d.hp[d.hp.len() - 1])));
    let got: Vec<u64> = conn
        .query("SELECT id FROM test.hu ORDER BY id DESC")
        .await
        .expect("hu");
    assert_eq!(got, d.hu.iter().rev().copied().collect::<Vec<_>>());
}

/// A composite VARCHAR-first key: order, and Debezium's keyset chunk after a boundary.
async fn composite_key(conn: &mut Conn, sim: &Sim, d: &Data, rng: &mut Rng) {
    let got: Vec<(String, i32)> = conn
        .query("SELECT name, n FROM test.ck ORDER BY name, n")
        .await
        .expect("ck");
    assert_eq!(got, d.ck);
    let got: Vec<(String, i32)> = conn
        .query("SELECT name, n FROM test.ck ORDER BY name DESC, n DESC LIMIT 10")
        .await
        .expect("ck desc");
    assert_eq!(got, d.ck.iter().rev().take(10).cloned().collect::<Vec<_>>());
    let at = pick(rng, d.ck.len());
    let (b_name, b_n) = &d.ck[at];
    let before = sim.scanned_pairs();
    let got: Vec<(String, i32)> = conn
        .query(format!(
            "SELECT name, n FROM test.ck WHERE ((`name` > '{b_name}') OR (`name` = '{b_name}' \
             AND `n` > {b_n})) ORDER BY `name`, `n` LIMIT 10"
        ))
        .await
        .expect("ck chunk");
    let read = sim.scanned_pairs() - before;
    assert_eq!(got, d.ck[at + 1..at + 11]);
    assert!(
        read <= 3 * 10,
        "a keyset chunk of 10 over 3 partitions read {read} of {} rows",
        d.ck.len()
    );
    // The same chunk as a row-value comparison, downwards.
    let before = sim.scanned_pairs();
    let got: Vec<(String, i32)> = conn
        .query(format!(
            "SELECT name, n FROM test.ck WHERE (name, n) < ('{b_name}', {b_n}) \
             ORDER BY name DESC, n DESC LIMIT 10"
        ))
        .await
        .expect("ck row chunk");
    let read = sim.scanned_pairs() - before;
    let want: Vec<(String, i32)> = d.ck[at - 10..at].iter().rev().cloned().collect();
    assert_eq!(got, want);
    assert!(
        read <= 3 * 10,
        "a row-value chunk of 10 over 3 partitions read {read} of {} rows",
        d.ck.len()
    );
}

/// A VARCHAR key: Flink's chunk bound, chunk read and next-chunk start.
async fn varchar_key(conn: &mut Conn, sim: &Sim, d: &Data, rng: &mut Rng) {
    let at = pick(rng, d.vk.len());
    let before = sim.scanned_pairs();
    let bound: Option<String> = conn
        .query_first(format!(
            "SELECT MAX(`code`) FROM (SELECT `code` FROM `test`.`vk` WHERE `code` >= '{}' \
             ORDER BY `code` ASC LIMIT 50) AS T",
            d.vk[at]
        ))
        .await
        .expect("vk bound");
    let read = sim.scanned_pairs() - before;
    assert_eq!(bound.as_deref(), Some(d.vk[at + 49].as_str()));
    assert!(
        read <= 50,
        "a chunk bound of 50 rows read {read} of {} rows",
        d.vk.len()
    );
    let mut got: Vec<String> = conn
        .query(format!(
            "SELECT `code` FROM `test`.`vk` WHERE `code` >= '{0}' AND NOT (`code` = '{0}') \
             AND `code` <= '{1}'",
            d.vk[at],
            d.vk[at + 49]
        ))
        .await
        .expect("vk chunk");
    got.sort();
    assert_eq!(got, d.vk[at + 1..at + 50]);
    let next: Option<String> = conn
        .query_first(format!(
            "SELECT MIN(`code`) FROM `test`.`vk` WHERE `code` > '{}'",
            d.vk[at]
        ))
        .await
        .expect("vk next");
    assert_eq!(next.as_deref(), Some(d.vk[at + 1].as_str()));
    let last: Vec<String> = conn
        .query("SELECT code FROM test.vk ORDER BY code DESC LIMIT 3")
        .await
        .expect("vk desc");
    assert_eq!(last, d.vk.iter().rev().take(3).cloned().collect::<Vec<_>>());
}

/// Non-clustered keys: the rows come through index entries, in the index's order.
async fn index_lookups(conn: &mut Conn, sim: &Sim, d: &Data, rng: &mut Rng) {
    let got: Vec<(String, i32)> = conn
        .query("SELECT name, n FROM test.nk ORDER BY name, n")
        .await
        .expect("nk");
    assert_eq!(got, d.ck);
    let at = pick(rng, d.ck.len());
    let (b_name, b_n) = &d.ck[at];
    let before = sim.scanned_pairs();
    let got: Vec<(String, i32, String)> = conn
        .query(format!(
            "SELECT name, n, v FROM test.nk WHERE ((`name` > '{b_name}') OR (`name` = \
             '{b_name}' AND `n` > {b_n})) ORDER BY `name`, `n` LIMIT 10"
        ))
        .await
        .expect("nk chunk");
    let read = sim.scanned_pairs() - before;
    let want: Vec<(String, i32, String)> = d.ck[at + 1..at + 11]
        .iter()
        .map(|(a, n)| (a.clone(), *n, a.clone()))
        .collect();
    assert_eq!(got, want);
    assert!(
        read <= 10,
        "a keyset chunk of 10 over an index read {read} entries of {}",
        d.ck.len()
    );

    // A unique index with NULLs (first upwards, last downwards, skipped by MIN and MAX).
    let mut nums: Vec<Option<i64>> = (0..d.ck.len())
        .map(|i| match num(i) {
            Value::Int(x) => Some(x),
            _ => None,
        })
        .collect();
    nums.sort();
    let got: Vec<Option<i64>> = conn
        .query("SELECT num FROM test.nk ORDER BY num")
        .await
        .expect("num");
    assert_eq!(got, nums);
    let got: Vec<Option<i64>> = conn
        .query("SELECT num FROM test.nk ORDER BY num DESC LIMIT 4")
        .await
        .expect("num desc");
    assert_eq!(got, nums.iter().rev().take(4).copied().collect::<Vec<_>>());
    let present: Vec<i64> = nums.iter().flatten().copied().collect();
    let ends: Option<(Option<i64>, Option<i64>)> = conn
        .query_first("SELECT MIN(num), MAX(num) FROM test.nk")
        .await
        .expect("num ends");
    assert_eq!(
        ends,
        Some((present.first().copied(), present.last().copied()))
    );
    // A range of the unique index, in no particular order.
    let x = present[pick(rng, present.len())];
    let mut got: Vec<i64> = conn
        .query(format!(
            "SELECT num FROM test.nk WHERE num >= {x} AND num < {}",
            x + 5_000
        ))
        .await
        .expect("num range");
    got.sort_unstable();
    let want: Vec<i64> = present
        .iter()
        .copied()
        .filter(|&n| n >= x && n < x + 5_000)
        .collect();
    assert_eq!(got, want);
    // A non-unique index: ties in handle order, values in the index's.
    let got: Vec<String> = conn
        .query("SELECT v FROM test.nk ORDER BY v DESC LIMIT 30")
        .await
        .expect("v desc");
    let mut vs: Vec<String> = d.ck.iter().map(|(a, _)| a.clone()).collect();
    vs.sort();
    assert_eq!(got, vs.iter().rev().take(30).cloned().collect::<Vec<_>>());

    // A partitioned table's non-clustered key: each partition's index merged.
    let mut want: Vec<(String, i64)> =
        d.vk.iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), i as i64))
            .collect();
    want.sort();
    let got: Vec<(String, i64)> = conn
        .query("SELECT code, id FROM test.np ORDER BY code, id")
        .await
        .expect("np");
    assert_eq!(got, want);
    let got: Vec<(String, i64)> = conn
        .query("SELECT code, id FROM test.np ORDER BY code DESC, id DESC LIMIT 5")
        .await
        .expect("np desc");
    assert_eq!(got, want.iter().rev().take(5).cloned().collect::<Vec<_>>());
}

/// `TABLE_ROWS` and the sizes come from PD's region statistics: exact for a table whose
/// regions hold only its records (each new table and partition starts a region, as TiDB splits
/// them), an over-estimate when index entries share them.
async fn size_estimates(conn: &mut Conn, d: &Data) {
    let rows: Vec<(String, u64, u64, u64)> = conn
        .query(
            "SELECT TABLE_NAME, TABLE_ROWS, DATA_LENGTH, AVG_ROW_LENGTH \
             FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' ORDER BY TABLE_NAME",
        )
        .await
        .expect("tables");
    let exact = [
        ("ck", d.ck.len()),
        ("hp", d.hp.len()),
        ("hu", d.hu.len()),
        ("vk", d.vk.len()),
    ];
    for (name, table_rows, data_length, avg) in &rows {
        assert!(*data_length >= 16_384, "{name}: {data_length}");
        assert_eq!(*avg, data_length / table_rows.max(&1), "{name}");
        if let Some((_, n)) = exact.iter().find(|(t, _)| t == name) {
            assert_eq!(*table_rows, *n as u64, "{name}: one key per row");
        }
    }
    let count = |name: &str| rows.iter().find(|r| r.0 == name).map(|r| r.1);
    // nk: the row, its primary key entry and two index entries per row.
    let nk = count("nk").expect("nk");
    assert!(
        nk >= d.ck.len() as u64 && nk <= 4 * d.ck.len() as u64,
        "{nk}"
    );
    let parts: Vec<(String, u64)> = conn
        .query(
            "SELECT PARTITION_NAME, TABLE_ROWS FROM information_schema.PARTITIONS \
             WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'hp' ORDER BY PARTITION_NAME",
        )
        .await
        .expect("partitions");
    assert_eq!(parts.len(), 4);
    assert!(parts.iter().all(|(_, n)| *n > 0), "{parts:?}");
    let sum: u64 = parts.iter().map(|(_, n)| n).sum();
    assert_eq!(sum, d.hp.len() as u64);
    let status: Vec<mysql_async::Row> = conn
        .query("SHOW TABLE STATUS FROM test LIKE 'vk'")
        .await
        .expect("status");
    let got: Option<u64> = status[0].get("Rows");
    assert_eq!(got, Some(d.vk.len() as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_key_shape_reads_in_order_and_chunks_read_their_rows() {
    let seed = fresh_seed("ordered_reads");
    let mut rng = Rng(seed);
    let d = data(&mut rng);
    let cluster = start_scripted(1, seed).await;
    create_and_load(&cluster, &d);
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&cluster.run, dir.path()).await;
    let (addr, uuid) = (app.local_addr(), app.server_uuid().to_string());
    let deadline = Instant::now() + Duration::from_secs(60);
    while master_gtids(addr).await.ok() != Some(dense_set(&uuid, 9)) {
        assert!(Instant::now() < deadline, "the rows reach the binlog");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let sim = cluster.run.sim.cluster();
    integer_keys(&mut conn, &d, &mut rng).await;
    composite_key(&mut conn, sim, &d, &mut rng).await;
    varchar_key(&mut conn, sim, &d, &mut rng).await;
    index_lookups(&mut conn, sim, &d, &mut rng).await;
    size_estimates(&mut conn, &d).await;
    let _ = conn.disconnect().await;
    app.stop().await.expect("clean stop");
    cluster.run.sim.shutdown().await.expect("sim shutdown");
}

//! The mounter against the simulated TiDB 8.5: the schema store bootstrapped from meta-key
//! snapshots of the core, raw rows rebuilt from the core's committed write records (what TiKV's
//! change stream reports: value, old value, start/commit ts), DDL jobs taken from the
//! `mysql.tidb_ddl_job` rows among them. Mounted rows are compared with the simulator's truth
//! log, rendered with `tidb::text::render` exactly as the truth log renders them.

mod common;

use std::cell::RefCell;
use std::sync::Arc;

use serde_json::{json, Value as Json};
use tibinlog::model::{Op, RawRow, RegionId, Ts};
use tibinlog::mounter::{
    MetaReader, Mounted, Mounter, MounterError, RowChange, RowOp, SchemaStore, TableFilter,
};
use tibinlog::sim::cdc::CdcConfig;
use tibinlog::sim::core::SimCore;
use tibinlog::sim::mvcc::WriteType;
use tibinlog::sim::tidb::{
    types as ty, ColumnDef, Ddl, IndexDef, PartitionDef, TableDef, Tidb, TidbConfig, TruthCollector,
};
use tibinlog::sim::ts::ManualClock;
use tibinlog::sim::workload::{gen, Mix, Workload, WorkloadConfig};
use tibinlog::tidb::key::{record_key, Handle, DDL_JOB_TABLE_ID};
use tibinlog::tidb::schema::mysql;
use tibinlog::tidb::text;
use tibinlog_protocol::value::Value;

use common::truth::{self, row_json};

/// Snapshot reads over the simulator's MVCC store.
struct CoreReader<'a>(RefCell<&'a mut SimCore>);

impl MetaReader for CoreReader<'_> {
    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Ts,
    ) -> tibinlog::mounter::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let pairs = self
            .0
            .borrow_mut()
            .mvcc
            .scan(start, end, 0, tibinlog::sim::Ts(ts.0), false, &[])
            .map_err(|e| MounterError::Snapshot {
                ts,
                source: Box::new(e),
            })?;
        pairs
            .into_iter()
            .map(|p| match p.result {
                Ok(r) => Ok((p.key, r.value)),
                Err(e) => Err(MounterError::Snapshot {
                    ts,
                    source: Box::new(e),
                }),
            })
            .collect()
    }
    fn get(&self, key: &[u8], ts: Ts) -> tibinlog::mounter::Result<Option<Vec<u8>>> {
        self.0
            .borrow_mut()
            .mvcc
            .get(key, tibinlog::sim::Ts(ts.0), &[])
            .map(|r| r.map(|r| r.value))
            .map_err(|e| MounterError::Snapshot {
                ts,
                source: Box::new(e),
            })
    }
}

fn cluster() -> (SimCore, ManualClock, Tidb) {
    let clock = ManualClock::new(1_700_000_000_000);
    let mut core =
        SimCore::new(&[1, 2], CdcConfig::default(), Arc::new(clock.clone()), 7).expect("core");
    let (tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("bootstrap");
    (core, clock, tidb)
}

fn now(core: &mut SimCore) -> Ts {
    Ts(core.ts().0)
}

fn bootstrap(core: &mut SimCore, at: Ts, filter: TableFilter) -> SchemaStore {
    SchemaStore::bootstrap(&CoreReader(RefCell::new(core)), at, filter).expect("schema bootstrap")
}

/// Every committed data change with `commit_ts > after`, as TiKV's CDC would report it, in
/// `(commit_ts, start_ts, key)` order. Writes tagged as lossy DDL reorg are dropped, as TiKV does.
fn raw_rows(core: &SimCore, after: Ts) -> Vec<RawRow> {
    let mut rows = Vec::new();
    for (key, entry) in core.mvcc.entries_from(b"") {
        for (commit_ts, w) in entry.writes_newest_first() {
            if commit_ts.0 <= after.0 || w.txn_source & 0xff00 != 0 {
                continue;
            }
            let op = match w.write_type {
                WriteType::Put => Op::Put,
                WriteType::Delete => Op::Delete,
                WriteType::Lock | WriteType::Rollback => continue,
            };
            let value = match op {
                Op::Put => entry
                    .value_of(w.start_ts, w.short_value.as_ref())
                    .expect("value")
                    .to_vec(),
                Op::Delete => Vec::new(),
            };
            let old_value = entry
                .committed_value_at(commit_ts.prev())
                .map(|(_, v)| v.to_vec())
                .unwrap_or_default();
            rows.push(RawRow {
                op,
                key: key.to_vec(),
                value,
                old_value,
                start_ts: Ts(w.start_ts.0),
                commit_ts: Ts(commit_ts.0),
                region_id: RegionId(1),
            });
        }
    }
    rows.sort_by(|a, b| (a.commit_ts, a.start_ts, &a.key).cmp(&(b.commit_ts, b.start_ts, &b.key)));
    rows
}

/// Mounts everything and renders transactions as truth-log JSON (rows sorted, DDL normalised).
fn mount_all(m: &mut Mounter, rows: &[RawRow]) -> Vec<Json> {
    let mut txns: Vec<Json> = Vec::new();
    let mut cur: Option<(Ts, Ts, Vec<String>)> = None;
    let flush = |cur: &mut Option<(Ts, Ts, Vec<String>)>, txns: &mut Vec<Json>| {
        if let Some((s, c, mut r)) = cur.take() {
            r.sort();
            let rows: Vec<Json> = r
                .iter()
                .map(|x| serde_json::from_str(x).expect("json"))
                .collect();
            txns.push(json!({"start_ts": s.0, "commit_ts": c.0, "rows": rows, "ddl": null}));
        }
    };
    for raw in rows {
        match m.mount(raw).expect("mount") {
            Mounted::Row(c) => {
                if cur
                    .as_ref()
                    .is_some_and(|(s, c2, _)| (*s, *c2) != (c.start_ts, c.commit_ts))
                {
                    flush(&mut cur, &mut txns);
                }
                cur.get_or_insert_with(|| (c.start_ts, c.commit_ts, Vec::new()))
                    .2
                    .push(row_json(&c).to_string());
            }
            Mounted::Ddl(evs) => {
                flush(&mut cur, &mut txns);
                for e in evs {
                    txns.push(json!({"start_ts": e.start_ts.0, "commit_ts": e.commit_ts.0, "rows": [], "ddl": e.query}));
                }
            }
            Mounted::Skipped => {}
        }
    }
    flush(&mut cur, &mut txns);
    txns
}

fn truth_json(lines: &[String]) -> Vec<Json> {
    truth::normalized(lines)
}

#[test]
fn workload_rows_and_ddl_match_the_truth_log() {
    let (mut core, clock, mut tidb) = cluster();
    let start = now(&mut core);
    let truth = TruthCollector::new();
    tidb.set_truth_sink(Box::new(truth.clone()));
    let cfg = WorkloadConfig {
        seed: 19,
        txns: 300,
        large_rows: 50,
        mix: Mix {
            ddl: 8,
            ..Mix::default()
        },
        ..WorkloadConfig::default()
    };
    let mut wl = Workload::new(cfg, Some(clock));
    wl.setup(&mut tidb, &mut core).expect("setup");
    wl.run(&mut tidb, &mut core, |_| {}).expect("run");

    let store = bootstrap(&mut core, start, TableFilter::all());
    let mut m = Mounter::new(store);
    let rows = raw_rows(&core, start);
    let ours = mount_all(&mut m, &rows);
    let want = truth_json(&truth.lines());
    assert!(want.len() > 250, "workload too small: {}", want.len());
    assert!(
        want.iter().filter(|t| !t["ddl"].is_null()).count() >= 8,
        "want DDLs in the run"
    );
    // The seed gives the DDLs that change which physical table a row is in.
    for kind in [
        "RENAME TABLE",
        "TRUNCATE PARTITION",
        "EXCHANGE PARTITION",
        "TRUNCATE TABLE",
        "CREATE TABLE `wl`.`t_batch",
    ] {
        assert!(
            want.iter()
                .any(|t| t["ddl"].as_str().is_some_and(|d| d.contains(kind))),
            "seed 19 gives no {kind}"
        );
    }
    for (i, (a, b)) in ours.iter().zip(&want).enumerate() {
        assert_eq!(a, b, "transaction {i} differs");
    }
    assert_eq!(ours.len(), want.len());
}

fn all_types_table(name: &str) -> TableDef {
    let mut cols = vec![ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null()];
    cols.extend(gen::all_type_columns());
    TableDef {
        name: name.into(),
        columns: cols,
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: vec![IndexDef::new("i_int", &["c_int"], false)],
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

use common::sim::small_table as small;

fn ddl(core: &mut SimCore, tidb: &mut Tidb, d: Ddl) -> Ts {
    Ts(tidb.execute_ddl(core, &d).expect("ddl").finished_ts.0)
}

fn insert(core: &mut SimCore, tidb: &mut Tidb, table: &str, row: Vec<Value>) -> Ts {
    let mut t = tidb.begin(core);
    t.insert("test", table, &row).expect("insert");
    Ts(t.commit().expect("commit").commit_ts.0)
}

fn changes(m: &mut Mounter, rows: &[RawRow]) -> Vec<RowChange> {
    rows.iter()
        .filter_map(|r| match m.mount(r).expect("mount") {
            Mounted::Row(c) => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn add_column_truncate_and_partitions() {
    let (mut core, _clock, mut tidb) = cluster();
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateTable {
            db: "test".into(),
            table: small("t", None),
        },
    );
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateTable {
            db: "test".into(),
            table: small(
                "p",
                Some(PartitionDef::Hash {
                    column: "id".into(),
                    count: 3,
                }),
            ),
        },
    );
    let start = now(&mut core);
    insert(
        &mut core,
        &mut tidb,
        "t",
        vec![Value::Int(1), Value::Bytes(b"a".to_vec())],
    );
    let added = ddl(
        &mut core,
        &mut tidb,
        Ddl::AddColumn {
            db: "test".into(),
            table: "t".into(),
            column: ColumnDef::new("n", ty::int(mysql::TYPE_LONG, false)).default(Value::Int(42)),
        },
    );
    insert(
        &mut core,
        &mut tidb,
        "t",
        vec![Value::Int(2), Value::Bytes(b"b".to_vec()), Value::Int(7)],
    );
    {
        let mut t = tidb.begin(&mut core);
        t.update(
            "test",
            "t",
            &[Value::Int(1)],
            &[Value::Int(1), Value::Bytes(b"a2".to_vec()), Value::Int(8)],
        )
        .expect("update");
        t.commit().expect("commit");
    }
    for id in 1..=4 {
        insert(&mut core, &mut tidb, "p", vec![Value::Int(id), Value::Null]);
    }
    let old_id = tidb.table("test", "t").expect("t").info.id;
    let truncated = ddl(
        &mut core,
        &mut tidb,
        Ddl::TruncateTable {
            db: "test".into(),
            table: "t".into(),
        },
    );
    insert(
        &mut core,
        &mut tidb,
        "t",
        vec![Value::Int(3), Value::Null, Value::Null],
    );
    let new_id = tidb.table("test", "t").expect("t").info.id;
    assert_ne!(old_id, new_id);

    let store = bootstrap(&mut core, start, TableFilter::all());
    let mut m = Mounter::new(store);
    let got = changes(&mut m, &raw_rows(&core, start));
    let t_rows: Vec<&RowChange> = got.iter().filter(|c| c.table.name() == "t").collect();
    assert_eq!(t_rows.len(), 4);
    // before the ADD COLUMN: the old two-column schema
    assert_eq!(t_rows[0].after.as_ref().map(Vec::len), Some(2));
    assert!(t_rows[0].commit_ts < added);
    // after: three columns; the old row's before image gets the origin default
    assert_eq!(
        t_rows[1].after.as_deref(),
        Some(&[Value::Int(2), Value::Bytes(b"b".to_vec()), Value::Int(7)][..])
    );
    assert_eq!(t_rows[2].op, RowOp::Update);
    assert_eq!(
        t_rows[2].before.as_deref(),
        Some(&[Value::Int(1), Value::Bytes(b"a".to_vec()), Value::Int(42)][..])
    );
    // truncate: a new logical id under the same name
    assert!(t_rows[3].commit_ts > truncated);
    assert_eq!(t_rows[3].table.def.table_id, new_id as u64);
    assert_eq!(
        (t_rows[3].table.schema(), t_rows[3].table.name()),
        ("test", "t")
    );
    assert_eq!(t_rows[0].table.def.table_id, old_id as u64);
    let store = m.store();
    assert!(store.table_at(old_id, truncated.next()).is_none());
    assert_eq!(
        store
            .table_at(old_id, truncated)
            .expect("old")
            .info
            .columns
            .len(),
        3
    );
    assert_eq!(
        store
            .table_at(old_id, added)
            .expect("v1")
            .info
            .columns
            .len(),
        2,
        "FinishedTS itself is still the old schema"
    );
    // partitions map to the parent
    let p = tidb.table("test", "p").expect("p").info.clone();
    let p_rows: Vec<&RowChange> = got.iter().filter(|c| c.table.name() == "p").collect();
    assert_eq!(p_rows.len(), 4);
    assert!(p_rows.iter().all(|c| c.table.def.table_id == p.id as u64));
    let pids = p.physical_ids();
    assert_eq!(pids.len(), 3);
    for pid in pids {
        assert_eq!(
            store.table_at(pid, truncated).expect("partition").info.id,
            p.id
        );
    }
    assert_eq!(
        store
            .logical_table_at(p.id, truncated)
            .expect("logical")
            .name(),
        "p"
    );
}

#[test]
fn every_type_round_trips_with_its_table_map() {
    let (mut core, _clock, mut tidb) = cluster();
    let start = now(&mut core);
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateTable {
            db: "test".into(),
            table: all_types_table("a"),
        },
    );
    let meta = tidb.table("test", "a").expect("a").clone();
    let mut rng = tibinlog::sim::ts::SimRng::new(3);
    let mut inserted = Vec::new();
    for id in 1..=20 {
        let mut row = vec![Value::Int(id)];
        for ft in &meta.types[1..] {
            row.push(gen::value(&mut rng, ft, !ft.is_not_null()));
        }
        insert(&mut core, &mut tidb, "a", row.clone());
        inserted.push(row);
    }
    let mut m = Mounter::new(bootstrap(&mut core, start, TableFilter::all()));
    let got = changes(&mut m, &raw_rows(&core, start));
    assert_eq!(got.len(), 20);
    for (c, want) in got.iter().zip(&inserted) {
        let after = c.after.as_ref().expect("after");
        for ((v, w), ft) in after.iter().zip(want).zip(&meta.types) {
            assert_eq!(text::render(v, ft), text::render(w, ft));
        }
        c.table.def.validate().expect("valid TableDef");
    }
    let def = &got[0].table.def;
    assert_eq!(def.columns.len(), meta.types.len());
    assert_eq!(def.primary_key, vec![0]);
    let codes: Vec<u8> = def.columns.iter().map(|c| c.kind.binlog_type()).collect();
    for legacy in [0u8, 7, 11, 12, 14, 253, 247, 248, 242] {
        assert!(
            !codes.contains(&legacy),
            "legacy code {legacy} in {codes:?}"
        );
    }
}

#[test]
fn ddl_events_filters_and_errors() {
    let (mut core, _clock, mut tidb) = cluster();
    let start = now(&mut core);
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateDatabase { name: "app".into() },
    );
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateTable {
            db: "app".into(),
            table: small("users", None),
        },
    );
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateTable {
            db: "app".into(),
            table: small("tmp_x", None),
        },
    );
    let mut t = tidb.begin(&mut core);
    t.insert("app", "users", &[Value::Int(1), Value::Null])
        .expect("insert");
    t.insert("app", "tmp_x", &[Value::Int(1), Value::Null])
        .expect("insert");
    t.commit().expect("commit");
    ddl(
        &mut core,
        &mut tidb,
        Ddl::DropTable {
            db: "app".into(),
            table: "tmp_x".into(),
        },
    );
    ddl(
        &mut core,
        &mut tidb,
        Ddl::RenameTable {
            db: "app".into(),
            table: "users".into(),
            new_db: "test".into(),
            new_table: "people".into(),
        },
    );

    let filter = TableFilter::parse(&["*.*", "!app.tmp_*"]).expect("filter");
    let mut m = Mounter::new(bootstrap(&mut core, start, filter));
    let mut queries = Vec::new();
    let mut rows = 0;
    for r in raw_rows(&core, start) {
        match m.mount(&r).expect("mount") {
            Mounted::Ddl(evs) => queries.extend(
                evs.into_iter()
                    .map(|e| (e.schema, e.query, e.table.is_some())),
            ),
            Mounted::Row(c) => {
                assert_eq!(c.table.name(), "users");
                rows += 1;
            }
            Mounted::Skipped => {}
        }
    }
    assert_eq!(rows, 1, "tmp_x rows are filtered");
    let texts: Vec<&str> = queries.iter().map(|(_, q, _)| q.as_str()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(texts[0], "CREATE DATABASE `app`");
    assert!(
        texts[1].starts_with("CREATE TABLE `app`.`users`") && !texts[1].contains("/*T!"),
        "{}",
        texts[1]
    );
    assert_eq!(texts[2], "RENAME TABLE `app`.`users` TO `test`.`people`");
    assert_eq!(queries[2].0, "test");
    assert!(queries[1].2 && queries[2].2);
    let people = m.store().table_by_name("test", "people").expect("renamed");
    assert_eq!(people.schema(), "test");

    // a delete without its old value is an error
    let key = record_key(people.info.id, &Handle::Int(1));
    let bad = RawRow {
        op: Op::Delete,
        key,
        value: Vec::new(),
        old_value: Vec::new(),
        start_ts: Ts(u64::MAX - 2),
        commit_ts: Ts(u64::MAX - 1),
        region_id: RegionId(1),
    };
    assert!(matches!(
        m.mount(&bad),
        Err(MounterError::MissingOldValue { .. })
    ));
    // rows before the store's start cannot be mounted
    let early = RawRow {
        commit_ts: start,
        op: Op::Put,
        value: vec![0x80],
        ..bad.clone()
    };
    assert!(matches!(
        m.mount(&early),
        Err(MounterError::SchemaTooOld { .. })
    ));
    // job-table rows in other states and deletes do nothing
    let del = RawRow {
        key: record_key(DDL_JOB_TABLE_ID, &Handle::Int(1)),
        ..bad
    };
    assert!(matches!(m.mount(&del), Ok(Mounted::Ddl(v)) if v.is_empty()));
}

#[test]
fn gc_keeps_what_later_rows_need() {
    let (mut core, _clock, mut tidb) = cluster();
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateTable {
            db: "test".into(),
            table: small("t", None),
        },
    );
    let start = now(&mut core);
    let id = tidb.table("test", "t").expect("t").info.id;
    let mut finished = Vec::new();
    for i in 0..3 {
        finished.push(ddl(
            &mut core,
            &mut tidb,
            Ddl::AddColumn {
                db: "test".into(),
                table: "t".into(),
                column: ColumnDef::new(&format!("c{i}"), ty::int(mysql::TYPE_LONG, false)),
            },
        ));
    }
    let dropped = ddl(
        &mut core,
        &mut tidb,
        Ddl::DropTable {
            db: "test".into(),
            table: "t".into(),
        },
    );
    let mut m = Mounter::new(bootstrap(&mut core, start, TableFilter::all()));
    for r in raw_rows(&core, start) {
        m.mount(&r).expect("mount");
    }
    let store = m.store_mut();
    let before = store.version_count();
    store.gc(finished[1]);
    assert!(store.version_count() < before);
    assert_eq!(
        store
            .table_at(id, finished[1].next())
            .expect("kept")
            .info
            .columns
            .len(),
        4
    );
    assert_eq!(
        store
            .table_at(id, finished[2].next())
            .expect("kept")
            .info
            .columns
            .len(),
        5
    );
    store.gc(dropped.next());
    assert!(store.table_at(id, dropped.next().next()).is_none());
    // Only the live (system) tables keep one logical and one physical version each.
    assert_eq!(store.version_count(), 2 * store.tables_at(Ts::MAX).len());
    assert!(store.tables_at(Ts::MAX).iter().all(|t| t.is_system()));
}

/// A `RENAME TABLE` of several tables: renames apply in order (a table may move twice, across
/// databases, in one statement), the schema store follows each table info to its own target,
/// and the simulated TiDB refuses a missing source or a taken target as TiDB does.
#[test]
fn multi_table_rename_follows_each_table() {
    use tibinlog::sim::tidb::TableRename;
    let (mut core, _clock, mut tidb) = cluster();
    let start = now(&mut core);
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateDatabase { name: "app".into() },
    );
    for name in ["a", "b"] {
        ddl(
            &mut core,
            &mut tidb,
            Ddl::CreateTable {
                db: "app".into(),
                table: small(name, None),
            },
        );
    }
    let r = |db: &str, table: &str, new_db: &str, new_table: &str| TableRename {
        db: db.into(),
        table: table.into(),
        new_db: new_db.into(),
        new_table: new_table.into(),
    };
    // Refused: a source that is gone, a target that exists (nothing is applied).
    for bad in [
        vec![r("app", "a", "test", "x"), r("app", "a", "test", "y")],
        vec![r("app", "a", "app", "b")],
        vec![r("app", "nope", "app", "c")],
    ] {
        assert!(
            tidb.execute_ddl(
                &mut core,
                &Ddl::RenameTables {
                    renames: bad.clone()
                }
            )
            .is_err(),
            "{bad:?}"
        );
    }
    ddl(
        &mut core,
        &mut tidb,
        Ddl::RenameTables {
            renames: vec![
                r("app", "a", "test", "tmp"),
                r("app", "b", "test", "b"),
                r("test", "tmp", "app", "c"),
            ],
        },
    );
    assert!(tidb.table("app", "c").is_some() && tidb.table("test", "b").is_some());
    assert!(tidb.table("test", "tmp").is_none() && tidb.table("app", "a").is_none());

    let mut m = Mounter::new(bootstrap(&mut core, start, TableFilter::all()));
    let mut queries = Vec::new();
    for raw in raw_rows(&core, start) {
        if let Mounted::Ddl(evs) = m.mount(&raw).expect("mount") {
            queries.extend(evs.into_iter().map(|e| e.query));
        }
    }
    assert_eq!(
        queries.last().map(String::as_str),
        Some("RENAME TABLE `app`.`a` TO `test`.`tmp`, `app`.`b` TO `test`.`b`, `test`.`tmp` TO `app`.`c`")
    );
    let store = m.store();
    assert_eq!(store.table_by_name("app", "c").expect("c").schema(), "app");
    assert_eq!(
        store.table_by_name("test", "b").expect("b").schema(),
        "test"
    );
    assert!(store.table_by_name("test", "tmp").is_none());
    assert!(store.table_by_name("app", "a").is_none());
}

/// `TRUNCATE PARTITION` gives the partition a new physical id (its old rows are never seen
/// deleted); `EXCHANGE PARTITION` swaps a partition's id with a plain table's, so rows written
/// afterwards under each id mount as the other table. The simulated TiDB refuses what TiDB
/// refuses: an unknown partition, a plain table, a row outside the partition, different
/// definitions.
#[test]
fn truncate_and_exchange_partition_follow_physical_ids() {
    let (mut core, _clock, mut tidb) = cluster();
    let range = || {
        Some(PartitionDef::Range {
            column: "id".into(),
            bounds: vec![Some(10), Some(100), None],
        })
    };
    for t in [small("p", range()), small("n", None)] {
        ddl(
            &mut core,
            &mut tidb,
            Ddl::CreateTable {
                db: "test".into(),
                table: t,
            },
        );
    }
    let mut wide = small("w", None);
    wide.columns
        .push(ColumnDef::new("x", ty::int(mysql::TYPE_LONG, false)));
    ddl(
        &mut core,
        &mut tidb,
        Ddl::CreateTable {
            db: "test".into(),
            table: wide,
        },
    );
    let start = now(&mut core);
    let row = |id: i64, v: &str| vec![Value::Int(id), Value::Bytes(v.as_bytes().to_vec())];
    for id in [1, 20, 200] {
        insert(&mut core, &mut tidb, "p", row(id, "p"));
    }
    insert(&mut core, &mut tidb, "n", row(5, "n"));
    insert(&mut core, &mut tidb, "n", row(50, "n"));
    let exchange = |nt: &str, partition: &str| Ddl::ExchangePartition {
        db: "test".into(),
        table: "p".into(),
        partition: partition.into(),
        nt_db: "test".into(),
        nt_table: nt.into(),
    };
    let truncate = |table: &str, partition: &str| Ddl::TruncatePartition {
        db: "test".into(),
        table: table.into(),
        partitions: vec![partition.into()],
    };
    for bad in [
        exchange("n", "p0"), // row 50 is not in p0
        exchange("w", "p0"), // another definition
        exchange("n", "p9"),
        truncate("p", "p7"),
        truncate("n", "p0"),
    ] {
        let err = tidb.execute_ddl(&mut core, &bad);
        assert!(err.is_err(), "{bad:?} was accepted");
    }
    {
        let mut t = tidb.begin(&mut core);
        t.delete("test", "n", &[Value::Int(50)]).expect("delete");
        t.commit().expect("commit");
    }
    let p_before = tidb.table("test", "p").expect("p").info.clone();
    let n_before = tidb.table("test", "n").expect("n").info.id;
    let truncated = ddl(&mut core, &mut tidb, truncate("p", "p1"));
    insert(&mut core, &mut tidb, "p", row(30, "after truncate"));
    let exchanged = ddl(&mut core, &mut tidb, exchange("n", "p0"));
    let p_after = tidb.table("test", "p").expect("p").info.clone();
    let n_after = tidb.table("test", "n").expect("n").info.id;
    assert_eq!(n_after, p_before.physical_ids()[0], "n took p0's id");
    assert_eq!(p_after.physical_ids()[0], n_before, "p0 took n's id");
    assert_eq!(p_after.id, p_before.id);
    {
        let mut t = tidb.begin(&mut core);
        t.update("test", "p", &[Value::Int(5)], &row(5, "now in p"))
            .expect("row 5 is p's now");
        t.update("test", "n", &[Value::Int(1)], &row(1, "now in n"))
            .expect("row 1 is n's now");
        t.commit().expect("commit");
    }

    let mut m = Mounter::new(bootstrap(&mut core, start, TableFilter::all()));
    let mut queries = Vec::new();
    let mut rows = Vec::new();
    for raw in raw_rows(&core, start) {
        match m.mount(&raw).expect("mount") {
            Mounted::Row(c) => rows.push(c),
            Mounted::Ddl(evs) => queries.extend(evs.into_iter().map(|e| e.query)),
            Mounted::Skipped => {}
        }
    }
    assert_eq!(
        queries,
        [
            "ALTER TABLE `test`.`p` TRUNCATE PARTITION `p1`",
            "ALTER TABLE `test`.`p` EXCHANGE PARTITION `p0` WITH TABLE `test`.`n`",
        ]
    );
    let seen = |c: &RowChange| {
        let id = match c.after.as_ref().or(c.before.as_ref()).map(|r| &r[0]) {
            Some(Value::Int(i)) => *i,
            other => panic!("id {other:?}"),
        };
        (c.table.name().to_owned(), id, c.op, c.commit_ts)
    };
    let got: Vec<_> = rows.iter().map(seen).collect();
    let names: Vec<(&str, i64, RowOp)> = got
        .iter()
        .map(|(t, id, op, _)| (t.as_str(), *id, *op))
        .collect();
    assert_eq!(
        names,
        [
            ("p", 1, RowOp::Insert),
            ("p", 20, RowOp::Insert),
            ("p", 200, RowOp::Insert),
            ("n", 5, RowOp::Insert),
            ("n", 50, RowOp::Insert),
            ("n", 50, RowOp::Delete),
            ("p", 30, RowOp::Insert),
            ("n", 1, RowOp::Update),
            ("p", 5, RowOp::Update),
        ]
    );
    assert!(got[6].3 > truncated && got[7].3 > exchanged);
    let store = m.store();
    let old_p1 = p_before.physical_ids()[1];
    assert!(store.table_at(old_p1, truncated).is_some());
    assert!(store.table_at(old_p1, truncated.next()).is_none());
    assert_eq!(
        store
            .table_at(p_after.physical_ids()[1], truncated.next())
            .expect("new p1")
            .name(),
        "p"
    );
}

//! The simulated TiDB layer read back the way a CDC client reads a real cluster: meta keys by
//! snapshot, DDL jobs from the job/history system tables, rows and index keys by MVCC get, and
//! the change stream of each commit protocol.

use std::sync::Arc;

use tibinlog::sim::cdc::{CdcConfig, DownstreamId};
use tibinlog::sim::core::{SimCore, StoreOutput};
use tibinlog::sim::mvcc::WriteType;
use tibinlog::sim::tidb::{
    types as ty, ColumnDef, CommitMode, Ddl, IndexDef, TableDef, Tidb, TidbConfig, TruthCollector,
};
use tibinlog::sim::ts::ManualClock;
use tibinlog::sim::workload::{gen, Workload, WorkloadConfig};
use tibinlog::sim::Ts;
use tibinlog::tidb::key::{
    index_prefix, meta_hash_key, meta_string_key, record_key, record_span, Handle,
    DDL_HISTORY_TABLE_ID, DDL_JOB_TABLE_ID,
};
use tibinlog::tidb::rowcodec::RowCodec;
use tibinlog::tidb::schema::{action, job_state, mysql, Job, TableInfo};
use tibinlog_proto::cdcpb::{self, change_data_request, event, event::LogType, ChangeDataRequest};
use tibinlog_proto::metapb;
use tibinlog_protocol::value::Value;

fn cluster(seed: u64) -> (SimCore, ManualClock) {
    let clock = ManualClock::new(1_700_000_000_000);
    let core = SimCore::new(
        &[1, 2, 3],
        CdcConfig::default(),
        Arc::new(clock.clone()),
        seed,
    )
    .expect("core");
    (core, clock)
}

fn boot() -> (SimCore, Tidb) {
    let (mut core, _) = cluster(1);
    let (tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("bootstrap");
    (core, tidb)
}

fn simple_table(name: &str) -> TableDef {
    TableDef {
        name: name.into(),
        columns: vec![
            ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("v", ty::varchar(20)),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: vec![IndexDef::new("i_v", &["v"], false)],
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

fn get(core: &mut SimCore, key: &[u8], ts: Ts) -> Option<Vec<u8>> {
    core.mvcc.get(key, ts, &[]).expect("get").map(|r| r.value)
}

/// The TableInfo a client reads from the meta keys at `ts`.
fn meta_table(core: &mut SimCore, db_id: i64, table_id: i64, ts: Ts) -> Option<TableInfo> {
    let key = meta_hash_key(
        format!("DB:{db_id}").as_bytes(),
        format!("Table:{table_id}").as_bytes(),
    );
    get(core, &key, ts).map(|v| TableInfo::from_json(&v).expect("table json"))
}

/// Decodes a job row of a system table the way TiCDC does: `job_meta` looked up by name.
fn job_of(core: &mut SimCore, table_id: i64, job_id: i64, ts: Ts) -> Option<Job> {
    let sys = meta_table(core, 1, table_id, ts).expect("system table info");
    let codec = RowCodec::new(&sys);
    let pos = sys
        .public_columns()
        .iter()
        .position(|c| c.name.l == "job_meta")
        .expect("job_meta");
    let handle = Handle::Int(job_id);
    let v = get(core, &record_key(table_id, &handle), ts)?;
    let mut row = Vec::new();
    codec
        .decode_into(&v, Some(&handle), &mut row)
        .expect("job row");
    match &row[pos] {
        Value::Bytes(b) => Some(Job::from_json(b).expect("job json")),
        other => panic!("job_meta is {other:?}"),
    }
}

#[test]
fn create_table_is_visible_in_meta_only_after_the_ddl() {
    let (mut core, mut tidb) = boot();
    let before = core.ts();
    let out = tidb
        .execute_ddl(
            &mut core,
            &Ddl::CreateTable {
                db: "test".into(),
                table: simple_table("t1"),
            },
        )
        .expect("ddl");
    let after = core.ts();
    let t = tidb.table("test", "t1").expect("catalog").clone();
    let at_after = meta_table(&mut core, t.db_id, t.info.id, after).expect("visible after");
    assert_eq!(at_after, t.info);
    assert!(at_after.pk_is_handle);
    assert!(meta_table(&mut core, t.db_id, t.info.id, before).is_none());
    // visible exactly from the done transaction's commit ts
    assert!(meta_table(&mut core, t.db_id, t.info.id, out.finished_ts).is_some());
    assert!(meta_table(&mut core, t.db_id, t.info.id, out.finished_ts.prev()).is_none());
    let ver = get(&mut core, &meta_string_key(b"SchemaVersionKey"), after).expect("version");
    assert_eq!(ver, out.schema_version.to_string().into_bytes());
    assert!(get(
        &mut core,
        &meta_string_key(format!("Diff:{}", out.schema_version).as_bytes()),
        after
    )
    .is_some());
    let next = get(&mut core, &meta_string_key(b"NextGlobalID"), after).expect("next id");
    assert_eq!(next, t.info.id.to_string().into_bytes());
}

#[test]
fn ddl_jobs_are_in_the_job_and_history_tables() {
    let (mut core, mut tidb) = boot();
    let ddl = Ddl::CreateTable {
        db: "test".into(),
        table: simple_table("t2"),
    };
    let out = tidb.execute_ddl(&mut core, &ddl).expect("ddl");
    // the done record, as a CDC client following tidb_ddl_job sees it at the done commit
    let done = job_of(&mut core, DDL_JOB_TABLE_ID, out.job_id, out.finished_ts).expect("done row");
    assert_eq!(done.state, job_state::DONE);
    assert_eq!(done.action, action::CREATE_TABLE);
    assert_eq!(done.query, ddl.sql());
    assert_eq!(done.schema_version(), out.schema_version);
    let b = done.binlog.expect("binlog");
    assert_eq!(b.finished_ts, 0, "the done record carries no FinishedTS");
    assert_eq!(b.table_info.expect("table info").name.o, "t2");
    // before the done commit, the row is the queued job
    let queued = job_of(
        &mut core,
        DDL_JOB_TABLE_ID,
        out.job_id,
        out.finished_ts.prev(),
    )
    .expect("queued");
    assert_eq!(queued.state, job_state::QUEUEING);
    // afterwards the job row is gone and the history holds the synced job
    let now = core.ts();
    assert!(job_of(&mut core, DDL_JOB_TABLE_ID, out.job_id, now).is_none());
    let hist = job_of(&mut core, DDL_HISTORY_TABLE_ID, out.job_id, now).expect("history");
    assert_eq!(hist.state, job_state::SYNCED);
    assert_eq!(hist.query, ddl.sql());
    let fin = hist.binlog.expect("binlog").finished_ts;
    assert!(fin > out.finished_ts.0 && fin < now.0);
    // the job table span holds puts only for this job's ids (bootstrap's CREATE DATABASE too)
    let (s, e) = record_span(DDL_HISTORY_TABLE_ID);
    assert_eq!(
        core.mvcc
            .scan(&s, &e, 0, now, true, &[])
            .expect("scan")
            .len(),
        2
    );
}

#[test]
fn inserted_rows_decode_and_index_keys_exist() {
    let (mut core, mut tidb) = boot();
    let mut rng = tibinlog::sim::ts::SimRng::new(5);
    for t in gen::initial_tables() {
        tidb.execute_ddl(
            &mut core,
            &Ddl::CreateTable {
                db: "test".into(),
                table: t,
            },
        )
        .expect("ddl");
    }
    let meta = tidb.table("test", "t_all").expect("t_all").clone();
    let mut rows = Vec::new();
    for id in 1..=20i64 {
        let mut row: Vec<Value> = meta
            .types
            .iter()
            .map(|ft| gen::value(&mut rng, ft, !ft.is_not_null()))
            .collect();
        row[0] = Value::Int(id);
        rows.push(row);
    }
    let mut txn = tidb.begin(&mut core);
    for r in &rows {
        txn.insert("test", "t_all", r).expect("insert");
    }
    let c = txn.commit().expect("commit");
    for r in &rows {
        let h = Handle::Int(match r[0] {
            Value::Int(i) => i,
            _ => unreachable!(),
        });
        let v = get(&mut core, &record_key(meta.info.id, &h), c.commit_ts).expect("row");
        let mut back = Vec::new();
        meta.codec
            .decode_into(&v, Some(&h), &mut back)
            .expect("decode");
        assert_eq!(&back, r);
        assert!(get(&mut core, &record_key(meta.info.id, &h), c.start_ts).is_none());
    }
    let idx = meta
        .info
        .indices
        .iter()
        .find(|i| i.idx_name.o == "i_int")
        .expect("index")
        .id;
    let (s, mut e) = (
        index_prefix(meta.info.id, idx),
        index_prefix(meta.info.id, idx),
    );
    e.push(0xff);
    assert_eq!(
        core.mvcc
            .scan(&s, &e, 0, c.commit_ts, true, &[])
            .expect("scan")
            .len(),
        rows.len()
    );
}

#[test]
fn gc_destroys_the_rows_of_a_truncated_table_once_past_the_ddl() {
    let (mut core, mut tidb) = boot();
    for name in ["t", "u"] {
        tidb.execute_ddl(
            &mut core,
            &Ddl::CreateTable {
                db: "test".into(),
                table: simple_table(name),
            },
        )
        .expect("create");
    }
    let old_t = tidb.table("test", "t").expect("t").info.id;
    let u = tidb.table("test", "u").expect("u").info.id;
    let mut txn = tidb.begin(&mut core);
    for id in 1..=5i64 {
        for table in ["t", "u"] {
            txn.insert(
                "test",
                table,
                &[Value::Int(id), Value::Bytes(b"x".to_vec())],
            )
            .expect("insert");
        }
    }
    txn.commit().expect("commit");
    let before = core.ts();
    tidb.execute_ddl(
        &mut core,
        &Ddl::TruncateTable {
            db: "test".into(),
            table: "t".into(),
        },
    )
    .expect("truncate");
    let new_t = tidb.table("test", "t").expect("t").info.id;
    assert_ne!(new_t, old_t);
    let mut txn = tidb.begin(&mut core);
    txn.insert("test", "t", &[Value::Int(1), Value::Bytes(b"y".to_vec())])
        .expect("insert");
    txn.commit().expect("commit");
    let after = core.ts();
    let row = |table: i64| record_key(table, &Handle::Int(1));
    assert_eq!(core.pending_delete_ranges(), 1);

    assert_eq!(core.run_gc(before), before);
    assert!(
        core.mvcc.entry(&row(old_t)).is_some(),
        "destroyed before GC passed the truncate"
    );
    assert_eq!(core.pending_delete_ranges(), 1);

    assert_eq!(core.run_gc(after), after);
    assert_eq!(core.pending_delete_ranges(), 0);
    assert!(core.mvcc.entry(&row(old_t)).is_none(), "old rows left");
    let (_, old_end) = tibinlog::tidb::key::table_span(old_t);
    let (old_start, _) = tibinlog::tidb::key::table_span(old_t);
    assert!(
        core.mvcc
            .entries_from(&old_start)
            .next()
            .is_none_or(|(k, _)| k >= old_end.as_slice()),
        "index keys of the old table left"
    );
    assert!(
        core.mvcc.entry(&row(u)).is_some(),
        "another table's rows destroyed"
    );
    assert!(
        core.mvcc.entry(&row(new_t)).is_some(),
        "the new table's rows destroyed"
    );
}

#[test]
fn pk_change_is_delete_plus_put_in_one_txn() {
    let (mut core, mut tidb) = boot();
    for t in gen::initial_tables() {
        tidb.execute_ddl(
            &mut core,
            &Ddl::CreateTable {
                db: "test".into(),
                table: t,
            },
        )
        .expect("ddl");
    }
    let meta = tidb.table("test", "t_common").expect("t").clone();
    let row = |k: &str, n: i64, v: i64| {
        let mut r = vec![Value::Null; meta.types.len()];
        r[0] = Value::Bytes(k.as_bytes().to_vec());
        r[1] = Value::Int(n);
        r[2] = Value::Int(v);
        r[3] = Value::Bytes(b"x".to_vec());
        r
    };
    let mut txn = tidb.begin(&mut core);
    txn.insert("test", "t_common", &row("a", 1, 10))
        .expect("insert");
    txn.commit().expect("commit");
    let mut txn = tidb.begin(&mut core);
    let old_key = [Value::Bytes(b"a".to_vec()), Value::Int(1)];
    txn.update("test", "t_common", &old_key, &row("b", 2, 10))
        .expect("update");
    let c = txn.commit().expect("commit");
    let key = |r: &[Value]| record_key(meta.info.id, &meta.row_handle(r).expect("h").expect("h"));
    let old = core
        .mvcc
        .entry(&key(&row("a", 1, 10)))
        .expect("old")
        .writes_newest_first()
        .next()
        .map(|(ts, w)| (ts, w.write_type, w.start_ts));
    assert_eq!(old, Some((c.commit_ts, WriteType::Delete, c.start_ts)));
    let new = core
        .mvcc
        .entry(&key(&row("b", 2, 10)))
        .expect("new")
        .writes_newest_first()
        .next()
        .map(|(ts, w)| (ts, w.write_type, w.start_ts));
    assert_eq!(new, Some((c.commit_ts, WriteType::Put, c.start_ts)));
    let mut txn = tidb.begin(&mut core);
    assert_eq!(txn.get("test", "t_common", &old_key).expect("get"), None);
}

fn run_workload(seed: u64, txns: u64) -> Vec<String> {
    let (mut core, clock) = cluster(seed);
    let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("boot");
    let truth = TruthCollector::new();
    tidb.set_truth_sink(Box::new(truth.clone()));
    let cfg = WorkloadConfig {
        seed,
        txns,
        large_rows: 300,
        ..WorkloadConfig::default()
    };
    let mut wl = Workload::new(cfg, Some(clock));
    eprintln!("workload seed {}", wl.seed());
    wl.setup(&mut tidb, &mut core).expect("setup");
    let stats = wl.run(&mut tidb, &mut core, |_| {}).expect("run");
    assert!(
        stats.one_pc > 0 && stats.async_commit > 0 && stats.two_pc > 0,
        "{stats:?}"
    );
    truth.lines()
}

#[test]
fn workload_truth_is_deterministic_per_seed() {
    let a = run_workload(7, 300);
    let b = run_workload(7, 300);
    assert_eq!(a, b);
    assert!(a.iter().any(|l| l.contains("\"op\":\"update\"")));
    assert!(a.iter().any(|l| l.contains("\"op\":\"delete\"")));
    assert!(a.iter().any(|l| l.contains("\"ddl\":\"CREATE TABLE")));
    let c = run_workload(8, 300);
    assert_ne!(a, c);
    // commit order
    let ts: Vec<(u64, u64)> = a
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            (
                v["commit_ts"].as_u64().expect("c"),
                v["start_ts"].as_u64().expect("s"),
            )
        })
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
}

fn log_types(outs: &[StoreOutput]) -> Vec<LogType> {
    outs.iter()
        .flat_map(|o| o.output.event.events.iter())
        .filter_map(|e| match &e.event {
            Some(event::Event::Entries(en)) => Some(en.entries.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| r.r#type())
        .collect()
}

#[test]
fn commit_protocols_produce_their_change_events() {
    let (mut core, mut tidb) = boot();
    tidb.execute_ddl(
        &mut core,
        &Ddl::CreateTable {
            db: "test".into(),
            table: simple_table("t3"),
        },
    )
    .expect("ddl");
    // CREATE TABLE split a region at the table's prefix: the table's rows live there.
    let id = tidb.table("test", "t3").expect("t3").info.id;
    let prefix = tibinlog::tidb::key::table_prefix(id);
    let region = core.cluster.region_by_raw_key(&prefix).expect("region");
    let (region_id, version, store) = (
        region.id(),
        region.version(),
        region.leader_store().expect("leader"),
    );
    core.open_conn(store, 1, true).expect("conn");
    let req = ChangeDataRequest {
        header: Some(cdcpb::Header {
            cluster_id: 0,
            ticdc_version: "8.5.0".into(),
        }),
        region_id,
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 1,
            version,
        }),
        checkpoint_ts: core.ts().0,
        request_id: 1,
        request: Some(change_data_request::Request::Register(Default::default())),
        ..Default::default()
    };
    let mut setup = core.on_cdc_request(store, 1, &req).expect("register");
    setup.extend(core.drive_scans());
    setup.extend(
        core.finish_scan(
            store,
            DownstreamId {
                conn: 1,
                request_id: 1,
                region_id,
            },
        )
        .expect("scan"),
    );
    assert_eq!(
        log_types(&setup).last(),
        Some(&LogType::Initialized),
        "{setup:?}"
    );
    for (i, mode) in [
        CommitMode::TwoPc,
        CommitMode::AsyncCommit,
        CommitMode::OnePc,
    ]
    .into_iter()
    .enumerate()
    {
        let mut txn = tidb.begin(&mut core);
        txn.insert(
            "test",
            "t3",
            &[Value::Int(i as i64 + 1), Value::Bytes(b"v".to_vec())],
        )
        .expect("insert");
        let c = txn.commit_with(mode).expect("commit");
        assert_eq!(c.mode, Some(mode));
        assert!(c.commit_ts > c.start_ts);
        let types = log_types(&c.outputs);
        let expected = match mode {
            CommitMode::OnePc => vec![LogType::Committed; 2],
            _ => vec![
                LogType::Prewrite,
                LogType::Prewrite,
                LogType::Commit,
                LogType::Commit,
            ],
        };
        assert_eq!(types, expected, "{mode:?}");
    }
}

/// TiDB's expression index keys the value of its hidden column, which TiDB computes when it
/// writes the row; a LIST COLUMNS table routes each row to the partition listing its value and
/// refuses one no partition lists.
#[test]
fn expression_index_keys_go_to_the_listed_partition() {
    use tibinlog::sim::tidb::PartitionDef;
    let (mut core, mut tidb) = boot();
    let mut t = simple_table("t_expr");
    t.columns
        .push(ColumnDef::new("region", ty::varchar(8)).not_null());
    t.primary_key = vec!["id".into(), "region".into()];
    t.indexes = vec![IndexDef::expression("e_v", "lower(`v`)", ty::varchar(20))];
    t.partition = Some(PartitionDef::ListColumns {
        columns: vec!["region".into()],
        values: vec![
            vec![vec!["'east'".into()]],
            vec![vec!["'west'".into()], vec!["'north'".into()]],
        ],
    });
    tidb.execute_ddl(
        &mut core,
        &Ddl::CreateTable {
            db: "test".into(),
            table: t,
        },
    )
    .expect("ddl");
    let meta = tidb.table("test", "t_expr").expect("t_expr").clone();
    let hidden = meta
        .info
        .columns
        .iter()
        .find(|c| c.hidden)
        .expect("hidden column");
    assert_eq!(hidden.name.o, "_V$_e_v_0");
    assert_eq!(hidden.generated_expr_string, "lower(`v`)");
    let parts: Vec<i64> = meta
        .info
        .partition
        .as_ref()
        .expect("partitioned")
        .definitions
        .iter()
        .map(|d| d.id)
        .collect();
    let bytes = |s: &str| Value::Bytes(s.as_bytes().to_vec());
    let mut txn = tidb.begin(&mut core);
    txn.insert(
        "test",
        "t_expr",
        &[Value::Int(1), bytes("MiXeD"), bytes("east")],
    )
    .expect("insert");
    txn.insert(
        "test",
        "t_expr",
        &[Value::Int(2), bytes("UPPER"), bytes("north")],
    )
    .expect("insert");
    let refused = txn.insert(
        "test",
        "t_expr",
        &[Value::Int(3), bytes("x"), bytes("south")],
    );
    assert!(refused.is_err(), "no partition lists 'south': {refused:?}");
    let c = txn.commit().expect("commit");
    let idx = meta
        .info
        .indices
        .iter()
        .find(|i| i.idx_name.o == "e_v")
        .expect("index")
        .id;
    for (pid, want) in [(parts[0], "mixed"), (parts[1], "upper")] {
        let s = index_prefix(pid, idx);
        let mut e = s.clone();
        e.push(0xff);
        let keys = core
            .mvcc
            .scan(&s, &e, 0, c.commit_ts, true, &[])
            .expect("scan");
        assert_eq!(keys.len(), 1, "one index entry in partition {pid}");
        assert!(
            keys[0]
                .key
                .windows(want.len())
                .any(|w| w == want.as_bytes()),
            "the key holds the lower-cased value {want}"
        );
    }
}

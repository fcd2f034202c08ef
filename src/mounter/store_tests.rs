//! Unit tests of the schema store: DDL actions the simulator does not produce (exchange
//! partition, CREATE TABLES, RENAME TABLES, DROP DATABASE with tables) and job ordering.

#![allow(clippy::unwrap_used)]
use std::collections::BTreeMap;

use super::error::{MounterError, Result};
use super::filter::TableFilter;
use super::schema_store::*;
use crate::model::Ts;
use crate::tidb::schema::{action, DBInfo, Job, TableInfo};
use crate::tidb::schema::{
    mysql, schema_state, CIStr, ColumnInfo, FieldType, HistoryInfo, PartitionDefinition,
    PartitionInfo,
};

fn db(id: i64, name: &str) -> DBInfo {
    DBInfo {
        id,
        db_name: CIStr::new(name),
        state: schema_state::PUBLIC,
        ..DBInfo::default()
    }
}

fn table(id: i64, name: &str, parts: &[i64]) -> TableInfo {
    let mut ft = FieldType::new(mysql::TYPE_LONG);
    ft.flag = mysql::NOT_NULL_FLAG;
    TableInfo {
        id,
        name: CIStr::new(name),
        columns: vec![ColumnInfo {
            id: 1,
            name: CIStr::new("a"),
            field_type: ft,
            state: schema_state::PUBLIC,
            ..ColumnInfo::default()
        }],
        state: schema_state::PUBLIC,
        partition: (!parts.is_empty()).then(|| PartitionInfo {
            partition_type: 2,
            definitions: parts
                .iter()
                .map(|&id| PartitionDefinition {
                    id,
                    name: CIStr::new(&format!("p{id}")),
                    ..PartitionDefinition::default()
                })
                .collect(),
            ..PartitionInfo::default()
        }),
        ..TableInfo::default()
    }
}

fn job(id: i64, action: u8, schema_id: i64, table_id: i64, binlog: HistoryInfo) -> Job {
    Job {
        id,
        action,
        schema_id,
        table_id,
        state: crate::tidb::schema::job_state::DONE,
        binlog: Some(HistoryInfo {
            schema_version: id,
            ..binlog
        }),
        ..Job::default()
    }
}

fn with_table(t: TableInfo) -> HistoryInfo {
    HistoryInfo {
        table_info: Some(t),
        ..HistoryInfo::default()
    }
}

fn store() -> SchemaStore {
    let mut s = SchemaStore::new(TableFilter::all(), Ts(100));
    let h = HistoryInfo {
        db_info: Some(db(2, "d")),
        ..HistoryInfo::default()
    };
    s.apply_ddl_job(job(1, action::CREATE_SCHEMA, 2, 0, h), Ts(110))
        .unwrap()
        .unwrap();
    s
}

#[test]
fn exchange_partition_swaps_ids() {
    let mut s = store();
    s.apply_ddl_job(
        job(
            2,
            action::CREATE_TABLE,
            2,
            10,
            with_table(table(10, "pt", &[11, 12])),
        ),
        Ts(120),
    )
    .unwrap();
    s.apply_ddl_job(
        job(
            3,
            action::CREATE_TABLE,
            2,
            20,
            with_table(table(20, "nt", &[])),
        ),
        Ts(130),
    )
    .unwrap();
    let applied = s
        .apply_ddl_job(
            job(
                4,
                action::EXCHANGE_TABLE_PARTITION,
                2,
                20,
                with_table(table(10, "pt", &[20, 12])),
            ),
            Ts(140),
        )
        .unwrap()
        .unwrap();
    assert_eq!(applied.after.len(), 2);
    assert_eq!(s.table_at(20, Ts(140)).unwrap().name(), "nt");
    assert_eq!(s.table_at(20, Ts(141)).unwrap().name(), "pt");
    assert_eq!(s.table_at(11, Ts(140)).unwrap().name(), "pt");
    let nt = s.table_at(11, Ts(141)).unwrap();
    assert_eq!((nt.name(), nt.def.table_id), ("nt", 11));
    assert_eq!(s.table_at(12, Ts(141)).unwrap().def.table_id, 10);
    assert_eq!(s.table(11).unwrap().name(), "nt");
    assert!(s.table(20).is_none());
}

#[test]
fn create_tables_rename_tables_drop_schema() {
    let mut s = store();
    s.apply_ddl_job(
        job(
            2,
            action::CREATE_SCHEMA,
            3,
            0,
            HistoryInfo {
                db_info: Some(db(3, "e")),
                ..HistoryInfo::default()
            },
        ),
        Ts(115),
    )
    .unwrap();
    let multi = HistoryInfo {
        multiple_table_infos: vec![table(30, "a", &[]), table(31, "b", &[])],
        ..HistoryInfo::default()
    };
    let a = s
        .apply_ddl_job(job(3, action::CREATE_TABLES, 2, 0, multi), Ts(120))
        .unwrap()
        .unwrap();
    assert_eq!(a.after.len(), 2);
    let mut renamed = table(30, "a2", &[]);
    renamed.name = CIStr::new("a2");
    let mut j = job(
        4,
        action::RENAME_TABLES,
        2,
        0,
        HistoryInfo {
            multiple_table_infos: vec![renamed],
            ..HistoryInfo::default()
        },
    );
    j.raw_args =
        Some(serde_json::json!({"rename_table_infos": [{"table_id": 30, "new_schema_id": 3}]}));
    s.apply_ddl_job(j, Ts(130)).unwrap();
    let t = s.table_at(30, Ts(131)).unwrap();
    assert_eq!((t.schema(), t.name()), ("e", "a2"));
    assert_eq!(s.table_at(30, Ts(130)).unwrap().schema(), "d");
    // v1 positional arguments
    let mut j = job(
        5,
        action::RENAME_TABLES,
        3,
        0,
        HistoryInfo {
            multiple_table_infos: vec![table(30, "a3", &[])],
            ..HistoryInfo::default()
        },
    );
    j.raw_args = Some(serde_json::json!([[3], [2], [{"O": "a3", "L": "a3"}], [30], ["e"], ["a2"]]));
    s.apply_ddl_job(j, Ts(135)).unwrap();
    assert_eq!(s.table(30).unwrap().schema(), "d");
    let d = s
        .apply_ddl_job(
            job(6, action::DROP_SCHEMA, 2, 0, HistoryInfo::default()),
            Ts(140),
        )
        .unwrap()
        .unwrap();
    assert_eq!(d.before.len(), 2);
    assert!(s.table_at(31, Ts(141)).is_none());
    assert!(s.table_at(30, Ts(141)).is_none());
    assert!(s.database(2).is_none());
    assert!(s.database(3).is_some());
    assert!(s.tables_at(Ts(141)).is_empty());
    assert_eq!(s.tables_at(Ts(121)).len(), 2);
}

#[test]
fn duplicates_order_and_empty_versions() {
    let mut s = store();
    let create = job(
        2,
        action::CREATE_TABLE,
        2,
        10,
        with_table(table(10, "t", &[])),
    );
    assert!(s.apply_ddl_job(create.clone(), Ts(120)).unwrap().is_some());
    assert!(
        s.apply_ddl_job(create, Ts(125)).unwrap().is_none(),
        "same job id twice"
    );
    let late = job(3, action::DROP_TABLE, 2, 10, HistoryInfo::default());
    assert!(matches!(
        s.apply_ddl_job(late.clone(), Ts(119)),
        Err(MounterError::DdlOutOfOrder { .. })
    ));
    let old = job(4, action::DROP_TABLE, 2, 10, HistoryInfo::default());
    assert!(
        s.apply_ddl_job(old, Ts(90)).unwrap().is_none(),
        "already in the snapshot"
    );
    let mut v0 = late.clone();
    v0.id = 5;
    v0.binlog = Some(HistoryInfo::default());
    assert!(
        s.apply_ddl_job(v0, Ts(121)).unwrap().is_none(),
        "SchemaVersion 0 is skipped"
    );
    let bad = job(6, action::TRUNCATE_TABLE, 2, 10, HistoryInfo::default());
    assert!(matches!(
        s.apply_ddl_job(bad, Ts(122)),
        Err(MounterError::BadJob { .. })
    ));
    assert!(matches!(
        s.apply_ddl_job(
            job(
                7,
                action::CREATE_TABLE,
                9,
                11,
                with_table(table(11, "x", &[]))
            ),
            Ts(123)
        ),
        Err(MounterError::UnknownDatabase { .. })
    ));
    assert_eq!(s.included_physical_ids(), vec![10]);
}

#[test]
fn virtual_generated_columns_are_computed_when_a_row_is_decoded() {
    use crate::tidb::key::Handle;
    use tibinlog_protocol::value::Value;

    let mut t = table(50, "g", &[]);
    let a = t.columns[0].clone();
    let col = |id: i64, name: &str, ft: FieldType, expr: &str| ColumnInfo {
        id,
        name: CIStr::new(name),
        offset: id as usize - 1,
        field_type: ft,
        generated_expr_string: expr.to_owned(),
        ..a.clone()
    };
    let mut varchar = FieldType::new(mysql::TYPE_VARCHAR);
    varchar.flen = 20;
    varchar.charset = "utf8mb4".into();
    varchar.collate = "utf8mb4_bin".into();
    t.columns = vec![
        a.clone(),
        col(2, "b", FieldType::new(mysql::TYPE_LONG), ""),
        // As TiDB restores them into GeneratedExprString.
        col(
            3,
            "c",
            FieldType::new(mysql::TYPE_LONGLONG),
            "`a` * 10 + `b`",
        ),
        col(4, "s", varchar, "concat(`c`, _utf8mb4'-x')"),
        col(
            5,
            "j",
            FieldType::new(mysql::TYPE_LONG),
            "json_length(json_array(`s`))",
        ),
    ];
    let m = MountedTable::new(2, "d", t, &TableFilter::all()).unwrap();
    let mut stored = Vec::new();
    m.codec
        .encode_v2(
            &[
                Value::Int(4),
                Value::Int(2),
                Value::Null,
                Value::Null,
                Value::Null,
            ],
            &mut stored,
        )
        .unwrap();
    // One it cannot compute (no JSON_ARRAY): every row of the table version is refused,
    // naming the column, never given a made-up NULL.
    let mut out = vec![Value::Int(99)];
    let err = m
        .decode_row(&stored, Some(&Handle::Int(1)), &mut out)
        .expect_err("refused");
    assert!(err.to_string().contains("d.g.j"), "{err}");
    assert!(
        err.to_string().to_lowercase().contains("json_array"),
        "{err}"
    );

    // Without it, the others are computed.
    let mut t = m.info.clone();
    t.columns.pop();
    let m = MountedTable::new(2, "d", t, &TableFilter::all()).unwrap();
    stored.clear();
    m.codec
        .encode_v2(
            &[Value::Int(4), Value::Int(2), Value::Null, Value::Null],
            &mut stored,
        )
        .unwrap();
    m.decode_row(&stored, Some(&Handle::Int(1)), &mut out)
        .unwrap();
    assert_eq!(
        out,
        [
            Value::Int(4),
            Value::Int(2),
            Value::Int(42),
            Value::Bytes(b"42-x".to_vec()),
        ]
    );
}

/// Meta keys at one ts, for [`SchemaStore::bootstrap`].
struct Meta(BTreeMap<Vec<u8>, Vec<u8>>);

impl MetaReader for Meta {
    fn scan(&self, start: &[u8], end: &[u8], _ts: Ts) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .0
            .range(start.to_vec()..end.to_vec())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn get(&self, key: &[u8], _ts: Ts) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(key).cloned())
    }
}

#[test]
fn a_history_copy_of_a_job_in_the_snapshot_is_not_applied_again() {
    use crate::tidb::key::{meta_hash_key, meta_string_key};
    let mut meta = BTreeMap::new();
    meta.insert(
        meta_hash_key(b"DBs", b"DB:2"),
        serde_json::to_vec(&db(2, "d")).unwrap(),
    );
    meta.insert(
        meta_hash_key(b"DB:2", b"Table:10"),
        serde_json::to_vec(&table(10, "t", &[])).unwrap(),
    );
    meta.insert(meta_string_key(b"SchemaVersionKey"), b"7".to_vec());
    let mut s = SchemaStore::bootstrap(&Meta(meta), Ts(100), TableFilter::all()).unwrap();
    // The job that created `t` finished before the snapshot (version 7); its history copy
    // (state synced) commits after it.
    let mut copy = job(
        7,
        action::CREATE_TABLE,
        2,
        10,
        with_table(table(10, "t", &[])),
    );
    copy.state = crate::tidb::schema::job_state::SYNCED;
    assert!(
        s.apply_ddl_job(copy, Ts(105)).unwrap().is_none(),
        "the snapshot has version 7"
    );
    let next = job(
        8,
        action::CREATE_TABLE,
        2,
        11,
        with_table(table(11, "u", &[])),
    );
    assert!(s.apply_ddl_job(next, Ts(110)).unwrap().is_some());
    assert_eq!(s.included_physical_ids(), vec![10, 11]);
}

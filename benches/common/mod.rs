//! Fixtures shared by the benchmarks.

use std::sync::Arc;

use tibinlog::mounter::{MountedTable, TableFilter};
use tibinlog::tidb::schema::{mysql::*, schema_state, CIStr, ColumnInfo, FieldType, TableInfo};

fn col(id: i64, tp: u8, flag: u32, flen: i64) -> ColumnInfo {
    ColumnInfo {
        id,
        name: CIStr::new(&format!("c{id}")),
        offset: (id - 1) as usize,
        field_type: FieldType {
            tp,
            flag,
            flen,
            charset: "utf8mb4".into(),
            collate: "utf8mb4_bin".into(),
            ..FieldType::new(tp)
        },
        state: schema_state::PUBLIC,
        ..ColumnInfo::default()
    }
}

/// `bench.narrow (c1 INT NOT NULL, c2 VARCHAR(32), c3 BIGINT)`, table id 100.
pub fn narrow_table() -> Arc<MountedTable> {
    let info = TableInfo {
        id: 100,
        name: CIStr::new("narrow"),
        columns: vec![
            col(1, TYPE_LONG, NOT_NULL_FLAG, 11),
            col(2, TYPE_VARCHAR, 0, 32),
            col(3, TYPE_LONGLONG, 0, 20),
        ],
        state: schema_state::PUBLIC,
        max_col_id: 3,
        ..TableInfo::default()
    };
    Arc::new(MountedTable::new(1, "bench", info, &TableFilter::all()).expect("table"))
}

//! Row value decoding throughput: a narrow 10-column v2 row decoded into a reused `Vec<Value>`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tibinlog::tidb::key::Handle;
use tibinlog::tidb::rowcodec::RowCodec;
use tibinlog::tidb::schema::{mysql::*, schema_state, CIStr, ColumnInfo, FieldType, TableInfo};
use tibinlog_protocol::value::{Date, DateTime, Value};

fn col(id: i64, tp: u8, flag: u32, flen: i64, decimal: i32) -> ColumnInfo {
    ColumnInfo {
        id,
        name: CIStr::new(&format!("c{id}")),
        offset: (id - 1) as usize,
        field_type: FieldType {
            tp,
            flag,
            flen,
            decimal,
            ..FieldType::default()
        },
        state: schema_state::PUBLIC,
        ..ColumnInfo::default()
    }
}

fn table() -> TableInfo {
    TableInfo {
        id: 100,
        pk_is_handle: true,
        columns: vec![
            col(1, TYPE_LONGLONG, PRI_KEY_FLAG | NOT_NULL_FLAG, 20, 0),
            col(2, TYPE_LONG, 0, 11, 0),
            col(3, TYPE_LONGLONG, UNSIGNED_FLAG, 20, 0),
            col(4, TYPE_VARCHAR, 0, 32, 0),
            col(5, TYPE_VARCHAR, 0, 255, 0),
            col(6, TYPE_DATETIME, 0, 23, 3),
            col(7, TYPE_TIMESTAMP, 0, 19, 0),
            col(8, TYPE_NEWDECIMAL, 0, 10, 2),
            col(9, TYPE_DOUBLE, 0, -1, -1),
            col(10, TYPE_TINY, 0, 4, 0),
        ],
        ..TableInfo::default()
    }
}

fn bench_decode(c: &mut Criterion) {
    let t = table();
    let codec = RowCodec::new(&t);
    let dt = DateTime {
        date: Date {
            year: 2024,
            month: 5,
            day: 17,
        },
        hour: 12,
        minute: 34,
        second: 56,
        micros: 789_000,
    };
    let values = vec![
        Value::Int(42),
        Value::Int(-123_456),
        Value::UInt(9_876_543_210),
        Value::Bytes(b"alice@example.com".to_vec()),
        Value::Bytes(b"a somewhat longer free-text comment".to_vec()),
        Value::DateTime(dt),
        Value::Timestamp {
            seconds: 1_715_949_296,
            micros: 0,
        },
        Value::Decimal("12345.67".into()),
        Value::Double(3.25),
        Value::Int(1),
    ];
    let mut row = Vec::new();
    if let Err(e) = codec.encode_v2(&values, &mut row) {
        panic!("bench row does not encode: {e}");
    }
    let handle = Handle::Int(42);
    let mut out = Vec::with_capacity(values.len());

    let mut g = c.benchmark_group("rowcodec");
    g.throughput(Throughput::Elements(1));
    g.bench_function("decode_v2_10_columns", |b| {
        b.iter(|| {
            let r = codec.decode_into(black_box(&row), Some(&handle), &mut out);
            black_box(r.is_ok());
        })
    });
    g.finish();
}

criterion_group!(benches, bench_decode);
criterion_main!(benches);

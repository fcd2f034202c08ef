//! Rows-event encoding throughput: WRITE_ROWS events of 10-column narrow rows into a reused
//! buffer (TABLE_MAP excluded), reported as rows per second.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use tibinlog_protocol::binlog::{ColumnDef, ColumnKind, EventWriter, RowsKind, TableDef};
use tibinlog_protocol::value::{Date, DateTime, Value};

const ROWS: usize = 1000;

fn table() -> TableDef {
    use ColumnKind as K;
    TableDef {
        table_id: 101,
        schema: "bench".into(),
        table: "narrow".into(),
        columns: vec![
            ColumnDef::new("id", K::LongLong).not_null(),
            ColumnDef::new("a", K::Long),
            ColumnDef::new("b", K::Tiny).unsigned(),
            ColumnDef::new("c", K::Short),
            ColumnDef::new("d", K::Double),
            ColumnDef::new(
                "e",
                K::NewDecimal {
                    precision: 12,
                    scale: 2,
                },
            ),
            ColumnDef::new("f", K::VarString { max_bytes: 64 }).collation(255),
            ColumnDef::new("g", K::DateTime2 { fsp: 3 }),
            ColumnDef::new("h", K::Date),
            ColumnDef::new("i", K::Long).unsigned(),
        ],
        primary_key: vec![0],
    }
}

fn rows() -> Vec<Vec<Value>> {
    (0..ROWS)
        .map(|i| {
            let i = i as i64;
            vec![
                Value::Int(i),
                Value::Int(i * 7 - 500),
                Value::UInt((i % 256) as u64),
                if i % 5 == 0 {
                    Value::Null
                } else {
                    Value::Int(i % 30_000)
                },
                Value::Double(i as f64 * 0.25),
                Value::Decimal(format!("{}.{:02}", i * 13, i % 100)),
                Value::Bytes(format!("name-{i:08}").into_bytes()),
                Value::DateTime(DateTime {
                    date: Date {
                        year: 2024,
                        month: 5,
                        day: 17,
                    },
                    hour: 12,
                    minute: (i % 60) as u8,
                    second: 30,
                    micros: 123_000,
                }),
                Value::Date(Date {
                    year: 2024,
                    month: 5,
                    day: (i % 28 + 1) as u8,
                }),
                Value::UInt(i as u64 * 3),
            ]
        })
        .collect()
}

fn bench_write_rows(c: &mut Criterion) {
    let table = table();
    let rows = rows();
    let mut g = c.benchmark_group("write_rows");
    g.throughput(Throughput::Elements(ROWS as u64));
    for checksum in [true, false] {
        let mut w = EventWriter::new(1, checksum);
        let mut buf = Vec::with_capacity(1 << 20);
        g.bench_function(
            if checksum {
                "narrow_10col_crc32"
            } else {
                "narrow_10col_nocrc"
            },
            |b| {
                b.iter_batched_ref(
                    || (),
                    |()| {
                        buf.clear();
                        let mut rw = w.rows(&mut buf, 4, 1_700_000_000, &table, RowsKind::Write);
                        for r in &rows {
                            rw.write_row(black_box(r)).unwrap_or_default();
                        }
                        black_box(rw.finish().unwrap_or_default());
                    },
                    BatchSize::SmallInput,
                )
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench_write_rows);
criterion_main!(benches);

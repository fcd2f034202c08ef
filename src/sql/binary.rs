//! Values as the binary protocol carries them (result rows of prepared statements): a row is
//! `0x00`, a NULL bitmap offset by 2 bits, then each non-NULL cell in the binary layout of its
//! column's type (fixed-width integers and floats, length-prefixed temporal values,
//! length-encoded text for everything else).

use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::stmt::{put_datetime, put_lenenc, put_time};

use super::text::write_text;
use super::types::{SqlType, TypeKind};
use super::value as v;
use crate::tidb::time as tidb_time;

/// Appends one binary result row; `scratch` is reused for text cells.
pub fn write_binary_row(
    values: &[Value],
    types: &[SqlType],
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) {
    out.push(0x00);
    let bitmap = out.len();
    out.resize(bitmap + (values.len() + 9) / 8, 0);
    for (i, (val, ty)) in values.iter().zip(types).enumerate() {
        if matches!(val, Value::Null) || matches!(ty.kind, TypeKind::Null) {
            let bit = i + 2;
            out[bitmap + bit / 8] |= 1 << (bit % 8);
            continue;
        }
        write_cell(val, ty, out, scratch);
    }
}

fn write_cell(val: &Value, ty: &SqlType, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    match &ty.kind {
        TypeKind::Int { bytes } => {
            let i = v::to_int(val, ty).unwrap_or(0);
            let le = (i as i64).to_le_bytes();
            let width = match bytes {
                1 => 1,
                2 => 2,
                3 | 4 => 4,
                _ => 8,
            };
            out.extend_from_slice(&le[..width]);
        }
        TypeKind::Year => {
            let y = v::to_int(val, ty).unwrap_or(0) as u16;
            out.extend_from_slice(&y.to_le_bytes());
        }
        TypeKind::Float => {
            let f = v::to_f64(val, ty) as f32;
            out.extend_from_slice(&f.to_le_bytes());
        }
        TypeKind::Double => {
            out.extend_from_slice(&v::to_f64(val, ty).to_le_bytes());
        }
        TypeKind::Date | TypeKind::DateTime { .. } | TypeKind::Timestamp { .. } => {
            let dt = match val {
                Value::Timestamp { seconds, micros } => {
                    tidb_time::timestamp_to_datetime(*seconds, *micros)
                }
                other => v::to_datetime(other, ty).unwrap_or_default(),
            };
            let dt = if matches!(ty.kind, TypeKind::Date) {
                tibinlog_protocol::value::DateTime {
                    date: dt.date,
                    ..Default::default()
                }
            } else {
                dt
            };
            put_datetime(out, &dt);
        }
        TypeKind::Time { .. } => {
            put_time(out, &v::to_time(val, ty).unwrap_or_default());
        }
        _ => {
            scratch.clear();
            write_text(val, ty, scratch);
            put_lenenc(out, scratch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::charset::UTF8MB4_BIN;

    #[test]
    fn rows_match_mysql_common_s_binary_parser() {
        use mysql_common::io::ParseBuf;
        use mysql_common::packets::Column;
        use mysql_common::proto::{Binary, MyDeserialize};
        use mysql_common::row::RowDeserializer;
        use mysql_common::value::{ServerSide, Value as V};
        let types = vec![
            SqlType::bigint(),
            SqlType::new(TypeKind::Int { bytes: 1 }),
            SqlType::varchar(10, UTF8MB4_BIN),
            SqlType::double(),
            SqlType::datetime(0),
            SqlType::decimal(10, 2),
        ];
        let values = vec![
            Value::Int(-7),
            Value::Int(3),
            Value::Bytes(b"hi".to_vec()),
            Value::Double(2.5),
            Value::DateTime(tibinlog_protocol::value::DateTime {
                date: tibinlog_protocol::value::Date {
                    year: 2024,
                    month: 3,
                    day: 4,
                },
                hour: 5,
                minute: 6,
                second: 7,
                micros: 0,
            }),
            Value::Null,
        ];
        let mut row = Vec::new();
        write_binary_row(&values, &types, &mut row, &mut Vec::new());
        let columns: Vec<Column> = types
            .iter()
            .map(|t| {
                let spec = t.column_spec("c");
                let mut b = Vec::new();
                spec.encode_into(&mut b);
                Column::deserialize((), &mut ParseBuf(&b)).expect("column")
            })
            .collect();
        let parsed =
            RowDeserializer::<ServerSide, Binary>::deserialize(columns.into(), &mut ParseBuf(&row))
                .expect("row");
        let got: Vec<V> = parsed.into_inner().unwrap();
        assert_eq!(
            got,
            vec![
                V::Int(-7),
                V::Int(3),
                V::Bytes(b"hi".to_vec()),
                V::Double(2.5),
                V::Date(2024, 3, 4, 5, 6, 7, 0),
                V::NULL,
            ]
        );
    }
}

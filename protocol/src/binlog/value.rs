//! Row images: the NULL bitmap and each [`Value`] encoded for its [`ColumnDef`]
//! (`Field::pack` of each MySQL field type).
//!
//! ```text
//! row image = +----------------------+---------------------------------------------+
//!             | NULL bitmap          | values of the non-NULL columns, in order    |
//!             | ceil(n/8), LSB first |                                             |
//!             +----------------------+---------------------------------------------+
//! ```
//! Integers, FLOAT, DOUBLE, DATE, length prefixes, ENUM and SET are little-endian; DECIMAL,
//! DATETIME2, TIMESTAMP2, TIME2 and BIT are big-endian. A value that does not fit its column is an
//! error and nothing of the row is left in the buffer.

use super::decimal;
use super::error::{BinlogError, Result};
use super::json;
use super::table::{ColumnDef, ColumnKind, TableDef, BINARY_COLLATION};
use super::time;
use crate::value::Value;

#[inline]
fn bad(i: usize, col: &ColumnDef, reason: &'static str) -> BinlogError {
    BinlogError::Value {
        column: i,
        column_type: col.kind.name(),
        reason,
    }
}

/// Integer value as a signed/unsigned pair check: returns the two's-complement bits to store.
#[inline]
fn int_bits(i: usize, col: &ColumnDef, v: &Value, bits: u32) -> Result<u64> {
    let (min, max_signed) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    let max_unsigned = (1i128 << bits) - 1;
    let x: i128 = match v {
        Value::Int(x) => i128::from(*x),
        Value::UInt(x) => i128::from(*x),
        _ => return Err(bad(i, col, "expected an integer value")),
    };
    let ok = if col.unsigned {
        (0..=max_unsigned).contains(&x)
    } else {
        (min..=max_signed).contains(&x)
    };
    if !ok {
        return Err(bad(i, col, "integer out of range"));
    }
    Ok(x as u64)
}

#[inline]
fn put_len_prefixed(
    buf: &mut Vec<u8>,
    i: usize,
    col: &ColumnDef,
    b: &[u8],
    prefix: usize,
) -> Result<()> {
    let max = if prefix >= 4 {
        u32::MAX as usize
    } else {
        (1usize << (8 * prefix)) - 1
    };
    if b.len() > max {
        return Err(bad(i, col, "value longer than the column allows"));
    }
    buf.extend_from_slice(&(b.len() as u32).to_le_bytes()[..prefix.min(4)]);
    buf.extend_from_slice(b);
    Ok(())
}

/// Appends the non-NULL value `v` of column `i` (`col`).
pub fn encode_value(i: usize, col: &ColumnDef, v: &Value, buf: &mut Vec<u8>) -> Result<()> {
    match (&col.kind, v) {
        (ColumnKind::Tiny, _) => buf.push(int_bits(i, col, v, 8)? as u8),
        (ColumnKind::Short, _) => {
            buf.extend_from_slice(&(int_bits(i, col, v, 16)? as u16).to_le_bytes())
        }
        (ColumnKind::Int24, _) => {
            buf.extend_from_slice(&int_bits(i, col, v, 24)?.to_le_bytes()[..3])
        }
        (ColumnKind::Long, _) => {
            buf.extend_from_slice(&(int_bits(i, col, v, 32)? as u32).to_le_bytes())
        }
        (ColumnKind::LongLong, _) => buf.extend_from_slice(&int_bits(i, col, v, 64)?.to_le_bytes()),
        (ColumnKind::Float, Value::Float(f)) => buf.extend_from_slice(&f.to_le_bytes()),
        (ColumnKind::Float, Value::Double(f)) => buf.extend_from_slice(&(*f as f32).to_le_bytes()),
        (ColumnKind::Double, Value::Double(f)) => buf.extend_from_slice(&f.to_le_bytes()),
        (ColumnKind::Double, Value::Float(f)) => {
            buf.extend_from_slice(&f64::from(*f).to_le_bytes())
        }
        (ColumnKind::NewDecimal { precision, scale }, Value::Decimal(t)) => {
            decimal::encode_into(t, *precision, *scale, buf)
                .map_err(|_| bad(i, col, "decimal does not fit"))?
        }
        (ColumnKind::Year, Value::Year(y)) => match *y {
            0 => buf.push(0),
            1901..=2155 => buf.push((*y - 1900) as u8),
            _ => return Err(bad(i, col, "year outside 1901..=2155")),
        },
        (ColumnKind::Date, Value::Date(d)) => {
            if d.year > 9999 || d.month > 12 || d.day > 31 {
                return Err(bad(i, col, "date field out of range"));
            }
            buf.extend_from_slice(&time::date_to_u24(d).to_le_bytes()[..3]);
        }
        (ColumnKind::DateTime2 { fsp }, Value::DateTime(dt)) => {
            let d = &dt.date;
            if d.year > 9999
                || d.month > 12
                || d.day > 31
                || dt.hour > 23
                || dt.minute > 59
                || dt.second > 59
                || dt.micros > 999_999
            {
                return Err(bad(i, col, "datetime field out of range"));
            }
            time::put_datetime2(buf, dt, *fsp);
        }
        (ColumnKind::Timestamp2 { fsp }, Value::Timestamp { seconds, micros }) => {
            // TIMESTAMP ends at 2038-01-19 03:14:07.999999 UTC: readers take the seconds as i32.
            if *micros > 999_999 || *seconds > i32::MAX as u32 {
                return Err(bad(
                    i,
                    col,
                    "timestamp outside 1970..2038-01-19 03:14:07.999999",
                ));
            }
            time::put_timestamp2(buf, *seconds, *micros, *fsp);
        }
        (ColumnKind::Time2 { fsp }, Value::Time(t)) => {
            if t.minutes > 59 || t.seconds > 59 || t.micros > 999_999 || t.hours > 838 {
                return Err(bad(i, col, "time outside -838:59:59..838:59:59"));
            }
            time::put_time2(buf, t, *fsp);
        }
        (ColumnKind::String { max_bytes }, Value::Bytes(b)) => {
            // CHAR values are stored without trailing spaces; BINARY keeps its 0x00 padding.
            let b = if col.collation_id() != BINARY_COLLATION {
                let n = b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
                &b[..n]
            } else {
                &b[..]
            };
            if b.len() > usize::from(*max_bytes) {
                return Err(bad(i, col, "value longer than the column allows"));
            }
            put_len_prefixed(buf, i, col, b, if *max_bytes > 255 { 2 } else { 1 })?;
        }
        (ColumnKind::VarString { max_bytes }, Value::Bytes(b)) => {
            if b.len() > usize::from(*max_bytes) {
                return Err(bad(i, col, "value longer than the column allows"));
            }
            put_len_prefixed(buf, i, col, b, if *max_bytes > 255 { 2 } else { 1 })?;
        }
        (ColumnKind::Blob { pack_len }, Value::Bytes(b)) => {
            put_len_prefixed(buf, i, col, b, usize::from(*pack_len))?
        }
        (ColumnKind::Geometry { .. }, Value::Bytes(b)) => put_len_prefixed(buf, i, col, b, 4)?,
        (ColumnKind::Json, Value::Json(j)) => {
            let at = buf.len();
            buf.extend_from_slice(&[0; 4]);
            json::encode_into(j, buf)
                .map_err(|_| bad(i, col, "json document cannot be encoded"))?;
            let n = u32::try_from(buf.len() - at - 4)
                .map_err(|_| bad(i, col, "json document over 4 GiB"))?;
            buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
        }
        (ColumnKind::Bit { bits }, Value::Bit(x)) | (ColumnKind::Bit { bits }, Value::UInt(x)) => {
            if *bits < 64 && *x >> bits != 0 {
                return Err(bad(i, col, "bit value wider than the column"));
            }
            let n = usize::from(*bits).div_ceil(8);
            buf.extend_from_slice(&x.to_be_bytes()[8 - n..]);
        }
        (ColumnKind::Enum { members, pack }, Value::Enum(x)) => {
            if usize::from(*x) > members.len() {
                return Err(bad(i, col, "enum index beyond the members"));
            }
            buf.extend_from_slice(&x.to_le_bytes()[..usize::from(*pack).min(2)]);
        }
        (ColumnKind::Set { members, pack }, Value::Set(x)) => {
            if members.len() < 64 && *x >> members.len() != 0 {
                return Err(bad(i, col, "set bits beyond the members"));
            }
            buf.extend_from_slice(&x.to_le_bytes()[..usize::from(*pack).min(8)]);
        }
        (_, Value::Null) => return Err(bad(i, col, "NULL is written through the NULL bitmap")),
        _ => return Err(bad(i, col, "value variant does not match the column type")),
    }
    Ok(())
}

/// Appends one full row image (all columns present): NULL bitmap, then the values.
/// On error the buffer is truncated back to where it was.
pub fn encode_row_image(table: &TableDef, row: &[Value], buf: &mut Vec<u8>) -> Result<()> {
    if row.len() != table.columns.len() {
        return Err(BinlogError::ColumnCount {
            table_id: table.table_id,
            got: row.len(),
            want: table.columns.len(),
        });
    }
    let start = buf.len();
    let nb = table.bitmap_len();
    buf.resize(start + nb, 0);
    for (i, (col, v)) in table.columns.iter().zip(row).enumerate() {
        if matches!(v, Value::Null) {
            if !col.nullable {
                buf.truncate(start);
                return Err(bad(i, col, "NULL in a NOT NULL column"));
            }
            buf[start + i / 8] |= 1 << (i % 8);
            continue;
        }
        if let Err(e) = encode_value(i, col, v, buf) {
            buf.truncate(start);
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::value::Time;

    fn col(kind: ColumnKind) -> ColumnDef {
        ColumnDef::new("c", kind)
    }

    fn enc(c: &ColumnDef, v: Value) -> Result<Vec<u8>> {
        let mut b = Vec::new();
        encode_value(0, c, &v, &mut b).map(|_| b)
    }

    #[test]
    fn integers_check_their_range() {
        assert_eq!(enc(&col(ColumnKind::Tiny), Value::Int(-1)).unwrap(), [0xff]);
        assert!(enc(&col(ColumnKind::Tiny), Value::Int(128)).is_err());
        assert_eq!(
            enc(&col(ColumnKind::Tiny).unsigned(), Value::UInt(255)).unwrap(),
            [0xff]
        );
        assert!(enc(&col(ColumnKind::Tiny).unsigned(), Value::Int(-1)).is_err());
        assert_eq!(
            enc(&col(ColumnKind::Int24), Value::Int(-8_388_608)).unwrap(),
            [0, 0, 0x80]
        );
        assert_eq!(
            enc(&col(ColumnKind::LongLong).unsigned(), Value::UInt(u64::MAX)).unwrap(),
            [0xff; 8]
        );
        assert!(enc(&col(ColumnKind::LongLong), Value::UInt(u64::MAX)).is_err());
    }

    #[test]
    fn strings_bits_and_mismatches() {
        let c = col(ColumnKind::String { max_bytes: 4 }).collation(255);
        assert_eq!(
            enc(&c, Value::Bytes(b"ab  ".to_vec())).unwrap(),
            [2, b'a', b'b']
        );
        assert!(enc(&c, Value::Bytes(b"abcde".to_vec())).is_err());
        let v = col(ColumnKind::VarString { max_bytes: 300 });
        assert_eq!(enc(&v, Value::Bytes(b"x".to_vec())).unwrap(), [1, 0, b'x']);
        assert_eq!(
            enc(&col(ColumnKind::Bit { bits: 10 }), Value::Bit(0x2ff)).unwrap(),
            [0x02, 0xff]
        );
        assert!(enc(&col(ColumnKind::Bit { bits: 10 }), Value::Bit(0x400)).is_err());
        assert!(enc(&col(ColumnKind::Long), Value::Bytes(vec![])).is_err());
        assert!(enc(
            &col(ColumnKind::Time2 { fsp: 0 }),
            Value::Time(Time {
                hours: 839,
                ..Time::default()
            })
        )
        .is_err());
    }

    #[test]
    fn row_image_sets_null_bits_and_rolls_back() {
        let t = TableDef {
            table_id: 1,
            schema: "s".into(),
            table: "t".into(),
            columns: vec![col(ColumnKind::Long), col(ColumnKind::Tiny).not_null()],
            primary_key: vec![],
        };
        let mut b = vec![9];
        encode_row_image(&t, &[Value::Null, Value::Int(1)], &mut b).unwrap();
        assert_eq!(b, [9, 0b01, 1]);
        assert!(encode_row_image(&t, &[Value::Int(1), Value::Null], &mut b).is_err());
        assert!(encode_row_image(&t, &[Value::Int(1), Value::Int(1000)], &mut b).is_err());
        assert_eq!(b, [9, 0b01, 1]);
    }
}

//! The prepared-statement (binary) protocol: COM_STMT_PREPARE's answer, COM_STMT_EXECUTE's
//! parameters, and binary result rows.
//!
//! ```text
//! COM_STMT_PREPARE     0x16 | SQL text
//!   answer             0x00 | stmt_id (4) | num_columns (2) | num_params (2) | 0x00
//!                           | warnings (2), then param and column definitions
//! COM_STMT_EXECUTE     0x17 | stmt_id (4) | flags (1) | iterations (4)
//!                           | [null bitmap ((n+7)/8) | new_params_bound (1)
//!                           |  [type (2) × n] | values], when n > 0
//! COM_STMT_FETCH       0x1c | stmt_id (4) | rows (4)
//! COM_STMT_CLOSE       0x19 | stmt_id (4)                       (no answer)
//! COM_STMT_RESET       0x1a | stmt_id (4)
//! COM_STMT_SEND_LONG_DATA 0x18 | stmt_id (4) | param (2) | data  (no answer)
//! binary row           0x00 | null bitmap ((n+9)/8, offset 2) | values
//! ```
//!
//! Parameter values and binary cells follow MySQL's binary value layouts: integers fixed-width
//! little-endian, FLOAT/DOUBLE IEEE, strings and decimals length-encoded, temporal values with a
//! length byte (0, 4, 7 or 11 for dates, 0, 8 or 12 for times). The parameter count comes from
//! the prepared statement, so [`decode_params`] takes it; the body is only read through
//! bounds-checked slices.

use mysql_common::constants::ColumnType;
use mysql_common::io::BufMutExt;

use super::{Result, WireError};
use crate::value::{Date, DateTime, Time};

/// COM_STMT_EXECUTE flag: open a read-only cursor (rows come through COM_STMT_FETCH).
pub const CURSOR_TYPE_READ_ONLY: u8 = 0x01;

/// A parameter value as the client sent it.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    /// Strings, decimals, blobs: the bytes as sent.
    Bytes(Vec<u8>),
    Date(Date),
    DateTime(DateTime),
    Time(Time),
}

/// The header of COM_STMT_EXECUTE and the parameter bytes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execute {
    pub stmt_id: u32,
    pub flags: u8,
    /// Null bitmap, bound flag, types and values (decoded with [`decode_params`]).
    pub params: Vec<u8>,
}

/// Bounds-checked reader.
struct Cur<'a> {
    what: &'static str,
    buf: &'a [u8],
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(WireError::malformed(
                self.what,
                format!("needs {n} more bytes, has {}", self.buf.len()),
            ));
        }
        let (h, t) = self.buf.split_at(n);
        self.buf = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn lenenc(&mut self) -> Result<u64> {
        Ok(match self.u8()? {
            n @ 0..=0xfa => u64::from(n),
            0xfc => u64::from(self.u16()?),
            0xfd => {
                let b = self.take(3)?;
                u64::from(u32::from_le_bytes([b[0], b[1], b[2], 0]))
            }
            0xfe => self.u64()?,
            other => {
                return Err(WireError::malformed(
                    self.what,
                    format!("bad length prefix {other:#x}"),
                ))
            }
        })
    }
}

/// COM_STMT_EXECUTE's body (after the command byte).
pub fn decode_execute(body: &[u8]) -> Result<Execute> {
    let mut c = Cur {
        what: "COM_STMT_EXECUTE",
        buf: body,
    };
    let stmt_id = c.u32()?;
    let flags = c.u8()?;
    let _iterations = c.u32()?;
    Ok(Execute {
        stmt_id,
        flags,
        params: c.buf.to_vec(),
    })
}

/// `stmt_id (4)` then `u32` (COM_STMT_FETCH) or nothing (CLOSE, RESET).
pub fn decode_stmt_id(what: &'static str, body: &[u8]) -> Result<(u32, Option<u32>)> {
    let mut c = Cur { what, buf: body };
    let id = c.u32()?;
    let more = if c.buf.len() >= 4 {
        Some(c.u32()?)
    } else {
        None
    };
    Ok((id, more))
}

/// COM_STMT_SEND_LONG_DATA's body: statement, parameter, data.
pub fn decode_long_data(body: &[u8]) -> Result<(u32, u16, Vec<u8>)> {
    let mut c = Cur {
        what: "COM_STMT_SEND_LONG_DATA",
        buf: body,
    };
    Ok((c.u32()?, c.u16()?, c.buf.to_vec()))
}

/// Decodes `n` parameters. `types` holds each parameter's `(type, unsigned)` from the last
/// execute that bound them; a body with `new_params_bound = 1` replaces them. A parameter that
/// got COM_STMT_SEND_LONG_DATA (`long_data[i]` is `Some`) takes that data and has no bytes in
/// the values part.
pub fn decode_params(
    body: &[u8],
    n: usize,
    types: &mut Vec<(u8, bool)>,
    long_data: &[Option<Vec<u8>>],
) -> Result<Vec<Param>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut c = Cur {
        what: "COM_STMT_EXECUTE parameters",
        buf: body,
    };
    let bitmap = c.take(n.div_ceil(8))?.to_vec();
    let bound = c.u8()?;
    if bound == 1 {
        types.clear();
        for _ in 0..n {
            let t = c.u16()?;
            types.push(((t & 0xff) as u8, t & 0x8000 != 0));
        }
    }
    if types.len() != n {
        return Err(WireError::malformed(
            "COM_STMT_EXECUTE parameters",
            "parameter types were never bound",
        ));
    }
    let mut out = Vec::with_capacity(n);
    for (i, &(ty, unsigned)) in types.iter().enumerate() {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            out.push(Param::Null);
            continue;
        }
        if let Some(Some(data)) = long_data.get(i) {
            out.push(Param::Bytes(data.clone()));
            continue;
        }
        out.push(decode_value(&mut c, ty, unsigned)?);
    }
    Ok(out)
}

fn decode_value(c: &mut Cur<'_>, ty: u8, unsigned: bool) -> Result<Param> {
    const TINY: u8 = ColumnType::MYSQL_TYPE_TINY as u8;
    const SHORT: u8 = ColumnType::MYSQL_TYPE_SHORT as u8;
    const YEAR: u8 = ColumnType::MYSQL_TYPE_YEAR as u8;
    const LONG: u8 = ColumnType::MYSQL_TYPE_LONG as u8;
    const INT24: u8 = ColumnType::MYSQL_TYPE_INT24 as u8;
    const LONGLONG: u8 = ColumnType::MYSQL_TYPE_LONGLONG as u8;
    const FLOAT: u8 = ColumnType::MYSQL_TYPE_FLOAT as u8;
    const DOUBLE: u8 = ColumnType::MYSQL_TYPE_DOUBLE as u8;
    const NULL: u8 = ColumnType::MYSQL_TYPE_NULL as u8;
    const DATE: u8 = ColumnType::MYSQL_TYPE_DATE as u8;
    const DATETIME: u8 = ColumnType::MYSQL_TYPE_DATETIME as u8;
    const TIMESTAMP: u8 = ColumnType::MYSQL_TYPE_TIMESTAMP as u8;
    const TIME: u8 = ColumnType::MYSQL_TYPE_TIME as u8;
    let int = |v: i64, u: u64| {
        if unsigned {
            Param::UInt(u)
        } else {
            Param::Int(v)
        }
    };
    Ok(match ty {
        NULL => Param::Null,
        TINY => {
            let b = c.u8()?;
            int(i64::from(b as i8), u64::from(b))
        }
        SHORT | YEAR => {
            let v = c.u16()?;
            int(i64::from(v as i16), u64::from(v))
        }
        LONG | INT24 => {
            let v = c.u32()?;
            int(i64::from(v as i32), u64::from(v))
        }
        LONGLONG => {
            let v = c.u64()?;
            int(v as i64, v)
        }
        FLOAT => Param::Float(f32::from_bits(c.u32()?)),
        DOUBLE => Param::Double(f64::from_bits(c.u64()?)),
        DATE | DATETIME | TIMESTAMP => {
            let len = c.u8()?;
            let b = c.take(usize::from(len))?;
            let mut dt = DateTime::default();
            if len >= 4 {
                dt.date = Date {
                    year: u16::from_le_bytes([b[0], b[1]]),
                    month: b[2],
                    day: b[3],
                };
            }
            if len >= 7 {
                dt.hour = b[4];
                dt.minute = b[5];
                dt.second = b[6];
            }
            if len >= 11 {
                dt.micros = u32::from_le_bytes([b[7], b[8], b[9], b[10]]);
            }
            if ty == DATE {
                Param::Date(dt.date)
            } else {
                Param::DateTime(dt)
            }
        }
        TIME => {
            let len = c.u8()?;
            let b = c.take(usize::from(len))?;
            let mut t = Time::default();
            if len >= 8 {
                t.negative = b[0] != 0;
                let days = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
                // Any day count a client sends (MySQL's TIME stops at 838 h): saturate, never
                // overflow.
                let hours = u64::from(days) * 24 + u64::from(b[5]);
                t.hours = u16::try_from(hours).unwrap_or(u16::MAX);
                t.minutes = b[6];
                t.seconds = b[7];
            }
            if len >= 12 {
                t.micros = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
            }
            Param::Time(t)
        }
        _ => {
            let n = c.lenenc()?;
            let n = usize::try_from(n)
                .map_err(|_| WireError::malformed("COM_STMT_EXECUTE parameters", "huge value"))?;
            Param::Bytes(c.take(n)?.to_vec())
        }
    })
}

/// The answer to COM_STMT_PREPARE (before the parameter and column definitions).
pub fn encode_prepare_ok_into(stmt_id: u32, columns: u16, params: u16, buf: &mut Vec<u8>) {
    buf.push(0x00);
    buf.extend_from_slice(&stmt_id.to_le_bytes());
    buf.extend_from_slice(&columns.to_le_bytes());
    buf.extend_from_slice(&params.to_le_bytes());
    buf.push(0x00);
    buf.extend_from_slice(&0u16.to_le_bytes());
}

/// Appends a DATE / DATETIME / TIMESTAMP cell (shortest length form).
pub fn put_datetime(buf: &mut Vec<u8>, dt: &DateTime) {
    let d = &dt.date;
    let zero_date = d.year == 0 && d.month == 0 && d.day == 0;
    let zero_time = dt.hour == 0 && dt.minute == 0 && dt.second == 0;
    let len: u8 = if dt.micros != 0 {
        11
    } else if !zero_time {
        7
    } else if !zero_date {
        4
    } else {
        0
    };
    buf.push(len);
    if len >= 4 {
        buf.extend_from_slice(&d.year.to_le_bytes());
        buf.push(d.month);
        buf.push(d.day);
    }
    if len >= 7 {
        buf.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
    }
    if len >= 11 {
        buf.extend_from_slice(&dt.micros.to_le_bytes());
    }
}

/// Appends a TIME cell (shortest length form).
pub fn put_time(buf: &mut Vec<u8>, t: &Time) {
    let zero = t.hours == 0 && t.minutes == 0 && t.seconds == 0 && t.micros == 0;
    let len: u8 = if zero {
        0
    } else if t.micros != 0 {
        12
    } else {
        8
    };
    buf.push(len);
    if len >= 8 {
        buf.push(u8::from(t.negative));
        let days = u32::from(t.hours) / 24;
        buf.extend_from_slice(&days.to_le_bytes());
        buf.extend_from_slice(&[(t.hours % 24) as u8, t.minutes, t.seconds]);
    }
    if len >= 12 {
        buf.extend_from_slice(&t.micros.to_le_bytes());
    }
}

/// Appends a length-encoded string cell.
pub fn put_lenenc(buf: &mut Vec<u8>, b: &[u8]) {
    buf.put_lenenc_str(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_of_any_day_count_saturates() {
        // One TIME parameter, bound types, 8-byte value with the largest day count
        // (found by the command fuzz target: the hour count overflowed).
        let mut body = vec![0u8, 1, 0x0b, 0];
        body.extend_from_slice(&[8, 0, 0xFF, 0xFF, 0xFF, 0xFF, 23, 59, 59]);
        let mut types = Vec::new();
        let got = decode_params(&body, 1, &mut types, &[]).expect("decodes");
        assert_eq!(
            got[0],
            Param::Time(Time {
                negative: false,
                hours: u16::MAX,
                minutes: 59,
                seconds: 59,
                micros: 0
            })
        );
    }

    #[test]
    fn parameters_decode_as_mysql_common_encodes_them() {
        use mysql_common::packets::ComStmtExecuteRequestBuilder;
        use mysql_common::proto::MySerialize;
        use mysql_common::value::Value as V;
        let params = vec![
            V::Int(-5),
            V::UInt(u64::MAX),
            V::NULL,
            V::Bytes(b"it's".to_vec()),
            V::Double(1.5),
            V::Date(2024, 2, 29, 13, 14, 15, 16),
            V::Time(true, 1, 2, 3, 4, 5),
        ];
        let (body, _) = ComStmtExecuteRequestBuilder::new(7).build(&params);
        let mut raw = Vec::new();
        body.serialize(&mut raw);
        assert_eq!(raw[0], 0x17);
        let ex = decode_execute(&raw[1..]).expect("header");
        assert_eq!(ex.stmt_id, 7);
        let mut types = Vec::new();
        let got = decode_params(&ex.params, params.len(), &mut types, &[]).expect("params");
        assert_eq!(got[0], Param::Int(-5));
        assert_eq!(got[1], Param::UInt(u64::MAX));
        assert_eq!(got[2], Param::Null);
        assert_eq!(got[3], Param::Bytes(b"it's".to_vec()));
        assert_eq!(got[4], Param::Double(1.5));
        assert_eq!(
            got[5],
            Param::DateTime(DateTime {
                date: Date {
                    year: 2024,
                    month: 2,
                    day: 29
                },
                hour: 13,
                minute: 14,
                second: 15,
                micros: 16
            })
        );
        assert_eq!(
            got[6],
            Param::Time(Time {
                negative: true,
                hours: 26,
                minutes: 3,
                seconds: 4,
                micros: 5
            })
        );
        // Short or garbled bodies are errors, not panics.
        for cut in 0..ex.params.len() {
            let mut t = Vec::new();
            let _ = decode_params(&ex.params[..cut], params.len(), &mut t, &[]);
        }
        assert!(decode_params(&[0, 0], 3, &mut Vec::new(), &[]).is_err());
    }

    #[test]
    fn binary_temporal_cells_use_the_shortest_form() {
        let mut b = Vec::new();
        put_datetime(&mut b, &DateTime::default());
        assert_eq!(b, [0]);
        b.clear();
        put_datetime(
            &mut b,
            &DateTime {
                date: Date {
                    year: 2024,
                    month: 1,
                    day: 2,
                },
                ..DateTime::default()
            },
        );
        assert_eq!(b, [4, 0xe8, 0x07, 1, 2]);
        b.clear();
        put_time(
            &mut b,
            &Time {
                negative: false,
                hours: 25,
                minutes: 1,
                seconds: 2,
                micros: 0,
            },
        );
        assert_eq!(b, [8, 0, 1, 0, 0, 0, 1, 1, 2]);
    }
}

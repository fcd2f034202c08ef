//! Sorted runs on disk, for a sort larger than its memory budget: each run is a sorted batch
//! of (sort key, row) written to an anonymous temporary file (gone when closed, so a dead
//! statement leaves nothing behind), and the runs are merged back in order.
//!
//! A run is a sequence of records `u32 length (LE) | values of the key | values of the row`,
//! each value a tag byte and its body (little-endian numbers, `u32`-prefixed bytes, JSON in
//! TiDB's binary form). Only this module writes and reads them.

use std::cmp::Ordering;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use tibinlog_protocol::value::{Date, DateTime, Time, Value};

/// A sort key and its row.
pub type Keyed = (Vec<Value>, Vec<Value>);

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len());
    out.extend_from_slice(b);
}

fn put_date(out: &mut Vec<u8>, d: &Date) {
    out.extend_from_slice(&d.year.to_le_bytes());
    out.extend_from_slice(&[d.month, d.day]);
}

/// Appends `values`: their count, then each.
fn encode_values(out: &mut Vec<u8>, values: &[Value]) -> std::io::Result<()> {
    put_u32(out, values.len());
    for v in values {
        match v {
            Value::Null => out.push(0),
            Value::Int(i) => {
                out.push(1);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::UInt(u) | Value::Set(u) | Value::Bit(u) => {
                out.push(match v {
                    Value::UInt(_) => 2,
                    Value::Set(_) => 3,
                    _ => 4,
                });
                out.extend_from_slice(&u.to_le_bytes());
            }
            Value::Float(f) => {
                out.push(5);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Double(f) => {
                out.push(6);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Decimal(t) => {
                out.push(7);
                put_bytes(out, t.as_bytes());
            }
            Value::Bytes(b) => {
                out.push(8);
                put_bytes(out, b);
            }
            Value::Date(d) => {
                out.push(9);
                put_date(out, d);
            }
            Value::DateTime(dt) => {
                out.push(10);
                put_date(out, &dt.date);
                out.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
                out.extend_from_slice(&dt.micros.to_le_bytes());
            }
            Value::Timestamp { seconds, micros } => {
                out.push(11);
                out.extend_from_slice(&seconds.to_le_bytes());
                out.extend_from_slice(&micros.to_le_bytes());
            }
            Value::Time(t) => {
                out.push(12);
                out.push(u8::from(t.negative));
                out.extend_from_slice(&t.hours.to_le_bytes());
                out.extend_from_slice(&[t.minutes, t.seconds]);
                out.extend_from_slice(&t.micros.to_le_bytes());
            }
            Value::Year(y) | Value::Enum(y) => {
                out.push(if matches!(v, Value::Year(_)) { 13 } else { 14 });
                out.extend_from_slice(&y.to_le_bytes());
            }
            Value::Json(j) => {
                out.push(15);
                let mut body = Vec::new();
                crate::tidb::json::encode(&mut body, j).map_err(std::io::Error::other)?;
                put_bytes(out, &body);
            }
        }
    }
    Ok(())
}

/// Reads what [`encode_values`] wrote.
struct Cursor<'a>(&'a [u8]);

fn bad() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, "a sort run is corrupted")
}

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> std::io::Result<[u8; N]> {
        let (a, rest) = self.0.split_first_chunk::<N>().ok_or_else(bad)?;
        self.0 = rest;
        Ok(*a)
    }

    fn bytes(&mut self) -> std::io::Result<Vec<u8>> {
        let n = u32::from_le_bytes(self.take()?) as usize;
        let b = self.0.get(..n).ok_or_else(bad)?.to_vec();
        self.0 = &self.0[n..];
        Ok(b)
    }

    fn date(&mut self) -> std::io::Result<Date> {
        let [y0, y1, month, day] = self.take()?;
        Ok(Date {
            year: u16::from_le_bytes([y0, y1]),
            month,
            day,
        })
    }

    fn values(&mut self) -> std::io::Result<Vec<Value>> {
        let n = u32::from_le_bytes(self.take()?) as usize;
        let mut out = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            let [tag] = self.take()?;
            out.push(match tag {
                0 => Value::Null,
                1 => Value::Int(i64::from_le_bytes(self.take()?)),
                2 => Value::UInt(u64::from_le_bytes(self.take()?)),
                3 => Value::Set(u64::from_le_bytes(self.take()?)),
                4 => Value::Bit(u64::from_le_bytes(self.take()?)),
                5 => Value::Float(f32::from_le_bytes(self.take()?)),
                6 => Value::Double(f64::from_le_bytes(self.take()?)),
                7 => Value::Decimal(String::from_utf8(self.bytes()?).map_err(|_| bad())?),
                8 => Value::Bytes(self.bytes()?),
                9 => Value::Date(self.date()?),
                10 => {
                    let date = self.date()?;
                    let [hour, minute, second] = self.take()?;
                    let micros = u32::from_le_bytes(self.take()?);
                    Value::DateTime(DateTime {
                        date,
                        hour,
                        minute,
                        second,
                        micros,
                    })
                }
                11 => Value::Timestamp {
                    seconds: u32::from_le_bytes(self.take()?),
                    micros: u32::from_le_bytes(self.take()?),
                },
                12 => {
                    let [negative, h0, h1, minutes, seconds] = self.take()?;
                    Value::Time(Time {
                        negative: negative != 0,
                        hours: u16::from_le_bytes([h0, h1]),
                        minutes,
                        seconds,
                        micros: u32::from_le_bytes(self.take()?),
                    })
                }
                13 => Value::Year(u16::from_le_bytes(self.take()?)),
                14 => Value::Enum(u16::from_le_bytes(self.take()?)),
                15 => Value::Json(crate::tidb::json::decode(&self.bytes()?).map_err(|_| bad())?),
                _ => return Err(bad()),
            });
        }
        Ok(out)
    }
}

/// Writes `rows` (sorted) as one run to a new temporary file, rewound for reading.
pub fn write_run(rows: Vec<Keyed>) -> std::io::Result<std::fs::File> {
    let mut w = BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
    let mut buf = Vec::new();
    for (key, row) in rows {
        buf.clear();
        encode_values(&mut buf, &key)?;
        encode_values(&mut buf, &row)?;
        w.write_all(&(buf.len() as u32).to_le_bytes())?;
        w.write_all(&buf)?;
    }
    let mut f = w.into_inner().map_err(|e| e.into_error())?;
    f.seek(SeekFrom::Start(0))?;
    Ok(f)
}

/// The records of one run, read back in order.
struct RunReader {
    r: BufReader<std::fs::File>,
    buf: Vec<u8>,
}

impl RunReader {
    fn next(&mut self) -> std::io::Result<Option<Keyed>> {
        let mut len = [0u8; 4];
        match self.r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        self.buf.resize(u32::from_le_bytes(len) as usize, 0);
        self.r.read_exact(&mut self.buf)?;
        let mut c = Cursor(&self.buf);
        let key = c.values()?;
        let row = c.values()?;
        Ok(Some((key, row)))
    }
}

/// Sorted runs merged back into one sorted sequence. The runs are few (one per memory
/// budget's worth of rows), so the smallest head is found by looking at each.
pub struct Merged {
    readers: Vec<RunReader>,
    heads: Vec<Option<Keyed>>,
}

impl Merged {
    /// A merge of `runs`, each sorted.
    pub fn new(runs: Vec<std::fs::File>) -> std::io::Result<Self> {
        let mut readers: Vec<RunReader> = runs
            .into_iter()
            .map(|f| RunReader {
                r: BufReader::with_capacity(1 << 16, f),
                buf: Vec::new(),
            })
            .collect();
        let heads = readers
            .iter_mut()
            .map(RunReader::next)
            .collect::<std::io::Result<_>>()?;
        Ok(Merged { readers, heads })
    }

    /// The next row in the order `cmp` gives to keys; among equal keys the earlier run's
    /// first (rows seen first stay first, as the in-memory sort keeps them).
    pub fn next(
        &mut self,
        cmp: impl Fn(&[Value], &[Value]) -> Ordering,
    ) -> std::io::Result<Option<Vec<Value>>> {
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some((k, _)) = h else { continue };
            let better = match best.and_then(|b| self.heads[b].as_ref()) {
                None => true,
                Some((bk, _)) => cmp(k, bk) == Ordering::Less,
            };
            if better {
                best = Some(i);
            }
        }
        let Some(i) = best else { return Ok(None) };
        let next = self.readers[i].next()?;
        Ok(std::mem::replace(&mut self.heads[i], next).map(|(_, row)| row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tibinlog_protocol::value::Json;

    #[test]
    fn every_kind_of_value_comes_back_from_a_run() {
        let row = vec![
            Value::Null,
            Value::Int(-7),
            Value::UInt(u64::MAX),
            Value::Set(5),
            Value::Bit(3),
            Value::Float(1.5),
            Value::Double(-2.25),
            Value::Decimal("-12.340".into()),
            Value::Bytes(b"a\0b".to_vec()),
            Value::Date(Date {
                year: 2024,
                month: 2,
                day: 29,
            }),
            Value::DateTime(DateTime {
                date: Date::default(),
                hour: 23,
                minute: 59,
                second: 58,
                micros: 999_999,
            }),
            Value::Timestamp {
                seconds: 1,
                micros: 2,
            },
            Value::Time(Time {
                negative: true,
                hours: 838,
                minutes: 59,
                seconds: 59,
                micros: 0,
            }),
            Value::Year(2155),
            Value::Enum(2),
            Value::Json(Json::Array(vec![Json::Int(1), Json::String("x".into())])),
        ];
        let key = vec![Value::Int(1)];
        let f = write_run(vec![(key.clone(), row.clone())]).expect("write");
        let mut r = RunReader {
            r: BufReader::new(f),
            buf: Vec::new(),
        };
        assert_eq!(r.next().expect("read"), Some((key, row)));
        assert_eq!(r.next().expect("end"), None);
    }

    #[test]
    fn runs_merge_in_key_order_keeping_earlier_runs_first_among_equals() {
        let kv = |k: i64, tag: i64| (vec![Value::Int(k)], vec![Value::Int(k), Value::Int(tag)]);
        let runs = vec![
            write_run(vec![kv(1, 0), kv(3, 0), kv(5, 0)]).expect("run"),
            write_run(vec![kv(2, 1), kv(3, 1), kv(9, 1)]).expect("run"),
            write_run(Vec::new()).expect("run"),
        ];
        let cmp = |a: &[Value], b: &[Value]| match (&a[0], &b[0]) {
            (Value::Int(x), Value::Int(y)) => x.cmp(y),
            _ => Ordering::Equal,
        };
        let mut merged = Merged::new(runs).expect("merge");
        let mut got = Vec::new();
        while let Some(row) = merged.next(cmp).expect("next") {
            got.push(row);
        }
        let pairs: Vec<(i64, i64)> = got
            .iter()
            .map(|r| match (&r[0], &r[1]) {
                (Value::Int(a), Value::Int(b)) => (*a, *b),
                _ => panic!("ints"),
            })
            .collect();
        assert_eq!(pairs, vec![(1, 0), (2, 1), (3, 0), (3, 1), (5, 0), (9, 1)]);
    }

    #[test]
    fn a_damaged_run_is_an_error() {
        let mut c = Cursor(&[1, 0, 0, 0, 99]);
        assert!(c.values().is_err());
        let mut c = Cursor(&[1, 0, 0, 0, 8, 200, 0, 0, 0, 1]);
        assert!(c.values().is_err());
    }
}

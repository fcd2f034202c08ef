//! MySQL binary JSON (`sql-common/json_binary.cc`): encoder from [`Json`] and decoder back.
//!
//! A document is a type byte and a value. Containers:
//! ```text
//! object: +-------+------+--------------------------+------------------------+------+--------+
//!         | count | size | key entries              | value entries          | keys | values |
//!         |       |      | (key offset, key len u16)| (type u8, offset|inline)|      |        |
//!         +-------+------+--------------------------+------------------------+------+--------+
//! array:  | count | size | value entries            | values                 |
//! ```
//! count, size and offsets are u16 in the small formats (types 0x00, 0x02) and u32 in the large
//! ones (0x01, 0x03); offsets count from the first byte of `count`. Keys are sorted by length,
//! then bytewise, duplicates keep the last value. Literals and (u)int16 are inlined in the value
//! entry; (u)int32 only in the large format. A container is written small unless an offset or its
//! size exceeds 65535, each nested container choosing for itself, as MySQL does.
//!
//! Scalars: 0x04 literal (0 null, 1 true, 2 false), 0x05/0x06 int16/uint16, 0x07/0x08 int32/uint32,
//! 0x09/0x0A int64/uint64, 0x0B double, 0x0C string (variable-length length: 7 bits per byte, low
//! group first, high bit = more), 0x0F opaque (field type, variable-length length, data). DECIMAL
//! is opaque type 246 with precision, scale, binary decimal; DATE/TIME/DATETIME/TIMESTAMP are
//! opaque 10/11/12/7 with the 8-byte LE packed integer.

use super::codec::Reader;
use super::decimal;
use super::error::{BinlogError, Result};
use super::table::column_type;
use super::time;
use crate::value::Json;

/// Binary JSON type bytes.
#[allow(missing_docs)]
pub mod json_type {
    pub const SMALL_OBJECT: u8 = 0x00;
    pub const LARGE_OBJECT: u8 = 0x01;
    pub const SMALL_ARRAY: u8 = 0x02;
    pub const LARGE_ARRAY: u8 = 0x03;
    pub const LITERAL: u8 = 0x04;
    pub const INT16: u8 = 0x05;
    pub const UINT16: u8 = 0x06;
    pub const INT32: u8 = 0x07;
    pub const UINT32: u8 = 0x08;
    pub const INT64: u8 = 0x09;
    pub const UINT64: u8 = 0x0A;
    pub const DOUBLE: u8 = 0x0B;
    pub const STRING: u8 = 0x0C;
    pub const OPAQUE: u8 = 0x0F;
}
use json_type as jt;

const LITERAL_NULL: u8 = 0;
const LITERAL_TRUE: u8 = 1;
const LITERAL_FALSE: u8 = 2;

fn too_big() -> BinlogError {
    BinlogError::Json {
        reason: "document larger than 4 GiB",
    }
}

/// Appends the binary form of `doc` (type byte + value), the bytes of a JSON column value.
pub fn encode_into(doc: &Json, buf: &mut Vec<u8>) -> Result<()> {
    let at = buf.len();
    buf.push(0);
    let t = match encode_value(doc, buf) {
        Ok(t) => t,
        Err(e) => {
            buf.truncate(at);
            return Err(e);
        }
    };
    buf[at] = t;
    Ok(())
}

fn put_varlen(buf: &mut Vec<u8>, mut n: usize) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            buf.push(b);
            return;
        }
        buf.push(b | 0x80);
    }
}

/// The inlined representation of a scalar in a value entry, if it has one in this format.
fn inline_value(v: &Json, large: bool) -> Option<(u8, u32)> {
    match v {
        Json::Null => Some((jt::LITERAL, u32::from(LITERAL_NULL))),
        Json::Bool(true) => Some((jt::LITERAL, u32::from(LITERAL_TRUE))),
        Json::Bool(false) => Some((jt::LITERAL, u32::from(LITERAL_FALSE))),
        Json::Int(i) if i16::try_from(*i).is_ok() => Some((jt::INT16, u32::from(*i as i16 as u16))),
        Json::Int(i) if large && i32::try_from(*i).is_ok() => Some((jt::INT32, *i as i32 as u32)),
        Json::UInt(u) if u16::try_from(*u).is_ok() => Some((jt::UINT16, *u as u32)),
        Json::UInt(u) if large && u32::try_from(*u).is_ok() => Some((jt::UINT32, *u as u32)),
        _ => None,
    }
}

fn put_opaque(buf: &mut Vec<u8>, field_type: u8, data: &[u8]) {
    buf.push(field_type);
    put_varlen(buf, data.len());
    buf.extend_from_slice(data);
}

/// Writes the value bytes of `v` (no type byte) and returns its type.
fn encode_value(v: &Json, buf: &mut Vec<u8>) -> Result<u8> {
    Ok(match v {
        Json::Null => {
            buf.push(LITERAL_NULL);
            jt::LITERAL
        }
        Json::Bool(b) => {
            buf.push(if *b { LITERAL_TRUE } else { LITERAL_FALSE });
            jt::LITERAL
        }
        Json::Int(i) => {
            if let Ok(x) = i16::try_from(*i) {
                buf.extend_from_slice(&x.to_le_bytes());
                jt::INT16
            } else if let Ok(x) = i32::try_from(*i) {
                buf.extend_from_slice(&x.to_le_bytes());
                jt::INT32
            } else {
                buf.extend_from_slice(&i.to_le_bytes());
                jt::INT64
            }
        }
        Json::UInt(u) => {
            if let Ok(x) = u16::try_from(*u) {
                buf.extend_from_slice(&x.to_le_bytes());
                jt::UINT16
            } else if let Ok(x) = u32::try_from(*u) {
                buf.extend_from_slice(&x.to_le_bytes());
                jt::UINT32
            } else {
                buf.extend_from_slice(&u.to_le_bytes());
                jt::UINT64
            }
        }
        Json::Double(d) => {
            buf.extend_from_slice(&d.to_le_bytes());
            jt::DOUBLE
        }
        Json::String(s) => {
            put_varlen(buf, s.len());
            buf.extend_from_slice(s.as_bytes());
            jt::STRING
        }
        Json::Array(items) => {
            let refs: Vec<&Json> = items.iter().collect();
            encode_container(None, &refs, buf)?
        }
        Json::Object(members) => {
            // Sort by (length, bytes); a stable sort keeps document order among equal keys so the
            // last duplicate can win.
            let mut m: Vec<&(String, Json)> = members.iter().collect();
            m.sort_by(|a, b| {
                a.0.len()
                    .cmp(&b.0.len())
                    .then_with(|| a.0.as_bytes().cmp(b.0.as_bytes()))
            });
            let mut dedup: Vec<&(String, Json)> = Vec::with_capacity(m.len());
            for e in m {
                match dedup.last_mut() {
                    Some(last) if last.0 == e.0 => *last = e,
                    _ => dedup.push(e),
                }
            }
            let keys: Vec<&str> = dedup.iter().map(|e| e.0.as_str()).collect();
            let vals: Vec<&Json> = dedup.iter().map(|e| &e.1).collect();
            encode_container(Some(&keys), &vals, buf)?
        }
        Json::Decimal {
            text,
            precision,
            scale,
        } => {
            let mut data = vec![*precision, *scale];
            decimal::encode_into(text, *precision, *scale, &mut data)?;
            put_opaque(buf, column_type::NEWDECIMAL, &data);
            jt::OPAQUE
        }
        Json::Date(d) => {
            put_opaque(buf, column_type::DATE, &time::date_packed(d).to_le_bytes());
            jt::OPAQUE
        }
        Json::DateTime(dt) => {
            put_opaque(
                buf,
                column_type::DATETIME,
                &time::datetime_packed(dt).to_le_bytes(),
            );
            jt::OPAQUE
        }
        Json::Timestamp(dt) => {
            put_opaque(
                buf,
                column_type::TIMESTAMP,
                &time::datetime_packed(dt).to_le_bytes(),
            );
            jt::OPAQUE
        }
        Json::Time(t) => {
            put_opaque(
                buf,
                column_type::TIME,
                &time::time_packed_full(t).to_le_bytes(),
            );
            jt::OPAQUE
        }
        Json::Opaque { field_type, data } => {
            put_opaque(buf, *field_type, data);
            jt::OPAQUE
        }
    })
}

/// Writes an object (`keys` given) or array, small if it fits, else large. Returns the type.
fn encode_container(keys: Option<&[&str]>, vals: &[&Json], buf: &mut Vec<u8>) -> Result<u8> {
    let start = buf.len();
    if encode_container_as(keys, vals, false, buf)? {
        return Ok(if keys.is_some() {
            jt::SMALL_OBJECT
        } else {
            jt::SMALL_ARRAY
        });
    }
    buf.truncate(start);
    if encode_container_as(keys, vals, true, buf)? {
        return Ok(if keys.is_some() {
            jt::LARGE_OBJECT
        } else {
            jt::LARGE_ARRAY
        });
    }
    buf.truncate(start);
    Err(too_big())
}

/// Returns Ok(false) when an offset or the size does not fit the chosen format.
fn encode_container_as(
    keys: Option<&[&str]>,
    vals: &[&Json],
    large: bool,
    buf: &mut Vec<u8>,
) -> Result<bool> {
    let os = if large { 4 } else { 2 };
    let max = if large {
        u64::from(u32::MAX)
    } else {
        u64::from(u16::MAX)
    };
    let start = buf.len();
    let n = vals.len();
    if n as u64 > max {
        return Ok(false);
    }
    let put = |buf: &mut Vec<u8>, at: usize, v: u64| {
        buf[at..at + os].copy_from_slice(&v.to_le_bytes()[..os]);
    };
    let key_entry = os + 2;
    let value_entry = 1 + os;
    let n_keys = keys.map_or(0, <[&str]>::len);
    let header = 2 * os + n_keys * key_entry + n * value_entry;
    buf.resize(start + header, 0);
    put(buf, start, n as u64);
    if let Some(keys) = keys {
        for (k, key) in keys.iter().enumerate() {
            let off = (buf.len() - start) as u64;
            if off > max {
                return Ok(false);
            }
            let len = u16::try_from(key.len()).map_err(|_| BinlogError::Json {
                reason: "object key longer than 65535 bytes",
            })?;
            let e = start + 2 * os + k * key_entry;
            put(buf, e, off);
            buf[e + os..e + os + 2].copy_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(key.as_bytes());
        }
    }
    let entries = start + 2 * os + n_keys * key_entry;
    for (k, v) in vals.iter().enumerate() {
        let e = entries + k * value_entry;
        if let Some((t, x)) = inline_value(v, large) {
            buf[e] = t;
            buf[e + 1..e + 1 + os].copy_from_slice(&x.to_le_bytes()[..os]);
            continue;
        }
        let off = (buf.len() - start) as u64;
        if off > max {
            return Ok(false);
        }
        let t = encode_value(v, buf)?;
        buf[e] = t;
        put(buf, e + 1, off);
    }
    let size = (buf.len() - start) as u64;
    if size > max {
        return Ok(false);
    }
    put(buf, start + os, size);
    Ok(true)
}

/// Decodes a binary JSON document (type byte + value) into [`Json`]. An empty input is JSON
/// `null`, as MySQL treats a zero-length JSON column value.
pub fn decode(bin: &[u8]) -> Result<Json> {
    let Some((&t, rest)) = bin.split_first() else {
        return Ok(Json::Null);
    };
    decode_value(t, rest, 0)
}

const MAX_DEPTH: usize = 100;

fn malformed(what: &'static str) -> BinlogError {
    BinlogError::Malformed { what, offset: 0 }
}

fn read_varlen(r: &mut Reader<'_>) -> Result<usize> {
    let mut n: usize = 0;
    for i in 0..5 {
        let b = r.u8()?;
        n |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(r.malformed())
}

/// Decodes the value of type `t` at the start of `data` (which extends to the end of the enclosing
/// container, for containers whose size field bounds them).
fn decode_value(t: u8, data: &[u8], depth: usize) -> Result<Json> {
    if depth > MAX_DEPTH {
        return Err(malformed("json nesting"));
    }
    let mut r = Reader::new(data, "json value");
    Ok(match t {
        jt::SMALL_OBJECT | jt::LARGE_OBJECT => {
            decode_container(data, t == jt::LARGE_OBJECT, true, depth)?
        }
        jt::SMALL_ARRAY | jt::LARGE_ARRAY => {
            decode_container(data, t == jt::LARGE_ARRAY, false, depth)?
        }
        jt::LITERAL => match r.u8()? {
            LITERAL_NULL => Json::Null,
            LITERAL_TRUE => Json::Bool(true),
            LITERAL_FALSE => Json::Bool(false),
            _ => return Err(malformed("json literal")),
        },
        jt::INT16 => Json::Int(i64::from(r.u16_le()? as i16)),
        jt::UINT16 => Json::UInt(u64::from(r.u16_le()?)),
        jt::INT32 => Json::Int(i64::from(r.u32_le()? as i32)),
        jt::UINT32 => Json::UInt(u64::from(r.u32_le()?)),
        jt::INT64 => Json::Int(r.u64_le()? as i64),
        jt::UINT64 => Json::UInt(r.u64_le()?),
        jt::DOUBLE => Json::Double(f64::from_bits(r.u64_le()?)),
        jt::STRING => {
            let n = read_varlen(&mut r)?;
            let s = r.bytes(n)?;
            Json::String(String::from_utf8(s.to_vec()).map_err(|_| malformed("json string utf8"))?)
        }
        jt::OPAQUE => {
            let ft = r.u8()?;
            let n = read_varlen(&mut r)?;
            let d = r.bytes(n)?;
            decode_opaque(ft, d)?
        }
        _ => return Err(malformed("json type")),
    })
}

fn decode_opaque(ft: u8, d: &[u8]) -> Result<Json> {
    let packed = || -> Result<i64> {
        let b: [u8; 8] = d
            .get(..8)
            .and_then(|s| s.try_into().ok())
            .ok_or(malformed("json packed time"))?;
        Ok(i64::from_le_bytes(b))
    };
    Ok(match ft {
        column_type::NEWDECIMAL if d.len() >= 2 => {
            let (precision, scale) = (d[0], d[1]);
            let (text, _) = decimal::decode(&d[2..], precision, scale)?;
            Json::Decimal {
                text,
                precision,
                scale,
            }
        }
        column_type::DATE => Json::Date(
            time::datetime_from_packed(packed()?)
                .ok_or(malformed("json date"))?
                .date,
        ),
        column_type::DATETIME => {
            Json::DateTime(time::datetime_from_packed(packed()?).ok_or(malformed("json datetime"))?)
        }
        column_type::TIMESTAMP => Json::Timestamp(
            time::datetime_from_packed(packed()?).ok_or(malformed("json timestamp"))?,
        ),
        column_type::TIME => {
            Json::Time(time::time_from_packed(packed()?).ok_or(malformed("json time"))?)
        }
        _ => Json::Opaque {
            field_type: ft,
            data: d.to_vec(),
        },
    })
}

fn decode_container(data: &[u8], large: bool, object: bool, depth: usize) -> Result<Json> {
    let os = if large { 4 } else { 2 };
    let mut r = Reader::new(data, "json container");
    let count = r.uint_le(os)? as usize;
    let size = r.uint_le(os)? as usize;
    let data = data.get(..size).ok_or(malformed("json container size"))?;
    let key_entry = os + 2;
    let value_entry = 1 + os;
    let header = 2 * os + if object { count * key_entry } else { 0 } + count * value_entry;
    if count > data.len() || header > data.len() {
        return Err(malformed("json container header"));
    }
    let mut r = Reader::new(data, "json container");
    r.bytes(2 * os)?;
    let mut keys = Vec::with_capacity(if object { count } else { 0 });
    if object {
        for _ in 0..count {
            let off = r.uint_le(os)? as usize;
            let len = r.u16_le()? as usize;
            let k = off
                .checked_add(len)
                .and_then(|end| data.get(off..end))
                .ok_or(malformed("json key"))?;
            keys.push(String::from_utf8(k.to_vec()).map_err(|_| malformed("json key utf8"))?);
        }
    }
    let mut vals = Vec::with_capacity(count);
    for _ in 0..count {
        let t = r.u8()?;
        let raw = r.bytes(os)?;
        let inlined = matches!(t, jt::LITERAL | jt::INT16 | jt::UINT16)
            || (large && matches!(t, jt::INT32 | jt::UINT32));
        let v = if inlined {
            decode_value(t, raw, depth + 1)?
        } else {
            let mut a = [0u8; 8];
            a[..os].copy_from_slice(raw);
            let off = u64::from_le_bytes(a) as usize;
            let d = data.get(off..).ok_or(malformed("json value offset"))?;
            decode_value(t, d, depth + 1)?
        };
        vals.push(v);
    }
    Ok(if object {
        Json::Object(keys.into_iter().zip(vals).collect())
    } else {
        Json::Array(vals)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn enc(j: &Json) -> Vec<u8> {
        let mut b = Vec::new();
        encode_into(j, &mut b).unwrap();
        b
    }

    #[test]
    fn small_object_layout_by_hand() {
        // {"a": 1, "bb": "x"}: keys sorted by length; 1 is an inlined int16.
        let j = Json::Object(vec![
            ("bb".into(), Json::String("x".into())),
            ("a".into(), Json::Int(1)),
        ]);
        let want = [
            0x00, // small object
            2, 0, 23, 0, // count 2, size 23
            18, 0, 1, 0, // key "a" at 18, len 1
            19, 0, 2, 0, // key "bb" at 19, len 2
            0x05, 1, 0, // int16 1 inlined
            0x0C, 21, 0, // string at 21
            b'a', b'b', b'b', 1, b'x',
        ];
        assert_eq!(enc(&j), want);
        assert_eq!(
            decode(&want).unwrap(),
            Json::Object(vec![
                ("a".into(), Json::Int(1)),
                ("bb".into(), Json::String("x".into()))
            ])
        );
    }

    #[test]
    fn scalars_and_duplicates() {
        assert_eq!(enc(&Json::Int(70000)), [jt::INT32, 0x70, 0x11, 0x01, 0x00]);
        assert_eq!(enc(&Json::Bool(false)), [jt::LITERAL, 2]);
        let dup = Json::Object(vec![("k".into(), Json::Int(1)), ("k".into(), Json::Int(2))]);
        assert_eq!(
            decode(&enc(&dup)).unwrap(),
            Json::Object(vec![("k".into(), Json::Int(2))])
        );
    }

    #[test]
    fn large_format_when_small_overflows() {
        let j = Json::Array(vec![Json::String("x".repeat(70_000)), Json::Int(100_000)]);
        let b = enc(&j);
        assert_eq!(b[0], jt::LARGE_ARRAY);
        assert_eq!(decode(&b).unwrap(), j);
    }

    #[test]
    fn decoder_rejects_garbage() {
        for bad in [
            &[0x00, 5, 0][..],
            &[0x0C, 0x85],
            &[0x02, 1, 0, 200, 0],
            &[0x42],
        ] {
            assert!(decode(bad).is_err());
        }
    }
}

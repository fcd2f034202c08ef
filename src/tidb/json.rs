//! TiDB binary JSON (`pkg/types/json_binary.go`) to and from the protocol's `Json` tree, and
//! JSON text as MySQL prints it.
//!
//! ```text
//! doc     := type:u8 value
//! object  := count:u32 size:u32 key-entry{count} value-entry{count} key* value*
//! array   := count:u32 size:u32 value-entry{count} value*
//! key-entry   := offset:u32 length:u16          (offsets from the container start)
//! value-entry := type:u8 offset-or-literal:u32  (literals inline in the first byte)
//! int64/uint64/float64 := 8 bytes LE     string := uvarint length, bytes
//! opaque   := mysql_type:u8 uvarint length, bytes
//! date/datetime/timestamp := CoreTime u64 LE     time := nanos i64 LE, fsp u32 LE
//! ```
//!
//! Type codes: object 0x01, array 0x03, literal 0x04 (null 0, true 1, false 2), int64 0x09,
//! uint64 0x0A, float64 0x0B, string 0x0C, opaque 0x0D, date 0x0E, datetime 0x0F,
//! timestamp 0x10, time 0x11. All integers are little-endian; objects store keys sorted by
//! bytes (TiDB), which is not MySQL's order (length, then bytes).

use tibinlog_protocol::value::{DateTime, Json};

use super::codec::{decode_uvarint, encode_uvarint};
use super::error::{take, take_array, Error, Result};
use super::{decimal, time};

/// JSON type codes.
pub mod type_code {
    pub const OBJECT: u8 = 0x01;
    pub const ARRAY: u8 = 0x03;
    pub const LITERAL: u8 = 0x04;
    pub const INT64: u8 = 0x09;
    pub const UINT64: u8 = 0x0a;
    pub const FLOAT64: u8 = 0x0b;
    pub const STRING: u8 = 0x0c;
    pub const OPAQUE: u8 = 0x0d;
    pub const DATE: u8 = 0x0e;
    pub const DATETIME: u8 = 0x0f;
    pub const TIMESTAMP: u8 = 0x10;
    pub const DURATION: u8 = 0x11;
}

const LIT_NULL: u8 = 0;
const LIT_TRUE: u8 = 1;
const LIT_FALSE: u8 = 2;
const HEADER: usize = 8;
const KEY_ENTRY: usize = 6;
const VALUE_ENTRY: usize = 5;
/// Deepest nesting the decoder accepts (TiDB refuses to build documents deeper than 100).
pub const MAX_DEPTH: usize = 128;

fn u32_at(b: &[u8], at: usize, what: &'static str) -> Result<u32> {
    let s = b.get(at..).unwrap_or(&[]);
    let (a, _) = take_array::<4>(s, what)?;
    Ok(u32::from_le_bytes(a))
}

fn u64_at(b: &[u8], what: &'static str) -> Result<u64> {
    let (a, _) = take_array::<8>(b, what)?;
    Ok(u64::from_le_bytes(a))
}

/// Length in bytes of the value of type `tc` at the start of `body`.
pub fn binary_len(tc: u8, body: &[u8]) -> Result<usize> {
    use type_code::*;
    Ok(match tc {
        LITERAL => 1,
        INT64 | UINT64 | FLOAT64 | DATE | DATETIME | TIMESTAMP => 8,
        DURATION => 12,
        STRING => {
            let (n, rest) = decode_uvarint(body)?;
            (body.len() - rest.len())
                .checked_add(usize::try_from(n).unwrap_or(usize::MAX))
                .ok_or(Error::Corrupted {
                    what: "json string",
                    detail: "length overflow",
                })?
        }
        OPAQUE => {
            let (n, rest) = decode_uvarint(body.get(1..).unwrap_or(&[]))?;
            (body.len() - rest.len())
                .checked_add(usize::try_from(n).unwrap_or(usize::MAX))
                .ok_or(Error::Corrupted {
                    what: "json opaque",
                    detail: "length overflow",
                })?
        }
        OBJECT | ARRAY => u32_at(body, 4, "json container size")? as usize,
        other => {
            return Err(Error::UnknownFlag {
                what: "json type",
                flag: other,
            })
        }
    })
}

/// Decodes a type code followed by a binary JSON body (the v2 row payload of a JSON column).
pub fn decode(b: &[u8]) -> Result<Json> {
    let (&tc, body) = b.split_first().ok_or(Error::Truncated {
        what: "json type code",
        need: 1,
        have: 0,
    })?;
    decode_value(tc, body)
}

/// Decodes the value of type `tc` at the start of `body`.
pub fn decode_value(tc: u8, body: &[u8]) -> Result<Json> {
    decode_at(tc, body, 0)
}

fn utf8(b: &[u8], what: &'static str) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::InvalidUtf8 { what })
}

fn decode_at(tc: u8, body: &[u8], depth: usize) -> Result<Json> {
    use type_code::*;
    if depth > MAX_DEPTH {
        return Err(Error::JsonTooDeep { max: MAX_DEPTH });
    }
    Ok(match tc {
        LITERAL => match body.first() {
            Some(&LIT_NULL) => Json::Null,
            Some(&LIT_TRUE) => Json::Bool(true),
            Some(&LIT_FALSE) => Json::Bool(false),
            Some(&other) => {
                return Err(Error::UnknownFlag {
                    what: "json literal",
                    flag: other,
                })
            }
            None => {
                return Err(Error::Truncated {
                    what: "json literal",
                    need: 1,
                    have: 0,
                })
            }
        },
        INT64 => Json::Int(u64_at(body, "json int64")? as i64),
        UINT64 => Json::UInt(u64_at(body, "json uint64")?),
        FLOAT64 => Json::Double(f64::from_bits(u64_at(body, "json float64")?)),
        STRING => {
            let (n, rest) = decode_uvarint(body)?;
            let (s, _) = take(
                rest,
                usize::try_from(n).unwrap_or(usize::MAX),
                "json string",
            )?;
            Json::String(utf8(s, "json string")?)
        }
        OPAQUE => {
            let (&field_type, rest) = body.split_first().ok_or(Error::Truncated {
                what: "json opaque",
                need: 1,
                have: 0,
            })?;
            let (n, rest) = decode_uvarint(rest)?;
            let (data, _) = take(
                rest,
                usize::try_from(n).unwrap_or(usize::MAX),
                "json opaque",
            )?;
            Json::Opaque {
                field_type,
                data: data.to_vec(),
            }
        }
        DATE => Json::Date(time::core_time_to_datetime(u64_at(body, "json date")?)?.date),
        DATETIME => Json::DateTime(time::core_time_to_datetime(u64_at(body, "json datetime")?)?),
        TIMESTAMP => Json::Timestamp(time::core_time_to_datetime(u64_at(
            body,
            "json timestamp",
        )?)?),
        DURATION => {
            let (_, _) = take(body, 12, "json time")?;
            Json::Time(time::duration_from_nanos(u64_at(body, "json time")? as i64)?)
        }
        OBJECT | ARRAY => decode_container(tc == OBJECT, body, depth)?,
        other => {
            return Err(Error::UnknownFlag {
                what: "json type",
                flag: other,
            })
        }
    })
}

fn decode_container(is_object: bool, body: &[u8], depth: usize) -> Result<Json> {
    let count = u32_at(body, 0, "json container count")? as usize;
    let size = u32_at(body, 4, "json container size")? as usize;
    let (c, _) = take(body, size, "json container")?;
    let key_bytes = if is_object { KEY_ENTRY } else { 0 };
    let entries = count
        .checked_mul(key_bytes + VALUE_ENTRY)
        .and_then(|x| x.checked_add(HEADER))
        .ok_or(Error::Corrupted {
            what: "json container",
            detail: "element count overflow",
        })?;
    if entries > c.len() {
        return Err(Error::Truncated {
            what: "json container entries",
            need: entries,
            have: c.len(),
        });
    }
    let val_base = HEADER + count * key_bytes;
    let value = |i: usize| -> Result<Json> {
        let e = val_base + i * VALUE_ENTRY;
        let tc = c[e];
        if tc == type_code::LITERAL {
            return decode_at(tc, &c[e + 1..e + 2], depth + 1);
        }
        let off = u32_at(c, e + 1, "json value offset")? as usize;
        let v = c.get(off..).ok_or(Error::Corrupted {
            what: "json container",
            detail: "value offset past the end",
        })?;
        decode_at(tc, v, depth + 1)
    };
    if is_object {
        let mut members = Vec::with_capacity(count.min(1024));
        for i in 0..count {
            let e = HEADER + i * KEY_ENTRY;
            let off = u32_at(c, e, "json key offset")? as usize;
            let len = usize::from(u16::from_le_bytes([c[e + 4], c[e + 5]]));
            let key =
                off.checked_add(len)
                    .and_then(|end| c.get(off..end))
                    .ok_or(Error::Corrupted {
                        what: "json object",
                        detail: "key past the end",
                    })?;
            members.push((utf8(key, "json object key")?, value(i)?));
        }
        Ok(Json::Object(members))
    } else {
        let mut items = Vec::with_capacity(count.min(1024));
        for i in 0..count {
            items.push(value(i)?);
        }
        Ok(Json::Array(items))
    }
}

/// Appends the type code and TiDB binary body of `j`.
///
/// `Json::Decimal` has no TiDB binary form (TiDB turns decimals into doubles when casting to
/// JSON) and is written as a float64. TIME values are written with fsp 6, DATETIME and
/// TIMESTAMP with fsp 6 in their CoreTime nibble.
pub fn encode(buf: &mut Vec<u8>, j: &Json) -> Result<()> {
    let tc_pos = buf.len();
    buf.push(0);
    let tc = encode_body(buf, j)?;
    buf[tc_pos] = tc;
    Ok(())
}

fn encode_body(buf: &mut Vec<u8>, j: &Json) -> Result<u8> {
    use type_code::*;
    Ok(match j {
        Json::Null => {
            buf.push(LIT_NULL);
            LITERAL
        }
        Json::Bool(b) => {
            buf.push(if *b { LIT_TRUE } else { LIT_FALSE });
            LITERAL
        }
        Json::Int(v) => {
            buf.extend_from_slice(&v.to_le_bytes());
            INT64
        }
        Json::UInt(v) => {
            buf.extend_from_slice(&v.to_le_bytes());
            UINT64
        }
        Json::Double(f) => {
            buf.extend_from_slice(&f.to_bits().to_le_bytes());
            FLOAT64
        }
        Json::Decimal { text, .. } => {
            let f: f64 = decimal::canonical(text)?
                .parse()
                .map_err(|_| Error::BadDecimalText {
                    text: text.clone(),
                    detail: "not representable as a double",
                })?;
            buf.extend_from_slice(&f.to_bits().to_le_bytes());
            FLOAT64
        }
        Json::String(s) => {
            encode_uvarint(buf, s.len() as u64);
            buf.extend_from_slice(s.as_bytes());
            STRING
        }
        Json::Opaque { field_type, data } => {
            buf.push(*field_type);
            encode_uvarint(buf, data.len() as u64);
            buf.extend_from_slice(data);
            OPAQUE
        }
        Json::Date(d) => {
            let dt = DateTime {
                date: *d,
                ..DateTime::default()
            };
            buf.extend_from_slice(
                &time::datetime_to_core_time(&dt, time::fsp_tt::DATE).to_le_bytes(),
            );
            DATE
        }
        Json::DateTime(dt) => {
            buf.extend_from_slice(
                &time::datetime_to_core_time(dt, time::fsp_tt::DATETIME6).to_le_bytes(),
            );
            DATETIME
        }
        Json::Timestamp(dt) => {
            buf.extend_from_slice(
                &time::datetime_to_core_time(dt, time::fsp_tt::TIMESTAMP6).to_le_bytes(),
            );
            TIMESTAMP
        }
        Json::Time(t) => {
            buf.extend_from_slice(&time::duration_to_nanos(t).to_le_bytes());
            buf.extend_from_slice(&6u32.to_le_bytes());
            DURATION
        }
        Json::Array(items) => {
            let refs: Vec<&Json> = items.iter().collect();
            encode_container(buf, None, &refs)?;
            ARRAY
        }
        Json::Object(members) => {
            // TiDB builds objects from a Go map: keys unique (last wins), sorted by bytes.
            let mut sorted: Vec<(&str, &Json)> = Vec::with_capacity(members.len());
            for (k, v) in members {
                match sorted.iter_mut().find(|(k2, _)| *k2 == k.as_str()) {
                    Some(slot) => slot.1 = v,
                    None => sorted.push((k.as_str(), v)),
                }
            }
            sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            let keys: Vec<&str> = sorted.iter().map(|(k, _)| *k).collect();
            let vals: Vec<&Json> = sorted.iter().map(|(_, v)| *v).collect();
            encode_container(buf, Some(&keys), &vals)?;
            OBJECT
        }
    })
}

fn too_big() -> Error {
    Error::Corrupted {
        what: "json document",
        detail: "larger than 4 GiB",
    }
}

fn encode_container(buf: &mut Vec<u8>, keys: Option<&[&str]>, vals: &[&Json]) -> Result<()> {
    let start = buf.len();
    let count = u32::try_from(vals.len()).map_err(|_| too_big())?;
    buf.extend_from_slice(&count.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    let key_entries = buf.len();
    if let Some(keys) = keys {
        buf.resize(buf.len() + keys.len() * KEY_ENTRY, 0);
    }
    let val_entries = buf.len();
    buf.resize(buf.len() + vals.len() * VALUE_ENTRY, 0);
    if let Some(keys) = keys {
        for (i, k) in keys.iter().enumerate() {
            let off = u32::try_from(buf.len() - start).map_err(|_| too_big())?;
            let len = u16::try_from(k.len()).map_err(|_| Error::Corrupted {
                what: "json object",
                detail: "key longer than 65535 bytes",
            })?;
            let e = key_entries + i * KEY_ENTRY;
            buf[e..e + 4].copy_from_slice(&off.to_le_bytes());
            buf[e + 4..e + 6].copy_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(k.as_bytes());
        }
    }
    for (i, v) in vals.iter().enumerate() {
        let e = val_entries + i * VALUE_ENTRY;
        let at = buf.len();
        let tc = encode_body(buf, v)?;
        buf[e] = tc;
        if tc == type_code::LITERAL {
            buf[e + 1] = buf[at];
            buf.truncate(at);
        } else {
            let off = u32::try_from(at - start).map_err(|_| too_big())?;
            buf[e + 1..e + 5].copy_from_slice(&off.to_le_bytes());
        }
    }
    let size = u32::try_from(buf.len() - start).map_err(|_| too_big())?;
    buf[start + 4..start + 8].copy_from_slice(&size.to_le_bytes());
    Ok(())
}

// ---------------------------------------------------------------- text

/// Renders `j` as MySQL prints JSON: `{"a": 1, "b": [true, null]}` (a space after `:` and
/// `,`), object keys in MySQL's storage order (shorter keys first, then by bytes), doubles in
/// shortest round-trip form with `.0` added to integral values and exponent form outside
/// [1e-15, 1e15), temporal values quoted with 6 fractional digits, opaque values as
/// `"base64:typeN:..."`.
pub fn to_text(j: &Json) -> String {
    let mut s = String::new();
    write_text(&mut s, j);
    s
}

/// Appends the MySQL text form of `j` to `out`.
pub fn write_text(out: &mut String, j: &Json) {
    match j {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Int(v) => out.push_str(&v.to_string()),
        Json::UInt(v) => out.push_str(&v.to_string()),
        Json::Double(f) => write_double(out, *f),
        Json::Decimal { text, .. } => out.push_str(text),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_text(out, v);
            }
            out.push(']');
        }
        Json::Object(members) => {
            let mut sorted: Vec<&(String, Json)> = members.iter().collect();
            sorted.sort_by(|a, b| (a.0.len(), a.0.as_bytes()).cmp(&(b.0.len(), b.0.as_bytes())));
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, k);
                out.push_str(": ");
                write_text(out, v);
            }
            out.push('}');
        }
        Json::Date(d) => {
            out.push('"');
            out.push_str(&time::format_date(d));
            out.push('"');
        }
        Json::DateTime(dt) | Json::Timestamp(dt) => {
            out.push('"');
            out.push_str(&time::format_datetime(dt, 6));
            out.push('"');
        }
        Json::Time(t) => {
            out.push('"');
            out.push_str(&time::format_duration(t, 6));
            out.push('"');
        }
        Json::Opaque { field_type, data } => {
            out.push_str("\"base64:type");
            out.push_str(&field_type.to_string());
            out.push(':');
            base64(out, data);
            out.push('"');
        }
    }
}

fn write_double(out: &mut String, f: f64) {
    if !f.is_finite() {
        // Not representable in JSON; MySQL never stores these.
        out.push_str("null");
        return;
    }
    let abs = f.abs();
    let exp = super::text::shortest_exp(f, false);
    if abs != 0.0 && !(1e-15..1e15).contains(&abs) {
        out.push_str(&exp);
    } else {
        let s = super::text::exp_to_plain(&exp);
        let integral = !s.contains('.');
        out.push_str(&s);
        if integral {
            out.push_str(".0");
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn base64(out: &mut String, data: &[u8]) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(T[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

/// Converts parsed `serde_json` text to a `Json` tree (numbers become Int, UInt or Double as
/// TiDB's parser chooses), used for JSON column defaults.
pub fn from_serde(v: &serde_json::Value) -> Json {
    match v {
        serde_json::Value::Null => Json::Null,
        serde_json::Value::Bool(b) => Json::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Json::Int(i)
            } else if let Some(u) = n.as_u64() {
                Json::UInt(u)
            } else {
                Json::Double(n.as_f64().unwrap_or(0.0))
            }
        }
        serde_json::Value::String(s) => Json::String(s.clone()),
        serde_json::Value::Array(a) => Json::Array(a.iter().map(from_serde).collect()),
        serde_json::Value::Object(o) => {
            Json::Object(o.iter().map(|(k, v)| (k.clone(), from_serde(v))).collect())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tibinlog_protocol::value::{Date, Time};

    // tikv components/tidb_query_datatype/src/codec/row/v2/encoder_for_test.rs test_encode:
    // the JSON column {"key":"value"} is written as these bytes (type code first).
    const KEY_VALUE: [u8; 29] = [
        1, 1, 0, 0, 0, 28, 0, 0, 0, 19, 0, 0, 0, 3, 0, 12, 22, 0, 0, 0, 107, 101, 121, 5, 118, 97,
        108, 117, 101,
    ];

    #[test]
    fn golden_object() {
        let j = decode(&KEY_VALUE).unwrap();
        assert_eq!(
            j,
            Json::Object(vec![("key".into(), Json::String("value".into()))])
        );
        let mut b = Vec::new();
        encode(&mut b, &j).unwrap();
        assert_eq!(b, KEY_VALUE);
        assert_eq!(binary_len(KEY_VALUE[0], &KEY_VALUE[1..]).unwrap(), 28);
        assert_eq!(to_text(&j), r#"{"key": "value"}"#);
    }

    #[test]
    fn text_like_mysql() {
        let j = Json::Object(vec![
            ("bb".into(), Json::Array(vec![Json::Bool(true), Json::Null])),
            ("a".into(), Json::Int(1)),
            ("c".into(), Json::Double(1.0)),
            ("d".into(), Json::Double(1e20)),
            ("e".into(), Json::Double(0.5)),
            ("s".into(), Json::String("q\"\n\u{1}".into())),
        ]);
        assert_eq!(
            to_text(&j),
            r#"{"a": 1, "c": 1.0, "d": 1e20, "e": 0.5, "s": "q\"\n\u0001", "bb": [true, null]}"#
        );
        // Halfway between two 17-digit decimals: the even one, as MySQL prints it.
        assert_eq!(
            to_text(&Json::Double(-1_068_370_369_636.0 / 1024.0)),
            "-1043330439.0976562"
        );
        let t = Json::Array(vec![
            Json::Date(Date {
                year: 2020,
                month: 1,
                day: 2,
            }),
            Json::Time(Time {
                negative: true,
                hours: 1,
                minutes: 2,
                seconds: 3,
                micros: 4,
            }),
            Json::Opaque {
                field_type: 15,
                data: b"ab".to_vec(),
            },
        ]);
        assert_eq!(
            to_text(&t),
            r#"["2020-01-02", "-01:02:03.000004", "base64:type15:YWI="]"#
        );
    }

    #[test]
    fn errors() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[0x42, 0]).is_err());
        assert!(decode(&[1, 5, 0, 0, 0, 8, 0, 0, 0]).is_err());
        assert!(decode(&[4, 9]).is_err());
        assert!(decode(&[0x0c, 5, b'a']).is_err());
        // a deep chain of arrays is refused, not a stack overflow
        let mut j = Json::Null;
        for _ in 0..200 {
            j = Json::Array(vec![j]);
        }
        let mut b = Vec::new();
        encode(&mut b, &j).unwrap();
        assert!(matches!(decode(&b), Err(Error::JsonTooDeep { .. })));
    }

    fn arb_json() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            any::<i64>().prop_map(Json::Int),
            any::<u64>().prop_map(Json::UInt),
            proptest::num::f64::NORMAL.prop_map(Json::Double),
            ".{0,10}".prop_map(Json::String),
            (0u16..=9999, 1u8..=12, 1u8..=28).prop_map(|(y, m, d)| Json::Date(Date {
                year: y,
                month: m,
                day: d
            })),
            (0u16..=9999, 1u8..=12, 1u8..=28, 0u8..24, 0u32..1_000_000).prop_map(
                |(y, m, d, h, us)| Json::DateTime(DateTime {
                    date: Date {
                        year: y,
                        month: m,
                        day: d
                    },
                    hour: h,
                    minute: 1,
                    second: 2,
                    micros: us
                })
            ),
            (any::<bool>(), 0u16..839, 0u8..60, 0u32..1_000_000).prop_map(|(n, h, m, us)| {
                Json::Time(Time {
                    negative: n && (h, m, us) != (0, 0, 0),
                    hours: h,
                    minutes: m,
                    seconds: 7,
                    micros: us,
                })
            }),
            (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..8)).prop_map(|(t, d)| {
                Json::Opaque {
                    field_type: t,
                    data: d,
                }
            }),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
                proptest::collection::btree_map("[a-z]{0,6}", inner, 0..6)
                    .prop_map(|m| Json::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn roundtrip(j in arb_json()) {
            let mut b = Vec::new();
            encode(&mut b, &j).unwrap();
            prop_assert_eq!(binary_len(b[0], &b[1..]).unwrap(), b.len() - 1);
            prop_assert_eq!(decode(&b).unwrap(), j);
        }

        #[test]
        fn random_bytes_never_panic(b: Vec<u8>) {
            let _ = decode(&b);
            if let Some((&tc, body)) = b.split_first() { let _ = binary_len(tc, body); }
        }

        #[test]
        fn mutated_documents_never_panic(j in arb_json(), at: usize, byte: u8) {
            let mut b = Vec::new();
            encode(&mut b, &j).unwrap();
            let i = at % b.len();
            b[i] = byte;
            let _ = decode(&b);
        }
    }
}

//! `tibinlog inspect key [--encoded] HEX`: what a TiKV key is, as one JSON object.
//!
//! Always `raw_hex` (the raw TiDB key, after undoing the region encoding when `--encoded`);
//! then `kind`: `record` (`table_id`, `handle`), `index` (`table_id`, `index_id`, `values`),
//! `meta` (the structure name and entry), the key prefixes PD region boundaries usually are
//! (`table_prefix` `t{id}`, `record_prefix` `t{id}_r`, `index_prefix` `t{id}_i` or
//! `t{id}_i{index}`, with `table_id` and `index_id`), or `unknown` (with `note` when the key
//! looked like a table or meta key but did not decode).

use serde_json::{json, Map, Value as J};

use crate::tidb::codec::{decode_datums, decode_int, DatumRef};
use crate::tidb::key::{
    decode_region_key, parse_key, Handle, MetaField, MetaKey, MetaKind, MetaName, ParsedKey,
};

/// Errors that stop `inspect key` (exit 1). Undecodable but well-formed hex is not one of them.
#[derive(Debug, thiserror::Error)]
pub enum InspectKeyError {
    #[error("not hex")]
    Hex(#[from] hex::FromHexError),
    #[error("not a region-encoded key (memcomparable bytes): {0}")]
    Encoded(crate::tidb::Error),
}

/// Decodes `hex_key` and returns the JSON object to print.
pub fn describe(hex_key: &str, encoded: bool) -> Result<J, InspectKeyError> {
    let bytes = hex::decode(hex_key.trim())?;
    let raw = if encoded {
        decode_region_key(&bytes).map_err(InspectKeyError::Encoded)?
    } else {
        bytes
    };
    let mut o = Map::new();
    o.insert("raw_hex".into(), J::String(hex::encode(&raw)));
    if prefix_json(&raw, &mut o) {
        return Ok(J::Object(o));
    }
    match parse_key(&raw) {
        Ok(ParsedKey::Record { table_id, handle }) => {
            o.insert("kind".into(), "record".into());
            o.insert("table_id".into(), table_id.into());
            match &handle {
                Handle::Int(h) => {
                    o.insert("handle".into(), (*h).into());
                }
                Handle::Common(_) => {
                    let values = handle
                        .common_datums()
                        .map(|ds| ds.iter().map(datum_json).collect::<Vec<_>>());
                    match values {
                        Ok(v) => o.insert("handle".into(), J::Array(v)),
                        Err(e) => o.insert("note".into(), format!("common handle: {e}").into()),
                    };
                }
            }
        }
        Ok(ParsedKey::Index {
            table_id,
            index_id,
            values,
        }) => {
            o.insert("kind".into(), "index".into());
            o.insert("table_id".into(), table_id.into());
            o.insert("index_id".into(), index_id.into());
            match decode_datums(values) {
                Ok(ds) => o.insert("values".into(), ds.iter().map(datum_json).collect()),
                Err(e) => o.insert("note".into(), format!("index values: {e}").into()),
            };
        }
        Ok(ParsedKey::Meta(meta)) => {
            o.insert("kind".into(), "meta".into());
            meta_json(&meta, &mut o);
        }
        Ok(ParsedKey::Unknown) => {
            o.insert("kind".into(), "unknown".into());
        }
        Err(e) => {
            o.insert("kind".into(), "unknown".into());
            o.insert("note".into(), e.to_string().into());
        }
    }
    Ok(J::Object(o))
}

/// A table, record or index key prefix (`t{id}`, `t{id}_r`, `t{id}_i`, `t{id}_i{index}`): the
/// usual region boundaries. False for anything else.
fn prefix_json(raw: &[u8], o: &mut Map<String, J>) -> bool {
    let Some(rest) = raw.strip_prefix(b"t") else {
        return false;
    };
    if rest.len() < 8 {
        return false;
    }
    let Ok((table_id, rest)) = decode_int(rest) else {
        return false;
    };
    let kind = match rest {
        [] => "table_prefix",
        b"_r" => "record_prefix",
        b"_i" => "index_prefix",
        [b'_', b'i', index @ ..] if index.len() == 8 => match decode_int(index) {
            Ok((index_id, _)) => {
                o.insert("index_id".into(), index_id.into());
                "index_prefix"
            }
            Err(_) => return false,
        },
        _ => return false,
    };
    o.insert("kind".into(), kind.into());
    o.insert("table_id".into(), table_id.into());
    true
}

fn text(b: &[u8]) -> J {
    match std::str::from_utf8(b) {
        Ok(s) => J::String(s.to_string()),
        Err(_) => J::String(format!("0x{}", hex::encode(b))),
    }
}

fn datum_json(d: &DatumRef<'_>) -> J {
    match d {
        DatumRef::Null => J::Null,
        DatumRef::Int(i) => json!(i),
        DatumRef::Uint(u) => json!(u),
        DatumRef::Float(f) => json!(f),
        DatumRef::Bytes(b) => text(b),
        DatumRef::Decimal {
            precision,
            frac,
            bin,
        } => match crate::tidb::decimal::decode_bin(bin, *precision, *frac) {
            Ok((t, _)) => J::String(t),
            Err(e) => J::String(format!("<decimal: {e}>")),
        },
        DatumRef::Duration(ns) => json!({ "duration_ns": ns }),
        DatumRef::Json(b) => match crate::tidb::json::decode(b) {
            Ok(j) => J::String(crate::tidb::json::to_text(&j)),
            Err(e) => J::String(format!("<json: {e}>")),
        },
        DatumRef::VectorFloat32(b) => J::String(format!("0x{}", hex::encode(b))),
        DatumRef::Max => J::String("<max>".into()),
    }
}

fn meta_json(meta: &MetaKey, o: &mut Map<String, J>) {
    o.insert("structure".into(), text(&meta.key));
    let (ty, entry) = match &meta.kind {
        MetaKind::StringMeta => ("string", "meta"),
        MetaKind::StringData => ("string", "data"),
        MetaKind::HashMeta => ("hash", "meta"),
        MetaKind::HashData { .. } => ("hash", "data"),
        MetaKind::ListMeta => ("list", "meta"),
        MetaKind::ListData { .. } => ("list", "data"),
    };
    o.insert("type".into(), ty.into());
    o.insert("entry".into(), entry.into());
    match &meta.kind {
        MetaKind::HashData { field } => {
            o.insert("field".into(), text(field));
        }
        MetaKind::ListData { index } => {
            o.insert("index".into(), (*index).into());
        }
        _ => {}
    }
    match meta.name() {
        MetaName::Db(id) => {
            o.insert("db_id".into(), id.into());
        }
        MetaName::SchemaDiff(v) => {
            o.insert("schema_version".into(), v.into());
        }
        _ => {}
    }
    match meta.field() {
        Some(MetaField::Db(id)) => {
            o.insert("db_id".into(), id.into());
        }
        Some(MetaField::Table(id))
        | Some(MetaField::AutoTableId(id))
        | Some(MetaField::AutoIncrementId(id))
        | Some(MetaField::AutoRandomId(id)) => {
            o.insert("table_id".into(), id.into());
        }
        Some(MetaField::SequenceValue(id)) | Some(MetaField::SequenceCycle(id)) => {
            o.insert("sequence_id".into(), id.into());
        }
        Some(MetaField::JobId(id)) => {
            o.insert("job_id".into(), id.into());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tidb::key::{encode_region_key, meta_hash_key, record_key};

    #[test]
    fn record_key_raw_and_encoded() {
        let raw = record_key(114, &Handle::Int(-7));
        let j = describe(&hex::encode(&raw), false).expect("record");
        assert_eq!(j["kind"], "record");
        assert_eq!(j["table_id"], 114);
        assert_eq!(j["handle"], -7);
        let enc = encode_region_key(&raw);
        let j2 = describe(&hex::encode(&enc), true).expect("encoded record");
        assert_eq!(j, j2);
    }

    #[test]
    fn meta_key_parts() {
        let raw = meta_hash_key(b"DB:2", b"Table:114");
        let j = describe(&hex::encode(&raw), false).expect("meta");
        assert_eq!(j["kind"], "meta");
        assert_eq!(j["structure"], "DB:2");
        assert_eq!(j["type"], "hash");
        assert_eq!(j["field"], "Table:114");
        assert_eq!(j["db_id"], 2);
        assert_eq!(j["table_id"], 114);
    }

    #[test]
    fn region_boundary_prefixes() {
        use crate::tidb::codec::encode_int;
        let key = |parts: &[&[u8]]| hex::encode(parts.concat());
        let id = |v: i64| {
            let mut b = Vec::new();
            encode_int(&mut b, v);
            b
        };
        let j = describe(&key(&[b"t", &id(45)]), false).expect("table");
        assert_eq!(
            (j["kind"].as_str(), j["table_id"].as_i64()),
            (Some("table_prefix"), Some(45))
        );
        let j = describe(&key(&[b"t", &id(45), b"_r"]), false).expect("record");
        assert_eq!(
            (j["kind"].as_str(), j["table_id"].as_i64()),
            (Some("record_prefix"), Some(45))
        );
        let j = describe(&key(&[b"t", &id(45), b"_i"]), false).expect("index");
        assert_eq!(j["kind"], "index_prefix");
        assert!(j.get("index_id").is_none());
        let j = describe(&key(&[b"t", &id(45), b"_i", &id(2)]), false).expect("index id");
        assert_eq!(
            (j["kind"].as_str(), j["index_id"].as_i64()),
            (Some("index_prefix"), Some(2))
        );
        // As PD stores them: region-encoded.
        let mut enc = Vec::new();
        crate::tidb::codec::encode_bytes(&mut enc, &[b"t".as_slice(), &id(45), b"_r"].concat());
        let j = describe(&hex::encode(enc), true).expect("encoded");
        assert_eq!(j["kind"], "record_prefix");
        // A full record key is still a record.
        let j = describe(&key(&[b"t", &id(45), b"_r", &id(7)]), false).expect("full key");
        assert_eq!(j["kind"], "record");
    }

    #[test]
    fn unknown_and_bad_input() {
        let j = describe("ff00", false).expect("unknown bytes are not an error");
        assert_eq!(j["kind"], "unknown");
        assert_eq!(j["raw_hex"], "ff00");
        // A table prefix cut short: still unknown, with a note.
        let j = describe("7480", false).expect("short table key");
        assert_eq!(j["kind"], "unknown");
        assert!(describe("abc", false).is_err(), "odd hex");
        assert!(describe("zz", false).is_err(), "not hex");
        assert!(describe("0102", true).is_err(), "not memcomparable");
    }
}

//! TiDB keys (`pkg/tablecodec`, `pkg/structure`, `pkg/meta`): building record, index and meta
//! keys, table spans, and parsing any raw key back into its parts.
//!
//! ```text
//! record key   't' EncodeInt(table_id) "_r" EncodeInt(handle)               19 bytes
//!              't' EncodeInt(table_id) "_r" key-datums(pk columns)          common handle
//! index key    't' EncodeInt(table_id) "_i" EncodeInt(index_id) key-datums [+ handle]
//! meta key     'm' EncodeBytes(name) EncodeUint(type) [EncodeBytes(field) | EncodeInt(index)]
//!              type: 'S'/'s' string meta/data, 'H'/'h' hash meta/data, 'L'/'l' list meta/data
//! ```
//!
//! Keys come in two forms: **raw** (what TiDB writes and TiKV's change events carry) and
//! **encoded** (`EncodeBytes(raw)`, what PD regions and CDC request ranges use). The `*_encoded`
//! helpers produce the latter; never compare keys of different forms.

use super::codec::{
    decode_bytes, decode_datums, decode_int, decode_uint, encode_bytes, encode_int,
    encode_key_datums, encode_uint, Datum, DatumRef,
};
use super::error::{Error, Result};

/// First byte of table keys.
pub const TABLE_PREFIX: u8 = b't';
/// Separator before a record handle.
pub const RECORD_SEP: &[u8; 2] = b"_r";
/// Separator before an index id.
pub const INDEX_SEP: &[u8; 2] = b"_i";
/// First byte of meta keys.
pub const META_PREFIX: u8 = b'm';
/// Length of a record key with an int handle: 1 + 8 + 2 + 8.
pub const RECORD_KEY_LEN: usize = 19;
/// Length of `t{id}_r` / `t{id}_i`.
pub const RECORD_PREFIX_LEN: usize = 11;

/// `2^48 - 1`; system table ids are allocated below it.
pub const MAX_INT48: i64 = (1 << 48) - 1;
/// `mysql.tidb_ddl_job`.
pub const DDL_JOB_TABLE_ID: i64 = MAX_INT48 - 1;
/// `mysql.tidb_ddl_reorg`.
pub const DDL_REORG_TABLE_ID: i64 = MAX_INT48 - 2;
/// `mysql.tidb_ddl_history`.
pub const DDL_HISTORY_TABLE_ID: i64 = MAX_INT48 - 3;

/// A row handle: `_tidb_rowid` / int PK, or the key-encoded PK tuple of a clustered table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Handle {
    Int(i64),
    /// Key-form datums of the PK columns, in index column order.
    Common(Vec<u8>),
}

impl Handle {
    /// Builds a common handle from PK datums (key form).
    pub fn common_from_datums(datums: &[Datum]) -> Result<Handle> {
        let mut b = Vec::new();
        encode_key_datums(&mut b, datums)?;
        Ok(Handle::Common(b))
    }
    /// Appends the handle as it appears after `_r`.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        match self {
            Handle::Int(h) => encode_int(buf, *h),
            Handle::Common(b) => buf.extend_from_slice(b),
        }
    }
    /// Decoded datums of a common handle (empty for an int handle).
    pub fn common_datums(&self) -> Result<Vec<DatumRef<'_>>> {
        match self {
            Handle::Int(_) => Ok(Vec::new()),
            Handle::Common(b) => decode_datums(b),
        }
    }
}

/// Appends `'t' + EncodeInt(table_id)`.
pub fn encode_table_prefix(buf: &mut Vec<u8>, table_id: i64) {
    buf.push(TABLE_PREFIX);
    encode_int(buf, table_id);
}

/// `t{table_id}` (9 bytes).
pub fn table_prefix(table_id: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(9);
    encode_table_prefix(&mut b, table_id);
    b
}

/// `t{table_id}_r` (11 bytes).
pub fn record_prefix(table_id: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(RECORD_PREFIX_LEN);
    encode_table_prefix(&mut b, table_id);
    b.extend_from_slice(RECORD_SEP);
    b
}

/// Appends a record key.
pub fn encode_record_key(buf: &mut Vec<u8>, table_id: i64, handle: &Handle) {
    encode_table_prefix(buf, table_id);
    buf.extend_from_slice(RECORD_SEP);
    handle.encode_into(buf);
}

/// A record key.
pub fn record_key(table_id: i64, handle: &Handle) -> Vec<u8> {
    let mut b = Vec::with_capacity(RECORD_KEY_LEN);
    encode_record_key(&mut b, table_id, handle);
    b
}

/// `t{table_id}_i{index_id}`.
pub fn index_prefix(table_id: i64, index_id: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(RECORD_KEY_LEN);
    encode_table_prefix(&mut b, table_id);
    b.extend_from_slice(INDEX_SEP);
    encode_int(&mut b, index_id);
    b
}

/// An index key: prefix followed by the key-form datums (index columns, then the handle
/// datums for non-unique indexes).
pub fn index_key(table_id: i64, index_id: i64, values: &[Datum]) -> Result<Vec<u8>> {
    let mut b = index_prefix(table_id, index_id);
    encode_key_datums(&mut b, values)?;
    Ok(b)
}

/// Raw record span of a table: `[t{id}_r, t{id}_s)` (excludes index keys).
pub fn record_span(table_id: i64) -> (Vec<u8>, Vec<u8>) {
    let start = record_prefix(table_id);
    let mut end = table_prefix(table_id);
    end.extend_from_slice(b"_s");
    (start, end)
}

/// Raw span of everything of a table (records and indexes): `[t{id}, t{id+1})`.
pub fn table_span(table_id: i64) -> (Vec<u8>, Vec<u8>) {
    (
        table_prefix(table_id),
        table_prefix(table_id.saturating_add(1)),
    )
}

/// The encoded (PD/region) form of a raw key: `EncodeBytes(raw)`.
pub fn encode_region_key(raw: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(super::codec::encoded_bytes_len(raw.len()));
    encode_bytes(&mut b, raw);
    b
}

/// The raw key of an encoded (PD/region) key. Any bytes after the encoded key (TiKV's MVCC
/// timestamp suffix) are ignored.
pub fn decode_region_key(encoded: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(encoded.len());
    decode_bytes(encoded, &mut out)?;
    Ok(out)
}

/// Encoded record span of a table (what a CDC request for the table's rows uses).
pub fn record_span_encoded(table_id: i64) -> (Vec<u8>, Vec<u8>) {
    let (s, e) = record_span(table_id);
    (encode_region_key(&s), encode_region_key(&e))
}

/// Encoded whole-table span.
pub fn table_span_encoded(table_id: i64) -> (Vec<u8>, Vec<u8>) {
    let (s, e) = table_span(table_id);
    (encode_region_key(&s), encode_region_key(&e))
}

// ---------------------------------------------------------------- meta keys

/// Structure type flags of meta keys (`pkg/structure/type.go`), written with EncodeUint.
pub mod meta_type {
    pub const STRING_META: u8 = b'S';
    pub const STRING_DATA: u8 = b's';
    pub const HASH_META: u8 = b'H';
    pub const HASH_DATA: u8 = b'h';
    pub const LIST_META: u8 = b'L';
    pub const LIST_DATA: u8 = b'l';
}

fn meta_head(buf: &mut Vec<u8>, key: &[u8], tp: u8) {
    buf.push(META_PREFIX);
    encode_bytes(buf, key);
    encode_uint(buf, u64::from(tp));
}

/// Meta string key (`structure.Set`): `'m' + EncodeBytes(key) + EncodeUint('s')`.
pub fn meta_string_key(key: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    meta_head(&mut b, key, meta_type::STRING_DATA);
    b
}

/// Meta hash field key (`structure.HSet`).
pub fn meta_hash_key(key: &[u8], field: &[u8]) -> Vec<u8> {
    let mut b = meta_hash_prefix(key);
    encode_bytes(&mut b, field);
    b
}

/// Prefix of all fields of a meta hash.
pub fn meta_hash_prefix(key: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    meta_head(&mut b, key, meta_type::HASH_DATA);
    b
}

/// Meta hash's meta key (holds the field count).
pub fn meta_hash_meta_key(key: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    meta_head(&mut b, key, meta_type::HASH_META);
    b
}

/// Meta list's meta key (holds head/tail indexes).
pub fn meta_list_meta_key(key: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    meta_head(&mut b, key, meta_type::LIST_META);
    b
}

/// Prefix of all items of a meta list.
pub fn meta_list_prefix(key: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    meta_head(&mut b, key, meta_type::LIST_DATA);
    b
}

/// Meta list item key.
pub fn meta_list_item_key(key: &[u8], index: i64) -> Vec<u8> {
    let mut b = meta_list_prefix(key);
    encode_int(&mut b, index);
    b
}

/// Raw span of the items of a meta list: the list prefix up to the prefix with its last byte
/// incremented.
pub fn meta_list_span(key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let start = meta_list_prefix(key);
    let mut end = start.clone();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    (start, end)
}

/// The part after the structure name in a meta key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaKind {
    StringMeta,
    StringData,
    HashMeta,
    HashData { field: Vec<u8> },
    ListMeta,
    ListData { index: i64 },
}

/// Well-known meta structure names (`pkg/meta/meta.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaName {
    /// `DBs`: hash of all databases.
    Dbs,
    /// `DB:{id}`: hash of a database's tables and id counters.
    Db(i64),
    /// `SchemaVersionKey`.
    SchemaVersion,
    /// `NextGlobalID`.
    NextGlobalId,
    /// `Diff:{version}`.
    SchemaDiff(i64),
    /// `DDLJobList` (legacy queue).
    DdlJobList,
    /// `DDLJobAddIdxList` (legacy queue).
    DdlJobAddIdxList,
    /// `DDLJobHistory` (legacy history hash).
    DdlJobHistory,
    /// `DDLTableVersion`.
    DdlTableVersion,
    /// Anything else, as (lossy) text.
    Other(String),
}

/// Well-known meta hash fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaField {
    /// `DB:{id}` in `DBs`.
    Db(i64),
    /// `Table:{id}` in `DB:{id}`.
    Table(i64),
    /// `TID:{id}`: the row id allocator of a table.
    AutoTableId(i64),
    /// `IID:{id}`: the auto-increment allocator.
    AutoIncrementId(i64),
    /// `TARID:{id}`: the auto-random allocator.
    AutoRandomId(i64),
    /// `SID:{id}`: a sequence's value.
    SequenceValue(i64),
    /// `SequenceCycle:{id}`.
    SequenceCycle(i64),
    /// 8-byte big-endian job id in `DDLJobHistory`.
    JobId(i64),
    /// Anything else.
    Other(Vec<u8>),
}

/// A parsed meta key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaKey {
    /// Structure name, e.g. `DBs`, `DB:2`.
    pub key: Vec<u8>,
    pub kind: MetaKind,
}

fn id_after(s: &[u8], prefix: &[u8]) -> Option<i64> {
    let rest = s.strip_prefix(prefix)?;
    if rest.is_empty() || !rest.iter().all(|c| c.is_ascii_digit() || *c == b'-') {
        return None;
    }
    std::str::from_utf8(rest).ok()?.parse().ok()
}

impl MetaKey {
    /// Typed structure name.
    pub fn name(&self) -> MetaName {
        let k = &self.key[..];
        match k {
            b"DBs" => MetaName::Dbs,
            b"SchemaVersionKey" => MetaName::SchemaVersion,
            b"NextGlobalID" => MetaName::NextGlobalId,
            b"DDLJobList" => MetaName::DdlJobList,
            b"DDLJobAddIdxList" => MetaName::DdlJobAddIdxList,
            b"DDLJobHistory" => MetaName::DdlJobHistory,
            b"DDLTableVersion" => MetaName::DdlTableVersion,
            _ => {
                if let Some(id) = id_after(k, b"DB:") {
                    MetaName::Db(id)
                } else if let Some(v) = id_after(k, b"Diff:") {
                    MetaName::SchemaDiff(v)
                } else {
                    MetaName::Other(String::from_utf8_lossy(k).into_owned())
                }
            }
        }
    }

    /// Typed hash field, for hash data keys.
    pub fn field(&self) -> Option<MetaField> {
        let MetaKind::HashData { field } = &self.kind else {
            return None;
        };
        let f = &field[..];
        type Make = fn(i64) -> MetaField;
        let prefixes: [(&[u8], Make); 7] = [
            (b"DB:", MetaField::Db),
            (b"Table:", MetaField::Table),
            (b"TID:", MetaField::AutoTableId),
            (b"IID:", MetaField::AutoIncrementId),
            (b"TARID:", MetaField::AutoRandomId),
            (b"SID:", MetaField::SequenceValue),
            (b"SequenceCycle:", MetaField::SequenceCycle),
        ];
        for (p, make) in prefixes {
            if let Some(id) = id_after(f, p) {
                return Some(make(id));
            }
        }
        if self.name() == MetaName::DdlJobHistory && f.len() == 8 {
            let mut a = [0u8; 8];
            a.copy_from_slice(f);
            return Some(MetaField::JobId(i64::from_be_bytes(a)));
        }
        Some(MetaField::Other(field.clone()))
    }
}

/// Parses a raw meta key (starting with `'m'`).
pub fn parse_meta_key(raw: &[u8]) -> Result<MetaKey> {
    let Some((&META_PREFIX, rest)) = raw.split_first() else {
        return Err(Error::Corrupted {
            what: "meta key",
            detail: "missing 'm' prefix",
        });
    };
    let mut key = Vec::new();
    let rest = decode_bytes(rest, &mut key)?;
    let (tp, rest) = decode_uint(rest)?;
    let kind = match u8::try_from(tp).unwrap_or(0) {
        meta_type::STRING_META => MetaKind::StringMeta,
        meta_type::STRING_DATA => MetaKind::StringData,
        meta_type::HASH_META => MetaKind::HashMeta,
        meta_type::LIST_META => MetaKind::ListMeta,
        meta_type::HASH_DATA => {
            let mut field = Vec::new();
            let r = decode_bytes(rest, &mut field)?;
            if !r.is_empty() {
                return Err(Error::TrailingBytes {
                    what: "meta hash key",
                    left: r.len(),
                });
            }
            return Ok(MetaKey {
                key,
                kind: MetaKind::HashData { field },
            });
        }
        meta_type::LIST_DATA => {
            let (index, r) = decode_int(rest)?;
            if !r.is_empty() {
                return Err(Error::TrailingBytes {
                    what: "meta list key",
                    left: r.len(),
                });
            }
            return Ok(MetaKey {
                key,
                kind: MetaKind::ListData { index },
            });
        }
        _ => {
            return Err(Error::UnknownFlag {
                what: "meta structure type",
                flag: tp as u8,
            })
        }
    };
    if !rest.is_empty() {
        return Err(Error::TrailingBytes {
            what: "meta key",
            left: rest.len(),
        });
    }
    Ok(MetaKey { key, kind })
}

// ---------------------------------------------------------------- parsing

/// What a raw key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedKey<'a> {
    /// A row: `t{table_id}_r{handle}`.
    Record { table_id: i64, handle: Handle },
    /// An index entry; `values` are the key-form datums after the index id (decode with
    /// [`decode_datums`]).
    Index {
        table_id: i64,
        index_id: i64,
        values: &'a [u8],
    },
    /// A meta key.
    Meta(MetaKey),
    /// Anything else (other prefixes, table prefixes without `_r`/`_i`).
    Unknown,
}

/// Decodes a record key into table id and handle.
pub fn decode_record_key(raw: &[u8]) -> Result<(i64, Handle)> {
    match parse_key(raw)? {
        ParsedKey::Record { table_id, handle } => Ok((table_id, handle)),
        _ => Err(Error::Corrupted {
            what: "record key",
            detail: "not a t{id}_r key",
        }),
    }
}

/// Table id and handle of a record key, the handle's datums not decoded: for reads that get
/// every column from the row value and decode the handle's datums only if a column is
/// missing there (which then fails on a malformed handle). [`decode_record_key`] checks the
/// datums up front.
pub fn record_key_handle(raw: &[u8]) -> Result<(i64, Handle)> {
    let bad = || Error::Corrupted {
        what: "record key",
        detail: "not a t{id}_r key",
    };
    if raw.first() != Some(&TABLE_PREFIX) || raw.len() <= RECORD_PREFIX_LEN {
        return Err(bad());
    }
    let (table_id, rest) = decode_int(&raw[1..])?;
    let (sep, rest) = rest.split_at(2);
    if sep != RECORD_SEP {
        return Err(bad());
    }
    Ok(match rest.len() {
        8 => (table_id, Handle::Int(decode_int(rest)?.0)),
        _ => (table_id, Handle::Common(rest.to_vec())),
    })
}

/// Table id of any table key (`t{id}...`), without parsing the rest.
pub fn table_id_of(raw: &[u8]) -> Option<i64> {
    match raw.split_first() {
        Some((&TABLE_PREFIX, rest)) => decode_int(rest).ok().map(|(id, _)| id),
        _ => None,
    }
}

/// Parses any raw key. Malformed record/index/meta keys are errors; keys of other shapes are
/// [`ParsedKey::Unknown`].
pub fn parse_key(raw: &[u8]) -> Result<ParsedKey<'_>> {
    match raw.first() {
        Some(&META_PREFIX) => return Ok(ParsedKey::Meta(parse_meta_key(raw)?)),
        Some(&TABLE_PREFIX) => {}
        _ => return Ok(ParsedKey::Unknown),
    }
    if raw.len() < RECORD_PREFIX_LEN {
        return Ok(ParsedKey::Unknown);
    }
    let (table_id, rest) = decode_int(&raw[1..])?;
    let (sep, rest) = rest.split_at(2);
    if sep == RECORD_SEP {
        if rest.len() == 8 {
            let (h, _) = decode_int(rest)?;
            return Ok(ParsedKey::Record {
                table_id,
                handle: Handle::Int(h),
            });
        }
        if rest.is_empty() {
            return Ok(ParsedKey::Unknown);
        }
        decode_datums(rest)?;
        return Ok(ParsedKey::Record {
            table_id,
            handle: Handle::Common(rest.to_vec()),
        });
    }
    if sep == INDEX_SEP {
        let (index_id, values) = decode_int(rest)?;
        return Ok(ParsedKey::Index {
            table_id,
            index_id,
            values,
        });
    }
    Ok(ParsedKey::Unknown)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn record_key_handle_matches_the_full_parse() {
        for h in [Handle::Int(-5), Handle::Int(1 << 40)] {
            let k = record_key(104, &h);
            assert_eq!(
                record_key_handle(&k).unwrap(),
                decode_record_key(&k).unwrap()
            );
        }
        let common =
            Handle::common_from_datums(&[Datum::Bytes(b"k1".to_vec()), Datum::Int(7)]).unwrap();
        let k = record_key(104, &common);
        assert_eq!(record_key_handle(&k).unwrap(), (104, common));
        assert!(record_key_handle(&index_prefix(104, 1)).is_err());
        assert!(record_key_handle(&k[..RECORD_PREFIX_LEN]).is_err());
    }

    // The record key of table 104, handle 1 (docs/upstream-facts.md, "TiDB keys").
    #[test]
    fn golden_record_key() {
        let k = record_key(104, &Handle::Int(1));
        assert_eq!(k, hex("7480000000000000685f728000000000000001"));
        assert_eq!(decode_record_key(&k).unwrap(), (104, Handle::Int(1)));
    }

    // pingcap/docs (TiFlash placement rules, rule "table-45-r"): the encoded record span start
    // of table 45 is 7480000000000000FF2D5F720000000000FA; a TiDB-key helper's unit test
    // (test_pd_tikv_key) pairs the encoded key 7480000000000000FF2D5F728000000000FF3921010000000000FA
    // with the raw record key of table 45.
    #[test]
    fn golden_encoded_spans() {
        let (s, e) = record_span_encoded(45);
        assert_eq!(s, hex("7480000000000000FF2D5F720000000000FA"));
        assert_eq!(e, hex("7480000000000000FF2D5F730000000000FA"));
        let enc = hex("7480000000000000FF2D5F728000000000FF3921010000000000FA");
        let raw = decode_region_key(&enc).unwrap();
        assert_eq!(raw.len(), 19);
        assert_eq!(
            decode_record_key(&raw).unwrap(),
            (45, Handle::Int(0x392101))
        );
        assert_eq!(encode_region_key(&raw), enc);
        // the encoded record span of mysql.tidb_ddl_job (id MaxInt48 − 1)
        let (s, e) = record_span_encoded(DDL_JOB_TABLE_ID);
        assert_eq!(s, hex("748000fffffffffffffe5f720000000000fa"));
        assert_eq!(e, hex("748000fffffffffffffe5f730000000000fa"));
        let (ts, te) = table_span_encoded(45);
        assert_eq!(ts, hex("7480000000000000FF2D00000000000000F8"));
        assert_eq!(te, hex("7480000000000000FF2E00000000000000F8"));
    }

    // An encoded index key of table 103, index 1 with an int value and an int handle, as found
    // in a public TiKV key-decoding script; decoded independently here.
    #[test]
    fn golden_index_key() {
        let enc = hex("7480000000000000FF675F698000000000FF0000010380000000FF0008F01A03800000FF0000EF6B01000000FC");
        let raw = decode_region_key(&enc).unwrap();
        let ParsedKey::Index {
            table_id,
            index_id,
            values,
        } = parse_key(&raw).unwrap()
        else {
            panic!("not an index key");
        };
        assert_eq!((table_id, index_id), (103, 1));
        assert_eq!(
            decode_datums(values).unwrap(),
            vec![DatumRef::Int(0x8f01a), DatumRef::Int(0xef6b01)]
        );
        assert_eq!(
            index_key(103, 1, &[Datum::Int(0x8f01a), Datum::Int(0xef6b01)]).unwrap(),
            raw
        );
    }

    // tidb pkg/tablecodec/tablecodec_test.go TestDecodeAutoIDMeta and pkg/meta/meta_test.go
    // (GenAutoTableIDKeyValue(1, 3, ..)): hash DB:56 field TID:108, hash DB:1 field TID:3.
    #[test]
    fn golden_meta_keys() {
        let k = [
            0x6d, 0x44, 0x42, 0x3a, 0x35, 0x36, 0x0, 0x0, 0x0, 0xfc, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
            0x0, 0x68, 0x54, 0x49, 0x44, 0x3a, 0x31, 0x30, 0x38, 0x0, 0xfe,
        ];
        let ParsedKey::Meta(m) = parse_key(&k).unwrap() else {
            panic!()
        };
        assert_eq!(m.key, b"DB:56");
        assert_eq!(m.name(), MetaName::Db(56));
        assert_eq!(m.field(), Some(MetaField::AutoTableId(108)));
        assert_eq!(meta_hash_key(b"DB:56", b"TID:108"), k);
        let k2 = [
            0x6d, 0x44, 0x42, 0x3a, 0x31, 0x0, 0x0, 0x0, 0x0, 0xfb, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
            0x0, 0x68, 0x54, 0x49, 0x44, 0x3a, 0x33, 0x0, 0x0, 0x0, 0xfc,
        ];
        assert_eq!(meta_hash_key(b"DB:1", b"TID:3"), k2);
        // meta keys computed with TiDB's pkg/structure layout (docs/upstream-facts.md)
        assert_eq!(
            meta_hash_key(b"DBs", b"DB:1"),
            hex("6d4442730000000000fa000000000000006844423a3100000000fb")
        );
        assert_eq!(
            meta_list_prefix(b"DDLJobList"),
            hex("6d44444c4a6f624c69ff7374000000000000f9000000000000006c")
        );
        let m = parse_meta_key(&meta_string_key(b"SchemaVersionKey")).unwrap();
        assert_eq!(
            (m.name(), m.kind),
            (MetaName::SchemaVersion, MetaKind::StringData)
        );
        let m = parse_meta_key(&meta_list_item_key(b"DDLJobList", -3)).unwrap();
        assert_eq!(m.kind, MetaKind::ListData { index: -3 });
        let m = parse_meta_key(&meta_hash_key(b"DDLJobHistory", &77i64.to_be_bytes())).unwrap();
        assert_eq!(m.field(), Some(MetaField::JobId(77)));
        let m = parse_meta_key(&meta_hash_key(b"DB:2", b"Table:114")).unwrap();
        assert_eq!(m.field(), Some(MetaField::Table(114)));
        let (s, e) = meta_list_span(b"DDLJobList");
        assert!(
            s < meta_list_item_key(b"DDLJobList", i64::MAX)
                && meta_list_item_key(b"DDLJobList", i64::MAX) < e
        );
    }

    #[test]
    fn common_handle_and_unknown() {
        let h =
            Handle::common_from_datums(&[Datum::Bytes(b"abc".to_vec()), Datum::Int(7)]).unwrap();
        let k = record_key(9, &h);
        assert_eq!(decode_record_key(&k).unwrap(), (9, h.clone()));
        assert_eq!(
            h.common_datums().unwrap(),
            vec![DatumRef::Bytes(b"abc".to_vec().into()), DatumRef::Int(7)]
        );
        assert_eq!(parse_key(b"x").unwrap(), ParsedKey::Unknown);
        assert_eq!(parse_key(&table_prefix(5)).unwrap(), ParsedKey::Unknown);
        assert!(parse_key(&[b't', 0x80, 0, 0, 0, 0, 0, 0, 1, b'_', b'r', 0x77]).is_err());
        assert!(parse_meta_key(b"mabc").is_err());
        assert_eq!(table_id_of(&k), Some(9));
    }

    proptest! {
        #[test]
        fn record_key_roundtrip_and_order(t: i64, a: i64, b: i64) {
            let (ka, kb) = (record_key(t, &Handle::Int(a)), record_key(t, &Handle::Int(b)));
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
            prop_assert_eq!(decode_record_key(&ka).unwrap(), (t, Handle::Int(a)));
            let (s, e) = record_span(t);
            prop_assert!(s <= ka && ka < e);
            let (es, ee) = record_span_encoded(t);
            let enc = encode_region_key(&ka);
            prop_assert!(es <= enc && enc < ee);
        }

        #[test]
        fn random_keys_never_panic(b: Vec<u8>, tail: Vec<u8>) {
            let _ = parse_key(&b);
            let _ = decode_region_key(&b);
            let mut k = vec![b't'];
            k.extend_from_slice(&b);
            let _ = parse_key(&k);
            let mut m = vec![b'm'];
            m.extend_from_slice(&tail);
            let _ = parse_key(&m);
        }
    }
}

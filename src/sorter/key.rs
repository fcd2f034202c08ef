//! Byte layout of the sorter's RocksDB keys and values.
//!
//! One RocksDB instance holds every table. RocksDB orders keys bytewise, so the key is built
//! so that bytewise order *is* the order the binlog needs:
//!
//! ```text
//!  key
//!  0          8          16                 24    25                      25+n
//!  +----------+----------+------------------+-----+-----------------------+
//!  | commit_ts| start_ts | table_id ^ 1<<63 | op  | raw TiDB key (n bytes)|
//!  |  u64 BE  |  u64 BE  |      u64 BE      | u8  |  t{id}_r{handle} ...  |
//!  +----------+----------+------------------+-----+-----------------------+
//!   \_____ txn prefix ____/                   0 = Delete, 1 = Put
//!
//!  value
//!  0     1            9            13           13+v         17+v         17+v+o
//!  +-----+------------+------------+------------+------------+------------+
//!  | ver | region_id  | value_len  | value      | old_len    | old_value  |
//!  | =1  |   u64 LE   |   u32 LE   | v bytes    |   u32 LE   | o bytes    |
//!  +-----+------------+------------+------------+------------+------------+
//! ```
//!
//! * `(commit_ts, start_ts)` first: transactions in binlog order; two transactions with the
//!   same commit_ts (async commit, 1PC) stay apart and are ordered by start_ts.
//! * `table_id` with its sign bit flipped, big endian: signed order as unsigned bytes (the same
//!   trick as TiDB's memcomparable `EncodeInt`), so a transaction's rows come grouped by table.
//!   Keys that are not table keys (`t...`) are grouped under `i64::MIN`, before every table.
//! * `op` before the raw key: inside a table every delete precedes every put, so for one row
//!   key the delete of an update split into delete + put comes first.
//! * The raw key last, unescaped: everything before it has a fixed width, so comparing two
//!   keys with the same 25-byte prefix compares the raw keys, and no escaping is needed.
//!
//! Identity: within one transaction (one start_ts) TiKV holds one write per row key, so
//! `(start_ts, op, raw key)` names a row change. A row that TiKV sends twice (a region retried
//! after a reconnect) lands on the same key with the same value: the duplicate collapses.
//!
//! The op is in the key, so the value does not repeat it. `ver` lets a later layout be told
//! apart; the cache is wiped at start-up, so no two layouts ever meet in one DB.
//! Decoding checks every length and never panics: a bad key or value is
//! [`SorterError::Corrupt`]. RocksDB's block checksums cover bit rot; the lengths catch layout
//! mix-ups.

use super::error::{Result, SorterError};
use crate::model::{Op, RawRow, RegionId, TableId, Ts};

/// Width of the `(commit_ts, start_ts)` prefix that identifies a transaction.
pub const TXN_PREFIX_LEN: usize = 16;
/// Width of the fixed part of a key: 8 + 8 + 8 + 1.
pub const KEY_HEADER_LEN: usize = 25;
/// Width of the fixed part of a value: 1 + 8 + 4 + 4.
pub const VALUE_HEADER_LEN: usize = 17;
/// Current value layout version.
pub const VALUE_VERSION: u8 = 1;

const OP_DELETE: u8 = 0;
const OP_PUT: u8 = 1;

/// Group of rows whose key is not a table key (see the module doc).
pub const NON_TABLE_ID: TableId = TableId(i64::MIN);

/// The table a raw TiDB key belongs to, as the sorter groups it.
pub fn table_of(raw_key: &[u8]) -> TableId {
    crate::tidb::key::table_id_of(raw_key)
        .map(TableId)
        .unwrap_or(NON_TABLE_ID)
}

fn flip(table: TableId) -> [u8; 8] {
    ((table.0 as u64) ^ (1 << 63)).to_be_bytes()
}

fn unflip(b: [u8; 8]) -> TableId {
    TableId((u64::from_be_bytes(b) ^ (1 << 63)) as i64)
}

/// The 16-byte prefix shared by every key of one transaction.
pub fn txn_prefix(commit_ts: Ts, start_ts: Ts) -> [u8; TXN_PREFIX_LEN] {
    let mut p = [0u8; TXN_PREFIX_LEN];
    p[..8].copy_from_slice(&commit_ts.0.to_be_bytes());
    p[8..].copy_from_slice(&start_ts.0.to_be_bytes());
    p
}

/// Exclusive upper bound of every key with `commit_ts <= resolved`: the 8-byte prefix
/// `resolved + 1`. `None` when `resolved` is `u64::MAX` (no bound).
pub fn upper_bound(resolved: Ts) -> Option<[u8; 8]> {
    resolved.0.checked_add(1).map(u64::to_be_bytes)
}

/// The smallest key strictly greater than `key` (append a zero byte): the exclusive end of a
/// range that must include `key`.
pub fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// Appends the key of `row` (see the layout) to `buf`.
pub fn encode_key_into(row: &RawRow, buf: &mut Vec<u8>) {
    buf.reserve(KEY_HEADER_LEN + row.key.len());
    buf.extend_from_slice(&txn_prefix(row.commit_ts, row.start_ts));
    buf.extend_from_slice(&flip(table_of(&row.key)));
    buf.push(match row.op {
        Op::Delete => OP_DELETE,
        Op::Put => OP_PUT,
    });
    buf.extend_from_slice(&row.key);
}

/// Orders two rows exactly as their encoded keys order bytewise (see the layout), without
/// encoding them: the memory tier sorts with this and merges with RocksDB's order.
pub fn cmp_rows(a: &RawRow, b: &RawRow) -> std::cmp::Ordering {
    let op = |r: &RawRow| match r.op {
        Op::Delete => OP_DELETE,
        Op::Put => OP_PUT,
    };
    (a.commit_ts, a.start_ts)
        .cmp(&(b.commit_ts, b.start_ts))
        .then_with(|| table_of(&a.key).0.cmp(&table_of(&b.key).0))
        .then_with(|| op(a).cmp(&op(b)))
        .then_with(|| a.key.cmp(&b.key))
}

/// Orders a row against an encoded key, as [`cmp_rows`] would against the row stored there.
/// A key that does not decode sorts by its bytes against the row's encoding.
pub fn cmp_row_key(row: &RawRow, key: &[u8], scratch: &mut Vec<u8>) -> std::cmp::Ordering {
    scratch.clear();
    encode_key_into(row, scratch);
    scratch.as_slice().cmp(key)
}

/// Appends the value of `row` (see the layout) to `buf`.
///
/// Values and old values longer than `u32::MAX` bytes cannot come from TiKV (its raft entry
/// limit is far below); they are a caller bug, caught by `debug_assert!` and saturated.
pub fn encode_value_into(row: &RawRow, buf: &mut Vec<u8>) {
    debug_assert!(row.value.len() <= u32::MAX as usize);
    debug_assert!(row.old_value.len() <= u32::MAX as usize);
    buf.reserve(VALUE_HEADER_LEN + row.value.len() + row.old_value.len());
    buf.push(VALUE_VERSION);
    buf.extend_from_slice(&row.region_id.0.to_le_bytes());
    let v = &row.value[..row.value.len().min(u32::MAX as usize)];
    buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
    buf.extend_from_slice(v);
    let o = &row.old_value[..row.old_value.len().min(u32::MAX as usize)];
    buf.extend_from_slice(&(o.len() as u32).to_le_bytes());
    buf.extend_from_slice(o);
}

/// Encoded size of `row` in the DB (key + value), for byte accounting.
pub fn encoded_len(row: &RawRow) -> usize {
    KEY_HEADER_LEN + VALUE_HEADER_LEN + row.payload_len()
}

/// A decoded key, borrowing the raw key from the stored bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    pub commit_ts: Ts,
    pub start_ts: Ts,
    /// The grouping table ([`NON_TABLE_ID`] for non-table keys).
    pub table_id: TableId,
    pub op: Op,
    /// The raw TiDB key.
    pub raw_key: &'a [u8],
}

/// A decoded value, borrowing from the stored bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueRef<'a> {
    pub region_id: RegionId,
    pub value: &'a [u8],
    pub old_value: &'a [u8],
}

fn corrupt_key(len: usize, detail: &'static str) -> SorterError {
    SorterError::Corrupt {
        what: "key",
        len,
        detail,
    }
}

fn corrupt_value(len: usize, detail: &'static str) -> SorterError {
    SorterError::Corrupt {
        what: "value",
        len,
        detail,
    }
}

fn u64_be(b: &[u8]) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    a
}

/// Decodes a stored key.
pub fn decode_key(key: &[u8]) -> Result<KeyRef<'_>> {
    if key.len() < KEY_HEADER_LEN {
        return Err(corrupt_key(key.len(), "shorter than the 25-byte header"));
    }
    let op = match key[24] {
        OP_DELETE => Op::Delete,
        OP_PUT => Op::Put,
        _ => return Err(corrupt_key(key.len(), "unknown op byte")),
    };
    Ok(KeyRef {
        commit_ts: Ts(u64::from_be_bytes(u64_be(&key[0..8]))),
        start_ts: Ts(u64::from_be_bytes(u64_be(&key[8..16]))),
        table_id: unflip(u64_be(&key[16..24])),
        op,
        raw_key: &key[KEY_HEADER_LEN..],
    })
}

/// Splits `n` bytes off the front of `b`.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (head, tail) = b.split_at(n);
    *b = tail;
    Some(head)
}

fn take_u32(b: &mut &[u8]) -> Option<usize> {
    let s = take(b, 4)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
}

/// Decodes a stored value.
pub fn decode_value(value: &[u8]) -> Result<ValueRef<'_>> {
    let len = value.len();
    let truncated = || corrupt_value(len, "truncated");
    let mut b = value;
    let ver = take(&mut b, 1).ok_or_else(truncated)?;
    if ver[0] != VALUE_VERSION {
        return Err(corrupt_value(len, "unknown layout version"));
    }
    let region = take(&mut b, 8).ok_or_else(truncated)?;
    let vlen = take_u32(&mut b).ok_or_else(truncated)?;
    let v = take(&mut b, vlen).ok_or_else(truncated)?;
    let olen = take_u32(&mut b).ok_or_else(truncated)?;
    let o = take(&mut b, olen).ok_or_else(truncated)?;
    if !b.is_empty() {
        return Err(corrupt_value(len, "trailing bytes"));
    }
    Ok(ValueRef {
        region_id: RegionId(u64::from_le_bytes(u64_be(region))),
        value: v,
        old_value: o,
    })
}

/// Decodes a stored key and value back into the row that was written.
pub fn decode_row(key: &[u8], value: &[u8]) -> Result<RawRow> {
    let k = decode_key(key)?;
    let v = decode_value(value)?;
    Ok(RawRow {
        op: k.op,
        key: k.raw_key.to_vec(),
        value: v.value.to_vec(),
        old_value: v.old_value.to_vec(),
        start_ts: k.start_ts,
        commit_ts: k.commit_ts,
        region_id: v.region_id,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cmp_rows_orders_like_encoded_keys() {
        // Tables with negative, small and large ids, a non-table key, both ops, keys that are
        // prefixes of one another, equal and different timestamps.
        let mut rows = Vec::new();
        for (commit, start) in [(5u64, 1u64), (5, 2), (6, 1), (u64::MAX, 0)] {
            for table in [-3i64, 1, 2, 1 << 40] {
                for op in [Op::Put, Op::Delete] {
                    for handle in [0u8, 1, 255] {
                        rows.push(row(op, table, handle, commit, start));
                    }
                }
            }
            let mut short = row(Op::Put, 1, 0, commit, start);
            short.key.pop();
            rows.push(short);
            let mut other = row(Op::Put, 1, 0, commit, start);
            other.key = b"m_meta".to_vec();
            rows.push(other);
        }
        let enc = |r: &RawRow| {
            let mut k = Vec::new();
            encode_key_into(r, &mut k);
            k
        };
        let mut scratch = Vec::new();
        for a in &rows {
            for b in &rows {
                let want = enc(a).cmp(&enc(b));
                assert_eq!(cmp_rows(a, b), want, "{a:?} vs {b:?}");
                assert_eq!(cmp_row_key(a, &enc(b), &mut scratch), want);
            }
        }
    }

    fn row(op: Op, table: i64, handle: u8, commit: u64, start: u64) -> RawRow {
        let mut key = crate::tidb::key::record_prefix(table);
        key.push(handle);
        RawRow {
            op,
            key,
            value: if op == Op::Put { vec![1, 2, 3] } else { vec![] },
            old_value: vec![9; 5],
            start_ts: Ts(start),
            commit_ts: Ts(commit),
            region_id: RegionId(77),
        }
    }

    fn key(r: &RawRow) -> Vec<u8> {
        let mut b = Vec::new();
        encode_key_into(r, &mut b);
        b
    }

    #[test]
    fn round_trip() {
        let r = row(Op::Put, -5, 3, 100, 90);
        let k = key(&r);
        let mut v = Vec::new();
        encode_value_into(&r, &mut v);
        assert_eq!(v.len() + k.len(), encoded_len(&r));
        let kr = decode_key(&k).unwrap();
        assert_eq!(kr.table_id, TableId(-5));
        assert_eq!(decode_row(&k, &v).unwrap(), r);
    }

    #[test]
    fn layout_is_exact() {
        let r = row(Op::Delete, 1, 0, 0x0102, 0x0304);
        let k = key(&r);
        assert_eq!(&k[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&k[8..16], &[0, 0, 0, 0, 0, 0, 3, 4]);
        assert_eq!(&k[16..24], &[0x80, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(k[24], 0);
        assert_eq!(&k[25..], &r.key[..]);
        let mut v = Vec::new();
        encode_value_into(&r, &mut v);
        assert_eq!(v[0], 1);
        assert_eq!(&v[1..9], &77u64.to_le_bytes());
        assert_eq!(&v[9..13], &[0, 0, 0, 0]);
        assert_eq!(&v[13..17], &[5, 0, 0, 0]);
        assert_eq!(&v[17..], &[9; 5]);
    }

    #[test]
    fn order_is_commit_start_table_op_key() {
        let rows = [
            row(Op::Put, 1, 1, 10, 5),
            row(Op::Put, 1, 0, 10, 5),
            row(Op::Delete, 1, 1, 10, 5),
            row(Op::Put, -1, 9, 10, 5),
            row(Op::Put, 0, 0, 10, 6),
            row(Op::Put, 0, 0, 9, 8),
        ];
        let mut keys: Vec<Vec<u8>> = rows.iter().map(key).collect();
        keys.sort();
        let order: Vec<(u64, u64, i64, Op, u8)> = keys
            .iter()
            .map(|k| {
                let d = decode_key(k).unwrap();
                let h = *d.raw_key.last().unwrap();
                (d.commit_ts.0, d.start_ts.0, d.table_id.0, d.op, h)
            })
            .collect();
        assert_eq!(
            order,
            vec![
                (9, 8, 0, Op::Put, 0),
                (10, 5, -1, Op::Put, 9),
                (10, 5, 1, Op::Delete, 1),
                (10, 5, 1, Op::Put, 0),
                (10, 5, 1, Op::Put, 1),
                (10, 6, 0, Op::Put, 0),
            ]
        );
    }

    #[test]
    fn non_table_keys_group_first() {
        let mut r = row(Op::Put, 1, 0, 1, 1);
        r.key = b"mDDLJob".to_vec();
        let d = decode_key(&key(&r)).unwrap().table_id;
        assert_eq!(d, NON_TABLE_ID);
    }

    #[test]
    fn corruption_is_typed() {
        assert!(matches!(
            decode_key(&[0; 24]),
            Err(SorterError::Corrupt { what: "key", .. })
        ));
        let mut k = key(&row(Op::Put, 1, 0, 1, 1));
        k[24] = 7;
        assert!(decode_key(&k).is_err());
        let mut v = Vec::new();
        encode_value_into(&row(Op::Put, 1, 0, 1, 1), &mut v);
        for cut in 0..v.len() {
            assert!(matches!(
                decode_value(&v[..cut]),
                Err(SorterError::Corrupt { what: "value", .. })
            ));
        }
        let mut long = v.clone();
        long.push(0);
        assert!(decode_value(&long).is_err());
        let mut bad = v.clone();
        bad[0] = 2;
        assert!(decode_value(&bad).is_err());
        let mut huge = v;
        huge[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_value(&huge).is_err());
    }

    #[test]
    fn bounds() {
        assert_eq!(upper_bound(Ts(1)), Some(2u64.to_be_bytes()));
        assert_eq!(upper_bound(Ts::MAX), None);
        assert_eq!(successor(&[1, 2]), vec![1, 2, 0]);
    }
}

//! The row an index entry points at, from TiDB's index key and value layouts.
//!
//! An index key is `t{table}_i{index}` followed by the key-form datums of the index columns.
//! A non-unique entry (or a unique one holding a NULL) appends the row handle to the key: an
//! int handle as one INT datum, a common handle as its datums, and for a global index first
//! a partition flag (126) and the partition id. A unique entry keeps the handle in the value,
//! in one of three layouts:
//! - old: the int handle as 8 big-endian bytes (9 with a trailing "untouched" flag);
//! - version 0: `tail length | [127, handle length (2 bytes BE), common handle] |
//!   [126, partition id (8)] | [restored data] | padding | [int handle (8)] | [untouched]`,
//!   where the tail (padding, int handle, untouched flag) is `tail length` bytes;
//! - clustered version 1: `tail length (0 or 1) | 125 | 1 | …`, as version 0 without the tail
//!   handle.

use super::codec::{decode_datum, decode_int, split_datum, DatumRef};
use super::error::{Error, Result};
use super::key::Handle;

/// Bytes of `t{table}_i{index}`.
const INDEX_PREFIX_LEN: usize = 1 + 8 + 2 + 8;
/// Longest value of the old layout.
const MAX_OLD_VALUE_LEN: usize = 9;
const COMMON_HANDLE_FLAG: u8 = 127;
const PARTITION_ID_FLAG: u8 = 126;
const INDEX_VERSION_FLAG: u8 = 125;

/// Where an index entry's row is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexTarget {
    /// The partition holding the row, for an entry of a global index.
    pub partition: Option<i64>,
    pub handle: Handle,
}

fn corrupted(detail: &'static str) -> Error {
    Error::Corrupted {
        what: "index entry",
        detail,
    }
}

/// The row of the index entry `key` → `value` of an index over `columns` columns.
pub fn index_entry_target(key: &[u8], value: &[u8], columns: usize) -> Result<IndexTarget> {
    let mut rest = key
        .get(INDEX_PREFIX_LEN..)
        .ok_or_else(|| corrupted("key shorter than an index prefix"))?;
    for _ in 0..columns {
        rest = split_datum(rest)?.1;
    }
    if !rest.is_empty() {
        return handle_in_key(rest);
    }
    if value.len() < 8 {
        return Err(corrupted("no handle in the key nor in the value"));
    }
    handle_in_value(value)
}

fn handle_in_key(suffix: &[u8]) -> Result<IndexTarget> {
    if let Some((&PARTITION_ID_FLAG, after)) = suffix.split_first() {
        let (pid, inner) = decode_int(after)?;
        let target = handle_in_key(inner)?;
        return Ok(IndexTarget {
            partition: Some(pid),
            handle: target.handle,
        });
    }
    let (d, remain) = decode_datum(suffix)?;
    let handle = match d {
        DatumRef::Int(h) if remain.is_empty() => Handle::Int(h),
        _ => Handle::Common(suffix.to_vec()),
    };
    Ok(IndexTarget {
        partition: None,
        handle,
    })
}

fn int_handle(b: &[u8]) -> Result<Handle> {
    let bytes: [u8; 8] = b
        .get(..8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| corrupted("int handle shorter than 8 bytes"))?;
    Ok(Handle::Int(i64::from_be_bytes(bytes)))
}

fn handle_in_value(value: &[u8]) -> Result<IndexTarget> {
    if value.len() <= MAX_OLD_VALUE_LEN {
        return Ok(IndexTarget {
            partition: None,
            handle: int_handle(value)?,
        });
    }
    let tail_len = usize::from(value[0]);
    let body_end = value
        .len()
        .checked_sub(tail_len)
        .filter(|&e| e >= 1)
        .ok_or_else(|| corrupted("tail longer than the value"))?;
    let version1 = tail_len <= 1 && value[1] == INDEX_VERSION_FLAG && value[2] == 1;
    let (mut body, tail) = if version1 {
        (
            value
                .get(3..body_end)
                .ok_or_else(|| corrupted("version 1 value too short"))?,
            &[][..],
        )
    } else {
        (&value[1..body_end], &value[body_end..])
    };
    let mut handle = None;
    if let Some((&COMMON_HANDLE_FLAG, after)) = body.split_first() {
        let len = after
            .get(..2)
            .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])))
            .ok_or_else(|| corrupted("common handle length cut"))?;
        let h = after
            .get(2..2 + len)
            .ok_or_else(|| corrupted("common handle longer than the value"))?;
        handle = Some(Handle::Common(h.to_vec()));
        body = &after[2 + len..];
    }
    let mut partition = None;
    if let Some((&PARTITION_ID_FLAG, after)) = body.split_first() {
        partition = Some(decode_int(after)?.0);
    }
    if tail.len() >= 8 {
        handle = Some(int_handle(tail)?);
    }
    let handle = handle.ok_or_else(|| corrupted("a unique index value without a handle"))?;
    Ok(IndexTarget { partition, handle })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tidb::codec::{encode_int, encode_key_datums, Datum};
    use crate::tidb::key::index_key;

    fn key(values: &[Datum]) -> Vec<u8> {
        index_key(7, 2, values).unwrap()
    }

    fn target(handle: Handle, partition: Option<i64>) -> IndexTarget {
        IndexTarget { partition, handle }
    }

    #[test]
    fn non_unique_entries_keep_the_handle_in_the_key() {
        let k = key(&[Datum::Bytes(b"abc".to_vec()), Datum::Int(-5)]);
        assert_eq!(
            index_entry_target(&k, b"0", 1).unwrap(),
            target(Handle::Int(-5), None)
        );
        // A common handle of two datums.
        let mut h = Vec::new();
        encode_key_datums(&mut h, &[Datum::Bytes(b"x".to_vec()), Datum::Int(3)]).unwrap();
        let mut k = key(&[Datum::Int(1)]);
        k.extend_from_slice(&h);
        assert_eq!(
            index_entry_target(&k, b"0", 1).unwrap(),
            target(Handle::Common(h.clone()), None)
        );
        // A global index: the partition, then the handle.
        let mut k = key(&[Datum::Int(1)]);
        k.push(PARTITION_ID_FLAG);
        encode_int(&mut k, 88);
        encode_key_datums(&mut k, &[Datum::Int(42)]).unwrap();
        assert_eq!(
            index_entry_target(&k, b"0", 1).unwrap(),
            target(Handle::Int(42), Some(88))
        );
    }

    #[test]
    fn unique_entries_keep_the_handle_in_the_value_in_every_layout() {
        let k = key(&[Datum::Int(10)]);
        // Old: 8 bytes, or 9 with the untouched flag.
        let mut old = (-2i64).to_be_bytes().to_vec();
        assert_eq!(
            index_entry_target(&k, &old, 1).unwrap(),
            target(Handle::Int(-2), None)
        );
        old.push(1);
        assert_eq!(
            index_entry_target(&k, &old, 1).unwrap(),
            target(Handle::Int(-2), None)
        );
        // Version 0 with restored data and the int handle in the tail (tail = handle + flag).
        let mut v0 = vec![9, 128, 0, 1, 1, 0];
        v0.extend_from_slice(&77i64.to_be_bytes());
        v0.push(1);
        assert_eq!(
            index_entry_target(&k, &v0, 1).unwrap(),
            target(Handle::Int(77), None)
        );
        // Version 0, a common handle and a partition id, no tail.
        let mut h = Vec::new();
        encode_key_datums(&mut h, &[Datum::Bytes(b"pk".to_vec())]).unwrap();
        let mut v = vec![0, COMMON_HANDLE_FLAG, 0, h.len() as u8];
        v.extend_from_slice(&h);
        v.push(PARTITION_ID_FLAG);
        encode_int(&mut v, 5);
        assert_eq!(
            index_entry_target(&k, &v, 1).unwrap(),
            target(Handle::Common(h.clone()), Some(5))
        );
        // Clustered version 1: the version, then the common handle.
        let mut v1 = vec![
            0,
            INDEX_VERSION_FLAG,
            1,
            COMMON_HANDLE_FLAG,
            0,
            h.len() as u8,
        ];
        v1.extend_from_slice(&h);
        v1.extend_from_slice(&[128, 0, 0, 0]);
        assert_eq!(
            index_entry_target(&k, &v1, 1).unwrap(),
            target(Handle::Common(h), None)
        );
    }

    #[test]
    fn broken_entries_are_errors() {
        let k = key(&[Datum::Int(10)]);
        assert!(index_entry_target(&k, b"0", 1).is_err());
        assert!(index_entry_target(&k[..5], b"0", 0).is_err());
        assert!(index_entry_target(&k, &[200, 1, 2, 3, 4, 5, 6, 7, 8, 9], 1).is_err());
        assert!(
            index_entry_target(&k, &[0, COMMON_HANDLE_FLAG, 0, 40, 1, 2, 3, 4, 5, 6], 1).is_err()
        );
        assert!(index_entry_target(&k, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 1).is_err());
    }
}

//! TiKV's approximate statistics of a key range, as a region heartbeat reports them to PD.
//!
//! TiKV keeps no exact counts: it sums the SST properties of the range. `approximate_keys`
//! counts the entries of the write column family — every committed version, delete and
//! rollback record until GC and compaction drop it — so a row updated twice counts three times
//! until GC runs. `approximate_size` is the bytes of the write and default families as stored:
//! each data key is `'z'`, the memcomparable raw key and an 8-byte timestamp; a write record
//! holds its type, the start ts (a varint) and a short value inline, a long value lives in the
//! default family. The simulator computes the same sums exactly, over its keys.

use super::{MvccStore, WriteType};
use crate::tidb::codec::encoded_bytes_len;

/// Approximate key count and bytes of a raw key range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeSize {
    /// Write-column-family entries (versions).
    pub keys: u64,
    /// Bytes of the write and default column families.
    pub bytes: u64,
}

/// Bytes of a data key: the `'z'` prefix, the memcomparable key, the timestamp.
fn data_key_len(raw: &[u8]) -> u64 {
    1 + encoded_bytes_len(raw.len()) as u64 + 8
}

/// Bytes of a start ts as the varint a write record stores.
fn varint_len(mut v: u64) -> u64 {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

impl MvccStore {
    /// TiKV's approximate statistics of the raw keys in `[start, end)` (empty `end`: no bound).
    pub fn approximate_size(&self, start: &[u8], end: &[u8]) -> RangeSize {
        let mut out = RangeSize::default();
        for (key, entry) in self.entries_from(start) {
            if !end.is_empty() && key >= end {
                break;
            }
            let key_len = data_key_len(key);
            for (_, w) in entry.writes.all() {
                out.keys += 1;
                // Type byte, start ts; a short value adds its tag and length byte.
                let short = w.short_value.as_ref().map_or(0, |v| 2 + v.len() as u64);
                out.bytes += key_len + 1 + varint_len(w.start_ts.0) + short;
                if w.write_type == WriteType::Put && w.short_value.is_none() {
                    if let Some(v) = entry.defaults.get(&w.start_ts) {
                        out.bytes += key_len + v.len() as u64;
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_key_lengths() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(u64::MAX), 10);
        // 3 raw bytes pad to one 9-byte group.
        assert_eq!(data_key_len(b"abc"), 1 + 9 + 8);
    }
}

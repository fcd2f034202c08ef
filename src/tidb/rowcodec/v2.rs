//! Row format v2 (`pkg/util/rowcodec`): a borrowed, zero-allocation view for decoding and an
//! encoder.
//!
//! ```text
//! | 0x80 | flags | N: u16 LE | M: u16 LE | not-null ids (N) | null ids (M) | end offsets (N) | data | [checksum]
//!   flags: 0x01 LARGE (ids u32 LE, offsets u32 LE; else ids u8, offsets u16 LE)
//!          0x02 HAS_CHECKSUM (1 header byte + u32 LE CRC32 [+ u32 LE extra] after the data)
//!   ids ascending within each list; column i's data is data[end[i-1]..end[i]] (end[-1] = 0)
//! ```
//!
//! A column in neither list was not written (added later, or the int handle): see the
//! row decoder for defaults. Decoding always uses the declared offsets, never the buffer end,
//! so checksum bytes are never mistaken for data.

use crate::tidb::error::{take, Error, Result};

/// First byte of a v2 row.
pub const CODEC_VER: u8 = 128;
/// Flag: 32-bit ids and offsets.
pub const FLAG_LARGE: u8 = 0x01;
/// Flag: a checksum follows the data.
pub const FLAG_CHECKSUM: u8 = 0x02;

/// Where a column stands in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column<'a> {
    /// Present with these payload bytes.
    Value(&'a [u8]),
    /// Present and NULL.
    Null,
    /// Not written in this row.
    Absent,
}

/// A parsed v2 row borrowing its bytes.
#[derive(Debug, Clone, Copy)]
pub struct RowSliceV2<'a> {
    large: bool,
    not_null: usize,
    null: usize,
    not_null_ids: &'a [u8],
    null_ids: &'a [u8],
    offsets: &'a [u8],
    data: &'a [u8],
    checksum: &'a [u8],
}

impl<'a> RowSliceV2<'a> {
    /// Parses the header and checks that ids, offsets and data are in bounds and offsets
    /// non-decreasing, so that later lookups cannot fail.
    pub fn parse(row: &'a [u8]) -> Result<Self> {
        let (hdr, rest) = take(row, 6, "row v2 header")?;
        if hdr[0] != CODEC_VER {
            return Err(Error::UnknownFlag {
                what: "row format version",
                flag: hdr[0],
            });
        }
        let flags = hdr[1];
        let large = flags & FLAG_LARGE != 0;
        let not_null = usize::from(u16::from_le_bytes([hdr[2], hdr[3]]));
        let null = usize::from(u16::from_le_bytes([hdr[4], hdr[5]]));
        let (id_w, off_w) = if large { (4, 4) } else { (1, 2) };
        let (not_null_ids, rest) = take(rest, not_null * id_w, "row v2 column ids")?;
        let (null_ids, rest) = take(rest, null * id_w, "row v2 null column ids")?;
        let (offsets, rest) = take(rest, not_null * off_w, "row v2 offsets")?;
        let mut prev = 0usize;
        for i in 0..not_null {
            let end = read_offset(offsets, large, i);
            if end < prev {
                return Err(Error::Corrupted {
                    what: "row v2",
                    detail: "offsets decrease",
                });
            }
            prev = end;
        }
        let (data, tail) = take(rest, prev, "row v2 data")?;
        let checksum = if flags & FLAG_CHECKSUM != 0 {
            tail
        } else {
            &[]
        };
        Ok(RowSliceV2 {
            large,
            not_null,
            null,
            not_null_ids,
            null_ids,
            offsets,
            data,
            checksum,
        })
    }

    /// 32-bit ids and offsets.
    pub fn is_large(&self) -> bool {
        self.large
    }
    /// Number of not-null columns.
    pub fn not_null_count(&self) -> usize {
        self.not_null
    }
    /// Number of null columns.
    pub fn null_count(&self) -> usize {
        self.null
    }
    /// Checksum bytes (header byte + CRC32s) when the row has them; empty otherwise.
    pub fn checksum_bytes(&self) -> &'a [u8] {
        self.checksum
    }

    fn id_at(&self, ids: &[u8], i: usize) -> u32 {
        if self.large {
            let s = &ids[i * 4..i * 4 + 4];
            u32::from_le_bytes([s[0], s[1], s[2], s[3]])
        } else {
            u32::from(ids[i])
        }
    }

    fn search(&self, ids: &[u8], n: usize, id: u32) -> Option<usize> {
        if !self.large {
            let id = u8::try_from(id).ok()?;
            return ids.binary_search(&id).ok();
        }
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.id_at(ids, mid).cmp(&id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Looks a column up by id (binary search over the sorted id lists).
    #[inline]
    pub fn get(&self, column_id: i64) -> Column<'a> {
        let Ok(id) = u32::try_from(column_id) else {
            return Column::Absent;
        };
        if id == 0 {
            return Column::Absent;
        }
        if let Some(i) = self.search(self.not_null_ids, self.not_null, id) {
            let start = if i == 0 {
                0
            } else {
                read_offset(self.offsets, self.large, i - 1)
            };
            let end = read_offset(self.offsets, self.large, i);
            // parse() checked bounds and monotonicity.
            return Column::Value(self.data.get(start..end).unwrap_or(&[]));
        }
        if self.search(self.null_ids, self.null, id).is_some() {
            return Column::Null;
        }
        Column::Absent
    }

    /// Iterates over the not-null columns as (id, payload), then the null ones as (id, None).
    pub fn iter(&self) -> impl Iterator<Item = (i64, Option<&'a [u8]>)> + '_ {
        let nn = (0..self.not_null).map(move |i| {
            let start = if i == 0 {
                0
            } else {
                read_offset(self.offsets, self.large, i - 1)
            };
            let end = read_offset(self.offsets, self.large, i);
            (
                i64::from(self.id_at(self.not_null_ids, i)),
                Some(self.data.get(start..end).unwrap_or(&[])),
            )
        });
        let nl = (0..self.null).map(move |i| (i64::from(self.id_at(self.null_ids, i)), None));
        nn.chain(nl)
    }
}

#[inline]
fn read_offset(offsets: &[u8], large: bool, i: usize) -> usize {
    if large {
        let s = &offsets[i * 4..i * 4 + 4];
        u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize
    } else {
        usize::from(u16::from_le_bytes([offsets[i * 2], offsets[i * 2 + 1]]))
    }
}

/// Encodes a v2 row from (column id, payload or `None` for NULL) pairs in any order. Chooses
/// the large layout when an id exceeds 255 or the data exceeds 65535 bytes.
pub fn encode(columns: &[(i64, Option<&[u8]>)], out: &mut Vec<u8>) -> Result<()> {
    let mut order: Vec<usize> = (0..columns.len()).collect();
    order.sort_by_key(|&i| columns[i].0);
    let mut large = false;
    let mut data_len = 0usize;
    for w in order.windows(2) {
        if columns[w[0]].0 == columns[w[1]].0 {
            return Err(Error::BadColumnId {
                column_id: columns[w[0]].0,
            });
        }
    }
    for (id, payload) in columns {
        if *id <= 0 || *id > i64::from(u32::MAX) {
            return Err(Error::BadColumnId { column_id: *id });
        }
        large |= *id > 255;
        data_len += payload.map_or(0, <[u8]>::len);
    }
    large |= data_len > usize::from(u16::MAX);
    let not_null: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| columns[i].1.is_some())
        .collect();
    let null: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| columns[i].1.is_none())
        .collect();
    let count = |n: usize| {
        u16::try_from(n).map_err(|_| Error::Corrupted {
            what: "row v2",
            detail: "more than 65535 columns",
        })
    };
    out.push(CODEC_VER);
    out.push(if large { FLAG_LARGE } else { 0 });
    out.extend_from_slice(&count(not_null.len())?.to_le_bytes());
    out.extend_from_slice(&count(null.len())?.to_le_bytes());
    for &i in not_null.iter().chain(null.iter()) {
        let id = columns[i].0;
        if large {
            out.extend_from_slice(&(id as u32).to_le_bytes());
        } else {
            out.push(id as u8);
        }
    }
    let mut end = 0usize;
    for &i in &not_null {
        end += columns[i].1.map_or(0, <[u8]>::len);
        if large {
            let e = u32::try_from(end).map_err(|_| Error::Corrupted {
                what: "row v2",
                detail: "data larger than 4 GiB",
            })?;
            out.extend_from_slice(&e.to_le_bytes());
        } else {
            out.extend_from_slice(&(end as u16).to_le_bytes());
        }
    }
    for &i in &not_null {
        out.extend_from_slice(columns[i].1.unwrap_or(&[]));
    }
    Ok(())
}

/// Appends the shortest little-endian two's complement form (1, 2, 4 or 8 bytes).
#[inline]
pub fn encode_int_payload(buf: &mut Vec<u8>, v: i64) {
    if let Ok(x) = i8::try_from(v) {
        buf.push(x as u8);
    } else if let Ok(x) = i16::try_from(v) {
        buf.extend_from_slice(&x.to_le_bytes());
    } else if let Ok(x) = i32::try_from(v) {
        buf.extend_from_slice(&x.to_le_bytes());
    } else {
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

/// Appends the shortest little-endian unsigned form (1, 2, 4 or 8 bytes).
#[inline]
pub fn encode_uint_payload(buf: &mut Vec<u8>, v: u64) {
    if let Ok(x) = u8::try_from(v) {
        buf.push(x);
    } else if let Ok(x) = u16::try_from(v) {
        buf.extend_from_slice(&x.to_le_bytes());
    } else if let Ok(x) = u32::try_from(v) {
        buf.extend_from_slice(&x.to_le_bytes());
    } else {
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

/// Decodes a signed payload of 1, 2, 4 or 8 bytes.
#[inline]
pub fn decode_int_payload(b: &[u8]) -> Result<i64> {
    Ok(match *b {
        [a] => i64::from(a as i8),
        [a, c] => i64::from(i16::from_le_bytes([a, c])),
        [a, c, d, e] => i64::from(i32::from_le_bytes([a, c, d, e])),
        [a, c, d, e, f, g, h, i] => i64::from_le_bytes([a, c, d, e, f, g, h, i]),
        _ => {
            return Err(Error::Corrupted {
                what: "row v2 int",
                detail: "length not 1, 2, 4 or 8",
            })
        }
    })
}

/// Decodes an unsigned payload of 1, 2, 4 or 8 bytes.
#[inline]
pub fn decode_uint_payload(b: &[u8]) -> Result<u64> {
    Ok(match *b {
        [a] => u64::from(a),
        [a, c] => u64::from(u16::from_le_bytes([a, c])),
        [a, c, d, e] => u64::from(u32::from_le_bytes([a, c, d, e])),
        [a, c, d, e, f, g, h, i] => u64::from_le_bytes([a, c, d, e, f, g, h, i]),
        _ => {
            return Err(Error::Corrupted {
                what: "row v2 uint",
                detail: "length not 1, 2, 4 or 8",
            })
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // tikv components/tidb_query_datatype/src/codec/row/v2/encoder_for_test.rs test_encode_big
    #[test]
    fn golden_tikv_large() {
        let exp = [
            128u8, 1, 4, 0, 1, 0, 1, 0, 0, 0, 3, 0, 0, 0, 8, 0, 0, 0, 12, 0, 0, 0, 79, 1, 0, 0, 2,
            0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 232, 3, 3, 255, 127, 2,
        ];
        let mut p = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        encode_int_payload(&mut p[0], 1000);
        encode_int_payload(&mut p[1], 2);
        encode_int_payload(&mut p[2], 3);
        encode_int_payload(&mut p[3], 32767);
        let cols = [
            (1, Some(&p[0][..])),
            (12, Some(&p[1][..])),
            (335, None),
            (3, Some(&p[2][..])),
            (8, Some(&p[3][..])),
        ];
        let mut out = Vec::new();
        encode(&cols, &mut out).unwrap();
        assert_eq!(out, exp);
        let r = RowSliceV2::parse(&exp).unwrap();
        assert!(r.is_large());
        assert_eq!(r.get(1), Column::Value(&[232, 3]));
        assert_eq!(r.get(8), Column::Value(&[255, 127]));
        assert_eq!(r.get(335), Column::Null);
        assert_eq!(r.get(2), Column::Absent);
    }

    // tikv .../row/v2/encoder_for_test.rs test_encode_unsigned
    #[test]
    fn golden_tikv_unsigned() {
        let exp = [
            128u8, 0, 2, 0, 0, 0, 1, 2, 8, 0, 9, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        ];
        let r = RowSliceV2::parse(&exp).unwrap();
        let Column::Value(a) = r.get(1) else { panic!() };
        let Column::Value(b) = r.get(2) else { panic!() };
        assert_eq!(decode_uint_payload(a).unwrap(), u64::MAX);
        assert_eq!(decode_int_payload(b).unwrap(), -1);
        let (mut pa, mut pb) = (Vec::new(), Vec::new());
        encode_uint_payload(&mut pa, u64::MAX);
        encode_int_payload(&mut pb, -1);
        let mut out = Vec::new();
        encode(&[(1, Some(&pa[..])), (2, Some(&pb[..]))], &mut out).unwrap();
        assert_eq!(out, exp);
    }

    #[test]
    fn checksum_bytes_are_not_data() {
        let mut out = Vec::new();
        encode(&[(1, Some(&[7u8][..]))], &mut out).unwrap();
        out[1] |= FLAG_CHECKSUM;
        out.extend_from_slice(&[1, 0xaa, 0xbb, 0xcc, 0xdd]);
        let r = RowSliceV2::parse(&out).unwrap();
        assert_eq!(r.get(1), Column::Value(&[7]));
        assert_eq!(r.checksum_bytes().len(), 5);
    }

    #[test]
    fn errors() {
        assert!(RowSliceV2::parse(&[]).is_err());
        assert!(RowSliceV2::parse(&[127, 0, 0, 0, 0, 0]).is_err());
        assert!(RowSliceV2::parse(&[128, 0, 1, 0, 0, 0, 1]).is_err());
        assert!(RowSliceV2::parse(&[128, 0, 1, 0, 0, 0, 1, 5, 0, 1]).is_err());
        // decreasing offsets
        assert!(RowSliceV2::parse(&[128, 0, 2, 0, 0, 0, 1, 2, 2, 0, 1, 0, 9, 9]).is_err());
        assert!(encode(&[(0, None)], &mut Vec::new()).is_err());
        assert!(encode(&[(1, None), (1, None)], &mut Vec::new()).is_err());
        assert!(decode_int_payload(&[1, 2, 3]).is_err());
        assert!(decode_uint_payload(&[]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(cols in proptest::collection::btree_map(1i64..400, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)), 0..20)) {
            let pairs: Vec<(i64, Option<&[u8]>)> = cols.iter().map(|(k, v)| (*k, v.as_deref())).collect();
            let mut out = Vec::new();
            encode(&pairs, &mut out).unwrap();
            let r = RowSliceV2::parse(&out).unwrap();
            prop_assert_eq!(r.is_large(), cols.keys().any(|&k| k > 255));
            for (k, v) in &cols {
                let got = r.get(*k);
                match v {
                    Some(v) => prop_assert_eq!(got, Column::Value(v)),
                    None => prop_assert_eq!(got, Column::Null),
                }
            }
            prop_assert_eq!(r.get(401), Column::Absent);
            prop_assert_eq!(r.iter().count(), cols.len());
        }

        #[test]
        fn int_payload_roundtrip(i: i64, u: u64) {
            let mut b = Vec::new();
            encode_int_payload(&mut b, i);
            prop_assert_eq!(decode_int_payload(&b).unwrap(), i);
            b.clear();
            encode_uint_payload(&mut b, u);
            prop_assert_eq!(decode_uint_payload(&b).unwrap(), u);
        }

        #[test]
        fn random_bytes_never_panic(mut b: Vec<u8>, large: bool, id: i64) {
            if b.len() > 1 { b[0] = CODEC_VER; b[1] = u8::from(large); }
            if let Ok(r) = RowSliceV2::parse(&b) {
                let _ = r.get(id);
                for i in 0..300 { let _ = r.get(i); }
                let _ = r.iter().count();
            }
        }
    }
}

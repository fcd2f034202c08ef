//! The old row format (v1, `tablecodec.EncodeOldRow`): a flat list of value-form datums,
//! alternating column id and column value.
//!
//! ```text
//! | varintFlag, varint(col_id) | value datum | varintFlag, varint(col_id) | value datum | ...
//! ```
//!
//! Values were "flattened" before encoding: times as uvarint packed time (TIMESTAMP in UTC),
//! durations as varint nanoseconds, ENUM/SET/BIT as uvarint. A row with no columns is the
//! single byte `0x00` (NilFlag).

use crate::tidb::codec::{decode_datum, encode_value_datums, Datum, DatumRef};
use crate::tidb::error::{Error, Result};

/// Iterates over the (column id, value) pairs of a v1 row.
pub struct V1Iter<'a> {
    rest: &'a [u8],
}

/// Starts iterating a v1 row.
pub fn iter(row: &[u8]) -> V1Iter<'_> {
    let rest = if row == [0] { &[][..] } else { row };
    V1Iter { rest }
}

impl<'a> Iterator for V1Iter<'a> {
    type Item = Result<(i64, DatumRef<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = (|| {
            let (id, rest) = decode_datum(self.rest)?;
            let id = match id {
                DatumRef::Int(i) => i,
                DatumRef::Uint(u) => u as i64,
                _ => {
                    return Err(Error::Corrupted {
                        what: "row v1",
                        detail: "column id is not an integer",
                    })
                }
            };
            let (v, rest) = decode_datum(rest)?;
            self.rest = rest;
            Ok((id, v))
        })();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

/// Encodes a v1 row from (column id, value datum) pairs.
pub fn encode(columns: &[(i64, Datum)], out: &mut Vec<u8>) -> Result<()> {
    if columns.is_empty() {
        out.push(0);
        return Ok(());
    }
    for (id, d) in columns {
        encode_value_datums(out, &[Datum::Int(*id)])?;
        encode_value_datums(out, std::slice::from_ref(d))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // tidb pkg/util/rowcodec/rowcodec_test.go TestOldRowCodec / TestCodecUtil:
    // EncodeOldRow(datums 1, 2, 3, nil; col ids 1..4). Value-form datums: varintFlag (8) +
    // zigzag varint, NilFlag for NULL.
    #[test]
    fn golden_old_row() {
        let cols = [
            (1, Datum::Int(1)),
            (2, Datum::Int(2)),
            (3, Datum::Int(3)),
            (4, Datum::Null),
        ];
        let mut out = Vec::new();
        encode(&cols, &mut out).unwrap();
        assert_eq!(out, [8, 2, 8, 2, 8, 4, 8, 4, 8, 6, 8, 6, 8, 8, 0]);
        let back: Vec<(i64, DatumRef)> = iter(&out).collect::<Result<_>>().unwrap();
        assert_eq!(
            back,
            vec![
                (1, DatumRef::Int(1)),
                (2, DatumRef::Int(2)),
                (3, DatumRef::Int(3)),
                (4, DatumRef::Null)
            ]
        );
        let mut empty = Vec::new();
        encode(&[], &mut empty).unwrap();
        assert_eq!(empty, [0]);
        assert_eq!(iter(&empty).count(), 0);
    }

    #[test]
    fn errors() {
        assert!(iter(&[8, 2]).next().unwrap().is_err());
        assert!(iter(&[2, 0, 8]).next().unwrap().is_err());
        let mut it = iter(&[8, 2, 0x63]);
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b: Vec<u8>) {
            for r in iter(&b) { let _ = r; }
        }
    }
}

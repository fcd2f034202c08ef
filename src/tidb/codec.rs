//! Primitive codecs of TiDB's `pkg/util/codec`: memcomparable numbers and bytes, varints,
//! compact bytes, and flag-prefixed datums.
//!
//! Two families exist and must not be mixed up:
//!
//! * **memcomparable** (key) encodings: byte order of the encoding equals the order of the
//!   values. Used in record/index keys, common handles and the PD/TiKV region key form.
//! * **value** encodings (varint, compact bytes): shorter, unordered. Used in the old (v1) row
//!   format and in index values.
//!
//! ```text
//! EncodeInt      8 bytes BE of (v as u64) ^ 0x8000_0000_0000_0000
//! EncodeUint     8 bytes BE
//! EncodeFloat    bits = f64 bits; if sign clear: bits |= 1<<63 else bits = !bits; 8 bytes BE
//! EncodeBytes    [b0..b7][0xFF] ... [last group, zero padded][0xFF - pad]   (always >= 1 group)
//! EncodeVarint   zigzag (v<<1 ^ v>>63) as LEB128          EncodeUvarint  LEB128
//! CompactBytes   EncodeVarint(len) ++ bytes
//! Datum          flag byte ++ payload (see the `flag` module)
//! ```
//!
//! Reference: tidb `pkg/util/codec/{number,bytes,float,codec,decimal}.go`.

use std::borrow::Cow;

use super::error::{take, take_array, Error, Result};
use super::{decimal, json};

/// Datum flag bytes (tidb `pkg/util/codec/codec.go`).
pub mod flag {
    /// SQL NULL.
    pub const NIL: u8 = 0;
    /// Memcomparable bytes (key form).
    pub const BYTES: u8 = 1;
    /// Varint length + bytes (value form).
    pub const COMPACT_BYTES: u8 = 2;
    /// Memcomparable int64.
    pub const INT: u8 = 3;
    /// Memcomparable uint64.
    pub const UINT: u8 = 4;
    /// Memcomparable float64 (both forms).
    pub const FLOAT: u8 = 5;
    /// precision, frac, MySQL binary decimal (both forms).
    pub const DECIMAL: u8 = 6;
    /// Duration nanoseconds as memcomparable int64 (both forms).
    pub const DURATION: u8 = 7;
    /// Zigzag varint int64 (value form).
    pub const VARINT: u8 = 8;
    /// Uvarint uint64 (value form).
    pub const UVARINT: u8 = 9;
    /// JSON type code + TiDB binary JSON.
    pub const JSON: u8 = 10;
    /// TiDB vector of float32 (u32 LE count + f32 LE each).
    pub const VECTOR_FLOAT32: u8 = 20;
    /// Upper bound marker, no payload.
    pub const MAX: u8 = 250;
}

const SIGN_MASK: u64 = 0x8000_0000_0000_0000;
const GROUP: usize = 8;
const MARKER: u8 = 0xFF;
const PAD: u8 = 0;

// ---------------------------------------------------------------- numbers

/// Appends the memcomparable form of a signed integer.
#[inline]
pub fn encode_int(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&((v as u64) ^ SIGN_MASK).to_be_bytes());
}

/// Appends the descending memcomparable form of a signed integer.
#[inline]
pub fn encode_int_desc(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&(!((v as u64) ^ SIGN_MASK)).to_be_bytes());
}

/// Decodes a memcomparable signed integer; returns it and the rest.
#[inline]
pub fn decode_int(b: &[u8]) -> Result<(i64, &[u8])> {
    let (a, rest) = take_array::<8>(b, "comparable int")?;
    Ok(((u64::from_be_bytes(a) ^ SIGN_MASK) as i64, rest))
}

/// Decodes a descending memcomparable signed integer.
#[inline]
pub fn decode_int_desc(b: &[u8]) -> Result<(i64, &[u8])> {
    let (a, rest) = take_array::<8>(b, "comparable int")?;
    Ok(((!u64::from_be_bytes(a) ^ SIGN_MASK) as i64, rest))
}

/// Appends the memcomparable form of an unsigned integer (8 bytes big-endian).
#[inline]
pub fn encode_uint(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_be_bytes());
}

/// Appends the descending form of an unsigned integer (TiKV's `!ts` suffix).
#[inline]
pub fn encode_uint_desc(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&(!v).to_be_bytes());
}

/// Decodes a memcomparable unsigned integer.
#[inline]
pub fn decode_uint(b: &[u8]) -> Result<(u64, &[u8])> {
    let (a, rest) = take_array::<8>(b, "comparable uint")?;
    Ok((u64::from_be_bytes(a), rest))
}

/// Decodes a descending memcomparable unsigned integer.
#[inline]
pub fn decode_uint_desc(b: &[u8]) -> Result<(u64, &[u8])> {
    let (a, rest) = take_array::<8>(b, "comparable uint")?;
    Ok((!u64::from_be_bytes(a), rest))
}

/// The memcomparable bit pattern of a float64.
#[inline]
pub fn float_to_comparable(f: f64) -> u64 {
    let u = f.to_bits();
    if u & SIGN_MASK == 0 {
        u | SIGN_MASK
    } else {
        !u
    }
}

/// Inverse of [`float_to_comparable`].
#[inline]
pub fn comparable_to_float(u: u64) -> f64 {
    let u = if u & SIGN_MASK != 0 {
        u & !SIGN_MASK
    } else {
        !u
    };
    f64::from_bits(u)
}

/// Appends the memcomparable form of a float64.
#[inline]
pub fn encode_float(buf: &mut Vec<u8>, f: f64) {
    buf.extend_from_slice(&float_to_comparable(f).to_be_bytes());
}

/// Decodes a memcomparable float64.
#[inline]
pub fn decode_float(b: &[u8]) -> Result<(f64, &[u8])> {
    let (a, rest) = take_array::<8>(b, "comparable float")?;
    Ok((comparable_to_float(u64::from_be_bytes(a)), rest))
}

/// Appends Go's `binary.PutUvarint` form (LEB128).
#[inline]
pub fn encode_uvarint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends Go's `binary.PutVarint` form (zigzag then LEB128).
#[inline]
pub fn encode_varint(buf: &mut Vec<u8>, v: i64) {
    encode_uvarint(buf, ((v << 1) ^ (v >> 63)) as u64);
}

/// Decodes a uvarint; rejects encodings longer than 10 bytes or overflowing 64 bits.
#[inline]
pub fn decode_uvarint(b: &[u8]) -> Result<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut s: u32 = 0;
    for (i, &byte) in b.iter().enumerate() {
        if i == 10 {
            return Err(Error::VarintOverflow { what: "uvarint" });
        }
        if byte < 0x80 {
            if i == 9 && byte > 1 {
                return Err(Error::VarintOverflow { what: "uvarint" });
            }
            return Ok((x | (u64::from(byte) << s), &b[i + 1..]));
        }
        x |= u64::from(byte & 0x7f) << s;
        s += 7;
    }
    Err(Error::Truncated {
        what: "uvarint",
        need: b.len() + 1,
        have: b.len(),
    })
}

/// Decodes a zigzag varint.
#[inline]
pub fn decode_varint(b: &[u8]) -> Result<(i64, &[u8])> {
    let (ux, rest) = decode_uvarint(b)?;
    let x = (ux >> 1) as i64;
    Ok((if ux & 1 != 0 { !x } else { x }, rest))
}

// ---------------------------------------------------------------- bytes

/// Length of [`encode_bytes`] output for an input of `len` bytes.
#[inline]
pub fn encoded_bytes_len(len: usize) -> usize {
    (len / GROUP + 1) * (GROUP + 1)
}

/// Appends the ascending memcomparable form of `data` (groups of 8 + marker).
pub fn encode_bytes(buf: &mut Vec<u8>, data: &[u8]) {
    buf.reserve(encoded_bytes_len(data.len()));
    let mut chunks = data.chunks_exact(GROUP);
    for c in &mut chunks {
        buf.extend_from_slice(c);
        buf.push(MARKER);
    }
    let rem = chunks.remainder();
    let pad = GROUP - rem.len();
    buf.extend_from_slice(rem);
    buf.extend(std::iter::repeat_n(PAD, pad));
    buf.push(MARKER - pad as u8);
}

/// Appends the descending form: [`encode_bytes`] with every byte inverted.
pub fn encode_bytes_desc(buf: &mut Vec<u8>, data: &[u8]) {
    let start = buf.len();
    encode_bytes(buf, data);
    for b in &mut buf[start..] {
        *b = !*b;
    }
}

fn decode_bytes_impl<'a>(b: &'a [u8], out: &mut Vec<u8>, desc: bool) -> Result<&'a [u8]> {
    let mut rest = b;
    loop {
        let (group, r) = take(rest, GROUP + 1, "memcomparable bytes")?;
        rest = r;
        let mut marker = group[GROUP];
        if desc {
            marker = !marker;
        }
        let pad = usize::from(MARKER - marker);
        if pad > GROUP {
            return Err(Error::BadGroupMarker { marker });
        }
        let real = GROUP - pad;
        let start = out.len();
        out.extend_from_slice(&group[..real]);
        if desc {
            for x in &mut out[start..] {
                *x = !*x;
            }
        }
        if pad != 0 {
            let pad_byte = if desc { !PAD } else { PAD };
            if group[real..GROUP].iter().any(|&x| x != pad_byte) {
                return Err(Error::BadGroupMarker { marker });
            }
            return Ok(rest);
        }
    }
}

/// Decodes ascending memcomparable bytes, appending them to `out`; returns the rest.
pub fn decode_bytes<'a>(b: &'a [u8], out: &mut Vec<u8>) -> Result<&'a [u8]> {
    decode_bytes_impl(b, out, false)
}

/// Decodes descending memcomparable bytes, appending them to `out`; returns the rest.
pub fn decode_bytes_desc<'a>(b: &'a [u8], out: &mut Vec<u8>) -> Result<&'a [u8]> {
    decode_bytes_impl(b, out, true)
}

/// Appends compact bytes: zigzag varint length then the bytes.
#[inline]
pub fn encode_compact_bytes(buf: &mut Vec<u8>, data: &[u8]) {
    encode_varint(buf, data.len() as i64);
    buf.extend_from_slice(data);
}

/// Decodes compact bytes, borrowing the payload.
#[inline]
pub fn decode_compact_bytes(b: &[u8]) -> Result<(&[u8], &[u8])> {
    let (n, rest) = decode_varint(b)?;
    if n < 0 {
        return Err(Error::Corrupted {
            what: "compact bytes",
            detail: "negative length",
        });
    }
    let n = usize::try_from(n).map_err(|_| Error::Truncated {
        what: "compact bytes",
        need: usize::MAX,
        have: rest.len(),
    })?;
    take(rest, n, "compact bytes")
}

// ---------------------------------------------------------------- datums

/// An owned datum, for encoding keys, index values and v1 rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Int(i64),
    Uint(u64),
    Float(f64),
    Bytes(Vec<u8>),
    /// Decimal text with the precision/frac to write (0/0 = the text's own).
    Decimal {
        text: String,
        precision: u8,
        frac: u8,
    },
    /// Duration in nanoseconds.
    Duration(i64),
    /// JSON type code followed by the TiDB binary body.
    Json(Vec<u8>),
    /// Lower bound of non-null values (encodes as a bare `bytesFlag`).
    MinNotNull,
    /// Upper bound (`maxFlag`).
    Max,
}

/// A decoded datum borrowing from its input where the encoding allows.
#[derive(Debug, Clone, PartialEq)]
pub enum DatumRef<'a> {
    Null,
    Int(i64),
    Uint(u64),
    Float(f64),
    /// Compact bytes borrow; memcomparable bytes are copied out.
    Bytes(Cow<'a, [u8]>),
    /// Stored precision, frac and the MySQL binary body.
    Decimal {
        precision: u8,
        frac: u8,
        bin: &'a [u8],
    },
    Duration(i64),
    /// JSON type code followed by the binary body.
    Json(&'a [u8]),
    /// Vector float32 serialized bytes.
    VectorFloat32(&'a [u8]),
    Max,
}

impl DatumRef<'_> {
    /// The kind name, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            DatumRef::Null => "null",
            DatumRef::Int(_) => "int",
            DatumRef::Uint(_) => "uint",
            DatumRef::Float(_) => "float",
            DatumRef::Bytes(_) => "bytes",
            DatumRef::Decimal { .. } => "decimal",
            DatumRef::Duration(_) => "duration",
            DatumRef::Json(_) => "json",
            DatumRef::VectorFloat32(_) => "vector",
            DatumRef::Max => "max",
        }
    }

    /// Copies into an owned [`Datum`].
    pub fn to_owned_datum(&self) -> Result<Datum> {
        Ok(match self {
            DatumRef::Null => Datum::Null,
            DatumRef::Int(v) => Datum::Int(*v),
            DatumRef::Uint(v) => Datum::Uint(*v),
            DatumRef::Float(v) => Datum::Float(*v),
            DatumRef::Bytes(b) => Datum::Bytes(b.to_vec()),
            DatumRef::Decimal {
                precision,
                frac,
                bin,
            } => Datum::Decimal {
                text: decimal::decode_bin(bin, *precision, *frac)?.0,
                precision: *precision,
                frac: *frac,
            },
            DatumRef::Duration(v) => Datum::Duration(*v),
            DatumRef::Json(j) => Datum::Json(j.to_vec()),
            DatumRef::VectorFloat32(v) => Datum::Bytes(v.to_vec()),
            DatumRef::Max => Datum::Max,
        })
    }
}

fn encode_datum(buf: &mut Vec<u8>, d: &Datum, comparable: bool) -> Result<()> {
    match d {
        Datum::Null => buf.push(flag::NIL),
        Datum::Int(v) => {
            if comparable {
                buf.push(flag::INT);
                encode_int(buf, *v);
            } else {
                buf.push(flag::VARINT);
                encode_varint(buf, *v);
            }
        }
        Datum::Uint(v) => {
            if comparable {
                buf.push(flag::UINT);
                encode_uint(buf, *v);
            } else {
                buf.push(flag::UVARINT);
                encode_uvarint(buf, *v);
            }
        }
        Datum::Float(f) => {
            buf.push(flag::FLOAT);
            encode_float(buf, *f);
        }
        Datum::Bytes(b) => {
            if comparable {
                buf.push(flag::BYTES);
                encode_bytes(buf, b);
            } else {
                buf.push(flag::COMPACT_BYTES);
                encode_compact_bytes(buf, b);
            }
        }
        Datum::Decimal {
            text,
            precision,
            frac,
        } => {
            buf.push(flag::DECIMAL);
            decimal::encode_datum_payload(buf, text, *precision, *frac)?;
        }
        Datum::Duration(ns) => {
            buf.push(flag::DURATION);
            encode_int(buf, *ns);
        }
        Datum::Json(j) => {
            buf.push(flag::JSON);
            buf.extend_from_slice(j);
        }
        Datum::MinNotNull => buf.push(flag::BYTES),
        Datum::Max => buf.push(flag::MAX),
    }
    Ok(())
}

/// Appends the key (memcomparable) form of datums, as `codec.EncodeKey`.
pub fn encode_key_datums(buf: &mut Vec<u8>, datums: &[Datum]) -> Result<()> {
    for d in datums {
        encode_datum(buf, d, true)?;
    }
    Ok(())
}

/// Appends the value form of datums, as `codec.EncodeValue`.
pub fn encode_value_datums(buf: &mut Vec<u8>, datums: &[Datum]) -> Result<()> {
    for d in datums {
        encode_datum(buf, d, false)?;
    }
    Ok(())
}

/// Decodes one datum of either form (as `codec.DecodeOne`); returns it and the rest.
pub fn decode_datum(b: &[u8]) -> Result<(DatumRef<'_>, &[u8])> {
    let (&f, rest) = b.split_first().ok_or(Error::Truncated {
        what: "datum flag",
        need: 1,
        have: 0,
    })?;
    Ok(match f {
        flag::NIL => (DatumRef::Null, rest),
        flag::INT => {
            let (v, r) = decode_int(rest)?;
            (DatumRef::Int(v), r)
        }
        flag::UINT => {
            let (v, r) = decode_uint(rest)?;
            (DatumRef::Uint(v), r)
        }
        flag::VARINT => {
            let (v, r) = decode_varint(rest)?;
            (DatumRef::Int(v), r)
        }
        flag::UVARINT => {
            let (v, r) = decode_uvarint(rest)?;
            (DatumRef::Uint(v), r)
        }
        flag::FLOAT => {
            let (v, r) = decode_float(rest)?;
            (DatumRef::Float(v), r)
        }
        flag::BYTES => {
            let mut out = Vec::new();
            let r = decode_bytes(rest, &mut out)?;
            (DatumRef::Bytes(Cow::Owned(out)), r)
        }
        flag::COMPACT_BYTES => {
            let (v, r) = decode_compact_bytes(rest)?;
            (DatumRef::Bytes(Cow::Borrowed(v)), r)
        }
        flag::DECIMAL => {
            let ([precision, frac], r) = take_array::<2>(rest, "decimal datum header")?;
            let n = decimal::bin_size(precision, frac)?;
            let (bin, r) = take(r, n, "decimal datum")?;
            (
                DatumRef::Decimal {
                    precision,
                    frac,
                    bin,
                },
                r,
            )
        }
        flag::DURATION => {
            let (v, r) = decode_int(rest)?;
            (DatumRef::Duration(v), r)
        }
        flag::JSON => {
            let (&tc, body) = rest.split_first().ok_or(Error::Truncated {
                what: "json datum",
                need: 1,
                have: 0,
            })?;
            let n = json::binary_len(tc, body)?;
            let (j, r) = take(rest, n + 1, "json datum")?;
            (DatumRef::Json(j), r)
        }
        flag::VECTOR_FLOAT32 => {
            let (cnt, _) = take_array::<4>(rest, "vector datum")?;
            let n = (u32::from_le_bytes(cnt) as usize)
                .checked_mul(4)
                .and_then(|x| x.checked_add(4))
                .ok_or(Error::Corrupted {
                    what: "vector datum",
                    detail: "length overflow",
                })?;
            let (v, r) = take(rest, n, "vector datum")?;
            (DatumRef::VectorFloat32(v), r)
        }
        flag::MAX => (DatumRef::Max, rest),
        other => {
            return Err(Error::UnknownFlag {
                what: "datum",
                flag: other,
            })
        }
    })
}

/// Decodes datums until the input is exhausted.
pub fn decode_datums(mut b: &[u8]) -> Result<Vec<DatumRef<'_>>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (d, rest) = decode_datum(b)?;
        out.push(d);
        b = rest;
    }
    Ok(out)
}

/// Splits off one encoded datum without interpreting it: returns (datum bytes, rest).
pub fn split_datum(b: &[u8]) -> Result<(&[u8], &[u8])> {
    let (_, rest) = decode_datum(b)?;
    Ok(b.split_at(b.len() - rest.len()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // tidb pkg/util/codec/bytes_test.go TestBytesCodec
    #[test]
    fn golden_bytes_codec() {
        let cases: &[(&[u8], &[u8], bool)] = &[
            (&[], &[0, 0, 0, 0, 0, 0, 0, 0, 247], false),
            (&[], &[255, 255, 255, 255, 255, 255, 255, 255, 8], true),
            (&[0], &[0, 0, 0, 0, 0, 0, 0, 0, 248], false),
            (&[0], &[255, 255, 255, 255, 255, 255, 255, 255, 7], true),
            (&[1, 2, 3], &[1, 2, 3, 0, 0, 0, 0, 0, 250], false),
            (
                &[1, 2, 3],
                &[254, 253, 252, 255, 255, 255, 255, 255, 5],
                true,
            ),
            (&[1, 2, 3, 0], &[1, 2, 3, 0, 0, 0, 0, 0, 251], false),
            (
                &[1, 2, 3, 4, 5, 6, 7],
                &[1, 2, 3, 4, 5, 6, 7, 0, 254],
                false,
            ),
            (
                &[1, 2, 3, 4, 5, 6, 7],
                &[254, 253, 252, 251, 250, 249, 248, 255, 1],
                true,
            ),
            (
                &[0, 0, 0, 0, 0, 0, 0, 0],
                &[0, 0, 0, 0, 0, 0, 0, 0, 255, 0, 0, 0, 0, 0, 0, 0, 0, 247],
                false,
            ),
            (
                &[1, 2, 3, 4, 5, 6, 7, 8],
                &[
                    254, 253, 252, 251, 250, 249, 248, 247, 0, 255, 255, 255, 255, 255, 255, 255,
                    255, 8,
                ],
                true,
            ),
            (
                &[1, 2, 3, 4, 5, 6, 7, 8, 9],
                &[1, 2, 3, 4, 5, 6, 7, 8, 255, 9, 0, 0, 0, 0, 0, 0, 0, 248],
                false,
            ),
            (
                &[1, 2, 3, 4, 5, 6, 7, 8, 9],
                &[
                    254, 253, 252, 251, 250, 249, 248, 247, 0, 246, 255, 255, 255, 255, 255, 255,
                    255, 7,
                ],
                true,
            ),
        ];
        for (raw, enc, desc) in cases {
            assert_eq!(enc.len(), encoded_bytes_len(raw.len()));
            let mut buf = Vec::new();
            let mut out = Vec::new();
            if *desc {
                encode_bytes_desc(&mut buf, raw);
                assert_eq!(&buf[..], *enc);
                assert!(decode_bytes_desc(&buf, &mut out).unwrap().is_empty());
            } else {
                encode_bytes(&mut buf, raw);
                assert_eq!(&buf[..], *enc);
                assert!(decode_bytes(&buf, &mut out).unwrap().is_empty());
            }
            assert_eq!(&out[..], *raw);
        }
        // Same test, "Test error decode".
        let bad: &[&[u8]] = &[
            &[1, 2, 3, 4],
            &[0, 0, 0, 0, 0, 0, 0, 247],
            &[0, 0, 0, 0, 0, 0, 0, 0, 246],
            &[0, 0, 0, 0, 0, 0, 0, 1, 247],
            &[1, 2, 3, 4, 5, 6, 7, 8, 0],
            &[1, 2, 3, 4, 5, 6, 7, 8, 255, 1],
            &[1, 2, 3, 4, 5, 6, 7, 8, 255, 1, 2, 3, 4, 5, 6, 7, 8],
            &[1, 2, 3, 4, 5, 6, 7, 8, 255, 1, 2, 3, 4, 5, 6, 7, 8, 255],
            &[1, 2, 3, 4, 5, 6, 7, 8, 255, 1, 2, 3, 4, 5, 6, 7, 8, 0],
        ];
        for b in bad {
            assert!(decode_bytes(b, &mut Vec::new()).is_err(), "{b:?}");
        }
    }

    // tidb pkg/util/codec/codec_test.go TestCodecKey/TestNumberCodec semantics:
    // EncodeInt flips the sign bit, big-endian.
    #[test]
    fn golden_int_uint() {
        let mut b = Vec::new();
        encode_int(&mut b, 1);
        assert_eq!(b, [0x80, 0, 0, 0, 0, 0, 0, 1]);
        b.clear();
        encode_int(&mut b, -1);
        assert_eq!(b, [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        b.clear();
        encode_int(&mut b, i64::MIN);
        assert_eq!(b, [0; 8]);
        b.clear();
        encode_uint_desc(&mut b, 0);
        assert_eq!(b, [0xff; 8]);
        // compact bytes of length 5 start with the zigzag varint byte 0x0A (TiDB's codec)
        b.clear();
        encode_compact_bytes(&mut b, b"hello");
        assert_eq!(b[0], 0x0a);
        // Go binary.PutVarint(-1) = 0x01, PutVarint(1) = 0x02, PutUvarint(300) = ac 02
        b.clear();
        encode_varint(&mut b, -1);
        encode_varint(&mut b, 1);
        encode_uvarint(&mut b, 300);
        assert_eq!(b, [0x01, 0x02, 0xac, 0x02]);
    }

    #[test]
    fn varint_errors() {
        assert!(decode_uvarint(&[0x80]).is_err());
        assert!(decode_uvarint(&[0xff; 11]).is_err());
        assert!(
            decode_uvarint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).is_err()
        );
        assert_eq!(
            decode_uvarint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
                .unwrap()
                .0,
            u64::MAX
        );
        assert!(decode_compact_bytes(&[0x0a, 1, 2]).is_err());
        assert!(decode_compact_bytes(&[0x01]).is_err()); // -1 length
        assert!(decode_datum(&[0x77]).is_err());
        assert!(decode_datum(&[]).is_err());
    }

    proptest! {
        #[test]
        fn int_order(a: i64, b: i64) {
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            encode_int(&mut ea, a);
            encode_int(&mut eb, b);
            prop_assert_eq!(a.cmp(&b), ea.cmp(&eb));
            prop_assert_eq!(decode_int(&ea).unwrap().0, a);
            let (mut da, mut db) = (Vec::new(), Vec::new());
            encode_int_desc(&mut da, a);
            encode_int_desc(&mut db, b);
            prop_assert_eq!(b.cmp(&a), da.cmp(&db));
            prop_assert_eq!(decode_int_desc(&da).unwrap().0, a);
        }

        #[test]
        fn uint_order(a: u64, b: u64) {
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            encode_uint(&mut ea, a);
            encode_uint(&mut eb, b);
            prop_assert_eq!(a.cmp(&b), ea.cmp(&eb));
            prop_assert_eq!(decode_uint(&ea).unwrap().0, a);
            let mut d = Vec::new();
            encode_uint_desc(&mut d, a);
            prop_assert_eq!(decode_uint_desc(&d).unwrap().0, a);
        }

        #[test]
        fn float_order(a in proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::SUBNORMAL | proptest::num::f64::INFINITE,
                       b in proptest::num::f64::NORMAL | proptest::num::f64::INFINITE) {
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            encode_float(&mut ea, a);
            encode_float(&mut eb, b);
            if a < b { prop_assert!(ea < eb); }
            if a > b { prop_assert!(ea > eb); }
            prop_assert_eq!(decode_float(&ea).unwrap().0.to_bits(), a.to_bits());
        }

        #[test]
        fn bytes_order(a: Vec<u8>, b: Vec<u8>) {
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            encode_bytes(&mut ea, &a);
            encode_bytes(&mut eb, &b);
            prop_assert_eq!(a.cmp(&b), ea.cmp(&eb));
            let mut out = Vec::new();
            prop_assert!(decode_bytes(&ea, &mut out).unwrap().is_empty());
            prop_assert_eq!(&out, &a);
            let (mut da, mut db) = (Vec::new(), Vec::new());
            encode_bytes_desc(&mut da, &a);
            encode_bytes_desc(&mut db, &b);
            prop_assert_eq!(b.cmp(&a), da.cmp(&db));
            out.clear();
            prop_assert!(decode_bytes_desc(&da, &mut out).unwrap().is_empty());
            prop_assert_eq!(&out, &a);
        }

        #[test]
        fn varint_compact_roundtrip(i: i64, u: u64, data: Vec<u8>) {
            let mut b = Vec::new();
            encode_varint(&mut b, i);
            encode_uvarint(&mut b, u);
            encode_compact_bytes(&mut b, &data);
            let (x, r) = decode_varint(&b).unwrap();
            let (y, r) = decode_uvarint(r).unwrap();
            let (z, r) = decode_compact_bytes(r).unwrap();
            prop_assert_eq!((x, y, z, r.len()), (i, u, &data[..], 0));
        }

        #[test]
        fn datum_roundtrip(i: i64, u: u64, f in proptest::num::f64::NORMAL, data: Vec<u8>, d: i64) {
            let ds = vec![Datum::Null, Datum::Int(i), Datum::Uint(u), Datum::Float(f),
                Datum::Bytes(data.clone()), Datum::Duration(d), Datum::Max];
            for comparable in [true, false] {
                let mut b = Vec::new();
                if comparable { encode_key_datums(&mut b, &ds).unwrap(); } else { encode_value_datums(&mut b, &ds).unwrap(); }
                let back: Vec<Datum> = decode_datums(&b).unwrap().iter().map(|d| d.to_owned_datum().unwrap()).collect();
                prop_assert_eq!(&back, &ds);
            }
        }

        #[test]
        fn random_bytes_never_panic(b: Vec<u8>) {
            let _ = decode_datums(&b);
            let _ = decode_bytes(&b, &mut Vec::new());
            let _ = decode_bytes_desc(&b, &mut Vec::new());
            let _ = decode_compact_bytes(&b);
            let _ = decode_varint(&b);
            let _ = split_datum(&b);
        }
    }
}

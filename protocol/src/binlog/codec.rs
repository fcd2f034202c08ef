//! Small byte helpers shared by the encoders and decoders: MySQL length-encoded integers,
//! fixed-width little/big-endian integers, and a bounds-checked reader that never panics.

use super::error::{BinlogError, Result};

/// Appends a MySQL length-encoded integer: 1 byte if < 251, else `FC`+2, `FD`+3 or `FE`+8 (LE).
#[inline]
pub(crate) fn put_lenenc(buf: &mut Vec<u8>, v: u64) {
    if v < 251 {
        buf.push(v as u8);
    } else if v < 1 << 16 {
        buf.push(0xfc);
        buf.extend_from_slice(&(v as u16).to_le_bytes());
    } else if v < 1 << 24 {
        buf.push(0xfd);
        buf.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
    } else {
        buf.push(0xfe);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

/// Number of bytes [`put_lenenc`] writes for `v`.
#[inline]
pub(crate) fn lenenc_len(v: u64) -> usize {
    if v < 251 {
        1
    } else if v < 1 << 16 {
        3
    } else if v < 1 << 24 {
        4
    } else {
        9
    }
}

/// A bounds-checked cursor over input bytes. Every read returns [`BinlogError::Malformed`]
/// naming `what` instead of panicking when the input is short.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; `what` names the structure in errors.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The unconsumed bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// An error at the current position.
    pub fn malformed(&self) -> BinlogError {
        BinlogError::Malformed {
            what: self.what,
            offset: self.pos,
        }
    }

    /// Consumes `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.malformed());
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Consumes the rest of the input.
    pub fn take_rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// Consumes one byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    /// Consumes an `n`-byte little-endian unsigned integer (n <= 8).
    pub fn uint_le(&mut self, n: usize) -> Result<u64> {
        let b = self.bytes(n)?;
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Consumes an `n`-byte big-endian unsigned integer (n <= 8).
    pub fn uint_be(&mut self, n: usize) -> Result<u64> {
        let b = self.bytes(n)?;
        let mut a = [0u8; 8];
        a[8 - n..].copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// Consumes a 2-byte LE integer.
    pub fn u16_le(&mut self) -> Result<u16> {
        Ok(self.uint_le(2)? as u16)
    }

    /// Consumes a 4-byte LE integer.
    pub fn u32_le(&mut self) -> Result<u32> {
        Ok(self.uint_le(4)? as u32)
    }

    /// Consumes an 8-byte LE integer.
    pub fn u64_le(&mut self) -> Result<u64> {
        self.uint_le(8)
    }

    /// Consumes a MySQL length-encoded integer (`FB`, the NULL marker, is rejected).
    pub fn lenenc(&mut self) -> Result<u64> {
        match self.u8()? {
            x @ 0..=250 => Ok(u64::from(x)),
            0xfc => self.uint_le(2),
            0xfd => self.uint_le(3),
            0xfe => self.uint_le(8),
            _ => Err(BinlogError::Malformed {
                what: self.what,
                offset: self.pos - 1,
            }),
        }
    }

    /// Consumes a length-encoded integer and then that many bytes.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.lenenc()?;
        let n = usize::try_from(n).map_err(|_| self.malformed())?;
        self.bytes(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trip_at_every_width_boundary() {
        for v in [
            0u64,
            250,
            251,
            65535,
            65536,
            (1 << 24) - 1,
            1 << 24,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_lenenc(&mut b, v);
            assert_eq!(b.len(), lenenc_len(v));
            assert_eq!(Reader::new(&b, "t").lenenc().unwrap(), v);
        }
    }

    #[test]
    fn reader_reports_short_input_instead_of_panicking() {
        let mut r = Reader::new(&[0xfd, 1], "t");
        assert_eq!(
            r.lenenc(),
            Err(BinlogError::Malformed {
                what: "t",
                offset: 1
            })
        );
        assert!(Reader::new(&[0xfb], "t").lenenc().is_err());
        assert!(Reader::new(&[], "t").u8().is_err());
    }
}

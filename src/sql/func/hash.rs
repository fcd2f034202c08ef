//! Checksums and digests over the bytes of a value's text: CRC32, MD5, SHA1, SHA2 (the
//! functions chunk-checksum queries are built from), and UNHEX.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};
use tibinlog_protocol::value::Value;

use super::{unreachable_func, Func};
use crate::sql::error::Result;
use crate::sql::expr::Expr;
use crate::sql::value as v;

pub(super) fn eval(f: Func, args: &[Expr], row: &[Value]) -> Result<Value> {
    let val = args[0].eval(row)?;
    if matches!(val, Value::Null) {
        return Ok(Value::Null);
    }
    let bytes = v::to_bytes(&val, &args[0].ty);
    Ok(match f {
        Func::Crc32 => Value::UInt(u64::from(crc32fast::hash(&bytes))),
        Func::Md5 => hex_text(&Md5::digest(&bytes)),
        Func::Sha1 => hex_text(&Sha1::digest(&bytes)),
        Func::Sha2 => {
            let bits = args[1].eval(row)?;
            if matches!(bits, Value::Null) {
                return Ok(Value::Null);
            }
            // 0 means 256; any other length is NULL (MySQL warns).
            match v::to_int(&bits, &args[1].ty) {
                Some(0 | 256) => hex_text(&Sha256::digest(&bytes)),
                Some(224) => hex_text(&Sha224::digest(&bytes)),
                Some(384) => hex_text(&Sha384::digest(&bytes)),
                Some(512) => hex_text(&Sha512::digest(&bytes)),
                _ => Value::Null,
            }
        }
        Func::Unhex => unhex(&bytes).map_or(Value::Null, Value::Bytes),
        _ => unreachable_func(f)?,
    })
}

/// A digest as lower-case hexadecimal text, as MySQL returns it.
fn hex_text(digest: &[u8]) -> Value {
    Value::Bytes(hex::encode(digest).into_bytes())
}

/// The bytes of hexadecimal text; an odd count of digits reads as if a `0` led. `None` for a
/// character that is not a hexadecimal digit (MySQL: NULL).
fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(text.len().div_ceil(2));
    let (head, rest) = if text.len() % 2 == 1 {
        (Some(text[0]), &text[1..])
    } else {
        (None, text)
    };
    if let Some(h) = head {
        out.push(digit(h)?);
    }
    for pair in rest.chunks_exact(2) {
        out.push((digit(pair[0])? << 4) | digit(pair[1])?);
    }
    Some(out)
}

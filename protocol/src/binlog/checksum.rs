//! Event checksums: the binlog CRC32 (ISO-HDLC / zlib: reflected polynomial `0xEDB88320`,
//! init and final XOR `0xFFFFFFFF`), computed over header + body and appended little-endian.
//! `event_size` and `log_pos` already count the 4 CRC bytes when it is present.

use super::error::{BinlogError, Result};
use super::header::{flags, EventType, HEADER_LEN};

/// Length of the CRC32 trailer.
pub const CHECKSUM_LEN: usize = 4;

/// `binlog_checksum`: the algorithm byte at the end of a FORMAT_DESCRIPTION body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum ChecksumAlg {
    /// `NONE`: events carry no CRC (the FORMAT_DESCRIPTION still does).
    Off = 0,
    /// `CRC32`: every event ends with a CRC32 (MySQL's default).
    #[default]
    Crc32 = 1,
}

impl ChecksumAlg {
    /// The algorithm for a FORMAT_DESCRIPTION byte; `None` for values MySQL does not define.
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Off),
            1 => Some(Self::Crc32),
            _ => None,
        }
    }

    /// Name as `@@binlog_checksum` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "NONE",
            Self::Crc32 => "CRC32",
        }
    }
}

/// CRC32 of `data` as MySQL computes it for events.
#[inline]
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// Appends the CRC32 of `buf[start..]` to `buf`.
#[inline]
pub fn append_crc32(buf: &mut Vec<u8>, start: usize) {
    let c = crc32(&buf[start..]);
    buf.extend_from_slice(&c.to_le_bytes());
}

/// Checks the CRC32 at the end of a whole event (header included). For FORMAT_DESCRIPTION the
/// CRC covers the header with BINLOG_IN_USE cleared, as MySQL writes it.
pub fn verify_event(event: &[u8]) -> Result<()> {
    let Some(split) = event.len().checked_sub(CHECKSUM_LEN) else {
        return Err(BinlogError::Malformed {
            what: "event checksum",
            offset: 0,
        });
    };
    let (data, tail) = event.split_at(split);
    let mut b = [0u8; 4];
    b.copy_from_slice(tail);
    let stored = u32::from_le_bytes(b);
    let computed = if data.len() >= HEADER_LEN && data[4] == EventType::FORMAT_DESCRIPTION.0 {
        let mut h = crc32fast::Hasher::new();
        h.update(&data[..17]);
        h.update(&[data[17] & !(flags::BINLOG_IN_USE as u8), data[18]]);
        h.update(&data[HEADER_LEN..]);
        h.finalize()
    } else {
        crc32(data)
    };
    if stored != computed {
        return Err(BinlogError::ChecksumMismatch { stored, computed });
    }
    Ok(())
}

/// Removes the CRC32 of a whole event in place (for a client that never announced a checksum):
/// the event without its last four bytes, `event_size` in the header set to that. An event too
/// short to hold a header and a CRC is returned as it is.
pub fn strip_crc(ev: &mut [u8]) -> &mut [u8] {
    if ev.len() < HEADER_LEN + CHECKSUM_LEN {
        return ev;
    }
    let len = ev.len() - CHECKSUM_LEN;
    let ev = &mut ev[..len];
    ev[9..13].copy_from_slice(&(len as u32).to_le_bytes());
    ev
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_crc_drops_the_crc_and_patches_the_size() {
        let mut ev = vec![7u8; HEADER_LEN + 10];
        ev[9..13].copy_from_slice(&((HEADER_LEN + 10) as u32).to_le_bytes());
        append_crc32(&mut ev, 0);
        let before = ev.clone();
        let stripped = strip_crc(&mut ev).to_vec();
        assert_eq!(stripped.len(), HEADER_LEN + 10);
        assert_eq!(
            u32::from_le_bytes([stripped[9], stripped[10], stripped[11], stripped[12]]) as usize,
            stripped.len()
        );
        assert_eq!(&stripped[13..], &before[13..HEADER_LEN + 10]);
        let mut short = [1u8; HEADER_LEN + 3];
        assert_eq!(strip_crc(&mut short).len(), HEADER_LEN + 3);
    }

    #[test]
    fn crc32_check_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn verify_detects_corruption() {
        let mut ev = b"some event bytes".to_vec();
        append_crc32(&mut ev, 0);
        assert_eq!(verify_event(&ev), Ok(()));
        ev[3] ^= 1;
        assert!(matches!(
            verify_event(&ev),
            Err(BinlogError::ChecksumMismatch { .. })
        ));
        assert!(verify_event(&[1, 2]).is_err());
    }
}

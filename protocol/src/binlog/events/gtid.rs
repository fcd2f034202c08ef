//! GTID_LOG_EVENT (33) and ANONYMOUS_GTID_LOG_EVENT (34), MySQL 8.0 layout
//! (`Gtid_event::write_data_header` / `write_data_body`).
//!
//! ```text
//! post-header (42):
//! +-------+--------+--------+--------+----------------+-----------------+
//! | flags | sid 16 | gno 8  | lt 1=2 | last_committed | sequence_number |
//! | 1     |        |        |        | 8              | 8               |
//! +-------+--------+--------+--------+----------------+-----------------+
//! body:
//! +------------------------+------------------------+-------------+------------------+----------------+
//! | immediate_commit_ts 7  | original_commit_ts 7   | trx length  | immediate_server | original_server|
//! | bit 55 = original      | (only if bit 55)       | lenenc      | _version 4       | _version 4     |
//! | follows                |                        |             | bit 31 = original| (only if b.31) |
//! +------------------------+------------------------+-------------+------------------+----------------+
//! ```
//! Timestamps are microseconds since the epoch. The transaction length counts every byte of the
//! transaction including this event (and its CRC), which makes it depend on its own lenenc width:
//! [`GtidEvent::set_transaction_length`] solves that.

use crate::binlog::codec::{lenenc_len, put_lenenc, Reader};
use crate::binlog::error::Result;
use crate::binlog::gtid::Sid;
use crate::binlog::header::{EventType, HEADER_LEN};
use crate::binlog::writer::EventBody;

/// `flags` bit: the transaction may contain statement-based events (MySQL sets it for DDL).
pub const FLAG_MAY_HAVE_SBR: u8 = 0x01;
const LOGICAL_TIMESTAMP_TYPECODE: u8 = 2;
const ORIGINAL_COMMIT_TS_FLAG: u64 = 1 << 55;
const ORIGINAL_SERVER_VERSION_FLAG: u32 = 1 << 31;

/// A GTID or ANONYMOUS_GTID event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GtidEvent {
    /// ANONYMOUS_GTID (34, `GTID_MODE=OFF`): `sid` zero and `gno` 0.
    pub anonymous: bool,
    /// [`FLAG_MAY_HAVE_SBR`] or 0.
    pub flags: u8,
    pub sid: Sid,
    pub gno: u64,
    /// Sequence number of the last transaction this one does not conflict with (`< sequence_number`).
    pub last_committed: i64,
    /// 1, 2, ... within each binlog file.
    pub sequence_number: i64,
    pub immediate_commit_timestamp: u64,
    /// Equal to the immediate one unless the transaction was replicated from elsewhere.
    pub original_commit_timestamp: u64,
    pub transaction_length: u64,
    /// e.g. 80036
    pub immediate_server_version: u32,
    pub original_server_version: u32,
}

impl GtidEvent {
    /// A GTID event for `sid:gno` with serial logical clocks (`last_committed = seq - 1`).
    pub fn new(
        sid: Sid,
        gno: u64,
        sequence_number: i64,
        commit_ts_micros: u64,
        server_version: u32,
    ) -> Self {
        Self {
            anonymous: false,
            flags: 0,
            sid,
            gno,
            last_committed: sequence_number - 1,
            sequence_number,
            immediate_commit_timestamp: commit_ts_micros,
            original_commit_timestamp: commit_ts_micros,
            transaction_length: 0,
            immediate_server_version: server_version,
            original_server_version: server_version,
        }
    }

    /// An ANONYMOUS_GTID event with serial logical clocks.
    pub fn anonymous(sequence_number: i64, commit_ts_micros: u64, server_version: u32) -> Self {
        Self {
            anonymous: true,
            ..Self::new(
                Sid::ZERO,
                0,
                sequence_number,
                commit_ts_micros,
                server_version,
            )
        }
    }

    fn body_len_without_length(&self) -> usize {
        let mut n = 42 + 7 + 4;
        if self.original_commit_timestamp != self.immediate_commit_timestamp {
            n += 7;
        }
        if self.original_server_version != self.immediate_server_version {
            n += 4;
        }
        n
    }

    /// Whole event length for the current `transaction_length`.
    pub fn event_len(&self, checksum: bool) -> usize {
        HEADER_LEN
            + self.body_len_without_length()
            + lenenc_len(self.transaction_length)
            + if checksum { 4 } else { 0 }
    }

    /// Sets `transaction_length` = `rest` (bytes of the transaction's other events) + this event.
    pub fn set_transaction_length(&mut self, rest: u64, checksum: bool) {
        let fixed =
            (HEADER_LEN + self.body_len_without_length() + if checksum { 4 } else { 0 }) as u64;
        let mut total = rest + fixed + 1;
        loop {
            let next = rest + fixed + lenenc_len(total) as u64;
            if next == total {
                break;
            }
            total = next;
        }
        self.transaction_length = total;
    }
}

impl GtidEvent {
    /// Reads a GTID or ANONYMOUS_GTID body (after the header, without the CRC), `anonymous`
    /// from the header's type. Fields a MySQL 5.7 writer leaves out (everything after
    /// `sequence_number`) read as 0; an original commit timestamp or server version that is
    /// not there equals the immediate one.
    pub fn parse(body: &[u8], anonymous: bool) -> Result<Self> {
        let mut r = Reader::new(body, "GTID event");
        let flags = r.u8()?;
        let mut sid = [0u8; 16];
        sid.copy_from_slice(r.bytes(16)?);
        let gno = r.u64_le()?;
        let mut ev = Self {
            anonymous,
            flags,
            sid: Sid(sid),
            gno,
            last_committed: 0,
            sequence_number: 0,
            immediate_commit_timestamp: 0,
            original_commit_timestamp: 0,
            transaction_length: 0,
            immediate_server_version: 0,
            original_server_version: 0,
        };
        if r.remaining() == 0 {
            return Ok(ev);
        }
        if r.u8()? == LOGICAL_TIMESTAMP_TYPECODE {
            ev.last_committed = r.u64_le()? as i64;
            ev.sequence_number = r.u64_le()? as i64;
        }
        if r.remaining() == 0 {
            return Ok(ev);
        }
        let imm = r.uint_le(7)?;
        ev.immediate_commit_timestamp = imm & (ORIGINAL_COMMIT_TS_FLAG - 1);
        ev.original_commit_timestamp = if imm & ORIGINAL_COMMIT_TS_FLAG != 0 {
            r.uint_le(7)?
        } else {
            ev.immediate_commit_timestamp
        };
        ev.transaction_length = r.lenenc()?;
        if r.remaining() == 0 {
            return Ok(ev);
        }
        let v = r.u32_le()?;
        ev.immediate_server_version = v & !ORIGINAL_SERVER_VERSION_FLAG;
        ev.original_server_version = if v & ORIGINAL_SERVER_VERSION_FLAG != 0 {
            r.u32_le()?
        } else {
            ev.immediate_server_version
        };
        Ok(ev)
    }
}

impl EventBody for GtidEvent {
    fn event_type(&self) -> EventType {
        if self.anonymous {
            EventType::ANONYMOUS_GTID
        } else {
            EventType::GTID
        }
    }

    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.push(self.flags);
        buf.extend_from_slice(&self.sid.0);
        buf.extend_from_slice(&self.gno.to_le_bytes());
        buf.push(LOGICAL_TIMESTAMP_TYPECODE);
        buf.extend_from_slice(&self.last_committed.to_le_bytes());
        buf.extend_from_slice(&self.sequence_number.to_le_bytes());
        let imm = self.immediate_commit_timestamp & (ORIGINAL_COMMIT_TS_FLAG - 1);
        if self.original_commit_timestamp != self.immediate_commit_timestamp {
            buf.extend_from_slice(&(imm | ORIGINAL_COMMIT_TS_FLAG).to_le_bytes()[..7]);
            buf.extend_from_slice(&self.original_commit_timestamp.to_le_bytes()[..7]);
        } else {
            buf.extend_from_slice(&imm.to_le_bytes()[..7]);
        }
        put_lenenc(buf, self.transaction_length);
        let imm_v = self.immediate_server_version & !ORIGINAL_SERVER_VERSION_FLAG;
        if self.original_server_version != self.immediate_server_version {
            buf.extend_from_slice(&(imm_v | ORIGINAL_SERVER_VERSION_FLAG).to_le_bytes());
            buf.extend_from_slice(&self.original_server_version.to_le_bytes());
        } else {
            buf.extend_from_slice(&imm_v.to_le_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(ev: &GtidEvent) -> Vec<u8> {
        let mut buf = Vec::new();
        ev.encode_into(&mut buf).map(|()| buf).unwrap_or_default()
    }

    #[test]
    fn parse_reads_back_every_optional_part() {
        let mut plain = GtidEvent::new(Sid([7; 16]), 42, 9, 1_700_000_000_123_456, 80036);
        plain.set_transaction_length(300, true);
        let replicated = GtidEvent {
            flags: FLAG_MAY_HAVE_SBR,
            last_committed: 3,
            original_commit_timestamp: 1_600_000_000_000_001,
            original_server_version: 50744,
            transaction_length: 1 << 40,
            ..plain
        };
        let anonymous = GtidEvent::anonymous(2, 5, 80036);
        for ev in [plain, replicated, anonymous] {
            assert_eq!(GtidEvent::parse(&body(&ev), ev.anonymous).ok(), Some(ev));
        }
    }

    #[test]
    fn a_short_body_is_an_error_and_a_5_6_body_reads_as_far_as_it_goes() {
        let full = body(&GtidEvent::new(Sid([1; 16]), 7, 1, 10, 80036));
        assert!(GtidEvent::parse(&full[..20], false).is_err());
        assert!(GtidEvent::parse(&full[..30], false).is_err());
        let old = GtidEvent::parse(&full[..25], false).ok();
        assert_eq!(old.map(|e| (e.gno, e.sequence_number)), Some((7, 0)));
    }
}

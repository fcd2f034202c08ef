//! Event bodies. Each type implements [`EventBody`]; the small ones
//! live here, the others in their own modules.

pub mod format_desc;
pub mod gtid;
pub mod mariadb;
pub mod query;
pub mod relay;
pub mod rows;
pub mod table_map;

use super::codec::{put_lenenc, Reader};
use super::error::Result;
use super::gtid::GtidSet;
use super::header::{flags, EventType};
use super::writer::EventBody;

/// ROTATE_EVENT (4): names the next file.
/// ```text
/// +--------------------+--------------------------------+
/// | position 8 (LE)    | next file name (no NUL)        |
/// +--------------------+--------------------------------+
/// ```
/// The real one ends a file (position 4); the fake one a dump starts with is written with
/// `log_pos` 0, timestamp 0 and [`flags::ARTIFICIAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotate<'a> {
    pub position: u64,
    pub next_file: &'a str,
}

impl EventBody for Rotate<'_> {
    fn event_type(&self) -> EventType {
        EventType::ROTATE
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(&self.position.to_le_bytes());
        buf.extend_from_slice(self.next_file.as_bytes());
        Ok(())
    }
}

impl<'a> Rotate<'a> {
    /// Parses a ROTATE body (after the header, without the CRC).
    pub fn parse(body: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(body, "rotate event");
        let position = r.u64_le()?;
        let next_file = std::str::from_utf8(r.take_rest()).map_err(|_| r.malformed())?;
        Ok(Self {
            position,
            next_file,
        })
    }
}

/// XID_EVENT (16): commits a transaction. Body: the transaction id, 8 bytes LE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xid(pub u64);

impl EventBody for Xid {
    fn event_type(&self) -> EventType {
        EventType::XID
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(&self.0.to_le_bytes());
        Ok(())
    }
}

/// STOP_EVENT (3): written when a master shuts down; empty body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stop;

impl EventBody for Stop {
    fn event_type(&self) -> EventType {
        EventType::STOP
    }
    fn encode_into(&self, _buf: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
}

/// PREVIOUS_GTIDS_LOG_EVENT (35): the GTIDs of all earlier files, as a SID block
/// ([`GtidSet::encode_into`]). MySQL writes it with [`flags::IGNORABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreviousGtids<'a>(pub &'a GtidSet);

impl EventBody for PreviousGtids<'_> {
    fn event_type(&self) -> EventType {
        EventType::PREVIOUS_GTIDS
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        self.0.encode_into(buf);
        Ok(())
    }
    fn header_flags(&self) -> u16 {
        flags::IGNORABLE
    }
}

/// HEARTBEAT_LOG_EVENT (27): body = current file name, no NUL. Written with timestamp 0 and
/// `log_pos` = the current offset ([`super::writer::LogPos::Fixed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat<'a> {
    pub file: &'a str,
}

impl EventBody for Heartbeat<'_> {
    fn event_type(&self) -> EventType {
        EventType::HEARTBEAT
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(self.file.as_bytes());
        Ok(())
    }
}

/// HEARTBEAT_LOG_EVENT_V2 (41, MySQL 8.0.26+): fields `type, length, value` (lenenc each),
/// type 1 = file name, type 2 = position (its value a lenenc integer), then the end mark 0
/// (mysql-server `codecs/binary.cpp`, `Heartbeat::encode`). Only for MySQL replicas that set dump
/// flag 0x02; the position is not limited to 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatV2<'a> {
    pub file: &'a str,
    pub position: u64,
}

impl EventBody for HeartbeatV2<'_> {
    fn event_type(&self) -> EventType {
        EventType::HEARTBEAT_V2
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        put_lenenc(buf, 1);
        put_lenenc(buf, self.file.len() as u64);
        buf.extend_from_slice(self.file.as_bytes());
        put_lenenc(buf, 2);
        put_lenenc(buf, super::codec::lenenc_len(self.position) as u64);
        put_lenenc(buf, self.position);
        put_lenenc(buf, 0);
        Ok(())
    }
}

/// ROWS_QUERY_LOG_EVENT (29): the statement text of the following rows events
/// (`binlog_rows_query_log_events`); a 1-byte length (ignored by readers) then the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowsQuery<'a>(pub &'a str);

impl EventBody for RowsQuery<'_> {
    fn event_type(&self) -> EventType {
        EventType::ROWS_QUERY
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.push(self.0.len().min(255) as u8);
        buf.extend_from_slice(self.0.as_bytes());
        Ok(())
    }
    fn header_flags(&self) -> u16 {
        flags::IGNORABLE
    }
}

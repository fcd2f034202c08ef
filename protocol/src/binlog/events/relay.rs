//! Relay events: the server's own artificial events for a standby of an HA group, which follows
//! the owner's binlog as an ordinary dump client (by file and position, having set the user
//! variable the server names for it). Its stream is the ordinary one plus these events, which
//! no other client receives, with what the standby's store needs besides the bytes:
//!
//! ```text
//! header 19: timestamp 0, type IGNORABLE (28), server_id, size, log_pos 0,
//!            flags ARTIFICIAL | IGNORABLE
//! body:      "TIBR" | kind 1 | …                                       | [CRC32]
//!   kind 1, after the last event of each transaction:  start_ts 8 | commit_ts 8 | part 4
//!   kind 2, caught up at a snapshot point:             ts 8 | pos 8 | file name
//! ```
//! (integers little-endian). A snapshot point says that every transaction committed at or
//! before `ts` is before `file`/`pos` and every later one after it: the standby's checkpoint
//! once it holds the binlog up to there. Artificial events take no room in the file (log_pos
//! 0), so the positions of the stream stay the file's.

use crate::binlog::error::Result;
use crate::binlog::header::EventType;
use crate::binlog::writer::EventBody;

/// First bytes of every relay event's body.
pub const MAGIC: &[u8; 4] = b"TIBR";

const KIND_TXN: u8 = 1;
const KIND_CHECKPOINT: u8 = 2;

/// What a relay event after a transaction says of it: its TiDB timestamps and its statement
/// number within the upstream transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayTag {
    pub start_ts: u64,
    pub commit_ts: u64,
    pub part: u32,
}

/// A relay event's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relay {
    /// The transaction that just ended.
    Txn(RelayTag),
    /// The stream is at a snapshot point `ts` of the owner's binlog, `file`/`pos`.
    Checkpoint { ts: u64, file: String, pos: u64 },
}

impl EventBody for Relay {
    fn event_type(&self) -> EventType {
        EventType::IGNORABLE
    }

    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(MAGIC);
        match self {
            Relay::Txn(t) => {
                buf.push(KIND_TXN);
                buf.extend_from_slice(&t.start_ts.to_le_bytes());
                buf.extend_from_slice(&t.commit_ts.to_le_bytes());
                buf.extend_from_slice(&t.part.to_le_bytes());
            }
            Relay::Checkpoint { ts, file, pos } => {
                buf.push(KIND_CHECKPOINT);
                buf.extend_from_slice(&ts.to_le_bytes());
                buf.extend_from_slice(&pos.to_le_bytes());
                buf.extend_from_slice(file.as_bytes());
            }
        }
        Ok(())
    }
}

impl Relay {
    /// Reads the body of an IGNORABLE event (after the header, without a CRC); `None` when it
    /// is not a relay event or is cut short.
    pub fn parse(body: &[u8]) -> Option<Relay> {
        let rest = body.strip_prefix(MAGIC)?;
        let (&kind, rest) = rest.split_first()?;
        let u64_at = |b: &[u8], i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?))
        };
        match kind {
            KIND_TXN if rest.len() == 20 => Some(Relay::Txn(RelayTag {
                start_ts: u64_at(rest, 0)?,
                commit_ts: u64_at(rest, 8)?,
                part: u32::from_le_bytes(rest[16..20].try_into().ok()?),
            })),
            KIND_CHECKPOINT if rest.len() >= 16 => Some(Relay::Checkpoint {
                ts: u64_at(rest, 0)?,
                pos: u64_at(rest, 8)?,
                file: String::from_utf8(rest[16..].to_vec()).ok()?,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binlog::{flags, EventMeta, EventWriter, LogPos, HEADER_LEN};

    #[test]
    fn relay_events_round_trip_and_refuse_what_is_not_theirs() {
        let tags = [
            Relay::Txn(RelayTag {
                start_ts: 449_572_008_125_104_129,
                commit_ts: 449_572_008_125_104_131,
                part: 2,
            }),
            Relay::Checkpoint {
                ts: 449_572_008_125_104_200,
                file: "binlog.000012".into(),
                pos: 5_000_000_123,
            },
        ];
        for tag in tags {
            let mut ev = Vec::new();
            let n = EventWriter::new(7, true)
                .write_with(
                    &mut ev,
                    EventMeta {
                        timestamp: 0,
                        log_pos: LogPos::Fixed(0),
                        flags: flags::ARTIFICIAL | flags::IGNORABLE,
                    },
                    &tag,
                )
                .expect("encode");
            assert_eq!(n, ev.len());
            assert_eq!(ev[4], EventType::IGNORABLE.0);
            crate::binlog::checksum::verify_event(&ev).expect("valid CRC");
            let body = &ev[HEADER_LEN..ev.len() - 4];
            assert_eq!(Relay::parse(body), Some(tag));
            // Cut short, another magic, an unknown kind: not a relay event.
            assert_eq!(Relay::parse(&body[..20]), None);
            let mut other = body.to_vec();
            other[0] = b'X';
            assert_eq!(Relay::parse(&other), None);
            let mut kind = body.to_vec();
            kind[4] = 9;
            assert_eq!(Relay::parse(&kind), None);
        }
    }
}

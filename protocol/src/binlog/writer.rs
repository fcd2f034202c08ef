//! Framing events: common header, body, CRC32, `event_size` and `log_pos`.
//!
//! ```text
//! pos                                                            pos + event_size = log_pos
//!  |  header (19)  |  post-header + body (EventBody::encode_into)  |  CRC32 (4, optional)  |
//! ```
//! [`EventWriter::write`] appends one complete event for a file position; rows events, which may
//! be split, go through [`EventWriter::rows`] (see [`super::events::rows`]); a whole transaction
//! with its GTID event goes through [`super::transaction::Transaction`].

use super::checksum::{self, CHECKSUM_LEN};
use super::error::{BinlogError, Result};
use super::header::{flags, EventHeader, EventType, HEADER_LEN};

/// A binlog event body: everything after the common header and before the CRC.
pub trait EventBody {
    /// The header's type code.
    fn event_type(&self) -> EventType;
    /// Appends post-header and body.
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()>;
    /// Header flags this event is written with by default (PREVIOUS_GTIDS: IGNORABLE).
    fn header_flags(&self) -> u16 {
        0
    }
    /// FORMAT_DESCRIPTION carries a CRC32 whatever the checksum setting.
    fn always_checksummed(&self) -> bool {
        false
    }
}

/// How the header's `log_pos` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogPos {
    /// The event starts at this file offset: `log_pos` = offset + event_size.
    StartsAt(u64),
    /// A fixed value: 0 for artificial events, the current offset for heartbeats.
    Fixed(u32),
}

/// Header fields chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMeta {
    pub timestamp: u32,
    pub log_pos: LogPos,
    /// Added to the event's own [`EventBody::header_flags`].
    pub flags: u16,
}

/// Writes complete events for one master.
#[derive(Debug, Clone)]
pub struct EventWriter {
    /// The master's `@@server_id`, in every header.
    pub server_id: u32,
    /// Append a CRC32 to every event (`binlog_checksum=CRC32`).
    pub checksum: bool,
    /// Rows events are cut before they exceed this many bytes (MySQL's
    /// `binlog_row_event_max_size`, default 8192); a single row larger than this gets an event of
    /// its own.
    pub max_rows_event_size: usize,
    /// Reused when a row has to move to the next rows event.
    pub(crate) scratch: Vec<u8>,
}

impl EventWriter {
    /// A writer with MySQL's default rows-event size.
    pub fn new(server_id: u32, checksum: bool) -> Self {
        Self {
            server_id,
            checksum,
            max_rows_event_size: 8192,
            scratch: Vec::new(),
        }
    }

    /// Bytes the CRC adds to a (non-FORMAT_DESCRIPTION) event.
    pub fn checksum_len(&self) -> usize {
        if self.checksum {
            CHECKSUM_LEN
        } else {
            0
        }
    }

    /// Appends `ev` starting at file offset `pos` with header flags 0 (plus the event's own).
    /// Returns the offset after the event. On error nothing is appended.
    pub fn write(
        &mut self,
        buf: &mut Vec<u8>,
        pos: u64,
        timestamp: u32,
        ev: &impl EventBody,
    ) -> Result<u64> {
        let n = self.write_with(
            buf,
            EventMeta {
                timestamp,
                log_pos: LogPos::StartsAt(pos),
                flags: 0,
            },
            ev,
        )?;
        Ok(pos + n as u64)
    }

    /// Appends `ev` with explicit header fields. Returns the event length.
    pub fn write_with(
        &mut self,
        buf: &mut Vec<u8>,
        meta: EventMeta,
        ev: &impl EventBody,
    ) -> Result<usize> {
        self.write_padded(buf, meta, ev, 0)
    }

    /// [`Self::write_with`], the body followed by zero bytes up to an event of `size` bytes (CRC
    /// included) when its own encoding is shorter: an event that stands in for another keeps
    /// that one's size, so the positions after it stay those of the file. Returns the event
    /// length.
    pub fn write_padded(
        &mut self,
        buf: &mut Vec<u8>,
        meta: EventMeta,
        ev: &impl EventBody,
        size: usize,
    ) -> Result<usize> {
        let start = buf.len();
        buf.resize(start + HEADER_LEN, 0);
        if let Err(e) = ev.encode_into(buf) {
            buf.truncate(start);
            return Err(e);
        }
        let crc = self.checksum || ev.always_checksummed();
        let unpadded = size.saturating_sub(if crc { CHECKSUM_LEN } else { 0 });
        if buf.len() - start < unpadded {
            buf.resize(start + unpadded, 0);
        }
        let res = self.finish_event(buf, start, ev.event_type(), meta, ev.header_flags(), crc);
        if res.is_err() {
            buf.truncate(start);
        }
        res
    }

    /// Fills the header of the event whose header placeholder starts at `buf[start]` and whose
    /// body runs to the end of `buf`, then appends the CRC if `crc`. Returns the event length.
    pub(crate) fn finish_event(
        &self,
        buf: &mut Vec<u8>,
        start: usize,
        event_type: EventType,
        meta: EventMeta,
        own_flags: u16,
        crc: bool,
    ) -> Result<usize> {
        let len = buf.len() - start + if crc { CHECKSUM_LEN } else { 0 };
        let log_pos = match meta.log_pos {
            LogPos::Fixed(p) => p,
            // Past 4 GiB the 32-bit field wraps, as MySQL writes it (`int4store` of the
            // 64-bit end): a transaction larger than that still goes into one file, whose
            // readers count offsets themselves.
            LogPos::StartsAt(p) => (p + len as u64) as u32,
        };
        let event_size =
            u32::try_from(len).map_err(|_| BinlogError::PositionOverflow { end: len as u64 })?;
        let h = EventHeader {
            timestamp: meta.timestamp,
            event_type,
            server_id: self.server_id,
            event_size,
            log_pos,
            flags: own_flags | meta.flags,
        };
        let mut hb = [0u8; HEADER_LEN];
        if crc && event_type == EventType::FORMAT_DESCRIPTION {
            // MySQL computes the FORMAT_DESCRIPTION CRC with BINLOG_IN_USE cleared, so that the
            // flag can be cleared at close (or when sent) without touching the CRC; its readers
            // clear the flag before verifying (`Log_event_footer::event_checksum_test`).
            write_header(
                &EventHeader {
                    flags: h.flags & !flags::BINLOG_IN_USE,
                    ..h
                },
                &mut hb,
            );
            buf[start..start + HEADER_LEN].copy_from_slice(&hb);
            checksum::append_crc32(buf, start);
            write_header(&h, &mut hb);
            buf[start..start + HEADER_LEN].copy_from_slice(&hb);
            return Ok(len);
        }
        write_header(&h, &mut hb);
        buf[start..start + HEADER_LEN].copy_from_slice(&hb);
        if crc {
            checksum::append_crc32(buf, start);
        }
        Ok(len)
    }
}

fn write_header(h: &EventHeader, out: &mut [u8; HEADER_LEN]) {
    out[0..4].copy_from_slice(&h.timestamp.to_le_bytes());
    out[4] = h.event_type.0;
    out[5..9].copy_from_slice(&h.server_id.to_le_bytes());
    out[9..13].copy_from_slice(&h.event_size.to_le_bytes());
    out[13..17].copy_from_slice(&h.log_pos.to_le_bytes());
    out[17..19].copy_from_slice(&h.flags.to_le_bytes());
}

/// Rewrites `log_pos` (adding `delta`) and the CRC of every event in `events`, a run of complete
/// events as written by one [`EventWriter`]. Used when bytes are inserted before them (events
/// with `log_pos` 0, artificial ones, keep it).
pub fn shift_log_pos(events: &mut [u8], delta: i64, crc: bool) -> Result<()> {
    let mut at = 0;
    while at < events.len() {
        let h = EventHeader::parse(&events[at..])?;
        let end = at + h.event_size as usize;
        if end > events.len() {
            return Err(BinlogError::Malformed {
                what: "event run",
                offset: at,
            });
        }
        if h.log_pos != 0 {
            // Modulo 2^32, like the field itself (see `finish_event`).
            let p = (i64::from(h.log_pos) + delta).rem_euclid(1 << 32) as u32;
            events[at + 13..at + 17].copy_from_slice(&p.to_le_bytes());
        }
        if crc {
            let c = checksum::crc32(&events[at..end - CHECKSUM_LEN]);
            events[end - CHECKSUM_LEN..end].copy_from_slice(&c.to_le_bytes());
        }
        at = end;
    }
    Ok(())
}

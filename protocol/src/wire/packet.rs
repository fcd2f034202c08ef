//! Packet framing: the 4-byte header in front of every MySQL payload.
//!
//! ```text
//!   0      3     4
//!   +------+-----+---------------------------+
//!   | len  | seq | payload (len bytes)       |   len: u24 LE, 0 ..= 0xFF_FFFF
//!   +------+-----+---------------------------+
//! ```
//!
//! A payload of 0xFF_FFFF bytes or more (16 MiB − 1) is cut into 0xFF_FFFF-byte packets followed
//! by one shorter packet, which is empty when the payload length is an exact multiple of
//! 0xFF_FFFF. Every packet carries the next sequence id (mod 256); the id restarts at 0 with
//! each command the client sends. Server and client share one counter per exchange: the
//! greeting is seq 0, the client's response seq 1, the server's answer seq 2, and after a
//! command with seq 0 the replies run 1, 2, … (see `mysql_common::proto::codec`).
//!
//! Nothing here does I/O. The connection reads bytes into its buffer, calls
//! [`PacketCodec::decode`] (which first runs the cheap [`check`]), and drains the consumed bytes;
//! outgoing payloads are framed with [`PacketCodec::encode`] into a reused buffer.

use super::{Result, WireError};

/// Bytes of the packet header.
pub const HEADER_LEN: usize = 4;

/// Largest payload of one packet: 2^24 − 1. A packet of exactly this length means "continued".
pub const MAX_PACKET_PAYLOAD: usize = 0xFF_FFFF;

/// Default limit for an assembled incoming payload: MySQL 8.0's default `max_allowed_packet`
/// (64 MiB). Commands a replica sends are tiny; the limit only bounds memory.
pub const DEFAULT_MAX_PAYLOAD: usize = 64 * 1024 * 1024;

/// Where one complete logical payload sits at the head of a buffer, found by [`check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    /// Bytes the payload occupies on the wire, headers included (what to drain afterwards).
    pub wire_len: usize,
    /// Bytes of the assembled payload.
    pub payload_len: usize,
    /// Number of packets the payload was split into (1 for anything below 16 MiB − 1).
    pub packets: usize,
}

/// Cheap completeness test, before any copying: does `buf` start with a whole logical payload?
///
/// Reads only the headers. Returns `Ok(None)` when more bytes are needed, and an error as soon
/// as the announced payload exceeds `max_payload` (so a peer cannot make us buffer gigabytes).
/// Sequence ids are not checked here; [`PacketReader::decode`] does that.
pub fn check(buf: &[u8], max_payload: usize) -> Result<Option<FrameInfo>> {
    let mut pos = 0usize;
    let mut payload_len = 0usize;
    let mut packets = 0usize;
    loop {
        let Some(header) = buf.get(pos..pos + HEADER_LEN) else {
            return Ok(None);
        };
        let len =
            usize::from(header[0]) | (usize::from(header[1]) << 8) | (usize::from(header[2]) << 16);
        payload_len += len;
        packets += 1;
        if payload_len > max_payload {
            return Err(WireError::PayloadTooLarge {
                len: payload_len,
                max: max_payload,
            });
        }
        pos += HEADER_LEN + len;
        if buf.len() < pos {
            return Ok(None);
        }
        if len < MAX_PACKET_PAYLOAD {
            return Ok(Some(FrameInfo {
                wire_len: pos,
                payload_len,
                packets,
            }));
        }
    }
}

/// One assembled payload taken from the head of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Sequence id of the first packet of the payload.
    pub seq: u8,
    /// The payload, continuation packets joined.
    pub payload: Vec<u8>,
    /// Bytes consumed from the buffer; the caller drains this many.
    pub wire_len: usize,
}

/// Decodes payloads from a byte buffer, checking that sequence ids follow each other.
#[derive(Debug, Clone)]
pub struct PacketReader {
    next_seq: u8,
    max_payload: usize,
}

impl Default for PacketReader {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_PAYLOAD)
    }
}

impl PacketReader {
    /// A reader expecting sequence id 0, refusing payloads above `max_payload` bytes.
    pub fn new(max_payload: usize) -> Self {
        Self {
            next_seq: 0,
            max_payload,
        }
    }

    /// The sequence id the next packet must carry.
    pub fn next_seq(&self) -> u8 {
        self.next_seq
    }

    /// Sets the sequence id the next packet must carry (0 at the start of a command).
    pub fn set_next_seq(&mut self, seq: u8) {
        self.next_seq = seq;
    }

    /// Takes one complete payload from the head of `buf`, or `Ok(None)` if it is not all there.
    ///
    /// On success the expected sequence id advances past every packet consumed. On
    /// [`WireError::SequenceMismatch`] or [`WireError::PayloadTooLarge`] the stream is lost and
    /// the connection should be closed.
    pub fn decode(&mut self, buf: &[u8]) -> Result<Option<Packet>> {
        let Some(info) = check(buf, self.max_payload)? else {
            return Ok(None);
        };
        let first_seq = self.next_seq;
        let mut payload = Vec::with_capacity(info.payload_len);
        let mut pos = 0usize;
        let mut seq = first_seq;
        for _ in 0..info.packets {
            // `check` proved every header and body below lies inside `buf[..info.wire_len]`.
            let header = buf
                .get(pos..pos + HEADER_LEN)
                .ok_or_else(|| WireError::malformed("packet", "header vanished"))?;
            let len = usize::from(header[0])
                | (usize::from(header[1]) << 8)
                | (usize::from(header[2]) << 16);
            if header[3] != seq {
                return Err(WireError::SequenceMismatch {
                    expected: seq,
                    got: header[3],
                });
            }
            let body = buf
                .get(pos + HEADER_LEN..pos + HEADER_LEN + len)
                .ok_or_else(|| WireError::malformed("packet", "body vanished"))?;
            payload.extend_from_slice(body);
            pos += HEADER_LEN + len;
            seq = seq.wrapping_add(1);
        }
        debug_assert_eq!(pos, info.wire_len);
        self.next_seq = seq;
        Ok(Some(Packet {
            seq: first_seq,
            payload,
            wire_len: info.wire_len,
        }))
    }
}

/// Frames payloads into packets, numbering them.
#[derive(Debug, Clone, Default)]
pub struct PacketWriter {
    next_seq: u8,
}

impl PacketWriter {
    /// A writer whose first packet will carry sequence id `seq`.
    pub fn new(seq: u8) -> Self {
        Self { next_seq: seq }
    }

    /// The sequence id the next packet will carry.
    pub fn next_seq(&self) -> u8 {
        self.next_seq
    }

    /// Sets the sequence id of the next packet.
    pub fn set_next_seq(&mut self, seq: u8) {
        self.next_seq = seq;
    }

    /// Appends `payload` to `out` as one or more packets.
    pub fn encode(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        self.encode_parts(&[payload], out);
    }

    /// Appends the concatenation of `parts` to `out` as one payload, without first copying the
    /// parts together. Used for binlog events (`[&[0x00], event]`).
    pub fn encode_parts(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        // Number of packets: full ones, plus the final short (maybe empty) one.
        let packets = total / MAX_PACKET_PAYLOAD + 1;
        out.reserve(total + packets * HEADER_LEN);
        let mut parts = parts.iter().copied().filter(|p| !p.is_empty());
        let mut current: &[u8] = parts.next().unwrap_or(&[]);
        let mut remaining = total;
        loop {
            let len = remaining.min(MAX_PACKET_PAYLOAD);
            let len_bytes = (len as u32).to_le_bytes();
            out.extend_from_slice(&[len_bytes[0], len_bytes[1], len_bytes[2], self.next_seq]);
            self.next_seq = self.next_seq.wrapping_add(1);
            let mut need = len;
            while need > 0 {
                if current.is_empty() {
                    current = parts.next().unwrap_or(&[]);
                    if current.is_empty() {
                        break; // unreachable: `total` counted every byte
                    }
                }
                let take = need.min(current.len());
                out.extend_from_slice(&current[..take]);
                current = &current[take..];
                need -= take;
            }
            debug_assert_eq!(need, 0);
            remaining -= len;
            if len < MAX_PACKET_PAYLOAD {
                break;
            }
        }
    }
}

/// A reader and writer sharing one sequence counter, as one connection needs.
///
/// Reading a payload moves the writer on (the reply follows the request); writing moves the
/// reader on (the client's next packet in the same exchange follows ours).
/// Call [`PacketCodec::reset_seq`] before reading each new command.
#[derive(Debug, Clone, Default)]
pub struct PacketCodec {
    reader: PacketReader,
    writer: PacketWriter,
}

impl PacketCodec {
    /// A codec starting at sequence id 0 with the given incoming payload limit.
    pub fn new(max_payload: usize) -> Self {
        Self {
            reader: PacketReader::new(max_payload),
            writer: PacketWriter::new(0),
        }
    }

    /// Changes the incoming payload limit (a server keeps it small until the client has
    /// authenticated).
    pub fn set_max_payload(&mut self, max_payload: usize) {
        self.reader.max_payload = max_payload;
    }

    /// The sequence id of the next packet in either direction.
    pub fn seq(&self) -> u8 {
        self.writer.next_seq()
    }

    /// Starts a new exchange (a new command): the next packet carries id 0.
    pub fn reset_seq(&mut self) {
        self.reader.set_next_seq(0);
        self.writer.set_next_seq(0);
    }

    /// See [`PacketReader::decode`].
    pub fn decode(&mut self, buf: &[u8]) -> Result<Option<Packet>> {
        let packet = self.reader.decode(buf)?;
        self.writer.set_next_seq(self.reader.next_seq());
        Ok(packet)
    }

    /// See [`PacketWriter::encode`].
    pub fn encode(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        self.encode_parts(&[payload], out);
    }

    /// See [`PacketWriter::encode_parts`].
    pub fn encode_parts(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) {
        self.writer.encode_parts(parts, out);
        self.reader.set_next_seq(self.writer.next_seq());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_payload_round_trip() -> Result<()> {
        let mut w = PacketWriter::new(0);
        let mut out = Vec::new();
        w.encode(b"\x03SELECT 1", &mut out);
        assert_eq!(&out[..4], &[9, 0, 0, 0]);
        assert_eq!(w.next_seq(), 1);

        let mut r = PacketReader::default();
        assert_eq!(r.decode(&out[..5])?, None);
        let p = r
            .decode(&out)?
            .ok_or_else(|| WireError::malformed("t", "none"))?;
        assert_eq!(p.payload, b"\x03SELECT 1");
        assert_eq!((p.seq, p.wire_len, r.next_seq()), (0, out.len(), 1));
        Ok(())
    }

    #[test]
    fn out_of_order_sequence_is_fatal() {
        let mut r = PacketReader::default();
        let err = r.decode(&[1, 0, 0, 5, 0x0e]).err();
        assert!(matches!(
            err,
            Some(WireError::SequenceMismatch {
                expected: 0,
                got: 5
            })
        ));
        assert!(err.is_some_and(|e| e.is_fatal()));
    }

    #[test]
    fn oversized_announcement_fails_before_the_bytes_arrive() {
        let header = [0xff, 0xff, 0xff, 0];
        assert!(matches!(
            check(&header, 1000),
            Err(WireError::PayloadTooLarge { .. })
        ));
    }

    #[test]
    fn sequence_wraps_at_256() -> Result<()> {
        let mut codec = PacketCodec::default();
        let mut out = Vec::new();
        for _ in 0..300 {
            codec.encode(b"x", &mut out);
        }
        assert_eq!(codec.seq(), (300 % 256) as u8);
        let mut r = PacketReader::default();
        let mut pos = 0;
        let mut count = 0;
        while let Some(p) = r.decode(&out[pos..])? {
            pos += p.wire_len;
            count += 1;
        }
        assert_eq!((count, pos), (300, out.len()));
        Ok(())
    }

    #[test]
    fn codec_shares_the_counter_between_directions() -> Result<()> {
        // Greeting (seq 0) out, response (seq 1) in, OK (seq 2) out.
        let mut codec = PacketCodec::default();
        let mut out = Vec::new();
        codec.encode(b"greeting", &mut out);
        let p = codec.decode(&[1, 0, 0, 1, 0xaa])?;
        assert_eq!(p.map(|p| p.seq), Some(1));
        out.clear();
        codec.encode(&[0, 0, 0, 2, 0, 0, 0], &mut out);
        assert_eq!(out[3], 2);
        codec.reset_seq();
        assert!(codec.decode(&[1, 0, 0, 0, 0x0e])?.is_some());
        Ok(())
    }

    #[test]
    fn encode_parts_equals_encode_of_concatenation() {
        let a = vec![1u8; MAX_PACKET_PAYLOAD - 3];
        let b = vec![2u8; 10];
        let mut joined = a.clone();
        joined.extend_from_slice(&b);
        let mut out1 = Vec::new();
        let mut out2 = Vec::new();
        PacketWriter::new(7).encode_parts(&[&[], &a, &[], &b], &mut out1);
        PacketWriter::new(7).encode(&joined, &mut out2);
        assert!(out1 == out2);
    }
}

//! Packet framing at the 16 MiB boundaries, incremental arrival, and sequence checks.

use tibinlog_protocol::wire::{
    packet::{check, PacketCodec, PacketReader, PacketWriter, HEADER_LEN, MAX_PACKET_PAYLOAD},
    WireError,
};

const MAX: usize = MAX_PACKET_PAYLOAD;

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// (length, seq) of every packet header in a framed buffer.
fn headers(framed: &[u8]) -> Vec<(usize, u8)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < framed.len() {
        let h = &framed[pos..pos + HEADER_LEN];
        let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
        out.push((len, h[3]));
        pos += HEADER_LEN + len;
    }
    assert_eq!(pos, framed.len());
    out
}

#[test]
fn split_and_join_at_the_boundaries() -> Result<(), WireError> {
    let cases: [(usize, &[usize]); 6] = [
        (0, &[0]),
        (1, &[1]),
        (MAX - 1, &[MAX - 1]),
        (MAX, &[MAX, 0]),
        (MAX + 1, &[MAX, 1]),
        (2 * MAX, &[MAX, MAX, 0]),
    ];
    for (len, want) in cases {
        let data = payload(len);
        let mut w = PacketWriter::new(250);
        let mut framed = Vec::new();
        w.encode(&data, &mut framed);
        let hs = headers(&framed);
        let lens: Vec<usize> = hs.iter().map(|h| h.0).collect();
        assert_eq!(lens, want, "payload of {len}");
        let seqs: Vec<u8> = hs.iter().map(|h| h.1).collect();
        let want_seqs: Vec<u8> = (0..want.len())
            .map(|i| 250u8.wrapping_add(i as u8))
            .collect();
        assert_eq!(seqs, want_seqs);
        assert_eq!(w.next_seq(), 250u8.wrapping_add(want.len() as u8));

        let info = check(&framed, usize::MAX)?.expect("complete");
        assert_eq!(
            (info.wire_len, info.payload_len, info.packets),
            (framed.len(), len, want.len())
        );
        // One byte short is incomplete, never an error.
        assert_eq!(check(&framed[..framed.len() - 1], usize::MAX)?, None);

        let mut r = PacketReader::new(usize::MAX);
        r.set_next_seq(250);
        let p = r.decode(&framed)?.expect("complete");
        assert_eq!(p.seq, 250);
        assert_eq!(p.wire_len, framed.len());
        assert!(p.payload == data, "payload of {len} differs after join");
        assert_eq!(r.next_seq(), w.next_seq());
    }
    Ok(())
}

#[test]
fn two_payloads_back_to_back_and_byte_by_byte() -> Result<(), WireError> {
    let mut codec = PacketCodec::default();
    let mut framed = Vec::new();
    codec.encode(b"first", &mut framed);
    codec.encode(b"", &mut framed);
    codec.encode(b"third one", &mut framed);

    let mut r = PacketReader::default();
    let mut buf = Vec::new();
    let mut got = Vec::new();
    for &b in &framed {
        buf.push(b);
        while let Some(p) = r.decode(&buf)? {
            buf.drain(..p.wire_len);
            got.push(p.payload);
        }
    }
    assert!(buf.is_empty());
    assert_eq!(
        got,
        vec![b"first".to_vec(), Vec::new(), b"third one".to_vec()]
    );
    Ok(())
}

#[test]
fn out_of_order_continuation_is_rejected() {
    let mut framed = Vec::new();
    PacketWriter::new(0).encode(&payload(MAX + 5), &mut framed);
    // Corrupt the second packet's sequence id.
    let second = HEADER_LEN + MAX;
    framed[second + 3] = 9;
    let err = PacketReader::default().decode(&framed).err();
    assert!(matches!(
        err,
        Some(WireError::SequenceMismatch {
            expected: 1,
            got: 9
        })
    ));
}

#[test]
fn payload_limit_applies_to_the_joined_payload() {
    let mut framed = Vec::new();
    PacketWriter::new(0).encode(&payload(MAX + 5), &mut framed);
    let err = PacketReader::new(MAX + 4).decode(&framed).err();
    assert!(matches!(err, Some(WireError::PayloadTooLarge { .. })));
    assert!(err.is_some_and(|e| e.is_fatal()));
}

#[test]
fn binlog_event_parts_frame_like_one_payload() {
    // One event per packet: 0x00 + event, written without joining first.
    let event = payload(MAX + 100);
    let mut joined = vec![0u8];
    joined.extend_from_slice(&event);
    let mut a = Vec::new();
    let mut b = Vec::new();
    PacketWriter::new(1).encode_parts(&[&[0], &event], &mut a);
    PacketWriter::new(1).encode(&joined, &mut b);
    assert!(a == b);
    assert_eq!(headers(&a), vec![(MAX, 1), (101, 2)]);
}

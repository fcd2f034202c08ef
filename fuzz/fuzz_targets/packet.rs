//! The packet framer: any byte stream, cut anywhere, decodes into packets or a clear error,
//! never a panic, and never more than the payload limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tibinlog_protocol::wire::packet::PacketCodec;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    // A small limit, so that oversized and multi-packet payloads are reachable.
    let mut codec = PacketCodec::new(64 << 10);
    let mut buf: Vec<u8> = Vec::new();
    let step = usize::from(cut).max(1);
    for chunk in rest.chunks(step) {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&buf) {
                Ok(Some(p)) => {
                    assert!(p.wire_len <= buf.len());
                    assert!(p.payload.len() <= 64 << 10);
                    buf.drain(..p.wire_len);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});

//! Property tests: random bytes never panic any decoder, and structured inputs round-trip
//! through mysql_common's serialisers and our decoders.

use mysql_common::{
    constants::CapabilityFlags,
    packets::{
        AuthPlugin, BinlogDumpFlags, ComBinlogDump, ComBinlogDumpGtid, ComRegisterSlave,
        GnoInterval, HandshakeResponse, Sid,
    },
    proto::MySerialize,
};
use proptest::prelude::*;
use tibinlog_protocol::wire::{
    auth::{AuthMethod, Credential},
    auth_exchange::{AuthExchange, AuthStep},
    command::{decode_command, decode_sid_block, Command},
    handshake::{decode_client_hello, ClientHello, Scramble},
    packet::{check, PacketReader, PacketWriter},
};

fn ser(p: &impl MySerialize) -> Vec<u8> {
    let mut buf = Vec::new();
    p.serialize(&mut buf);
    buf
}

/// Bytes biased towards the structures the decoders look for.
fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        // A plausible command byte followed by garbage.
        (
            prop::sample::select(vec![0x01u8, 0x02, 0x03, 0x04, 0x12, 0x15, 0x1b, 0x1e, 0x1f]),
            proptest::collection::vec(any::<u8>(), 0..120)
        )
            .prop_map(|(c, mut rest)| {
                rest.insert(0, c);
                rest
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn decoders_never_panic(bytes in wire_bytes()) {
        let _ = decode_command(&bytes);
        let _ = decode_sid_block(&bytes);
        let _ = decode_client_hello(&bytes);
        let _ = check(&bytes, 1 << 20);
        let _ = PacketReader::new(1 << 20).decode(&bytes);
        // Client hello with PROTOCOL_41 set so the mysql_common parser is reached.
        let mut hello = bytes.clone();
        if hello.len() >= 4 {
            hello[1] |= 0x02;
            let _ = decode_client_hello(&hello);
        }
        // Auth exchange fed garbage after its first step.
        for tls in [false, true] {
            let mut ex = AuthExchange::new(
                Scramble::from_random([7; 20]),
                AuthMethod::CachingSha2Password,
                Some(Credential::NativeHash([1; 20])),
                tls,
            );
            if let Ok(ClientHello::Response(h)) = decode_client_hello(&hello) {
                if let Ok(AuthStep::Send(_)) = ex.on_handshake_response(&h) {
                    let _ = ex.on_client_packet(&bytes);
                }
            }
        }
    }

    #[test]
    fn truncated_replication_commands_are_errors(server_id in any::<u32>(), pos in any::<u32>()) {
        let dump = ser(&ComBinlogDump::new(server_id).with_pos(pos));
        for n in 0..dump.len() {
            prop_assert!(decode_command(&dump[..n]).is_err());
        }
        let reg = ser(&ComRegisterSlave::new(server_id).with_hostname(&b"h"[..]));
        for n in 0..reg.len() {
            prop_assert!(decode_command(&reg[..n]).is_err());
        }
        let gtid = ser(&ComBinlogDumpGtid::new(server_id)
            .with_sid(Sid::new([3; 16]).with_interval(GnoInterval::new(1, 9))));
        // Everything up to the position is mandatory; after it, a cut SID block is an error.
        for n in (0..gtid.len()).filter(|&n| n != 19) {
            prop_assert!(decode_command(&gtid[..n]).is_err(), "cut at {}", n);
        }
    }

    #[test]
    fn mutated_handshake_responses_never_panic(at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<prop::sample::Index>()) {
        let mut attrs = std::collections::HashMap::new();
        attrs.insert("_client_name".to_string(), "x".to_string());
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA;
        let resp = HandshakeResponse::new(
            Some(&[9u8; 32][..]),
            (8, 0, 35),
            Some(&b"repl"[..]),
            Some(&b"db"[..]),
            Some(AuthPlugin::CachingSha2Password),
            caps,
            Some(attrs),
            0,
        );
        let mut bytes = ser(&resp);
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let _ = decode_client_hello(&bytes);
        let _ = decode_client_hello(&bytes[..cut.index(bytes.len())]);
    }

    #[test]
    fn binlog_dump_round_trip(server_id in any::<u32>(), pos in any::<u32>(), flags in 0u16..8, name in "[a-z0-9.\\-]{0,40}") {
        let p = ComBinlogDump::new(server_id)
            .with_pos(pos)
            .with_flags(BinlogDumpFlags::from_bits_truncate(flags))
            .with_filename(name.as_bytes());
        let Ok(Command::BinlogDump(d)) = decode_command(&ser(&p)) else {
            return Err(TestCaseError::fail("not decoded"));
        };
        prop_assert_eq!((d.server_id, d.pos, d.flags.0, d.filename), (server_id, pos, flags, name));
    }

    #[test]
    fn binlog_dump_gtid_round_trip(
        server_id in any::<u32>(),
        pos in any::<u64>(),
        name in "[a-z0-9.]{0,20}",
        sets in proptest::collection::vec(
            (any::<[u8; 16]>(), proptest::collection::vec((1u64..1_000_000, 1u64..1000), 1..4)),
            0..4,
        ),
    ) {
        let sids: Vec<Sid<'static>> = sets
            .iter()
            .map(|(u, ivs)| {
                let intervals = ivs.iter().map(|&(s, l)| GnoInterval::new(s, s + l)).collect();
                Sid::new(*u).with_intervals(intervals)
            })
            .collect();
        let p = ComBinlogDumpGtid::new(server_id)
            .with_filename(name.as_bytes())
            .with_pos(pos)
            .with_sids(sids);
        let Ok(Command::BinlogDumpGtid(g)) = decode_command(&ser(&p)) else {
            return Err(TestCaseError::fail("not decoded"));
        };
        prop_assert_eq!(g.server_id, server_id);
        prop_assert_eq!(g.pos, pos);
        prop_assert_eq!(g.filename, name);
        prop_assert_eq!(g.flags.contains(0x04), !sets.is_empty());
        prop_assert_eq!(g.sids.len(), sets.len());
        for (got, (u, ivs)) in g.sids.iter().zip(&sets) {
            prop_assert_eq!(&got.uuid, u);
            let want: Vec<(u64, u64)> = ivs.iter().map(|&(s, l)| (s, s + l)).collect();
            prop_assert_eq!(&got.intervals, &want);
        }
    }

    #[test]
    fn framing_round_trip(len in 0usize..5000, seq in any::<u8>(), split in 0usize..5000) {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut framed = Vec::new();
        PacketWriter::new(seq).encode(&data, &mut framed);
        let mut r = PacketReader::default();
        r.set_next_seq(seq);
        let split = split.min(framed.len());
        if split < framed.len() {
            prop_assert!(r.decode(&framed[..split]).ok().flatten().is_none());
        }
        let Ok(Some(p)) = r.decode(&framed) else {
            return Err(TestCaseError::fail("not decoded"));
        };
        prop_assert_eq!(p.payload, data);
        prop_assert_eq!(p.wire_len, framed.len());
    }
}

/// Every input the `command` fuzz target once crashed on (fuzz/regressions/command) goes
/// through the same decoders without a panic.
#[test]
fn command_fuzz_regressions_stay_fixed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/command");
    let entries = std::fs::read_dir(&dir).expect("the regression inputs are in the tree");
    let mut n = 0;
    for e in entries {
        let data = std::fs::read(e.expect("entry").path()).expect("read");
        if let Ok(Command::StmtExecute(ex)) = decode_command(&data) {
            let count = usize::from(data.last().copied().unwrap_or(0) % 32);
            let mut types = Vec::new();
            let _ = tibinlog_protocol::wire::stmt::decode_params(
                &ex.params,
                count,
                &mut types,
                &vec![None; count],
            );
        }
        let _ = decode_command(&data);
        let _ = decode_sid_block(&data);
        n += 1;
    }
    assert!(n >= 1, "no regression input in {}", dir.display());
}

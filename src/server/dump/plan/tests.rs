use super::*;
use crate::server::source::BinlogSource;
use crate::server::testing::MemSource;
use std::time::Duration;
use tibinlog_protocol::binlog::checksum::{verify_event, CHECKSUM_LEN};
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::binlog::{EventHeader, HEADER_LEN};
use tibinlog_protocol::wire::command::{DumpFlags, GtidSid};
use tibinlog_protocol::wire::errors::{
    msg_mariadb_gtid_not_in_binlog, MSG_FIRST_LOG_NOT_FOUND, MSG_GTIDS_PURGED,
    MSG_IMPOSSIBLE_POSITION, MSG_MARIADB_CAPABILITY, MSG_MARIADB_MALFORMED_STATE,
    MSG_MARIADB_MALFORMED_UNTIL, MSG_MARIADB_PURGED, MSG_MORE_GTIDS, MSG_POS_BELOW_4,
    MSG_POS_PAST_EOF,
};

const SERVER_ID: u32 = 7;
const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn sid() -> Sid {
    Sid::parse(UUID).expect("sid")
}

/// A binlog of `txns` one-row transactions in `binlog.000001`.
fn source(crc: bool, txns: usize) -> MemSource {
    let s = MemSource::new(SERVER_ID, sid(), crc);
    for i in 0..txns {
        s.append_insert(&[(i as i64, "x")]);
    }
    s
}

/// What a MySQL replica says before its dump.
fn mysql_client(checksum: Option<&str>) -> Settings {
    Settings {
        server_id: SERVER_ID,
        sid: sid(),
        files_crc: true,
        announced_checksum: checksum.map(str::to_owned),
        mariadb_client: false,
        mariadb_capability: None,
        slave_connect_state: None,
        slave_until_gtid: None,
    }
}

/// What a MariaDB replica says before a `MASTER_USE_GTID` dump.
fn mariadb_client(state: &str, until: Option<&str>) -> Settings {
    Settings {
        mariadb_client: true,
        mariadb_capability: Some(4),
        slave_connect_state: Some(state.to_owned()),
        slave_until_gtid: until.map(str::to_owned),
        ..mysql_client(Some("CRC32"))
    }
}

fn by_position(file: &str, pos: u64) -> DumpRequest {
    DumpRequest::Position {
        file: file.to_owned(),
        pos,
        flags: DumpFlags(0),
        server_id: 2,
    }
}

fn by_gtid(intervals: &[(u64, u64)]) -> DumpRequest {
    DumpRequest::Gtid {
        sids: vec![GtidSid {
            uuid: sid().0,
            tag: None,
            intervals: intervals.to_vec(),
        }],
        flags: DumpFlags(0),
        server_id: 2,
    }
}

/// The events of `file` from offset `pos` to its end, as stored.
fn events(s: &MemSource, file: &str, pos: u64) -> Vec<Vec<u8>> {
    let mut r = s.open(file, pos).expect("open");
    std::iter::from_fn(|| r.next_event().expect("read")).collect()
}

/// The end offset (log_pos) of an event.
fn end(ev: &[u8]) -> u32 {
    EventHeader::parse(ev).expect("header").log_pos
}

/// One line per emitted event: its type and the fields a replica acts on, then `+crc` if
/// it ends with a valid CRC32.
fn show(ev: &[u8]) -> String {
    let h = EventHeader::parse(ev).expect("header");
    let crc = verify_event(ev).is_ok();
    let body_end = ev.len() - if crc { CHECKSUM_LEN } else { 0 };
    let body = &ev[HEADER_LEN..body_end];
    let u64_at = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("u64"));
    let what = match h.event_type {
        EventType::ROTATE => format!(
            "ROTATE {}:{}",
            String::from_utf8_lossy(&body[8..]),
            u64_at(0)
        ),
        EventType::FORMAT_DESCRIPTION => format!("FDE alg={}", body[body.len() - 1]),
        EventType::PREVIOUS_GTIDS => {
            format!("PREVIOUS_GTIDS {}", GtidSet::decode(body).expect("set"))
        }
        EventType::GTID => format!("GTID {}", read::gtid(body).expect("gtid").1),
        EventType::QUERY => format!("QUERY {}", read::query_text(body).expect("text")),
        EventType::TABLE_MAP => "TABLE_MAP".into(),
        EventType::WRITE_ROWS => "WRITE_ROWS".into(),
        EventType::XID => "XID".into(),
        EventType::HEARTBEAT => format!("HEARTBEAT {}", String::from_utf8_lossy(body)),
        EventType::MARIADB_GTID => format!(
            "MARIADB_GTID 0-{}-{} flags={}",
            h.server_id,
            u64_at(0),
            body[12]
        ),
        EventType::MARIADB_GTID_LIST => {
            let word = u32::from_le_bytes(body[..4].try_into().expect("count"));
            let list: Vec<String> = (0..(word & 0x0fff_ffff) as usize)
                .map(|i| {
                    let g = &body[4 + 16 * i..];
                    let u32_at =
                        |at: usize| u32::from_le_bytes(g[at..at + 4].try_into().expect("u32"));
                    let seq = u64::from_le_bytes(g[8..16].try_into().expect("seq"));
                    format!("{}-{}-{seq}", u32_at(0), u32_at(4))
                })
                .collect();
            format!("GTID_LIST [{}] flags={}", list.join(","), word >> 28)
        }
        other => format!("type {}", other.0),
    };
    format!("{what} @{}{}", h.log_pos, if crc { " +crc" } else { "" })
}

/// A dump driven the way the shell drives it, over every file of `s` to the current end;
/// the emitted events, or the 1236 text.
fn dump(s: &MemSource, settings: &Settings, req: &DumpRequest) -> Result<Vec<Vec<u8>>, String> {
    let start = plan_start(settings, s, req)?;
    let mut reader = s
        .open(&start.from.file, start.from.pos)
        .map_err(open_error)?;
    let mut plan = DumpPlan::new(settings, start);
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut emit = |e: &[u8]| out.push(e.to_vec());
    let first = |file: &str| {
        let mut r = s.open(file, 4).expect("open at 4");
        let fde = r.next_event().expect("read");
        (r, fde)
    };
    let fde = plan
        .start_needs_format_description()
        .then(|| first(plan.file()));
    let (fde_reader, fde) = fde.unzip();
    let from = plan
        .on_start(fde.flatten().as_deref(), &mut emit)
        .expect("start");
    if from == ReadFrom::AfterFormatDescription {
        reader = fde_reader.expect("reader");
    }
    loop {
        while let Some(mut ev) = reader.next_event().expect("read") {
            plan.on_event(&mut ev, &mut emit).expect("event");
            if plan.until_reached() {
                return Ok(out);
            }
        }
        let files = s.files();
        let i = files.iter().position(|f| f.name == plan.file());
        let Some(next) = i.and_then(|i| files.get(i + 1)).map(|f| f.name.clone()) else {
            break;
        };
        let (next_reader, fde) = if plan.next_file_needs_format_description() {
            first(&next)
        } else {
            (s.open(&next, 4).expect("open"), None)
        };
        reader = next_reader;
        plan.on_next_file(&next, fde.as_deref(), &mut emit)
            .expect("next file");
    }
    plan.on_caught_up(&mut emit).expect("caught up");
    Ok(out)
}

fn shown(out: &[Vec<u8>]) -> Vec<String> {
    out.iter().map(|e| show(e)).collect()
}

#[test]
fn mysql_by_position_from_the_start_sends_the_file_as_stored() {
    let s = source(true, 2);
    let file = events(&s, "binlog.000001", 4);
    let out = dump(&s, &mysql_client(Some("CRC32")), &by_position("", 4)).expect("dump");
    let e = |i: usize| end(&file[i]);
    assert_eq!(
        shown(&out),
        [
            "ROTATE binlog.000001:4 @0 +crc".to_string(),
            format!("FDE alg=1 @{} +crc", e(0)),
            format!("PREVIOUS_GTIDS  @{} +crc", e(1)),
            format!("GTID 1 @{} +crc", e(2)),
            format!("QUERY BEGIN @{} +crc", e(3)),
            format!("TABLE_MAP @{} +crc", e(4)),
            format!("WRITE_ROWS @{} +crc", e(5)),
            format!("XID @{} +crc", e(6)),
            format!("GTID 2 @{} +crc", e(7)),
            format!("QUERY BEGIN @{} +crc", e(8)),
            format!("TABLE_MAP @{} +crc", e(9)),
            format!("WRITE_ROWS @{} +crc", e(10)),
            format!("XID @{} +crc", e(11)),
        ]
    );
    // Everything after the fake ROTATE is the file's bytes (its FDE has no IN_USE flag).
    assert_eq!(&out[1..], &file[..]);
}

#[test]
fn mysql_by_position_mid_file_starts_with_the_file_s_fde_at_log_pos_0() {
    let s = source(true, 2);
    let file = events(&s, "binlog.000001", 4);
    let second = u64::from(end(&file[6]));
    let settings = mysql_client(Some("CRC32"));
    let out = dump(&s, &settings, &by_position("binlog.000001", second)).expect("dump");
    assert_eq!(
        shown(&out[..3]),
        [
            format!("ROTATE binlog.000001:{second} @0 +crc"),
            "FDE alg=1 @0 +crc".to_string(),
            format!("GTID 2 @{} +crc", end(&file[7])),
        ]
    );
    assert_eq!(&out[2..], &file[7..]);
    // The start FDE keeps the file's bytes but for log_pos and the create time.
    let fde = &out[1];
    assert_eq!(fde.len(), file[0].len());
    assert_eq!(&fde[71..75], &[0; 4]);
    assert_eq!(&fde[19..71], &file[0][19..71]);
}

#[test]
fn a_file_switch_and_heartbeats_follow_the_stream_s_checksum() {
    let s = source(true, 1);
    s.rotate();
    s.append_insert(&[(9, "y")]);
    let f1 = events(&s, "binlog.000001", 4);
    let f2 = events(&s, "binlog.000002", 4);
    // The client announced a checksum other than CRC32: the first fake ROTATE has no CRC,
    // every later event has the files' CRC.
    let settings = mysql_client(Some("NONE"));
    let start = plan_start(&settings, &s, &by_position("binlog.000001", 4)).expect("start");
    let mut plan = DumpPlan::new(&settings, start);
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut emit = |e: &[u8]| out.push(e.to_vec());
    assert!(!plan.start_needs_format_description());
    assert_eq!(
        plan.on_start(None, &mut emit).expect("start"),
        ReadFrom::Current
    );
    for mut ev in f1.clone() {
        plan.on_event(&mut ev, &mut emit).expect("event");
    }
    assert!(!plan.next_file_needs_format_description());
    plan.on_next_file("binlog.000002", None, &mut emit)
        .expect("next");
    plan.on_heartbeat(&mut emit).expect("heartbeat");
    for mut ev in f2.clone() {
        plan.on_event(&mut ev, &mut emit).expect("event");
    }
    plan.on_heartbeat(&mut emit).expect("heartbeat");
    let n1 = f1.len();
    let shown = shown(&out);
    assert_eq!(shown[0], "ROTATE binlog.000001:4 @0");
    assert_eq!(&out[1..=n1], &f1[..]);
    assert_eq!(
        shown[n1],
        format!("ROTATE binlog.000002:4 @{} +crc", end(&f1[n1 - 1]))
    );
    assert_eq!(shown[n1 + 1], "ROTATE binlog.000002:4 @0 +crc");
    assert_eq!(shown[n1 + 2], "HEARTBEAT binlog.000002 @4 +crc");
    assert_eq!(&out[n1 + 3..n1 + 3 + f2.len()], &f2[..]);
    assert_eq!(
        shown.last().map(String::as_str),
        Some(format!("HEARTBEAT binlog.000002 @{} +crc", end(&f2[f2.len() - 1])).as_str())
    );
}

#[test]
fn a_client_that_announced_no_checksum_gets_every_crc_removed() {
    let s = source(true, 1);
    let file = events(&s, "binlog.000001", 4);
    let out = dump(&s, &mysql_client(None), &by_position("", 4)).expect("dump");
    assert_eq!(
        shown(&out),
        [
            "ROTATE binlog.000001:4 @0".to_string(),
            // The FDE keeps its own CRC and says NONE for the others.
            format!("FDE alg=0 @{} +crc", end(&file[0])),
            format!("PREVIOUS_GTIDS  @{}", end(&file[1])),
            format!("GTID 1 @{}", end(&file[2])),
            format!("QUERY BEGIN @{}", end(&file[3])),
            format!("TABLE_MAP @{}", end(&file[4])),
            format!("WRITE_ROWS @{}", end(&file[5])),
            format!("XID @{}", end(&file[6])),
        ]
    );
    for (sent, stored) in out[2..].iter().zip(&file[1..]) {
        assert_eq!(sent.len(), stored.len() - CHECKSUM_LEN);
        assert_eq!(&sent[HEADER_LEN..], &stored[HEADER_LEN..sent.len()]);
        assert_eq!(
            EventHeader::parse(sent).expect("header").event_size as usize,
            sent.len()
        );
    }
}

#[test]
fn files_without_checksums_go_out_as_stored() {
    let s = source(false, 1);
    let file = events(&s, "binlog.000001", 4);
    let mut settings = mysql_client(None);
    settings.files_crc = false;
    let out = dump(&s, &settings, &by_position("", 4)).expect("dump");
    assert_eq!(shown(&out)[0], "ROTATE binlog.000001:4 @0");
    assert_eq!(&out[1..], &file[..]);
}

#[test]
fn mysql_by_gtid_set_skips_the_transactions_the_client_has() {
    let s = source(true, 3);
    let file = events(&s, "binlog.000001", 4);
    let out = dump(&s, &mysql_client(Some("CRC32")), &by_gtid(&[(1, 3)])).expect("dump");
    assert_eq!(
        shown(&out),
        [
            "ROTATE binlog.000001:4 @0 +crc".to_string(),
            format!("FDE alg=1 @{} +crc", end(&file[0])),
            format!("PREVIOUS_GTIDS  @{} +crc", end(&file[1])),
            format!("GTID 3 @{} +crc", end(&file[12])),
            format!("QUERY BEGIN @{} +crc", end(&file[13])),
            format!("TABLE_MAP @{} +crc", end(&file[14])),
            format!("WRITE_ROWS @{} +crc", end(&file[15])),
            format!("XID @{} +crc", end(&file[16])),
        ]
    );
    assert_eq!(&out[3..], &file[12..]);
}

#[test]
fn a_client_that_has_everything_gets_a_heartbeat_at_the_end() {
    let s = source(true, 2);
    let file = events(&s, "binlog.000001", 4);
    let out = dump(&s, &mysql_client(Some("CRC32")), &by_gtid(&[(1, 3)])).expect("dump");
    let last = end(&file[file.len() - 1]);
    assert_eq!(
        shown(&out[3..]),
        [format!("HEARTBEAT binlog.000001 @{last} +crc")]
    );
}

#[test]
fn positions_and_gtids_we_cannot_serve_get_mysql_s_1236_texts() {
    let s = source(true, 2);
    let file = events(&s, "binlog.000001", 4);
    let inside = u64::from(end(&file[2])) + 1;
    let c = mysql_client(Some("CRC32"));
    let refused = |s: &MemSource, req: DumpRequest| dump(s, &c, &req).err();
    assert_eq!(
        refused(&s, by_position("binlog.000009", 4)).as_deref(),
        Some(MSG_FIRST_LOG_NOT_FOUND)
    );
    assert_eq!(
        refused(&s, by_position("binlog.000001", 3)).as_deref(),
        Some(MSG_POS_BELOW_4)
    );
    assert_eq!(
        refused(&s, by_position("binlog.000001", 1 << 20)).as_deref(),
        Some(MSG_POS_PAST_EOF)
    );
    assert_eq!(
        refused(&s, by_position("binlog.000001", inside)).as_deref(),
        Some(MSG_IMPOSSIBLE_POSITION)
    );
    assert_eq!(
        refused(&s, by_gtid(&[(1, 9)])).as_deref(),
        Some(MSG_MORE_GTIDS)
    );
    // The first file is purged: a client without its GTIDs cannot be served, by GTID or
    // by its name.
    s.rotate();
    s.purge_to("binlog.000002").expect("purge");
    assert_eq!(refused(&s, by_gtid(&[])).as_deref(), Some(MSG_GTIDS_PURGED));
    assert_eq!(
        refused(&s, by_gtid(&[(1, 2)])).as_deref(),
        Some(MSG_GTIDS_PURGED)
    );
    assert_eq!(
        refused(&s, by_position("binlog.000001", 4)).as_deref(),
        Some(MSG_FIRST_LOG_NOT_FOUND)
    );
    assert!(refused(&s, by_gtid(&[(1, 3)])).is_none());
}

#[test]
fn mariadb_by_gtid_state_skips_to_it_and_announces_it() {
    let s = source(true, 3);
    let file = events(&s, "binlog.000001", 4);
    let state = format!("0-{SERVER_ID}-2");
    let out = dump(&s, &mariadb_client(&state, None), &by_gtid(&[])).expect("dump");
    assert_eq!(
        shown(&out),
        [
            format!("ROTATE binlog.000001:{} @0 +crc", end(&file[0])),
            "FDE alg=1 @0 +crc".to_string(),
            format!("GTID_LIST [] flags=0 @{} +crc", end(&file[1])),
            // The skipped transactions end where the announcement says.
            format!(
                "GTID_LIST [0-{SERVER_ID}-2] flags=0 @{} +crc",
                end(&file[11])
            ),
            // GTID and BEGIN merge into a MariaDB GTID ending where BEGIN ends.
            format!(
                "MARIADB_GTID 0-{SERVER_ID}-3 flags=12 @{} +crc",
                end(&file[13])
            ),
            format!("TABLE_MAP @{} +crc", end(&file[14])),
            format!("WRITE_ROWS @{} +crc", end(&file[15])),
            format!("XID @{} +crc", end(&file[16])),
        ]
    );
    // The MariaDB FDE is MariaDB's size, the GTID_LIST the size of the PREVIOUS_GTIDS.
    assert_eq!(out[1].len(), HEADER_LEN + 57 + 171 + 1 + CHECKSUM_LEN);
    assert_eq!(out[2].len(), file[1].len());
    assert_eq!(&out[5..], &file[14..]);
}

#[test]
fn mariadb_until_ends_after_the_group_with_a_flagged_gtid_list() {
    let s = source(true, 3);
    let file = events(&s, "binlog.000001", 4);
    let state = format!("0-{SERVER_ID}-1");
    let until = format!("0-{SERVER_ID}-2");
    let out = dump(&s, &mariadb_client(&state, Some(&until)), &by_gtid(&[])).expect("dump");
    let shown = shown(&out);
    assert_eq!(
        &shown[3..],
        [
            format!(
                "GTID_LIST [0-{SERVER_ID}-1] flags=0 @{} +crc",
                end(&file[6])
            ),
            format!(
                "MARIADB_GTID 0-{SERVER_ID}-2 flags=12 @{} +crc",
                end(&file[8])
            ),
            format!("TABLE_MAP @{} +crc", end(&file[9])),
            format!("WRITE_ROWS @{} +crc", end(&file[10])),
            format!("XID @{} +crc", end(&file[11])),
            format!(
                "GTID_LIST [0-{SERVER_ID}-2] flags=1 @{} +crc",
                end(&file[11])
            ),
        ]
    );
}

#[test]
fn mariadb_starts_that_cannot_be_served_get_mariadb_s_texts() {
    let s = source(true, 2);
    let refused = |settings: &Settings| dump(&s, settings, &by_gtid(&[])).err();
    let mut no_capability = mariadb_client("0-7-1", None);
    no_capability.mariadb_capability = Some(2);
    assert_eq!(
        refused(&no_capability).as_deref(),
        Some(MSG_MARIADB_CAPABILITY)
    );
    assert_eq!(
        refused(&mariadb_client("0-7", None)).as_deref(),
        Some(MSG_MARIADB_MALFORMED_STATE)
    );
    assert_eq!(
        refused(&mariadb_client("0-7-1", Some("x"))).as_deref(),
        Some(MSG_MARIADB_MALFORMED_UNTIL)
    );
    let ahead = MariadbGtid {
        domain_id: 0,
        server_id: SERVER_ID,
        seq_no: 5,
    };
    assert_eq!(
        refused(&mariadb_client("0-7-5", None)),
        Some(msg_mariadb_gtid_not_in_binlog(&ahead, false))
    );
    let other = MariadbGtid {
        domain_id: 0,
        server_id: 9,
        seq_no: 1,
    };
    assert_eq!(
        refused(&mariadb_client("0-9-1", None)),
        Some(msg_mariadb_gtid_not_in_binlog(&other, true))
    );
    s.rotate();
    s.purge_to("binlog.000002").expect("purge");
    assert_eq!(
        refused(&mariadb_client("0-7-1", None)).as_deref(),
        Some(MSG_MARIADB_PURGED)
    );
}

#[test]
fn a_mariadb_peer_by_position_gets_the_flavour_from_its_offset() {
    let s = source(true, 2);
    let file = events(&s, "binlog.000001", 4);
    let second = u64::from(end(&file[6]));
    let settings = Settings {
        mariadb_client: true,
        mariadb_capability: Some(4),
        ..mysql_client(Some("CRC32"))
    };
    let out = dump(&s, &settings, &by_position("binlog.000001", second)).expect("dump");
    assert_eq!(
        shown(&out),
        [
            format!("ROTATE binlog.000001:{second} @0 +crc"),
            "FDE alg=1 @0 +crc".to_string(),
            format!(
                "MARIADB_GTID 0-{SERVER_ID}-2 flags=12 @{} +crc",
                end(&file[8])
            ),
            format!("TABLE_MAP @{} +crc", end(&file[9])),
            format!("WRITE_ROWS @{} +crc", end(&file[10])),
            format!("XID @{} +crc", end(&file[11])),
        ]
    );
}

#[test]
fn non_blocking_dumps_and_heartbeat_periods() {
    assert!(!by_position("", 4).non_blocking());
    let mysqlbinlog = DumpRequest::Position {
        file: String::new(),
        pos: 4,
        flags: DumpFlags(0),
        server_id: 0,
    };
    assert!(mysqlbinlog.non_blocking());
    let asked = DumpRequest::Gtid {
        sids: Vec::new(),
        flags: DumpFlags(DumpFlags::NON_BLOCK),
        server_id: 3,
    };
    assert!(asked.non_blocking());
    let default = Some(Duration::from_secs(30));
    assert_eq!(heartbeat_period(None, default), default);
    assert_eq!(heartbeat_period(Some(0), default), None);
    assert_eq!(
        heartbeat_period(Some(1_500_000_000), None),
        Some(Duration::from_millis(1500))
    );
}

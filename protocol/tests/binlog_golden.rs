//! Golden bytes: events of real MySQL and MariaDB binlog files, re-encoded by our codec and
//! compared byte for byte (header, body and CRC32). The files are test fixtures of
//! blackbeam/rust_mysql_common (`test-data/binlogs/`), copied to `tests/data/` (see its README).
#![allow(clippy::unwrap_used)]

use tibinlog_protocol::binlog::events::format_desc::MYSQL_80_POST_HEADER_LENGTHS;
use tibinlog_protocol::binlog::*;
use tibinlog_protocol::value::{Json, Value};

fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The event at `pos` of `file` and its header.
fn event(file: &[u8], pos: usize) -> (&[u8], EventHeader) {
    let h = EventHeader::parse(&file[pos..]).unwrap();
    (&file[pos..pos + h.event_size as usize], h)
}

/// Writes `ev` as the event at `pos` of `file` was written and compares the bytes.
fn assert_same(file: &[u8], pos: usize, server_id: u32, checksum: bool, ev: &impl EventBody) {
    let (want, h) = event(file, pos);
    let mut w = EventWriter::new(server_id, checksum);
    let mut buf = Vec::new();
    let extra = h.flags & !ev.header_flags();
    let meta = EventMeta {
        timestamp: h.timestamp,
        log_pos: LogPos::StartsAt(pos as u64),
        flags: extra,
    };
    w.write_with(&mut buf, meta, ev).unwrap();
    assert_eq!(hex::encode(&buf), hex::encode(want), "event at {pos}");
}

/// MySQL 8.0.22 (json.binlog.000001): FDE with 40 post-header entries, empty PREVIOUS_GTIDS,
/// ANONYMOUS_GTID, a DDL QUERY, BEGIN, TABLE_MAP with MINIMAL metadata, WRITE_ROWS with a JSON
/// document, XID.
#[test]
fn mysql_8_0_22_transaction() {
    let f = data("json.binlog.000001");
    let (_, h) = event(&f, 4);
    let fde = FormatDescription {
        server_version: "8.0.22",
        create_timestamp: h.timestamp,
        post_header_lengths: &MYSQL_80_POST_HEADER_LENGTHS[..40],
        checksum_alg: ChecksumAlg::Crc32,
    };
    assert_same(&f, 4, 1, true, &fde);
    assert_same(&f, 125, 1, true, &PreviousGtids(&GtidSet::new()));

    // ANONYMOUS_GTID at 156: last_committed 0, sequence 1, length 335, version 80022.
    let (raw, _) = event(&f, 156);
    let mut ts = [0u8; 8];
    ts[..7].copy_from_slice(&raw[19 + 42..19 + 49]);
    let g = GtidEvent {
        flags: 1,
        transaction_length: 335,
        ..GtidEvent::anonymous(1, u64::from_le_bytes(ts), 80022)
    };
    assert_same(&f, 156, 1, true, &g);
    assert_eq!(GtidEvent::parse(&raw[19..raw.len() - 4], true).unwrap(), g);

    // CREATE TABLE at 570 (Q_SQL_REQUIRE_PRIMARY_KEY 0 included, as 8.0.22 writes for DDL).
    let (raw, _) = event(&f, 570);
    let text_start = 19 + 13 + 48 + 6;
    let sql = std::str::from_utf8(&raw[text_start..raw.len() - 4]).unwrap();
    let dbs = ["mysql"];
    let mut ddl = QueryEvent::ddl(9, "mysql", sql, &dbs, 0x2d);
    ddl.status.sql_require_primary_key = Some(0);
    assert_same(&f, 570, 1, true, &ddl);

    // BEGIN at 924 (default database "mysql", SUPPRESS_USE flag).
    let begin = QueryEvent {
        schema: "mysql",
        ..QueryEvent::begin(9)
    };
    assert_same(&f, 924, 1, true, &begin);
    assert_eq!(event(&f, 924).1.flags, flags::SUPPRESS_USE);

    // TABLE_MAP + WRITE_ROWS at 1000/1059:
    // CREATE TABLE t(id INT PRIMARY KEY AUTO_INCREMENT, json_col JSON, name VARCHAR(100), age INT)
    let table = TableDef {
        table_id: 0x77,
        schema: "mysql".into(),
        table: "t".into(),
        columns: vec![
            ColumnDef::new("id", ColumnKind::Long).not_null(),
            ColumnDef::new("json_col", ColumnKind::Json),
            ColumnDef::new("name", ColumnKind::VarString { max_bytes: 400 }).collation(255),
            ColumnDef::new("age", ColumnKind::Long),
        ],
        primary_key: vec![0],
    };
    assert_same(
        &f,
        1000,
        1,
        true,
        &TableMap {
            table: &table,
            metadata: RowMetadata::Minimal,
        },
    );
    let doc = Json::Object(vec![
        ("name".into(), Json::String("Joe".into())),
        ("age".into(), Json::Int(24)),
        ("data".into(), Json::String("x".repeat(10))),
    ]);
    let row = [
        Value::Int(1),
        Value::Json(doc),
        Value::Bytes(b"Joe".to_vec()),
        Value::Int(24),
    ];
    let (want, h) = event(&f, 1059);
    let mut w = EventWriter::new(1, true);
    let mut buf = Vec::new();
    let mut rw = w.rows(&mut buf, 1059, h.timestamp, &table, RowsKind::Write);
    rw.write_row(&row).unwrap();
    assert_eq!(rw.finish().unwrap(), 1164);
    assert_eq!(hex::encode(&buf), hex::encode(want));
    assert_same(&f, 1164, 1, true, &Xid(0x2f));
}

/// MySQL 8.0.28 (mysql-enum-string-set.000001): the full 41-entry FDE of 8.0.26+, a GTID event
/// and a TABLE_MAP with FULL metadata over CHAR/VARCHAR/ENUM/SET/TEXT.
#[test]
fn mysql_8_0_28_full_metadata() {
    let f = data("mysql-enum-string-set.000001");
    let (_, h) = event(&f, 4);
    assert_same(
        &f,
        4,
        1,
        true,
        &FormatDescription::mysql80("8.0.28", h.timestamp, ChecksumAlg::Crc32),
    );

    let (raw, _) = event(&f, 157);
    let b = &raw[19..];
    let le = |s: &[u8]| {
        let mut a = [0u8; 8];
        a[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(a)
    };
    let mut sid = [0u8; 16];
    sid.copy_from_slice(&b[1..17]);
    let g = GtidEvent {
        flags: b[0],
        transaction_length: 336,
        ..GtidEvent::new(Sid(sid), le(&b[17..25]), 1, le(&b[42..49]), 80028)
    };
    assert_eq!(g.gno, 1);
    assert_same(&f, 157, 1, true, &g);
    assert_eq!(GtidEvent::parse(&b[..b.len() - 4], false).unwrap(), g);

    let strs = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let table = TableDef {
        table_id: 0x7c,
        schema: "mysql".into(),
        table: "t".into(),
        columns: vec![
            ColumnDef::new("f1", ColumnKind::String { max_bytes: 512 }).collation(255),
            ColumnDef::new("f2", ColumnKind::VarString { max_bytes: 1200 }).collation(255),
            ColumnDef::new(
                "f3",
                ColumnKind::enumeration(strs(&["var1", "variant2", "foo"])),
            )
            .collation(255),
            ColumnDef::new(
                "f4",
                ColumnKind::set(strs(&["one", "two", "three", "four"])),
            )
            .collation(255),
            ColumnDef::new("f5", ColumnKind::Blob { pack_len: 2 }).collation(255),
        ],
        primary_key: vec![],
    };
    assert_same(&f, 946, 1, true, &TableMap::new(&table));
}

/// MariaDB 10.5.15 (mariadb-bin.000001): FDE with 171 entries, GTID_LIST, BINLOG_CHECKPOINT,
/// GTID, XID.
#[test]
fn mariadb_10_5_prologue_and_gtid() {
    let f = data("mariadb-bin.000001");
    let (_, h) = event(&f, 4);
    let fde = FormatDescription::mariadb10(
        "10.5.15-MariaDB-1:10.5.15+maria~focal-log",
        h.timestamp,
        ChecksumAlg::Crc32,
    );
    assert_same(&f, 4, 1, true, &fde);
    assert_same(
        &f,
        256,
        1,
        true,
        &MariadbGtidList {
            gtids: &[],
            flags: 0,
        },
    );
    assert_same(
        &f,
        285,
        1,
        true,
        &MariadbBinlogCheckpoint {
            file: "mariadb-bin.000001",
        },
    );
    let g = MariadbGtidEvent {
        seq_no: 1,
        domain_id: 0,
        flags: events::mariadb::gtid_flags::TRANSACTIONAL
            | events::mariadb::gtid_flags::ALLOW_PARALLEL,
        commit_id: None,
    };
    assert_same(&f, 330, 1, true, &g);
    assert_same(&f, 671, 1, true, &Xid(0x320));
}

/// MariaDB 10.11.19, the GTID_LIST at the start of a second binlog file (`FLUSH BINARY LOGS`
/// after three transactions of server 9): one GTID, 0-9-3, and no bytes after the list.
#[test]
fn mariadb_10_11_gtid_list_with_one_gtid() {
    let want = "2c880d6ba3090000002b0000002b01000000000100000000000000090000000300000000000000\
                5f2308b2";
    let mut file = vec![0u8; 256];
    file.extend_from_slice(&hex::decode(want).unwrap());
    assert_same(
        &file,
        256,
        9,
        true,
        &MariadbGtidList {
            gtids: &[MariadbGtid {
                domain_id: 0,
                server_id: 9,
                seq_no: 3,
            }],
            flags: 0,
        },
    );
}

/// MySQL 5.6.24 (binlog_transaction_with_GTID.000001): a STOP event.
#[test]
fn mysql_5_6_stop() {
    let f = data("binlog_transaction_with_GTID.000001");
    assert_same(&f, 766, 1, true, &Stop);
}

/// Hand-built ROTATE and HEARTBEAT vectors checked against MySQL's event layouts.
#[test]
fn rotate_and_heartbeats_by_hand() {
    let mut w = EventWriter::new(1, false);
    let mut buf = Vec::new();
    w.write_with(
        &mut buf,
        EventMeta {
            timestamp: 0,
            log_pos: LogPos::Fixed(0),
            flags: flags::ARTIFICIAL,
        },
        &Rotate {
            position: 4,
            next_file: "b.000001",
        },
    )
    .unwrap();
    assert_eq!(
        hex::encode(&buf),
        concat!(
            "00000000",
            "04",
            "01000000",
            "23000000",
            "00000000",
            "2000",
            "0400000000000000",
            "622e303030303031"
        )
    );
    buf.clear();
    w.write_with(
        &mut buf,
        EventMeta {
            timestamp: 0,
            log_pos: LogPos::Fixed(300),
            flags: 0,
        },
        &HeartbeatV2 {
            file: "b.1",
            position: 300,
        },
    )
    .unwrap();
    // type 1, len 3, "b.1"; type 2, len 3, lenenc(300) = FC 2C 01; end mark 0
    assert_eq!(hex::encode(&buf[19..]), "0103622e310203fc2c0100");
    let r = Rotate::parse(&[4, 0, 0, 0, 0, 0, 0, 0, b'x']).unwrap();
    assert_eq!((r.position, r.next_file), (4, "x"));
    assert!(Rotate::parse(&[4, 0]).is_err());
}

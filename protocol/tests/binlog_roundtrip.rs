//! Differential tests: events written by our codec are read back by mysql_common's binlog parser
//! (`EventStreamReader` / `BinlogFile`) and every field and row value is compared.
#![allow(clippy::unwrap_used)]

mod binlog_support;

use binlog_support::*;
use mysql_common::binlog::consts::BinlogVersion;
use mysql_common::binlog::events::Event;
use mysql_common::binlog::events::{EventData, OptionalMetadataField};
use mysql_common::binlog::{BinlogFile, EventStreamReader};
use tibinlog_protocol::binlog::*;
use tibinlog_protocol::value::Value;

const SERVER_ID: u32 = 77;
const TS: u32 = 1_700_000_000;
const SERVER_VERSION: &str = "8.0.36-tibinlog";

fn uuid() -> Sid {
    Sid::parse("3e11fa47-71ca-11e1-9e33-c80aa9429562").unwrap()
}

/// Writes a whole file: magic, FDE, PREVIOUS_GTIDS, transactions built by `body`, ROTATE.
fn build_file(
    checksum: bool,
    body: impl FnOnce(&mut EventWriter, &mut Vec<u8>, u64) -> u64,
) -> Vec<u8> {
    let mut w = EventWriter::new(SERVER_ID, checksum);
    let mut buf = BINLOG_MAGIC.to_vec();
    let alg = if checksum {
        ChecksumAlg::Crc32
    } else {
        ChecksumAlg::Off
    };
    let mut pos = w
        .write(
            &mut buf,
            4,
            TS,
            &FormatDescription::mysql80(SERVER_VERSION, TS, alg),
        )
        .unwrap();
    assert_eq!(pos, 126, "MySQL 8.0's FDE ends at 126");
    let prev = GtidSet::parse(&format!("{}:1-10", uuid())).unwrap();
    pos = w.write(&mut buf, pos, TS, &PreviousGtids(&prev)).unwrap();
    pos = body(&mut w, &mut buf, pos);
    let end = w
        .write(
            &mut buf,
            pos,
            TS,
            &Rotate {
                position: 4,
                next_file: "binlog.000002",
            },
        )
        .unwrap();
    assert_eq!(end as usize, buf.len());
    buf
}

fn read_all(file: &[u8]) -> Vec<Event> {
    let f = BinlogFile::new(BinlogVersion::Version4, file).unwrap();
    f.map(|e| e.unwrap()).collect()
}

/// Checks positions: every event's log_pos = previous end + its size, contiguous from 4.
fn assert_positions(events: &[Event]) {
    let mut pos = 4u32;
    for e in events {
        let h = e.header();
        assert_eq!(h.server_id(), SERVER_ID);
        assert_eq!(
            h.log_pos(),
            pos + h.event_size(),
            "event type {}",
            h.event_type_raw()
        );
        pos = h.log_pos();
    }
}

fn full_transaction(
    w: &mut EventWriter,
    buf: &mut Vec<u8>,
    pos: u64,
    table: &TableDef,
    rows: &[Vec<Value>],
    gno: u64,
) -> u64 {
    let mut gtid = GtidEvent::new(uuid(), gno, 1, u64::from(TS) * 1_000_000 + 5, 80036);
    gtid.original_commit_timestamp = 1_600_000_000_000_000;
    let mut tx = Transaction::begin(w, buf, pos, TS, gtid);
    tx.write(&QueryEvent::begin(9)).unwrap();
    tx.write(&TableMap::new(table)).unwrap();
    tx.rows(table, RowsKind::Write, |r| {
        rows.iter().try_for_each(|row| r.write_row(row))
    })
    .unwrap();
    tx.write(&TableMap::new(table)).unwrap();
    tx.rows(table, RowsKind::Update, |r| {
        rows.iter()
            .zip(rows.iter().rev())
            .try_for_each(|(a, b)| r.update_row(a, b))
    })
    .unwrap();
    tx.write(&TableMap::new(table)).unwrap();
    tx.rows(table, RowsKind::Delete, |r| {
        rows.iter().try_for_each(|row| r.write_row(row))
    })
    .unwrap();
    tx.commit(4242).unwrap()
}

fn check_full_file(checksum: bool) {
    let table = all_types_table(0x0012_3456_789A);
    let rows = sample_rows(&table);
    let file = build_file(checksum, |w, buf, pos| {
        full_transaction(w, buf, pos, &table, &rows, 11)
    });
    let events = read_all(&file);
    assert_positions(&events);

    let mut reader_tme = None;
    let (mut writes, mut updates, mut deletes) = (0, 0, 0);
    let mut stmt_ends = 0;
    let mut gtid_len = None;
    let mut tx_bytes = 0u64;
    for e in &events {
        if checksum {
            assert!(e.checksum().is_some());
        }
        if gtid_len.is_some() && e.header().event_type_raw() != 4 {
            tx_bytes += u64::from(e.header().event_size());
        }
        match e.read_data().unwrap().unwrap() {
            EventData::FormatDescriptionEvent(fde) => {
                assert_eq!(fde.server_version().trim_end_matches('\0'), SERVER_VERSION);
                assert_eq!(fde.create_timestamp(), TS);
                assert_eq!(fde.event_header_length(), 19);
                let mut want =
                    tibinlog_protocol::binlog::events::format_desc::MYSQL_80_POST_HEADER_LENGTHS
                        .to_vec();
                want[14] = 57 + 41;
                assert_eq!(fde.event_type_header_lengths(), &want[..]);
                let alg = e.footer().get_checksum_alg().unwrap().unwrap();
                assert_eq!(alg as u8, u8::from(checksum));
            }
            EventData::PreviousGtidsEvent(p) => {
                assert_eq!(e.header().flags_raw(), flags::IGNORABLE);
                assert_eq!(p.sids().len(), 1);
                assert_eq!(p.sids()[0].uuid(), uuid().0);
                let iv = p.sids()[0].intervals();
                assert_eq!((iv.len(), iv[0].start(), iv[0].end()), (1, 1, 11));
            }
            EventData::GtidEvent(g) => {
                assert_eq!(g.sid(), uuid().0);
                assert_eq!(g.gno(), 11);
                assert_eq!(g.lc_typecode(), Some(2));
                assert_eq!((g.last_committed(), g.sequence_number()), (0, 1));
                assert_eq!(
                    g.immediate_commit_timestamp(),
                    u64::from(TS) * 1_000_000 + 5
                );
                assert_eq!(g.original_commit_timestamp(), 1_600_000_000_000_000);
                assert_eq!(
                    (g.immediate_server_version(), g.original_server_version()),
                    (80036, 80036)
                );
                gtid_len = Some(g.tx_length());
                tx_bytes = u64::from(e.header().event_size());
            }
            EventData::QueryEvent(q) => {
                assert_eq!(q.query(), "BEGIN");
                assert_eq!(q.schema(), "");
                assert_eq!(q.thread_id(), 9);
                assert!(q.status_vars().iter().all(|v| v.get_value().is_ok()));
                let mut sv = Vec::new();
                QueryStatus::MYSQL80_DEFAULT.encode_into(&mut sv).unwrap();
                assert_eq!(q.status_vars_raw(), &sv[..]);
                assert_eq!(e.header().event_size(), if checksum { 71 } else { 67 });
            }
            EventData::TableMapEvent(t) => {
                assert_eq!(t.table_id(), table.table_id);
                assert_eq!(t.database_name(), "db1");
                assert_eq!(t.table_name(), "all_types");
                assert_eq!(t.columns_count(), table.columns.len() as u64);
                for (i, c) in table.columns.iter().enumerate() {
                    assert_eq!(
                        t.get_raw_column_type(i).unwrap().unwrap() as u8,
                        c.kind.binlog_type(),
                        "col {i}"
                    );
                    let mut m = Vec::new();
                    c.kind.put_metadata(&mut m);
                    assert_eq!(t.get_column_metadata(i).unwrap(), &m[..], "col {i}");
                    assert_eq!(t.null_bitmask()[i], c.nullable);
                }
                check_optional_metadata(&table, &t);
                reader_tme = Some(t.into_owned());
            }
            EventData::RowsEvent(r) => {
                let tme = reader_tme.as_ref().unwrap();
                assert_eq!(r.table_id(), table.table_id);
                if r.flags().bits() & 1 != 0 {
                    stmt_ends += 1;
                }
                for row in r.rows(tme) {
                    let (before, after) = row.unwrap();
                    match e.header().event_type_raw() {
                        30 => {
                            assert_row(&table, &rows[writes % rows.len()], after.as_ref().unwrap());
                            writes += 1;
                        }
                        31 => {
                            let k = updates % rows.len();
                            assert_row(&table, &rows[k], before.as_ref().unwrap());
                            assert_row(&table, &rows[rows.len() - 1 - k], after.as_ref().unwrap());
                            updates += 1;
                        }
                        32 => {
                            assert_row(
                                &table,
                                &rows[deletes % rows.len()],
                                before.as_ref().unwrap(),
                            );
                            deletes += 1;
                        }
                        t => panic!("rows type {t}"),
                    }
                }
            }
            EventData::XidEvent(x) => assert_eq!(x.xid, 4242),
            EventData::RotateEvent(r) => {
                assert_eq!(r.position(), 4);
                assert_eq!(r.name(), "binlog.000002");
                assert!(!r.is_fake());
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(
        (writes, updates, deletes),
        (rows.len(), rows.len(), rows.len())
    );
    assert_eq!(stmt_ends, 3);
    assert_eq!(
        gtid_len,
        Some(tx_bytes),
        "transaction_length = bytes GTID..XID"
    );
    // The 64 KiB+ values force several rows events per statement.
    let rows_events = events
        .iter()
        .filter(|e| (30..=32).contains(&e.header().event_type_raw()))
        .count();
    assert!(rows_events > 3, "{rows_events}");
}

fn check_optional_metadata(table: &TableDef, t: &mysql_common::binlog::events::TableMapEvent<'_>) {
    let mut seen = Vec::new();
    for f in t.iter_optional_meta() {
        match f.unwrap() {
            OptionalMetadataField::Signedness(bits) => {
                let want: Vec<bool> = table
                    .columns
                    .iter()
                    .filter(|c| c.kind.is_numeric())
                    .map(|c| c.unsigned)
                    .collect();
                assert_eq!(bits.iter().by_vals().collect::<Vec<_>>(), want);
                seen.push(1);
            }
            OptionalMetadataField::DefaultCharset(d) => {
                let ids: Vec<u16> = table
                    .columns
                    .iter()
                    .filter(|c| c.kind.is_character())
                    .map(|c| c.collation_id())
                    .collect();
                let mut got = vec![d.default_charset(); ids.len()];
                for nd in d.iter_non_default() {
                    let nd = nd.unwrap();
                    got[nd.column_index() as usize] = nd.charset();
                }
                assert_eq!(got, ids);
                seen.push(2);
            }
            OptionalMetadataField::ColumnCharset(cs) => {
                let ids: Vec<u16> = table
                    .columns
                    .iter()
                    .filter(|c| c.kind.is_character())
                    .map(|c| c.collation_id())
                    .collect();
                assert_eq!(
                    cs.iter_charsets().map(|x| x.unwrap()).collect::<Vec<_>>(),
                    ids
                );
                seen.push(3);
            }
            OptionalMetadataField::ColumnName(n) => {
                let names: Vec<String> = n
                    .iter_names()
                    .map(|x| x.unwrap().name().into_owned())
                    .collect();
                assert_eq!(
                    names,
                    table
                        .columns
                        .iter()
                        .map(|c| c.name.clone())
                        .collect::<Vec<_>>()
                );
                seen.push(4);
            }
            OptionalMetadataField::SetStrValue(s) => {
                let got: Vec<Vec<Vec<u8>>> = s
                    .iter_values()
                    .map(|v| {
                        v.unwrap()
                            .values()
                            .iter()
                            .map(|x| x.value_raw().to_vec())
                            .collect()
                    })
                    .collect();
                let want: Vec<Vec<Vec<u8>>> = table
                    .columns
                    .iter()
                    .filter_map(|c| match &c.kind {
                        ColumnKind::Set { members, .. } => Some(members.clone()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(got, want);
                seen.push(5);
            }
            OptionalMetadataField::EnumStrValue(s) => {
                let got: Vec<Vec<Vec<u8>>> = s
                    .iter_values()
                    .map(|v| {
                        v.unwrap()
                            .values()
                            .iter()
                            .map(|x| x.value_raw().to_vec())
                            .collect()
                    })
                    .collect();
                let want: Vec<Vec<Vec<u8>>> = table
                    .columns
                    .iter()
                    .filter_map(|c| match &c.kind {
                        ColumnKind::Enum { members, .. } => Some(members.clone()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(got, want);
                seen.push(6);
            }
            OptionalMetadataField::GeometryType(g) => {
                assert_eq!(
                    g.iter_geometry_types()
                        .map(|x| x.unwrap() as u8)
                        .collect::<Vec<_>>(),
                    vec![0]
                );
                seen.push(7);
            }
            OptionalMetadataField::SimplePrimaryKey(pk) => {
                let got: Vec<u16> = pk.iter_indexes().map(|x| x.unwrap() as u16).collect();
                assert_eq!(got, table.primary_key);
                seen.push(8);
            }
            OptionalMetadataField::EnumAndSetDefaultCharset(d) => {
                let ids: Vec<u16> = table
                    .columns
                    .iter()
                    .filter(|c| c.kind.is_enum_or_set())
                    .map(|c| c.collation_id())
                    .collect();
                let mut got = vec![d.default_charset(); ids.len()];
                for nd in d.iter_non_default() {
                    let nd = nd.unwrap();
                    got[nd.column_index() as usize] = nd.charset();
                }
                assert_eq!(got, ids);
                seen.push(10);
            }
            OptionalMetadataField::EnumAndSetColumnCharset(cs) => {
                let ids: Vec<u16> = table
                    .columns
                    .iter()
                    .filter(|c| c.kind.is_enum_or_set())
                    .map(|c| c.collation_id())
                    .collect();
                assert_eq!(
                    cs.iter_charsets().map(|x| x.unwrap()).collect::<Vec<_>>(),
                    ids
                );
                seen.push(11);
            }
            OptionalMetadataField::ColumnVisibility(bits) => {
                assert!(bits.iter().by_vals().all(|b| b) && bits.len() == table.columns.len());
                seen.push(12);
            }
            other => panic!("unexpected TLV {other:?}"),
        }
    }
    // DEFAULT_CHARSET (2) and COLUMN_CHARSET (3) are alternatives, as are 10 and 11.
    let mut seen: Vec<u8> = seen
        .into_iter()
        .map(|t| match t {
            3 => 2,
            11 => 10,
            t => t,
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, [1, 2, 4, 5, 6, 7, 8, 10, 12]);
}

#[test]
fn full_file_with_checksums_reads_back() {
    check_full_file(true);
}

#[test]
fn full_file_without_checksums_reads_back() {
    check_full_file(false);
}

#[test]
fn anonymous_gtid_ddl_and_heartbeat_stream() {
    let table = all_types_table(7);
    let mut w = EventWriter::new(SERVER_ID, true);
    let mut buf = Vec::new();
    // A dump stream: fake ROTATE, FDE with log_pos 0, then events.
    w.write_with(
        &mut buf,
        EventMeta {
            timestamp: 0,
            log_pos: LogPos::Fixed(0),
            flags: flags::ARTIFICIAL,
        },
        &Rotate {
            position: 4,
            next_file: "binlog.000001",
        },
    )
    .unwrap();
    let fde = FormatDescription::mysql80(SERVER_VERSION, 0, ChecksumAlg::Crc32);
    w.write_with(
        &mut buf,
        EventMeta {
            timestamp: TS,
            log_pos: LogPos::Fixed(0),
            flags: 0,
        },
        &fde,
    )
    .unwrap();
    let mut pos = 126;
    let gtid = GtidEvent {
        flags: 1,
        ..GtidEvent::anonymous(3, 99, 80036)
    };
    let dbs = ["db1"];
    let mut tx = Transaction::begin(&mut w, &mut buf, pos, TS, gtid);
    tx.write(&QueryEvent::ddl(
        5,
        "db1",
        "CREATE TABLE t (a INT)",
        &dbs,
        17,
    ))
    .unwrap();
    pos = tx.finish().unwrap();
    // a transaction in which the GTID's length width grows past the 3-byte guess
    let rows = vec![vec![Value::Null; table.columns.len()]; 1];
    let mut rows = rows;
    rows[0][0] = Value::Int(1);
    let mb = table.columns.iter().position(|c| c.name == "mb").unwrap();
    rows[0][mb] = Value::Bytes(vec![b'q'; 70_000]);
    let before = buf.len();
    let mut tx = Transaction::begin(
        &mut w,
        &mut buf,
        pos,
        TS,
        GtidEvent::anonymous(4, 100, 80036),
    );
    tx.write(&QueryEvent::begin(5)).unwrap();
    tx.write(&TableMap::new(&table)).unwrap();
    tx.rows(&table, RowsKind::Write, |r| r.write_row(&rows[0]))
        .unwrap();
    let end = tx.commit(18).unwrap();
    assert_eq!(end - pos, (buf.len() - before) as u64);
    w.write_with(
        &mut buf,
        EventMeta {
            timestamp: 0,
            log_pos: LogPos::Fixed(end as u32),
            flags: 0,
        },
        &Heartbeat {
            file: "binlog.000001",
        },
    )
    .unwrap();

    let mut r = EventStreamReader::new(BinlogVersion::Version4);
    let mut input = &buf[..];
    let mut types = Vec::new();
    let mut expected_pos = 126u32;
    while let Some(e) = r.read(&mut input).unwrap() {
        let h = e.header();
        types.push(h.event_type_raw());
        match e.read_data().unwrap() {
            // mysql_common's `is_fake` tests the body position for 0; MySQL marks a fake ROTATE by
            // log_pos 0 and the ARTIFICIAL flag and keeps the requested position in the body.
            Some(EventData::RotateEvent(rot)) => {
                assert_eq!(
                    (h.log_pos(), h.flags_raw(), rot.position()),
                    (0, flags::ARTIFICIAL, 4)
                );
            }
            Some(EventData::FormatDescriptionEvent(_)) => assert_eq!(h.log_pos(), 0),
            Some(EventData::AnonymousGtidEvent(g)) => {
                assert_eq!(g.0.gno(), 0);
                if g.0.sequence_number() == 4 {
                    assert_eq!(g.0.tx_length(), end - pos);
                } else {
                    assert_eq!(g.0.flags_raw(), 1);
                }
            }
            Some(EventData::QueryEvent(q)) if q.query() != "BEGIN" => {
                assert_eq!(q.schema(), "db1");
                assert!(q.status_vars().iter().all(|v| v.get_value().is_ok()));
                let sv = q.status_vars_raw();
                // FLAGS2, SQL_MODE, CATALOG_NZ, CHARSET, UPDATED_DB_NAMES, DDL_LOGGED_WITH_XID, DEFAULT_COLLATION
                assert_eq!(sv.len(), 5 + 9 + 5 + 7 + 6 + 9 + 3);
                assert_eq!(&sv[26..32], &[12, 1, b'd', b'b', b'1', 0]);
                assert_eq!(&sv[32..41], &[17, 17, 0, 0, 0, 0, 0, 0, 0]);
            }
            Some(EventData::RowsEvent(rows_ev)) => {
                let tme = r.get_tme(rows_ev.table_id()).unwrap();
                for row in rows_ev.rows(tme) {
                    assert_row(&table, &rows[0], row.unwrap().1.as_ref().unwrap());
                }
            }
            Some(EventData::HeartbeatEvent) => assert_eq!(h.log_pos() as u64, end),
            _ => {}
        }
        if h.log_pos() != 0 && h.event_type_raw() != 27 {
            assert_eq!(h.log_pos(), expected_pos + h.event_size());
            expected_pos = h.log_pos();
        }
    }
    assert_eq!(types, [4, 15, 34, 2, 34, 2, 19, 30, 16, 27]);
}

#[test]
fn bad_value_leaves_no_bytes() {
    let table = all_types_table(9);
    let mut rows = sample_rows(&table);
    let mut w = EventWriter::new(SERVER_ID, true);
    let mut buf = Vec::new();
    let mut tx = Transaction::begin(&mut w, &mut buf, 4, TS, GtidEvent::anonymous(1, 1, 80036));
    tx.write(&QueryEvent::begin(1)).unwrap();
    let mark = tx.pos();
    rows[1][1] = Value::Int(1000); // TINYINT
    let err = tx
        .rows(&table, RowsKind::Write, |r| {
            rows.iter().try_for_each(|row| r.write_row(row))
        })
        .unwrap_err();
    assert!(err.is_value_error(), "{err}");
    assert_eq!(tx.pos(), mark);
    tx.abort();
    assert!(buf.is_empty());
}

/// A file a huge transaction took past 4 GiB: `log_pos` wraps modulo 2^32 as MySQL writes it
/// (`int4store` of the 64-bit end), the event stays valid for mysql_common (header and CRC),
/// and shifting a run of events across the boundary wraps the same way.
#[test]
fn log_pos_past_four_gib_wraps_like_mysql() {
    use mysql_common::binlog::events::BinlogEventHeader;
    use mysql_common::io::ParseBuf;
    use mysql_common::proto::MyDeserialize;

    let mut w = EventWriter::new(SERVER_ID, true);
    let start = u64::from(u32::MAX) - 10;
    let mut buf = Vec::new();
    let end = w.write(&mut buf, start, TS, &Xid(4242)).unwrap();
    assert_eq!(end, start + buf.len() as u64, "offsets stay 64-bit");
    let header = BinlogEventHeader::deserialize((), &mut ParseBuf(&buf[..19])).unwrap();
    assert_eq!(u64::from(header.log_pos()), end - (1 << 32));
    assert_eq!(header.log_pos(), (end & 0xFFFF_FFFF) as u32);
    let fde = FormatDescription::mysql80(SERVER_VERSION, TS, ChecksumAlg::Crc32);
    let mut fde_buf = Vec::new();
    w.write(&mut fde_buf, 4, TS, &fde).unwrap();
    let mut reader = EventStreamReader::new(BinlogVersion::Version4);
    reader.read(&fde_buf[..]).unwrap();
    let ev = reader.read(&buf[..]).unwrap().unwrap();
    assert!(ev.header().log_pos() < 100, "wrapped");
    match ev.read_data().unwrap().unwrap() {
        EventData::XidEvent(x) => assert_eq!(x.xid, 4242),
        other => panic!("unexpected {other:?}"),
    }
    // Two events written below the boundary, moved past it (bytes inserted before them).
    let mut run = Vec::new();
    let mid = w.write(&mut run, start - 100, TS, &Xid(1)).unwrap();
    w.write(&mut run, mid, TS, &Xid(2)).unwrap();
    shift_log_pos(&mut run, 100, true).unwrap();
    let mut again = Vec::new();
    let mid2 = w.write(&mut again, start, TS, &Xid(1)).unwrap();
    w.write(&mut again, mid2, TS, &Xid(2)).unwrap();
    assert_eq!(
        run, again,
        "shifted bytes equal bytes written there, CRCs included"
    );
}

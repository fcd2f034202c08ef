//! `tibinlog inspect binlog FILE`: print the events of a binlog file the way `mysqlbinlog -vv` does.
//!
//! Framing (magic, headers, sizes, checksums) is checked here, so a truncated or corrupt file gives a
//! clear error with the offending position; the body of every complete event is then decoded by
//! `mysql_common`'s binlog parser, an implementation independent of our encoder. MariaDB-only
//! events (GTID, GTID_LIST, BINLOG_CHECKPOINT, ANNOTATE_ROWS) are decoded here since that parser
//! does not know them.
//!
//! ```text
//! file  = fe 62 69 6e ("\xfebin") event*
//! event = header(19) body [crc32(4) when the FORMAT_DESCRIPTION says CRC32]
//! header = timestamp u32 | type u8 | server_id u32 | event_size u32 | log_pos u32 | flags u16  (LE)
//! ```

use std::fmt::Write as _;
use std::io::{self, Read, Write};

use mysql_common::binlog::consts::BinlogVersion;
use mysql_common::binlog::events::{Event, EventData, RowsEventData};
use mysql_common::binlog::EventStreamReader;

use super::rows;

/// First four bytes of every binlog file.
pub const BINLOG_MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];
const HEADER_LEN: usize = 19;
const CHECKSUM_LEN: usize = 4;
/// Largest event we accept (MySQL's `max_allowed_packet` ceiling is 1 GiB).
const MAX_EVENT_SIZE: u32 = 1 << 30;
const FORMAT_DESCRIPTION_EVENT: u8 = 15;

/// What can go wrong while reading a binlog file; every variant names the file position.
#[derive(Debug, thiserror::Error)]
pub enum InspectBinlogError {
    #[error("not a binlog file: first bytes are {found}, expected fe62696e")]
    BadMagic { found: String },
    #[error("truncated event header at position {pos}: {have} of 19 bytes")]
    TruncatedHeader { pos: u64, have: usize },
    #[error("event at position {pos} has impossible size {size}")]
    BadEventSize { pos: u64, size: u32 },
    #[error("truncated event at position {pos}: event size {size}, only {have} bytes left")]
    TruncatedEvent { pos: u64, size: u32, have: usize },
    #[error("checksum mismatch in event at position {pos}: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        pos: u64,
        stored: u32,
        computed: u32,
    },
    #[error("cannot decode event (type {event_type}) at position {pos}")]
    Decode {
        pos: u64,
        event_type: u8,
        #[source]
        source: io::Error,
    },
    #[error(
        "rows event at position {pos} refers to table id {table_id} with no TABLE_MAP before it"
    )]
    NoTableMap { pos: u64, table_id: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Counters returned after a dump, so callers and tests can check what was read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DumpSummary {
    pub events: u64,
    pub rows: u64,
    /// Position just past the last complete event.
    pub end_pos: u64,
}

/// Reads a whole binlog from `input` and writes the `mysqlbinlog -vv` style listing to `out`.
pub fn dump(mut input: impl Read, out: &mut impl Write) -> Result<DumpSummary, InspectBinlogError> {
    let mut data = Vec::new();
    input.read_to_end(&mut data)?;
    dump_bytes(&data, out)
}

/// As [`dump`], over bytes already in memory.
pub fn dump_bytes(data: &[u8], out: &mut impl Write) -> Result<DumpSummary, InspectBinlogError> {
    if data.len() < BINLOG_MAGIC.len() || data[..4] != BINLOG_MAGIC {
        return Err(InspectBinlogError::BadMagic {
            found: hex::encode(&data[..data.len().min(4)]),
        });
    }
    writeln!(out, "DELIMITER /*!*/;")?;
    let mut reader = EventStreamReader::new(BinlogVersion::Version4);
    let mut checksum = false;
    let mut summary = DumpSummary {
        end_pos: 4,
        ..DumpSummary::default()
    };
    let mut text = String::new();
    let mut pos = 4usize;
    while pos < data.len() {
        let rest = &data[pos..];
        if rest.len() < HEADER_LEN {
            return Err(InspectBinlogError::TruncatedHeader {
                pos: pos as u64,
                have: rest.len(),
            });
        }
        let event_type = rest[4];
        let size = u32::from_le_bytes([rest[9], rest[10], rest[11], rest[12]]);
        let is_fde = event_type == FORMAT_DESCRIPTION_EVENT;
        if is_fde {
            checksum = fde_has_checksum(rest, size);
        }
        let min = HEADER_LEN + if checksum { CHECKSUM_LEN } else { 0 };
        if (size as usize) < min || size > MAX_EVENT_SIZE {
            return Err(InspectBinlogError::BadEventSize {
                pos: pos as u64,
                size,
            });
        }
        if rest.len() < size as usize {
            return Err(InspectBinlogError::TruncatedEvent {
                pos: pos as u64,
                size,
                have: rest.len(),
            });
        }
        let bytes = &rest[..size as usize];
        let stored_crc = if checksum {
            let (body, crc) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
            let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
            let computed = event_crc32(body, is_fde);
            if stored != computed {
                return Err(InspectBinlogError::Checksum {
                    pos: pos as u64,
                    stored,
                    computed,
                });
            }
            Some(stored)
        } else {
            None
        };
        let decode_err = |source| InspectBinlogError::Decode {
            pos: pos as u64,
            event_type,
            source,
        };
        let event = reader
            .read(bytes)
            .map_err(decode_err)?
            .ok_or_else(|| decode_err(io::ErrorKind::UnexpectedEof.into()))?;
        text.clear();
        describe_event(
            &reader,
            &event,
            pos as u64,
            stored_crc,
            &mut text,
            &mut summary,
        )?;
        out.write_all(text.as_bytes())?;
        pos += size as usize;
        summary.events += 1;
        summary.end_pos = pos as u64;
    }
    writeln!(out, "# End of log file")?;
    writeln!(out, "DELIMITER ;")?;
    Ok(summary)
}

/// CRC32 of an event without its checksum. A FORMAT_DESCRIPTION's checksum is computed with the
/// LOG_EVENT_BINLOG_IN_USE_F header flag (0x1, set while the server has the file open) cleared, so
/// that closing the file does not change the checksum.
fn event_crc32(body: &[u8], is_fde: bool) -> u32 {
    const IN_USE: u8 = 0x01;
    const FLAGS_OFFSET: usize = 17;
    if is_fde && body[FLAGS_OFFSET] & IN_USE != 0 {
        let mut h = crc32fast::Hasher::new();
        h.update(&body[..FLAGS_OFFSET]);
        h.update(&[body[FLAGS_OFFSET] & !IN_USE]);
        h.update(&body[FLAGS_OFFSET + 1..]);
        h.finalize()
    } else {
        crc32fast::hash(body)
    }
}

/// Whether a FORMAT_DESCRIPTION event announces CRC32 checksums for the events after it (and
/// itself). The algorithm byte sits right before the 4-byte checksum at the end of the event;
/// servers older than 5.6.1 wrote no such byte, which we treat as "no checksum".
fn fde_has_checksum(event: &[u8], size: u32) -> bool {
    let size = size as usize;
    // 19 header + 2 version + 50 server version + 4 timestamp + 1 header length = 76, then the
    // post-header length table, then alg(1) + crc(4).
    if size < 76 + 5 || event.len() < size {
        return false;
    }
    event[size - CHECKSUM_LEN - 1] == 1
}

fn describe_event(
    reader: &EventStreamReader,
    event: &Event,
    pos: u64,
    crc: Option<u32>,
    s: &mut String,
    summary: &mut DumpSummary,
) -> Result<(), InspectBinlogError> {
    let h = event.header();
    let _ = writeln!(s, "# at {pos}");
    let _ = write!(
        s,
        "#{} server id {}  end_log_pos {}",
        format_timestamp(h.timestamp()),
        h.server_id(),
        h.log_pos()
    );
    if let Some(crc) = crc {
        let _ = write!(s, " CRC32 {crc:#010x}");
    }
    let _ = write!(s, " \t");
    let decode_err = |source| InspectBinlogError::Decode {
        pos,
        event_type: h.event_type_raw(),
        source,
    };
    let data = match event.read_data().map_err(decode_err)? {
        Some(d) => d,
        None => {
            describe_other(h.event_type_raw(), event.data(), s);
            return Ok(());
        }
    };
    match data {
        EventData::FormatDescriptionEvent(fde) => {
            let _ = writeln!(
                s,
                "Start: binlog v 4, server v {} created {}",
                fde.server_version().trim_end_matches(char::from(0)),
                format_timestamp(fde.create_timestamp())
            );
        }
        EventData::RotateEvent(r) => {
            let _ = writeln!(s, "Rotate to {}  pos: {}", r.name(), r.position());
        }
        EventData::PreviousGtidsEvent(p) => {
            let _ = writeln!(s, "Previous-GTIDs");
            let sids: Vec<String> = p
                .sids()
                .iter()
                .map(|sid| {
                    let mut t = format_uuid(&sid.uuid());
                    for iv in sid.intervals() {
                        if iv.end() == iv.start() + 1 {
                            let _ = write!(t, ":{}", iv.start());
                        } else {
                            let _ = write!(t, ":{}-{}", iv.start(), iv.end() - 1);
                        }
                    }
                    t
                })
                .collect();
            let _ = writeln!(s, "# {}", sids.join(",\n# "));
        }
        EventData::GtidEvent(g) => {
            let _ = writeln!(
                s,
                "GTID\tlast_committed={}\tsequence_number={}\trbr_only={}\toriginal_committed_timestamp={}\timmediate_commit_timestamp={}\ttransaction_length={}",
                g.last_committed(),
                g.sequence_number(),
                if g.flags_raw() & 1 == 1 { "yes" } else { "no" },
                g.original_commit_timestamp(),
                g.immediate_commit_timestamp(),
                g.tx_length()
            );
            let _ = writeln!(
                s,
                "SET @@SESSION.GTID_NEXT= '{}:{}'/*!*/;",
                format_uuid(&g.sid()),
                g.gno()
            );
        }
        EventData::AnonymousGtidEvent(g) => {
            let _ = writeln!(
                s,
                "Anonymous_GTID\tlast_committed={}\tsequence_number={}",
                g.0.last_committed(),
                g.0.sequence_number()
            );
            let _ = writeln!(s, "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'/*!*/;");
        }
        EventData::QueryEvent(q) => {
            let _ = writeln!(
                s,
                "Query\tthread_id={}\texec_time={}\terror_code={}",
                q.thread_id(),
                q.execution_time(),
                q.error_code()
            );
            if !q.schema_raw().is_empty() {
                let _ = writeln!(s, "use `{}`/*!*/;", q.schema());
            }
            let _ = writeln!(s, "{}\n/*!*/;", q.query());
        }
        EventData::XidEvent(x) => {
            let _ = writeln!(s, "Xid = {}\nCOMMIT/*!*/;", x.xid);
        }
        EventData::TableMapEvent(t) => {
            let _ = writeln!(
                s,
                "Table_map: `{}`.`{}` mapped to number {}",
                t.database_name(),
                t.table_name(),
                t.table_id()
            );
        }
        EventData::RowsEvent(rows) => {
            describe_rows(reader, &rows, pos, s, summary)?;
        }
        EventData::StopEvent => {
            let _ = writeln!(s, "Stop");
        }
        EventData::HeartbeatEvent => {
            let _ = writeln!(s, "Heartbeat");
        }
        EventData::RowsQueryEvent(q) => {
            let _ = writeln!(s, "Rows_query\n# {}", q.query());
        }
        EventData::IntvarEvent(_) => {
            let _ = writeln!(s, "Intvar");
        }
        _ => {
            let _ = writeln!(s, "Event type {}", h.event_type_raw());
        }
    }
    Ok(())
}

/// MariaDB-only events and anything else the parser does not know.
fn describe_other(code: u8, body: &[u8], s: &mut String) {
    match code {
        160 => {
            let _ = writeln!(s, "Annotate_rows:\n#Q> {}", String::from_utf8_lossy(body));
        }
        161 => {
            let name = body.get(4..).unwrap_or_default();
            let _ = writeln!(s, "Binlog checkpoint {}", String::from_utf8_lossy(name));
        }
        162 if body.len() >= 13 => {
            let seq = u64::from_le_bytes(body[0..8].try_into().unwrap_or_default());
            let domain = u32::from_le_bytes(body[8..12].try_into().unwrap_or_default());
            let flags = body[12];
            let standalone = flags & 0x01 != 0;
            let _ = writeln!(
                s,
                "GTID {domain}-?-{seq} {}",
                if standalone { "ddl" } else { "trans" }
            );
        }
        163 if body.len() >= 4 => {
            let count = u32::from_le_bytes(body[0..4].try_into().unwrap_or_default()) & 0x0fff_ffff;
            let mut list = Vec::new();
            for i in 0..count as usize {
                let Some(e) = body.get(4 + i * 16..4 + (i + 1) * 16) else {
                    break;
                };
                let domain = u32::from_le_bytes(e[0..4].try_into().unwrap_or_default());
                let server = u32::from_le_bytes(e[4..8].try_into().unwrap_or_default());
                let seq = u64::from_le_bytes(e[8..16].try_into().unwrap_or_default());
                list.push(format!("{domain}-{server}-{seq}"));
            }
            let _ = writeln!(s, "Gtid list [{}]", list.join(",\n# "));
        }
        _ => {
            let _ = writeln!(s, "Unknown event type {code} ({} bytes)", body.len());
        }
    }
}

fn describe_rows(
    reader: &EventStreamReader,
    rows: &RowsEventData<'_>,
    pos: u64,
    s: &mut String,
    summary: &mut DumpSummary,
) -> Result<(), InspectBinlogError> {
    let table_id = rows.table_id();
    let tme = reader
        .get_tme(table_id)
        .ok_or(InspectBinlogError::NoTableMap { pos, table_id })?;
    let (name, verb) = match rows {
        RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => {
            ("Write_rows", "INSERT INTO")
        }
        RowsEventData::UpdateRowsEvent(_)
        | RowsEventData::UpdateRowsEventV1(_)
        | RowsEventData::PartialUpdateRowsEvent(_) => ("Update_rows", "UPDATE"),
        RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => {
            ("Delete_rows", "DELETE FROM")
        }
    };
    let _ = writeln!(
        s,
        "{name}: table id {table_id}{}",
        if rows.flags().bits() & 1 != 0 {
            " flags: STMT_END_F"
        } else {
            ""
        }
    );
    let cols = rows::columns_of(tme);
    let n = rows.num_columns() as usize;
    let before_cols: Option<Vec<bool>> = rows
        .columns_before_image()
        .map(|b| (0..n).map(|i| b.get(i).is_some_and(|x| *x)).collect());
    let after_cols: Option<Vec<bool>> = rows
        .columns_after_image()
        .map(|b| (0..n).map(|i| b.get(i).is_some_and(|x| *x)).collect());
    let data = rows.rows_data();
    let mut at = 0usize;
    let image_err = |e: rows::RowImageError| InspectBinlogError::Decode {
        pos,
        event_type: 0,
        source: io::Error::new(io::ErrorKind::InvalidData, e),
    };
    while at < data.len() {
        summary.rows += 1;
        let _ = writeln!(
            s,
            "### {verb} `{}`.`{}`",
            tme.database_name(),
            tme.table_name()
        );
        if let Some(present) = &before_cols {
            let _ = writeln!(s, "### WHERE");
            at += rows::describe_image(&cols, present, &data[at..], s).map_err(image_err)?;
        }
        if let Some(present) = &after_cols {
            let _ = writeln!(s, "### SET");
            at += rows::describe_image(&cols, present, &data[at..], s).map_err(image_err)?;
        }
        if before_cols.is_none() && after_cols.is_none() {
            break;
        }
    }
    Ok(())
}

fn format_uuid(b: &[u8; 16]) -> String {
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `YYMMDD HH:MM:SS` in UTC, as `mysqlbinlog` prints event times (it uses the local zone; UTC
/// keeps our output independent of the machine).
fn format_timestamp(ts: u32) -> String {
    let secs = i64::from(ts);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{:02}{:02}{:02} {:2}:{:02}:{:02}",
        y % 100,
        m,
        d,
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_737), (2024, 1, 15));
        assert_eq!(format_timestamp(1_516_331_647), "180119  3:14:07");
    }

    #[test]
    fn rejects_bad_magic_and_truncation() {
        let mut out = Vec::new();
        assert!(matches!(
            dump_bytes(b"\xfebix", &mut out),
            Err(InspectBinlogError::BadMagic { .. })
        ));
        let mut file = BINLOG_MAGIC.to_vec();
        file.extend_from_slice(&[0u8; 10]);
        assert!(matches!(
            dump_bytes(&file, &mut out),
            Err(InspectBinlogError::TruncatedHeader { pos: 4, have: 10 })
        ));
        // A header that claims 100 bytes, followed by only 5.
        let mut file = BINLOG_MAGIC.to_vec();
        file.extend_from_slice(&[0, 0, 0, 0, 2, 1, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        file.extend_from_slice(&[0u8; 5]);
        assert!(matches!(
            dump_bytes(&file, &mut out),
            Err(InspectBinlogError::TruncatedEvent {
                pos: 4,
                size: 100,
                have: 24
            })
        ));
        // A header whose size is smaller than the header itself.
        let mut file = BINLOG_MAGIC.to_vec();
        file.extend_from_slice(&[0, 0, 0, 0, 2, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(
            dump_bytes(&file, &mut out),
            Err(InspectBinlogError::BadEventSize { pos: 4, size: 3 })
        ));
    }

    #[test]
    fn empty_file_after_magic_is_fine() {
        let mut out = Vec::new();
        let s = dump_bytes(&BINLOG_MAGIC, &mut out).expect("magic only");
        assert_eq!(s.events, 0);
        assert_eq!(s.end_pos, 4);
    }
}

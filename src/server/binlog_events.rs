//! `SHOW BINLOG EVENTS [IN 'f'] [FROM p] [LIMIT [o,] n]`, read straight from the binlog source.

use tibinlog_protocol::binlog::{read, ChecksumAlg, EventHeader, EventType, GtidSet, HEADER_LEN};
use tibinlog_protocol::wire::errors::{ER_ERROR_WHEN_EXECUTING_COMMAND, ER_UNKNOWN_ERROR};

use super::reply::Reply;
use super::source::{BinlogSource, SourceError};
use crate::sql::statement::BinlogEvents;

const EVENT_COLUMNS: [&str; 6] = [
    "Log_name",
    "Pos",
    "Event_type",
    "Server_id",
    "End_log_pos",
    "Info",
];

/// `SHOW BINLOG EVENTS [IN 'f'] [FROM p] [LIMIT [o,] n]`.
pub(super) fn show_binlog_events(source: &dyn BinlogSource, args: &BinlogEvents) -> Reply {
    let BinlogEvents {
        file,
        from,
        offset,
        limit,
    } = args.clone();
    let file = match file {
        Some(f) => f,
        None => match source.files().into_iter().next() {
            Some(f) => f.name,
            None => return Reply::text(&EVENT_COLUMNS, Vec::new()),
        },
    };
    let mut reader = match source.open(&file, from) {
        Ok(r) => r,
        Err(SourceError::UnknownFile { .. }) => {
            return Reply::err(
                ER_ERROR_WHEN_EXECUTING_COMMAND,
                "Error when executing command SHOW BINLOG EVENTS: Could not find target log",
            )
        }
        Err(e) => {
            return Reply::err(
                ER_ERROR_WHEN_EXECUTING_COMMAND,
                format!("Error when executing command SHOW BINLOG EVENTS: {e}"),
            )
        }
    };
    let crc = source.checksum_alg() == ChecksumAlg::Crc32;
    let mut rows = Vec::new();
    let mut index = 0usize;
    let mut pos = from;
    while rows.len() < limit {
        let ev = match reader.next_event() {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(e) => return Reply::err(ER_UNKNOWN_ERROR, e.to_string()),
        };
        let start = pos;
        pos += ev.len() as u64;
        if index < offset {
            index += 1;
            continue;
        }
        index += 1;
        let Ok(h) = EventHeader::parse(&ev) else {
            return Reply::err(ER_UNKNOWN_ERROR, "corrupt event header");
        };
        rows.push(vec![
            Some(file.clone()),
            Some(start.to_string()),
            Some(event_type_name(h.event_type).to_string()),
            Some(h.server_id.to_string()),
            Some(h.log_pos.to_string()),
            Some(event_info(h.event_type, &ev, crc)),
        ]);
    }
    Reply::text(&EVENT_COLUMNS, rows)
}

/// MySQL's names for `SHOW BINLOG EVENTS`.
fn event_type_name(t: EventType) -> &'static str {
    match t {
        EventType::QUERY => "Query",
        EventType::STOP => "Stop",
        EventType::ROTATE => "Rotate",
        EventType::FORMAT_DESCRIPTION => "Format_desc",
        EventType::XID => "Xid",
        EventType::TABLE_MAP => "Table_map",
        EventType::WRITE_ROWS | EventType::WRITE_ROWS_V1 => "Write_rows",
        EventType::UPDATE_ROWS | EventType::UPDATE_ROWS_V1 => "Update_rows",
        EventType::DELETE_ROWS | EventType::DELETE_ROWS_V1 => "Delete_rows",
        EventType::GTID => "Gtid",
        EventType::ANONYMOUS_GTID => "Anonymous_Gtid",
        EventType::PREVIOUS_GTIDS => "Previous_gtids",
        EventType::ROWS_QUERY => "Rows_query",
        EventType::HEARTBEAT => "Heartbeat",
        _ => "Unknown",
    }
}

/// The `Info` column for the event types whose text is cheap to produce. `crc` says whether
/// the event ends with a CRC32 (FORMAT_DESCRIPTION always does).
fn event_info(t: EventType, ev: &[u8], crc: bool) -> String {
    let crc_len = if crc || t == EventType::FORMAT_DESCRIPTION {
        4
    } else {
        0
    };
    let body = ev
        .get(HEADER_LEN..ev.len().saturating_sub(crc_len).max(HEADER_LEN))
        .unwrap_or(&[]);
    match t {
        EventType::ROTATE => {
            let (pos, name) = read::rotate(body).unwrap_or((0, &[]));
            format!("{};pos={pos}", String::from_utf8_lossy(name))
        }
        EventType::XID => format!("COMMIT /* xid={} */", read::xid(body).unwrap_or(0)),
        EventType::FORMAT_DESCRIPTION => format!(
            "Server ver: {}, Binlog ver: 4",
            String::from_utf8_lossy(read::server_version(body).unwrap_or(&[]))
        ),
        EventType::QUERY => read::query_text(body).unwrap_or_default(),
        EventType::GTID => read::gtid(body)
            .map(|(sid, gno)| format!("SET @@SESSION.GTID_NEXT= '{sid}:{gno}'"))
            .unwrap_or_default(),
        EventType::ANONYMOUS_GTID => "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'".to_owned(),
        EventType::PREVIOUS_GTIDS => GtidSet::decode(body)
            .map(|s| s.to_string())
            .unwrap_or_default(),
        EventType::TABLE_MAP => read::table_map(body)
            .map(|(id, db, t)| format!("table_id: {id} ({db}.{t})"))
            .unwrap_or_default(),
        EventType::WRITE_ROWS
        | EventType::UPDATE_ROWS
        | EventType::DELETE_ROWS
        | EventType::WRITE_ROWS_V1
        | EventType::UPDATE_ROWS_V1
        | EventType::DELETE_ROWS_V1 => read::rows_header(body)
            .map(|(id, flags)| {
                if flags & read::STMT_END_F != 0 {
                    format!("table_id: {id} flags: STMT_END_F")
                } else {
                    format!("table_id: {id}")
                }
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

//! The read side of the few event fields the server looks into: the GTID of a GTID event, the
//! names of a TABLE_MAP, the table id and flags of a rows event, a QUERY's text and where its
//! charset status variable is, a ROTATE's target, an XID, a FORMAT_DESCRIPTION's server version. Bodies are the
//! bytes after the 19-byte header, without the CRC; every read is bounds-checked (`None` for a
//! body too short to hold the field).

use super::gtid::Sid;

/// Rows-event flag: the last rows event of the statement.
pub const STMT_END_F: u16 = 0x0001;

fn u48(b: &[u8]) -> Option<u64> {
    let b = b.get(..6)?;
    let mut a = [0u8; 8];
    a[..6].copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// `(sid, gno)` of a GTID event body.
pub fn gtid(body: &[u8]) -> Option<(Sid, u64)> {
    let sid: [u8; 16] = body.get(1..17)?.try_into().ok()?;
    let gno = u64::from_le_bytes(body.get(17..25)?.try_into().ok()?);
    Some((Sid(sid), gno))
}

/// `(sid, gno)` of a whole GTID event (header included; a CRC after it is ignored).
pub fn gtid_of_event(ev: &[u8]) -> Option<(Sid, u64)> {
    gtid(ev.get(super::header::HEADER_LEN..)?)
}

/// `(table_id, db, table)` of a TABLE_MAP body.
pub fn table_map(body: &[u8]) -> Option<(u64, String, String)> {
    let id = u48(body)?;
    let mut at = 8;
    let db_len = usize::from(*body.get(at)?);
    let db = body.get(at + 1..at + 1 + db_len)?;
    at += 1 + db_len + 1;
    let t_len = usize::from(*body.get(at)?);
    let table = body.get(at + 1..at + 1 + t_len)?;
    Some((
        id,
        String::from_utf8_lossy(db).into_owned(),
        String::from_utf8_lossy(table).into_owned(),
    ))
}

/// `(table_id, flags)` of a rows event body (v1 or v2).
pub fn rows_header(body: &[u8]) -> Option<(u64, u16)> {
    let id = u48(body)?;
    let flags = u16::from_le_bytes(body.get(6..8)?.try_into().ok()?);
    Some((id, flags))
}

/// The statement text of a QUERY body (post-header 13 bytes, status vars, db, NUL, text).
pub fn query_text(body: &[u8]) -> Option<String> {
    Some(String::from_utf8_lossy(query_text_bytes(body)?).into_owned())
}

/// The statement text of a QUERY body, borrowed (see [`query_text`]).
///
/// ```text
/// thread id 4 | exec time 4 | db len 1 | error code 2 | status len 2 | status vars | db | NUL | text
/// ```
pub fn query_text_bytes(body: &[u8]) -> Option<&[u8]> {
    let db_len = usize::from(*body.get(8)?);
    let status_len = usize::from(u16::from_le_bytes([*body.get(11)?, *body.get(12)?]));
    let start = 13 + status_len + db_len + 1;
    body.get(start..)
}

/// Offset in a QUERY body of the 6-byte `Q_CHARSET_CODE` value (character_set_client,
/// collation_connection, collation_server, 2 bytes each), if the status block has one before
/// the first code whose length is not known (MySQL's `Query_log_event` status variables).
pub fn query_charset_offset(body: &[u8]) -> Option<usize> {
    let status_len = usize::from(u16::from_le_bytes([*body.get(11)?, *body.get(12)?]));
    let start = 13;
    let end = start + status_len;
    if end > body.len() {
        return None;
    }
    let mut p = start;
    while p < end {
        let code = body[p];
        p += 1;
        let len = match code {
            // Q_FLAGS2, Q_AUTO_INCREMENT, Q_MASTER_DATA_WRITTEN
            0 | 3 | 10 => 4,
            // Q_SQL_MODE, Q_TABLE_MAP_FOR_UPDATE
            1 | 9 => 8,
            // Q_CATALOG: length, name, NUL
            2 => usize::from(*body.get(p)?) + 2,
            4 => return (p + 6 <= end).then_some(p),
            // Q_TIME_ZONE, Q_CATALOG_NZ: length, name
            5 | 6 => usize::from(*body.get(p)?) + 1,
            // Q_LC_TIME_NAMES, Q_CHARSET_DATABASE
            7 | 8 => 2,
            // Q_INVOKER: user length, user, host length, host
            11 => {
                let user = usize::from(*body.get(p)?);
                user + 2 + usize::from(*body.get(p + 1 + user)?)
            }
            // Q_UPDATED_DB_NAMES: count (254 = too many, none follow), NUL-terminated names
            12 => {
                let n = *body.get(p)?;
                let mut q = p + 1;
                if n != 254 {
                    for _ in 0..n {
                        q += body.get(q..end)?.iter().position(|b| *b == 0)? + 1;
                    }
                }
                q - p
            }
            // Q_MICROSECONDS
            13 => 3,
            _ => return None,
        };
        p += len;
    }
    None
}

/// `(position, next file name)` of a ROTATE body.
pub fn rotate(body: &[u8]) -> Option<(u64, &[u8])> {
    let pos = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    Some((pos, body.get(8..)?))
}

/// The transaction id of an XID body.
pub fn xid(body: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(body.get(..8)?.try_into().ok()?))
}

/// The server version of a FORMAT_DESCRIPTION body (50 bytes after the binlog version,
/// NUL-padded).
pub fn server_version(body: &[u8]) -> Option<&[u8]> {
    let v = body.get(2..52)?;
    let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
    Some(&v[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtid_of_event_reads_sid_and_gno() {
        let h = crate::binlog::HEADER_LEN;
        let mut ev = vec![0u8; h + 25];
        ev[h + 1..h + 17].copy_from_slice(&[9; 16]);
        ev[h + 17..h + 25].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(gtid_of_event(&ev), Some((Sid([9; 16]), 42)));
        assert_eq!(gtid_of_event(&ev[..30]), None);
    }

    #[test]
    fn query_fields_of_encoded_events() {
        use crate::binlog::{EventBody, QueryEvent};
        let dbs = ["wl"];
        let q = QueryEvent::ddl(1, "wl", "CREATE DATABASE `wl`", &dbs, 42);
        let mut b = Vec::new();
        q.encode_into(&mut b).expect("query");
        assert_eq!(query_text_bytes(&b), Some(&b"CREATE DATABASE `wl`"[..]));
        let at = query_charset_offset(&b).expect("charset");
        assert_eq!(b[at - 1], 4, "Q_CHARSET_CODE");
        assert_eq!(&b[at..at + 6], &[255, 0, 255, 0, 255, 0]);
        for cut in 0..b.len() {
            let _ = (query_text_bytes(&b[..cut]), query_charset_offset(&b[..cut]));
        }
        let mut rot = 4u64.to_le_bytes().to_vec();
        rot.extend_from_slice(b"binlog.000002");
        assert_eq!(rotate(&rot), Some((4, &b"binlog.000002"[..])));
        assert_eq!(rotate(&rot[..7]), None);
        assert_eq!(xid(&42u64.to_le_bytes()), Some(42));
        let mut fde = vec![4, 0];
        fde.extend_from_slice(b"8.0.36");
        fde.resize(60, 0);
        assert_eq!(server_version(&fde), Some(&b"8.0.36"[..]));
    }

    #[test]
    fn fields_of_encoded_events() {
        use crate::binlog::{ColumnDef, ColumnKind, EventBody, GtidEvent, TableDef, TableMap};
        let sid = Sid::parse("3e11fa47-71ca-11e1-9e33-c80aa9429562").expect("sid");
        let g = GtidEvent::new(sid, 42, 1, 2, 80036);
        let mut b = Vec::new();
        g.encode_into(&mut b).expect("gtid");
        assert_eq!(gtid(&b), Some((sid, 42)));
        assert_eq!(gtid(&b[..20]), None);
        let t = TableDef {
            table_id: 77,
            schema: "db".into(),
            table: "tbl".into(),
            columns: vec![ColumnDef::new("a", ColumnKind::Long)],
            primary_key: Vec::new(),
        };
        let mut b = Vec::new();
        TableMap::new(&t).encode_into(&mut b).expect("table map");
        assert_eq!(table_map(&b), Some((77, "db".into(), "tbl".into())));
        for cut in 0..b.len() {
            let _ = table_map(&b[..cut]);
        }
    }
}

//! The read side of the few event fields the server looks into: the GTID of a GTID event, the
//! names of a TABLE_MAP, the table id and flags of a rows event, a QUERY's text. Bodies are the
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
    let db_len = usize::from(*body.get(8)?);
    let status_len = usize::from(u16::from_le_bytes([*body.get(11)?, *body.get(12)?]));
    let start = 13 + status_len + db_len + 1;
    Some(String::from_utf8_lossy(body.get(start..)?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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

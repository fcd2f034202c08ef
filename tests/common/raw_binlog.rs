//! Binlog events as bytes, read with nothing but MySQL's byte layouts of the events
//! (headers, FORMAT_DESCRIPTION, QUERY status variables, TABLE_MAP, rows events). Tests
//! use these to check what a client library would hide or normalise.

#![allow(dead_code)]

use super::repl::lenenc;

pub const QUERY: u8 = 2;
pub const ROTATE: u8 = 4;
pub const FDE: u8 = 15;
pub const XID: u8 = 16;
pub const TABLE_MAP: u8 = 19;
pub const HEARTBEAT: u8 = 27;
pub const WRITE_ROWS: u8 = 30;
pub const UPDATE_ROWS: u8 = 31;
pub const DELETE_ROWS: u8 = 32;
pub const GTID: u8 = 33;
pub const ANONYMOUS_GTID: u8 = 34;
pub const PREVIOUS_GTIDS: u8 = 35;

/// LOG_EVENT_ARTIFICIAL_F.
pub const ARTIFICIAL: u16 = 0x20;
/// STMT_END_F in a rows event's flags.
pub const STMT_END_F: u16 = 0x0001;

/// The v4 common header of an event, and its bytes.
#[derive(Debug, Clone)]
pub struct Ev {
    pub timestamp: u32,
    pub ty: u8,
    pub server_id: u32,
    pub size: u32,
    pub log_pos: u32,
    pub flags: u16,
    pub raw: Vec<u8>,
}

impl Ev {
    pub fn parse(raw: &[u8]) -> Ev {
        assert!(raw.len() >= 19, "event shorter than its header: {raw:?}");
        let u32_at = |i: usize| u32::from_le_bytes(raw[i..i + 4].try_into().expect("4 bytes"));
        Ev {
            timestamp: u32_at(0),
            ty: raw[4],
            server_id: u32_at(5),
            size: u32_at(9),
            log_pos: u32_at(13),
            flags: u16::from_le_bytes([raw[17], raw[18]]),
            raw: raw.to_vec(),
        }
    }

    /// The bytes after the header, without the CRC32 when `crc`.
    pub fn body(&self, crc: bool) -> &[u8] {
        &self.raw[19..self.raw.len() - if crc { 4 } else { 0 }]
    }

    /// True when the last four bytes are a valid CRC32 of the rest.
    pub fn crc_ok(&self) -> bool {
        tibinlog_protocol::binlog::checksum::verify_event(&self.raw).is_ok()
    }
}

/// A FORMAT_DESCRIPTION body (CRC32 trailer expected: the FDE always has algorithm + 4 bytes).
#[derive(Debug, Clone)]
pub struct Fde {
    pub binlog_version: u16,
    pub server_version: String,
    pub header_len: u8,
    /// Post-header length per event type: `post_header[t - 1]` for type `t`.
    pub post_header: Vec<u8>,
    pub checksum_alg: u8,
}

impl Fde {
    pub fn parse(ev: &Ev) -> Fde {
        assert_eq!(ev.ty, FDE);
        let b = &ev.raw[19..];
        let version = &b[2..52];
        let end = version.iter().position(|c| *c == 0).unwrap_or(50);
        // binlog version 2, server version 50, create timestamp 4, header length 1, the
        // array, the algorithm byte, the CRC32.
        let n = b.len() - 57 - 1 - 4;
        Fde {
            binlog_version: u16::from_le_bytes([b[0], b[1]]),
            server_version: String::from_utf8_lossy(&version[..end]).into_owned(),
            header_len: b[56],
            post_header: b[57..57 + n].to_vec(),
            checksum_alg: b[57 + n],
        }
    }

    pub fn post_header_len(&self, ty: u8) -> u8 {
        self.post_header[usize::from(ty) - 1]
    }
}

/// One status variable of a QUERY event: code and value bytes.
pub type StatusVar = (u8, Vec<u8>);

/// A QUERY event's fields.
#[derive(Debug, Clone)]
pub struct Query {
    pub db: String,
    pub query: String,
    pub status_vars: Vec<StatusVar>,
    pub error_code: u16,
}

/// Length of the value of status variable `code` at `v` (MySQL 8.0's `Query_event` codes), or
/// `None` for a code this walker does not know.
fn status_value_len(code: u8, v: &[u8]) -> Option<usize> {
    Some(match code {
        0 => 4,                         // Q_FLAGS2_CODE
        1 => 8,                         // Q_SQL_MODE_CODE
        2 => 1 + usize::from(v[0]) + 1, // Q_CATALOG_CODE (pre-5.0.4)
        3 => 4,                         // Q_AUTO_INCREMENT
        4 => 6,                         // Q_CHARSET_CODE
        5 | 6 => 1 + usize::from(v[0]), // Q_TIME_ZONE_CODE, Q_CATALOG_NZ_CODE
        7 | 8 => 2,                     // Q_LC_TIME_NAMES_CODE, Q_CHARSET_DATABASE_CODE
        9 => 8,                         // Q_TABLE_MAP_FOR_UPDATE_CODE
        10 => 4,                        // Q_MASTER_DATA_WRITTEN_CODE
        11 => {
            // Q_INVOKER: user, host
            let u = usize::from(v[0]);
            1 + u + 1 + usize::from(v[1 + u])
        }
        12 => {
            // Q_UPDATED_DB_NAMES: count, NUL-terminated names (254 = too many, none listed)
            let n = v[0];
            let mut at = 1;
            if n != 254 {
                for _ in 0..n {
                    at += v[at..].iter().position(|c| *c == 0)? + 1;
                }
            }
            at
        }
        13 => 3,           // Q_MICROSECONDS
        16 | 19 | 20 => 1, // EXPLICIT_DEFAULTS_FOR_TIMESTAMP, SQL_REQUIRE_PRIMARY_KEY, TABLE_ENCRYPTION
        17 => 8,           // Q_DDL_LOGGED_WITH_XID
        18 => 2,           // Q_DEFAULT_COLLATION_FOR_UTF8MB4
        _ => return None,
    })
}

impl Query {
    /// Parses a QUERY event; panics when its status block cannot be walked exactly.
    pub fn parse(ev: &Ev, crc: bool) -> Query {
        assert_eq!(ev.ty, QUERY);
        let b = ev.body(crc);
        let db_len = usize::from(b[8]);
        let error_code = u16::from_le_bytes([b[9], b[10]]);
        let status_len = usize::from(u16::from_le_bytes([b[11], b[12]]));
        let status = &b[13..13 + status_len];
        let mut status_vars = Vec::new();
        let mut at = 0;
        while at < status.len() {
            let code = status[at];
            let v = &status[at + 1..];
            let len = status_value_len(code, v)
                .unwrap_or_else(|| panic!("unknown QUERY status variable code {code}"));
            assert!(len <= v.len(), "status variable {code} overruns the block");
            status_vars.push((code, v[..len].to_vec()));
            at += 1 + len;
        }
        assert_eq!(at, status.len(), "status variables fill the block exactly");
        let rest = &b[13 + status_len..];
        let db = String::from_utf8_lossy(&rest[..db_len]).into_owned();
        assert_eq!(rest[db_len], 0, "database name is NUL-terminated");
        let query = String::from_utf8_lossy(&rest[db_len + 1..]).into_owned();
        Query {
            db,
            query,
            status_vars,
            error_code,
        }
    }

    /// The three collation ids of Q_CHARSET_CODE, if present.
    pub fn charset(&self) -> Option<[u16; 3]> {
        self.status_vars
            .iter()
            .find(|(c, _)| *c == 4)
            .map(|(_, v)| {
                [
                    u16::from_le_bytes([v[0], v[1]]),
                    u16::from_le_bytes([v[2], v[3]]),
                    u16::from_le_bytes([v[4], v[5]]),
                ]
            })
    }
}

/// A TABLE_MAP event's fields.
#[derive(Debug, Clone)]
pub struct TableMap {
    pub table_id: u64,
    pub db: String,
    pub table: String,
    pub types: Vec<u8>,
    /// Metadata bytes per column (split by each type's metadata length).
    pub meta: Vec<Vec<u8>>,
    /// Optional metadata: (TLV type, value).
    pub tlvs: Vec<(u8, Vec<u8>)>,
}

/// Bytes of TABLE_MAP metadata a column of type `t` has.
pub fn meta_len(t: u8) -> usize {
    match t {
        // FLOAT, DOUBLE, BLOB family, GEOMETRY, JSON, TIMESTAMP2, DATETIME2, TIME2, VECTOR
        4 | 5 | 249..=252 | 255 | 245 | 17 | 18 | 19 | 242 => 1,
        // VARCHAR, VAR_STRING, BIT, NEWDECIMAL, STRING, ENUM, SET
        15 | 253 | 16 | 246 | 254 | 247 | 248 => 2,
        _ => 0,
    }
}

impl TableMap {
    /// Parses a TABLE_MAP (6-byte table id, as the FDE's post-header length 8 says).
    pub fn parse(ev: &Ev, crc: bool) -> TableMap {
        assert_eq!(ev.ty, TABLE_MAP);
        let b = ev.body(crc);
        let mut id = [0u8; 8];
        id[..6].copy_from_slice(&b[..6]);
        let table_id = u64::from_le_bytes(id);
        let mut at = 8;
        let mut name = || {
            let n = usize::from(b[at]);
            let s = String::from_utf8_lossy(&b[at + 1..at + 1 + n]).into_owned();
            assert_eq!(b[at + 1 + n], 0, "name NUL-terminated");
            at += n + 2;
            s
        };
        let db = name();
        let table = name();
        let (ncols, w) = lenenc(&b[at..]);
        at += w;
        let types = b[at..at + ncols].to_vec();
        at += ncols;
        let (mlen, w) = lenenc(&b[at..]);
        at += w;
        let mut meta = Vec::new();
        let mut m = at;
        for t in &types {
            let l = meta_len(*t);
            meta.push(b[m..m + l].to_vec());
            m += l;
        }
        assert_eq!(m, at + mlen, "metadata length matches the column types");
        at += mlen;
        at += ncols.div_ceil(8);
        let mut tlvs = Vec::new();
        while at < b.len() {
            let t = b[at];
            let (l, w) = lenenc(&b[at + 1..]);
            let start = at + 1 + w;
            assert!(start + l <= b.len(), "TLV {t} overruns the event");
            tlvs.push((t, b[start..start + l].to_vec()));
            at = start + l;
        }
        TableMap {
            table_id,
            db,
            table,
            types,
            meta,
            tlvs,
        }
    }

    /// COLUMN_NAME optional metadata (TLV 4), if present.
    pub fn column_names(&self) -> Option<Vec<String>> {
        let (_, v) = self.tlvs.iter().find(|(t, _)| *t == 4)?;
        let mut names = Vec::new();
        let mut at = 0;
        while at < v.len() {
            let (n, w) = lenenc(&v[at..]);
            names.push(String::from_utf8_lossy(&v[at + w..at + w + n]).into_owned());
            at += w + n;
        }
        Some(names)
    }
}

/// Table id and flags of a rows event.
pub fn rows_table_and_flags(ev: &Ev) -> (u64, u16) {
    let b = &ev.raw[19..];
    let mut id = [0u8; 8];
    id[..6].copy_from_slice(&b[..6]);
    (u64::from_le_bytes(id), u16::from_le_bytes([b[6], b[7]]))
}

pub fn is_rows(ty: u8) -> bool {
    (WRITE_ROWS..=DELETE_ROWS).contains(&ty)
}

//! Command-phase payloads: the first byte names the command, the rest is its body.
//!
//! [`decode_command`] never panics: short or garbled bodies give [`WireError::Malformed`] (answer
//! ERR and keep the connection), unknown command bytes give [`Command::Unknown`] (answer 1047
//! `ER_UNKNOWN_COM_ERROR`, as MySQL does; never OK).
//!
//! Replication commands:
//!
//! ```text
//! COM_REGISTER_SLAVE   0x15 | server_id (4) | host (1+n) | user (1+n) | password (1+n)
//!                           | port (2) | rank (4) | master_id (4)
//! COM_BINLOG_DUMP      0x12 | pos (4) | flags (2) | server_id (4) | file name (rest, no NUL)
//! COM_BINLOG_DUMP_GTID 0x1e | flags (2) | server_id (4) | name_len (4) | file name (name_len)
//!                           | pos (8) | data_len (4) | SID block (data_len)
//! SID block, untagged  n_sids (8) | { uuid (16) | n_intervals (8) | { start (8) | end (8) } … } …
//! SID block, tagged    header (8: format byte 0x01 in bits 56..63, n_sids in bits 8..55)
//!                           | { uuid (16) | tag_len (varlen) | tag | n_intervals (8) | intervals } …
//! ```
//!
//! Intervals are half-open `[start, end)`, as MySQL's `Gtid_set::encode` writes them.
//! `COM_REGISTER_SLAVE` is parsed by `mysql_common::packets::ComRegisterSlave`. The two dump
//! commands are decoded by hand: mysql_common's `ComBinlogDump` rejects flag bits it does not
//! know, and its `ComBinlogDumpGtid` pre-allocates the wire's `n_sids` (a forged count aborts
//! the process). Tests cross-check both against mysql_common's serialisers.

use std::fmt;

use mysql_common::{
    constants::Command as Com, io::ParseBuf, misc::read_varlen_uint, packets::ComRegisterSlave,
    proto::MyDeserialize,
};

use super::{Result, WireError};

/// A decoded client command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// COM_QUIT: close the connection.
    Quit,
    /// COM_INIT_DB: `USE db`.
    InitDb(String),
    /// COM_QUERY: SQL text (lossily converted to UTF-8).
    Query(String),
    /// COM_PING.
    Ping,
    /// COM_FIELD_LIST (deprecated): table name and wildcard.
    FieldList { table: String, wildcard: String },
    /// COM_REGISTER_SLAVE.
    RegisterSlave(RegisterSlave),
    /// COM_BINLOG_DUMP.
    BinlogDump(BinlogDump),
    /// COM_BINLOG_DUMP_GTID.
    BinlogDumpGtid(BinlogDumpGtid),
    /// COM_SET_OPTION: 0 = multi-statements on, 1 = off.
    SetOption(u16),
    /// COM_RESET_CONNECTION.
    ResetConnection,
    /// COM_STMT_PREPARE: SQL text.
    StmtPrepare(String),
    /// COM_STMT_EXECUTE: statement, flags and the raw parameter bytes
    /// ([`super::stmt::decode_params`] reads them with the statement's parameter count).
    StmtExecute(super::stmt::Execute),
    /// COM_STMT_FETCH: statement and row count.
    StmtFetch { stmt_id: u32, rows: u32 },
    /// COM_STMT_CLOSE.
    StmtClose(u32),
    /// COM_STMT_RESET.
    StmtReset(u32),
    /// COM_STMT_SEND_LONG_DATA: statement, parameter, data.
    StmtSendLongData {
        stmt_id: u32,
        param: u16,
        data: Vec<u8>,
    },
    /// COM_STATISTICS.
    Statistics,
    /// Any other command byte.
    Unknown(u8),
}

impl Command {
    /// The command's MySQL name, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Quit => "COM_QUIT",
            Self::InitDb(_) => "COM_INIT_DB",
            Self::Query(_) => "COM_QUERY",
            Self::Ping => "COM_PING",
            Self::FieldList { .. } => "COM_FIELD_LIST",
            Self::RegisterSlave(_) => "COM_REGISTER_SLAVE",
            Self::BinlogDump(_) => "COM_BINLOG_DUMP",
            Self::BinlogDumpGtid(_) => "COM_BINLOG_DUMP_GTID",
            Self::SetOption(_) => "COM_SET_OPTION",
            Self::ResetConnection => "COM_RESET_CONNECTION",
            Self::StmtPrepare(_) => "COM_STMT_PREPARE",
            Self::StmtExecute(_) => "COM_STMT_EXECUTE",
            Self::StmtFetch { .. } => "COM_STMT_FETCH",
            Self::StmtClose(_) => "COM_STMT_CLOSE",
            Self::StmtReset(_) => "COM_STMT_RESET",
            Self::StmtSendLongData { .. } => "COM_STMT_SEND_LONG_DATA",
            Self::Statistics => "COM_STATISTICS",
            Self::Unknown(_) => "COM_UNKNOWN",
        }
    }
}

/// Flags of the two dump commands. Unknown bits are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DumpFlags(pub u16);

impl DumpFlags {
    /// BINLOG_DUMP_NON_BLOCK: at the end of the log send EOF instead of waiting.
    pub const NON_BLOCK: u16 = 0x01;
    /// MySQL: BINLOG_THROUGH_POSITION, since 8.0.26 read as USE_HEARTBEAT_EVENT_V2.
    /// MariaDB: BINLOG_SEND_ANNOTATE_ROWS_EVENT. Interpret per flavour.
    pub const THROUGH_POSITION: u16 = 0x02;
    /// BINLOG_THROUGH_GTID: the GTID dump carries a GTID set.
    pub const THROUGH_GTID: u16 = 0x04;

    /// True if every bit of `mask` is set.
    pub fn contains(self, mask: u16) -> bool {
        self.0 & mask == mask
    }

    /// True if the client asked for a non-blocking dump.
    pub fn non_block(self) -> bool {
        self.contains(Self::NON_BLOCK)
    }
}

/// COM_REGISTER_SLAVE: what a replica reports about itself (only feeds SHOW REPLICAS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterSlave {
    pub server_id: u32,
    pub host: String,
    pub user: String,
    pub password: String,
    pub port: u16,
    pub replication_rank: u32,
    pub master_id: u32,
}

/// COM_BINLOG_DUMP: stream from a file and position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogDump {
    pub pos: u32,
    pub flags: DumpFlags,
    /// The replica's server id (0 means non-blocking to MySQL).
    pub server_id: u32,
    /// File to start from; empty = the first file. Trailing NUL bytes are dropped.
    pub filename: String,
}

/// One UUID (optionally tagged) of a GTID set with its half-open intervals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GtidSid {
    pub uuid: [u8; 16],
    /// MySQL 8.4 tagged GTIDs; `None` for plain UUIDs.
    pub tag: Option<String>,
    /// `[start, end)` pairs, `1 <= start < end`, as on the wire.
    pub intervals: Vec<(u64, u64)>,
}

impl fmt::Display for GtidSid {
    /// MySQL's text form: `uuid[:tag]:a-b:c` with inclusive ends.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = &self.uuid;
        for (i, b) in u.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        for &(start, end) in &self.intervals {
            if end == start + 1 {
                write!(f, ":{start}")?;
            } else {
                write!(f, ":{start}-{}", end - 1)?;
            }
        }
        Ok(())
    }
}

/// COM_BINLOG_DUMP_GTID: stream everything the replica's GTID set lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogDumpGtid {
    pub flags: DumpFlags,
    pub server_id: u32,
    /// Trailing NUL bytes dropped (python-mysql-replication sends three NULs).
    pub filename: String,
    pub pos: u64,
    /// The SID block exactly as sent (the encoding of PREVIOUS_GTIDS bodies).
    pub sid_block: Vec<u8>,
    /// The SID block decoded.
    pub sids: Vec<GtidSid>,
}

impl BinlogDumpGtid {
    /// The replica's GTID set in MySQL's text form (`uuid:1-5,uuid2:7`); empty if none.
    pub fn gtid_set_text(&self) -> String {
        let parts: Vec<String> = self.sids.iter().map(ToString::to_string).collect();
        parts.join(",")
    }
}

/// Decodes one command payload.
pub fn decode_command(payload: &[u8]) -> Result<Command> {
    let Some((&code, body)) = payload.split_first() else {
        return Err(WireError::malformed("command", "empty payload"));
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let cmd = match code {
        c if c == Com::COM_QUIT as u8 => Command::Quit,
        c if c == Com::COM_INIT_DB as u8 => Command::InitDb(text(body)),
        c if c == Com::COM_QUERY as u8 => Command::Query(text(body)),
        c if c == Com::COM_PING as u8 => Command::Ping,
        c if c == Com::COM_FIELD_LIST as u8 => {
            let (table, wildcard) = match body.iter().position(|&b| b == 0) {
                Some(i) => (&body[..i], &body[i + 1..]),
                None => (body, &[][..]),
            };
            Command::FieldList {
                table: text(table),
                wildcard: text(wildcard),
            }
        }
        c if c == Com::COM_REGISTER_SLAVE as u8 => {
            Command::RegisterSlave(decode_register_slave(payload)?)
        }
        c if c == Com::COM_BINLOG_DUMP as u8 => Command::BinlogDump(decode_binlog_dump(body)?),
        c if c == Com::COM_BINLOG_DUMP_GTID as u8 => {
            Command::BinlogDumpGtid(decode_binlog_dump_gtid(body)?)
        }
        c if c == Com::COM_SET_OPTION as u8 => {
            let mut r = Reader::new("COM_SET_OPTION", body);
            Command::SetOption(r.u16()?)
        }
        c if c == Com::COM_RESET_CONNECTION as u8 => Command::ResetConnection,
        c if c == Com::COM_STMT_PREPARE as u8 => Command::StmtPrepare(text(body)),
        c if c == Com::COM_STMT_EXECUTE as u8 => {
            Command::StmtExecute(super::stmt::decode_execute(body)?)
        }
        c if c == Com::COM_STMT_FETCH as u8 => {
            let (stmt_id, rows) = super::stmt::decode_stmt_id("COM_STMT_FETCH", body)?;
            let rows =
                rows.ok_or_else(|| WireError::malformed("COM_STMT_FETCH", "no row count"))?;
            Command::StmtFetch { stmt_id, rows }
        }
        c if c == Com::COM_STMT_CLOSE as u8 => {
            Command::StmtClose(super::stmt::decode_stmt_id("COM_STMT_CLOSE", body)?.0)
        }
        c if c == Com::COM_STMT_RESET as u8 => {
            Command::StmtReset(super::stmt::decode_stmt_id("COM_STMT_RESET", body)?.0)
        }
        c if c == Com::COM_STMT_SEND_LONG_DATA as u8 => {
            let (stmt_id, param, data) = super::stmt::decode_long_data(body)?;
            Command::StmtSendLongData {
                stmt_id,
                param,
                data,
            }
        }
        c if c == Com::COM_STATISTICS as u8 => Command::Statistics,
        other => Command::Unknown(other),
    };
    Ok(cmd)
}

fn decode_register_slave(payload: &[u8]) -> Result<RegisterSlave> {
    let p = ComRegisterSlave::deserialize((), &mut ParseBuf(payload))
        .map_err(|e| WireError::malformed("COM_REGISTER_SLAVE", e))?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(RegisterSlave {
        server_id: p.server_id(),
        host: text(p.hostname_raw()),
        user: text(p.user_raw()),
        password: text(p.password_raw()),
        port: p.port(),
        replication_rank: p.replication_rank(),
        master_id: p.master_id(),
    })
}

fn decode_binlog_dump(body: &[u8]) -> Result<BinlogDump> {
    let mut r = Reader::new("COM_BINLOG_DUMP", body);
    let pos = r.u32()?;
    let flags = DumpFlags(r.u16()?);
    let server_id = r.u32()?;
    let filename = file_name(r.rest());
    Ok(BinlogDump {
        pos,
        flags,
        server_id,
        filename,
    })
}

fn decode_binlog_dump_gtid(body: &[u8]) -> Result<BinlogDumpGtid> {
    let mut r = Reader::new("COM_BINLOG_DUMP_GTID", body);
    let flags = DumpFlags(r.u16()?);
    let server_id = r.u32()?;
    let name_len = r.u32()? as usize;
    let filename = file_name(r.take(name_len)?);
    let pos = r.u64()?;
    // A client that sends no GTID data at all may stop after the position.
    let data_len = if r.rest_len() == 0 {
        0
    } else {
        r.u32()? as usize
    };
    let sid_block = r.take(data_len)?;
    let sids = decode_sid_block(sid_block)?;
    Ok(BinlogDumpGtid {
        flags,
        server_id,
        filename,
        pos,
        sid_block: sid_block.to_vec(),
        sids,
    })
}

/// Decodes a SID block (also the body of PREVIOUS_GTIDS_LOG_EVENT). Empty input = empty set.
pub fn decode_sid_block(block: &[u8]) -> Result<Vec<GtidSid>> {
    const WHAT: &str = "GTID set";
    if block.is_empty() {
        return Ok(Vec::new());
    }
    let mut r = Reader::new(WHAT, block);
    let header = r.u64()?;
    let tagged = match header >> 56 {
        0 => false,
        1 => true,
        f => {
            return Err(WireError::malformed(
                WHAT,
                format!("unknown format byte {f}"),
            ))
        }
    };
    let n_sids = if tagged {
        (header >> 8) & 0xFFFF_FFFF_FFFF
    } else {
        header & 0x00FF_FFFF_FFFF_FFFF
    };
    // Each SID needs at least uuid (16) + n_intervals (8) bytes: bound the count by the input
    // before allocating anything.
    if n_sids > (r.rest_len() / 24) as u64 {
        return Err(WireError::malformed(
            WHAT,
            format!("{n_sids} SIDs in {} bytes", block.len()),
        ));
    }
    let mut sids = Vec::with_capacity(n_sids as usize);
    for _ in 0..n_sids {
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(r.take(16)?);
        let tag = if tagged { r.tag()? } else { None };
        let n_intervals = r.u64()?;
        if n_intervals > (r.rest_len() / 16) as u64 {
            return Err(WireError::malformed(
                WHAT,
                format!("{n_intervals} intervals overrun"),
            ));
        }
        let mut intervals = Vec::with_capacity(n_intervals as usize);
        for _ in 0..n_intervals {
            let start = r.u64()?;
            let end = r.u64()?;
            if start == 0 || end <= start {
                return Err(WireError::malformed(
                    WHAT,
                    format!("bad interval [{start}, {end})"),
                ));
            }
            intervals.push((start, end));
        }
        sids.push(GtidSid {
            uuid,
            tag,
            intervals,
        });
    }
    if r.rest_len() != 0 {
        return Err(WireError::malformed(
            WHAT,
            "trailing bytes after the last SID",
        ));
    }
    Ok(sids)
}

fn file_name(raw: &[u8]) -> String {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// Bounds-checked little-endian reader over a payload.
struct Reader<'a> {
    what: &'static str,
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(what: &'static str, buf: &'a [u8]) -> Self {
        Self { what, buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(WireError::malformed(
                self.what,
                format!("needs {n} more bytes, has {}", self.buf.len()),
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64> {
        self.array().map(u64::from_le_bytes)
    }

    /// A tag of the tagged SID format: varlen length (MySQL serialization library format,
    /// read with mysql_common's `read_varlen_uint`), then the bytes; length 0 = untagged.
    fn tag(&mut self) -> Result<Option<String>> {
        let mut pb = ParseBuf(self.buf);
        let len = read_varlen_uint(&mut pb).map_err(|e| WireError::malformed(self.what, e))?;
        self.buf = pb.0;
        if len == 0 {
            return Ok(None);
        }
        if len > 32 {
            return Err(WireError::malformed(
                self.what,
                format!("tag of {len} bytes"),
            ));
        }
        let raw = self.take(len as usize)?;
        let tag = std::str::from_utf8(raw).map_err(|e| WireError::malformed(self.what, e))?;
        Ok(Some(tag.to_owned()))
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    fn rest_len(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_commands() -> Result<()> {
        assert_eq!(decode_command(&[0x01])?, Command::Quit);
        assert_eq!(decode_command(&[0x0e])?, Command::Ping);
        assert_eq!(
            decode_command(b"\x03SELECT 1")?,
            Command::Query("SELECT 1".into())
        );
        assert_eq!(decode_command(b"\x02db")?, Command::InitDb("db".into()));
        assert_eq!(decode_command(&[0x1b, 1, 0])?, Command::SetOption(1));
        assert_eq!(decode_command(&[0x1f])?, Command::ResetConnection);
        assert_eq!(decode_command(&[0x09])?, Command::Statistics);
        assert_eq!(
            decode_command(&[0x16, b'x'])?,
            Command::StmtPrepare("x".into())
        );
        assert!(
            decode_command(&[0x17, 1, 2]).is_err(),
            "short COM_STMT_EXECUTE"
        );
        assert_eq!(decode_command(&[0xff])?, Command::Unknown(0xff));
        assert_eq!(
            decode_command(b"\x04t\0%")?,
            Command::FieldList {
                table: "t".into(),
                wildcard: "%".into()
            }
        );
        assert!(decode_command(&[]).is_err());
        assert!(decode_command(&[0x1b, 1]).is_err());
        Ok(())
    }

    #[test]
    fn binlog_dump_keeps_unknown_flags_and_trims_nuls() -> Result<()> {
        let mut p = vec![0x12];
        p.extend_from_slice(&4u32.to_le_bytes());
        p.extend_from_slice(&0x8003u16.to_le_bytes());
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(b"\0\0\0");
        let Command::BinlogDump(d) = decode_command(&p)? else {
            return Err(WireError::malformed("test", "not a dump"));
        };
        assert_eq!((d.pos, d.flags.0, d.server_id), (4, 0x8003, 9));
        assert!(d.flags.non_block());
        assert_eq!(d.filename, "");
        assert!(decode_command(&p[..10]).is_err());
        Ok(())
    }

    #[test]
    fn forged_sid_count_is_an_error_not_an_allocation() {
        let mut block = Vec::new();
        block.extend_from_slice(&0x00FF_FFFF_FFFF_FFFFu64.to_le_bytes());
        assert!(decode_sid_block(&block).is_err());
        let mut block = 1u64.to_le_bytes().to_vec();
        block.extend_from_slice(&[0xab; 16]);
        block.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_sid_block(&block).is_err());
    }

    #[test]
    fn bad_intervals_are_rejected() {
        let mut block = 1u64.to_le_bytes().to_vec();
        block.extend_from_slice(&[0xab; 16]);
        block.extend_from_slice(&1u64.to_le_bytes());
        block.extend_from_slice(&5u64.to_le_bytes());
        block.extend_from_slice(&5u64.to_le_bytes());
        assert!(decode_sid_block(&block).is_err());
    }

    #[test]
    fn gtid_text_form() {
        let sid = GtidSid {
            uuid: [
                0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42,
                0x95, 0x62,
            ],
            tag: None,
            intervals: vec![(1, 6), (7, 8)],
        };
        assert_eq!(
            sid.to_string(),
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7"
        );
    }
}

//! MariaDB-flavour events (MariaDB `sql/log_event.h`): GTID (162), GTID_LIST (163),
//! BINLOG_CHECKPOINT (161) and ANNOTATE_ROWS (160).
//!
//! ```text
//! GTID          | seq_no 8 | domain_id 4 | flags 1 | commit_id 8 (FL_GROUP_COMMIT_ID) or 6 zeros |
//! GTID_LIST     | count 4 (low 28 bits; high 4 = flags) | per GTID: domain_id 4, server_id 4, seq_no 8 | 00 00 |
//! CHECKPOINT    | name length 4 | file name |
//! ANNOTATE_ROWS | SQL text |
//! ```
//! The server id of a MariaDB GTID is the header's `server_id`. A MariaDB GTID replaces `BEGIN`;
//! without FL_STANDALONE a transaction ending in XID (or COMMIT) follows.

use crate::binlog::error::{BinlogError, Result};
use crate::binlog::header::EventType;
use crate::binlog::writer::EventBody;

/// MariaDB's GTID event flags (`Gtid_log_event::FL_*`).
pub mod gtid_flags {
    /// The group is one statement without BEGIN/COMMIT (DDL).
    pub const STANDALONE: u8 = 0x01;
    /// A commit id follows (group commit).
    pub const GROUP_COMMIT_ID: u8 = 0x02;
    /// The group is a transaction of transactional engines.
    pub const TRANSACTIONAL: u8 = 0x04;
    /// The group may run in parallel with others on the replica.
    pub const ALLOW_PARALLEL: u8 = 0x08;
    /// The group waited for a row lock of another.
    pub const WAITED: u8 = 0x10;
    /// The group is DDL.
    pub const DDL: u8 = 0x20;
}

/// A MariaDB GTID `domain-server-seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MariadbGtid {
    pub domain_id: u32,
    pub server_id: u32,
    pub seq_no: u64,
}

impl std::fmt::Display for MariadbGtid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}-{}", self.domain_id, self.server_id, self.seq_no)
    }
}

impl MariadbGtid {
    /// Parses a GTID position list as MariaDB writes `@slave_connect_state` and
    /// `@@gtid_slave_pos`: comma-separated `domain-server-seq`, blanks allowed around items; the
    /// empty text is the empty list. `None` when malformed or when a domain appears twice.
    pub fn parse_list(text: &str) -> Option<Vec<MariadbGtid>> {
        let mut out: Vec<MariadbGtid> = Vec::new();
        if text.trim().is_empty() {
            return Some(out);
        }
        for item in text.split(',') {
            let mut parts = item.trim().split('-');
            let (Some(d), Some(s), Some(n), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return None;
            };
            let g = MariadbGtid {
                domain_id: d.parse().ok()?,
                server_id: s.parse().ok()?,
                seq_no: n.parse().ok()?,
            };
            if out.iter().any(|o| o.domain_id == g.domain_id) {
                return None;
            }
            out.push(g);
        }
        Some(out)
    }
}

/// Bytes of a GTID event (162) body without the group-commit id: seq_no 8, domain 4, flags 1,
/// 6 zero bytes.
pub const GTID_BODY_LEN: usize = 19;

/// [`MariadbGtidList::flags`] of the made-up GTID_LIST a master sends when a replica's
/// `START SLAVE UNTIL master_gtid_pos` position is reached
/// (`Gtid_list_log_event::FLAG_UNTIL_REACHED`).
pub const GTID_LIST_UNTIL_REACHED: u8 = 0x01;

/// MariaDB GTID_EVENT (162).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MariadbGtidEvent {
    pub seq_no: u64,
    pub domain_id: u32,
    /// [`gtid_flags`]; GROUP_COMMIT_ID is set from `commit_id`.
    pub flags: u8,
    pub commit_id: Option<u64>,
}

impl EventBody for MariadbGtidEvent {
    fn event_type(&self) -> EventType {
        EventType::MARIADB_GTID
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(&self.seq_no.to_le_bytes());
        buf.extend_from_slice(&self.domain_id.to_le_bytes());
        match self.commit_id {
            Some(c) => {
                buf.push(self.flags | gtid_flags::GROUP_COMMIT_ID);
                buf.extend_from_slice(&c.to_le_bytes());
            }
            None => {
                buf.push(self.flags & !gtid_flags::GROUP_COMMIT_ID);
                buf.extend_from_slice(&[0; 6]);
            }
        }
        Ok(())
    }
}

/// MariaDB GTID_LIST_EVENT (163): the binlog state at the start of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MariadbGtidList<'a> {
    pub gtids: &'a [MariadbGtid],
    /// The 4 flag bits above the count.
    pub flags: u8,
}

impl EventBody for MariadbGtidList<'_> {
    fn event_type(&self) -> EventType {
        EventType::MARIADB_GTID_LIST
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        let n = u32::try_from(self.gtids.len())
            .ok()
            .filter(|&n| n < 1 << 28)
            .ok_or(BinlogError::TableDef {
                reason: "more than 2^28 GTIDs in a GTID_LIST",
            })?;
        buf.extend_from_slice(&(n | (u32::from(self.flags & 0x0f) << 28)).to_le_bytes());
        for g in self.gtids {
            buf.extend_from_slice(&g.domain_id.to_le_bytes());
            buf.extend_from_slice(&g.server_id.to_le_bytes());
            buf.extend_from_slice(&g.seq_no.to_le_bytes());
        }
        // An empty list is followed by two zero bytes (MariaDB 10.5.15 and 10.11 files, 29-byte
        // event with CRC); a list with entries is not (10.11: one GTID makes a 43-byte event).
        // Readers stop after the list.
        if self.gtids.is_empty() {
            buf.extend_from_slice(&[0, 0]);
        }
        Ok(())
    }
}

/// MariaDB BINLOG_CHECKPOINT_EVENT (161).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MariadbBinlogCheckpoint<'a> {
    pub file: &'a str,
}

impl EventBody for MariadbBinlogCheckpoint<'_> {
    fn event_type(&self) -> EventType {
        EventType::MARIADB_BINLOG_CHECKPOINT
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(&(self.file.len() as u32).to_le_bytes());
        buf.extend_from_slice(self.file.as_bytes());
        Ok(())
    }
}

/// MariaDB ANNOTATE_ROWS_EVENT (160): the statement of the following rows events; sent only to
/// clients that asked with dump flag 0x02.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MariadbAnnotateRows<'a>(pub &'a str);

impl EventBody for MariadbAnnotateRows<'_> {
    fn event_type(&self) -> EventType {
        EventType::MARIADB_ANNOTATE_ROWS
    }
    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(self.0.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtid_lists_parse_like_mariadb_s() {
        let g = |domain_id, server_id, seq_no| MariadbGtid {
            domain_id,
            server_id,
            seq_no,
        };
        assert_eq!(MariadbGtid::parse_list(""), Some(vec![]));
        assert_eq!(MariadbGtid::parse_list("0-1-5"), Some(vec![g(0, 1, 5)]));
        assert_eq!(
            MariadbGtid::parse_list("0-1-5, 3-2-18446744073709551615"),
            Some(vec![g(0, 1, 5), g(3, 2, u64::MAX)])
        );
        for bad in ["0-1", "0-1-2-3", "a-1-2", "0-1-5,0-2-6", "-1-1-1", "0-1-5,"] {
            assert_eq!(MariadbGtid::parse_list(bad), None, "{bad}");
        }
        assert_eq!(g(0, 1, 5).to_string(), "0-1-5");
    }
}

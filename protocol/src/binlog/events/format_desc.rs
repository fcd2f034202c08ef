//! FORMAT_DESCRIPTION_EVENT (15): the first event of every file; readers configure their parser
//! (checksum, post-header lengths, table-id width) from it.
//!
//! ```text
//! +-----------+--------------------+-------------+--------+------------------+-----+--------+
//! | version 2 | server version 50  | create ts 4 | hdr 19 | post-header N    | alg | CRC32  |
//! | (4)       | NUL-padded         |             |        | lengths, types   | 1   | 4      |
//! |           |                    |             |        | 1..=N            |     |        |
//! +-----------+--------------------+-------------+--------+------------------+-----+--------+
//! ```
//! The CRC32 is present even when the algorithm byte says OFF. The entry for type 15 itself is
//! 57 + N (connector-java locates the algorithm byte with it).

use crate::binlog::checksum::ChecksumAlg;
use crate::binlog::error::{BinlogError, Result};
use crate::binlog::header::{EventType, HEADER_LEN};
use crate::binlog::writer::EventBody;

/// Bytes of the server-version field.
pub const SERVER_VERSION_LEN: usize = 50;

/// MySQL 8.0.26+ post-header lengths for types 1..=41 (entry 15 is recomputed as 57 + N).
/// Checked against a MySQL 8.0.35 file and, for types 1..=40, byte for byte against a MySQL
/// 8.0.22 file (`blackbeam/rust_mysql_common:test-data/binlogs/json.binlog.000001`).
pub const MYSQL_80_POST_HEADER_LENGTHS: [u8; 41] = [
    0, 13, 0, 8, 0, 0, 0, 0, 4, 0, // 1..=10
    4, 0, 0, 0, 98, 0, 4, 26, 8, 0, // 11..=20
    0, 0, 8, 8, 8, 2, 0, 0, 0, 10, // 21..=30
    10, 10, 42, 42, 0, 18, 52, 0, 10, 40, // 31..=40
    0,  // 41 HEARTBEAT_V2
];

/// MariaDB 10.5+ post-header lengths for types 1..=171, as read from a MariaDB 10.5.15 file
/// (`blackbeam/rust_mysql_common:test-data/binlogs/mariadb-bin.000001`): MySQL 5.x entries for
/// 1..=32, zeros for the MySQL-only 33..=159, then 160 ANNOTATE_ROWS 0, 161 BINLOG_CHECKPOINT 4,
/// 162 GTID 19, 163 GTID_LIST 4, 164 START_ENCRYPTION 0, 165 QUERY_COMPRESSED 13,
/// 166..=168 rows v1 compressed 8, 169..=171 rows v2 compressed 10.
pub const MARIADB_10_POST_HEADER_LENGTHS: [u8; 171] = {
    let mut a = [0u8; 171];
    let head: [u8; 32] = [
        56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 228, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0,
        0, 10, 10, 10,
    ];
    let tail: [u8; 12] = [0, 4, 19, 4, 0, 13, 8, 8, 8, 10, 10, 10];
    let mut i = 0;
    while i < head.len() {
        a[i] = head[i];
        i += 1;
    }
    let mut j = 0;
    while j < tail.len() {
        a[159 + j] = tail[j];
        j += 1;
    }
    a
};

/// A FORMAT_DESCRIPTION event body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatDescription<'a> {
    /// `@@version`, e.g. `8.0.36-tibinlog`; at most 50 bytes. Clients parse the digits before the
    /// first `-`.
    pub server_version: &'a str,
    /// Non-zero only in the first file after a master start (replicas then drop their temporary
    /// tables); 0 in the FDE sent when a dump starts past offset 4.
    pub create_timestamp: u32,
    /// Post-header lengths for types 1..=N; the FORMAT_DESCRIPTION entry is replaced by 57 + N.
    pub post_header_lengths: &'a [u8],
    pub checksum_alg: ChecksumAlg,
}

impl<'a> FormatDescription<'a> {
    /// What MySQL 8.0 writes.
    pub fn mysql80(
        server_version: &'a str,
        create_timestamp: u32,
        checksum_alg: ChecksumAlg,
    ) -> Self {
        Self {
            server_version,
            create_timestamp,
            post_header_lengths: &MYSQL_80_POST_HEADER_LENGTHS,
            checksum_alg,
        }
    }

    /// What MariaDB 10.5+ writes.
    pub fn mariadb10(
        server_version: &'a str,
        create_timestamp: u32,
        checksum_alg: ChecksumAlg,
    ) -> Self {
        Self {
            server_version,
            create_timestamp,
            post_header_lengths: &MARIADB_10_POST_HEADER_LENGTHS,
            checksum_alg,
        }
    }

    /// Whole event length (header, body, algorithm byte, CRC32).
    pub fn event_len(&self) -> usize {
        HEADER_LEN + 2 + SERVER_VERSION_LEN + 4 + 1 + self.post_header_lengths.len() + 1 + 4
    }
}

impl EventBody for FormatDescription<'_> {
    fn event_type(&self) -> EventType {
        EventType::FORMAT_DESCRIPTION
    }

    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        let v = self.server_version.as_bytes();
        let n = self.post_header_lengths.len();
        if v.len() > SERVER_VERSION_LEN {
            return Err(BinlogError::TableDef {
                reason: "server version longer than 50 bytes",
            });
        }
        if !(15..=255 - 57).contains(&n) {
            return Err(BinlogError::TableDef {
                reason: "post-header table must cover 15..=198 types",
            });
        }
        buf.extend_from_slice(&4u16.to_le_bytes());
        buf.extend_from_slice(v);
        buf.resize(buf.len() + SERVER_VERSION_LEN - v.len(), 0);
        buf.extend_from_slice(&self.create_timestamp.to_le_bytes());
        buf.push(HEADER_LEN as u8);
        let at = buf.len();
        buf.extend_from_slice(self.post_header_lengths);
        buf[at + EventType::FORMAT_DESCRIPTION.0 as usize - 1] = (57 + n) as u8;
        buf.push(self.checksum_alg as u8);
        Ok(())
    }

    fn always_checksummed(&self) -> bool {
        true
    }
}

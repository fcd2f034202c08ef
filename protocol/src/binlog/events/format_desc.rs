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

use crate::binlog::checksum::{crc32, ChecksumAlg, CHECKSUM_LEN};
use crate::binlog::error::{BinlogError, Result};
use crate::binlog::header::{flags, EventType, HEADER_LEN};
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

/// MariaDB 10.11 post-header lengths for types 1..=171, as read from the FORMAT_DESCRIPTION of a
/// MariaDB 10.11.19 binlog: [`MARIADB_10_POST_HEADER_LENGTHS`] with 10 for types 39..=41 as
/// well. A MariaDB replica configures its parser from it.
pub const MARIADB_10_11_POST_HEADER_LENGTHS: [u8; 171] = {
    let mut a = MARIADB_10_POST_HEADER_LENGTHS;
    a[38] = 10;
    a[39] = 10;
    a[40] = 10;
    a
};

/// Offset in a FORMAT_DESCRIPTION event (header included) of its create timestamp.
const CREATE_TIMESTAMP_AT: usize = HEADER_LEN + 2 + SERVER_VERSION_LEN;

/// Clears `LOG_EVENT_BINLOG_IN_USE_F` in a stored FORMAT_DESCRIPTION's header, as it is sent
/// (the open file's carries the flag). The CRC stays valid: it is computed with the flag
/// cleared (see [`crate::binlog::EventWriter`]). Other events and short ones are left alone.
pub fn clear_binlog_in_use(ev: &mut [u8]) {
    if ev.len() >= HEADER_LEN && ev[4] == EventType::FORMAT_DESCRIPTION.0 {
        let f = u16::from_le_bytes([ev[17], ev[18]]) & !flags::BINLOG_IN_USE;
        ev[17..19].copy_from_slice(&f.to_le_bytes());
    }
}

/// Rewrites a stored FORMAT_DESCRIPTION (`ev`, CRC included) for sending to a client:
/// BINLOG_IN_USE cleared; `artificial` (a start past offset 4, where a master sends the FDE
/// as a made-up event) sets log_pos and the create timestamp to 0; `checksum_off` (a client
/// that never announced a checksum) sets the algorithm byte to OFF. The CRC is recomputed.
/// An event too short to be a FORMAT_DESCRIPTION is left alone.
///
/// ```text
/// header 19 | version 2 | server version 50 | create ts 4 | … | alg 1 | CRC 4
///                                            ^ offset 71           ^ len-5
/// ```
pub fn patch_for_sending(ev: &mut [u8], artificial: bool, checksum_off: bool) {
    let len = ev.len();
    if len < CREATE_TIMESTAMP_AT + 6 + CHECKSUM_LEN || ev[4] != EventType::FORMAT_DESCRIPTION.0 {
        return;
    }
    clear_binlog_in_use(ev);
    if artificial {
        ev[13..17].copy_from_slice(&0u32.to_le_bytes());
        ev[CREATE_TIMESTAMP_AT..CREATE_TIMESTAMP_AT + 4].copy_from_slice(&0u32.to_le_bytes());
    }
    if checksum_off {
        ev[len - CHECKSUM_LEN - 1] = ChecksumAlg::Off as u8;
    }
    let c = crc32(&ev[..len - CHECKSUM_LEN]);
    ev[len - CHECKSUM_LEN..].copy_from_slice(&c.to_le_bytes());
}

/// The checksum algorithm a stored FORMAT_DESCRIPTION (CRC included) announces: the byte
/// before its CRC.
pub fn checksum_alg_of(ev: &[u8]) -> Option<ChecksumAlg> {
    let at = ev.len().checked_sub(CHECKSUM_LEN + 1)?;
    (at > CREATE_TIMESTAMP_AT).then(|| ChecksumAlg::from_byte(ev[at]))?
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binlog::checksum::verify_event;
    use crate::binlog::{EventMeta, EventWriter, LogPos};

    fn fde(crc: ChecksumAlg) -> Vec<u8> {
        let mut w = EventWriter::new(7, crc == ChecksumAlg::Crc32);
        let mut buf = Vec::new();
        let res = w.write_with(
            &mut buf,
            EventMeta {
                timestamp: 1_700_000_000,
                log_pos: LogPos::StartsAt(4),
                flags: flags::BINLOG_IN_USE,
            },
            &FormatDescription::mysql80("8.0.36-tibinlog", 1_700_000_000, crc),
        );
        assert!(res.is_ok());
        buf
    }

    #[test]
    fn start_fde_has_zero_log_pos_and_timestamp_and_a_valid_crc() {
        let mut ev = fde(ChecksumAlg::Crc32);
        patch_for_sending(&mut ev, true, false);
        assert_eq!(&ev[13..17], &[0, 0, 0, 0]);
        assert_eq!(&ev[71..75], &[0, 0, 0, 0]);
        assert_eq!(
            u16::from_le_bytes([ev[17], ev[18]]) & flags::BINLOG_IN_USE,
            0
        );
        assert_eq!(ev[ev.len() - 5], ChecksumAlg::Crc32 as u8);
        assert!(verify_event(&ev).is_ok());
    }

    #[test]
    fn stripping_says_none_in_the_fde_and_shrinks_events() {
        let mut ev = fde(ChecksumAlg::Crc32);
        let len = ev.len();
        patch_for_sending(&mut ev, false, true);
        assert_eq!(ev.len(), len, "the FDE keeps its CRC");
        assert_eq!(ev[len - 5], ChecksumAlg::Off as u8);
        assert!(verify_event(&ev).is_ok());
    }

    #[test]
    fn the_algorithm_is_read_from_the_byte_before_the_crc() {
        assert_eq!(
            checksum_alg_of(&fde(ChecksumAlg::Crc32)),
            Some(ChecksumAlg::Crc32)
        );
        assert_eq!(
            checksum_alg_of(&fde(ChecksumAlg::Off)),
            Some(ChecksumAlg::Off)
        );
        assert_eq!(checksum_alg_of(&[0; 20]), None);
    }

    #[test]
    fn the_mariadb_10_11_table_differs_from_10_5_only_at_types_39_to_41() {
        let diff: Vec<usize> = (0..171)
            .filter(|&i| MARIADB_10_11_POST_HEADER_LENGTHS[i] != MARIADB_10_POST_HEADER_LENGTHS[i])
            .map(|i| i + 1)
            .collect();
        assert_eq!(diff, vec![39, 40, 41]);
    }
}

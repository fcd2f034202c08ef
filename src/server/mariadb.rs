//! What a MariaDB peer (a MariaDB 10.x replica, `mariadb-binlog`) needs changed in our
//! MySQL-flavoured stream (replication-client-compat §2.9, §3.12, §5.3 trap 18).
//!
//! MariaDB reads the MySQL 8.0 event layout, but its SQL thread applies the QUERY events'
//! `Q_CHARSET_CODE` (character_set_client, collation_connection, collation_server) and stops
//! with "Character set '#255' is not a compiled character set" for MySQL 8.0's
//! `utf8mb4_0900_*` collations (ids 255–323), which MariaDB 10.11 does not have
//! (`mariadb-binlog` stops on them too). Those ids are rewritten to `utf8mb4_bin` (46): it is
//! TiDB's default collation, so the databases a replicated `CREATE DATABASE` makes compare
//! strings as they do in TiDB.
//!
//! Every rewrite keeps the event's size, so positions (`log_pos`, the replica's running sum
//! of event sizes, `SHOW MASTER STATUS`) stay those of the files; only the CRC32 is
//! recomputed. MySQL-flavoured clients get the files' bytes unchanged.
//!
//! ```text
//! QUERY event: header 19 | thread id 4 | exec time 4 | db len 1 | error 2 | status len 2 |
//!              status vars: (code, value)… — code 4 = Q_CHARSET: client 2 | connection 2 | server 2
//! ```

use tibinlog_protocol::binlog::checksum::{crc32, CHECKSUM_LEN};
use tibinlog_protocol::binlog::{EventType, HEADER_LEN};

/// `utf8mb4_bin`, TiDB's default collation, known to every MariaDB.
pub const UTF8MB4_BIN: u16 = 46;

/// The collation a MariaDB peer gets for MySQL collation `id`: MySQL 8.0's `utf8mb4_0900_*`
/// family (255 `utf8mb4_0900_ai_ci` … 323) becomes [`UTF8MB4_BIN`]; other ids are kept.
pub fn collation_for_mariadb(id: u16) -> u16 {
    if (255..=323).contains(&id) {
        UTF8MB4_BIN
    } else {
        id
    }
}

/// Rewrites the collation ids of a QUERY event's `Q_CHARSET_CODE` for a MariaDB peer, in
/// place. `has_crc`: the event ends with a CRC32, recomputed when something changed. Other
/// events, and QUERY events whose status block cannot be walked, are left as they are.
pub fn patch_query_event(ev: &mut [u8], has_crc: bool) {
    if ev.get(4) != Some(&EventType::QUERY.0) {
        return;
    }
    let end = ev
        .len()
        .saturating_sub(if has_crc { CHECKSUM_LEN } else { 0 });
    let Some(at) = charset_offset(ev.get(..end).unwrap_or(&[])) else {
        return;
    };
    let mut changed = false;
    for i in 0..3 {
        let p = at + 2 * i;
        let id = u16::from_le_bytes([ev[p], ev[p + 1]]);
        let new = collation_for_mariadb(id);
        if new != id {
            ev[p..p + 2].copy_from_slice(&new.to_le_bytes());
            changed = true;
        }
    }
    if changed && has_crc {
        let c = crc32(&ev[..end]);
        ev[end..end + CHECKSUM_LEN].copy_from_slice(&c.to_le_bytes());
    }
}

/// Offset in the event of the 6-byte `Q_CHARSET_CODE` value, if the status block has one
/// before the first code whose length we do not know.
fn charset_offset(ev: &[u8]) -> Option<usize> {
    // Post-header: thread id 4, exec time 4, db len 1, error code 2, status-vars length 2.
    let post = HEADER_LEN;
    let status_len = usize::from(u16::from_le_bytes([
        *ev.get(post + 11)?,
        *ev.get(post + 12)?,
    ]));
    let start = post + 13;
    let end = start.checked_add(status_len)?;
    if end > ev.len() {
        return None;
    }
    let mut p = start;
    while p < end {
        let code = ev[p];
        p += 1;
        let len = match code {
            // Q_FLAGS2, Q_AUTO_INCREMENT, Q_MASTER_DATA_WRITTEN
            0 | 3 | 10 => 4,
            // Q_SQL_MODE, Q_TABLE_MAP_FOR_UPDATE
            1 | 9 => 8,
            // Q_CATALOG: length, name, NUL
            2 => usize::from(*ev.get(p)?) + 2,
            4 => return (p + 6 <= end).then_some(p),
            // Q_TIME_ZONE, Q_CATALOG_NZ: length, name
            5 | 6 => usize::from(*ev.get(p)?) + 1,
            // Q_LC_TIME_NAMES, Q_CHARSET_DATABASE
            7 | 8 => 2,
            // Q_INVOKER: user length, user, host length, host
            11 => {
                let user = usize::from(*ev.get(p)?);
                user + 2 + usize::from(*ev.get(p + 1 + user)?)
            }
            // Q_UPDATED_DB_NAMES: count (254 = too many, none follow), NUL-terminated names
            12 => {
                let n = *ev.get(p)?;
                let mut q = p + 1;
                if n != 254 {
                    for _ in 0..n {
                        q += ev.get(q..end)?.iter().position(|b| *b == 0)? + 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use tibinlog_protocol::binlog::checksum::verify_event;
    use tibinlog_protocol::binlog::{EventWriter, QueryEvent, QueryStatus};

    fn event(q: &QueryEvent<'_>, crc: bool) -> Vec<u8> {
        let mut w = EventWriter::new(1, crc);
        let mut buf = Vec::new();
        let res = w.write(&mut buf, 4, 1_700_000_000, q);
        assert!(res.is_ok(), "{res:?}");
        buf
    }

    /// The 6 bytes after the Q_CHARSET code, found by searching (independent of the walker).
    fn charset_bytes(ev: &[u8], ids: [u16; 3]) -> Option<usize> {
        let mut want = vec![4u8];
        for id in ids {
            want.extend_from_slice(&id.to_le_bytes());
        }
        ev.windows(7)
            .position(|w| w == want.as_slice())
            .map(|p| p + 1)
    }

    #[test]
    fn begin_and_ddl_get_utf8mb4_bin_and_a_valid_crc() {
        let dbs = ["wl"];
        for q in [
            QueryEvent::begin(1),
            QueryEvent::ddl(1, "wl", "CREATE DATABASE `wl`", &dbs, 42),
        ] {
            let original = event(&q, true);
            let at = charset_bytes(&original, [255; 3]).expect("charset 255 written");
            let mut ev = original.clone();
            patch_query_event(&mut ev, true);
            assert_eq!(ev.len(), original.len(), "size kept");
            assert_eq!(&ev[at..at + 6], &[46, 0, 46, 0, 46, 0]);
            assert_eq!(&ev[..at], &original[..at]);
            assert_eq!(
                &ev[at + 6..ev.len() - 4],
                &original[at + 6..original.len() - 4]
            );
            assert!(verify_event(&ev).is_ok(), "CRC recomputed");
        }
    }

    #[test]
    fn without_crc_only_the_ids_change() {
        let original = event(&QueryEvent::begin(1), false);
        let at = charset_bytes(&original, [255; 3]).expect("charset");
        let mut ev = original.clone();
        patch_query_event(&mut ev, false);
        let mut want = original.clone();
        want[at..at + 6].copy_from_slice(&[46, 0, 46, 0, 46, 0]);
        assert_eq!(ev, want);
    }

    #[test]
    fn known_collations_and_other_events_are_untouched() {
        let q = QueryEvent {
            status: QueryStatus {
                charset: Some([45, 224, 8]),
                time_zone: Some("+00:00"),
                ..QueryStatus::MYSQL80_DEFAULT
            },
            ..QueryEvent::begin(1)
        };
        let original = event(&q, true);
        let mut ev = original.clone();
        patch_query_event(&mut ev, true);
        assert_eq!(ev, original);

        let mut not_query = original.clone();
        not_query[4] = EventType::XID.0;
        let copy = not_query.clone();
        patch_query_event(&mut not_query, true);
        assert_eq!(not_query, copy);
    }

    #[test]
    fn truncated_or_unknown_status_blocks_are_left_alone() {
        let original = event(&QueryEvent::begin(1), true);
        for cut in [0, 10, HEADER_LEN + 5, HEADER_LEN + 14] {
            let mut ev = original[..cut].to_vec();
            let copy = ev.clone();
            patch_query_event(&mut ev, true);
            assert_eq!(ev, copy, "cut at {cut}");
        }
        // An unknown code before Q_CHARSET stops the walk.
        let mut ev = original.clone();
        ev[HEADER_LEN + 13] = 99;
        let copy = ev.clone();
        patch_query_event(&mut ev, true);
        assert_eq!(ev, copy);
    }

    #[test]
    fn mapping_covers_the_utf8mb4_0900_family_only() {
        assert_eq!(collation_for_mariadb(255), UTF8MB4_BIN);
        assert_eq!(collation_for_mariadb(309), UTF8MB4_BIN);
        assert_eq!(collation_for_mariadb(323), UTF8MB4_BIN);
        for kept in [8, 33, 45, 46, 63, 224, 247, 324, 1070] {
            assert_eq!(collation_for_mariadb(kept), kept);
        }
    }
}

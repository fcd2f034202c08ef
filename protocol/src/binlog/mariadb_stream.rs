//! What a MariaDB peer (a MariaDB 10.x replica, `mariadb-binlog`) needs changed in a
//! MySQL-flavoured stream (MariaDB's `sql/slave.cc` and `sql/log_event.cc`).
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
//! # MariaDB GTID flavour
//! A GTID-aware MariaDB peer (a MariaDB replica, by file/position or with
//! `MASTER_USE_GTID=slave_pos|current_pos`; `mariadb-binlog`) gets a MariaDB-flavoured stream,
//! computed per session from the MySQL-flavoured files ([`GtidFlavour`]). A MySQL GTID `uuid:gno`
//! of the server's `@@server_uuid` is the MariaDB GTID `0-<@@server_id>-<gno>` ([`DOMAIN`] 0).
//!
//! ```text
//! file:   FDE | PREVIOUS_GTIDS        | GTID(33) BEGIN       TABLE_MAP ROWS… XID | GTID(33) QUERY(DDL)
//! stream: FDE'| GTID_LIST(163)        | GTID(162, TRANS.)    TABLE_MAP ROWS… XID | GTID(162, STANDALONE|DDL) QUERY
//!             | same size and end     | 42 bytes, ends where                     | 42 bytes, ends
//!             |                       | BEGIN ends                               | where it ends
//! ```
//!
//! Position rule: every event keeps the end offset (`log_pos`) it has in the file, so
//! `Read_Master_Log_Pos`, `Exec_Master_Log_Pos`, heartbeats and a later file/position restart
//! all use the files' coordinates. A MariaDB GTID event (42 bytes with its CRC) is shorter
//! than the MySQL GTID (+ BEGIN) it stands for: the peer sees a hole before its end, as it
//! does when a MariaDB master leaves out events the peer did not ask for (ANNOTATE_ROWS,
//! `@@skip_replication`). Every GTID-aware peer tolerates holes (MariaDB's capability levels:
//! `MARIA_SLAVE_CAPABILITY_TOLERATE_HOLES` 3 < `MARIA_SLAVE_CAPABILITY_GTID` 4): a replica's I/O
//! thread, seeing a log_pos past its running position, moves the position to it; clients
//! that keep positions (Debezium, Canal, python-mysql-replication, go-mysql) take them from
//! log_pos. Sending the unpadded event saves a third of the bytes of a small transaction.
//! The GTID_LIST (163) is padded to the size of the PREVIOUS_GTIDS it replaces (MariaDB's
//! parser accepts zero bytes after the list, and pads its own empty GTID_LIST the same way).
//! The MariaDB FORMAT_DESCRIPTION (MariaDB's type table up to 171 entries, 252 bytes, with the
//! files' MySQL server version) is larger than MySQL's, so it is sent the way a master sends
//! the FDE of a start inside a file: log_pos 0, which a replica does not add to its position,
//! after a fake ROTATE that names the offset where the file's own FDE ends.
//!
//! ```text
//! QUERY event: header 19 | thread id 4 | exec time 4 | db len 1 | error 2 | status len 2 |
//!              status vars: (code, value)… — code 4 = Q_CHARSET: client 2 | connection 2 | server 2
//! ```

use crate::binlog::checksum::{crc32, CHECKSUM_LEN};
use crate::binlog::error::Result;
use crate::binlog::events::format_desc::{FormatDescription, MARIADB_10_11_POST_HEADER_LENGTHS};
use crate::binlog::events::mariadb::{
    gtid_flags, MariadbGtid, MariadbGtidEvent, MariadbGtidList, GTID_LIST_UNTIL_REACHED,
};
use crate::binlog::{
    flags, read, ChecksumAlg, EventHeader, EventMeta, EventType, EventWriter, GtidSet, LogPos,
    HEADER_LEN,
};

/// `utf8mb4_bin`, TiDB's default collation, known to every MariaDB.
pub const UTF8MB4_BIN: u16 = 46;

/// The GTID domain of every MariaDB GTID the server sends.
pub const DOMAIN: u32 = 0;

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
    let Some(at) = ev
        .get(HEADER_LEN..end)
        .and_then(read::query_charset_offset)
        .map(|at| HEADER_LEN + at)
    else {
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

/// Writes a MariaDB GTID event (162) of [`DOMAIN`] into `out` (cleared first, so a session can
/// reuse one buffer), zero-padded to `size` bytes (CRC included if `crc`) when that is larger.
fn gtid_event_into(
    out: &mut Vec<u8>,
    server_id: u32,
    meta: EventMeta,
    (seq_no, fl): (u64, u8),
    size: usize,
    crc: bool,
) -> Result<()> {
    out.clear();
    let ev = MariadbGtidEvent {
        seq_no,
        domain_id: DOMAIN,
        flags: fl,
        commit_id: None,
    };
    EventWriter::new(server_id, crc).write_padded(out, meta, &ev, size)?;
    Ok(())
}

/// A MariaDB GTID_LIST event (163) of `list`, zero-padded to `size` bytes when that is larger;
/// `until_reached` flags it as the stop of a replica's `START SLAVE UNTIL master_gtid_pos`.
pub fn gtid_list_event(
    server_id: u32,
    meta: EventMeta,
    list: &[MariadbGtid],
    until_reached: bool,
    size: usize,
    crc: bool,
) -> Result<Vec<u8>> {
    let ev = MariadbGtidList {
        gtids: list,
        flags: if until_reached {
            GTID_LIST_UNTIL_REACHED
        } else {
            0
        },
    };
    let mut out = Vec::with_capacity(size.max(HEADER_LEN + 8 + 16 * list.len()));
    EventWriter::new(server_id, crc).write_padded(&mut out, meta, &ev, size)?;
    Ok(out)
}

/// A MariaDB 10.11 FORMAT_DESCRIPTION built from a file's MySQL one (`file_fde`, as stored):
/// binlog version 4, the file FDE's server version, timestamp and server id, log_pos 0, create
/// time 0, header length 19, [`MARIADB_10_11_POST_HEADER_LENGTHS`], then the checksum
/// algorithm byte (`alg`) and a CRC32. Like a real FDE it always ends with the 4 CRC bytes.
/// `None` when `file_fde` is too short to hold a server version.
///
/// The server version stays MySQL's on purpose: from an FDE that names a MariaDB ≥ 10.5.2
/// master, a MariaDB replica also applies `Q_FLAGS2` bits it does not read from MySQL masters
/// (`OPTION_EXPLICIT_DEF_TIMESTAMP`, `OPTION_IF_EXISTS`); the files' QUERY events carry MySQL's
/// flags, so a MariaDB version made a replica create `TIMESTAMP` columns as with
/// `explicit_defaults_for_timestamp=OFF` and fail ("Invalid default value").
pub fn format_description(file_fde: &[u8], alg: ChecksumAlg) -> Option<Vec<u8>> {
    let head = EventHeader::parse(file_fde).ok()?;
    let version = read::server_version(file_fde.get(HEADER_LEN..)?)?;
    let fde = FormatDescription {
        server_version: std::str::from_utf8(version).ok()?,
        create_timestamp: 0,
        post_header_lengths: &MARIADB_10_11_POST_HEADER_LENGTHS,
        checksum_alg: alg,
    };
    let meta = EventMeta {
        timestamp: head.timestamp,
        log_pos: LogPos::Fixed(0),
        flags: head.flags & !flags::BINLOG_IN_USE,
    };
    let mut out = Vec::with_capacity(fde.event_len());
    EventWriter::new(head.server_id, true)
        .write_with(&mut out, meta, &fde)
        .ok()?;
    Some(out)
}

/// The per-session rewrite of a MySQL-flavoured event sequence into MariaDB's GTID flavour (see
/// the module docs). Events are fed in file order, as they would be sent (CRC stripped or not).
/// Events that keep their size are rewritten in place; the GTID events it writes go through
/// two reused buffers, so a session allocates nothing per event.
#[derive(Debug)]
pub struct GtidFlavour {
    /// The server's `@@server_id`: the server id of every MariaDB GTID.
    server_id: u32,
    /// The server's `@@server_uuid` as a SID.
    sid: [u8; 16],
    /// Events carry a CRC32.
    crc: bool,
    /// A MySQL GTID event waiting for the event that tells whether it opens a transaction
    /// (its bytes are in `pending`).
    has_pending: bool,
    pending: Vec<u8>,
    /// The event being written in place of the pending one.
    out: Vec<u8>,
}

impl GtidFlavour {
    /// A rewrite for the server with `server_id` and `@@server_uuid` `sid`; `crc`: the events
    /// fed carry a CRC32.
    pub fn new(server_id: u32, sid: [u8; 16], crc: bool) -> Self {
        Self {
            server_id,
            sid,
            crc,
            has_pending: false,
            pending: Vec::new(),
            out: Vec::new(),
        }
    }

    /// A GTID event is waiting for its next event.
    pub fn has_pending(&self) -> bool {
        self.has_pending
    }

    /// Forgets a waiting GTID event (a new file starts).
    pub fn reset(&mut self) {
        self.has_pending = false;
    }

    /// Takes one event and passes what goes out instead to `emit`: nothing for a MySQL GTID
    /// event, which waits for the next one; one GTID event for the BEGIN that merges into it;
    /// the GTID event, then the event, for a standalone statement.
    pub fn feed(&mut self, ev: &mut [u8], mut emit: impl FnMut(&[u8])) -> Result<()> {
        let ty = ev.get(4).map(|t| EventType(*t));
        if self.has_pending {
            self.has_pending = false;
            self.write_pending_gtid(ev, ty)?;
            emit(&self.out);
            if ty == Some(EventType::QUERY) && self.is_begin(ev) {
                return Ok(());
            }
        }
        match ty {
            Some(EventType::GTID) => {
                self.pending.clear();
                self.pending.extend_from_slice(ev);
                self.has_pending = true;
            }
            Some(EventType::PREVIOUS_GTIDS) => match EventHeader::parse(ev) {
                // Header flags 0 as MariaDB writes them: MySQL marks PREVIOUS_GTIDS
                // LOG_EVENT_IGNORABLE_F, which would make a replica skip the list.
                Ok(head) => {
                    let meta = EventMeta {
                        timestamp: head.timestamp,
                        log_pos: LogPos::Fixed(head.log_pos),
                        flags: 0,
                    };
                    let list = self.state_of_previous_gtids(ev);
                    emit(&gtid_list_event(
                        head.server_id,
                        meta,
                        &list,
                        false,
                        ev.len(),
                        self.crc,
                    )?);
                }
                Err(_) => emit(ev),
            },
            Some(EventType::QUERY) => {
                patch_query_event(ev, self.crc);
                emit(ev);
            }
            _ => emit(ev),
        }
        Ok(())
    }

    /// Writes into `out` the MariaDB GTID event standing for the pending MySQL GTID, now that
    /// its next event `ev` (of type `ty`) tells what kind of group it opens: a transaction
    /// (BEGIN merges into it and it ends where BEGIN ended) or a standalone statement.
    fn write_pending_gtid(&mut self, ev: &[u8], ty: Option<EventType>) -> Result<()> {
        let gtid = &self.pending;
        let seq_no = read::gtid_of_event(gtid).map_or(0, |(_, gno)| gno);
        let (timestamp, log_pos) =
            EventHeader::parse(gtid).map_or((0, 0), |h| (h.timestamp, h.log_pos));
        let mut meta = EventMeta {
            timestamp,
            log_pos: LogPos::Fixed(log_pos),
            flags: flags::SUPPRESS_USE,
        };
        let fl = if ty == Some(EventType::QUERY) && self.is_begin(ev) {
            if let Ok(h) = EventHeader::parse(ev) {
                meta.log_pos = LogPos::Fixed(h.log_pos);
            }
            gtid_flags::TRANSACTIONAL | gtid_flags::ALLOW_PARALLEL
        } else if ty == Some(EventType::QUERY) {
            gtid_flags::STANDALONE | gtid_flags::ALLOW_PARALLEL | gtid_flags::DDL
        } else {
            gtid_flags::STANDALONE
        };
        gtid_event_into(
            &mut self.out,
            self.server_id,
            meta,
            (seq_no, fl),
            0,
            self.crc,
        )
    }

    fn is_begin(&self, ev: &[u8]) -> bool {
        query_text(ev, self.crc) == Some(&b"BEGIN"[..])
    }

    /// The MariaDB binlog state a PREVIOUS_GTIDS event stands for: the last GNO of the
    /// server's SID.
    fn state_of_previous_gtids(&self, ev: &[u8]) -> Vec<MariadbGtid> {
        let end = ev
            .len()
            .saturating_sub(if self.crc { CHECKSUM_LEN } else { 0 });
        let set = ev
            .get(HEADER_LEN..end)
            .and_then(|b| GtidSet::decode(b).ok());
        let last = set.and_then(|s| {
            s.iter()
                .find(|(sid, _)| sid.0 == self.sid)
                .and_then(|(_, ivs)| ivs.last().map(|&(_, e)| e - 1))
        });
        last.map(|seq_no| MariadbGtid {
            domain_id: DOMAIN,
            server_id: self.server_id,
            seq_no,
        })
        .into_iter()
        .collect()
    }
}

/// The statement text of a QUERY event (`has_crc`: it ends with a CRC32).
pub fn query_text(ev: &[u8], has_crc: bool) -> Option<&[u8]> {
    let end = ev
        .len()
        .checked_sub(if has_crc { CHECKSUM_LEN } else { 0 })?;
    read::query_text_bytes(ev.get(HEADER_LEN..end)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binlog::checksum::verify_event;
    use crate::binlog::events::mariadb::GTID_BODY_LEN;
    use crate::binlog::{QueryEvent, QueryStatus, Sid};

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

    /// Events written by a real MariaDB 10.11.19 (`--log-bin`, server id 7, CRC32): `CREATE
    /// DATABASE` (GTID 0-7-1, DDL), an InnoDB row transaction (0-7-3), the empty GTID_LIST of
    /// the first file (MariaDB pads it with two zero bytes) and the one of the second file.
    const REAL_GTID_DDL: &str =
        "8c4d0d6ba2070000002a0000006d0100000800010000000000000000000000290000000000004b7e7ec5";
    const REAL_GTID_ROWS: &str =
        "8c4d0d6ba2070000002a0000008c02000008000300000000000000000000000c00000000000031b3f377";
    const REAL_GTID_LIST_EMPTY: &str = "8b4d0d6ba3070000001d0000001d010000000000000000000090c6f89b";
    const REAL_GTID_LIST_ONE: &str = "8d4d0d6ba3070000002b0000002b01000000000100000000000000070000\
         00030000000000000001fdd7d0";

    /// Server id and header fields of a real event, to write ours with.
    fn head(ev_hex: &str) -> (u32, EventMeta) {
        let ev = hex::decode(ev_hex).expect("hex");
        let h = EventHeader::parse(&ev).expect("header");
        let meta = EventMeta {
            timestamp: h.timestamp,
            log_pos: LogPos::Fixed(h.log_pos),
            flags: h.flags,
        };
        (h.server_id, meta)
    }

    fn gtid_event(
        (server_id, meta): (u32, EventMeta),
        seq_no: u64,
        fl: u8,
        size: usize,
        crc: bool,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let res = gtid_event_into(&mut out, server_id, meta, (seq_no, fl), size, crc);
        assert!(res.is_ok(), "{res:?}");
        out
    }

    #[test]
    fn gtid_events_are_byte_identical_to_mariadb_s() {
        let ddl = gtid_event(
            head(REAL_GTID_DDL),
            1,
            gtid_flags::STANDALONE | gtid_flags::ALLOW_PARALLEL | gtid_flags::DDL,
            0,
            true,
        );
        assert_eq!(hex::encode(&ddl), REAL_GTID_DDL);
        let rows = gtid_event(
            head(REAL_GTID_ROWS),
            3,
            gtid_flags::TRANSACTIONAL | gtid_flags::ALLOW_PARALLEL,
            0,
            true,
        );
        assert_eq!(hex::encode(&rows), REAL_GTID_ROWS);
        assert_eq!(head(REAL_GTID_ROWS).1.flags, flags::SUPPRESS_USE);
    }

    #[test]
    fn gtid_list_events_are_byte_identical_to_mariadb_s() {
        let (id, meta) = head(REAL_GTID_LIST_EMPTY);
        let empty = gtid_list_event(id, meta, &[], false, 29, true).expect("list");
        assert_eq!(hex::encode(&empty), REAL_GTID_LIST_EMPTY);
        let (id, meta) = head(REAL_GTID_LIST_ONE);
        let g = MariadbGtid {
            domain_id: 0,
            server_id: 7,
            seq_no: 3,
        };
        let one = gtid_list_event(id, meta, &[g], false, 0, true).expect("list");
        assert_eq!(hex::encode(&one), REAL_GTID_LIST_ONE.replace(' ', ""));
        let until = gtid_list_event(id, meta, &[g], true, 0, true).expect("list");
        assert_eq!(
            &until[HEADER_LEN..HEADER_LEN + 4],
            &(1u32 | 1 << 28).to_le_bytes()
        );
        assert!(verify_event(&until).is_ok());
    }

    #[test]
    fn padding_keeps_the_layout_and_a_valid_crc() {
        let h = head(REAL_GTID_ROWS);
        let ev = gtid_event(h, 3, gtid_flags::TRANSACTIONAL, 150, true);
        assert_eq!(ev.len(), 150);
        assert_eq!(u32::from_le_bytes([ev[9], ev[10], ev[11], ev[12]]), 150);
        assert_eq!(&ev[HEADER_LEN..HEADER_LEN + 8], &3u64.to_le_bytes());
        assert_eq!(ev[HEADER_LEN + 12], gtid_flags::TRANSACTIONAL);
        assert!(
            ev[HEADER_LEN + 13..146].iter().all(|b| *b == 0),
            "zero padding"
        );
        assert!(verify_event(&ev).is_ok());
        // Without CRC, no trailing checksum.
        let plain = gtid_event(h, 3, gtid_flags::TRANSACTIONAL, 0, false);
        assert_eq!(plain.len(), HEADER_LEN + GTID_BODY_LEN);
    }

    #[test]
    fn format_description_matches_mariadb_10_11_s_type_table() {
        // The FDE of a MariaDB 10.11.19 binlog: 252 bytes, header length 19, 171 types, CRC32.
        let real = hex::decode(
            "8b4d0d6b0f07000000fc000000000100000000040031302e31312e31392d4d6172696144422d302b64656231\
             3275312d6c6f6700000000000000000000000000000000000000008b4d0d6b13380d00080012000404040412\
             0000e400041a08000000080808020000000a0a0a0000000000000a0a0a000000000000000000000000000000\
             0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
             0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
             00000000000000000000000000000000041304000d0808080a0a0a0113eb63eb",
        )
        .expect("hex");
        assert_eq!(real.len(), 252);
        assert_eq!(&real[76..76 + 171], &MARIADB_10_11_POST_HEADER_LENGTHS[..]);

        let mut w = EventWriter::new(1, true);
        let mut mysql = Vec::new();
        let res = w.write(
            &mut mysql,
            4,
            1_700_000_000,
            &crate::binlog::FormatDescription::mysql80(
                "8.0.36-tibinlog",
                1_700_000_000,
                crate::binlog::ChecksumAlg::Crc32,
            ),
        );
        assert!(res.is_ok());
        let ev = format_description(&mysql, ChecksumAlg::Crc32).expect("fde");
        assert_eq!(ev.len(), real.len());
        assert_eq!(&ev[..4], &mysql[..4], "timestamp kept");
        assert_eq!(ev[4], EventType::FORMAT_DESCRIPTION.0);
        assert_eq!(
            &ev[13..17],
            &[0, 0, 0, 0],
            "log_pos 0: not counted by the replica"
        );
        assert_eq!(&ev[19..21], &real[19..21], "binlog version 4");
        assert_eq!(&ev[71..75], &[0, 0, 0, 0], "create time 0");
        assert_eq!(&ev[75..ev.len() - 5], &real[75..real.len() - 5]);
        assert_eq!(ev[ev.len() - 5], 1, "CRC32");
        assert!(verify_event(&ev).is_ok());
        assert_eq!(&ev[21..71], &mysql[21..71], "the files' server version");
        // The post-header lengths MariaDB will use for the events we forward equal the ones
        // the MySQL FDE of our files announces.
        let mysql_lens = &mysql[76..mysql.len() - 5];
        for ty in [2usize, 4, 16, 19, 30, 31, 32] {
            assert_eq!(
                MARIADB_10_11_POST_HEADER_LENGTHS[ty - 1],
                mysql_lens[ty - 1],
                "type {ty}"
            );
        }
        assert_eq!(MARIADB_10_11_POST_HEADER_LENGTHS[161], GTID_BODY_LEN as u8);
        assert_eq!(MARIADB_10_11_POST_HEADER_LENGTHS[162], 4);
    }

    /// A MySQL-flavoured file: FDE, PREVIOUS_GTIDS, a row transaction (GTID 6), a DDL (GTID 7).
    fn mysql_file(sid: Sid) -> Vec<Vec<u8>> {
        use crate::binlog::{GtidEvent, PreviousGtids, Xid};
        let mut w = EventWriter::new(1, true);
        let mut pos = 4u64;
        let mut out = Vec::new();
        let mut push = |buf: Vec<u8>, pos: &mut u64| {
            *pos += buf.len() as u64;
            out.push(buf);
        };
        let mut prev = crate::binlog::GtidSet::new();
        prev.add_interval(sid, 1, 6);
        let ts = 1_700_000_000;
        let mut b = Vec::new();
        assert!(w.write(&mut b, pos, ts, &PreviousGtids(&prev)).is_ok());
        push(b, &mut pos);
        let mut b = Vec::new();
        assert!(w
            .write(&mut b, pos, ts, &GtidEvent::new(sid, 6, 1, 1, 80036))
            .is_ok());
        push(b, &mut pos);
        let mut b = Vec::new();
        assert!(w.write(&mut b, pos, ts, &QueryEvent::begin(1)).is_ok());
        push(b, &mut pos);
        let mut b = Vec::new();
        assert!(w.write(&mut b, pos, ts, &Xid(9)).is_ok());
        push(b, &mut pos);
        let mut b = Vec::new();
        assert!(w
            .write(&mut b, pos, ts, &GtidEvent::new(sid, 7, 2, 2, 80036))
            .is_ok());
        push(b, &mut pos);
        let dbs = ["wl"];
        let ddl = QueryEvent::ddl(1, "wl", "CREATE DATABASE `wl`", &dbs, 42);
        let mut b = Vec::new();
        assert!(w.write(&mut b, pos, ts, &ddl).is_ok());
        push(b, &mut pos);
        out
    }

    fn log_pos(ev: &[u8]) -> u32 {
        u32::from_le_bytes([ev[13], ev[14], ev[15], ev[16]])
    }

    #[test]
    fn flavour_keeps_every_end_offset_with_holes_only_at_gtids() {
        let sid = Sid([7; 16]);
        let file = mysql_file(sid);
        let mut f = GtidFlavour::new(1, sid.0, true);
        let mut out = Vec::new();
        for mut ev in file.clone() {
            assert!(f.feed(&mut ev, |e| out.push(e.to_vec())).is_ok());
        }
        assert!(!f.has_pending());
        let types: Vec<u8> = out.iter().map(|e| e[4]).collect();
        assert_eq!(
            types,
            vec![
                EventType::MARIADB_GTID_LIST.0,
                EventType::MARIADB_GTID.0,
                EventType::XID.0,
                EventType::MARIADB_GTID.0,
                EventType::QUERY.0
            ]
        );
        // The running sum of sizes from the offset after the FDE equals every log_pos, except
        // before a GTID event's end: a hole the peer moves over to the GTID's log_pos.
        let mut at = u64::from(log_pos(&file[0])) - file[0].len() as u64;
        for ev in &out {
            at += ev.len() as u64;
            if ev[4] == EventType::MARIADB_GTID.0 {
                assert!(u64::from(log_pos(ev)) > at, "a hole before the GTID's end");
                at = u64::from(log_pos(ev));
            }
            assert_eq!(u64::from(log_pos(ev)), at);
            assert!(verify_event(ev).is_ok());
            assert_eq!(
                u32::from_le_bytes([ev[9], ev[10], ev[11], ev[12]]) as usize,
                ev.len()
            );
        }
        assert_eq!(at, u64::from(log_pos(file.last().expect("events"))));
        // GTID_LIST: the state at file start, 0-1-5.
        let gl = &out[0];
        assert_eq!(&gl[17..19], &[0, 0], "no LOG_EVENT_IGNORABLE_F");
        assert_ne!(&file[0][17..19], &[0, 0], "MySQL's PREVIOUS_GTIDS has it");
        assert_eq!(&gl[HEADER_LEN..HEADER_LEN + 4], &1u32.to_le_bytes());
        assert_eq!(&gl[HEADER_LEN + 4..HEADER_LEN + 8], &0u32.to_le_bytes());
        assert_eq!(&gl[HEADER_LEN + 8..HEADER_LEN + 12], &1u32.to_le_bytes());
        assert_eq!(&gl[HEADER_LEN + 12..HEADER_LEN + 20], &5u64.to_le_bytes());
        // Row transaction: seq 6, TRANSACTIONAL, replaces GTID + BEGIN and ends where BEGIN did.
        let t = &out[1];
        assert_eq!(t.len(), HEADER_LEN + GTID_BODY_LEN + 4, "MariaDB's size");
        assert_eq!(log_pos(t), log_pos(&file[2]));
        assert_eq!(&t[HEADER_LEN..HEADER_LEN + 8], &6u64.to_le_bytes());
        assert_eq!(&t[HEADER_LEN + 8..HEADER_LEN + 12], &0u32.to_le_bytes());
        assert_eq!(
            t[HEADER_LEN + 12],
            gtid_flags::TRANSACTIONAL | gtid_flags::ALLOW_PARALLEL
        );
        assert_eq!(u32::from_le_bytes([t[5], t[6], t[7], t[8]]), 1, "server id");
        // DDL: seq 7, STANDALONE | DDL, then the QUERY with MariaDB collations.
        let d = &out[3];
        assert_eq!(d.len(), HEADER_LEN + GTID_BODY_LEN + 4);
        assert_eq!(log_pos(d), log_pos(&file[4]));
        assert_eq!(&d[HEADER_LEN..HEADER_LEN + 8], &7u64.to_le_bytes());
        assert_eq!(
            d[HEADER_LEN + 12],
            gtid_flags::STANDALONE | gtid_flags::ALLOW_PARALLEL | gtid_flags::DDL
        );
        assert_eq!(
            query_text(&out[4], true),
            Some(&b"CREATE DATABASE `wl`"[..])
        );
        assert!(charset_bytes(&out[4], [UTF8MB4_BIN; 3]).is_some());
    }

    #[test]
    fn empty_previous_gtids_become_an_empty_gtid_list_of_the_same_size() {
        let mut w = EventWriter::new(1, true);
        let mut b = Vec::new();
        let empty = crate::binlog::GtidSet::new();
        assert!(w
            .write(&mut b, 126, 5, &crate::binlog::PreviousGtids(&empty))
            .is_ok());
        let mut f = GtidFlavour::new(1, [7; 16], true);
        let mut out = Vec::new();
        assert!(f.feed(&mut b.clone(), |e| out.push(e.to_vec())).is_ok());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), b.len());
        assert_eq!(out[0][4], EventType::MARIADB_GTID_LIST.0);
        assert_eq!(&out[0][HEADER_LEN..HEADER_LEN + 4], &[0, 0, 0, 0]);
        assert_eq!(log_pos(&out[0]), log_pos(&b));
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

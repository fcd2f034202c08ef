//! The decisions of a dump session, without sockets, tasks or clocks: given the request, the
//! client's session settings and the events read from the binlog, which events go out.
//!
//! ```text
//!  plan_start(request) ─► Start (file, pos, GTIDs to skip, MariaDB position/UNTIL) | 1236 text
//!  DumpPlan::new(start)
//!    on_start(file FDE) ─► fake ROTATE, [FORMAT_DESCRIPTION]
//!    on_event(ev)       ─► ev as sent (CRC stripped, FDE patched, MariaDB flavour) | nothing
//!    on_next_file(..)   ─► fake ROTATE(next, 4) [, MariaDB FORMAT_DESCRIPTION]
//!    on_caught_up()     ─► HEARTBEAT or MariaDB fake GTID_LIST after skipped transactions
//!    on_heartbeat()     ─► HEARTBEAT at the current position
//! ```
//!
//! The shell ([`super::session`]) reads the files, calls these in file order and frames what
//! they emit; when and how often it calls `on_heartbeat`, and how it flushes, is its business.
//! Events are emitted through a callback, so an event that goes out as stored (or patched in
//! place) is never copied here.
//!
//! [`plan_start`] reads the source's index only (files and GTID sets, which sources keep in
//! memory), never an event.

use std::time::Duration;

use tibinlog_protocol::binlog::checksum::{crc32, CHECKSUM_LEN};
use tibinlog_protocol::binlog::{
    flags, read, ChecksumAlg, EventMeta, EventType, EventWriter, GtidSet, Heartbeat, LogPos,
    Rotate, Sid, HEADER_LEN,
};
use tibinlog_protocol::wire::command::{DumpFlags, GtidSid};
use tibinlog_protocol::wire::errors::{
    MSG_FIRST_LOG_NOT_FOUND, MSG_GTIDS_PURGED, MSG_POS_BELOW_4, MSG_POS_PAST_EOF,
};

use super::super::mariadb::{self, EventHead, GtidFlavour, MariaGtid};
use super::super::source::{BinlogPosition, BinlogSource, SourceError};

/// What the replica asked for.
#[derive(Debug, Clone)]
pub enum DumpRequest {
    /// COM_BINLOG_DUMP: from a file and offset ("" = the first file).
    Position {
        file: String,
        pos: u64,
        flags: DumpFlags,
        server_id: u32,
    },
    /// COM_BINLOG_DUMP_GTID: everything not in the replica's GTID set.
    Gtid {
        sids: Vec<GtidSid>,
        flags: DumpFlags,
        server_id: u32,
    },
}

impl DumpRequest {
    /// The dump ends at the end of the binlog instead of waiting for more: asked for with
    /// BINLOG_DUMP_NON_BLOCK, and implied by server id 0 (what `mysqlbinlog` sends without
    /// `--stop-never`).
    pub fn non_blocking(&self) -> bool {
        let (flags, server_id) = match self {
            DumpRequest::Position {
                flags, server_id, ..
            }
            | DumpRequest::Gtid {
                flags, server_id, ..
            } => (*flags, *server_id),
        };
        flags.non_block() || server_id == 0
    }
}

/// MySQL's text for a start position inside an event (our wording; MySQL's differs by version).
pub const MSG_IMPOSSIBLE_POSITION: &str =
    "Client requested master to start replication from an impossible position";
/// MySQL's text when the replica has GTIDs of our UUID that we never wrote.
pub const MSG_MORE_GTIDS: &str = "Slave has more GTIDs than the master has, using the master's \
     SERVER_UUID. This may indicate that the end of the binary log was truncated or that the \
     last binary log file was lost, e.g., after a power or disk failure when sync_binlog != 1.";
/// MariaDB's text for a `@slave_connect_state` it cannot parse.
pub const MSG_MARIADB_MALFORMED_STATE: &str =
    "Out of memory or malformed slave request when obtaining start position from GTID state";
/// `@mariadb_slave_capability` of a GTID-aware MariaDB peer (MariaDB's
/// `MARIA_SLAVE_CAPABILITY_GTID`).
const MARIA_SLAVE_CAPABILITY_GTID: u64 = 4;
/// MariaDB's text for a `@slave_until_gtid` it cannot parse.
const MSG_MARIADB_MALFORMED_UNTIL: &str =
    "Out of memory or malformed slave request when obtaining UNTIL position sent from slave";
/// MariaDB's text when the GTIDs after the requested position are purged.
pub const MSG_MARIADB_PURGED: &str = "Could not find GTID state requested by slave in any binlog \
     files. Probably the slave state is too old and required binlog files have been purged.";
/// Our text for a GTID connect from a client that did not announce GTID capability.
pub const MSG_MARIADB_CAPABILITY: &str = "A GTID start (@slave_connect_state) needs \
     @mariadb_slave_capability 4 (GTID-aware) or more";

/// MariaDB's text for a requested GTID that is not in our binlog; `diverged` when our binlog
/// has a higher sequence number in that domain (MariaDB's ER_GTID_POSITION_NOT_FOUND_IN_BINLOG2).
pub fn msg_mariadb_gtid_not_in_binlog(g: &MariaGtid, diverged: bool) -> String {
    let mut m = format!(
        "Error: connecting slave requested to start from GTID {g}, which is not in the \
         master's binlog"
    );
    if diverged {
        m.push_str(
            ". Since the master's binlog contains GTIDs with higher sequence numbers, it \
             probably means that the slave has diverged due to executing extra erroneous \
             transactions",
        );
    }
    m
}

/// Who serves the dump and what the client said before asking for it: the master's identity,
/// the files' checksum, and the client's library and user variables.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Our `@@server_id`: in every event we write, and the server id of our MariaDB GTIDs.
    pub server_id: u32,
    /// Our `@@server_uuid`, the SID of our GTIDs.
    pub sid: Sid,
    /// The files carry a CRC32 after every event.
    pub files_crc: bool,
    /// `@master_binlog_checksum` / `@source_binlog_checksum` as announced (`None`: never set).
    pub announced_checksum: Option<String>,
    /// The client uses one of MariaDB's client libraries.
    pub mariadb_client: bool,
    /// `@mariadb_slave_capability`.
    pub mariadb_capability: Option<u64>,
    /// `@slave_connect_state`: a MariaDB GTID start.
    pub slave_connect_state: Option<String>,
    /// `@slave_until_gtid`: `START SLAVE UNTIL master_gtid_pos`.
    pub slave_until_gtid: Option<String>,
}

/// The heartbeat period of a session: `@master_heartbeat_period` in nanoseconds if the client
/// set it (0 turns heartbeats off), else the server's default.
pub fn heartbeat_period(session_ns: Option<u64>, default: Option<Duration>) -> Option<Duration> {
    match session_ns {
        Some(0) => None,
        Some(ns) => Some(Duration::from_nanos(ns)),
        None => default,
    }
}

/// Where a dump starts and what it skips, once the request is found valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The event boundary the first read starts at.
    pub from: BinlogPosition,
    /// GTID dumps: transactions in this set are skipped.
    pub have: Option<GtidSet>,
    /// MariaDB GTID dumps: the GNO the client has everything up to.
    pub mariadb_after: Option<u64>,
    /// MariaDB GTID dumps with `@slave_until_gtid` (`START SLAVE UNTIL master_gtid_pos`).
    pub until: Option<Until>,
}

/// Validates the request against the binlog's index; where to start, or the text of the 1236
/// error that refuses it. The shell opens a reader at [`Start::from`] and maps a failure with
/// [`open_error`].
pub fn plan_start(
    settings: &Settings,
    source: &dyn BinlogSource,
    req: &DumpRequest,
) -> Result<Start, String> {
    if let Some(state) = &settings.slave_connect_state {
        return plan_mariadb_start(settings, source, state);
    }
    match req {
        DumpRequest::Position { file, pos, .. } => {
            let file = if file.is_empty() {
                match source.files().into_iter().next() {
                    Some(f) => f.name,
                    None => return Err(MSG_FIRST_LOG_NOT_FOUND.into()),
                }
            } else {
                file.clone()
            };
            if *pos < 4 {
                return Err(MSG_POS_BELOW_4.into());
            }
            Ok(Start {
                from: BinlogPosition::new(file, *pos),
                have: None,
                mariadb_after: None,
                until: None,
            })
        }
        DumpRequest::Gtid { sids, .. } => {
            let mut have = GtidSet::new();
            for s in sids {
                if s.tag.is_some() {
                    return Err("tagged GTIDs are not supported by this master".into());
                }
                for &(a, b) in &s.intervals {
                    have.add_interval(Sid(s.uuid), a, b);
                }
            }
            if !source.gtid_purged().is_subset_of(&have) {
                return Err(MSG_GTIDS_PURGED.into());
            }
            let ours = settings.sid;
            let executed = source.gtid_executed();
            let mut mine = GtidSet::new();
            for (sid, ivs) in have.iter() {
                if *sid == ours {
                    for &(a, b) in ivs {
                        mine.add_interval(*sid, a, b);
                    }
                }
            }
            if !mine.is_subset_of(&executed) {
                return Err(MSG_MORE_GTIDS.into());
            }
            let at = source.locate_gtid_start(&have).map_err(|e| match e {
                SourceError::Purged => MSG_GTIDS_PURGED.to_string(),
                other => other.to_string(),
            })?;
            Ok(Start {
                from: at,
                have: Some(have),
                mariadb_after: None,
                until: None,
            })
        }
    }
}

/// A MariaDB GTID start (`@slave_connect_state`, MariaDB's `check_slave_start_position` and
/// `gtid_find_binlog_file`): the GTIDs of domain 0 are ours (`0-<server_id>-<gno>`); entries of
/// other domains belong to other masters and are ignored, as MariaDB does for a domain it has
/// never logged. The dump starts at the start of the newest file that holds every GTID after
/// the requested one and skips up to it.
fn plan_mariadb_start(
    settings: &Settings,
    source: &dyn BinlogSource,
    state: &str,
) -> Result<Start, String> {
    if settings.mariadb_capability.unwrap_or(0) < MARIA_SLAVE_CAPABILITY_GTID {
        return Err(MSG_MARIADB_CAPABILITY.into());
    }
    let Some(list) = mariadb::parse_gtid_list(state) else {
        return Err(MSG_MARIADB_MALFORMED_STATE.into());
    };
    let ours = settings.sid;
    let last = source.gtid_executed().last_gno(&ours);
    let mut after = 0u64;
    for g in list.iter().filter(|g| g.domain == mariadb::DOMAIN) {
        if g.server_id == settings.server_id && g.seq_no <= last {
            after = g.seq_no;
        } else {
            return Err(msg_mariadb_gtid_not_in_binlog(g, last >= g.seq_no));
        }
    }
    let mut have = GtidSet::new();
    have.add_interval(ours, 1, after + 1);
    if !source.gtid_purged().is_subset_of(&have) {
        return Err(MSG_MARIADB_PURGED.into());
    }
    let at = source.locate_gtid_start(&have).map_err(|e| match e {
        SourceError::Purged => MSG_MARIADB_PURGED.to_string(),
        other => other.to_string(),
    })?;
    let until = match &settings.slave_until_gtid {
        None => None,
        Some(text) => {
            let Some(list) = mariadb::parse_gtid_list(text) else {
                return Err(MSG_MARIADB_MALFORMED_UNTIL.into());
            };
            Some(
                list.iter()
                    .find(|g| g.domain == mariadb::DOMAIN)
                    .map_or(Until::SkipAll, |g| Until::At {
                        server_id: g.server_id,
                        seq_no: g.seq_no,
                    }),
            )
        }
    };
    Ok(Start {
        from: at,
        have: (after > 0).then_some(have),
        mariadb_after: Some(after),
        until,
    })
}

/// The 1236 text for a start position the source cannot open.
pub fn open_error(e: SourceError) -> String {
    match e {
        SourceError::UnknownFile { .. } | SourceError::Purged => MSG_FIRST_LOG_NOT_FOUND.into(),
        SourceError::PastEnd { .. } => MSG_POS_PAST_EOF.into(),
        SourceError::NotAtEventBoundary { .. } => MSG_IMPOSSIBLE_POSITION.into(),
        other => other.to_string(),
    }
}

/// Where a MariaDB GTID dump stops (`@slave_until_gtid`, MariaDB's `until_gtid_state`), for our
/// domain 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// After the group with GTID `0-<server_id>-<seq_no>`, or before the first group past it
    /// (which is skipped). Another server id in domain 0 never matches: nothing stops.
    At { server_id: u32, seq_no: u64 },
    /// The list names other domains only: domain 0 has reached its stop, so every group of
    /// ours is skipped, as MariaDB skips a domain that is not (or no longer) in the list.
    SkipAll,
}

/// Why the plan cannot go on (the dump ends; nothing is sent to the client).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("event shorter than its header")]
    ShortEvent,
    #[error("{file} does not start with a FORMAT_DESCRIPTION event")]
    NoFormatDescription { file: String },
    #[error("FORMAT_DESCRIPTION shorter than its header")]
    ShortFormatDescription,
    #[error("{0}")]
    Encode(#[from] tibinlog_protocol::binlog::BinlogError),
}

/// Which reader the shell goes on with after a file start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// The reader it already has (a start past the file's FORMAT_DESCRIPTION).
    Current,
    /// The one that read the file's FORMAT_DESCRIPTION, now right after it.
    AfterFormatDescription,
}

/// How events are rewritten for this client.
#[derive(Debug, Clone, Copy)]
struct StreamMode {
    /// Remove every event's CRC (client never announced a checksum, files have CRC32).
    strip: bool,
    /// The first fake ROTATE (before any FORMAT_DESCRIPTION) carries a CRC32.
    fake_rotate_crc: bool,
    /// Events go out with a CRC32 (the files have one and it is not stripped); heartbeats too.
    events_crc: bool,
    /// The client is a MariaDB replica or tool: QUERY events get MariaDB collation ids
    /// ([`mariadb`]).
    mariadb: bool,
}

/// State of a MariaDB-flavoured session ([`mariadb`]).
#[derive(Debug)]
struct MariaSession {
    flavour: GtidFlavour,
    /// The client's position (`0-<server_id>-<gno>`), announced with a fake GTID_LIST once the
    /// transactions up to it are skipped; `None` once announced.
    announce: Option<u64>,
    /// `START SLAVE UNTIL master_gtid_pos`: where to stop (`None`: no stop, or reached).
    until: Option<Until>,
    /// Where the event group being read is.
    group: Group,
    /// The group being read is past the UNTIL position: its events are not sent.
    skip_group: bool,
    /// The UNTIL position is reached: the dump ends after the group being read.
    stop_after_group: bool,
    /// The last GNO read (sent or skipped): the binlog state the UNTIL stop reports.
    last_gno: u64,
}

/// The event group being read, to find where it ends (MariaDB's group rule: a transaction ends
/// with XID or a COMMIT/ROLLBACK QUERY; a standalone statement is the one event after its GTID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Outside,
    AfterGtid,
    Transaction,
}

/// The sink of the events that go out, one complete event per call.
pub type Emit<'a> = &'a mut dyn FnMut(&[u8]);

/// One dump session's decisions (see the module docs).
///
/// Invariant: `pos` is the offset in `file` after the last event read (sent or skipped), the
/// position heartbeats and fake events report.
#[derive(Debug)]
pub struct DumpPlan {
    mode: StreamMode,
    have: Option<GtidSet>,
    /// File being sent and the offset after the last event sent or skipped.
    file: String,
    pos: u64,
    /// Inside a transaction whose GTID the client already has.
    skipping: bool,
    /// Skipped bytes since the last event sent: a heartbeat tells the client where we are.
    skipped_since_send: bool,
    server_id: u32,
    /// MariaDB GTID flavour: a MariaDB client that started with `@slave_connect_state`, or
    /// any GTID-aware MariaDB client (`@mariadb_slave_capability` ≥ 4), as a MariaDB master
    /// sends it.
    maria: Option<MariaSession>,
    /// The UNTIL position was reached and announced: the dump ends.
    until_reached: bool,
    /// The bytes of the last event made up here (heartbeat, fake ROTATE, relay event).
    scratch: Vec<u8>,
}

impl DumpPlan {
    pub fn new(settings: &Settings, start: Start) -> Self {
        let announced = settings.announced_checksum.as_deref();
        let strip = announced.is_none() && settings.files_crc;
        let mode = StreamMode {
            strip,
            fake_rotate_crc: announced.is_some_and(|a| a.eq_ignore_ascii_case("CRC32")),
            events_crc: settings.files_crc && !strip,
            mariadb: settings.mariadb_client && settings.mariadb_capability.is_some(),
        };
        let gtid_aware = settings
            .mariadb_capability
            .is_some_and(|c| c >= MARIA_SLAVE_CAPABILITY_GTID);
        let flavoured = start.mariadb_after.is_some() || (mode.mariadb && gtid_aware);
        let maria = flavoured.then(|| {
            let after = start.mariadb_after.unwrap_or(0);
            MariaSession {
                flavour: GtidFlavour::new(settings.server_id, settings.sid.0, mode.events_crc),
                announce: (after > 0).then_some(after),
                until: start.until,
                group: Group::Outside,
                skip_group: false,
                stop_after_group: false,
                last_gno: after,
            }
        });
        Self {
            mode,
            have: start.have,
            file: start.from.file,
            pos: start.from.pos,
            skipping: false,
            skipped_since_send: false,
            server_id: settings.server_id,
            maria,
            until_reached: false,
            scratch: Vec::with_capacity(64),
        }
    }

    /// The file being sent.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The offset after the last event read.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The UNTIL position was reached and announced: the shell ends the dump.
    pub fn until_reached(&self) -> bool {
        self.until_reached
    }

    /// [`Self::on_start`] needs the first event of the start file (its FORMAT_DESCRIPTION).
    pub fn start_needs_format_description(&self) -> bool {
        self.maria.is_some() || self.pos > 4
    }

    /// [`Self::on_next_file`] needs the first event of the next file.
    pub fn next_file_needs_format_description(&self) -> bool {
        self.maria.is_some()
    }

    /// The start of the stream: fake ROTATE to the start position, then for a start past
    /// offset 4 (every MariaDB-flavoured start) the file's FORMAT_DESCRIPTION. `fde`: the
    /// first event of the start file, when [`Self::start_needs_format_description`].
    pub fn on_start(&mut self, fde: Option<&[u8]>, emit: Emit<'_>) -> Result<ReadFrom, PlanError> {
        if self.maria.is_some() {
            // A GTID start reads its file from the start; a file/position start from there.
            let from = (self.pos > 4).then_some(self.pos);
            return self.start_mariadb_file(self.mode.fake_rotate_crc, from, fde, emit);
        }
        self.send_fake_rotate(self.mode.fake_rotate_crc, emit)?;
        if self.pos > 4 {
            self.send_start_fde(fde, emit)?;
        }
        Ok(ReadFrom::Current)
    }

    /// The session caught up with a closed file and goes on with `next` from its start. `fde`:
    /// the first event of `next`, when [`Self::next_file_needs_format_description`]. The shell
    /// reads on from offset 4, or from after the FORMAT_DESCRIPTION as the answer says.
    pub fn on_next_file(
        &mut self,
        next: &str,
        fde: Option<&[u8]>,
        emit: Emit<'_>,
    ) -> Result<ReadFrom, PlanError> {
        self.file = next.to_string();
        self.skipping = false;
        if self.maria.is_some() {
            // A FORMAT_DESCRIPTION was sent: the client reads this one with the stream's algorithm.
            return self.start_mariadb_file(self.mode.events_crc, None, fde, emit);
        }
        self.pos = 4;
        // A FORMAT_DESCRIPTION was sent: the client reads this one with the stream's algorithm.
        self.send_fake_rotate(self.mode.events_crc, emit)?;
        Ok(ReadFrom::Current)
    }

    /// One event read from the file, in file order, as stored; patched in place before it is
    /// emitted (or skipped).
    pub fn on_event(&mut self, ev: &mut [u8], emit: Emit<'_>) -> Result<(), PlanError> {
        let Some(&ty) = ev.get(4) else {
            return Err(PlanError::ShortEvent);
        };
        let ty = EventType(ty);
        self.pos += ev.len() as u64;
        if let Some(have) = &self.have {
            if ty == EventType::GTID {
                self.skipping = gtid_of(ev).is_some_and(|(sid, gno)| have.contains(&sid, gno));
            } else if matches!(
                ty,
                EventType::ROTATE | EventType::FORMAT_DESCRIPTION | EventType::PREVIOUS_GTIDS
            ) {
                self.skipping = false;
            }
            if self.skipping {
                self.skipped_since_send = true;
                return Ok(());
            }
        }
        if self.maria.is_some() {
            return self.on_mariadb_event(ev, ty, emit);
        }
        let ev = if ty == EventType::FORMAT_DESCRIPTION {
            patch_fde(ev, false, self.mode.strip);
            ev
        } else if self.mode.strip {
            strip_crc_in_place(ev)
        } else {
            ev
        };
        if self.mode.mariadb {
            mariadb::patch_query_event(ev, self.mode.events_crc);
        }
        self.skipped_since_send = false;
        emit(ev);
        Ok(())
    }

    /// The session read everything there is and waits: if events were skipped since the last
    /// one sent, the client learns the position it is at (a MariaDB fake GTID_LIST while the
    /// client's position is not announced yet, else a HEARTBEAT). True if something was
    /// emitted.
    pub fn on_caught_up(&mut self, emit: Emit<'_>) -> Result<bool, PlanError> {
        if !self.skipped_since_send {
            return Ok(false);
        }
        if self.maria.as_ref().is_some_and(|m| m.announce.is_some()) {
            self.send_fake_gtid_list(self.pos, emit);
        } else {
            self.on_heartbeat(emit)?;
        }
        Ok(true)
    }

    /// A HEARTBEAT naming the file and the position after the last event read.
    pub fn on_heartbeat(&mut self, emit: Emit<'_>) -> Result<(), PlanError> {
        // The header's 32 bits wrap past 4 GiB, as the file's own events do.
        emit_made(
            (self.server_id, self.mode.events_crc),
            &mut self.scratch,
            self.pos as u32,
            0,
            &Heartbeat { file: &self.file },
            emit,
        )?;
        self.skipped_since_send = false;
        Ok(())
    }

    /// A relay event ([`super::relay`]) for a standby of an HA group, with the stream's
    /// checksum; it takes no room in the file (log_pos 0).
    pub fn on_relay(
        &mut self,
        relay: &super::relay::Relay,
        emit: Emit<'_>,
    ) -> Result<(), PlanError> {
        emit_made(
            (self.server_id, self.mode.events_crc),
            &mut self.scratch,
            0,
            flags::ARTIFICIAL | flags::IGNORABLE,
            relay,
            emit,
        )
    }

    /// One event of a MariaDB-flavoured session (after the GTID skipping).
    fn on_mariadb_event(
        &mut self,
        ev: &mut [u8],
        ty: EventType,
        emit: Emit<'_>,
    ) -> Result<(), PlanError> {
        if ty == EventType::FORMAT_DESCRIPTION {
            // Sent by `start_mariadb_file`; a file has one, at offset 4.
            return Ok(());
        }
        let stored_crc = self.mode.events_crc || self.mode.strip;
        let Some(m) = self.maria.as_mut() else {
            return Ok(());
        };
        // Group boundaries, the UNTIL position, and the GNO the UNTIL stop reports.
        let mut group_ends = false;
        match ty {
            EventType::GTID => {
                m.group = Group::AfterGtid;
                if let Some((_, gno)) = gtid_of(ev) {
                    m.last_gno = gno;
                    match m.until {
                        Some(Until::SkipAll) => m.skip_group = true,
                        Some(Until::At { server_id, seq_no })
                            if server_id == self.server_id && gno >= seq_no =>
                        {
                            m.until = None;
                            m.stop_after_group = true;
                            // A GTID past the UNTIL one: that one is not in our binlog, and
                            // this group is already beyond it.
                            m.skip_group = gno > seq_no;
                        }
                        _ => {}
                    }
                }
            }
            EventType::QUERY if m.group == Group::AfterGtid => {
                if mariadb::query_text(ev, stored_crc) == Some(&b"BEGIN"[..]) {
                    m.group = Group::Transaction;
                } else {
                    group_ends = true;
                }
            }
            EventType::XID => group_ends = true,
            EventType::QUERY if m.group == Group::Transaction => {
                let text = mariadb::query_text(ev, stored_crc);
                group_ends = matches!(text, Some(b"COMMIT") | Some(b"ROLLBACK"));
            }
            _ => {}
        }
        let skip = m.skip_group;
        if group_ends {
            m.group = Group::Outside;
            m.skip_group = false;
        }
        let stop = group_ends && m.stop_after_group;
        if skip {
            self.skipped_since_send = true;
        } else {
            if self.skipped_since_send && m.announce.is_some() {
                let before = self.pos - ev.len() as u64;
                self.send_fake_gtid_list(before, emit);
            }
            let ev = if self.mode.strip {
                strip_crc_in_place(ev)
            } else {
                ev
            };
            if let Some(m) = self.maria.as_mut() {
                m.flavour.feed(ev, |e| emit(e));
            }
            self.skipped_since_send = false;
        }
        if stop {
            self.send_until_reached(emit);
        }
        Ok(())
    }

    /// The fake GTID_LIST that tells a MariaDB replica its UNTIL position is reached (flag
    /// `FLAG_UNTIL_REACHED`, the binlog state up to the last group read), with log_pos = the
    /// offset after that group; the dump then ends.
    fn send_until_reached(&mut self, emit: Emit<'_>) {
        let Some(m) = self.maria.as_mut() else {
            return;
        };
        m.stop_after_group = false;
        let head = EventHead {
            timestamp: 0,
            server_id: self.server_id,
            // The 32-bit field wraps past 4 GiB, as in the events themselves.
            log_pos: self.pos as u32,
            flags: flags::ARTIFICIAL,
        };
        let list = [MariaGtid {
            domain: mariadb::DOMAIN,
            server_id: self.server_id,
            seq_no: m.last_gno,
        }];
        let ev = mariadb::gtid_list_event_flagged(
            head,
            &list,
            mariadb::GTID_LIST_UNTIL_REACHED,
            0,
            self.mode.events_crc,
        );
        emit(&ev);
        self.skipped_since_send = false;
        self.until_reached = true;
    }

    /// Starts sending `self.file` to a MariaDB-flavoured session: fake ROTATE naming the offset
    /// where the events start, then MariaDB's FORMAT_DESCRIPTION with log_pos 0 (not counted by
    /// the replica), then the file's events from that offset ([`mariadb`], position rule).
    /// `from`: a start past the file's own FORMAT_DESCRIPTION, where the session's reader
    /// already is; `None` starts right after it.
    fn start_mariadb_file(
        &mut self,
        rotate_crc: bool,
        from: Option<u64>,
        fde: Option<&[u8]>,
        emit: Emit<'_>,
    ) -> Result<ReadFrom, PlanError> {
        let fde = fde.filter(|e| e.get(4) == Some(&EventType::FORMAT_DESCRIPTION.0));
        let Some(fde) = fde else {
            return Err(PlanError::NoFormatDescription {
                file: self.file.clone(),
            });
        };
        let after_fde = 4 + fde.len() as u64;
        let read_from = match from {
            Some(at) if at > after_fde => {
                self.pos = at;
                ReadFrom::Current
            }
            _ => {
                self.pos = after_fde;
                ReadFrom::AfterFormatDescription
            }
        };
        self.send_fake_rotate(rotate_crc, emit)?;
        let alg = if self.mode.strip {
            ChecksumAlg::Off as u8
        } else {
            fde[fde.len().saturating_sub(CHECKSUM_LEN + 1)]
        };
        let ev = mariadb::format_description(fde, alg).ok_or(PlanError::ShortFormatDescription)?;
        emit(&ev);
        if let Some(m) = self.maria.as_mut() {
            m.flavour.reset();
            m.group = Group::Outside;
        }
        Ok(read_from)
    }

    /// MariaDB's fake GTID_LIST after the skipped transactions: the client's position, with
    /// log_pos = the offset after them, so the replica's read position moves over the gap.
    fn send_fake_gtid_list(&mut self, log_pos: u64, emit: Emit<'_>) {
        let Some(after) = self.maria.as_mut().and_then(|m| m.announce.take()) else {
            return;
        };
        let head = EventHead {
            timestamp: 0,
            server_id: self.server_id,
            log_pos: log_pos as u32,
            flags: flags::ARTIFICIAL,
        };
        let list = [MariaGtid {
            domain: mariadb::DOMAIN,
            server_id: self.server_id,
            seq_no: after,
        }];
        let ev = mariadb::gtid_list_event(head, &list, 0, self.mode.events_crc);
        self.skipped_since_send = false;
        emit(&ev);
    }

    fn send_fake_rotate(&mut self, crc: bool, emit: Emit<'_>) -> Result<(), PlanError> {
        emit_made(
            (self.server_id, crc),
            &mut self.scratch,
            0,
            flags::ARTIFICIAL,
            &Rotate {
                position: self.pos,
                next_file: &self.file,
            },
            emit,
        )
    }

    /// The file's FORMAT_DESCRIPTION for a start past offset 4: log_pos 0, create time 0.
    fn send_start_fde(&mut self, fde: Option<&[u8]>, emit: Emit<'_>) -> Result<(), PlanError> {
        let Some(fde) = fde.filter(|e| e.get(4) == Some(&EventType::FORMAT_DESCRIPTION.0)) else {
            return Err(PlanError::NoFormatDescription {
                file: self.file.clone(),
            });
        };
        let mut fde = fde.to_vec();
        patch_fde(&mut fde, true, self.mode.strip);
        emit(&fde);
        Ok(())
    }
}

/// Writes an event the server makes up (HEARTBEAT, fake ROTATE, relay event) into `buf`,
/// reused from one to the next, and emits it: timestamp 0, `log_pos`, `flags`, a CRC32 if
/// `crc`.
fn emit_made(
    (server_id, crc): (u32, bool),
    buf: &mut Vec<u8>,
    log_pos: u32,
    flags: u16,
    body: &impl tibinlog_protocol::binlog::EventBody,
    emit: Emit<'_>,
) -> Result<(), PlanError> {
    buf.clear();
    EventWriter::new(server_id, crc).write_with(
        buf,
        EventMeta {
            timestamp: 0,
            log_pos: LogPos::Fixed(log_pos),
            flags,
        },
        body,
    )?;
    emit(buf);
    Ok(())
}

/// SID and GNO of a GTID event.
fn gtid_of(ev: &[u8]) -> Option<(Sid, u64)> {
    read::gtid(ev.get(HEADER_LEN..)?)
}

/// Rewrites a FORMAT_DESCRIPTION for sending: BINLOG_IN_USE cleared; for a start past offset 4
/// log_pos and create timestamp 0; when stripping, algorithm byte NONE. The CRC is recomputed.
///
/// ```text
/// header 19 | version 2 | server version 50 | create ts 4 | … | alg 1 | CRC 4
///                                            ^ offset 71           ^ len-5
/// ```
fn patch_fde(ev: &mut [u8], artificial: bool, strip: bool) {
    let len = ev.len();
    if len < HEADER_LEN + 57 + CHECKSUM_LEN + 1 {
        return;
    }
    let f = u16::from_le_bytes([ev[17], ev[18]]) & !flags::BINLOG_IN_USE;
    ev[17..19].copy_from_slice(&f.to_le_bytes());
    if artificial {
        ev[13..17].copy_from_slice(&0u32.to_le_bytes());
        ev[71..75].copy_from_slice(&0u32.to_le_bytes());
    }
    if strip {
        ev[len - 5] = ChecksumAlg::Off as u8;
    }
    let c = crc32(&ev[..len - CHECKSUM_LEN]);
    ev[len - CHECKSUM_LEN..].copy_from_slice(&c.to_le_bytes());
}

/// Removes the CRC of a borrowed event: the event without its last four bytes, header size
/// patched.
fn strip_crc_in_place(ev: &mut [u8]) -> &mut [u8] {
    if ev.len() < HEADER_LEN + CHECKSUM_LEN {
        return ev;
    }
    let len = ev.len() - CHECKSUM_LEN;
    let ev = &mut ev[..len];
    ev[9..13].copy_from_slice(&(len as u32).to_le_bytes());
    ev
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::testing::MemSource;
    use tibinlog_protocol::binlog::checksum::verify_event;
    use tibinlog_protocol::binlog::{EventHeader, FormatDescription};

    const SERVER_ID: u32 = 7;
    const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn sid() -> Sid {
        Sid::parse(UUID).expect("sid")
    }

    /// A binlog of `txns` one-row transactions in `binlog.000001`.
    fn source(crc: bool, txns: usize) -> MemSource {
        let s = MemSource::new(SERVER_ID, sid(), crc);
        for i in 0..txns {
            s.append_insert(&[(i as i64, "x")]);
        }
        s
    }

    /// What a MySQL replica says before its dump.
    fn mysql_client(checksum: Option<&str>) -> Settings {
        Settings {
            server_id: SERVER_ID,
            sid: sid(),
            files_crc: true,
            announced_checksum: checksum.map(str::to_owned),
            mariadb_client: false,
            mariadb_capability: None,
            slave_connect_state: None,
            slave_until_gtid: None,
        }
    }

    /// What a MariaDB replica says before a `MASTER_USE_GTID` dump.
    fn mariadb_client(state: &str, until: Option<&str>) -> Settings {
        Settings {
            mariadb_client: true,
            mariadb_capability: Some(4),
            slave_connect_state: Some(state.to_owned()),
            slave_until_gtid: until.map(str::to_owned),
            ..mysql_client(Some("CRC32"))
        }
    }

    fn by_position(file: &str, pos: u64) -> DumpRequest {
        DumpRequest::Position {
            file: file.to_owned(),
            pos,
            flags: DumpFlags(0),
            server_id: 2,
        }
    }

    fn by_gtid(intervals: &[(u64, u64)]) -> DumpRequest {
        DumpRequest::Gtid {
            sids: vec![GtidSid {
                uuid: sid().0,
                tag: None,
                intervals: intervals.to_vec(),
            }],
            flags: DumpFlags(0),
            server_id: 2,
        }
    }

    /// The events of `file` from offset `pos` to its end, as stored.
    fn events(s: &MemSource, file: &str, pos: u64) -> Vec<Vec<u8>> {
        let mut r = s.open(file, pos).expect("open");
        std::iter::from_fn(|| r.next_event().expect("read")).collect()
    }

    /// The end offset (log_pos) of an event.
    fn end(ev: &[u8]) -> u32 {
        EventHeader::parse(ev).expect("header").log_pos
    }

    /// One line per emitted event: its type and the fields a replica acts on, then `+crc` if
    /// it ends with a valid CRC32.
    fn show(ev: &[u8]) -> String {
        let h = EventHeader::parse(ev).expect("header");
        let crc = verify_event(ev).is_ok();
        let body_end = ev.len() - if crc { CHECKSUM_LEN } else { 0 };
        let body = &ev[HEADER_LEN..body_end];
        let u64_at = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("u64"));
        let what = match h.event_type {
            EventType::ROTATE => format!(
                "ROTATE {}:{}",
                String::from_utf8_lossy(&body[8..]),
                u64_at(0)
            ),
            EventType::FORMAT_DESCRIPTION => format!("FDE alg={}", body[body.len() - 1]),
            EventType::PREVIOUS_GTIDS => {
                format!("PREVIOUS_GTIDS {}", GtidSet::decode(body).expect("set"))
            }
            EventType::GTID => format!("GTID {}", read::gtid(body).expect("gtid").1),
            EventType::QUERY => format!("QUERY {}", read::query_text(body).expect("text")),
            EventType::TABLE_MAP => "TABLE_MAP".into(),
            EventType::WRITE_ROWS => "WRITE_ROWS".into(),
            EventType::XID => "XID".into(),
            EventType::HEARTBEAT => format!("HEARTBEAT {}", String::from_utf8_lossy(body)),
            EventType::MARIADB_GTID => format!(
                "MARIADB_GTID 0-{}-{} flags={}",
                h.server_id,
                u64_at(0),
                body[12]
            ),
            EventType::MARIADB_GTID_LIST => {
                let word = u32::from_le_bytes(body[..4].try_into().expect("count"));
                let list: Vec<String> = (0..(word & 0x0fff_ffff) as usize)
                    .map(|i| {
                        let g = &body[4 + 16 * i..];
                        let u32_at =
                            |at: usize| u32::from_le_bytes(g[at..at + 4].try_into().expect("u32"));
                        let seq = u64::from_le_bytes(g[8..16].try_into().expect("seq"));
                        format!("{}-{}-{seq}", u32_at(0), u32_at(4))
                    })
                    .collect();
                format!("GTID_LIST [{}] flags={}", list.join(","), word >> 28)
            }
            other => format!("type {}", other.0),
        };
        format!("{what} @{}{}", h.log_pos, if crc { " +crc" } else { "" })
    }

    /// A dump driven the way the shell drives it, over every file of `s` to the current end;
    /// the emitted events, or the 1236 text.
    fn dump(s: &MemSource, settings: &Settings, req: &DumpRequest) -> Result<Vec<Vec<u8>>, String> {
        let start = plan_start(settings, s, req)?;
        let mut reader = s
            .open(&start.from.file, start.from.pos)
            .map_err(open_error)?;
        let mut plan = DumpPlan::new(settings, start);
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut emit = |e: &[u8]| out.push(e.to_vec());
        let first = |file: &str| {
            let mut r = s.open(file, 4).expect("open at 4");
            let fde = r.next_event().expect("read");
            (r, fde)
        };
        let fde = plan
            .start_needs_format_description()
            .then(|| first(plan.file()));
        let (fde_reader, fde) = fde.unzip();
        let from = plan
            .on_start(fde.flatten().as_deref(), &mut emit)
            .expect("start");
        if from == ReadFrom::AfterFormatDescription {
            reader = fde_reader.expect("reader");
        }
        loop {
            while let Some(mut ev) = reader.next_event().expect("read") {
                plan.on_event(&mut ev, &mut emit).expect("event");
                if plan.until_reached() {
                    return Ok(out);
                }
            }
            let files = s.files();
            let i = files.iter().position(|f| f.name == plan.file());
            let Some(next) = i.and_then(|i| files.get(i + 1)).map(|f| f.name.clone()) else {
                break;
            };
            let (next_reader, fde) = if plan.next_file_needs_format_description() {
                first(&next)
            } else {
                (s.open(&next, 4).expect("open"), None)
            };
            reader = next_reader;
            plan.on_next_file(&next, fde.as_deref(), &mut emit)
                .expect("next file");
        }
        plan.on_caught_up(&mut emit).expect("caught up");
        Ok(out)
    }

    fn shown(out: &[Vec<u8>]) -> Vec<String> {
        out.iter().map(|e| show(e)).collect()
    }

    #[test]
    fn mysql_by_position_from_the_start_sends_the_file_as_stored() {
        let s = source(true, 2);
        let file = events(&s, "binlog.000001", 4);
        let out = dump(&s, &mysql_client(Some("CRC32")), &by_position("", 4)).expect("dump");
        let e = |i: usize| end(&file[i]);
        assert_eq!(
            shown(&out),
            [
                "ROTATE binlog.000001:4 @0 +crc".to_string(),
                format!("FDE alg=1 @{} +crc", e(0)),
                format!("PREVIOUS_GTIDS  @{} +crc", e(1)),
                format!("GTID 1 @{} +crc", e(2)),
                format!("QUERY BEGIN @{} +crc", e(3)),
                format!("TABLE_MAP @{} +crc", e(4)),
                format!("WRITE_ROWS @{} +crc", e(5)),
                format!("XID @{} +crc", e(6)),
                format!("GTID 2 @{} +crc", e(7)),
                format!("QUERY BEGIN @{} +crc", e(8)),
                format!("TABLE_MAP @{} +crc", e(9)),
                format!("WRITE_ROWS @{} +crc", e(10)),
                format!("XID @{} +crc", e(11)),
            ]
        );
        // Everything after the fake ROTATE is the file's bytes (its FDE has no IN_USE flag).
        assert_eq!(&out[1..], &file[..]);
    }

    #[test]
    fn mysql_by_position_mid_file_starts_with_the_file_s_fde_at_log_pos_0() {
        let s = source(true, 2);
        let file = events(&s, "binlog.000001", 4);
        let second = u64::from(end(&file[6]));
        let settings = mysql_client(Some("CRC32"));
        let out = dump(&s, &settings, &by_position("binlog.000001", second)).expect("dump");
        assert_eq!(
            shown(&out[..3]),
            [
                format!("ROTATE binlog.000001:{second} @0 +crc"),
                "FDE alg=1 @0 +crc".to_string(),
                format!("GTID 2 @{} +crc", end(&file[7])),
            ]
        );
        assert_eq!(&out[2..], &file[7..]);
        // The start FDE keeps the file's bytes but for log_pos and the create time.
        let fde = &out[1];
        assert_eq!(fde.len(), file[0].len());
        assert_eq!(&fde[71..75], &[0; 4]);
        assert_eq!(&fde[19..71], &file[0][19..71]);
    }

    #[test]
    fn a_file_switch_and_heartbeats_follow_the_stream_s_checksum() {
        let s = source(true, 1);
        s.rotate();
        s.append_insert(&[(9, "y")]);
        let f1 = events(&s, "binlog.000001", 4);
        let f2 = events(&s, "binlog.000002", 4);
        // The client announced a checksum other than CRC32: the first fake ROTATE has no CRC,
        // every later event has the files' CRC.
        let settings = mysql_client(Some("NONE"));
        let start = plan_start(&settings, &s, &by_position("binlog.000001", 4)).expect("start");
        let mut plan = DumpPlan::new(&settings, start);
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut emit = |e: &[u8]| out.push(e.to_vec());
        assert!(!plan.start_needs_format_description());
        assert_eq!(
            plan.on_start(None, &mut emit).expect("start"),
            ReadFrom::Current
        );
        for mut ev in f1.clone() {
            plan.on_event(&mut ev, &mut emit).expect("event");
        }
        assert!(!plan.next_file_needs_format_description());
        plan.on_next_file("binlog.000002", None, &mut emit)
            .expect("next");
        plan.on_heartbeat(&mut emit).expect("heartbeat");
        for mut ev in f2.clone() {
            plan.on_event(&mut ev, &mut emit).expect("event");
        }
        plan.on_heartbeat(&mut emit).expect("heartbeat");
        let n1 = f1.len();
        let shown = shown(&out);
        assert_eq!(shown[0], "ROTATE binlog.000001:4 @0");
        assert_eq!(&out[1..=n1], &f1[..]);
        assert_eq!(
            shown[n1],
            format!("ROTATE binlog.000002:4 @{} +crc", end(&f1[n1 - 1]))
        );
        assert_eq!(shown[n1 + 1], "ROTATE binlog.000002:4 @0 +crc");
        assert_eq!(shown[n1 + 2], "HEARTBEAT binlog.000002 @4 +crc");
        assert_eq!(&out[n1 + 3..n1 + 3 + f2.len()], &f2[..]);
        assert_eq!(
            shown.last().map(String::as_str),
            Some(format!("HEARTBEAT binlog.000002 @{} +crc", end(&f2[f2.len() - 1])).as_str())
        );
    }

    #[test]
    fn a_client_that_announced_no_checksum_gets_every_crc_removed() {
        let s = source(true, 1);
        let file = events(&s, "binlog.000001", 4);
        let out = dump(&s, &mysql_client(None), &by_position("", 4)).expect("dump");
        assert_eq!(
            shown(&out),
            [
                "ROTATE binlog.000001:4 @0".to_string(),
                // The FDE keeps its own CRC and says NONE for the others.
                format!("FDE alg=0 @{} +crc", end(&file[0])),
                format!("PREVIOUS_GTIDS  @{}", end(&file[1])),
                format!("GTID 1 @{}", end(&file[2])),
                format!("QUERY BEGIN @{}", end(&file[3])),
                format!("TABLE_MAP @{}", end(&file[4])),
                format!("WRITE_ROWS @{}", end(&file[5])),
                format!("XID @{}", end(&file[6])),
            ]
        );
        for (sent, stored) in out[2..].iter().zip(&file[1..]) {
            assert_eq!(sent.len(), stored.len() - CHECKSUM_LEN);
            assert_eq!(&sent[HEADER_LEN..], &stored[HEADER_LEN..sent.len()]);
            assert_eq!(
                EventHeader::parse(sent).expect("header").event_size as usize,
                sent.len()
            );
        }
    }

    #[test]
    fn files_without_checksums_go_out_as_stored() {
        let s = source(false, 1);
        let file = events(&s, "binlog.000001", 4);
        let mut settings = mysql_client(None);
        settings.files_crc = false;
        let out = dump(&s, &settings, &by_position("", 4)).expect("dump");
        assert_eq!(shown(&out)[0], "ROTATE binlog.000001:4 @0");
        assert_eq!(&out[1..], &file[..]);
    }

    #[test]
    fn mysql_by_gtid_set_skips_the_transactions_the_client_has() {
        let s = source(true, 3);
        let file = events(&s, "binlog.000001", 4);
        let out = dump(&s, &mysql_client(Some("CRC32")), &by_gtid(&[(1, 3)])).expect("dump");
        assert_eq!(
            shown(&out),
            [
                "ROTATE binlog.000001:4 @0 +crc".to_string(),
                format!("FDE alg=1 @{} +crc", end(&file[0])),
                format!("PREVIOUS_GTIDS  @{} +crc", end(&file[1])),
                format!("GTID 3 @{} +crc", end(&file[12])),
                format!("QUERY BEGIN @{} +crc", end(&file[13])),
                format!("TABLE_MAP @{} +crc", end(&file[14])),
                format!("WRITE_ROWS @{} +crc", end(&file[15])),
                format!("XID @{} +crc", end(&file[16])),
            ]
        );
        assert_eq!(&out[3..], &file[12..]);
    }

    #[test]
    fn a_client_that_has_everything_gets_a_heartbeat_at_the_end() {
        let s = source(true, 2);
        let file = events(&s, "binlog.000001", 4);
        let out = dump(&s, &mysql_client(Some("CRC32")), &by_gtid(&[(1, 3)])).expect("dump");
        let last = end(&file[file.len() - 1]);
        assert_eq!(
            shown(&out[3..]),
            [format!("HEARTBEAT binlog.000001 @{last} +crc")]
        );
    }

    #[test]
    fn positions_and_gtids_we_cannot_serve_get_mysql_s_1236_texts() {
        let s = source(true, 2);
        let file = events(&s, "binlog.000001", 4);
        let inside = u64::from(end(&file[2])) + 1;
        let c = mysql_client(Some("CRC32"));
        let refused = |s: &MemSource, req: DumpRequest| dump(s, &c, &req).err();
        assert_eq!(
            refused(&s, by_position("binlog.000009", 4)).as_deref(),
            Some(MSG_FIRST_LOG_NOT_FOUND)
        );
        assert_eq!(
            refused(&s, by_position("binlog.000001", 3)).as_deref(),
            Some(MSG_POS_BELOW_4)
        );
        assert_eq!(
            refused(&s, by_position("binlog.000001", 1 << 20)).as_deref(),
            Some(MSG_POS_PAST_EOF)
        );
        assert_eq!(
            refused(&s, by_position("binlog.000001", inside)).as_deref(),
            Some(MSG_IMPOSSIBLE_POSITION)
        );
        assert_eq!(
            refused(&s, by_gtid(&[(1, 9)])).as_deref(),
            Some(MSG_MORE_GTIDS)
        );
        // The first file is purged: a client without its GTIDs cannot be served, by GTID or
        // by its name.
        s.rotate();
        s.purge_to("binlog.000002").expect("purge");
        assert_eq!(refused(&s, by_gtid(&[])).as_deref(), Some(MSG_GTIDS_PURGED));
        assert_eq!(
            refused(&s, by_gtid(&[(1, 2)])).as_deref(),
            Some(MSG_GTIDS_PURGED)
        );
        assert_eq!(
            refused(&s, by_position("binlog.000001", 4)).as_deref(),
            Some(MSG_FIRST_LOG_NOT_FOUND)
        );
        assert!(refused(&s, by_gtid(&[(1, 3)])).is_none());
    }

    #[test]
    fn mariadb_by_gtid_state_skips_to_it_and_announces_it() {
        let s = source(true, 3);
        let file = events(&s, "binlog.000001", 4);
        let state = format!("0-{SERVER_ID}-2");
        let out = dump(&s, &mariadb_client(&state, None), &by_gtid(&[])).expect("dump");
        assert_eq!(
            shown(&out),
            [
                format!("ROTATE binlog.000001:{} @0 +crc", end(&file[0])),
                "FDE alg=1 @0 +crc".to_string(),
                format!("GTID_LIST [] flags=0 @{} +crc", end(&file[1])),
                // The skipped transactions end where the announcement says.
                format!(
                    "GTID_LIST [0-{SERVER_ID}-2] flags=0 @{} +crc",
                    end(&file[11])
                ),
                // GTID and BEGIN merge into a MariaDB GTID ending where BEGIN ends.
                format!(
                    "MARIADB_GTID 0-{SERVER_ID}-3 flags=12 @{} +crc",
                    end(&file[13])
                ),
                format!("TABLE_MAP @{} +crc", end(&file[14])),
                format!("WRITE_ROWS @{} +crc", end(&file[15])),
                format!("XID @{} +crc", end(&file[16])),
            ]
        );
        // The MariaDB FDE is MariaDB's size, the GTID_LIST the size of the PREVIOUS_GTIDS.
        assert_eq!(out[1].len(), HEADER_LEN + 57 + 171 + 1 + CHECKSUM_LEN);
        assert_eq!(out[2].len(), file[1].len());
        assert_eq!(&out[5..], &file[14..]);
    }

    #[test]
    fn mariadb_until_ends_after_the_group_with_a_flagged_gtid_list() {
        let s = source(true, 3);
        let file = events(&s, "binlog.000001", 4);
        let state = format!("0-{SERVER_ID}-1");
        let until = format!("0-{SERVER_ID}-2");
        let out = dump(&s, &mariadb_client(&state, Some(&until)), &by_gtid(&[])).expect("dump");
        let shown = shown(&out);
        assert_eq!(
            &shown[3..],
            [
                format!(
                    "GTID_LIST [0-{SERVER_ID}-1] flags=0 @{} +crc",
                    end(&file[6])
                ),
                format!(
                    "MARIADB_GTID 0-{SERVER_ID}-2 flags=12 @{} +crc",
                    end(&file[8])
                ),
                format!("TABLE_MAP @{} +crc", end(&file[9])),
                format!("WRITE_ROWS @{} +crc", end(&file[10])),
                format!("XID @{} +crc", end(&file[11])),
                format!(
                    "GTID_LIST [0-{SERVER_ID}-2] flags=1 @{} +crc",
                    end(&file[11])
                ),
            ]
        );
    }

    #[test]
    fn mariadb_starts_that_cannot_be_served_get_mariadb_s_texts() {
        let s = source(true, 2);
        let refused = |settings: &Settings| dump(&s, settings, &by_gtid(&[])).err();
        let mut no_capability = mariadb_client("0-7-1", None);
        no_capability.mariadb_capability = Some(2);
        assert_eq!(
            refused(&no_capability).as_deref(),
            Some(MSG_MARIADB_CAPABILITY)
        );
        assert_eq!(
            refused(&mariadb_client("0-7", None)).as_deref(),
            Some(MSG_MARIADB_MALFORMED_STATE)
        );
        assert_eq!(
            refused(&mariadb_client("0-7-1", Some("x"))).as_deref(),
            Some(MSG_MARIADB_MALFORMED_UNTIL)
        );
        let ahead = MariaGtid {
            domain: 0,
            server_id: SERVER_ID,
            seq_no: 5,
        };
        assert_eq!(
            refused(&mariadb_client("0-7-5", None)),
            Some(msg_mariadb_gtid_not_in_binlog(&ahead, false))
        );
        let other = MariaGtid {
            domain: 0,
            server_id: 9,
            seq_no: 1,
        };
        assert_eq!(
            refused(&mariadb_client("0-9-1", None)),
            Some(msg_mariadb_gtid_not_in_binlog(&other, true))
        );
        s.rotate();
        s.purge_to("binlog.000002").expect("purge");
        assert_eq!(
            refused(&mariadb_client("0-7-1", None)).as_deref(),
            Some(MSG_MARIADB_PURGED)
        );
    }

    #[test]
    fn a_mariadb_peer_by_position_gets_the_flavour_from_its_offset() {
        let s = source(true, 2);
        let file = events(&s, "binlog.000001", 4);
        let second = u64::from(end(&file[6]));
        let settings = Settings {
            mariadb_client: true,
            mariadb_capability: Some(4),
            ..mysql_client(Some("CRC32"))
        };
        let out = dump(&s, &settings, &by_position("binlog.000001", second)).expect("dump");
        assert_eq!(
            shown(&out),
            [
                format!("ROTATE binlog.000001:{second} @0 +crc"),
                "FDE alg=1 @0 +crc".to_string(),
                format!(
                    "MARIADB_GTID 0-{SERVER_ID}-2 flags=12 @{} +crc",
                    end(&file[8])
                ),
                format!("TABLE_MAP @{} +crc", end(&file[9])),
                format!("WRITE_ROWS @{} +crc", end(&file[10])),
                format!("XID @{} +crc", end(&file[11])),
            ]
        );
    }

    #[test]
    fn non_blocking_dumps_and_heartbeat_periods() {
        assert!(!by_position("", 4).non_blocking());
        let mysqlbinlog = DumpRequest::Position {
            file: String::new(),
            pos: 4,
            flags: DumpFlags(0),
            server_id: 0,
        };
        assert!(mysqlbinlog.non_blocking());
        let asked = DumpRequest::Gtid {
            sids: Vec::new(),
            flags: DumpFlags(DumpFlags::NON_BLOCK),
            server_id: 3,
        };
        assert!(asked.non_blocking());
        let default = Some(Duration::from_secs(30));
        assert_eq!(heartbeat_period(None, default), default);
        assert_eq!(heartbeat_period(Some(0), default), None);
        assert_eq!(
            heartbeat_period(Some(1_500_000_000), None),
            Some(Duration::from_millis(1500))
        );
    }

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
        patch_fde(&mut ev, true, false);
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
        patch_fde(&mut ev, false, true);
        assert_eq!(ev.len(), len, "the FDE keeps its CRC");
        assert_eq!(ev[len - 5], ChecksumAlg::Off as u8);
        assert!(verify_event(&ev).is_ok());

        let mut w = EventWriter::new(7, true);
        let mut hb = Vec::new();
        let res = w.write(
            &mut hb,
            200,
            5,
            &Heartbeat {
                file: "binlog.000001",
            },
        );
        assert!(res.is_ok());
        let before = hb.len();
        let stripped = strip_crc_in_place(&mut hb).to_vec();
        assert_eq!(stripped.len(), before - 4);
        assert_eq!(
            u32::from_le_bytes([stripped[9], stripped[10], stripped[11], stripped[12]]) as usize,
            stripped.len()
        );
        assert_eq!(&stripped[13..], &hb[13..before - 4]);
        // Too short to hold a CRC: left alone.
        let mut short = [1u8; HEADER_LEN + 3];
        assert_eq!(strip_crc_in_place(&mut short).len(), HEADER_LEN + 3);
    }

    #[test]
    fn gtid_of_reads_sid_and_gno() {
        let mut ev = vec![0u8; HEADER_LEN + 25];
        ev[HEADER_LEN + 1..HEADER_LEN + 17].copy_from_slice(&[9; 16]);
        ev[HEADER_LEN + 17..HEADER_LEN + 25].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(gtid_of(&ev), Some((Sid([9; 16]), 42)));
        assert_eq!(gtid_of(&ev[..30]), None);
    }
}

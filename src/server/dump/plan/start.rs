//! Where a dump starts: the request checked against the binlog's index (files and GTID sets,
//! which sources keep in memory), never an event read. A request the binlog cannot serve gets
//! the text of MySQL's (or MariaDB's) error 1236.

use std::time::Duration;

use tibinlog_protocol::binlog::mariadb_stream;
use tibinlog_protocol::binlog::{GtidSet, MariadbGtid, Sid};
use tibinlog_protocol::wire::command::{DumpFlags, GtidSid};
use tibinlog_protocol::wire::errors::{
    msg_mariadb_gtid_not_in_binlog, MSG_FIRST_LOG_NOT_FOUND, MSG_GTIDS_PURGED,
    MSG_IMPOSSIBLE_POSITION, MSG_MARIADB_CAPABILITY, MSG_MARIADB_MALFORMED_STATE,
    MSG_MARIADB_MALFORMED_UNTIL, MSG_MARIADB_PURGED, MSG_MORE_GTIDS, MSG_POS_BELOW_4,
    MSG_POS_PAST_EOF,
};

use crate::server::source::{BinlogPosition, BinlogSource, SourceError};

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

/// `@mariadb_slave_capability` of a GTID-aware MariaDB peer (MariaDB's
/// `MARIA_SLAVE_CAPABILITY_GTID`).
pub(super) const MARIA_SLAVE_CAPABILITY_GTID: u64 = 4;

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
    let Some(list) = MariadbGtid::parse_list(state) else {
        return Err(MSG_MARIADB_MALFORMED_STATE.into());
    };
    let ours = settings.sid;
    let last = source.gtid_executed().last_gno(&ours);
    let mut after = 0u64;
    for g in list
        .iter()
        .filter(|g| g.domain_id == mariadb_stream::DOMAIN)
    {
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
            let Some(list) = MariadbGtid::parse_list(text) else {
                return Err(MSG_MARIADB_MALFORMED_UNTIL.into());
            };
            Some(
                list.iter()
                    .find(|g| g.domain_id == mariadb_stream::DOMAIN)
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

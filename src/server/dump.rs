//! A dump session: COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID (spec §3).
//!
//! ```text
//!  validate start ─► fake ROTATE(file, pos) ─► FORMAT_DESCRIPTION ─► events …
//!        │ 1236                                  (log_pos 0 when pos > 4)
//!        ▼
//!   caught up? ── next file exists ──► fake ROTATE(next, 4) ─► its events
//!        │── non-blocking ──► EOF, end
//!        └── wait for the end-position watch; HEARTBEAT after each silent period
//! ```
//!
//! # Checksums (§3.3)
//! Events go out as stored when the client announced `@master_binlog_checksum` (any value).
//! The first fake ROTATE, sent before any FORMAT_DESCRIPTION, carries a CRC32 only if the
//! client announced `CRC32`; the fake ROTATE of a file switch follows the stream's algorithm,
//! as MySQL's `Binlog_sender` does: clients take the algorithm of every event after a
//! FORMAT_DESCRIPTION from it (`mariadb-binlog`, go-mysql), so a fake ROTATE without the CRC
//! they expect loses four bytes of the next file's name. A client that never announced the
//! checksum gets every CRC removed and a FORMAT_DESCRIPTION saying `NONE` (what pre-checksum
//! replicas can read); MySQL 8.0 would refuse such a client instead.
//!
//! # MariaDB peers
//! A MariaDB replica or `mariadb-binlog` (MariaDB client library) that announced
//! `@mariadb_slave_capability` 4 (GTID-aware; every MariaDB peer does) gets the MariaDB GTID
//! flavour, as a MariaDB master sends it: MariaDB GTID / GTID_LIST events in place of MySQL's,
//! QUERY events with MariaDB collation ids, the files' positions ([`super::mariadb`] has the
//! layout and the position rule). So a replica set up by file and position keeps
//! `@@gtid_slave_pos` and can later switch to `MASTER_USE_GTID`. A start by MariaDB GTID
//! (`@slave_connect_state`, from any client with capability 4) gets the same flavour, and
//! `@slave_until_gtid` (`START SLAVE UNTIL master_gtid_pos`) ends it after that GTID's group
//! with MariaDB's fake GTID_LIST flagged `FLAG_UNTIL_REACHED`. A MariaDB peer with a lower
//! capability only gets the MariaDB collation ids; sizes and positions are unchanged. MySQL
//! clients that set the capability too (Canal does, against any master) are recognised by
//! their client library and get the MySQL stream.
//!
//! # Isolation
//! Files are read on the blocking pool in bounded batches; the session owns its socket, so a
//! slow client slows only its own task. The session never answers what the client writes
//! (connector-java pings on this socket); it only notices the close.

use std::sync::Arc;
use std::time::Duration;

use tibinlog_protocol::binlog::checksum::{crc32, CHECKSUM_LEN};
use tibinlog_protocol::binlog::{
    flags, ChecksumAlg, EventMeta, EventType, EventWriter, GtidSet, Heartbeat, LogPos, Rotate, Sid,
    HEADER_LEN,
};
use tibinlog_protocol::wire::command::{DumpFlags, GtidSid};
use tibinlog_protocol::wire::errors::{
    ER_MASTER_FATAL_ERROR_READING_BINLOG, MSG_FIRST_LOG_NOT_FOUND, MSG_GTIDS_PURGED,
    MSG_POS_BELOW_4, MSG_POS_PAST_EOF,
};
use tibinlog_protocol::wire::response::{encode_eof_into, ErrResponse, OkResponse};
use tibinlog_protocol::wire::StatusFlags;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::mariadb::{self, EventHead, GtidFlavour, MariaGtid};
use super::session::{ConnInfo, Session};
use super::source::{BinlogPosition, BinlogReader, EventBatch, SourceError};
use super::transport::{ConnError, PacketIo};
use super::Shared;

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

/// Events read from the source per blocking batch, and the byte cap of one batch. Small row
/// events are ~100 bytes: the event cap lets a batch reach the byte cap, so a session that
/// streams a backlog pays the blocking-pool round trip once per ~1 MiB, not per 50 KiB.
const BATCH_EVENTS: usize = 8192;
const BATCH_BYTES: usize = 1 << 20;
/// Flush the socket buffer when it holds this much.
const FLUSH_BYTES: usize = 64 * 1024;

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
    /// ([`super::mariadb`]).
    mariadb: bool,
}

/// Runs the dump until the client goes away, the end in non-blocking mode, or `cancel`.
pub async fn run(
    shared: Arc<Shared>,
    mut io: PacketIo,
    info: &ConnInfo,
    session: &Session,
    req: DumpRequest,
    cancel: CancellationToken,
) -> Result<(), ConnError> {
    match prepare(&shared, session, &req) {
        Ok(start) => {
            let mut d = DumpSession::new(shared, io, info, session, &req, start, cancel);
            d.stream().await
        }
        Err(msg) => {
            let err = ErrResponse::new(ER_MASTER_FATAL_ERROR_READING_BINLOG, msg);
            io.send(&err.to_payload()).await?;
            Ok(())
        }
    }
}

/// Validates the request; returns where to start, or the 1236 message.
fn prepare(shared: &Shared, session: &Session, req: &DumpRequest) -> Result<Start, String> {
    if let Some(state) = session.user_var("slave_connect_state") {
        return prepare_mariadb(shared, session, &state);
    }
    let source = shared.source.as_ref();
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
            let reader = source.open(&file, *pos).map_err(open_error)?;
            Ok(Start {
                reader,
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
            let ours = Sid::parse(&shared.identity.server_uuid).unwrap_or(Sid::ZERO);
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
            let reader = source.open(&at.file, at.pos).map_err(open_error)?;
            Ok(Start {
                reader,
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
fn prepare_mariadb(shared: &Shared, session: &Session, state: &str) -> Result<Start, String> {
    if session.mariadb_capability().unwrap_or(0) < MARIA_SLAVE_CAPABILITY_GTID {
        return Err(MSG_MARIADB_CAPABILITY.into());
    }
    let Some(list) = mariadb::parse_gtid_list(state) else {
        return Err(MSG_MARIADB_MALFORMED_STATE.into());
    };
    let source = shared.source.as_ref();
    let ours = Sid::parse(&shared.identity.server_uuid).unwrap_or(Sid::ZERO);
    let last = source.gtid_executed().last_gno(&ours);
    let mut after = 0u64;
    for g in list.iter().filter(|g| g.domain == mariadb::DOMAIN) {
        if g.server_id == shared.identity.server_id && g.seq_no <= last {
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
    let until = match session.user_var("slave_until_gtid") {
        None => None,
        Some(text) => {
            let Some(list) = mariadb::parse_gtid_list(&text) else {
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
    let reader = source.open(&at.file, at.pos).map_err(open_error)?;
    Ok(Start {
        reader,
        have: (after > 0).then_some(have),
        mariadb_after: Some(after),
        until,
    })
}

fn open_error(e: SourceError) -> String {
    match e {
        SourceError::UnknownFile { .. } | SourceError::Purged => MSG_FIRST_LOG_NOT_FOUND.into(),
        SourceError::PastEnd { .. } => MSG_POS_PAST_EOF.into(),
        SourceError::NotAtEventBoundary { .. } => MSG_IMPOSSIBLE_POSITION.into(),
        other => other.to_string(),
    }
}

struct Start {
    reader: Box<dyn BinlogReader>,
    /// GTID dumps: transactions in this set are skipped.
    have: Option<GtidSet>,
    /// MariaDB GTID dumps: the GNO the client has everything up to.
    mariadb_after: Option<u64>,
    /// MariaDB GTID dumps with `@slave_until_gtid` (`START SLAVE UNTIL master_gtid_pos`).
    until: Option<Until>,
}

/// Where a MariaDB GTID dump stops (`@slave_until_gtid`, MariaDB's `until_gtid_state`), for our
/// domain 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// After the group with GTID `0-<server_id>-<seq_no>`, or before the first group past it
    /// (which is skipped). Another server id in domain 0 never matches: nothing stops.
    At { server_id: u32, seq_no: u64 },
    /// The list names other domains only: domain 0 has reached its stop, so every group of
    /// ours is skipped, as MariaDB skips a domain that is not (or no longer) in the list.
    SkipAll,
}

/// State of a MariaDB-flavoured session ([`super::mariadb`]).
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

struct DumpSession {
    shared: Arc<Shared>,
    io: PacketIo,
    reader: Option<Box<dyn BinlogReader>>,
    /// The event buffer, reused by every read (taken while a read runs).
    batch: Option<EventBatch>,
    have: Option<GtidSet>,
    mode: StreamMode,
    heartbeat: Option<Duration>,
    non_block: bool,
    deprecate_eof: bool,
    cancel: CancellationToken,
    /// File being sent and the offset after the last event sent or skipped.
    file: String,
    pos: u64,
    /// Inside a transaction whose GTID the client already has.
    skipping: bool,
    /// Skipped bytes since the last event sent: a heartbeat tells the client where we are.
    skipped_since_send: bool,
    server_id: u32,
    conn_id: u32,
    /// MariaDB GTID flavour: a MariaDB client that started with `@slave_connect_state`, or
    /// any GTID-aware MariaDB client (`@mariadb_slave_capability` ≥ 4), as a MariaDB master
    /// sends it.
    maria: Option<MariaSession>,
    /// The UNTIL position was reached and announced: the dump ends.
    until_reached: bool,
}

impl DumpSession {
    fn new(
        shared: Arc<Shared>,
        io: PacketIo,
        info: &ConnInfo,
        session: &Session,
        req: &DumpRequest,
        start: Start,
        cancel: CancellationToken,
    ) -> Self {
        let files_crc = shared.source.checksum_alg() == ChecksumAlg::Crc32;
        let announced = session.announced_checksum();
        let strip = announced.is_none() && files_crc;
        let mode = StreamMode {
            strip,
            fake_rotate_crc: announced
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case("CRC32")),
            events_crc: files_crc && !strip,
            mariadb: info.mariadb_client && session.mariadb_capability().is_some(),
        };
        let heartbeat = match session.heartbeat_period_ns() {
            Some(0) => None,
            Some(ns) => Some(Duration::from_nanos(ns)),
            None => shared.default_heartbeat,
        };
        let (flags, server_id) = match req {
            DumpRequest::Position {
                flags, server_id, ..
            }
            | DumpRequest::Gtid {
                flags, server_id, ..
            } => (*flags, *server_id),
        };
        let at = start.reader.position();
        let master_id = shared.identity.server_id;
        let sid = Sid::parse(&shared.identity.server_uuid).unwrap_or(Sid::ZERO);
        let gtid_aware = session
            .mariadb_capability()
            .is_some_and(|c| c >= MARIA_SLAVE_CAPABILITY_GTID);
        let flavoured = start.mariadb_after.is_some() || (mode.mariadb && gtid_aware);
        let maria = flavoured.then(|| {
            let after = start.mariadb_after.unwrap_or(0);
            MariaSession {
                flavour: GtidFlavour::new(master_id, sid.0, mode.events_crc),
                announce: (after > 0).then_some(after),
                until: start.until,
                group: Group::Outside,
                skip_group: false,
                stop_after_group: false,
                last_gno: after,
            }
        });
        Self {
            shared,
            io,
            reader: Some(start.reader),
            batch: Some(EventBatch::default()),
            have: start.have,
            mode,
            heartbeat,
            non_block: flags.non_block() || server_id == 0,
            deprecate_eof: tibinlog_protocol::wire::response::deprecate_eof(info.capabilities),
            cancel,
            file: at.file,
            pos: at.pos,
            skipping: false,
            skipped_since_send: false,
            server_id: master_id,
            conn_id: info.id,
            maria,
            until_reached: false,
        }
    }

    async fn stream(&mut self) -> Result<(), ConnError> {
        debug!(conn = self.conn_id, file = %self.file, pos = self.pos, "dump starts");
        let mut end_rx = self.shared.source.subscribe_end();
        if self.maria.is_some() {
            // A GTID start reads its file from the start; a file/position start from there.
            let from = (self.pos > 4).then_some(self.pos);
            self.start_mariadb_file(self.mode.fake_rotate_crc, from)?;
        } else {
            self.send_fake_rotate(self.mode.fake_rotate_crc)?;
            if self.pos > 4 {
                self.send_start_fde()?;
            }
        }
        self.io.flush().await?;
        let mut closing = false;
        loop {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            end_rx.borrow_and_update();
            let mut batch = self.read_batch().await?;
            if !batch.is_empty() {
                let sent = self.send_batch(&mut batch).await;
                self.batch = Some(batch);
                sent?;
                if self.until_reached {
                    // MariaDB ends the dump after the UNTIL group as at the end of a
                    // non-blocking dump.
                    self.send_eof().await?;
                    return Ok(());
                }
                continue;
            }
            self.batch = Some(batch);
            // Caught up with this file.
            let next = self.next_file();
            if let Some(next) = next {
                if !closing {
                    // The file was closed: read once more to take its last events.
                    closing = true;
                    continue;
                }
                closing = false;
                self.switch_to(&next)?;
                self.io.flush().await?;
                continue;
            }
            if self.skipped_since_send {
                if self.maria.as_ref().is_some_and(|m| m.announce.is_some()) {
                    self.send_fake_gtid_list(self.pos)?;
                } else {
                    self.send_heartbeat()?;
                }
                self.io.flush().await?;
            }
            if self.non_block {
                self.send_eof().await?;
                return Ok(());
            }
            if !self.wait(&mut end_rx).await? {
                return Ok(());
            }
        }
    }

    /// The EOF packet that ends a dump.
    async fn send_eof(&mut self) -> Result<(), ConnError> {
        let mut p = Vec::with_capacity(8);
        if self.deprecate_eof {
            OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).encode_as_eof_into(&mut p);
        } else {
            encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p);
        }
        self.io.send(&p).await?;
        Ok(())
    }

    /// Waits for new events. False when the session must end (client gone, cancelled).
    async fn wait(
        &mut self,
        end_rx: &mut tokio::sync::watch::Receiver<BinlogPosition>,
    ) -> Result<bool, ConnError> {
        loop {
            let period = self.heartbeat.unwrap_or(Duration::from_secs(3600));
            let mut scratch = [0u8; 512];
            tokio::select! {
                _ = self.cancel.cancelled() => return Ok(false),
                r = tokio::time::timeout(period, end_rx.changed()) => match r {
                    Ok(Ok(())) => return Ok(true),
                    Ok(Err(_)) => return Err(ConnError::Dump("binlog writer is gone".into())),
                    Err(_elapsed) => {
                        if self.heartbeat.is_some() {
                            self.send_heartbeat()?;
                            self.io.flush().await?;
                        }
                    }
                },
                r = self.io.read_some(&mut scratch) => match r {
                    // Whatever the client writes on a dump socket is ignored (§3.9).
                    Ok(0) | Err(_) => return Ok(false),
                    Ok(_) => {}
                },
            }
        }
    }

    /// Sends the events of `batch`, flushing as the socket buffer fills.
    async fn send_batch(&mut self, batch: &mut EventBatch) -> Result<(), ConnError> {
        for i in 0..batch.len() {
            self.on_event(batch.get_mut(i))?;
            if self.until_reached {
                break;
            }
            if self.io.pending() >= FLUSH_BYTES {
                self.io.flush().await?;
            }
        }
        self.io.flush().await?;
        Ok(())
    }

    /// Reads the next events on the blocking pool, into the session's reused batch buffer.
    async fn read_batch(&mut self) -> Result<EventBatch, ConnError> {
        let Some(mut reader) = self.reader.take() else {
            return Err(ConnError::Dump("reader lost".into()));
        };
        let mut out = self.batch.take().unwrap_or_default();
        out.clear();
        let task = tokio::task::spawn_blocking(move || {
            let res = reader.read_batch(&mut out, BATCH_EVENTS, BATCH_BYTES);
            (reader, out, res)
        });
        let (reader, mut out, res) = task
            .await
            .map_err(|e| ConnError::Dump(format!("reader task failed: {e}")))?;
        self.reader = Some(reader);
        if out.byte_len() < FLUSH_BYTES {
            out.shrink_to(4 * FLUSH_BYTES);
        }
        match res {
            Ok(()) => Ok(out),
            Err(e) if out.is_empty() => {
                let err = ErrResponse::new(ER_MASTER_FATAL_ERROR_READING_BINLOG, e.to_string());
                self.io.send(&err.to_payload()).await?;
                Err(ConnError::Dump(e.to_string()))
            }
            // Send what was read; the error comes back on the next call.
            Err(_) => Ok(out),
        }
    }

    fn next_file(&self) -> Option<String> {
        let files = self.shared.source.files();
        let i = files.iter().position(|f| f.name == self.file)?;
        files.get(i + 1).map(|f| f.name.clone())
    }

    fn switch_to(&mut self, next: &str) -> Result<(), ConnError> {
        if self.maria.is_some() {
            self.file = next.to_string();
            self.skipping = false;
            // A FORMAT_DESCRIPTION was sent: the client reads this one with the stream's algorithm.
            return self.start_mariadb_file(self.mode.events_crc, None);
        }
        let reader = self
            .shared
            .source
            .open(next, 4)
            .map_err(|e| ConnError::Dump(e.to_string()))?;
        self.reader = Some(reader);
        self.file = next.to_string();
        self.pos = 4;
        self.skipping = false;
        // A FORMAT_DESCRIPTION was sent: the client reads this one with the stream's algorithm.
        self.send_fake_rotate(self.mode.events_crc)
    }

    fn on_event(&mut self, ev: &mut [u8]) -> Result<(), ConnError> {
        let Some(&ty) = ev.get(4) else {
            return Err(ConnError::Dump("event shorter than its header".into()));
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
            return self.on_mariadb_event(ev, ty);
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
            super::mariadb::patch_query_event(ev, self.mode.events_crc);
        }
        self.skipped_since_send = false;
        self.io.queue_parts(&[&[0u8], ev]);
        Ok(())
    }

    /// Sends one event of a MariaDB-flavoured session (after the GTID skipping).
    fn on_mariadb_event(&mut self, ev: &mut [u8], ty: EventType) -> Result<(), ConnError> {
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
                self.send_fake_gtid_list(before)?;
            }
            let ev = if self.mode.strip {
                strip_crc_in_place(ev)
            } else {
                ev
            };
            if let Some(m) = self.maria.as_mut() {
                let io = &mut self.io;
                m.flavour.feed(ev, |e| io.queue_parts(&[&[0u8], e]));
            }
            self.skipped_since_send = false;
        }
        if stop {
            self.send_until_reached()?;
        }
        Ok(())
    }

    /// The fake GTID_LIST that tells a MariaDB replica its UNTIL position is reached (flag
    /// `FLAG_UNTIL_REACHED`, the binlog state up to the last group read), with log_pos = the
    /// offset after that group; the dump then ends.
    fn send_until_reached(&mut self) -> Result<(), ConnError> {
        let Some(m) = self.maria.as_mut() else {
            return Ok(());
        };
        m.stop_after_group = false;
        let head = EventHead {
            timestamp: 0,
            server_id: self.server_id,
            log_pos: u32::try_from(self.pos).unwrap_or(u32::MAX),
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
        self.io.queue_parts(&[&[0u8], &ev]);
        self.skipped_since_send = false;
        self.until_reached = true;
        Ok(())
    }

    /// Starts sending `self.file` to a MariaDB-flavoured session: fake ROTATE naming the offset
    /// where the events start, then MariaDB's FORMAT_DESCRIPTION with log_pos 0 (not counted by
    /// the replica), then the file's events from that offset ([`super::mariadb`], position
    /// rule). `from`: a start past the file's own FORMAT_DESCRIPTION, where the session's reader
    /// already is; `None` starts right after it.
    fn start_mariadb_file(&mut self, rotate_crc: bool, from: Option<u64>) -> Result<(), ConnError> {
        let mut reader = self
            .shared
            .source
            .open(&self.file, 4)
            .map_err(|e| ConnError::Dump(e.to_string()))?;
        let fde = reader
            .next_event()
            .map_err(|e| ConnError::Dump(e.to_string()))?
            .filter(|e| e.get(4) == Some(&EventType::FORMAT_DESCRIPTION.0));
        let Some(fde) = fde else {
            return Err(ConnError::Dump(format!(
                "{} does not start with a FORMAT_DESCRIPTION event",
                self.file
            )));
        };
        let after_fde = 4 + fde.len() as u64;
        match from {
            Some(at) if at > after_fde => self.pos = at,
            _ => {
                self.pos = after_fde;
                self.reader = Some(reader);
            }
        }
        self.send_fake_rotate(rotate_crc)?;
        let alg = if self.mode.strip {
            ChecksumAlg::Off as u8
        } else {
            fde[fde.len().saturating_sub(CHECKSUM_LEN + 1)]
        };
        let ev = mariadb::format_description(&fde, alg)
            .ok_or_else(|| ConnError::Dump("FORMAT_DESCRIPTION shorter than its header".into()))?;
        self.io.queue_parts(&[&[0u8], &ev]);
        if let Some(m) = self.maria.as_mut() {
            m.flavour.reset();
            m.group = Group::Outside;
        }
        Ok(())
    }

    /// MariaDB's fake GTID_LIST after the skipped transactions: the client's position, with
    /// log_pos = the offset after them, so the replica's read position moves over the gap.
    fn send_fake_gtid_list(&mut self, log_pos: u64) -> Result<(), ConnError> {
        let Some(after) = self.maria.as_mut().and_then(|m| m.announce.take()) else {
            return Ok(());
        };
        let head = EventHead {
            timestamp: 0,
            server_id: self.server_id,
            log_pos: u32::try_from(log_pos).unwrap_or(u32::MAX),
            flags: flags::ARTIFICIAL,
        };
        let list = [MariaGtid {
            domain: mariadb::DOMAIN,
            server_id: self.server_id,
            seq_no: after,
        }];
        let ev = mariadb::gtid_list_event(head, &list, 0, self.mode.events_crc);
        self.skipped_since_send = false;
        self.io.queue_parts(&[&[0u8], &ev]);
        Ok(())
    }

    fn send_fake_rotate(&mut self, crc: bool) -> Result<(), ConnError> {
        let mut w = EventWriter::new(self.server_id, crc);
        let mut ev = Vec::with_capacity(64);
        w.write_with(
            &mut ev,
            EventMeta {
                timestamp: 0,
                log_pos: LogPos::Fixed(0),
                flags: flags::ARTIFICIAL,
            },
            &Rotate {
                position: self.pos,
                next_file: &self.file,
            },
        )
        .map_err(|e| ConnError::Dump(e.to_string()))?;
        self.io.queue_parts(&[&[0u8], &ev]);
        Ok(())
    }

    /// The file's FORMAT_DESCRIPTION for a start past offset 4: log_pos 0, create time 0.
    fn send_start_fde(&mut self) -> Result<(), ConnError> {
        let fde = self
            .shared
            .source
            .open(&self.file, 4)
            .and_then(|mut r| r.next_event())
            .map_err(|e| ConnError::Dump(e.to_string()))?;
        let Some(mut fde) = fde.filter(|e| e.get(4) == Some(&EventType::FORMAT_DESCRIPTION.0))
        else {
            return Err(ConnError::Dump(format!(
                "{} does not start with a FORMAT_DESCRIPTION event",
                self.file
            )));
        };
        patch_fde(&mut fde, true, self.mode.strip);
        self.io.queue_parts(&[&[0u8], &fde]);
        Ok(())
    }

    fn send_heartbeat(&mut self) -> Result<(), ConnError> {
        let mut w = EventWriter::new(self.server_id, self.mode.events_crc);
        let mut ev = Vec::with_capacity(64);
        let pos = u32::try_from(self.pos).unwrap_or(u32::MAX);
        w.write_with(
            &mut ev,
            EventMeta {
                timestamp: 0,
                log_pos: LogPos::Fixed(pos),
                flags: 0,
            },
            &Heartbeat { file: &self.file },
        )
        .map_err(|e| ConnError::Dump(e.to_string()))?;
        self.skipped_since_send = false;
        self.io.queue_parts(&[&[0u8], &ev]);
        Ok(())
    }
}

/// SID and GNO of a GTID event.
fn gtid_of(ev: &[u8]) -> Option<(Sid, u64)> {
    tibinlog_protocol::binlog::read::gtid(ev.get(HEADER_LEN..)?)
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

/// Removes an event's CRC32 and shrinks its `event_size`.
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

/// The owned form of [`strip_crc_in_place`], for the tests.
#[cfg(test)]
fn strip_crc(ev: &mut Vec<u8>) {
    if ev.len() < HEADER_LEN + CHECKSUM_LEN {
        return;
    }
    ev.truncate(ev.len() - CHECKSUM_LEN);
    let size = ev.len() as u32;
    ev[9..13].copy_from_slice(&size.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use tibinlog_protocol::binlog::checksum::verify_event;
    use tibinlog_protocol::binlog::FormatDescription;

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
        let mut in_place = hb.clone();
        strip_crc(&mut hb);
        assert_eq!(hb.len(), before - 4);
        assert_eq!(
            u32::from_le_bytes([hb[9], hb[10], hb[11], hb[12]]) as usize,
            hb.len()
        );
        // The borrowed form dump sessions use gives the same bytes.
        assert_eq!(strip_crc_in_place(&mut in_place), &hb[..]);
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

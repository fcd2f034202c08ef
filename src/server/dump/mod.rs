//! A dump session: COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID, served the way MySQL's
//! `Binlog_sender` (`sql/rpl_binlog_sender.cc`) serves them.
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
//! # Checksums
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
//! QUERY events with MariaDB collation ids, the files' positions (the protocol crate's
//! `binlog::mariadb_stream` has the layout and the position rule). So a replica set up by file and position keeps
//! `@@gtid_slave_pos` and can later switch to `MASTER_USE_GTID`. A start by MariaDB GTID
//! (`@slave_connect_state`, from any client with capability 4) gets the same flavour, and
//! `@slave_until_gtid` (`START SLAVE UNTIL master_gtid_pos`) ends it after that GTID's group
//! with MariaDB's fake GTID_LIST flagged `FLAG_UNTIL_REACHED`. A MariaDB peer with a lower
//! capability only gets the MariaDB collation ids; sizes and positions are unchanged. MySQL
//! clients that set the capability too (Canal does, against any master) are recognised by
//! their client library and get the MySQL stream.
//!
//! # Layout
//! - [`plan`]: every decision above, pure: the request and the events read in, the events to
//!   send out; tested with event scripts.
//! - [`session`]: the socket shell that reads the files, follows the plan, flushes, waits, and
//!   times heartbeats.
//!
//! # Isolation
//! Files are read on the blocking pool in bounded batches; the session owns its socket, so a
//! slow client slows only its own task. The session never answers what the client writes
//! (connector-java pings on this socket); it only notices the close.

use std::sync::Arc;

use tibinlog_protocol::binlog::{mariadb_stream, ChecksumAlg, MariadbGtid, Sid};
use tibinlog_protocol::wire::errors::ER_MASTER_FATAL_ERROR_READING_BINLOG;
use tibinlog_protocol::wire::response::ErrResponse;
use tokio_util::sync::CancellationToken;

use super::session::{ConnInfo, Session};
use super::transport::{ConnError, PacketIo};
use super::Shared;

pub mod plan;
pub mod relay;
mod session;

pub use plan::DumpRequest;

/// How long a dump from a member of an HA group waits for its binlog to reach a client that
/// is ahead of it before refusing it as MySQL does (error 1236).
const HA_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(60);

/// The client asks for what this binlog does not have yet: GTIDs of this server past its
/// `@@gtid_executed` (MySQL's, or MariaDB's `0-<server_id>-<seq_no>` in
/// `@slave_connect_state`), or a position past its end.
fn ahead(shared: &Shared, settings: &plan::Settings, req: &DumpRequest) -> bool {
    let source = shared.source.as_ref();
    let sid = settings.sid;
    if let Some(state) = &settings.slave_connect_state {
        let last = source.gtid_executed().last_gno(&sid);
        return MariadbGtid::parse_list(state).is_some_and(|list| {
            list.iter().any(|g| {
                g.domain_id == mariadb_stream::DOMAIN
                    && g.server_id == settings.server_id
                    && g.seq_no > last
            })
        });
    }
    match req {
        DumpRequest::Gtid { sids, .. } => {
            let wanted = sids
                .iter()
                .filter(|s| s.uuid == sid.0 && s.tag.is_none())
                .flat_map(|s| s.intervals.iter().map(|&(_, end)| end.saturating_sub(1)))
                .max()
                .unwrap_or(0);
            wanted > source.gtid_executed().last_gno(&sid)
        }
        DumpRequest::Position { file, pos, .. } => {
            let end = source.end_position();
            // Names of one basename: a longer number, or the same length and a larger one.
            let key = |n: &str| (n.len(), n.to_owned());
            !file.is_empty()
                && (key(file) > key(&end.file) || (*file == end.file && *pos > end.pos))
        }
    }
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
    let settings = plan::Settings {
        server_id: shared.identity.server_id,
        sid: Sid::parse(&shared.identity.server_uuid).unwrap_or(Sid::ZERO),
        files_crc: shared.source.checksum_alg() == ChecksumAlg::Crc32,
        announced_checksum: session.announced_checksum(),
        mariadb_client: info.mariadb_client,
        mariadb_capability: session.mariadb_capability(),
        slave_connect_state: session.user_var("slave_connect_state"),
        slave_until_gtid: session.user_var("slave_until_gtid"),
    };
    let in_group = shared
        .capture
        .as_ref()
        .is_some_and(|c| c.ha_owner_text().is_some());
    if in_group {
        // A client that read another member's binlog may be ahead of this one right after a
        // failover: this member relays or regenerates the same transactions shortly, so the
        // dump waits for them rather than refusing what it will have.
        // A client that goes away meanwhile (its own timeout, a reconnect) ends the wait.
        let mut end = shared.source.subscribe_end();
        let deadline = tokio::time::Instant::now() + HA_CATCH_UP;
        let mut scratch = [0u8; 512];
        while ahead(&shared, &settings, &req) {
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                r = tokio::time::timeout_at(deadline, end.changed()) => {
                    if !matches!(r, Ok(Ok(()))) {
                        break;
                    }
                }
                r = io.read_some(&mut scratch) => match r {
                    // Whatever the client writes on a dump socket is ignored.
                    Ok(0) | Err(_) => {
                        tracing::info!("a replica left while this member caught up with it");
                        return Ok(());
                    }
                    Ok(_) => {}
                },
            }
        }
    }
    let opened = plan::plan_start(&settings, shared.source.as_ref(), &req).and_then(|start| {
        let reader = shared
            .source
            .open(&start.from.file, start.from.pos)
            .map_err(plan::open_error)?;
        Ok((start, reader))
    });
    match opened {
        Ok((mut start, reader)) => {
            start.from = reader.position();
            let from = start.from.clone();
            let dump_plan = plan::DumpPlan::new(&settings, start);
            let pacing = self::session::Pacing {
                heartbeat: plan::heartbeat_period(
                    session.heartbeat_period_ns(),
                    shared.default_heartbeat,
                ),
                non_block: req.non_blocking(),
                write_timeout: session.net_write_timeout(shared.net_write_timeout),
                relay: session.user_var(relay::USER_VAR).is_some()
                    && matches!(req, DumpRequest::Position { .. }),
            };
            // The connection's span names the connection, the user and the replica's server id.
            tracing::info!(
                file = %from.file,
                pos = from.pos,
                "a replica's binlog dump starts"
            );
            let mut d = self::session::DumpSession::new(
                shared, io, info, dump_plan, reader, pacing, cancel,
            );
            let ended = d.stream().await;
            match &ended {
                Ok(()) => tracing::info!("a replica's binlog dump ended"),
                Err(e) => tracing::info!(error = %e, "a replica's binlog dump ended"),
            }
            ended
        }
        Err(msg) => {
            tracing::warn!(
                error = %msg,
                "a replica's binlog dump refused (1236)"
            );
            let err = ErrResponse::new(ER_MASTER_FATAL_ERROR_READING_BINLOG, msg);
            io.send(&err.to_payload()).await?;
            Ok(())
        }
    }
}

//! A standby follows the owner of its HA group: it is a dump client of the owner by file and
//! position, from its own binlog's end, and hands each transaction's bytes with the owner's
//! relay events ([`crate::server::dump::relay`]) to its writer, which appends them only if they
//! are exactly what it would write itself (`BinlogStore::relay_txn`).
//!
//! ```text
//! owner? (etcd) ─► writer: flush, where do I resume? ─► connect, SET @tibinlog_relay,
//!   COM_REGISTER_SLAVE + COM_BINLOG_DUMP(file, pos)
//!   GTID … XID / GTID QUERY ─► relay event (start_ts, commit_ts, part) ─► writer: relay_txn
//!   relay event (snapshot point) ─► writer: checkpoint there if its binlog ends there too
//!   FORMAT_DESCRIPTION of binlog.000001 for a store with nothing in it ─► adopt its timestamp
//! ```
//! The stream is left (and joined again from the new end) when the owner changes, when it is
//! silent for three heartbeat periods, on any error; a refusal of the writer (the owner's bytes
//! differ from what this instance would write) is reported and retried with a backoff.

use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::binlog::events::Event;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, OptsBuilder};
use tibinlog_protocol::binlog::{flags, EventType};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::binlog_store::source::WriterMsg;
use crate::ha::{Candidate, MemberInfo};
use crate::mounter::ChangeEvent;
use crate::server::dump::relay::{Relay, USER_VAR};
use crate::server::status::CaptureStatus;

/// Heartbeat period the standby asks the owner for: a checkpoint reaches it at least this
/// often, and a silent owner is noticed after three of them.
const HEARTBEAT: Duration = Duration::from_millis(500);
/// How often the followed member is checked to still own the group.
const OWNER_CHECK: Duration = Duration::from_secs(1);
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(5);

/// Who follows and how it logs in.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    pub user: String,
    pub password: String,
    /// The server id this standby registers with (never the group's own server id).
    pub replica_server_id: u32,
    /// This member's MySQL address: the host and port it registers with, so that the owner's
    /// `SHOW REPLICAS` lists its standbys.
    pub advertise: String,
    /// Where the catalog after a relayed DDL is read (TiDB's meta at its commit ts).
    pub pd: crate::capture::pd::PdClient,
    pub filter: crate::mounter::TableFilter,
}

/// The replica server id of an instance: a hash of its id, never 0 nor the group's own.
pub fn replica_server_id(instance_id: &str, own: u32) -> u32 {
    let h = crc32fast::hash(instance_id.as_bytes()) | 0x8000_0000;
    if h == own {
        h ^ 1
    } else {
        h
    }
}

/// Follows whoever owns the group until `stop`.
pub async fn follow(
    candidate: &Candidate,
    cfg: FollowConfig,
    out: mpsc::Sender<WriterMsg<ChangeEvent>>,
    status: &CaptureStatus,
    stop: CancellationToken,
) {
    let me = candidate.member().instance_id.clone();
    let mut retry = FIRST_RETRY;
    loop {
        let owner = tokio::select! {
            () = stop.cancelled() => return,
            o = candidate.owner() => o,
        };
        if let Ok(o) = &owner {
            status.ha_owner(o.as_ref().map(|m| (m.instance_id.clone(), m.mysql.clone())));
        }
        let owner = match owner {
            Ok(Some(m)) if m.instance_id != me => m,
            Ok(_) => {
                // No owner yet, or this instance (about to be told by its campaign).
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(FIRST_RETRY) => {}
                }
                continue;
            }
            Err(e) => {
                debug!(error = %e, "who owns the group");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(MAX_RETRY);
                continue;
            }
        };
        // Dropped mid-way on a stop: a half-sent message is sent or not, never torn.
        let session = tokio::select! {
            () = stop.cancelled() => return,
            r = follow_once(candidate, &owner, &cfg, &out, status, &stop) => r,
        };
        match session {
            Ok(()) => {
                status.ha_following(Some(String::new()));
                retry = FIRST_RETRY;
            }
            Err(Stop::Stopped) => {
                status.ha_following(Some(String::new()));
                return;
            }
            Err(Stop::Retry(e)) => {
                status.ha_following(Some(format!(
                    "{} ({}): {e}",
                    owner.instance_id, owner.mysql
                )));
                warn!(owner = %owner.instance_id, addr = %owner.mysql, error = %e, retry_in = ?retry,
                    "following the owner's binlog");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}

/// Why a session ended.
enum Stop {
    Stopped,
    Retry(String),
}

impl<E: std::fmt::Display> From<E> for Stop {
    fn from(e: E) -> Self {
        Stop::Retry(e.to_string())
    }
}

/// One dump session from the owner. `Ok` when the owner changed (join the new one now).
async fn follow_once(
    candidate: &Candidate,
    owner: &MemberInfo,
    cfg: &FollowConfig,
    out: &mpsc::Sender<WriterMsg<ChangeEvent>>,
    status: &CaptureStatus,
    stop: &CancellationToken,
) -> Result<(), Stop> {
    let start = {
        let (tx, rx) = oneshot::channel();
        out.send(WriterMsg::RelayFrom(tx))
            .await
            .map_err(|_| Stop::Stopped)?;
        rx.await.map_err(|_| Stop::Stopped)?.map_err(Stop::Retry)?
    };
    let (host, port) = split_addr(&owner.mysql)?;
    let opts = OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port)
        .user(Some(cfg.user.clone()))
        .pass(Some(cfg.password.clone()))
        .prefer_socket(false);
    let mut conn = tokio::select! {
        () = stop.cancelled() => return Err(Stop::Stopped),
        c = tokio::time::timeout(Duration::from_secs(10), Conn::new(opts)) => {
            c.map_err(|_| "connect: timed out".to_owned())??
        }
    };
    conn.query_drop(format!(
        "SET @{USER_VAR} = 1, @master_heartbeat_period = {}",
        HEARTBEAT.as_nanos()
    ))
    .await?;
    // COM_BINLOG_DUMP carries 4 bytes of position.
    if start.pos > u64::from(u32::MAX) {
        return Err(Stop::Retry(format!("position {} is past 4 GiB", start.pos)));
    }
    let (my_host, my_port) = split_addr(&cfg.advertise).unwrap_or_default();
    let mut stream = conn
        .get_binlog_stream(
            BinlogStreamRequest::new(cfg.replica_server_id)
                .with_filename(start.file.as_bytes())
                .with_pos(start.pos)
                .with_hostname(my_host.as_bytes())
                .with_port(my_port),
        )
        .await?;
    status.ha_following(None);
    info!(owner = %owner.instance_id, addr = %owner.mysql, file = %start.file, pos = start.pos,
        "following the owner's binlog");
    let mut pristine = start.pristine;
    let mut txn: Vec<u8> = Vec::with_capacity(1 << 16);
    // The type of the transaction's last event: a QUERY ends a DDL.
    let mut last = EventType(0);
    let mut check = tokio::time::interval(OWNER_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ev = tokio::select! {
            () = stop.cancelled() => return Err(Stop::Stopped),
            _ = check.tick() => {
                match candidate.owner().await {
                    Ok(Some(m)) if m.instance_id == owner.instance_id => continue,
                    // The owner changed (or is unknown for now): start again from the top.
                    _ => return Ok(()),
                }
            }
            ev = tokio::time::timeout(3 * HEARTBEAT, stream.next()) => match ev {
                Err(_) => return Err(Stop::Retry("the owner is silent".into())),
                Ok(None) => return Err(Stop::Retry("the owner ended the stream".into())),
                Ok(Some(ev)) => ev?,
            }
        };
        let h = ev.header();
        let ty = EventType(h.event_type_raw());
        match ty {
            EventType::GTID => {
                txn.clear();
                raw_event(&ev, &mut txn)?;
                last = ty;
            }
            EventType::IGNORABLE if h.flags_raw() & flags::ARTIFICIAL != 0 => {
                match Relay::parse(ev.data()) {
                    Some(Relay::Txn(tag)) => {
                        if txn.is_empty() {
                            return Err(Stop::Retry("a relay event outside a transaction".into()));
                        }
                        // An exact copy goes to the writer; the buffer keeps its capacity.
                        let events = txn.as_slice().to_vec();
                        txn.clear();
                        // A DDL changes what SQL reads see from its position on.
                        let catalog = if last == EventType::QUERY {
                            let ts = crate::model::Ts(tag.commit_ts);
                            match catalog_at(&cfg.pd, ts, cfg.filter.clone()).await {
                                Ok(c) => Some(c),
                                Err(e) => {
                                    warn!(error = %format!("{e:#}"), commit_ts = tag.commit_ts,
                                        "no catalog after a relayed DDL; SQL reads keep the one before");
                                    None
                                }
                            }
                        } else {
                            None
                        };
                        out.send(WriterMsg::Relayed {
                            events,
                            tag,
                            catalog,
                        })
                        .await
                        .map_err(|_| Stop::Stopped)?;
                    }
                    Some(Relay::Checkpoint { ts, file, pos }) => {
                        out.send(WriterMsg::RelayedCheckpoint { ts, file, pos })
                            .await
                            .map_err(|_| Stop::Stopped)?;
                    }
                    None => {}
                }
            }
            EventType::FORMAT_DESCRIPTION if pristine && h.log_pos() != 0 => {
                // The owner's first file from its start: a store with nothing in it takes
                // its timestamp (the one byte range of a prologue that is not configuration).
                pristine = false;
                out.send(WriterMsg::RelayedFirstFile {
                    timestamp: h.timestamp(),
                })
                .await
                .map_err(|_| Stop::Stopped)?;
            }
            EventType::HEARTBEAT
            | EventType::ROTATE
            | EventType::FORMAT_DESCRIPTION
            | EventType::PREVIOUS_GTIDS => {}
            _ if !txn.is_empty() => {
                raw_event(&ev, &mut txn)?;
                last = ty;
            }
            _ => {}
        }
    }
}

/// `host:port` (a bracketed IPv6 host too).
fn split_addr(addr: &str) -> Result<(String, u16), String> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("the owner's address {addr:?} has no port"))?;
    let port = port
        .parse()
        .map_err(|_| format!("the owner's address {addr:?} has a bad port"))?;
    Ok((
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port,
    ))
}

/// Appends the event as it is in the owner's file: header, body and checksum as received.
fn raw_event(ev: &Event, buf: &mut Vec<u8>) -> Result<(), String> {
    let h = ev.header();
    let start = buf.len();
    buf.extend_from_slice(&h.timestamp().to_le_bytes());
    buf.push(h.event_type_raw());
    buf.extend_from_slice(&h.server_id().to_le_bytes());
    buf.extend_from_slice(&h.event_size().to_le_bytes());
    buf.extend_from_slice(&h.log_pos().to_le_bytes());
    buf.extend_from_slice(&h.flags_raw().to_le_bytes());
    buf.extend_from_slice(ev.data());
    if let Some(crc) = ev.checksum() {
        buf.extend_from_slice(&crc);
    }
    if buf.len() - start != h.event_size() as usize {
        return Err(format!(
            "event of type {} is {} bytes, its header says {}",
            h.event_type_raw(),
            buf.len() - start,
            h.event_size()
        ));
    }
    Ok(())
}

/// The included tables as TiDB's schema had them at `ts` (read from its meta keys), for an
/// HA standby, which captures nothing: at start (its checkpoint) and after each DDL it relays
/// (that DDL's commit ts).
pub async fn catalog_at(
    pd: &crate::capture::pd::PdClient,
    ts: crate::model::Ts,
    filter: crate::mounter::TableFilter,
) -> anyhow::Result<crate::mounter::Catalog> {
    use anyhow::Context as _;
    let reader = std::sync::Arc::new(crate::capture::snapshot::SnapshotReader::new(
        pd.clone(),
        crate::capture::snapshot::SnapshotConfig::default(),
    ));
    let reader = crate::capture::snapshot::BlockingSnapshotReader::new(
        reader,
        tokio::runtime::Handle::current(),
    );
    let store = tokio::task::spawn_blocking(move || {
        crate::mounter::SchemaStore::bootstrap(&reader, ts, filter)
    })
    .await
    .context("schema read task")?
    .with_context(|| format!("read the schema at {}", ts.0))?;
    Ok(store.included_at(crate::model::Ts::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_ids_and_addresses() {
        let id = replica_server_id("a1b2c3", 1);
        assert!(id >= 0x8000_0000);
        assert_eq!(id, replica_server_id("a1b2c3", 1), "stable");
        assert_ne!(id, replica_server_id("a1b2c4", 1));
        assert_ne!(replica_server_id("x", id_of("x")), id_of("x"));
        assert_eq!(
            split_addr("127.0.0.1:3306").expect("v4"),
            ("127.0.0.1".into(), 3306)
        );
        assert_eq!(split_addr("[::1]:4000").expect("v6"), ("::1".into(), 4000));
        assert!(split_addr("host").is_err());
        assert!(split_addr("host:x").is_err());
    }

    fn id_of(s: &str) -> u32 {
        crc32fast::hash(s.as_bytes()) | 0x8000_0000
    }
}

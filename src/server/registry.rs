//! The server's registry of connections: one for every listener of a server (the MySQL and
//! the MariaDB-flavoured one), so that both share one connection-id space, one process list
//! (`SHOW PROCESSLIST`, information_schema.PROCESSLIST), one `KILL`, one `max_connections`,
//! one list of registered replicas and one set of snapshot holds, as one MySQL server has.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tibinlog_protocol::wire::command::RegisterSlave;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::{activity, Registration, Unanswered, UNANSWERED_KEPT};

/// What the registry knows about a live connection.
#[derive(Debug, Clone)]
struct ConnEntry {
    cancel: CancellationToken,
    /// Set by `KILL QUERY`: the running statement stops with 1317.
    interrupt: Arc<std::sync::atomic::AtomicBool>,
    /// Server id of the dump this connection runs, if any (a new dump with the same non-zero
    /// id ends the old one).
    dump_server_id: Option<u32>,
    /// What the connection is doing (process list, status API).
    activity: Arc<activity::Activity>,
    /// The listener it came in on (`mysql` or `mariadb`).
    listener: &'static str,
}

/// Connections, sessions, replicas and snapshot holds of a server.
#[derive(Debug)]
pub struct Registry {
    /// `@@max_connections`: authenticated sessions at once, over every listener.
    max_connections: u32,
    /// Authenticated sessions now (against `max_connections`).
    sessions: AtomicU32,
    /// The most sessions at once since start (`Max_used_connections`).
    max_used: AtomicU32,
    next_conn_id: AtomicU32,
    conns: Mutex<HashMap<u32, ConnEntry>>,
    replicas: Mutex<BTreeMap<u32, Registration>>,
    /// Snapshot timestamps sessions read at (their consistent snapshots, read locks and
    /// `@@tidb_snapshot`), by connection.
    holds: Mutex<HashMap<u32, u64>>,
    /// The oldest of `holds`: history from it on must stay readable.
    hold_tx: tokio::sync::watch::Sender<Option<u64>>,
    /// The latest statements the server could not answer (at most [`UNANSWERED_KEPT`]).
    unanswered: Mutex<std::collections::VecDeque<Unanswered>>,
}

/// One of `max_connections` places, held by an authenticated session while it lives.
#[derive(Debug)]
pub(crate) struct SessionSlot(Arc<Registry>);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.sessions.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Registry {
    /// An empty registry admitting `max_connections` sessions at once.
    pub fn new(max_connections: u32) -> Self {
        Registry {
            max_connections,
            sessions: AtomicU32::new(0),
            max_used: AtomicU32::new(0),
            next_conn_id: AtomicU32::new(1),
            conns: Mutex::new(HashMap::new()),
            replicas: Mutex::new(BTreeMap::new()),
            holds: Mutex::new(HashMap::new()),
            hold_tx: tokio::sync::watch::channel(None).0,
            unanswered: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Keeps `u` in the list of the latest unanswered statements.
    pub(super) fn note_unanswered(&self, u: Unanswered) {
        let mut kept = lock(&self.unanswered);
        if kept.len() == UNANSWERED_KEPT {
            kept.pop_front();
        }
        kept.push_back(u);
    }

    /// The listener connection `id` came in on.
    pub fn listener(&self, id: u32) -> Option<&'static str> {
        lock(&self.conns).get(&id).map(|e| e.listener)
    }

    /// The latest statements the server could not answer, oldest first.
    pub fn unanswered(&self) -> Vec<Unanswered> {
        lock(&self.unanswered).iter().cloned().collect()
    }

    /// Connections open now (`Threads_connected`).
    pub fn connection_count(&self) -> usize {
        lock(&self.conns).len()
    }

    /// The most authenticated sessions at once since start.
    pub fn max_used_sessions(&self) -> u32 {
        self.max_used.load(Ordering::Relaxed)
    }

    /// Authenticated sessions now.
    pub fn session_count(&self) -> u32 {
        self.sessions.load(Ordering::Acquire)
    }

    /// Registers a new connection of `listener` from `peer`: its id and activity.
    pub(super) fn register_conn(
        &self,
        cancel: CancellationToken,
        peer: SocketAddr,
        listener: &'static str,
    ) -> (u32, Arc<activity::Activity>) {
        let id = self.next_conn_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(activity::Activity::new(peer.to_string()));
        lock(&self.conns).insert(
            id,
            ConnEntry {
                cancel,
                interrupt: Arc::default(),
                dump_server_id: None,
                activity: activity.clone(),
                listener,
            },
        );
        (id, activity)
    }

    /// What every connection is doing, by connection id.
    pub fn processes(&self) -> Vec<activity::ProcessRow> {
        let activities: Vec<(u32, Arc<activity::Activity>)> = lock(&self.conns)
            .iter()
            .map(|(id, e)| (*id, e.activity.clone()))
            .collect();
        let mut rows: Vec<activity::ProcessRow> =
            activities.iter().map(|(id, a)| a.row(*id)).collect();
        rows.sort_by_key(|r| r.id);
        rows
    }

    /// Admits one more authenticated session, unless `max_connections` are open; the
    /// returned guard gives the place back.
    pub(crate) fn admit_session(self: &Arc<Self>) -> Option<SessionSlot> {
        let max = self.max_connections;
        self.sessions
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|n| {
                self.max_used.fetch_max(n + 1, Ordering::Relaxed);
                SessionSlot(self.clone())
            })
    }

    /// True when no session could be admitted now.
    pub(crate) fn sessions_full(&self) -> bool {
        self.sessions.load(Ordering::Acquire) >= self.max_connections
    }

    pub(super) fn unregister_conn(&self, id: u32) {
        lock(&self.conns).remove(&id);
        lock(&self.replicas).remove(&id);
        self.set_hold(id, None);
    }

    /// Records the snapshot timestamp connection `id` reads at (`None`: none).
    pub(crate) fn set_hold(&self, id: u32, ts: Option<u64>) {
        let mut holds = lock(&self.holds);
        match ts {
            Some(t) => holds.insert(id, t),
            None => holds.remove(&id),
        };
        let oldest = holds.values().min().copied();
        self.hold_tx.send_if_modified(|cur| {
            let changed = *cur != oldest;
            *cur = oldest;
            changed
        });
    }

    /// A watch of the oldest snapshot timestamp an open session reads at: the upstream's GC
    /// must keep history from it on while it is set.
    pub fn snapshot_hold(&self) -> tokio::sync::watch::Receiver<Option<u64>> {
        self.hold_tx.subscribe()
    }

    /// The `KILL QUERY` flag of connection `id` (a fresh one if it is not registered).
    pub fn interrupt_flag(&self, id: u32) -> Arc<std::sync::atomic::AtomicBool> {
        lock(&self.conns)
            .get(&id)
            .map(|e| e.interrupt.clone())
            .unwrap_or_default()
    }

    /// `KILL QUERY id`: the connection's running statement stops with 1317, the connection
    /// stays. False if there is no such connection.
    pub fn kill_query(&self, id: u32) -> bool {
        match lock(&self.conns).get(&id) {
            Some(e) => {
                e.interrupt.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// `KILL id`: cancels the connection. False if there is no such connection.
    pub fn kill(&self, id: u32) -> bool {
        match lock(&self.conns).get(&id) {
            Some(e) => {
                e.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Marks `id` as dumping for replica `server_id` and ends any older dump of the same
    /// non-zero server id (MySQL's "zombie dump thread" rule).
    pub(super) fn start_dump(&self, id: u32, server_id: u32, gtid: bool) {
        let mut conns = lock(&self.conns);
        if server_id != 0 {
            for (other, e) in conns.iter() {
                if *other != id && e.dump_server_id == Some(server_id) {
                    debug!(
                        conn = other,
                        server_id, "ending older dump of the same replica"
                    );
                    e.cancel.cancel();
                }
            }
        }
        if let Some(e) = conns.get_mut(&id) {
            e.dump_server_id = Some(server_id);
            e.activity.start_dump(server_id, gtid);
        }
    }

    pub(super) fn register_replica(&self, id: u32, info: RegisterSlave, uuid: String) {
        lock(&self.replicas).insert(
            id,
            Registration {
                connection_id: id,
                info,
                uuid,
            },
        );
    }

    /// Server ids of the dumps running now, one per dump session.
    pub fn dump_server_ids(&self) -> Vec<u32> {
        lock(&self.conns)
            .values()
            .filter_map(|e| e.dump_server_id)
            .collect()
    }

    /// Replicas registered on live connections.
    pub fn replicas(&self) -> Vec<Registration> {
        lock(&self.replicas).values().cloned().collect()
    }
}

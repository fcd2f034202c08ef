//! The state every service and task shares: the core, the per-connection queues, and the
//! routing of core outputs to those queues.
//!
//! # Why one `std::sync::Mutex` and not an actor task
//!
//! Every core call is short, synchronous and never awaits, and most callers (unary RPCs, the
//! transaction API) need its answer at once; an actor would turn each of them into a
//! command + oneshot round trip without adding any concurrency, since the core is a single
//! state machine anyway. What matters is **ordering**: the outputs of one core call must reach
//! each connection queue before the outputs of the next call (a COMMIT row must never overtake
//! the resolved ts computed after it, nor the reverse). So the lock covers both the core call
//! and [`State::dispatch`], which only pushes into in-memory queues without blocking. The lock
//! is never held across `.await`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tibinlog_proto::cdcpb::{self, event};
use tokio::sync::Notify;

use super::cdc_stream::{ConnSink, MemoryQuota};
use crate::sim::cdc::{ConnId, DownstreamId, RegionFaults};
use crate::sim::core::{SimCore, StoreOutput};

/// The mutable part, behind one lock.
#[derive(Debug)]
pub struct State {
    /// The simulated cluster.
    pub core: SimCore,
    /// Open streams by `(store, conn)`.
    pub sinks: HashMap<(u64, ConnId), ConnSink>,
    /// Faults set per region through the shell (the core only takes whole sets).
    pub faults: HashMap<u64, RegionFaults>,
}

/// Everything shared between the servers, the driver and the [`super::SimCluster`] handle.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<State>,
    /// PD cluster id.
    pub cluster_id: u64,
    next_conn: AtomicU64,
    /// Wakes the driver when a registration may have queued a scan.
    pub scan_kick: Notify,
    /// Store-wide sink quotas.
    pub quotas: HashMap<u64, Arc<MemoryQuota>>,
    /// Stream-slowing fault per store: microseconds of delay before each message.
    pub stream_delay_us: HashMap<u64, Arc<AtomicU64>>,
    /// PD's members and which one leads.
    pub pd: PdMembers,
    /// Pairs returned by `KvScan` since start (TiKV counts them in its scan details): how
    /// much of a table a read went through.
    pub scanned_pairs: AtomicU64,
}

/// One PD member as `GetMembers` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdMember {
    pub id: u64,
    pub name: String,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

/// The PD members that are up and the leader among them. Every member answers `GetMembers`
/// (and `GetClusterInfo`) alike; the others refuse every other call with `UNAVAILABLE` "not
/// leader", as PD followers do, and a leader change ends the old leader's TSO streams.
#[derive(Debug)]
pub struct PdMembers {
    up: Mutex<Vec<PdMember>>,
    leader: tokio::sync::watch::Sender<u64>,
}

impl Default for PdMembers {
    fn default() -> Self {
        PdMembers {
            up: Mutex::new(Vec::new()),
            leader: tokio::sync::watch::channel(0).0,
        }
    }
}

impl PdMembers {
    fn up(&self) -> MutexGuard<'_, Vec<PdMember>> {
        self.up.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The members that are up, in id order.
    pub fn members(&self) -> Vec<PdMember> {
        self.up().clone()
    }

    /// The leader's member id (0: none).
    pub fn leader(&self) -> u64 {
        *self.leader.borrow()
    }

    /// Watches leader changes.
    pub fn watch_leader(&self) -> tokio::sync::watch::Receiver<u64> {
        self.leader.subscribe()
    }

    /// A member comes up; the first one leads.
    pub fn join(&self, m: PdMember) {
        let mut up = self.up();
        up.retain(|x| x.id != m.id);
        up.push(m);
        up.sort_by_key(|x| x.id);
        if self.leader() == 0 {
            self.leader.send_replace(up[0].id);
        }
    }

    /// A member goes down; if it led, the lowest other member is elected.
    pub fn leave(&self, id: u64) {
        let mut up = self.up();
        up.retain(|x| x.id != id);
        if self.leader() == id {
            self.leader.send_replace(up.first().map_or(0, |m| m.id));
        }
    }

    /// Moves the leadership to member `id`; false if it is not up.
    pub fn transfer(&self, id: u64) -> bool {
        let up = self.up();
        if !up.iter().any(|m| m.id == id) {
            return false;
        }
        self.leader.send_replace(id);
        true
    }
}

fn congested_event(id: DownstreamId) -> cdcpb::Event {
    cdcpb::Event {
        region_id: id.region_id,
        request_id: id.request_id,
        event: Some(event::Event::Error(cdcpb::Error {
            congested: Some(cdcpb::Congested {
                region_id: id.region_id,
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

impl State {
    /// Routes core outputs to their connection queues, in order. A change event that does not
    /// fit the store's quota stops its subscription with a forced `Error{congested}`; later
    /// events of that subscription in the same batch are dropped (nothing follows an error).
    pub fn dispatch(&mut self, outputs: Vec<StoreOutput>) {
        let mut cancelled: HashSet<(u64, DownstreamId)> = HashSet::new();
        for StoreOutput { store_id, output } in outputs {
            let conn = output.conn;
            let Some(sink) = self.sinks.get(&(store_id, conn)).cloned() else {
                continue; // the stream is gone
            };
            let cdcpb::ChangeDataEvent {
                events,
                resolved_ts,
            } = output.event;
            if let Some(r) = resolved_ts {
                // Over quota: dropped; the next tick sends it again.
                let _ = sink.try_send_resolved(r);
            }
            for ev in events {
                let id = DownstreamId {
                    conn,
                    request_id: ev.request_id,
                    region_id: ev.region_id,
                };
                if cancelled.contains(&(store_id, id)) {
                    continue;
                }
                match ev.event {
                    Some(event::Event::Error(_)) => sink.force_send_event(ev),
                    Some(event::Event::ResolvedTs(_)) => {
                        let _ = sink.try_send_event(ev);
                    }
                    _ => {
                        if sink.try_send_event(ev).is_err() {
                            cancelled.insert((store_id, id));
                            if let Ok(ep) = self.core.endpoint(store_id) {
                                // Its region_not_found events are replaced by `congested`.
                                let _ = ep.deregister(conn, id.request_id, id.region_id);
                            }
                            sink.force_send_event(congested_event(id));
                        }
                    }
                }
            }
        }
    }
}

impl Shared {
    /// Wraps a core; `stores` get a quota of `quota_bytes` each.
    pub fn new(core: SimCore, cluster_id: u64, stores: &[u64], quota_bytes: usize) -> Self {
        Self {
            state: Mutex::new(State {
                core,
                sinks: HashMap::new(),
                faults: HashMap::new(),
            }),
            cluster_id,
            next_conn: AtomicU64::new(1),
            scan_kick: Notify::new(),
            quotas: stores
                .iter()
                .map(|&s| (s, Arc::new(MemoryQuota::new(quota_bytes))))
                .collect(),
            stream_delay_us: stores
                .iter()
                .map(|&s| (s, Arc::new(AtomicU64::new(0))))
                .collect(),
            pd: PdMembers::default(),
            scanned_pairs: AtomicU64::new(0),
        }
    }

    /// Locks the state (a poisoned lock is taken over: the core has no half-done updates,
    /// every core call validates before it applies).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs a core call and dispatches its outputs under the same lock.
    pub fn apply<R, E>(
        &self,
        f: impl FnOnce(&mut SimCore) -> Result<(R, Vec<StoreOutput>), E>,
    ) -> Result<R, E> {
        let mut st = self.lock();
        let (r, out) = f(&mut st.core)?;
        st.dispatch(out);
        Ok(r)
    }

    /// A fresh connection id, unique over all stores.
    pub fn next_conn_id(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// True while the store serves.
    pub fn store_up(&self, store_id: u64) -> bool {
        self.lock()
            .core
            .cluster
            .store(store_id)
            .is_some_and(|s| s.up)
    }
}

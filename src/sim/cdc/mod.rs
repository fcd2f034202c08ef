//! The per-store TiKV CDC endpoint as a pure state machine (no I/O).
//!
//! In: stream requests ([`CdcEndpoint::on_request`]), applied write batches
//! ([`CdcEndpoint::on_write_batch`]), region changes ([`CdcEndpoint::on_admin`]), min-ts ticks
//! ([`CdcEndpoint::on_min_ts`]) and scan steps driven by the shell. Out: [`Output`]s, each one
//! `ChangeDataEvent` for one connection.
//!
//! # Downstream state machine (TiKV's `components/cdc/src/delegate.rs`)
//!
//! ```text
//! register --checks ok--> Uninitialized --start_scan (snapshot)--> Initializing --last scan step--> Normal
//!     |                        |                                        |                             |
//!     +--check fails--+        +----------- error / deregister / admin event / conn closed -----------+--> Stopped (removed)
//!                     v
//!              one Error event
//! ```
//! Realtime rows are dropped while Uninitialized (the snapshot will contain them) and delivered
//! from Initializing on, interleaved with scan rows; resolved ts only reaches Normal downstreams.
//! After an error event nothing more is sent for that downstream.

mod resolved;
mod rows;

use std::collections::{BTreeSet, HashMap, VecDeque};

use tibinlog_proto::cdcpb::{self, change_data_request, event};
use tibinlog_proto::{errorpb, metapb};

use super::mvcc::{MvccStore, WriteBatch};
use super::region::{encode_key, raw_lower_bound, AdminEvent, Cluster};
use super::ts::{SimRng, Ts};

pub use resolved::{batch_groups, LockTracker};
pub use rows::{
    initialized_row, passes_txn_source, realtime_rows, row_bytes, scan_rows, KeyRange, RealtimeRow,
    MAX_ENTRIES_BYTES,
};

/// Identifies a gRPC stream (connection) on a store.
pub type ConnId = u64;

/// Endpoint configuration (TiKV `CdcConfig` defaults).
#[derive(Debug, Clone)]
pub struct CdcConfig {
    /// PD cluster id, compared with `header.cluster_id`.
    pub cluster_id: u64,
    /// `incremental-scan-concurrency-limit`: pending scans beyond this are refused.
    pub scan_pending_limit: usize,
    /// `incremental-scan-concurrency`: scans running at once per store.
    pub scan_concurrency: usize,
    /// Bytes of rows one scan step of one scan sends (in 32 KiB `Entries` events of one
    /// message): TiKV's `incremental-scan-speed-limit` (128 MiB/s) over the shell's step
    /// interval (2 ms).
    pub scan_step_bytes: usize,
}

/// TiKV's `incremental-scan-speed-limit`.
pub const INCREMENTAL_SCAN_SPEED_LIMIT: usize = 128 << 20;

impl Default for CdcConfig {
    fn default() -> Self {
        Self {
            cluster_id: 0,
            scan_pending_limit: 10_000,
            scan_concurrency: 6,
            scan_step_bytes: INCREMENTAL_SCAN_SPEED_LIMIT / 500,
        }
    }
}

/// One message to send on a connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Target connection.
    pub conn: ConnId,
    /// The message.
    pub event: cdcpb::ChangeDataEvent,
}

/// A subscription: `(connection, request_id, region_id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DownstreamId {
    /// Connection.
    pub conn: ConnId,
    /// Client-chosen request id.
    pub request_id: u64,
    /// Region.
    pub region_id: u64,
}

/// Faults the shell can switch on per region; random choices come from the RNG passed in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegionFaults {
    /// Resolved ts stops advancing (as if a lock were held open).
    pub stall_resolved_ts: bool,
    /// Probability that a tick sends nothing for the region.
    pub drop_resolved_ts: f64,
    /// The min ts used for the region lags the TSO by this many ms (a delayed resolved ts).
    pub resolved_ts_lag_ms: u64,
    /// Probability that a scan step makes no progress, so realtime rows (a COMMIT before the
    /// scan's PREWRITE) overtake the scan.
    pub stall_scan: f64,
}

/// Per-downstream state; `Stopped` downstreams are removed from the endpoint.
#[derive(Debug, Clone, PartialEq)]
enum DownstreamState {
    Uninitialized,
    Initializing { rows: VecDeque<event::Row> },
    Normal { last_resolved: Ts },
}

#[derive(Debug, Clone)]
struct Downstream {
    epoch_version: u64,
    checkpoint_ts: Ts,
    range: KeyRange,
    filter_loop: bool,
    state: DownstreamState,
}

#[derive(Debug, Clone, Copy, Default)]
struct Conn {
    /// From the first request's `ticdc_version`: None until then.
    version: Option<(u64, u64, u64)>,
    multiplexing: bool,
}

impl Conn {
    fn batch_resolved_ts(&self) -> bool {
        self.version.unwrap_or((0, 0, 0)) >= (4, 0, 8)
    }
    fn validate_cluster_id(&self) -> bool {
        self.version.unwrap_or((0, 0, 0)) >= (5, 3, 0)
    }
}

#[derive(Debug, Clone, Default)]
struct Delegate {
    tracker: LockTracker,
    downstreams: Vec<DownstreamId>,
}

/// The CDC endpoint of one store.
#[derive(Debug, Clone)]
pub struct CdcEndpoint {
    store_id: u64,
    config: CdcConfig,
    conns: HashMap<ConnId, Conn>,
    downstreams: HashMap<DownstreamId, Downstream>,
    delegates: HashMap<u64, Delegate>,
    pending_scans: VecDeque<DownstreamId>,
    /// Downstreams in `Initializing` (kept beside `downstreams`, so that a scan step or a
    /// registration does not walk every region the store captures).
    scanning: BTreeSet<DownstreamId>,
    /// Downstreams not yet `Normal` (TiKV's pending-scan count).
    unready: usize,
    faults: HashMap<u64, RegionFaults>,
}

/// Parses strict `major.minor.patch` (anything else → 0.0.0, as TiKV does).
fn parse_version(v: &str) -> (u64, u64, u64) {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<Option<u64>> = core.split('.').map(|p| p.parse().ok()).collect();
    match parts.as_slice() {
        [Some(a), Some(b), Some(c)] => (*a, *b, *c),
        _ => (0, 0, 0),
    }
}

fn error_event(id: DownstreamId, err: cdcpb::Error) -> cdcpb::Event {
    cdcpb::Event {
        region_id: id.region_id,
        request_id: id.request_id,
        event: Some(event::Event::Error(err)),
        ..Default::default()
    }
}

fn entries_event(id: DownstreamId, rows: Vec<event::Row>) -> cdcpb::Event {
    cdcpb::Event {
        region_id: id.region_id,
        request_id: id.request_id,
        event: Some(event::Event::Entries(event::Entries { entries: rows })),
        ..Default::default()
    }
}

fn out_events(conn: ConnId, events: Vec<cdcpb::Event>) -> Output {
    Output {
        conn,
        event: cdcpb::ChangeDataEvent {
            events,
            resolved_ts: None,
        },
    }
}

fn epoch_not_match(regions: Vec<metapb::Region>) -> cdcpb::Error {
    cdcpb::Error {
        epoch_not_match: Some(errorpb::EpochNotMatch {
            current_regions: regions,
        }),
        ..Default::default()
    }
}

fn region_not_found(region_id: u64) -> cdcpb::Error {
    cdcpb::Error {
        region_not_found: Some(errorpb::RegionNotFound { region_id }),
        ..Default::default()
    }
}

fn not_leader(region_id: u64, leader: Option<metapb::Peer>) -> cdcpb::Error {
    cdcpb::Error {
        not_leader: Some(errorpb::NotLeader { region_id, leader }),
        ..Default::default()
    }
}

impl CdcEndpoint {
    /// An endpoint for `store_id`.
    pub fn new(store_id: u64, config: CdcConfig) -> Self {
        Self {
            store_id,
            config,
            conns: HashMap::new(),
            downstreams: HashMap::new(),
            delegates: HashMap::new(),
            pending_scans: VecDeque::new(),
            scanning: BTreeSet::new(),
            unready: 0,
            faults: HashMap::new(),
        }
    }

    /// The store this endpoint belongs to.
    pub fn store_id(&self) -> u64 {
        self.store_id
    }

    /// A stream opened; `multiplexing` when it is `EventFeedV2` with `stream-multiplexing`.
    pub fn open_conn(&mut self, conn: ConnId, multiplexing: bool) {
        self.conns.insert(
            conn,
            Conn {
                version: None,
                multiplexing,
            },
        );
    }

    /// The stream closed: every downstream on it is dropped silently.
    pub fn close_conn(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        let ids: Vec<DownstreamId> = self
            .downstreams
            .keys()
            .filter(|d| d.conn == conn)
            .copied()
            .collect();
        for id in ids {
            self.remove_downstream(id);
        }
    }

    /// The store stopped: all connections and subscriptions are gone.
    pub fn reset(&mut self) {
        self.conns.clear();
        self.downstreams.clear();
        self.delegates.clear();
        self.pending_scans.clear();
        self.scanning.clear();
        self.unready = 0;
    }

    /// Sets faults for a region (replacing earlier ones).
    pub fn set_faults(&mut self, region_id: u64, faults: RegionFaults) {
        self.faults.insert(region_id, faults);
    }

    /// Downstreams registered and not stopped.
    pub fn downstream_count(&self) -> usize {
        self.downstreams.len()
    }

    /// True if some downstream captures `region_id` here (a write batch of any other region is
    /// ignored by [`CdcEndpoint::on_write_batch`]).
    pub fn captures(&self, region_id: u64) -> bool {
        self.delegates.contains_key(&region_id)
    }

    /// True if any region is captured here.
    pub fn is_capturing(&self) -> bool {
        !self.delegates.is_empty()
    }

    /// True if the downstream reached Normal.
    pub fn is_normal(&self, id: DownstreamId) -> bool {
        matches!(
            self.downstreams.get(&id).map(|d| &d.state),
            Some(DownstreamState::Normal { .. })
        )
    }

    /// Downstreams currently running their incremental scan.
    pub fn initializing(&self) -> Vec<DownstreamId> {
        self.scanning.iter().copied().collect()
    }

    fn remove_downstream(&mut self, id: DownstreamId) -> Option<Downstream> {
        let d = self.downstreams.remove(&id)?;
        if !matches!(d.state, DownstreamState::Normal { .. }) {
            self.unready -= 1;
        }
        self.scanning.remove(&id);
        self.pending_scans.retain(|p| *p != id);
        if let Some(del) = self.delegates.get_mut(&id.region_id) {
            del.downstreams.retain(|x| *x != id);
            if del.downstreams.is_empty() {
                self.delegates.remove(&id.region_id);
            }
        }
        Some(d)
    }

    fn stop_with_error(&mut self, id: DownstreamId, err: cdcpb::Error, out: &mut Vec<Output>) {
        if self.remove_downstream(id).is_some() {
            out.push(out_events(id.conn, vec![error_event(id, err)]));
        }
    }

    /// One request from a stream: Register (also when the oneof is unset), Deregister; the
    /// obsolete NotifyTxnStatus is ignored.
    pub fn on_request(
        &mut self,
        conn: ConnId,
        req: &cdcpb::ChangeDataRequest,
        cluster: &Cluster,
    ) -> Vec<Output> {
        let c = self.conns.entry(conn).or_default();
        if c.version.is_none() {
            let v = req
                .header
                .as_ref()
                .map(|h| h.ticdc_version.as_str())
                .unwrap_or("");
            c.version = Some(parse_version(v));
        }
        match &req.request {
            None | Some(change_data_request::Request::Register(_)) => {
                self.register(conn, req, cluster)
            }
            Some(change_data_request::Request::Deregister(_)) => {
                self.deregister(conn, req.request_id, req.region_id)
            }
            Some(change_data_request::Request::NotifyTxnStatus(_)) => Vec::new(),
        }
    }

    fn register(
        &mut self,
        conn: ConnId,
        req: &cdcpb::ChangeDataRequest,
        cluster: &Cluster,
    ) -> Vec<Output> {
        let id = DownstreamId {
            conn,
            request_id: req.request_id,
            region_id: req.region_id,
        };
        let c = self.conns.get(&conn).copied().unwrap_or_default();
        let fail = |err: cdcpb::Error| vec![out_events(conn, vec![error_event(id, err)])];
        // 1. cluster id
        let req_cluster = req.header.as_ref().map_or(0, |h| h.cluster_id);
        if c.validate_cluster_id() && req_cluster != self.config.cluster_id {
            return fail(cdcpb::Error {
                cluster_id_mismatch: Some(cdcpb::ClusterIdMismatch {
                    current: self.config.cluster_id,
                    request: req_cluster,
                }),
                ..Default::default()
            });
        }
        // 2. kv_api: TiDB only (API v1: RawKV needs API v2, TxnKV is unsupported).
        if req.kv_api != change_data_request::KvApi::TiDb as i32 {
            return fail(cdcpb::Error {
                compatibility: Some(cdcpb::Compatibility {
                    required_version: "6.2.0".into(),
                }),
                ..Default::default()
            });
        }
        // 3. pending scan limit
        if self.unready >= self.config.scan_pending_limit {
            return fail(cdcpb::Error {
                server_is_busy: Some(errorpb::ServerIsBusy {
                    reason: "too many pending incremental scans".into(),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        // 4. region on this store
        let Some(region) = cluster
            .region(req.region_id)
            .filter(|r| r.has_peer_on(self.store_id))
        else {
            return fail(region_not_found(req.region_id));
        };
        // 5. duplicate (request_id, region_id) on this connection
        if self.downstreams.contains_key(&id) {
            return fail(cdcpb::Error {
                duplicate_request: Some(cdcpb::DuplicateRequest {
                    region_id: req.region_id,
                }),
                ..Default::default()
            });
        }
        // 6. epoch version, when the region is already captured here
        let req_version = req.region_epoch.as_ref().map_or(0, |e| e.version);
        if self.delegates.contains_key(&req.region_id) && req_version != region.version() {
            return fail(epoch_not_match(vec![region.region.clone()]));
        }
        let range = KeyRange {
            start: req.start_key.clone(),
            end: req.end_key.clone(),
        };
        self.downstreams.insert(
            id,
            Downstream {
                epoch_version: req_version,
                checkpoint_ts: Ts(req.checkpoint_ts),
                range,
                filter_loop: req.filter_loop,
                state: DownstreamState::Uninitialized,
            },
        );
        self.unready += 1;
        self.pending_scans.push_back(id);
        Vec::new()
    }

    /// Deregister (`region_id == 0`: every region of `request_id`): each dropped downstream
    /// gets a `region_not_found` error.
    pub fn deregister(&mut self, conn: ConnId, request_id: u64, region_id: u64) -> Vec<Output> {
        let mut ids: Vec<DownstreamId> = self
            .downstreams
            .keys()
            .filter(|d| {
                d.conn == conn
                    && d.request_id == request_id
                    && (region_id == 0 || d.region_id == region_id)
            })
            .copied()
            .collect();
        ids.sort_unstable();
        let mut out = Vec::new();
        for id in ids {
            self.stop_with_error(id, region_not_found(id.region_id), &mut out);
        }
        out
    }

    /// Takes the next pending registration's snapshot if a scan permit is free: checks
    /// leadership and epoch (the raft read), then computes the scan rows and moves the
    /// downstream to Initializing. Returns `None` when nothing could start.
    pub fn start_next_scan(
        &mut self,
        cluster: &Cluster,
        mvcc: &MvccStore,
    ) -> Option<(DownstreamId, Vec<Output>)> {
        if self.scanning.len() >= self.config.scan_concurrency {
            return None;
        }
        let id = self.pending_scans.pop_front()?;
        let mut out = Vec::new();
        let Some(region) = cluster
            .region(id.region_id)
            .filter(|r| r.has_peer_on(self.store_id))
        else {
            self.stop_with_error(id, region_not_found(id.region_id), &mut out);
            return Some((id, out));
        };
        if region.leader_store() != Some(self.store_id) {
            self.stop_with_error(id, not_leader(id.region_id, region.leader), &mut out);
            return Some((id, out));
        }
        let Some(d) = self.downstreams.get(&id) else {
            return Some((id, out));
        };
        if d.epoch_version != region.version() {
            self.stop_with_error(id, epoch_not_match(vec![region.region.clone()]), &mut out);
            return Some((id, out));
        }
        let region_range = KeyRange {
            start: region.region.start_key.clone(),
            end: region.region.end_key.clone(),
        };
        let range = d.range.intersect(&region_range);
        let rows = scan_rows(mvcc, &range, d.checkpoint_ts, d.filter_loop);
        if let Some(d) = self.downstreams.get_mut(&id) {
            d.range = range;
            d.state = DownstreamState::Initializing { rows: rows.into() };
            self.scanning.insert(id);
        }
        let delegate = self.delegates.entry(id.region_id).or_insert_with(|| {
            let mut tracker = LockTracker::default();
            for (key, lock) in locks_in(mvcc, &region_range) {
                if matches!(
                    lock.lock_type,
                    super::mvcc::LockType::Put | super::mvcc::LockType::Delete
                ) {
                    tracker.track(key, lock.start_ts);
                }
            }
            Delegate {
                tracker,
                downstreams: Vec::new(),
            }
        });
        delegate.downstreams.push(id);
        Some((id, out))
    }

    /// Sends the next chunks (`Entries` events of ≤ 32 KiB of rows, about
    /// [`CdcConfig::scan_step_bytes`] in all, in one message) of a running scan; the last chunk
    /// ends with INITIALIZED and moves the downstream to Normal. With the `stall_scan` fault the
    /// step may send nothing.
    pub fn scan_step(&mut self, id: DownstreamId, rng: &mut SimRng) -> Vec<Output> {
        let stall = self.faults.get(&id.region_id).map_or(0.0, |f| f.stall_scan);
        if rng.chance(stall) {
            return Vec::new();
        }
        let Some(d) = self.downstreams.get_mut(&id) else {
            return Vec::new();
        };
        let DownstreamState::Initializing { rows } = &mut d.state else {
            return Vec::new();
        };
        let mut events = Vec::new();
        let mut step_bytes = 0;
        loop {
            let mut chunk = Vec::new();
            let mut bytes = 0;
            while let Some(r) = rows.front() {
                let n = row_bytes(r);
                if !chunk.is_empty() && bytes + n > MAX_ENTRIES_BYTES {
                    break;
                }
                bytes += n;
                chunk.extend(rows.pop_front());
            }
            step_bytes += bytes;
            if rows.is_empty() {
                chunk.push(initialized_row());
                events.push(entries_event(id, chunk));
                d.state = DownstreamState::Normal {
                    last_resolved: Ts::ZERO,
                };
                self.scanning.remove(&id);
                self.unready -= 1;
                break;
            }
            events.push(entries_event(id, chunk));
            if step_bytes >= self.config.scan_step_bytes {
                break;
            }
        }
        vec![out_events(id.conn, events)]
    }

    /// Runs a whole scan to completion (convenience for tests and simple shells).
    pub fn finish_scan(&mut self, id: DownstreamId, rng: &mut SimRng) -> Vec<Output> {
        let mut out = Vec::new();
        while matches!(
            self.downstreams.get(&id).map(|d| &d.state),
            Some(DownstreamState::Initializing { .. })
        ) {
            out.extend(self.scan_step(id, rng));
        }
        out
    }

    /// An applied raft write batch of `region_id` (its keys all inside the region); `mvcc` is
    /// the state after the batch. Updates the lock tracker and sends rows to every
    /// Initializing or Normal downstream whose range contains them.
    pub fn on_write_batch(
        &mut self,
        region_id: u64,
        batch: &WriteBatch,
        mvcc: &MvccStore,
    ) -> Vec<Output> {
        let Some(del) = self.delegates.get_mut(&region_id) else {
            return Vec::new();
        };
        del.tracker.on_batch(batch);
        let rows = realtime_rows(batch, mvcc);
        if rows.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let live: Vec<(DownstreamId, &Downstream)> = del
            .downstreams
            .iter()
            .filter_map(|id| self.downstreams.get(id).map(|d| (*id, d)))
            .filter(|(_, d)| !matches!(d.state, DownstreamState::Uninitialized))
            .collect();
        let n = live.len();
        let mut rows = Some(rows);
        for (i, (id, d)) in live.into_iter().enumerate() {
            let keep = |r: &RealtimeRow| {
                d.range.contains(&r.encoded_key)
                    && passes_txn_source(r.row.txn_source, d.filter_loop)
            };
            // The last downstream takes the rows; earlier ones get copies.
            let picked: Vec<event::Row> = if i + 1 == n {
                rows.take()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|r| keep(r))
                    .map(|r| r.row)
                    .collect()
            } else {
                rows.iter()
                    .flatten()
                    .filter(|r| keep(r))
                    .map(|r| r.row.clone())
                    .collect()
            };
            if !picked.is_empty() {
                out.push(out_events(id.conn, vec![entries_event(id, picked)]));
            }
        }
        out
    }

    /// A region change seen by this store. Every affected downstream gets one error and stops:
    /// split → epoch_not_match with the new regions; merge → epoch_not_match without regions
    /// (source and target); leader lost → not_leader; peer removed → region_not_found.
    pub fn on_admin(&mut self, ev: &AdminEvent) -> Vec<Output> {
        let mut out = Vec::new();
        let mut stop = |me: &mut Self, region: u64, err: cdcpb::Error| {
            let mut ids: Vec<DownstreamId> = me
                .downstreams
                .keys()
                .filter(|d| d.region_id == region)
                .copied()
                .collect();
            ids.sort_unstable();
            for id in ids {
                me.stop_with_error(id, err.clone(), &mut out);
            }
        };
        match ev {
            AdminEvent::Split {
                region_id, regions, ..
            } => stop(self, *region_id, epoch_not_match(regions.clone())),
            AdminEvent::Merge { source, target, .. } => {
                stop(self, *source, epoch_not_match(Vec::new()));
                stop(self, *target, epoch_not_match(Vec::new()));
            }
            AdminEvent::LeaderChanged {
                region_id,
                old_store,
                new_leader,
            } if *old_store == self.store_id => {
                stop(self, *region_id, not_leader(*region_id, *new_leader))
            }
            AdminEvent::PeerRemoved {
                region_id,
                store_id,
            } if *store_id == self.store_id => stop(self, *region_id, region_not_found(*region_id)),
            _ => {}
        }
        out
    }

    /// A min-ts tick with `min_ts` fetched from PD (the caller has already raised the store's
    /// max_ts to it). Computes each captured region's resolved ts and sends it to Normal
    /// downstreams, batched per connection (or per request_id with multiplexing), or as
    /// per-region events for clients older than 4.0.8.
    ///
    /// Invariant: the value sent to a downstream never decreases.
    pub fn on_min_ts(&mut self, min_ts: Ts, rng: &mut SimRng) -> Vec<Output> {
        let mut per_region: Vec<(u64, Ts)> = Vec::with_capacity(self.delegates.len());
        let mut region_ids: Vec<u64> = self.delegates.keys().copied().collect();
        region_ids.sort_unstable();
        for region_id in region_ids {
            let f = self.faults.get(&region_id).cloned().unwrap_or_default();
            let Some(del) = self.delegates.get_mut(&region_id) else {
                continue;
            };
            let resolved = if f.stall_resolved_ts {
                del.tracker.resolved_ts()
            } else {
                let lagged = Ts::compose(
                    min_ts.physical_ms().saturating_sub(f.resolved_ts_lag_ms),
                    min_ts.logical(),
                );
                del.tracker.resolve(if f.resolved_ts_lag_ms > 0 {
                    lagged
                } else {
                    min_ts
                })
            };
            if rng.chance(f.drop_resolved_ts) || resolved.is_zero() {
                continue;
            }
            per_region.push((region_id, resolved));
        }
        // Group Normal downstreams: (conn, group request id) -> [(region, ts)].
        let mut groups: HashMap<(ConnId, u64), Vec<(u64, Ts)>> = HashMap::new();
        let mut compat: Vec<(DownstreamId, Ts)> = Vec::new();
        for (region_id, resolved) in per_region {
            let Some(del) = self.delegates.get(&region_id) else {
                continue;
            };
            for id in &del.downstreams {
                let Some(d) = self.downstreams.get(id) else {
                    continue;
                };
                let DownstreamState::Normal { last_resolved } = d.state else {
                    continue;
                };
                let ts = resolved.max(last_resolved);
                let c = self.conns.get(&id.conn).copied().unwrap_or_default();
                if c.multiplexing {
                    groups
                        .entry((id.conn, id.request_id))
                        .or_default()
                        .push((id.region_id, ts));
                } else if c.batch_resolved_ts() {
                    groups
                        .entry((id.conn, 0))
                        .or_default()
                        .push((id.region_id, ts));
                } else {
                    compat.push((*id, ts));
                }
            }
        }
        let mut out = Vec::new();
        let mut keys: Vec<(ConnId, u64)> = groups.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let (conn, request_id) = key;
            let items = groups.remove(&key).unwrap_or_default();
            for (regions, ts) in batch_groups(items) {
                // Skip regions whose last sent value is above the group minimum: sending the
                // minimum would move their resolved ts backwards on the wire.
                let mut sent = Vec::with_capacity(regions.len());
                for region_id in regions {
                    // The region's downstreams, from its delegate (a scan that started put
                    // them there; only Normal ones are updated below).
                    let ids: Vec<DownstreamId> = self
                        .delegates
                        .get(&region_id)
                        .map(|del| {
                            del.downstreams
                                .iter()
                                .filter(|d| {
                                    d.conn == conn
                                        && (request_id == 0 || d.request_id == request_id)
                                })
                                .copied()
                                .collect()
                        })
                        .unwrap_or_default();
                    let mut ok = false;
                    for id in ids {
                        if let Some(DownstreamState::Normal { last_resolved }) =
                            self.downstreams.get_mut(&id).map(|d| &mut d.state)
                        {
                            if *last_resolved <= ts {
                                *last_resolved = ts;
                                ok = true;
                            }
                        }
                    }
                    if ok {
                        sent.push(region_id);
                    }
                }
                if !sent.is_empty() {
                    out.push(Output {
                        conn,
                        event: cdcpb::ChangeDataEvent {
                            events: Vec::new(),
                            resolved_ts: Some(cdcpb::ResolvedTs {
                                regions: sent,
                                ts: ts.0,
                                request_id,
                            }),
                        },
                    });
                }
            }
        }
        compat.sort_unstable_by_key(|(id, _)| *id);
        for (id, ts) in compat {
            if let Some(DownstreamState::Normal { last_resolved }) =
                self.downstreams.get_mut(&id).map(|d| &mut d.state)
            {
                *last_resolved = ts;
            }
            out.push(out_events(
                id.conn,
                vec![cdcpb::Event {
                    region_id: id.region_id,
                    request_id: id.request_id,
                    event: Some(event::Event::ResolvedTs(ts.0)),
                    ..Default::default()
                }],
            ));
        }
        out
    }
}

/// Locks whose key lies in the encoded `range`.
fn locks_in<'a>(
    mvcc: &'a MvccStore,
    range: &'a KeyRange,
) -> impl Iterator<Item = (&'a [u8], &'a super::mvcc::Lock)> + 'a {
    mvcc.entries_from(&raw_lower_bound(&range.start))
        .map(|(k, e)| (k, e, encode_key(k)))
        .take_while(|(_, _, enc)| range.end.is_empty() || enc.as_slice() < range.end.as_slice())
        .filter(|(_, _, enc)| range.contains(enc))
        .filter_map(|(k, e, _)| e.lock().map(|l| (k, l)))
}

#[cfg(test)]
mod tests;

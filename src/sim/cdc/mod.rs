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
//!
//! # Layout
//!
//! * this module: connections, registration, incremental scans, write batches, region changes;
//! * `min_ts`: the min-ts tick that sends resolved ts;
//! * `state`: the endpoint's state and configuration; `events`: the events and errors it sends;
//! * `rows`: the rows of the change stream; `resolved`: the lock tracker and resolved-ts batching.

mod events;
mod min_ts;
mod resolved;
mod rows;
mod state;

use std::collections::{BTreeSet, HashMap, VecDeque};

use tibinlog_proto::cdcpb::{self, change_data_request, event};
use tibinlog_proto::errorpb;

use super::mvcc::{MvccStore, WriteBatch};
use super::region::{encode_key, raw_lower_bound, AdminEvent, Cluster};
use super::ts::{SimRng, Ts};

pub use resolved::{batch_groups, LockTracker};
pub use rows::{
    initialized_row, passes_txn_source, realtime_rows, row_bytes, scan_rows, KeyRange, RealtimeRow,
    MAX_ENTRIES_BYTES,
};
pub use state::{
    CdcConfig, CdcEndpoint, ConnId, DownstreamId, Output, RegionFaults,
    INCREMENTAL_SCAN_SPEED_LIMIT,
};

use events::{
    entries_event, epoch_not_match, error_event, not_leader, out_events, parse_version,
    region_not_found,
};
use state::{Conn, Delegate, Downstream, DownstreamState};

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

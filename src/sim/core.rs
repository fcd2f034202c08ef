//! The synchronous simulated cluster: storage, regions, TSO, GC safe points and one CDC
//! endpoint per store, wired so that every storage write is observed by the CDC endpoint of
//! the region's leader store, exactly once per region (one raft apply batch per region).
//!
//! The async shell owns one `SimCore` (behind a mutex or in an actor task), forwards gRPC
//! requests to it and writes the returned [`StoreOutput`]s to the streams.

use std::collections::BTreeMap;
use std::sync::Arc;

use tibinlog_proto::cdcpb;

use super::cdc::{CdcConfig, CdcEndpoint, ConnId, DownstreamId, Output, RegionFaults};
use super::error::{Result, SimError};
use super::gc::{GcSafePoints, UpdateOutcome};
use super::mvcc::{MvccStore, PrewriteRequest, PrewriteResult, TxnStatus, WriteBatch};
use super::region::{encode_key, AdminEvent, Cluster};
use super::ts::{Clock, SimRng, Ts, TsoAllocator};

/// An output addressed to a connection of one store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreOutput {
    /// Store whose stream carries it.
    pub store_id: u64,
    /// The message.
    pub output: Output,
}

/// The whole simulated cluster state.
#[derive(Debug)]
pub struct SimCore {
    /// MVCC storage (shared by all stores: replicas are identical).
    pub mvcc: MvccStore,
    /// Regions and stores.
    pub cluster: Cluster,
    /// Service GC safe points (PD).
    pub gc: GcSafePoints,
    tso: TsoAllocator,
    clock: Arc<dyn Clock>,
    endpoints: BTreeMap<u64, CdcEndpoint>,
    rng: SimRng,
}

impl SimCore {
    /// A cluster with the given stores, one region, and a seeded RNG for every fault choice.
    pub fn new(
        store_ids: &[u64],
        cdc: CdcConfig,
        clock: Arc<dyn Clock>,
        seed: u64,
    ) -> Result<Self> {
        let cluster = Cluster::new(store_ids)?;
        let endpoints = store_ids
            .iter()
            .map(|&s| (s, CdcEndpoint::new(s, cdc.clone())))
            .collect();
        Ok(Self {
            mvcc: MvccStore::new(),
            cluster,
            gc: GcSafePoints::new(),
            tso: TsoAllocator::new(),
            clock,
            endpoints,
            rng: SimRng::new(seed),
        })
    }

    /// Wall-clock ms of the injected clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// PD `Tso` with `count` timestamps: the largest is returned.
    pub fn tso(&mut self, count: u32) -> Result<Ts> {
        self.tso.alloc(self.clock.now_ms(), count)
    }

    /// One timestamp.
    pub fn ts(&mut self) -> Ts {
        self.tso.alloc_one(self.clock.now_ms())
    }

    /// The CDC endpoint of a store.
    pub fn endpoint(&mut self, store_id: u64) -> Result<&mut CdcEndpoint> {
        self.endpoints
            .get_mut(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))
    }

    /// Routes an applied batch to the leader endpoint of each region it touches.
    fn observe(&mut self, batch: &WriteBatch) -> Vec<StoreOutput> {
        let mut per_region: BTreeMap<u64, (u64, WriteBatch)> = BTreeMap::new();
        for m in &batch.modifies {
            let Some(r) = self.cluster.region_by_key(&encode_key(m.key())) else {
                continue;
            };
            let Some(store) = r.leader_store() else {
                continue;
            };
            let e = per_region.entry(r.id()).or_insert_with(|| {
                (
                    store,
                    WriteBatch {
                        modifies: Vec::new(),
                        one_pc: batch.one_pc,
                    },
                )
            });
            e.1.modifies.push(m.clone());
        }
        let mut out = Vec::new();
        for (region_id, (store_id, b)) in per_region {
            if let Some(ep) = self.endpoints.get_mut(&store_id) {
                out.extend(
                    ep.on_write_batch(region_id, &b, &self.mvcc)
                        .into_iter()
                        .map(|output| StoreOutput { store_id, output }),
                );
            }
        }
        out
    }

    /// Prewrite (see [`MvccStore::prewrite`]).
    pub fn prewrite(
        &mut self,
        req: &PrewriteRequest,
    ) -> Result<(PrewriteResult, Vec<StoreOutput>)> {
        let r = self.mvcc.prewrite(req)?;
        let out = self.observe(&r.batch);
        Ok((r, out))
    }

    /// Commit.
    pub fn commit(
        &mut self,
        keys: &[Vec<u8>],
        start_ts: Ts,
        commit_ts: Ts,
    ) -> Result<Vec<StoreOutput>> {
        let b = self.mvcc.commit(keys, start_ts, commit_ts)?;
        Ok(self.observe(&b))
    }

    /// Rollback.
    pub fn rollback(&mut self, keys: &[Vec<u8>], start_ts: Ts) -> Result<Vec<StoreOutput>> {
        let b = self.mvcc.rollback(keys, start_ts)?;
        Ok(self.observe(&b))
    }

    /// Pessimistic lock acquisition.
    pub fn acquire_pessimistic_lock(
        &mut self,
        keys: &[Vec<u8>],
        primary: &[u8],
        start_ts: Ts,
        for_update_ts: Ts,
        ttl_ms: u64,
    ) -> Result<Vec<StoreOutput>> {
        let b =
            self.mvcc
                .acquire_pessimistic_lock(keys, primary, start_ts, for_update_ts, ttl_ms)?;
        Ok(self.observe(&b))
    }

    /// Large-transaction heartbeat; returns the TTL now in force.
    pub fn txn_heart_beat(
        &mut self,
        primary: &[u8],
        start_ts: Ts,
        advise_ttl_ms: u64,
    ) -> Result<(u64, Vec<StoreOutput>)> {
        let (ttl, b) = self.mvcc.txn_heart_beat(primary, start_ts, advise_ttl_ms)?;
        Ok((ttl, self.observe(&b)))
    }

    /// `KvCheckTxnStatus` with `current_ts` from the TSO.
    pub fn check_txn_status(
        &mut self,
        primary: &[u8],
        lock_ts: Ts,
        caller_start_ts: Ts,
        rollback_if_not_exist: bool,
    ) -> Result<(TxnStatus, Vec<StoreOutput>)> {
        let current = self.ts();
        let (s, b) = self.mvcc.check_txn_status(
            primary,
            lock_ts,
            caller_start_ts,
            current,
            rollback_if_not_exist,
        )?;
        Ok((s, self.observe(&b)))
    }

    /// `KvResolveLock`.
    pub fn resolve_lock(
        &mut self,
        start_ts: Ts,
        commit_ts: Ts,
        keys: Option<&[Vec<u8>]>,
    ) -> Result<Vec<StoreOutput>> {
        let b = self.mvcc.resolve_lock(start_ts, commit_ts, keys)?;
        Ok(self.observe(&b))
    }

    fn tag(store_id: u64, v: Vec<Output>) -> impl Iterator<Item = StoreOutput> {
        v.into_iter()
            .map(move |output| StoreOutput { store_id, output })
    }

    /// A stream opened on a store.
    pub fn open_conn(&mut self, store_id: u64, conn: ConnId, multiplexing: bool) -> Result<()> {
        self.endpoint(store_id)?.open_conn(conn, multiplexing);
        Ok(())
    }

    /// A stream closed.
    pub fn close_conn(&mut self, store_id: u64, conn: ConnId) -> Result<()> {
        self.endpoint(store_id)?.close_conn(conn);
        Ok(())
    }

    /// A `ChangeDataRequest` on a store's stream.
    pub fn on_cdc_request(
        &mut self,
        store_id: u64,
        conn: ConnId,
        req: &cdcpb::ChangeDataRequest,
    ) -> Result<Vec<StoreOutput>> {
        let ep = self
            .endpoints
            .get_mut(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))?;
        Ok(Self::tag(store_id, ep.on_request(conn, req, &self.cluster)).collect())
    }

    /// Starts pending scans (up to each store's permit count) and advances every running scan
    /// by one chunk. The shell calls it in its loop; writes between calls interleave with scans.
    pub fn drive_scans(&mut self) -> Vec<StoreOutput> {
        let mut out = Vec::new();
        for (&store_id, ep) in self.endpoints.iter_mut() {
            while let Some((_, o)) = ep.start_next_scan(&self.cluster, &self.mvcc) {
                out.extend(Self::tag(store_id, o));
            }
            for id in ep.initializing() {
                out.extend(Self::tag(store_id, ep.scan_step(id, &mut self.rng)));
            }
        }
        out
    }

    /// Runs one scan to its end.
    pub fn finish_scan(&mut self, store_id: u64, id: DownstreamId) -> Result<Vec<StoreOutput>> {
        let ep = self
            .endpoints
            .get_mut(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))?;
        Ok(Self::tag(store_id, ep.finish_scan(id, &mut self.rng)).collect())
    }

    /// One `min-ts-interval` tick: fetch a TSO, raise max_ts, and emit resolved ts everywhere.
    pub fn tick_resolved_ts(&mut self) -> Vec<StoreOutput> {
        let min_ts = self.ts();
        self.mvcc.update_max_ts(min_ts);
        let mut out = Vec::new();
        for (&store_id, ep) in self.endpoints.iter_mut() {
            out.extend(Self::tag(store_id, ep.on_min_ts(min_ts, &mut self.rng)));
        }
        out
    }

    /// Sets faults of a region on every store.
    pub fn set_region_faults(&mut self, region_id: u64, faults: RegionFaults) {
        for ep in self.endpoints.values_mut() {
            ep.set_faults(region_id, faults.clone());
        }
    }

    fn admin(&mut self, events: Vec<AdminEvent>) -> Vec<StoreOutput> {
        let mut out = Vec::new();
        for ev in &events {
            for (&store_id, ep) in self.endpoints.iter_mut() {
                out.extend(Self::tag(store_id, ep.on_admin(ev)));
            }
        }
        out
    }

    /// Splits a region at a raw key.
    pub fn split_region(
        &mut self,
        region_id: u64,
        raw_split_key: &[u8],
    ) -> Result<Vec<StoreOutput>> {
        let ev = self.cluster.split(region_id, &encode_key(raw_split_key))?;
        Ok(self.admin(ev))
    }

    /// Merges `source` into `target`.
    pub fn merge_regions(&mut self, source: u64, target: u64) -> Result<Vec<StoreOutput>> {
        let ev = self.cluster.merge(source, target)?;
        Ok(self.admin(ev))
    }

    /// Moves a region's leader.
    pub fn transfer_leader(&mut self, region_id: u64, store_id: u64) -> Result<Vec<StoreOutput>> {
        let ev = self.cluster.transfer_leader(region_id, store_id)?;
        Ok(self.admin(ev))
    }

    /// Removes a region's peer from a store.
    pub fn remove_peer(&mut self, region_id: u64, store_id: u64) -> Result<Vec<StoreOutput>> {
        let ev = self.cluster.remove_peer(region_id, store_id)?;
        Ok(self.admin(ev))
    }

    /// Stops a store: its streams are gone (nothing is sent on them), leaders move away.
    pub fn stop_store(&mut self, store_id: u64) -> Result<Vec<StoreOutput>> {
        let ev = self.cluster.stop_store(store_id)?;
        self.endpoint(store_id)?.reset();
        Ok(self.admin(ev))
    }

    /// Restarts a store.
    pub fn start_store(&mut self, store_id: u64) -> Result<Vec<StoreOutput>> {
        let ev = self.cluster.start_store(store_id)?;
        Ok(self.admin(ev))
    }

    /// `UpdateServiceGCSafePoint`.
    pub fn update_service_safe_point(
        &mut self,
        service_id: &[u8],
        ttl_secs: i64,
        safe_point: Ts,
    ) -> UpdateOutcome {
        let now = self.clock.now_ms();
        self.gc
            .update_service(service_id, ttl_secs, safe_point, now)
    }

    /// Advances the GC safe point towards `target` (capped by services) and really drops the
    /// history below it. Returns the safe point used.
    pub fn run_gc(&mut self, target: Ts) -> Ts {
        let now = self.clock.now_ms();
        let sp = self.gc.advance_gc_safe_point(target, now);
        self.mvcc.gc(sp);
        sp
    }
}

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
    /// Raw key ranges of dropped and truncated tables with the ts of the DDL that dropped
    /// them: TiDB's `mysql.gc_delete_range`, destroyed once the GC safe point passes the ts.
    delete_ranges: Vec<(Ts, Vec<u8>, Vec<u8>)>,
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
            delete_ranges: Vec::new(),
        })
    }

    /// Wall-clock ms of the injected clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// PD `Tso` with `count` timestamps: the largest is returned.
    pub fn tso(&mut self, count: u32) -> Result<Ts> {
        Ok(self.tso.alloc(self.clock.now_ms(), count)?)
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
    ///
    /// Each key is encoded once (into a reused buffer) and looked up only when it leaves the
    /// region of the previous key. Regions whose leader endpoint captures nothing are skipped
    /// (the endpoint would ignore the batch), and a batch lying in one region is passed on as
    /// it is, without copying.
    fn observe(&mut self, batch: &WriteBatch) -> Vec<StoreOutput> {
        if batch.modifies.is_empty() || self.endpoints.values().all(|ep| !ep.is_capturing()) {
            return Vec::new();
        }
        // (region id, leader store) of each modify; None when no region or no leader.
        let mut targets: Vec<Option<(u64, u64)>> = Vec::with_capacity(batch.modifies.len());
        let mut enc = Vec::new();
        let mut cur: Option<&super::region::RegionInfo> = None;
        for m in &batch.modifies {
            enc.clear();
            crate::tidb::codec::encode_bytes(&mut enc, m.key());
            let r = match cur.filter(|r| r.contains_encoded(&enc)) {
                Some(r) => Some(r),
                None => {
                    cur = self.cluster.region_by_key(&enc);
                    cur
                }
            };
            targets.push(r.and_then(|r| r.leader_store().map(|s| (r.id(), s))));
        }
        // Regions in id order, as the per-region map used to give them.
        let mut regions: Vec<(u64, u64)> = targets.iter().flatten().copied().collect();
        regions.sort_unstable();
        regions.dedup();
        let mut out = Vec::new();
        for (region_id, store_id) in regions {
            let Some(ep) = self.endpoints.get_mut(&store_id) else {
                continue;
            };
            if !ep.captures(region_id) {
                continue;
            }
            let whole = targets.iter().all(|t| *t == Some((region_id, store_id)));
            let outputs = if whole {
                ep.on_write_batch(region_id, batch, &self.mvcc)
            } else {
                let b = WriteBatch {
                    modifies: batch
                        .modifies
                        .iter()
                        .zip(&targets)
                        .filter(|(_, t)| **t == Some((region_id, store_id)))
                        .map(|(m, _)| m.clone())
                        .collect(),
                    one_pc: batch.one_pc,
                };
                ep.on_write_batch(region_id, &b, &self.mvcc)
            };
            out.extend(
                outputs
                    .into_iter()
                    .map(|output| StoreOutput { store_id, output }),
            );
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

    /// `KvCheckSecondaryLocks`.
    pub fn check_secondary_locks(
        &mut self,
        keys: &[Vec<u8>],
        start_ts: Ts,
    ) -> Result<(crate::sim::mvcc::SecondaryLocks, Vec<StoreOutput>)> {
        let (s, b) = self.mvcc.check_secondary_locks(keys, start_ts)?;
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

    /// Records the raw range `[start, end)` of a table dropped by a DDL committed at `ts`, to
    /// be destroyed once GC passes `ts` (TiDB's `mysql.gc_delete_range`).
    pub fn add_delete_range(&mut self, ts: Ts, start: Vec<u8>, end: Vec<u8>) {
        self.delete_ranges.push((ts, start, end));
    }

    /// Delete ranges not yet destroyed.
    pub fn pending_delete_ranges(&self) -> usize {
        self.delete_ranges.len()
    }

    /// Advances the GC safe point towards `target` (capped by services) and really drops the
    /// history below it, then destroys the delete ranges at or below it as TiDB's GC worker
    /// does with `UnsafeDestroyRange`: straight from the storage, not through raft, so CDC
    /// sees nothing of it. Returns the safe point used.
    pub fn run_gc(&mut self, target: Ts) -> Ts {
        let now = self.clock.now_ms();
        let sp = self.gc.advance_gc_safe_point(target, now);
        self.mvcc.gc(sp);
        let mvcc = &mut self.mvcc;
        self.delete_ranges.retain(|(ts, start, end)| {
            if *ts > sp {
                return true;
            }
            mvcc.destroy_range(start, end);
            false
        });
        sp
    }
}

#[cfg(test)]
mod tests {
    //! Behaviour pins: hashes of the truth log and of every CDC output of a seeded workload,
    //! so that performance work on the core cannot change what the simulator produces.

    use std::sync::Arc;

    use tibinlog_proto::cdcpb::{self, change_data_request, ChangeDataRequest};
    use tibinlog_proto::metapb;

    use super::*;
    use crate::sim::tidb::{Tidb, TidbConfig, TruthCollector};
    use crate::sim::ts::ManualClock;
    use crate::sim::workload::{gen, Workload, WorkloadConfig};

    /// FNV-1a, 64 bits: stable across platforms and releases.
    #[derive(Debug)]
    struct Fnv(u64);

    impl Fnv {
        fn new() -> Self {
            Fnv(0xcbf2_9ce4_8422_2325)
        }
        fn add(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 ^= u64::from(b);
                self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
            }
            // separator, so that ["ab", "c"] and ["a", "bc"] differ
            self.0 ^= 0xff;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn setup(seed: u64, txns: u64) -> (SimCore, Tidb, Workload, TruthCollector) {
        let clock = ManualClock::new(1_700_000_000_000);
        let mut core = SimCore::new(
            &[1, 2, 3],
            CdcConfig::default(),
            Arc::new(clock.clone()),
            seed,
        )
        .expect("core");
        let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("boot");
        let truth = TruthCollector::new();
        tidb.set_truth_sink(Box::new(truth.clone()));
        let cfg = WorkloadConfig {
            seed,
            txns,
            large_rows: 200,
            ..WorkloadConfig::default()
        };
        let mut wl = Workload::new(cfg, Some(clock));
        wl.setup(&mut tidb, &mut core).expect("setup");
        (core, tidb, wl, truth)
    }

    /// Hashes the outputs; returns the number of rows they carry.
    fn hash_outputs(h: &mut Fnv, outs: &[StoreOutput]) -> usize {
        let mut rows = 0;
        for o in outs {
            h.add(format!("{o:?}").as_bytes());
            for e in &o.output.event.events {
                if let Some(cdcpb::event::Event::Entries(en)) = &e.event {
                    rows += en.entries.len();
                }
            }
        }
        rows
    }

    /// Unwatched cluster (as the throughput bench runs it): truth log and outputs.
    #[test]
    fn workload_truth_log_hash_is_pinned() {
        let (mut core, mut tidb, mut wl, truth) = setup(20_240_601, 400);
        let mut outs = Fnv::new();
        let stats = wl
            .run(&mut tidb, &mut core, |o| {
                hash_outputs(&mut outs, &o);
            })
            .expect("run");
        let mut h = Fnv::new();
        for l in truth.lines() {
            h.add(l.as_bytes());
        }
        assert!(stats.row_changes > 1000, "{stats:?}");
        assert_eq!(
            (h.0, outs.0, stats.row_changes, core.mvcc.key_count()),
            (3_053_552_968_824_052_904, 0xcbf2_9ce4_8422_2325, 3205, 5727),
            "truth log or outputs changed"
        );
    }

    /// Watched cluster: several regions with leaders on every store, one downstream per
    /// region, resolved-ts ticks; every CDC output and the truth log are hashed.
    #[test]
    fn watched_workload_outputs_hash_is_pinned() {
        let (mut core, mut tidb, mut wl, truth) = setup(7, 300);
        let mut h = Fnv::new();
        // Each table starts a region of its own (the simulated TiDB splits at CREATE TABLE).
        for t in gen::initial_tables() {
            let id = tidb.table("wl", &t.name).expect("table").info.id;
            let prefix = crate::tidb::key::table_prefix(id);
            let region = core.cluster.region_by_raw_key(&prefix).expect("region");
            assert_eq!(region.region.start_key, encode_key(&prefix), "{}", t.name);
        }
        let mut regions: Vec<u64> = core
            .cluster
            .scan_regions(b"", b"", 0)
            .iter()
            .map(|r| r.id())
            .collect();
        regions.sort_unstable();
        assert!(regions.len() >= 4, "{regions:?}");
        for (i, &r) in regions.iter().enumerate() {
            let store = 1 + (i as u64 % 3);
            hash_outputs(&mut h, &core.transfer_leader(r, store).expect("leader"));
        }
        for store in 1..=3 {
            core.open_conn(store, store, false).expect("conn");
        }
        let mut registered = Vec::new();
        for &r in &regions {
            let info = core.cluster.region(r).expect("region");
            registered.push((r, info.version()));
            let store = info.leader_store().expect("leader");
            let req = ChangeDataRequest {
                header: Some(cdcpb::Header {
                    cluster_id: 0,
                    ticdc_version: "8.5.0".into(),
                }),
                region_id: r,
                region_epoch: Some(metapb::RegionEpoch {
                    conf_ver: 1,
                    version: info.version(),
                }),
                checkpoint_ts: 0,
                request_id: r,
                request: Some(change_data_request::Request::Register(Default::default())),
                ..Default::default()
            };
            hash_outputs(
                &mut h,
                &core.on_cdc_request(store, store, &req).expect("reg"),
            );
        }
        let mut rows = 0;
        for _ in 0..50 {
            let o = core.drive_scans();
            rows += hash_outputs(&mut h, &o);
        }
        for i in 0..300u64 {
            let rep = wl.step(&mut tidb, &mut core).expect("step");
            rows += hash_outputs(&mut h, &rep.outputs);
            if i % 10 == 0 {
                hash_outputs(&mut h, &core.tick_resolved_ts());
            }
        }
        hash_outputs(&mut h, &core.tick_resolved_ts());
        let mut t = Fnv::new();
        for l in truth.lines() {
            t.add(l.as_bytes());
        }
        let downstreams: usize = (1..=3)
            .map(|s| core.endpoint(s).expect("ep").downstream_count())
            .sum();
        // The workload's CREATE TABLEs split regions: their downstreams ended with an epoch
        // error, the others still stream.
        let unchanged = registered
            .iter()
            .filter(|(r, v)| core.cluster.region(*r).map(|i| i.version()) == Some(*v))
            .count();
        assert!(unchanged < regions.len(), "a workload DDL split a region");
        assert_eq!(downstreams, unchanged);
        assert_eq!(
            (h.0, t.0, rows),
            (10_662_891_892_457_195_468, 2_427_976_154_193_502_479, 8554),
            "CDC outputs or truth log changed"
        );
    }
}

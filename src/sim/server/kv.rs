//! `tikvpb.Tikv` snapshot reads of one store: `KvGet`, `KvScan`, `KvBatchGet`, and the lock
//! resolution a reader does when it meets a lock: `KvCheckTxnStatus` on the primary and
//! `KvResolveLock`; with TiKV's region checks on `kvrpcpb::Context` and the mapping of core
//! errors to `kvrpcpb::KeyError` / `errorpb::Error`.
//!
//! Checks, in TiKV's order: the store serves (else the RPC fails with `UNAVAILABLE`, as a dead
//! TiKV would at transport level) → region known with a peer here (`region_not_found`) → this
//! peer leads (`not_leader`, with the leader) → epoch version matches (`epoch_not_match` with the
//! current region; a missing epoch is a plain region error "missing epoch!") → every key
//! inside the region, compared in the encoded domain (`key_not_in_region`).

use std::sync::Arc;

use tibinlog_proto::tikvpb::tikv_server::Tikv;
use tibinlog_proto::{errorpb, kvrpcpb};
use tonic::{Request, Response, Status};

use super::state::Shared;
use crate::sim::region::{encode_key, RegionInfo};
use crate::sim::{SimError, Ts};

/// Maps a core error to the `KeyError` a TiKV client gets, or `None` when it is not a key
/// error (region errors and misuse are reported otherwise).
pub fn key_error(e: &SimError) -> Option<kvrpcpb::KeyError> {
    let mut k = kvrpcpb::KeyError::default();
    match e {
        SimError::KeyIsLocked { key, lock } => k.locked = Some(lock.to_lock_info(key)),
        SimError::WriteConflict {
            key,
            start_ts,
            conflict_start_ts,
            conflict_commit_ts,
        } => {
            k.conflict = Some(kvrpcpb::WriteConflict {
                start_ts: start_ts.0,
                conflict_ts: conflict_start_ts.0,
                key: key.clone(),
                conflict_commit_ts: conflict_commit_ts.0,
                reason: kvrpcpb::write_conflict::Reason::Optimistic as i32,
                ..Default::default()
            })
        }
        SimError::AlreadyExist { key } => {
            k.already_exist = Some(kvrpcpb::AlreadyExist { key: key.clone() })
        }
        SimError::TxnLockNotFound { key, .. } => {
            k.txn_lock_not_found = Some(kvrpcpb::TxnLockNotFound { key: key.clone() })
        }
        SimError::CommitTsExpired {
            key,
            start_ts,
            commit_ts,
            min_commit_ts,
        } => {
            k.commit_ts_expired = Some(kvrpcpb::CommitTsExpired {
                start_ts: start_ts.0,
                attempted_commit_ts: commit_ts.0,
                key: key.clone(),
                min_commit_ts: min_commit_ts.0,
            })
        }
        SimError::Committed { .. }
        | SimError::PessimisticLockNotFound { .. }
        | SimError::DataCompacted { .. } => k.abort = e.to_string(),
        _ => return None,
    }
    Some(k)
}

/// Maps a core error to a region error, if it is one.
pub fn region_error(e: &SimError) -> Option<errorpb::Error> {
    match e {
        SimError::RegionNotFound(region_id) => Some(errorpb::Error {
            message: e.to_string(),
            region_not_found: Some(errorpb::RegionNotFound {
                region_id: *region_id,
            }),
            ..Default::default()
        }),
        _ => None,
    }
}

/// An error of a read: reported in `region_error`, in `error`, or as a gRPC status.
enum ReadError {
    Region(Box<errorpb::Error>),
    Key(Box<kvrpcpb::KeyError>),
}

impl ReadError {
    fn from_sim(e: SimError) -> Result<Self, Status> {
        if let Some(k) = key_error(&e) {
            return Ok(Self::Key(Box::new(k)));
        }
        if let Some(r) = region_error(&e) {
            return Ok(Self::Region(Box::new(r)));
        }
        Err(Status::internal(e.to_string()))
    }
}

fn region_err(message: impl Into<String>, fill: impl FnOnce(&mut errorpb::Error)) -> ReadError {
    let mut e = errorpb::Error {
        message: message.into(),
        ..Default::default()
    };
    fill(&mut e);
    ReadError::Region(Box::new(e))
}

/// The region checks of a read on `store_id`; returns the region to read from.
fn check_context(
    shared: &Shared,
    store_id: u64,
    ctx: Option<&kvrpcpb::Context>,
) -> Result<Result<RegionInfo, ReadError>, Status> {
    let st = shared.lock();
    let cluster = &st.core.cluster;
    if !cluster.store(store_id).is_some_and(|s| s.up) {
        return Err(Status::unavailable("store is stopped"));
    }
    let ctx = ctx.cloned().unwrap_or_default();
    let region_id = ctx.region_id;
    let Some(region) = cluster
        .region(region_id)
        .filter(|r| r.has_peer_on(store_id))
    else {
        return Ok(Err(region_err(
            format!("region {region_id} is not found"),
            |e| e.region_not_found = Some(errorpb::RegionNotFound { region_id }),
        )));
    };
    if region.leader_store() != Some(store_id) {
        let leader = region.leader;
        return Ok(Err(region_err(
            format!("peer is not leader for region {region_id}"),
            |e| e.not_leader = Some(errorpb::NotLeader { region_id, leader }),
        )));
    }
    let Some(epoch) = ctx.region_epoch else {
        return Ok(Err(region_err("missing epoch!", |_| {})));
    };
    if epoch.version != region.version() {
        let current = region.region.clone();
        return Ok(Err(region_err(
            format!(
                "mismatch current epoch version {} and request version {}",
                region.version(),
                epoch.version
            ),
            |e| {
                e.epoch_not_match = Some(errorpb::EpochNotMatch {
                    current_regions: vec![current],
                })
            },
        )));
    }
    Ok(Ok(region.clone()))
}

/// `key_not_in_region` when the raw key's encoding falls outside the region.
/// The raw key whose encoding is the region bound `encoded` (empty stays empty), when it is
/// a complete encoding: raw keys then compare with it as their encodings do with `encoded`.
fn raw_bound(encoded: &[u8]) -> Option<Vec<u8>> {
    let mut raw = Vec::new();
    if encoded.is_empty() {
        return Some(raw);
    }
    let rest = crate::tidb::codec::decode_bytes(encoded, &mut raw).ok()?;
    rest.is_empty().then_some(raw)
}

fn check_key(region: &RegionInfo, raw: &[u8]) -> Result<(), ReadError> {
    if region.contains_encoded(&encode_key(raw)) {
        return Ok(());
    }
    Err(region_err(
        format!("key is not in region {}", region.id()),
        |e| {
            e.key_not_in_region = Some(errorpb::KeyNotInRegion {
                key: raw.to_vec(),
                region_id: region.id(),
                start_key: region.region.start_key.clone(),
                end_key: region.region.end_key.clone(),
            })
        },
    ))
}

fn resolved_locks(ctx: Option<&kvrpcpb::Context>) -> Vec<Ts> {
    ctx.map(|c| c.resolved_locks.iter().map(|&t| Ts(t)).collect())
        .unwrap_or_default()
}

fn pair(p: crate::sim::mvcc::KvPair, need_commit_ts: bool) -> Result<kvrpcpb::KvPair, Status> {
    match p.result {
        Ok(r) => Ok(kvrpcpb::KvPair {
            key: p.key.into(),
            value: r.value.into(),
            commit_ts: if need_commit_ts { r.commit_ts.0 } else { 0 },
            ..Default::default()
        }),
        Err(e) => match ReadError::from_sim(e)? {
            ReadError::Key(k) => Ok(kvrpcpb::KvPair {
                key: p.key.into(),
                error: Some(k),
                ..Default::default()
            }),
            ReadError::Region(_) => Err(Status::internal("region error on a key")),
        },
    }
}

/// The KV service of one store.
#[derive(Debug, Clone)]
pub struct KvService {
    shared: Arc<Shared>,
    store_id: u64,
}

impl KvService {
    /// A service for `store_id`.
    pub fn new(shared: Arc<Shared>, store_id: u64) -> Self {
        Self { shared, store_id }
    }

    fn get(&self, req: &kvrpcpb::GetRequest) -> Result<kvrpcpb::GetResponse, Status> {
        let mut resp = kvrpcpb::GetResponse::default();
        let ctx = req.context.as_ref();
        let region = match check_context(&self.shared, self.store_id, ctx)? {
            Ok(r) => r,
            Err(e) => return Ok(fill_get(resp, e)),
        };
        if let Err(e) = check_key(&region, &req.key) {
            return Ok(fill_get(resp, e));
        }
        let r = self
            .shared
            .lock()
            .core
            .mvcc
            .get(&req.key, Ts(req.version), &resolved_locks(ctx));
        match r {
            Ok(Some(v)) => {
                resp.value = v.value;
                if req.need_commit_ts {
                    resp.commit_ts = v.commit_ts.0;
                }
            }
            Ok(None) => resp.not_found = true,
            Err(e) => return Ok(fill_get(resp, ReadError::from_sim(e)?)),
        }
        Ok(resp)
    }

    fn scan(&self, req: &kvrpcpb::ScanRequest) -> Result<kvrpcpb::ScanResponse, Status> {
        let mut resp = kvrpcpb::ScanResponse::default();
        let ctx = req.context.as_ref();
        let region = match check_context(&self.shared, self.store_id, ctx)? {
            Ok(r) => r,
            Err(e) => return Ok(fill_scan(resp, e)),
        };
        // Forward: [start_key, end_key). Reverse: start_key is the exclusive upper bound and
        // end_key the inclusive lower bound. The region bounds the scan either way.
        let (lower, upper) = if req.reverse {
            (req.end_key.clone(), req.start_key.clone())
        } else {
            (req.start_key.clone(), req.end_key.clone())
        };
        let first = if req.reverse { &upper } else { &lower };
        if !(req.reverse && first.is_empty()) {
            let probe_ok = if req.reverse {
                // The upper bound may equal the region end.
                let enc = encode_key(first);
                enc > region.region.start_key
                    && (region.region.end_key.is_empty() || enc <= region.region.end_key)
            } else {
                region.contains_encoded(&encode_key(first))
            };
            if !probe_ok {
                let e = check_key(&region, first)
                    .err()
                    .unwrap_or_else(|| region_err("key is not in region", |_| {}));
                return Ok(fill_scan(resp, e));
            }
        }
        let limit = req.limit as usize;
        if !req.reverse {
            return self.scan_forward(req, &region, resp, &lower, &upper);
        }
        // Downwards from the upper bound (the region's end when the request has none): the
        // in-region keys come first, the first key below the region's start ends the page.
        let end = &region.region.end_key;
        let (upper, store_limit) = match (upper.is_empty(), raw_bound(end)) {
            (true, Some(raw)) => (raw, limit),
            // An end that is no complete encoding: keys above it are skipped below.
            (true, None) => (upper, 0),
            (false, _) => (upper, limit),
        };
        let r = self.shared.lock().core.mvcc.scan_rev(
            &lower,
            &upper,
            store_limit,
            Ts(req.version),
            req.key_only,
            &resolved_locks(ctx),
        );
        let pairs = match r {
            Ok(p) => p,
            Err(e) => return Ok(fill_scan(resp, ReadError::from_sim(e)?)),
        };
        let above = |k: &[u8]| !end.is_empty() && encode_key(k) >= *end;
        let picked = pairs
            .into_iter()
            .skip_while(|p| above(&p.key))
            .take_while(|p| region.contains_encoded(&encode_key(&p.key)))
            .take(if limit == 0 { usize::MAX } else { limit });
        for p in picked {
            resp.pairs.push(pair(p, true)?);
        }
        Ok(resp)
    }

    /// A forward scan starts inside the region and goes up: the first `limit` pairs from
    /// `lower` hold every in-region pair the answer can have (the in-region ones come first),
    /// so the store reads one page, never the rest of the range. The page's keys and values
    /// are copied into one buffer that every pair of the answer slices.
    fn scan_forward(
        &self,
        req: &kvrpcpb::ScanRequest,
        region: &RegionInfo,
        mut resp: kvrpcpb::ScanResponse,
        lower: &[u8],
        upper: &[u8],
    ) -> Result<kvrpcpb::ScanResponse, Status> {
        /// One pair of the page: its bytes end at these offsets of the buffer, or a lock.
        enum Found {
            Value {
                key_end: usize,
                value_end: usize,
                commit_ts: u64,
            },
            Locked(crate::sim::mvcc::KvPair),
        }
        // Only the region's end bounds the keys. Compared raw when the end is a complete
        // encoding (the order is the same), else encoded.
        let raw_end = raw_bound(&region.region.end_key);
        let mut bytes = bytes::BytesMut::with_capacity(64 << 10);
        let mut found = Vec::new();
        // A raw region end bounds the store's range itself (found once, not compared per key).
        let upper = match &raw_end {
            Some(e) if !e.is_empty() && (upper.is_empty() || e.as_slice() < upper) => e,
            _ => upper,
        };
        let r = self.shared.lock().core.mvcc.scan_visit(
            lower,
            upper,
            req.limit as usize,
            Ts(req.version),
            &resolved_locks(req.context.as_ref()),
            |key, result| {
                let inside = raw_end.is_some() || region.contains_encoded(&encode_key(key));
                if !inside {
                    return false;
                }
                found.push(match result {
                    Ok((commit_ts, value)) => {
                        bytes.extend_from_slice(key);
                        let key_end = bytes.len();
                        if !req.key_only {
                            bytes.extend_from_slice(value);
                        }
                        Found::Value {
                            key_end,
                            value_end: bytes.len(),
                            commit_ts: commit_ts.0,
                        }
                    }
                    Err(e) => Found::Locked(crate::sim::mvcc::KvPair {
                        key: key.to_vec(),
                        result: Err(e),
                    }),
                });
                true
            },
        );
        if let Err(e) = r {
            return Ok(fill_scan(resp, ReadError::from_sim(e)?));
        }
        let bytes = bytes.freeze();
        let mut at = 0;
        resp.pairs.reserve(found.len());
        for f in found {
            resp.pairs.push(match f {
                Found::Value {
                    key_end,
                    value_end,
                    commit_ts,
                } => {
                    let p = kvrpcpb::KvPair {
                        key: bytes.slice(at..key_end),
                        value: bytes.slice(key_end..value_end),
                        commit_ts,
                        ..Default::default()
                    };
                    at = value_end;
                    p
                }
                Found::Locked(p) => pair(p, true)?,
            });
        }
        Ok(resp)
    }

    fn batch_get(
        &self,
        req: &kvrpcpb::BatchGetRequest,
    ) -> Result<kvrpcpb::BatchGetResponse, Status> {
        let mut resp = kvrpcpb::BatchGetResponse::default();
        let ctx = req.context.as_ref();
        let region = match check_context(&self.shared, self.store_id, ctx)? {
            Ok(r) => r,
            Err(e) => return Ok(fill_batch(resp, e)),
        };
        for k in &req.keys {
            if let Err(e) = check_key(&region, k) {
                return Ok(fill_batch(resp, e));
            }
        }
        let r = self.shared.lock().core.mvcc.batch_get(
            &req.keys,
            Ts(req.version),
            &resolved_locks(ctx),
        );
        match r {
            Ok(pairs) => {
                for p in pairs {
                    resp.pairs.push(pair(p, req.need_commit_ts)?);
                }
            }
            Err(e) => return Ok(fill_batch(resp, ReadError::from_sim(e)?)),
        }
        Ok(resp)
    }
}

fn fill_get(mut r: kvrpcpb::GetResponse, e: ReadError) -> kvrpcpb::GetResponse {
    match e {
        ReadError::Region(x) => r.region_error = Some(*x),
        ReadError::Key(x) => r.error = Some(*x),
    }
    r
}

fn fill_scan(mut r: kvrpcpb::ScanResponse, e: ReadError) -> kvrpcpb::ScanResponse {
    match e {
        ReadError::Region(x) => r.region_error = Some(*x),
        ReadError::Key(x) => r.error = Some(*x),
    }
    r
}

fn fill_check(
    mut r: kvrpcpb::CheckTxnStatusResponse,
    e: ReadError,
) -> kvrpcpb::CheckTxnStatusResponse {
    match e {
        ReadError::Region(x) => r.region_error = Some(*x),
        ReadError::Key(x) => r.error = Some(*x),
    }
    r
}

fn fill_resolve(mut r: kvrpcpb::ResolveLockResponse, e: ReadError) -> kvrpcpb::ResolveLockResponse {
    match e {
        ReadError::Region(x) => r.region_error = Some(*x),
        ReadError::Key(x) => r.error = Some(*x),
    }
    r
}

fn fill_secondary(
    mut r: kvrpcpb::CheckSecondaryLocksResponse,
    e: ReadError,
) -> kvrpcpb::CheckSecondaryLocksResponse {
    match e {
        ReadError::Region(x) => r.region_error = Some(*x),
        ReadError::Key(x) => r.error = Some(*x),
    }
    r
}

fn fill_batch(mut r: kvrpcpb::BatchGetResponse, e: ReadError) -> kvrpcpb::BatchGetResponse {
    match e {
        ReadError::Region(x) => r.region_error = Some(*x),
        ReadError::Key(x) => r.error = Some(*x),
    }
    r
}

impl KvService {
    /// `KvCheckTxnStatus` on the primary key (in this request's region): committed (commit
    /// version), rolled back (both zero; rolled back now if the TTL expired or, when asked, if
    /// there is no lock), or alive (its TTL, its min commit ts pushed above the caller's ts).
    fn check_txn_status(
        &self,
        req: &kvrpcpb::CheckTxnStatusRequest,
    ) -> Result<kvrpcpb::CheckTxnStatusResponse, Status> {
        use crate::sim::mvcc::TxnStatus;
        let mut resp = kvrpcpb::CheckTxnStatusResponse::default();
        let region = match check_context(&self.shared, self.store_id, req.context.as_ref())? {
            Ok(r) => r,
            Err(e) => return Ok(fill_check(resp, e)),
        };
        if let Err(e) = check_key(&region, &req.primary_key) {
            return Ok(fill_check(resp, e));
        }
        let r = self.shared.apply(|core| {
            core.check_txn_status(
                &req.primary_key,
                Ts(req.lock_ts),
                Ts(req.caller_start_ts),
                req.rollback_if_not_exist,
            )
        });
        match r {
            Ok(TxnStatus::Committed(ts)) => resp.commit_version = ts.0,
            Ok(TxnStatus::RolledBack) => {}
            Ok(TxnStatus::TtlExpireRollback) => {
                resp.action = kvrpcpb::Action::TtlExpireRollback as i32;
            }
            Ok(TxnStatus::LockNotExistRollback) => {
                resp.action = kvrpcpb::Action::LockNotExistRollback as i32;
            }
            Ok(TxnStatus::Locked {
                ttl_ms,
                min_commit_ts,
                lock,
            }) => {
                resp.lock_ttl = ttl_ms.max(1);
                if min_commit_ts > Ts(req.caller_start_ts) && req.caller_start_ts != 0 {
                    resp.action = kvrpcpb::Action::MinCommitTsPushed as i32;
                }
                resp.lock_info = Some(lock.to_lock_info(&req.primary_key));
            }
            Err(e) => return Ok(fill_check(resp, ReadError::from_sim(e)?)),
        }
        Ok(resp)
    }

    /// `KvCheckSecondaryLocks` on keys of this request's region: every lock (all prewritten),
    /// the commit ts (one is committed), or neither (rolled back).
    fn check_secondary_locks(
        &self,
        req: &kvrpcpb::CheckSecondaryLocksRequest,
    ) -> Result<kvrpcpb::CheckSecondaryLocksResponse, Status> {
        use crate::sim::mvcc::SecondaryLocks;
        let mut resp = kvrpcpb::CheckSecondaryLocksResponse::default();
        let region = match check_context(&self.shared, self.store_id, req.context.as_ref())? {
            Ok(r) => r,
            Err(e) => return Ok(fill_secondary(resp, e)),
        };
        for k in &req.keys {
            if let Err(e) = check_key(&region, k) {
                return Ok(fill_secondary(resp, e));
            }
        }
        let r = self
            .shared
            .apply(|core| core.check_secondary_locks(&req.keys, Ts(req.start_version)));
        match r {
            Ok(SecondaryLocks::Locked(locks)) => {
                resp.locks = locks.iter().map(|(k, l)| l.to_lock_info(k)).collect();
            }
            Ok(SecondaryLocks::Committed(ts)) => resp.commit_ts = ts.0,
            Ok(SecondaryLocks::RolledBack) => {}
            Err(e) => return Ok(fill_secondary(resp, ReadError::from_sim(e)?)),
        }
        Ok(resp)
    }

    /// `KvResolveLock`: commits (`commit_version` non-zero) or rolls back the locks of
    /// `start_version` on `keys`, or on every key of this request's region when `keys` is empty.
    fn resolve_lock(
        &self,
        req: &kvrpcpb::ResolveLockRequest,
    ) -> Result<kvrpcpb::ResolveLockResponse, Status> {
        let resp = kvrpcpb::ResolveLockResponse::default();
        if !req.txn_infos.is_empty() {
            return Err(Status::unimplemented(
                "batched resolve (txn_infos) is not simulated",
            ));
        }
        let region = match check_context(&self.shared, self.store_id, req.context.as_ref())? {
            Ok(r) => r,
            Err(e) => return Ok(fill_resolve(resp, e)),
        };
        for k in &req.keys {
            if let Err(e) = check_key(&region, k) {
                return Ok(fill_resolve(resp, e));
            }
        }
        let start = Ts(req.start_version);
        let r = self.shared.apply(|core| {
            let keys: Vec<Vec<u8>> = if req.keys.is_empty() {
                core.mvcc
                    .locks()
                    .filter(|(k, l)| l.start_ts == start && region.contains_encoded(&encode_key(k)))
                    .map(|(k, _)| k.to_vec())
                    .collect()
            } else {
                req.keys.clone()
            };
            core.resolve_lock(start, Ts(req.commit_version), Some(&keys))
                .map(|out| ((), out))
        });
        if let Err(e) = r {
            return Ok(fill_resolve(resp, ReadError::from_sim(e)?));
        }
        Ok(resp)
    }
}

#[tonic::async_trait]
impl Tikv for KvService {
    async fn kv_check_txn_status(
        &self,
        request: Request<kvrpcpb::CheckTxnStatusRequest>,
    ) -> Result<Response<kvrpcpb::CheckTxnStatusResponse>, Status> {
        self.check_txn_status(request.get_ref()).map(Response::new)
    }

    async fn kv_check_secondary_locks(
        &self,
        request: Request<kvrpcpb::CheckSecondaryLocksRequest>,
    ) -> Result<Response<kvrpcpb::CheckSecondaryLocksResponse>, Status> {
        self.check_secondary_locks(request.get_ref())
            .map(Response::new)
    }

    async fn kv_resolve_lock(
        &self,
        request: Request<kvrpcpb::ResolveLockRequest>,
    ) -> Result<Response<kvrpcpb::ResolveLockResponse>, Status> {
        self.resolve_lock(request.get_ref()).map(Response::new)
    }

    async fn kv_get(
        &self,
        request: Request<kvrpcpb::GetRequest>,
    ) -> Result<Response<kvrpcpb::GetResponse>, Status> {
        self.get(request.get_ref()).map(Response::new)
    }

    async fn kv_scan(
        &self,
        request: Request<kvrpcpb::ScanRequest>,
    ) -> Result<Response<kvrpcpb::ScanResponse>, Status> {
        let resp = self.scan(request.get_ref())?;
        let n = resp.pairs.len() as u64;
        (self.shared.scanned_pairs).fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok(Response::new(resp))
    }

    async fn kv_batch_get(
        &self,
        request: Request<kvrpcpb::BatchGetRequest>,
    ) -> Result<Response<kvrpcpb::BatchGetResponse>, Status> {
        self.batch_get(request.get_ref()).map(Response::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_bound_orders_raw_keys_as_the_encoded_bound_orders_their_encodings() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            b"t".to_vec(),
            b"t\x80\x00".to_vec(),
            b"t\x80\x00\x00\x00\x00\x00\x00\x05_r".to_vec(),
            b"t\x80\x00\x00\x00\x00\x00\x00\x05_r\x80\x00\x00\x00\x00\x00\x00\x07".to_vec(),
            b"t\x80\x00\x00\x00\x00\x00\x00\x05_r\x80\x00\x00\x00\x00\x00\x00\x07\x00".to_vec(),
            vec![0xff; 9],
        ];
        for b in &keys[1..] {
            let enc = encode_key(b);
            let raw = raw_bound(&enc).expect("a complete encoding");
            assert_eq!(&raw, b);
            for k in &keys {
                assert_eq!(k < &raw, encode_key(k) < enc, "{k:?} against {b:?}");
            }
        }
        assert_eq!(raw_bound(&[]), Some(Vec::new()));
        // Not a complete encoding (cut inside a group, or followed by more bytes): no raw form.
        let enc = encode_key(b"t\x80\x00\x00\x00\x00\x00\x00\x05_r");
        assert_eq!(raw_bound(&enc[..5]), None);
        let mut longer = enc.clone();
        longer.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(raw_bound(&longer), None);
    }
}

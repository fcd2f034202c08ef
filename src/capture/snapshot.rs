//! Snapshot reads at a timestamp over `tikvpb.Tikv` (`KvGet`, `KvScan`), for the schema
//! bootstrap: the change stream cannot read history, so the meta keys are read at the start
//! ts with ordinary KV calls.
//!
//! Keys here are **raw** (kvrpcpb takes raw keys); regions are located by the encoded key.
//!
//! # Error handling
//! * Region errors (not leader, epoch not match, region not found, key not in region, busy) and
//!   transport failures: forget the region (or apply the leader hint), back off, locate again,
//!   retry; at most [`SnapshotConfig::max_region_retries`] times in a row.
//! * A lock at or below the read ts (`KeyError.locked`) is resolved the way TiDB's reader does:
//!   `KvCheckTxnStatus` on the lock's primary, with our read ts as the caller's. A committed
//!   transaction has its lock on our key committed (`KvResolveLock` with the commit ts), a
//!   rolled-back or expired one (TiKV rolls back a lock whose TTL passed) has it rolled back;
//!   either way the read goes on at once. A live transaction gets its min commit ts pushed
//!   above our read ts, so it will commit after it: the read then skips that lock
//!   (`Context.resolved_locks`) and sees the value before it. An async-commit transaction is
//!   decided by its secondaries (`KvCheckSecondaryLocks`, see `async_commit.rs`): committed,
//!   rolled back, or committed at the largest min commit ts of its locks once every key is
//!   prewritten. A lock whose fate is still open is waited for, with exponential backoff, at
//!   most [`SnapshotConfig::lock_wait_max`] ([`SnapshotError::LockTimeout`]). A secondary lock
//!   whose primary has no lock and no record is only rolled back once its own TTL has passed
//!   (its primary may still be prewriting).
//! * Other key errors are returned as they are.
//!
//! # Blocking use
//! The mounter's schema bootstrap reads through the synchronous [`MetaReader`] trait;
//! [`BlockingSnapshotReader`] adapts this reader to it by blocking on the runtime.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tibinlog_proto::kvrpcpb;
use tibinlog_proto::tikvpb::tikv_client::TikvClient;
use tokio::runtime::{Handle, RuntimeFlavor};
use tonic::transport::Channel;
use tonic::Status;

use super::pd::{dial, PdClient, PdError, MAX_DECODING_MESSAGE_SIZE};

/// One page of a scan: its (key, value) pairs and the key to resume from, if any remain.
pub type ScanPage = (Vec<(Bytes, Bytes)>, Option<Vec<u8>>);
use super::region_cache::{RegionCache, RegionInfo};
use super::span::encode_key_into;
use crate::model::Ts;
use crate::mounter::{MetaReader, MounterError};
use crate::tidb::codec::decode_bytes;

/// Keys per `KvScan` page (client-go's `scanBatchSize`).
pub const DEFAULT_SCAN_BATCH: u32 = 256;
/// Longest wait for one lock to go away.
pub const DEFAULT_LOCK_WAIT_MAX: Duration = Duration::from_secs(30);
/// Region retries of one read in a row.
pub const DEFAULT_MAX_REGION_RETRIES: u32 = 20;

/// Errors of snapshot reads.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Pd(#[from] PdError),
    /// The region kept failing (or PD knows none for the key).
    #[error("no usable region for key {key:02x?} after {retries} retries: {last}")]
    Region {
        key: Vec<u8>,
        retries: u32,
        last: String,
    },
    /// A lock stayed longer than we wait.
    #[error("key {key:02x?} stayed locked by start_ts {lock_ts}")]
    LockTimeout { key: Vec<u8>, lock_ts: Ts },
    /// A key error other than a lock.
    #[error("read of key {key:02x?} failed: {message}")]
    Key { key: Vec<u8>, message: String },
    /// A region boundary is not a complete key encoding, so no raw key starts the region.
    #[error("region boundary {0:02x?} is not a complete encoded key")]
    Boundary(Vec<u8>),
    /// A store refused our TLS certificate or its common name.
    #[error("{0}")]
    Refused(#[source] crate::security::Refused),
    /// A read running on the runtime ended without a result (the runtime is shutting down).
    #[error("{0}")]
    Aborted(String),
}

/// Result of snapshot reads.
pub type Result<T> = std::result::Result<T, SnapshotError>;

/// Limits of the reader.
#[derive(Debug, Clone)]
pub struct SnapshotConfig {
    pub scan_batch: u32,
    pub lock_wait_max: Duration,
    pub max_region_retries: u32,
    pub connect_timeout: Duration,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            scan_batch: DEFAULT_SCAN_BATCH,
            lock_wait_max: DEFAULT_LOCK_WAIT_MAX,
            max_region_retries: DEFAULT_MAX_REGION_RETRIES,
            connect_timeout: super::pd::DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// Reads keys and ranges at a ts. Share it by reference; the caches are locked only briefly.
#[derive(Debug)]
pub struct SnapshotReader {
    pd: PdClient,
    cfg: SnapshotConfig,
    cache: Mutex<RegionCache>,
    clients: Mutex<HashMap<u64, TikvClient<Channel>>>,
}

/// What one attempt of a read ended with, besides data.
pub(super) enum Again {
    /// Retry after locating the region again.
    Region(String),
    /// A lock stands in the way: resolve it, or wait for it.
    Locked(Box<kvrpcpb::LockInfo>),
    /// The store refused our certificate: stop.
    Refused(String),
}

/// The request context for region `r`; reads skip the locks of `bypass` (transactions known
/// to commit after the read ts).
/// Where a read goes: the region holding a key, or the one holding the keys just below it
/// (a reverse scan's exclusive upper bound).
#[derive(Debug, Clone, Copy)]
pub(super) enum At<'a> {
    Key(&'a [u8]),
    Before(&'a [u8]),
}

impl At<'_> {
    fn key(&self) -> &[u8] {
        match self {
            At::Key(k) | At::Before(k) => k,
        }
    }
}

pub(super) fn context(r: &RegionInfo, bypass: &[u64]) -> Option<kvrpcpb::Context> {
    Some(kvrpcpb::Context {
        region_id: r.id.0,
        region_epoch: Some(r.epoch),
        peer: r.leader,
        resolved_locks: bypass.to_vec(),
        ..Default::default()
    })
}

pub(super) fn key_error(
    key: &[u8],
    e: kvrpcpb::KeyError,
) -> std::result::Result<Again, SnapshotError> {
    match e.locked {
        Some(mut l) => {
            if l.key.is_empty() {
                l.key = key.to_vec();
            }
            Ok(Again::Locked(Box::new(l)))
        }
        None => Err(SnapshotError::Key {
            key: key.to_vec(),
            message: format!("{e:?}"),
        }),
    }
}

/// What the primary says about a lock's transaction.
pub(super) enum LockFate {
    /// Committed (`Some(commit_ts)`) or rolled back (`None`): resolve the lock accordingly.
    Resolve(Option<Ts>),
    /// Alive, and will commit after the read ts: skip the lock.
    Bypass,
    /// Alive and not pushed, or its primary not written yet: wait.
    Wait,
}

/// The raw key an encoded region start corresponds to (empty = −∞ / +∞).
pub(super) fn raw_of(encoded: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if encoded.is_empty() {
        return Ok(out);
    }
    match decode_bytes(encoded, &mut out) {
        Ok([]) => Ok(out),
        _ => Err(SnapshotError::Boundary(encoded.to_vec())),
    }
}

impl SnapshotReader {
    /// A reader locating regions through `pd`.
    pub fn new(pd: PdClient, cfg: SnapshotConfig) -> SnapshotReader {
        SnapshotReader {
            pd,
            cfg,
            cache: Mutex::new(RegionCache::new()),
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, RegionCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The region holding the keys just below raw `end` (where a reverse scan reads next).
    async fn locate_before(&self, end: &[u8]) -> Result<Option<RegionInfo>> {
        let mut enc = Vec::new();
        encode_key_into(end, &mut enc);
        if let Some(r) = self.cache().locate_before(&enc).cloned() {
            return Ok(Some(r));
        }
        let r = match self.pd.get_region(&enc).await? {
            Some(r) if r.span.start.as_slice() < enc.as_slice() => Some(r),
            _ => self.pd.get_prev_region(&enc).await?,
        };
        if let Some(r) = &r {
            self.cache().insert(r.clone());
        }
        Ok(r)
    }

    async fn locate(&self, raw: &[u8]) -> Result<Option<RegionInfo>> {
        let mut enc = Vec::new();
        encode_key_into(raw, &mut enc);
        if let Some(r) = self.cache().locate(&enc).cloned() {
            return Ok(Some(r));
        }
        let r = self.pd.get_region(&enc).await?;
        if let Some(r) = &r {
            self.cache().insert(r.clone());
        }
        Ok(r)
    }

    async fn client(&self, store_id: u64) -> std::result::Result<TikvClient<Channel>, Again> {
        if let Some(c) = self
            .clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&store_id)
        {
            return Ok(c.clone());
        }
        let store = self.pd.get_store(store_id).await.map_err(|e| match e {
            PdError::Refused(why) => Again::Refused(why),
            e => Again::Region(e.to_string()),
        })?;
        let ch = dial(&store.address, self.cfg.connect_timeout, self.pd.tls())
            .await
            .map_err(|s| {
                if crate::security::is_refusal(&s) {
                    Again::Refused(s.message().to_string())
                } else {
                    Again::Region(s.to_string())
                }
            })?;
        let c = TikvClient::new(ch).max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE);
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(store_id, c.clone());
        Ok(c)
    }

    pub(super) fn on_region_error(
        &self,
        r: &RegionInfo,
        e: &tibinlog_proto::errorpb::Error,
    ) -> String {
        let hint = e
            .not_leader
            .as_ref()
            .and_then(|nl| nl.leader.as_ref())
            .map(|p| p.store_id)
            .filter(|s| *s != 0);
        let mut cache = self.cache();
        match hint {
            Some(store) => {
                cache.update_leader(r.id, store);
            }
            None => cache.invalidate(r.id),
        }
        format!("{e:?}")
    }

    pub(super) fn on_transport_error(&self, r: &RegionInfo, s: Status) -> Again {
        if let Some(store) = r.leader_store() {
            self.clients
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&store);
        }
        self.cache().invalidate(r.id);
        let s = crate::security::classify(s, &format!("store {}", r.leader_store().unwrap_or(0)));
        if crate::security::is_refusal(&s) {
            return Again::Refused(s.message().to_string());
        }
        Again::Region(s.to_string())
    }

    /// Runs `attempt` (a read at `ts`) until it yields data, handling region retries and locks.
    pub(super) async fn retrying<T, F, Fut>(&self, at: At<'_>, ts: Ts, mut attempt: F) -> Result<T>
    where
        F: FnMut(RegionInfo, TikvClient<Channel>, Vec<u64>) -> Fut,
        Fut: Future<Output = Result<std::result::Result<T, Again>>>,
    {
        let mut region_retries = 0u32;
        let mut lock_wait = Duration::ZERO;
        let mut lock_step = Duration::from_millis(10);
        let mut bypass: Vec<u64> = Vec::new();
        let key = at.key();
        loop {
            let located = match at {
                At::Key(k) => self.locate(k).await?,
                At::Before(k) => self.locate_before(k).await?,
            };
            let outcome = match located {
                None => Again::Region("PD knows no region".into()),
                Some(r) => match r.leader_store() {
                    None => {
                        self.cache().invalidate(r.id);
                        Again::Region("region has no leader".into())
                    }
                    Some(store) => match self.client(store).await {
                        Err(e) => {
                            self.cache().invalidate(r.id);
                            e
                        }
                        Ok(c) => match attempt(r, c, bypass.clone()).await? {
                            Ok(v) => return Ok(v),
                            Err(again) => again,
                        },
                    },
                },
            };
            match outcome {
                Again::Refused(why) => {
                    return Err(SnapshotError::Refused(crate::security::Refused(why)))
                }
                Again::Region(last) => {
                    region_retries += 1;
                    if region_retries > self.cfg.max_region_retries {
                        return Err(SnapshotError::Region {
                            key: key.to_vec(),
                            retries: region_retries - 1,
                            last,
                        });
                    }
                    let ms = (2u64 << region_retries.min(8)).min(500);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                Again::Locked(lock) => match self.lock_fate(&lock, ts).await? {
                    LockFate::Resolve(commit) => {
                        tracing::debug!(
                            lock_ts = lock.lock_version,
                            committed = commit.map(|c| c.0),
                            "read resolves a lock"
                        );
                        self.resolve_lock(&lock.key, Ts(lock.lock_version), commit)
                            .await?;
                    }
                    LockFate::Bypass => {
                        if !bypass.contains(&lock.lock_version) {
                            bypass.push(lock.lock_version);
                        }
                    }
                    LockFate::Wait => {
                        let lock_ts = Ts(lock.lock_version);
                        if lock_wait >= self.cfg.lock_wait_max {
                            return Err(SnapshotError::LockTimeout {
                                key: lock.key.clone(),
                                lock_ts,
                            });
                        }
                        tracing::debug!(ts = lock_ts.0, "read met a lock, waiting");
                        tokio::time::sleep(lock_step).await;
                        lock_wait += lock_step;
                        lock_step = (lock_step * 2).min(Duration::from_millis(500));
                    }
                },
            }
        }
    }

    /// What to do about `lock`, met by a read at `read_ts`: asks its primary
    /// (`KvCheckTxnStatus`, which pushes a live transaction's min commit ts above `read_ts`).
    async fn lock_fate(&self, lock: &kvrpcpb::LockInfo, read_ts: Ts) -> Result<LockFate> {
        let lock_ts = Ts(lock.lock_version);
        // Only an expired lock may be rolled back when its primary has neither a lock nor a
        // record: a live transaction may not have written its primary yet.
        let now = self.pd.tso().await?;
        let expired = lock_ts.physical_ms().saturating_add(lock.lock_ttl) < now.physical_ms();
        let primary = lock.primary_lock.clone();
        let req = move |r: &RegionInfo| kvrpcpb::CheckTxnStatusRequest {
            context: context(r, &[]),
            primary_key: primary.clone(),
            lock_ts: lock_ts.0,
            caller_start_ts: read_ts.0,
            current_ts: now.0,
            rollback_if_not_exist: expired,
            ..Default::default()
        };
        let resp = Box::pin(
            self.retrying(At::Key(&lock.primary_lock), read_ts, |r, mut c, _| {
                let req = req(&r);
                async move {
                    let resp = match c.kv_check_txn_status(req).await {
                        Ok(resp) => resp.into_inner(),
                        Err(s) => return Ok(Err(self.on_transport_error(&r, s))),
                    };
                    if let Some(e) = resp.region_error {
                        return Ok(Err(Again::Region(self.on_region_error(&r, &e))));
                    }
                    Ok(Ok(resp))
                }
            }),
        )
        .await?;
        if let Some(e) = resp.error {
            if e.txn_lock_not_found.is_some() {
                return Ok(LockFate::Wait);
            }
            return Err(SnapshotError::Key {
                key: lock.primary_lock.clone(),
                message: format!("{e:?}"),
            });
        }
        if let Some(primary) = resp.lock_info.as_ref().filter(|l| l.use_async_commit) {
            if resp.commit_version == 0 {
                return self.async_commit_fate(primary, lock_ts).await;
            }
        }
        Ok(if resp.commit_version != 0 {
            LockFate::Resolve(Some(Ts(resp.commit_version)))
        } else if resp.lock_ttl == 0 {
            LockFate::Resolve(None)
        } else if resp
            .lock_info
            .as_ref()
            .is_some_and(|l| l.min_commit_ts > read_ts.0)
        {
            LockFate::Bypass
        } else {
            LockFate::Wait
        })
    }

    /// Commits (`commit`) or rolls back the lock of `lock_ts` on raw `key` (`KvResolveLock`).
    async fn resolve_lock(&self, key: &[u8], lock_ts: Ts, commit: Option<Ts>) -> Result<()> {
        let resp = Box::pin(self.retrying(At::Key(key), lock_ts, |r, mut c, _| {
            let req = kvrpcpb::ResolveLockRequest {
                context: context(&r, &[]),
                start_version: lock_ts.0,
                commit_version: commit.map_or(0, |c| c.0),
                keys: vec![key.to_vec()],
                ..Default::default()
            };
            async move {
                let resp = match c.kv_resolve_lock(req).await {
                    Ok(resp) => resp.into_inner(),
                    Err(s) => return Ok(Err(self.on_transport_error(&r, s))),
                };
                if let Some(e) = resp.region_error {
                    return Ok(Err(Again::Region(self.on_region_error(&r, &e))));
                }
                Ok(Ok(resp))
            }
        }))
        .await?;
        match resp.error {
            None => Ok(()),
            Some(e) => Err(SnapshotError::Key {
                key: key.to_vec(),
                message: format!("{e:?}"),
            }),
        }
    }

    /// The value of raw `key` at `ts`, or `None` if absent (or deleted).
    pub async fn get(&self, key: &[u8], ts: Ts) -> Result<Option<Vec<u8>>> {
        self.retrying(At::Key(key), ts, |r, mut c, bypass| async move {
            let req = kvrpcpb::GetRequest {
                context: context(&r, &bypass),
                key: key.to_vec(),
                version: ts.0,
                need_commit_ts: false,
            };
            let resp = match c.kv_get(req).await {
                Ok(resp) => resp.into_inner(),
                Err(s) => return Ok(Err(self.on_transport_error(&r, s))),
            };
            if let Some(e) = resp.region_error {
                return Ok(Err(Again::Region(self.on_region_error(&r, &e))));
            }
            if let Some(e) = resp.error {
                return key_error(key, e).map(Err);
            }
            Ok(Ok((!resp.not_found).then_some(resp.value)))
        })
        .await
    }

    /// Every `(key, value)` in raw `[start, end)` at `ts` in key order (`end` empty = no bound).
    pub async fn scan(&self, start: &[u8], end: &[u8], ts: Ts) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut cur = start.to_vec();
        let batch = self.cfg.scan_batch.max(1);
        loop {
            let (pairs, next) = self.scan_page(&cur, end, ts, batch).await?;
            out.extend(pairs.into_iter().map(|(k, v)| (Vec::from(k), Vec::from(v))));
            match next {
                Some(n) => cur = n,
                None => return Ok(out),
            }
        }
    }

    /// One page of raw `[start, end)` at `ts`: at most `limit` pairs, inside one region, in
    /// key order, and the key to continue from (`None` when the range is done).
    pub async fn scan_page(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Ts,
        limit: u32,
    ) -> Result<ScanPage> {
        if !end.is_empty() && start >= end {
            return Ok((Vec::new(), None));
        }
        let batch = limit.max(1);
        let from = start.to_vec();
        self.retrying(At::Key(&from), ts, |r, mut c, bypass| {
            let from = from.clone();
            async move {
                let region_end = raw_of(&r.span.end)?;
                let upper =
                    if region_end.is_empty() || (!end.is_empty() && end <= region_end.as_slice()) {
                        end.to_vec()
                    } else {
                        region_end.clone()
                    };
                let req = kvrpcpb::ScanRequest {
                    context: context(&r, &bypass),
                    start_key: from.clone(),
                    end_key: upper.clone(),
                    limit: batch,
                    version: ts.0,
                    ..Default::default()
                };
                let (pairs, full) = match self.scan_once(&r, &mut c, req, &from).await? {
                    Ok(page) => page,
                    Err(again) => return Ok(Err(again)),
                };
                let next = if full {
                    pairs.last().map(|(k, _): &(Bytes, Bytes)| {
                        let mut n = k.to_vec();
                        n.push(0);
                        n
                    })
                } else if upper.is_empty() || upper.as_slice() == end {
                    None
                } else {
                    Some(upper)
                };
                Ok(Ok((pairs, next)))
            }
        })
        .await
    }
}

impl SnapshotReader {
    /// One page of raw `[start, end)` at `ts` read downwards: at most `limit` pairs, inside
    /// one region, in descending key order, and the exclusive upper bound to continue from
    /// (`None` when the range is done). `end` must be bounded.
    pub async fn scan_page_rev(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Ts,
        limit: u32,
    ) -> Result<ScanPage> {
        if end.is_empty() {
            return Err(SnapshotError::Aborted(
                "a reverse scan needs an upper bound".into(),
            ));
        }
        if start >= end {
            return Ok((Vec::new(), None));
        }
        let batch = limit.max(1);
        self.retrying(At::Before(end), ts, |r, mut c, bypass| async move {
            let region_start = raw_of(&r.span.start)?;
            let lower = if region_start.as_slice() > start {
                region_start
            } else {
                start.to_vec()
            };
            // Reverse: `start_key` is the exclusive upper bound, `end_key` the inclusive lower.
            let req = kvrpcpb::ScanRequest {
                context: context(&r, &bypass),
                start_key: end.to_vec(),
                end_key: lower.clone(),
                limit: batch,
                version: ts.0,
                reverse: true,
                ..Default::default()
            };
            let (pairs, full) = match self.scan_once(&r, &mut c, req, end).await? {
                Ok(page) => page,
                Err(again) => return Ok(Err(again)),
            };
            let next = if full {
                pairs.last().map(|(k, _): &(Bytes, Bytes)| k.to_vec())
            } else if lower.as_slice() <= start {
                None
            } else {
                Some(lower)
            };
            Ok(Ok((pairs, next)))
        })
        .await
    }
}

impl SnapshotReader {
    /// One `KvScan` in region `r`: its pairs and whether the page came back full, or why the
    /// read must be tried again (`key` names a lock met on the request as a whole).
    async fn scan_once(
        &self,
        r: &RegionInfo,
        c: &mut TikvClient<Channel>,
        req: kvrpcpb::ScanRequest,
        key: &[u8],
    ) -> Result<std::result::Result<(Vec<(Bytes, Bytes)>, bool), Again>> {
        let batch = req.limit;
        let resp = match c.kv_scan(req).await {
            Ok(resp) => resp.into_inner(),
            Err(s) => return Ok(Err(self.on_transport_error(r, s))),
        };
        if let Some(e) = resp.region_error {
            return Ok(Err(Again::Region(self.on_region_error(r, &e))));
        }
        if let Some(e) = resp.error {
            return key_error(key, e).map(Err);
        }
        let full = resp.pairs.len() >= batch as usize;
        let mut pairs = Vec::with_capacity(resp.pairs.len());
        for p in resp.pairs {
            if let Some(e) = p.error {
                return key_error(&p.key, *e).map(Err);
            }
            pairs.push((p.key, p.value));
        }
        Ok(Ok((pairs, full)))
    }
}

/// A page read running on the runtime ([`BlockingSnapshotReader::start_page`]); aborted when
/// dropped.
#[derive(Debug)]
pub struct PageRead(tokio::task::JoinHandle<Result<ScanPage>>);

impl Drop for PageRead {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// [`SnapshotReader`] behind the mounter's synchronous [`MetaReader`].
///
/// Call it from a blocking thread (`spawn_blocking`, or any thread outside the runtime), or
/// from a task of a multi-threaded runtime (it then uses `block_in_place`). From a task of a
/// current-thread runtime it would deadlock the runtime, and tokio panics instead.
#[derive(Debug, Clone)]
pub struct BlockingSnapshotReader {
    reader: Arc<SnapshotReader>,
    handle: Handle,
}

impl BlockingSnapshotReader {
    /// Blocks on `handle`'s runtime for every read.
    pub fn new(reader: Arc<SnapshotReader>, handle: Handle) -> BlockingSnapshotReader {
        BlockingSnapshotReader { reader, handle }
    }

    /// [`SnapshotReader::scan_page`], blocking.
    pub fn scan_page(&self, start: &[u8], end: &[u8], ts: Ts, limit: u32) -> Result<ScanPage> {
        self.block(self.reader.scan_page(start, end, ts, limit))
    }

    /// [`SnapshotReader::batch_get`], blocking.
    pub fn batch_get(&self, keys: &[Vec<u8>], ts: Ts) -> Result<Vec<(Bytes, Bytes)>> {
        self.block(self.reader.batch_get(keys, ts))
    }

    /// [`SnapshotReader::scan_page`] started on the runtime now (the caller works on the page
    /// before while it is read); [`Self::wait_page`] takes its result. Dropping the handle
    /// abandons the read.
    pub fn start_page(&self, start: Vec<u8>, end: Vec<u8>, ts: Ts, limit: u32) -> PageRead {
        let reader = self.reader.clone();
        PageRead(
            self.handle
                .spawn(async move { reader.scan_page(&start, &end, ts, limit).await }),
        )
    }

    /// [`SnapshotReader::scan_page_rev`] started on the runtime now, as [`Self::start_page`].
    pub fn start_page_rev(&self, start: Vec<u8>, end: Vec<u8>, ts: Ts, limit: u32) -> PageRead {
        let reader = self.reader.clone();
        PageRead(
            self.handle
                .spawn(async move { reader.scan_page_rev(&start, &end, ts, limit).await }),
        )
    }

    /// The result of a [`Self::start_page`], blocking until it is there.
    pub fn wait_page(&self, mut page: PageRead) -> Result<ScanPage> {
        let joined = self.block(&mut page.0);
        match joined {
            Ok(r) => r,
            Err(e) => Err(SnapshotError::Aborted(format!("page read task: {e}"))),
        }
    }

    fn block<T>(&self, f: impl Future<Output = T>) -> T {
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.handle.block_on(f))
            }
            _ => self.handle.block_on(f),
        }
    }
}

fn mounter_error(ts: Ts, e: SnapshotError) -> MounterError {
    MounterError::Snapshot {
        ts,
        source: Box::new(e),
    }
}

impl MetaReader for BlockingSnapshotReader {
    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Ts,
    ) -> crate::mounter::error::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.block(self.reader.scan(start, end, ts))
            .map_err(|e| mounter_error(ts, e))
    }

    fn get(&self, key: &[u8], ts: Ts) -> crate::mounter::error::Result<Option<Vec<u8>>> {
        self.block(self.reader.get(key, ts))
            .map_err(|e| mounter_error(ts, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tidb::codec::encode_bytes;

    #[test]
    fn region_boundaries_decode_to_raw_keys() {
        let mut enc = Vec::new();
        encode_bytes(&mut enc, b"mDB:1");
        assert_eq!(raw_of(&enc).expect("complete"), b"mDB:1");
        assert_eq!(raw_of(b"").expect("unbounded"), b"");
        assert!(raw_of(&enc[..5]).is_err(), "truncated encoding");
    }
}

//! A TiDB-like transaction client over the core: start ts from the TSO, buffered mutations,
//! and real Percolator commits (2PC, async commit, 1PC) whose raft writes the CDC endpoints
//! observe.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::oneshot;

use super::cluster::SimCluster;
use super::error::{Result, ServerError};
use crate::sim::mvcc::{Mutation, PrewriteRequest};
use crate::sim::{SimError, Ts};

/// Lock TTL of an ordinary prewrite (TiDB's default `ManagedLockTTL` is 20 s; 3 s is TiKV's
/// minimum TTL and keeps abandoned locks short-lived).
pub const DEFAULT_LOCK_TTL_MS: u64 = 3_000;

/// An open transaction. Dropping it without committing leaves nothing behind (nothing is
/// written before commit).
#[derive(Debug)]
pub struct SimTxn {
    cluster: SimCluster,
    start_ts: Ts,
    /// Raw key → new value (`None` = delete), in key order; the first key is the primary.
    mutations: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    txn_source: u64,
}

impl SimTxn {
    pub(super) fn new(cluster: SimCluster, start_ts: Ts) -> Self {
        Self {
            cluster,
            start_ts,
            mutations: BTreeMap::new(),
            txn_source: 0,
        }
    }

    /// The transaction's start ts (its identity in every CDC row).
    pub fn start_ts(&self) -> Ts {
        self.start_ts
    }

    /// Writes `value` at raw `key`.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.mutations.insert(key.into(), Some(value.into()));
    }

    /// Deletes raw `key`.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        self.mutations.insert(key.into(), None);
    }

    /// Tags the transaction's rows with a `txn_source` (CDC loop filtering: TiKV drops rows
    /// with bits 0–7 set when the request sets `filter_loop`, and rows with a higher bit always).
    pub fn set_txn_source(&mut self, txn_source: u64) {
        self.txn_source = txn_source;
    }

    fn request(&self) -> Result<(Vec<Vec<u8>>, PrewriteRequest)> {
        let keys: Vec<Vec<u8>> = self.mutations.keys().cloned().collect();
        let primary = keys
            .first()
            .cloned()
            .ok_or(SimError::InvalidRequest("empty transaction"))?;
        let mutations = self
            .mutations
            .iter()
            .map(|(k, v)| match v {
                Some(v) => Mutation::Put(k.clone(), v.clone()),
                None => Mutation::Delete(k.clone()),
            })
            .collect();
        let req = PrewriteRequest {
            mutations,
            primary,
            start_ts: self.start_ts,
            lock_ttl_ms: DEFAULT_LOCK_TTL_MS,
            txn_size: keys.len() as u64,
            min_commit_ts: self.start_ts.next(),
            txn_source: self.txn_source,
            ..Default::default()
        };
        Ok((keys, req))
    }

    /// Two-phase commit: prewrite every key, take a commit ts from the TSO, commit the primary,
    /// then the secondaries. Returns the commit ts.
    pub async fn commit(self) -> Result<Ts> {
        let (keys, req) = self.request()?;
        self.cluster.prewrite(&req)?;
        tokio::task::yield_now().await;
        commit_keys(&self.cluster, &keys, self.start_ts, None)
    }

    /// One-phase commit: no locks, the commit ts is computed by the store (above its max ts),
    /// and the rows arrive as COMMITTED. Returns the commit ts.
    pub async fn commit_1pc(self) -> Result<Ts> {
        let (_, mut req) = self.request()?;
        req.try_one_pc = true;
        let r = self.cluster.prewrite(&req)?;
        Ok(r.one_pc_commit_ts)
    }

    /// Async commit: the prewrite computes the commit ts (`min_commit_ts`, not from the TSO)
    /// and the transaction is committed at it. Returns the commit ts.
    pub async fn commit_async(self) -> Result<Ts> {
        let (keys, mut req) = self.request()?;
        req.use_async_commit = true;
        req.secondaries = keys.iter().skip(1).cloned().collect();
        let commit_ts = self.cluster.prewrite(&req)?.min_commit_ts;
        tokio::task::yield_now().await;
        commit_keys(&self.cluster, &keys, self.start_ts, Some(commit_ts))
    }

    /// Prewrites every key with a lock TTL of `ttl`, commits only the primary (the smallest
    /// key) at a fresh TSO and leaves the secondaries locked: a client that died right after its
    /// commit point. Readers must find the primary committed and resolve the rest. Returns the
    /// commit ts.
    pub async fn commit_primary_only(self, ttl: Duration) -> Result<Ts> {
        let (keys, mut req) = self.request()?;
        req.lock_ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.cluster.prewrite(&req)?;
        let primary = keys
            .first()
            .ok_or(SimError::InvalidRequest("empty transaction"))?;
        commit_keys(
            &self.cluster,
            std::slice::from_ref(primary),
            self.start_ts,
            None,
        )
    }

    /// Prewrites every key with a lock TTL of `ttl` and never commits: a client that died
    /// before its commit point. Once the TTL has passed, a reader may roll the locks back.
    pub async fn abandon(self, ttl: Duration) -> Result<()> {
        let (_, mut req) = self.request()?;
        req.lock_ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.cluster.prewrite(&req)?;
        Ok(())
    }

    /// Async commit abandoned by its client: prewrites with a lock TTL of `ttl` every key, or
    /// every key but the last when `all` is false (a client that died mid-prewrite), and never
    /// commits. The primary lists every other key as its secondaries. Returns the commit ts
    /// the prewrite computed (the transaction's, once every key is prewritten).
    pub async fn abandon_async(self, ttl: Duration, all: bool) -> Result<Ts> {
        let (keys, mut req) = self.request()?;
        req.use_async_commit = true;
        req.secondaries = keys.iter().skip(1).cloned().collect();
        req.lock_ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if !all && req.mutations.len() > 1 {
            req.mutations.pop();
        }
        Ok(self.cluster.prewrite(&req)?.min_commit_ts)
    }

    /// Prewrites now and commits after `hold` (the lock stays visible to readers and holds
    /// back resolved ts meanwhile). Commit failures are reported through the handle.
    pub async fn commit_after(self, hold: Duration) -> Result<HeldLock> {
        let (keys, mut req) = self.request()?;
        req.lock_ttl_ms = u64::try_from(hold.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(DEFAULT_LOCK_TTL_MS);
        self.cluster.prewrite(&req)?;
        let (tx, rx) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let cluster = self.cluster.clone();
        let start_ts = self.start_ts;
        let cancel = cluster.cancel_token();
        let tracker = cluster.tracker().clone();
        tracker.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {
                    let _ = tx.send(Err(ServerError::Shutdown));
                }
                _ = tokio::time::sleep(hold) => {
                    let _ = tx.send(commit_keys(&cluster, &keys, start_ts, None));
                }
                Ok(()) = release_rx => {
                    let _ = tx.send(commit_keys(&cluster, &keys, start_ts, None));
                }
            }
        });
        Ok(HeldLock {
            start_ts,
            done: rx,
            release: Some(release_tx),
        })
    }
}

/// Commits the primary (`keys[0]`) then the secondaries at `commit_ts`, or at a fresh TSO.
fn commit_keys(
    cluster: &SimCluster,
    keys: &[Vec<u8>],
    start_ts: Ts,
    commit_ts: Option<Ts>,
) -> Result<Ts> {
    let (primary, secondaries) = keys
        .split_first()
        .ok_or(SimError::InvalidRequest("empty transaction"))?;
    let commit_ts = cluster.shared().apply(|core| {
        let commit_ts = commit_ts.unwrap_or_else(|| core.ts());
        let out = core.commit(std::slice::from_ref(primary), start_ts, commit_ts)?;
        Ok::<_, SimError>((commit_ts, out))
    })?;
    if !secondaries.is_empty() {
        cluster.shared().apply(|core| {
            core.commit(secondaries, start_ts, commit_ts)
                .map(|o| ((), o))
        })?;
    }
    Ok(commit_ts)
}

/// A prewritten transaction whose commit is delayed ([`SimTxn::commit_after`]).
#[derive(Debug)]
pub struct HeldLock {
    start_ts: Ts,
    done: oneshot::Receiver<Result<Ts>>,
    /// Commits before the hold ends ([`HeldLock::commit_now`]).
    release: Option<oneshot::Sender<()>>,
}

impl HeldLock {
    /// start_ts of the locking transaction.
    pub fn start_ts(&self) -> Ts {
        self.start_ts
    }

    /// Waits for the delayed commit; returns its commit ts.
    pub async fn committed(self) -> Result<Ts> {
        self.done.await.map_err(|_| ServerError::Shutdown)?
    }

    /// Commits now instead of when the hold ends; returns the commit ts. Tests that must
    /// observe the lock while it is held take a long hold and end it with this, so that the
    /// commit never races what they check.
    pub async fn commit_now(mut self) -> Result<Ts> {
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
        self.committed().await
    }
}

/// Transactions on the cluster (here rather than with the cluster, so that the cluster does
/// not depend on its transaction client).
impl SimCluster {
    /// Begins a transaction with a start ts from the TSO.
    pub async fn begin(&self) -> Result<SimTxn> {
        self.check_alive()?;
        Ok(SimTxn::new(self.clone(), self.tso()))
    }

    /// Writes `value` at raw `key` in a transaction that stays prewritten (locked) for `hold`
    /// and then commits; the lock holds back resolved ts and blocks readers meanwhile.
    pub async fn hold_lock(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        hold: Duration,
    ) -> Result<HeldLock> {
        let mut t = self.begin().await?;
        t.put(key, value);
        t.commit_after(hold).await
    }
}

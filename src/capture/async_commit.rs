//! Async-commit locks met by a snapshot read. An async-commit transaction is committed as soon
//! as every one of its keys is prewritten, at the largest min commit ts of its locks; its
//! primary's TTL decides nothing (TiKV neither rolls back nor pushes such a primary). So a
//! reader that meets one of its locks asks the secondaries the primary lists
//! (`KvCheckSecondaryLocks`, one key per call): one committed decides the commit ts, one
//! rolled back (or found without lock and record, which TiKV rolls back on the spot so the
//! transaction can no longer commit) decides a rollback, and all locked means committed at the
//! largest min commit ts of the primary and every secondary. The reader then resolves its own
//! key accordingly, as TiDB's reader does (client-go's `resolveAsyncCommitLock`).

use tibinlog_proto::kvrpcpb;

use super::snapshot::{context, Again, At, LockFate, Result, SnapshotError, SnapshotReader};
use crate::model::Ts;

impl SnapshotReader {
    /// The fate of transaction `lock_ts`, whose primary lock `primary` uses async commit.
    pub(super) async fn async_commit_fate(
        &self,
        primary: &kvrpcpb::LockInfo,
        lock_ts: Ts,
    ) -> Result<LockFate> {
        let mut commit = Ts(primary.min_commit_ts);
        for key in &primary.secondaries {
            let resp = Box::pin(self.retrying(At::Key(key), lock_ts, |r, mut c, _| {
                let req = kvrpcpb::CheckSecondaryLocksRequest {
                    context: context(&r, &[]),
                    keys: vec![key.clone()],
                    start_version: lock_ts.0,
                };
                async move {
                    let resp = match c.kv_check_secondary_locks(req).await {
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
            if let Some(e) = resp.error {
                return Err(SnapshotError::Key {
                    key: key.clone(),
                    message: format!("{e:?}"),
                });
            }
            if resp.commit_ts != 0 {
                return Ok(LockFate::Resolve(Some(Ts(resp.commit_ts))));
            }
            match resp.locks.first() {
                Some(l) => commit = commit.max(Ts(l.min_commit_ts)),
                None => return Ok(LockFate::Resolve(None)),
            }
        }
        Ok(LockFate::Resolve(Some(commit)))
    }
}

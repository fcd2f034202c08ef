//! Helpers the setup, the tasks and the handle share: poison-tolerant locking and TiDB-layer
//! calls through the cluster.

use std::sync::{Mutex, MutexGuard};

use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::server::SimCluster;

/// Locks `m`, also when a panicking holder poisoned it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs a TiDB-layer call on the core through [`SimCluster::apply`], so that its writes reach
/// the change streams; TiDB errors travel inside the closure's result.
pub(super) fn apply_tidb<R>(
    cluster: &SimCluster,
    f: impl FnOnce(&mut SimCore) -> crate::sim::tidb::Result<(R, Vec<StoreOutput>)>,
) -> anyhow::Result<R> {
    let r = cluster.apply(|core| {
        Ok::<_, crate::sim::SimError>(match f(core) {
            Ok((r, out)) => (Ok(r), out),
            Err(e) => (Err(e), Vec::new()),
        })
    })?;
    Ok(r?)
}

//! The driver task: steps incremental scans and ticks resolved ts.
//!
//! Each scan step sends one ≤ 32 KiB chunk per running scan and releases the lock, so writes
//! made between steps reach the stream as realtime rows interleaved with the scan (TiKV's
//! Initializing state). While no scan runs the driver sleeps until a registration kicks it or
//! the next `min-ts-interval` tick (TiKV `cdc.min-ts-interval`, 1 s) is due.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::state::Shared;

/// Steps every running scan once; true while some scan still runs (or waits for a permit).
pub fn step_scans(shared: &Shared) -> bool {
    let mut st = shared.lock();
    let out = st.core.drive_scans();
    st.dispatch(out);
    let stores: Vec<u64> = st.core.cluster.stores().map(|s| s.id).collect();
    // After `drive_scans` a pending registration implies a full set of running scans, so
    // "some store has a running scan" is exactly "there is scan work left".
    stores.into_iter().any(|s| {
        st.core
            .endpoint(s)
            .map(|ep| !ep.initializing().is_empty())
            .unwrap_or(false)
    })
}

/// One resolved-ts tick on every store.
pub fn tick_resolved_ts(shared: &Shared) {
    let mut st = shared.lock();
    let out = st.core.tick_resolved_ts();
    st.dispatch(out);
}

/// Runs until `cancel` fires.
pub async fn run(
    shared: Arc<Shared>,
    scan_step_interval: Duration,
    resolved_ts_interval: Duration,
    cancel: CancellationToken,
) {
    let mut resolved = tokio::time::interval(resolved_ts_interval);
    resolved.set_missed_tick_behavior(MissedTickBehavior::Delay);
    resolved.tick().await; // the first tick is immediate; nothing is registered yet
    loop {
        let busy = step_scans(&shared);
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = resolved.tick() => tick_resolved_ts(&shared),
            _ = shared.scan_kick.notified(), if !busy => {}
            _ = tokio::time::sleep(scan_step_interval), if busy => {}
        }
    }
}

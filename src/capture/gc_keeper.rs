//! Keeps PD's GC from collecting history capture still needs: a restart subscribes again from
//! the checkpoint, so every version after it must survive (docs/upstream-facts.md, "Service GC
//! safe points").
//!
//! A service safe point named by the configured service id is held at `checkpoint − 1` with a
//! TTL, and refreshed every `interval` while running (with the latest checkpoint, or the same
//! one to renew the TTL). If the process dies the entry expires after the TTL.
//!
//! PD ≤ 8.5 silently refuses a service safe point below the current minimum and answers with
//! that minimum; a returned minimum above ours therefore means history we need may already be
//! gone: [`GcError::SafePointPassed`], fatal for the changefeed (TiCDC: "GC TTL exceeded").

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::pd::{PdClient, PdError};
use crate::model::Ts;

/// TiCDC's default `gc-ttl`: 24 h.
pub const DEFAULT_GC_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// TiCDC updates its service safe point at most once per minute.
pub const DEFAULT_GC_UPDATE_INTERVAL: Duration = Duration::from_secs(60);

/// Errors of the GC keeper.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// PD could not be reached for good (retryable errors are retried at the next tick).
    #[error(transparent)]
    Pd(#[from] PdError),
    /// PD's minimum service safe point is already above what we need.
    #[error("GC safe point {min_safe_point} passed the needed {wanted}")]
    SafePointPassed { wanted: Ts, min_safe_point: Ts },
}

/// Which service safe point to hold and how.
#[derive(Debug, Clone)]
pub struct GcKeeperConfig {
    /// PD service id, e.g. `tibinlog-<instance>`.
    pub service_id: String,
    pub ttl: Duration,
    pub interval: Duration,
}

impl GcKeeperConfig {
    /// Defaults for `service_id`.
    pub fn new(service_id: impl Into<String>) -> GcKeeperConfig {
        GcKeeperConfig {
            service_id: service_id.into(),
            ttl: DEFAULT_GC_TTL,
            interval: DEFAULT_GC_UPDATE_INTERVAL,
        }
    }

    fn ttl_secs(&self) -> i64 {
        i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX).max(1)
    }
}

/// Holds the service safe point at `checkpoint − 1`.
#[derive(Debug)]
pub struct GcKeeper;

impl GcKeeper {
    /// Sets the safe point once for `checkpoint`; fails if PD's minimum is already above it.
    /// Call it before capture starts from `checkpoint`.
    pub async fn hold(pd: &PdClient, cfg: &GcKeeperConfig, checkpoint: Ts) -> Result<Ts, GcError> {
        let wanted = checkpoint.prev();
        let min_safe_point = pd
            .update_service_gc_safe_point(&cfg.service_id, cfg.ttl_secs(), wanted)
            .await?;
        if min_safe_point > wanted {
            return Err(GcError::SafePointPassed {
                wanted,
                min_safe_point,
            });
        }
        tracing::debug!(
            ts = wanted.0,
            min = min_safe_point.0,
            "service GC safe point held"
        );
        Ok(min_safe_point)
    }

    /// Removes the service safe point (the changefeed is deleted, not merely stopped).
    pub async fn release(pd: &PdClient, cfg: &GcKeeperConfig) -> Result<(), GcError> {
        pd.update_service_gc_safe_point(&cfg.service_id, 0, Ts::MAX)
            .await?;
        Ok(())
    }

    /// Refreshes the safe point from `checkpoint` now and every `interval` until `cancel`.
    pub fn spawn(
        pd: PdClient,
        cfg: GcKeeperConfig,
        mut checkpoint: watch::Receiver<Ts>,
        cancel: CancellationToken,
    ) -> GcKeeperHandle {
        let (held_tx, held) = watch::channel(Ts::ZERO);
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(cfg.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    _ = tick.tick() => {}
                }
                let ts = *checkpoint.borrow_and_update();
                match GcKeeper::hold(&pd, &cfg, ts).await {
                    Ok(_) => {
                        held_tx.send_replace(ts.prev());
                    }
                    Err(GcError::Pd(e)) if e.is_retryable() => {
                        tracing::warn!(error = %e, "updating the service GC safe point failed");
                    }
                    Err(e) => return Err(e),
                }
            }
        });
        GcKeeperHandle { held, task }
    }
}

/// A running GC keeper.
#[derive(Debug)]
pub struct GcKeeperHandle {
    held: watch::Receiver<Ts>,
    task: JoinHandle<Result<(), GcError>>,
}

impl GcKeeperHandle {
    /// The service safe point last accepted by PD (zero before the first update).
    pub fn held(&self) -> watch::Receiver<Ts> {
        self.held.clone()
    }

    /// Waits for the keeper to stop (after cancellation, or on a fatal error).
    pub async fn join(self) -> Result<(), GcError> {
        match self.task.await {
            Ok(r) => r,
            Err(_) => Ok(()),
        }
    }
}

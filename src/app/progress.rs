//! The progress line: logged every `progress_interval` while the app runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::binlog_store::sink::SinkStats;
use crate::binlog_store::BinlogFiles;
use crate::model::Ts;
use crate::server::status::{CaptureState, CaptureStatus};

/// Logs a progress line every `every`: transactions written, next GNO, checkpoint, lag.
pub(super) async fn progress_log(
    stats: Arc<SinkStats>,
    capture: Arc<CaptureStatus>,
    files: BinlogFiles,
    regions: crate::metrics::CaptureMetrics,
    every: Duration,
    stop: CancellationToken,
) {
    if every.is_zero() {
        return;
    }
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let checkpoint = Ts(stats.checkpoint.load(Ordering::Relaxed));
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let lag_ms = now_ms.saturating_sub(checkpoint.physical_ms());
        let (file, pos) = files.current_end();
        let report = capture.report();
        if report.state != CaptureState::Running {
            warn!(
                capture = report.state.name(),
                error = %report.last_error,
                checkpoint = checkpoint.0,
                file,
                pos,
                "progress: capture is not running"
            );
            continue;
        }
        let (queued, initializing, normal) = regions.region_totals();
        if queued + initializing > 0 {
            let total = queued + initializing + normal;
            info!(
                initialized = normal,
                scanning = initializing,
                queued,
                total,
                "initial scan: {:.1}% of regions initialized",
                normal as f64 * 100.0 / total as f64
            );
        }
        info!(
            txns = stats.txns.load(Ordering::Relaxed),
            skipped = stats.skipped.load(Ordering::Relaxed),
            gno = stats.next_gno.load(Ordering::Relaxed).saturating_sub(1),
            checkpoint = checkpoint.0,
            lag_ms,
            file,
            pos,
            "progress"
        );
    }
}

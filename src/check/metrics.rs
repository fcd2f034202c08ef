//! A check's figures as Prometheus metrics, served on `--status-addr` while it runs (`/metrics`,
//! text format): how far it is (tables, chunks, rows on each side), what it found and what it
//! repaired, and whether both sides are aligned yet.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus::{Encoder, IntCounter, IntGauge, Opts, Registry, TextEncoder};

/// The figures of one check (names `tibinlog_check_<what>`).
#[derive(Debug, Clone)]
pub struct CheckMetrics {
    registry: Registry,
    /// 1 once both sides stand at the same position (a replica held there).
    pub aligned: IntGauge,
    /// Tables to check, and those done.
    pub tables: IntGauge,
    pub tables_done: IntGauge,
    /// Chunks checked.
    pub chunks: IntCounter,
    /// Rows counted on each side.
    pub rows_source: IntCounter,
    pub rows_target: IntCounter,
    /// Differing rows found.
    pub differences: IntCounter,
    /// Repair statements run on the target.
    pub repaired: IntCounter,
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    // Constant, valid names: construction cannot fail.
    let g = IntGauge::with_opts(Opts::new(name, help).namespace(crate::metrics::NAMESPACE))
        .unwrap_or_else(|e| unreachable!("{name}: {e}"));
    let _ = registry.register(Box::new(g.clone()));
    g
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::with_opts(Opts::new(name, help).namespace(crate::metrics::NAMESPACE))
        .unwrap_or_else(|e| unreachable!("{name}: {e}"));
    let _ = registry.register(Box::new(c.clone()));
    c
}

impl Default for CheckMetrics {
    fn default() -> Self {
        let r = Registry::new();
        CheckMetrics {
            aligned: gauge(
                &r,
                "check_aligned",
                "1 once both sides stand at the same position",
            ),
            tables: gauge(&r, "check_tables", "Tables to check"),
            tables_done: gauge(&r, "check_tables_done", "Tables checked"),
            chunks: counter(&r, "check_chunks_total", "Chunks checked"),
            rows_source: counter(&r, "check_rows_source_total", "Rows counted on the source"),
            rows_target: counter(&r, "check_rows_target_total", "Rows counted on the target"),
            differences: counter(&r, "check_differences_total", "Differing rows found"),
            repaired: counter(&r, "check_repair_statements_total", "Repair statements run"),
            registry: r,
        }
    }
}

impl CheckMetrics {
    /// Every metric in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Serves `/metrics` of `metrics` on `addr` until the returned task is aborted; the address
/// it listens on.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<CheckMetrics>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    m.render(),
                )
            }
        }),
    );
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((local, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_render_under_their_names() {
        let m = CheckMetrics::default();
        m.tables.set(3);
        m.chunks.inc_by(7);
        m.differences.inc_by(2);
        let text = m.render();
        for line in [
            "tibinlog_check_tables 3",
            "tibinlog_check_chunks_total 7",
            "tibinlog_check_differences_total 2",
            "tibinlog_check_aligned 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}

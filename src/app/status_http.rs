//! The status listener: Prometheus `/metrics`, the JSON API under `/api/v1/` and a status page
//! at `/` that renders the API.
//!
//! | path | what |
//! |---|---|
//! | `/metrics` | every metric, Prometheus text format |
//! | `/api/v1/status` | capture (state, errors, lags, regions, rows), sorter, binlog, sessions, and the lag history of the last minutes |
//! | `/api/v1/replicas` | dump sessions with their position and lag, and what `COM_REGISTER_SLAVE` gave |
//! | `/api/v1/binlogs` | binlog files with sizes, the end, the GTID sets |
//! | `/` | the page |
//!
//! A sampler records the lags once a second for [`HISTORY`] samples, so that the page can show
//! the last minutes without a Prometheus server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::binlog_store::sink::SinkStats as Stats;
use crate::binlog_store::BinlogFiles;
use crate::metrics::{mirror_counter, Metrics};
use crate::model::Ts;
use crate::server::activity::ProcessRow;
use crate::server::status::CaptureStatus;
use crate::server::Shared;

/// Lag samples kept (one a second: ten minutes).
pub const HISTORY: usize = 600;

/// One sample of the lag history.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Unix seconds.
    pub t: u64,
    /// Seconds behind the wall clock of the durable checkpoint.
    pub checkpoint_lag: f64,
    /// Seconds behind the wall clock of the resolved-ts watermark.
    pub resolved_lag: f64,
    /// Transactions written so far.
    pub transactions: u64,
}

/// What the listener reads.
pub(crate) struct StatusView {
    pub metrics: Arc<Metrics>,
    pub stats: Arc<Stats>,
    pub capture: Arc<CaptureStatus>,
    pub files: BinlogFiles,
    /// The server (its registry covers the MySQL listener and the MariaDB-flavoured one).
    pub server: Arc<Shared>,
    pub sorter: crate::sorter::MetricsHandle,
    pub server_id: u32,
    pub server_uuid: String,
    pub started: Instant,
    pub history: Mutex<VecDeque<Sample>>,
}

fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Seconds from `ts`'s physical time to now (0 for a zero ts or a clock behind it).
fn lag_seconds(ts: Ts, now: Duration) -> f64 {
    if ts == Ts::ZERO {
        return 0.0;
    }
    (now.as_millis() as f64 - ts.physical_ms() as f64).max(0.0) / 1000.0
}

/// A dump session with its lag.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaView {
    pub listener: &'static str,
    pub conn: u32,
    pub user: String,
    pub host: String,
    pub server_id: u32,
    pub gtid: bool,
    pub file: String,
    pub pos: u64,
    pub caught_up: bool,
    pub lag_bytes: u64,
    pub lag_seconds: u64,
    pub sent_bytes: u64,
    pub seconds_connected: u64,
    pub state: String,
    /// What `COM_REGISTER_SLAVE` told (`SHOW REPLICAS`), if the client registered.
    pub registered: Option<Value>,
}

impl StatusView {
    fn checkpoint(&self) -> Ts {
        Ts(self.stats.checkpoint.load(Ordering::Relaxed))
    }

    fn resolved(&self) -> Ts {
        let ms = self.metrics.capture.resolved_ts_ms.get().max(0) as u64;
        Ts(ms << 18)
    }

    /// Binlog bytes after `pos` of `file`, by the durable sizes of `list`.
    fn bytes_after(list: &[(String, u64)], file: &str, pos: u64) -> u64 {
        let Some(i) = list.iter().position(|(n, _)| n == file) else {
            return 0;
        };
        let rest: u64 = list[i + 1..].iter().map(|(_, s)| *s).sum();
        list[i].1.saturating_sub(pos) + rest
    }

    /// Every dump session of every listener.
    pub fn replicas(&self) -> Vec<ReplicaView> {
        let list = self.files.list();
        let now = unix_now();
        let mut out = Vec::new();
        let registry = &self.server.registry;
        let regs = registry.replicas();
        for p in registry.processes() {
            let ProcessRow {
                id,
                user,
                host,
                dump,
                state,
                connected_at,
                ..
            } = p;
            let Some(d) = dump else { continue };
            let lag_bytes = if d.caught_up {
                0
            } else {
                Self::bytes_after(&list, &d.file, d.pos)
            };
            let lag_seconds = if d.caught_up || d.event_secs == 0 {
                0
            } else {
                now.as_secs().saturating_sub(u64::from(d.event_secs))
            };
            let registered = regs.iter().find(|r| r.connection_id == id).map(|r| {
                json!({
                    "server_id": r.info.server_id,
                    "host": r.info.host,
                    "port": r.info.port,
                    "user": r.info.user,
                    "uuid": r.uuid,
                })
            });
            out.push(ReplicaView {
                listener: registry.listener(id).unwrap_or("mysql"),
                conn: id,
                user,
                host,
                server_id: d.server_id,
                gtid: d.gtid,
                file: d.file,
                pos: d.pos,
                caught_up: d.caught_up,
                lag_bytes,
                lag_seconds,
                sent_bytes: d.sent_bytes,
                seconds_connected: now.as_secs().saturating_sub(connected_at),
                state,
                registered,
            });
        }
        out
    }

    /// Sets the metrics read at scrape time.
    pub fn refresh(&self) {
        let now = unix_now();
        let p = &self.metrics.probed;
        p.resolved_lag_seconds
            .set(lag_seconds(self.resolved(), now));
        p.checkpoint_lag_seconds
            .set(lag_seconds(self.checkpoint(), now));
        let report = self.capture.report();
        p.capture_state.set(match report.state {
            crate::server::status::CaptureState::Running => 0,
            crate::server::status::CaptureState::Retrying => 1,
            crate::server::status::CaptureState::Stopped => 2,
            crate::server::status::CaptureState::Standby => 3,
        });
        mirror_counter(&p.capture_restarts, report.restarts);
        let list = self.files.list();
        p.binlog_files.set(list.len() as i64);
        p.binlog_bytes
            .set(list.iter().map(|(_, s)| *s).sum::<u64>() as i64);
        p.last_gno.set(
            self.stats
                .next_gno
                .load(Ordering::Relaxed)
                .saturating_sub(1) as i64,
        );
        mirror_counter(&p.transactions, self.stats.txns.load(Ordering::Relaxed));
        let conns = self.server.registry.connection_count();
        p.connections.set(conns as i64);
        // One walk over the sessions: the dump sessions are the replicas listed.
        let replicas = self.replicas();
        p.dump_sessions.set(replicas.len() as i64);
        for v in [
            &p.replica_lag_bytes,
            &p.replica_lag_seconds,
            &p.replica_file_seq,
            &p.replica_pos,
        ] {
            v.reset();
        }
        for r in replicas {
            let labels = [r.server_id.to_string(), r.conn.to_string()];
            let labels = [labels[0].as_str(), labels[1].as_str()];
            p.replica_lag_bytes
                .with_label_values(&labels)
                .set(r.lag_bytes as i64);
            p.replica_lag_seconds
                .with_label_values(&labels)
                .set(r.lag_seconds as i64);
            let seq = r
                .file
                .rsplit('.')
                .next()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0);
            p.replica_file_seq.with_label_values(&labels).set(seq);
            p.replica_pos.with_label_values(&labels).set(r.pos as i64);
        }
        self.metrics.mirror_sorter(&self.sorter.0.pairs());
    }

    /// `/api/v1/status`.
    pub fn status(&self) -> Value {
        let now = unix_now();
        let report = self.capture.report();
        let c = &self.metrics.capture;
        let (queued, initializing, normal) = c.region_totals();
        let total = queued + initializing + normal;
        let sorter = self.sorter.0.snapshot();
        let list = self.files.list();
        let (end_file, end_pos) = self.files.current_end();
        let r = &self.server.registry;
        let (conns, sessions, dumps) = (
            r.connection_count(),
            r.session_count(),
            r.dump_server_ids().len(),
        );
        let history: Vec<Sample> = self
            .history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .copied()
            .collect();
        json!({
            "version": crate::server::server_version(),
            "server_id": self.server_id,
            "server_uuid": self.server_uuid,
            "uptime_seconds": self.started.elapsed().as_secs(),
            "now": now.as_secs(),
            "capture": {
                "state": report.state.name(),
                "last_error": report.last_error,
                "restarts": report.restarts,
                "recent_errors": report.recent_errors.iter()
                    .map(|(t, e)| json!({"at": t, "error": e})).collect::<Vec<_>>(),
                "resolved_ts": self.resolved().0,
                "resolved_lag_seconds": lag_seconds(self.resolved(), now),
                "checkpoint_ts": self.checkpoint().0,
                "checkpoint_lag_seconds": lag_seconds(self.checkpoint(), now),
                "regions": {
                    "queued": queued,
                    "initializing": initializing,
                    "normal": normal,
                    "initialized_percent": (total > 0).then(|| normal as f64 * 100.0 / total as f64),
                },
                "rows_total": c.rows.get(),
                "row_bytes_total": c.row_bytes.get(),
                "scan_rows_total": c.scan_rows.get(),
                "scan_bytes_total": c.scan_bytes.get(),
                "region_errors_total": c.region_errors.get(),
            },
            "ha": report.ha.as_ref().map(|h| json!({
                "role": h.role(),
                "instance_id": h.instance_id,
                "owner": h.owner.as_ref().map(|(id, addr)| json!({"instance_id": id, "mysql": addr})),
                "following": h.following,
                "follow_error": h.follow_error,
            })),
            "sorter": {
                "in_flight_bytes": sorter.in_flight_bytes,
                "write_bytes_total": sorter.write_bytes_total,
                "read_rows_total": sorter.read_rows_total,
            },
            "binlog": {
                "files": list.len(),
                "bytes": list.iter().map(|(_, s)| *s).sum::<u64>(),
                "end_file": end_file,
                "end_pos": end_pos,
                "last_gno": self.stats.next_gno.load(Ordering::Relaxed).saturating_sub(1),
                "transactions_total": self.stats.txns.load(Ordering::Relaxed),
                "gtid_executed": self.files.gtid_executed().to_string(),
            },
            "server": {
                "connections": conns,
                "sessions": sessions,
                "dump_sessions": dumps,
                "sent_bytes_total": self.metrics.server.sent_bytes.get(),
            },
            "history": history,
        })
    }

    /// `/api/v1/binlogs`.
    pub fn binlogs(&self) -> Value {
        let (end_file, end_pos) = self.files.current_end();
        json!({
            "files": self.files.list().into_iter()
                .map(|(name, size)| json!({"name": name, "size": size}))
                .collect::<Vec<_>>(),
            "end_file": end_file,
            "end_pos": end_pos,
            "gtid_executed": self.files.gtid_executed().to_string(),
            "gtid_purged": self.files.purged_gtids().to_string(),
        })
    }

    /// Records one lag sample.
    fn sample(&self) {
        let now = unix_now();
        let s = Sample {
            t: now.as_secs(),
            checkpoint_lag: lag_seconds(self.checkpoint(), now),
            resolved_lag: lag_seconds(self.resolved(), now),
            transactions: self.stats.txns.load(Ordering::Relaxed),
        };
        let mut h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        if h.len() == HISTORY {
            h.pop_front();
        }
        h.push_back(s);
    }
}

type View = State<Arc<StatusView>>;

async fn metrics(State(v): View) -> Response {
    // Probes read locks and the file list: off the async workers.
    let text = tokio::task::spawn_blocking(move || {
        v.refresh();
        v.metrics.render()
    })
    .await
    .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn status(State(v): View) -> Json<Value> {
    Json(v.status())
}

async fn replicas(State(v): View) -> Json<Vec<ReplicaView>> {
    Json(v.replicas())
}

async fn binlogs(State(v): View) -> Json<Value> {
    Json(v.binlogs())
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found\n")
}

/// Serves `listener` until `stop`; returns its address and the task.
pub(crate) fn serve(
    listener: tokio::net::TcpListener,
    view: Arc<StatusView>,
    stop: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let local = listener.local_addr()?;
    let app = Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/api/v1/status", get(status))
        .route("/api/v1/replicas", get(replicas))
        .route("/api/v1/binlogs", get(binlogs))
        .fallback(not_found)
        .with_state(view.clone());
    let sampler = {
        let (view, stop) = (view, stop.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => view.sample(),
                }
            }
        }
    };
    info!(addr = %local, "serving metrics, the status API and page over HTTP");
    let task = tokio::spawn(async move {
        tokio::spawn(sampler);
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            warn!(error = %e, "status listener failed");
        }
    });
    Ok((local, task))
}

/// The status page: one self-contained document that polls the JSON API.
const PAGE: &str = include_str!("status_page.html");

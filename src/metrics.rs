//! Prometheus metrics: their names, the handles the stages update, and the registry the
//! status listener exports.
//!
//! Names are `tibinlog_<stage>_<what>_<unit>`. Counters move per batch (a gRPC message, a
//! group commit, a socket flush), never per row. Values that already live somewhere (the
//! sorter's counters, binlog files, sessions, replicas' positions) are read when scraped
//! through [`Metrics::add_probe`], not kept twice. Nothing here is global: the app builds one
//! [`Metrics`] and hands each stage its part; a stage built without one (tests, tools) gets
//! handles registered nowhere.

use std::sync::{Arc, Mutex};

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// Prefix of every metric name.
pub const NAMESPACE: &str = "tibinlog";

/// Region subscriptions by store and state (`queued`, `initializing`, `normal`).
pub const CAPTURE_REGIONS: &str = "capture_regions";
/// Committed rows received from TiKV (incremental scans included).
pub const CAPTURE_ROWS_TOTAL: &str = "capture_rows_total";
/// Key and value bytes of those rows.
pub const CAPTURE_ROW_BYTES_TOTAL: &str = "capture_row_bytes_total";
/// Rows received while their region was still scanning (before INITIALIZED).
pub const CAPTURE_SCAN_ROWS_TOTAL: &str = "capture_scan_rows_total";
/// Key and value bytes of those rows.
pub const CAPTURE_SCAN_BYTES_TOTAL: &str = "capture_scan_bytes_total";
/// Region subscriptions that ended with an error (and were retried).
pub const CAPTURE_REGION_ERRORS_TOTAL: &str = "capture_region_errors_total";
/// Physical part (Unix ms) of the resolved-ts watermark capture has reached.
pub const CAPTURE_RESOLVED_TS_MS: &str = "capture_resolved_ts_ms";
/// Memory held by capture's per-region state: region feeds with the prewrites and commits they
/// hold, subscriptions, frontier pieces and the region cache.
pub const CAPTURE_STATE_BYTES: &str = "capture_state_bytes";
/// [`CAPTURE_STATE_BYTES`] divided by the regions subscribed.
pub const CAPTURE_STATE_BYTES_PER_REGION: &str = "capture_state_bytes_per_region";
/// Wall clock minus the resolved-ts watermark.
pub const CAPTURE_RESOLVED_LAG_SECONDS: &str = "capture_resolved_lag_seconds";
/// Wall clock minus the durable checkpoint (the binlog holds everything committed before it).
pub const CAPTURE_CHECKPOINT_LAG_SECONDS: &str = "capture_checkpoint_lag_seconds";
/// 0 running, 1 retrying after an error, 2 stopped for good, 3 HA standby.
pub const CAPTURE_STATE: &str = "capture_state";
/// Restarts of capture after errors.
pub const CAPTURE_RESTARTS_TOTAL: &str = "capture_restarts_total";
/// Binlog files listed in the index.
pub const BINLOG_FILES: &str = "binlog_files";
/// Bytes of those files.
pub const BINLOG_BYTES: &str = "binlog_bytes";
/// The last GNO written (0: none yet).
pub const BINLOG_LAST_GNO: &str = "binlog_last_gno";
/// Transactions written to the binlog.
pub const BINLOG_TRANSACTIONS_TOTAL: &str = "binlog_transactions_total";
/// Time of one fsync of a binlog file.
pub const BINLOG_FSYNC_SECONDS: &str = "binlog_fsync_duration_seconds";
/// Transactions made durable by one group commit.
pub const BINLOG_GROUP_COMMIT_TRANSACTIONS: &str = "binlog_group_commit_transactions";
/// Open client connections (logged in or not).
pub const SERVER_CONNECTIONS: &str = "server_connections";
/// Connections accepted since start.
pub const SERVER_CONNECTIONS_TOTAL: &str = "server_connections_total";
/// Connections that failed to log in (wrong password, timeout, malformed handshake).
pub const SERVER_ABORTED_CONNECTS_TOTAL: &str = "server_aborted_connects_total";
/// Dump sessions running now.
pub const SERVER_DUMP_SESSIONS: &str = "server_dump_sessions";
/// Bytes written to clients.
pub const SERVER_SENT_BYTES_TOTAL: &str = "server_sent_bytes_total";
/// Bytes read from clients.
pub const SERVER_RECEIVED_BYTES_TOTAL: &str = "server_received_bytes_total";
/// Commands by protocol name (`COM_QUERY`, `COM_BINLOG_DUMP_GTID`, …).
pub const SERVER_COMMANDS_TOTAL: &str = "server_commands_total";
/// Statements by MySQL's `Com_*` name (`select`, `show_binlogs`, …).
pub const SERVER_STATEMENTS_TOTAL: &str = "server_statements_total";
/// Statements the server could not answer: they did not parse, or they ask for a statement or
/// a variable it does not implement (errors 1064, 1105, 1193).
pub const SERVER_UNANSWERED_STATEMENTS_TOTAL: &str = "server_unanswered_statements_total";
/// Per dump session (labels `server_id`, `conn`): binlog bytes not yet sent.
pub const SERVER_REPLICA_LAG_BYTES: &str = "server_replica_lag_bytes";
/// Per dump session: seconds between the newest transaction in the binlog and the last one
/// sent (0 when caught up).
pub const SERVER_REPLICA_LAG_SECONDS: &str = "server_replica_lag_seconds";
/// Per dump session: sequence number of the binlog file being sent.
pub const SERVER_REPLICA_FILE_SEQ: &str = "server_replica_binlog_file_seq";
/// Per dump session: position in that file.
pub const SERVER_REPLICA_POS: &str = "server_replica_binlog_pos";

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help).namespace(NAMESPACE)
}

// Names and help texts are constants: building a metric from them cannot fail.
fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::with_opts(opts(name, help)).unwrap_or_else(|e| unreachable!("{name}: {e}"))
}

fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::with_opts(opts(name, help)).unwrap_or_else(|e| unreachable!("{name}: {e}"))
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(opts(name, help), labels).unwrap_or_else(|e| unreachable!("{name}: {e}"))
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(opts(name, help), labels).unwrap_or_else(|e| unreachable!("{name}: {e}"))
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    Histogram::with_opts(
        HistogramOpts::new(name, help)
            .namespace(NAMESPACE)
            .buckets(buckets),
    )
    .unwrap_or_else(|e| unreachable!("{name}: {e}"))
}

/// Sets a counter to `value` (a total kept elsewhere); counters never go down.
pub fn mirror_counter(c: &IntCounter, value: u64) {
    let now = c.get();
    if value > now {
        c.inc_by(value - now);
    }
}

/// Capture's handles (cloned into every store actor; each is an atomic).
#[derive(Debug, Clone)]
pub struct CaptureMetrics {
    pub regions: IntGaugeVec,
    pub rows: IntCounter,
    pub row_bytes: IntCounter,
    pub scan_rows: IntCounter,
    pub scan_bytes: IntCounter,
    pub region_errors: IntCounter,
    pub resolved_ts_ms: IntGauge,
    pub state_bytes: IntGauge,
    pub state_bytes_per_region: IntGauge,
}

impl Default for CaptureMetrics {
    fn default() -> Self {
        Self {
            regions: gauge_vec(
                CAPTURE_REGIONS,
                "Region subscriptions by store and state",
                &["store", "state"],
            ),
            rows: counter(CAPTURE_ROWS_TOTAL, "Committed rows received from TiKV"),
            row_bytes: counter(CAPTURE_ROW_BYTES_TOTAL, "Key and value bytes received"),
            scan_rows: counter(
                CAPTURE_SCAN_ROWS_TOTAL,
                "Rows received from incremental scans",
            ),
            scan_bytes: counter(
                CAPTURE_SCAN_BYTES_TOTAL,
                "Key and value bytes received from incremental scans",
            ),
            region_errors: counter(
                CAPTURE_REGION_ERRORS_TOTAL,
                "Region subscriptions that ended with an error",
            ),
            resolved_ts_ms: gauge(
                CAPTURE_RESOLVED_TS_MS,
                "Physical time (Unix ms) of the resolved-ts watermark",
            ),
            state_bytes: gauge(
                CAPTURE_STATE_BYTES,
                "Memory of capture's per-region state (feeds with pending prewrites, subscriptions, frontier, region cache)",
            ),
            state_bytes_per_region: gauge(
                CAPTURE_STATE_BYTES_PER_REGION,
                "Capture's state memory divided by the regions subscribed",
            ),
        }
    }
}

/// `capture_regions{store, state}` of one store: queued, initializing, normal.
#[derive(Clone)]
pub struct RegionGauges([IntGauge; 3]);

impl RegionGauges {
    /// Region counts of the store (the gauges are replaced, not added to).
    pub fn set(&self, queued: usize, initializing: usize, normal: usize) {
        for (g, n) in self.0.iter().zip([queued, initializing, normal]) {
            g.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

impl CaptureMetrics {
    /// The region gauges of one store actor, resolved once (set per message).
    pub fn region_gauges(&self, store: &str) -> RegionGauges {
        RegionGauges(
            ["queued", "initializing", "normal"]
                .map(|state| self.regions.with_label_values(&[store, state])),
        )
    }

    /// Sums of [`CAPTURE_REGIONS`] over stores: `(queued, initializing, normal)`.
    pub fn region_totals(&self) -> (i64, i64, i64) {
        let mut t = (0, 0, 0);
        for mf in prometheus::core::Collector::collect(&self.regions) {
            for m in mf.get_metric() {
                let state = m
                    .get_label()
                    .iter()
                    .find(|l| l.name() == "state")
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default();
                let v = m.get_gauge().get_value() as i64;
                match state.as_str() {
                    "queued" => t.0 += v,
                    "initializing" => t.1 += v,
                    _ => t.2 += v,
                }
            }
        }
        t
    }

    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.regions.clone()),
            Box::new(self.rows.clone()),
            Box::new(self.row_bytes.clone()),
            Box::new(self.scan_rows.clone()),
            Box::new(self.scan_bytes.clone()),
            Box::new(self.region_errors.clone()),
            Box::new(self.resolved_ts_ms.clone()),
            Box::new(self.state_bytes.clone()),
            Box::new(self.state_bytes_per_region.clone()),
        ]
    }
}

/// The binlog writer's handles.
#[derive(Debug, Clone)]
pub struct BinlogMetrics {
    pub fsync_seconds: Histogram,
    pub group_commit: Histogram,
}

impl Default for BinlogMetrics {
    fn default() -> Self {
        Self {
            fsync_seconds: histogram(
                BINLOG_FSYNC_SECONDS,
                "Time of one fsync of a binlog file",
                prometheus::exponential_buckets(0.0001, 2.0, 16)
                    .unwrap_or_else(|e| unreachable!("{e}")),
            ),
            group_commit: histogram(
                BINLOG_GROUP_COMMIT_TRANSACTIONS,
                "Transactions made durable by one group commit",
                prometheus::exponential_buckets(1.0, 2.0, 14)
                    .unwrap_or_else(|e| unreachable!("{e}")),
            ),
        }
    }
}

impl BinlogMetrics {
    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.fsync_seconds.clone()),
            Box::new(self.group_commit.clone()),
        ]
    }
}

/// The MySQL listeners' handles (both listeners share them).
#[derive(Debug, Clone)]
pub struct ServerMetrics {
    pub connections_total: IntCounter,
    pub aborted_connects: IntCounter,
    pub sent_bytes: IntCounter,
    pub received_bytes: IntCounter,
    pub commands: IntCounterVec,
    pub statements: IntCounterVec,
    pub unanswered: IntCounter,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        Self {
            connections_total: counter(SERVER_CONNECTIONS_TOTAL, "Connections accepted"),
            aborted_connects: counter(
                SERVER_ABORTED_CONNECTS_TOTAL,
                "Connections that failed to log in",
            ),
            sent_bytes: counter(SERVER_SENT_BYTES_TOTAL, "Bytes written to clients"),
            received_bytes: counter(SERVER_RECEIVED_BYTES_TOTAL, "Bytes read from clients"),
            commands: counter_vec(SERVER_COMMANDS_TOTAL, "Commands by name", &["command"]),
            statements: counter_vec(
                SERVER_STATEMENTS_TOTAL,
                "Statements by MySQL's Com_ name",
                &["statement"],
            ),
            unanswered: counter(
                SERVER_UNANSWERED_STATEMENTS_TOTAL,
                "Statements the server could not answer (1064, 1105, 1193)",
            ),
        }
    }
}

impl ServerMetrics {
    /// Counts a command; `statement` is the `Com_*` suffix of a statement it carries.
    pub fn count_command(&self, command: &'static str, statement: Option<&'static str>) {
        self.commands.with_label_values(&[command]).inc();
        if let Some(s) = statement {
            self.statements.with_label_values(&[s]).inc();
        }
    }

    /// `(label, value)` of every counter of `vec` (for `SHOW STATUS`).
    pub fn counts(vec: &IntCounterVec) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for mf in prometheus::core::Collector::collect(vec) {
            for m in mf.get_metric() {
                if let Some(l) = m.get_label().first() {
                    out.push((l.value().to_owned(), m.get_counter().get_value() as u64));
                }
            }
        }
        out
    }

    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.connections_total.clone()),
            Box::new(self.aborted_connects.clone()),
            Box::new(self.sent_bytes.clone()),
            Box::new(self.received_bytes.clone()),
            Box::new(self.commands.clone()),
            Box::new(self.statements.clone()),
            Box::new(self.unanswered.clone()),
        ]
    }
}

/// Values read at scrape time (set by the probes).
#[derive(Debug, Clone)]
pub struct ProbedMetrics {
    pub resolved_lag_seconds: prometheus::Gauge,
    pub checkpoint_lag_seconds: prometheus::Gauge,
    pub capture_state: IntGauge,
    pub capture_restarts: IntCounter,
    pub binlog_files: IntGauge,
    pub binlog_bytes: IntGauge,
    pub last_gno: IntGauge,
    pub transactions: IntCounter,
    pub connections: IntGauge,
    pub dump_sessions: IntGauge,
    pub replica_lag_bytes: IntGaugeVec,
    pub replica_lag_seconds: IntGaugeVec,
    pub replica_file_seq: IntGaugeVec,
    pub replica_pos: IntGaugeVec,
}

fn float_gauge(name: &str, help: &str) -> prometheus::Gauge {
    prometheus::Gauge::with_opts(opts(name, help)).unwrap_or_else(|e| unreachable!("{name}: {e}"))
}

impl Default for ProbedMetrics {
    fn default() -> Self {
        let replica = ["server_id", "conn"];
        Self {
            resolved_lag_seconds: float_gauge(
                CAPTURE_RESOLVED_LAG_SECONDS,
                "Wall clock minus the resolved-ts watermark",
            ),
            checkpoint_lag_seconds: float_gauge(
                CAPTURE_CHECKPOINT_LAG_SECONDS,
                "Wall clock minus the durable checkpoint",
            ),
            capture_state: gauge(
                CAPTURE_STATE,
                "0 running, 1 retrying, 2 stopped, 3 HA standby",
            ),
            capture_restarts: counter(CAPTURE_RESTARTS_TOTAL, "Restarts of capture after errors"),
            binlog_files: gauge(BINLOG_FILES, "Binlog files in the index"),
            binlog_bytes: gauge(BINLOG_BYTES, "Bytes of the binlog files"),
            last_gno: gauge(BINLOG_LAST_GNO, "The last GNO written"),
            transactions: counter(BINLOG_TRANSACTIONS_TOTAL, "Transactions written"),
            connections: gauge(SERVER_CONNECTIONS, "Open client connections"),
            dump_sessions: gauge(SERVER_DUMP_SESSIONS, "Dump sessions running"),
            replica_lag_bytes: gauge_vec(
                SERVER_REPLICA_LAG_BYTES,
                "Binlog bytes a dump session has not sent yet",
                &replica,
            ),
            replica_lag_seconds: gauge_vec(
                SERVER_REPLICA_LAG_SECONDS,
                "Seconds between the newest transaction and the last one sent",
                &replica,
            ),
            replica_file_seq: gauge_vec(
                SERVER_REPLICA_FILE_SEQ,
                "Sequence number of the binlog file a dump session sends",
                &replica,
            ),
            replica_pos: gauge_vec(
                SERVER_REPLICA_POS,
                "Position in the binlog file a dump session sends",
                &replica,
            ),
        }
    }
}

impl ProbedMetrics {
    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.resolved_lag_seconds.clone()),
            Box::new(self.checkpoint_lag_seconds.clone()),
            Box::new(self.capture_state.clone()),
            Box::new(self.capture_restarts.clone()),
            Box::new(self.binlog_files.clone()),
            Box::new(self.binlog_bytes.clone()),
            Box::new(self.last_gno.clone()),
            Box::new(self.transactions.clone()),
            Box::new(self.connections.clone()),
            Box::new(self.dump_sessions.clone()),
            Box::new(self.replica_lag_bytes.clone()),
            Box::new(self.replica_lag_seconds.clone()),
            Box::new(self.replica_file_seq.clone()),
            Box::new(self.replica_pos.clone()),
        ]
    }
}

type Probe = Box<dyn Fn(&ProbedMetrics) + Send + Sync>;

/// Every metric of one instance, and the registry the status listener exports.
pub struct Metrics {
    registry: Registry,
    pub capture: CaptureMetrics,
    pub binlog: BinlogMetrics,
    pub server: ServerMetrics,
    pub probed: ProbedMetrics,
    /// Counters and gauges kept elsewhere (the sorter's), by name.
    mirrored: Vec<(&'static str, Mirror)>,
    probes: Mutex<Vec<Probe>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// A metric whose value is read from elsewhere at scrape time.
#[derive(Debug, Clone)]
enum Mirror {
    Counter(IntCounter),
    Gauge(IntGauge),
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All handles, registered.
    pub fn new() -> Self {
        let registry = Registry::new();
        let capture = CaptureMetrics::default();
        let binlog = BinlogMetrics::default();
        let server = ServerMetrics::default();
        let probed = ProbedMetrics::default();
        let mirrored: Vec<(&'static str, Mirror)> = crate::sorter::SorterMetrics::NAMES
            .iter()
            .map(|(name, help)| {
                let m = if name.ends_with("_total") {
                    Mirror::Counter(counter(name, help))
                } else {
                    Mirror::Gauge(gauge(name, help))
                };
                (*name, m)
            })
            .collect();
        let mut all = capture.collectors();
        all.extend(binlog.collectors());
        all.extend(server.collectors());
        all.extend(probed.collectors());
        for (_, m) in &mirrored {
            all.push(match m {
                Mirror::Counter(c) => Box::new(c.clone()),
                Mirror::Gauge(g) => Box::new(g.clone()),
            });
        }
        for c in all {
            // Names are distinct constants: registering cannot collide.
            if let Err(e) = registry.register(c) {
                unreachable!("metric registration: {e}");
            }
        }
        Self {
            registry,
            capture,
            binlog,
            server,
            probed,
            mirrored,
            probes: Mutex::new(Vec::new()),
        }
    }

    /// Adds a function run before each scrape to set [`ProbedMetrics`].
    pub fn add_probe(&self, probe: impl Fn(&ProbedMetrics) + Send + Sync + 'static) {
        self.probes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(probe));
    }

    /// Sets the mirrored sorter metrics from `pairs` (name, value).
    pub fn mirror_sorter(&self, pairs: &[(&'static str, u64)]) {
        for (name, value) in pairs {
            if let Some((_, m)) = self.mirrored.iter().find(|(n, _)| n == name) {
                match m {
                    Mirror::Counter(c) => mirror_counter(c, *value),
                    Mirror::Gauge(g) => g.set(i64::try_from(*value).unwrap_or(i64::MAX)),
                }
            }
        }
    }

    /// Runs the probes, then renders every metric in Prometheus' text format.
    pub fn render(&self) -> String {
        for p in self.probes.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            p(&self.probed);
        }
        let mut out = Vec::with_capacity(16 << 10);
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Shared handle.
pub type SharedMetrics = Arc<Metrics>;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn render_lists_every_stage_under_the_namespace() {
        let m = Metrics::new();
        m.capture.rows.inc_by(3);
        m.capture.region_gauges("1").set(2, 1, 5);
        m.binlog.fsync_seconds.observe(0.002);
        m.server.commands.with_label_values(&["query"]).inc();
        m.mirror_sorter(&[
            ("sorter_write_rows_total", 7),
            ("sorter_in_flight_bytes", 9),
        ]);
        m.add_probe(|p| p.last_gno.set(42));
        let text = m.render();
        for line in [
            "tibinlog_capture_rows_total 3",
            "tibinlog_capture_regions{state=\"normal\",store=\"1\"} 5",
            "tibinlog_binlog_fsync_duration_seconds_count 1",
            "tibinlog_server_commands_total{command=\"query\"} 1",
            "tibinlog_sorter_write_rows_total 7",
            "tibinlog_sorter_in_flight_bytes 9",
            "tibinlog_binlog_last_gno 42",
            "# TYPE tibinlog_sorter_write_rows_total counter",
            "# TYPE tibinlog_sorter_in_flight_bytes gauge",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert_eq!(m.capture.region_totals(), (2, 1, 5));
        m.capture.region_gauges("1").set(0, 0, 0);
        assert_eq!(m.capture.region_totals(), (0, 0, 0));
    }

    /// Every metric the Grafana dashboard queries exists under that name and type.
    #[test]
    fn the_dashboard_queries_only_metrics_that_exist() {
        let m = Metrics::new();
        // Vectors render only once a label set exists.
        m.capture.region_gauges("1").set(0, 0, 1);
        m.server.count_command("COM_QUERY", Some("select"));
        m.probed
            .replica_lag_bytes
            .with_label_values(&["1", "1"])
            .set(0);
        for v in [
            &m.probed.replica_lag_seconds,
            &m.probed.replica_file_seq,
            &m.probed.replica_pos,
        ] {
            v.with_label_values(&["1", "1"]).set(0);
        }
        let text = m.render();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docker/grafana-dashboard.json");
        let dash: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut exprs = Vec::new();
        for p in dash["panels"].as_array().unwrap() {
            for t in p["targets"].as_array().unwrap() {
                exprs.push(t["expr"].as_str().unwrap().to_owned());
            }
        }
        assert!(exprs.len() >= 20);
        let mut names = 0;
        for e in &exprs {
            for (i, _) in e.match_indices("tibinlog_") {
                let name: String = e[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let (base, histogram) = match ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                {
                    Some(b) if text.contains(&format!("# TYPE {b} histogram")) => {
                        (b.to_owned(), true)
                    }
                    _ => (name.clone(), false),
                };
                assert!(
                    text.contains(&format!("# TYPE {base} ")),
                    "the dashboard queries {name}, which is not exported"
                );
                let counter = text.contains(&format!("# TYPE {base} counter"));
                assert_eq!(
                    e.contains(&format!("rate({name}")) || e.contains(&format!("increase({name}")),
                    counter || histogram,
                    "{name}: rates of counters and histograms only, in {e}"
                );
                names += 1;
            }
        }
        assert!(names >= 25, "{names}");
    }

    #[test]
    fn mirrored_counters_never_go_down() {
        let m = Metrics::new();
        m.mirror_sorter(&[("sorter_write_rows_total", 10)]);
        // A restarted sorter counts from zero again: the exported total stays.
        m.mirror_sorter(&[("sorter_write_rows_total", 4)]);
        assert!(m.render().contains("tibinlog_sorter_write_rows_total 10\n"));
    }
}

//! The endpoint's state: its configuration, connections, downstreams (subscriptions) and
//! per-region delegates, and the messages it sends.

use std::collections::{BTreeSet, HashMap, VecDeque};

use tibinlog_proto::cdcpb::{self, event};

use super::resolved::LockTracker;
use super::rows::KeyRange;
use crate::sim::ts::Ts;

/// Identifies a gRPC stream (connection) on a store.
pub type ConnId = u64;

/// Endpoint configuration (TiKV `CdcConfig` defaults).
#[derive(Debug, Clone)]
pub struct CdcConfig {
    /// PD cluster id, compared with `header.cluster_id`.
    pub cluster_id: u64,
    /// `incremental-scan-concurrency-limit`: pending scans beyond this are refused.
    pub scan_pending_limit: usize,
    /// `incremental-scan-concurrency`: scans running at once per store.
    pub scan_concurrency: usize,
    /// Bytes of rows one scan step of one scan sends (in 32 KiB `Entries` events of one
    /// message): TiKV's `incremental-scan-speed-limit` (128 MiB/s) over the shell's step
    /// interval (2 ms).
    pub scan_step_bytes: usize,
}

/// TiKV's `incremental-scan-speed-limit`.
pub const INCREMENTAL_SCAN_SPEED_LIMIT: usize = 128 << 20;

impl Default for CdcConfig {
    fn default() -> Self {
        Self {
            cluster_id: 0,
            scan_pending_limit: 10_000,
            scan_concurrency: 6,
            scan_step_bytes: INCREMENTAL_SCAN_SPEED_LIMIT / 500,
        }
    }
}

/// One message to send on a connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Target connection.
    pub conn: ConnId,
    /// The message.
    pub event: cdcpb::ChangeDataEvent,
}

/// A subscription: `(connection, request_id, region_id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DownstreamId {
    /// Connection.
    pub conn: ConnId,
    /// Client-chosen request id.
    pub request_id: u64,
    /// Region.
    pub region_id: u64,
}

/// Faults the shell can switch on per region; random choices come from the RNG passed in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegionFaults {
    /// Resolved ts stops advancing (as if a lock were held open).
    pub stall_resolved_ts: bool,
    /// Probability that a tick sends nothing for the region.
    pub drop_resolved_ts: f64,
    /// The min ts used for the region lags the TSO by this many ms (a delayed resolved ts).
    pub resolved_ts_lag_ms: u64,
    /// Probability that a scan step makes no progress, so realtime rows (a COMMIT before the
    /// scan's PREWRITE) overtake the scan.
    pub stall_scan: f64,
}

/// Per-downstream state; `Stopped` downstreams are removed from the endpoint.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum DownstreamState {
    Uninitialized,
    Initializing { rows: VecDeque<event::Row> },
    Normal { last_resolved: Ts },
}

#[derive(Debug, Clone)]
pub(super) struct Downstream {
    pub(super) epoch_version: u64,
    pub(super) checkpoint_ts: Ts,
    pub(super) range: KeyRange,
    pub(super) filter_loop: bool,
    pub(super) state: DownstreamState,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Conn {
    /// From the first request's `ticdc_version`: None until then.
    pub(super) version: Option<(u64, u64, u64)>,
    pub(super) multiplexing: bool,
}

impl Conn {
    /// Whether the client takes batched resolved ts (TiCDC 4.0.8 and later).
    pub(super) fn batch_resolved_ts(&self) -> bool {
        self.version.unwrap_or((0, 0, 0)) >= (4, 0, 8)
    }
    /// Whether the client's cluster id is checked (TiCDC 5.3.0 and later).
    pub(super) fn validate_cluster_id(&self) -> bool {
        self.version.unwrap_or((0, 0, 0)) >= (5, 3, 0)
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Delegate {
    pub(super) tracker: LockTracker,
    pub(super) downstreams: Vec<DownstreamId>,
}

/// The CDC endpoint of one store.
#[derive(Debug, Clone)]
pub struct CdcEndpoint {
    pub(super) store_id: u64,
    pub(super) config: CdcConfig,
    pub(super) conns: HashMap<ConnId, Conn>,
    pub(super) downstreams: HashMap<DownstreamId, Downstream>,
    pub(super) delegates: HashMap<u64, Delegate>,
    pub(super) pending_scans: VecDeque<DownstreamId>,
    /// Downstreams in `Initializing` (kept beside `downstreams`, so that a scan step or a
    /// registration does not walk every region the store captures).
    pub(super) scanning: BTreeSet<DownstreamId>,
    /// Downstreams not yet `Normal` (TiKV's pending-scan count).
    pub(super) unready: usize,
    pub(super) faults: HashMap<u64, RegionFaults>,
}

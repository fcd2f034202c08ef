//! The async gRPC shell of the simulator: a PD and N TiKV stores on loopback, all backed by one
//! [`SimCore`].
//!
//! In: gRPC calls from clients (PD, `tikvpb.Tikv` reads, `cdcpb.ChangeData` streams), fault and
//! transaction calls on [`SimCluster`]. Out: gRPC responses and change streams shaped like a
//! real TiKV 8.5 / PD 8.5 (docs/upstream-facts.md).
//!
//! ```text
//!             ┌──────────── Arc<Shared>: Mutex<State{ core, sinks, faults }> ────────────┐
//! PD server ──┤ PdService (TSO, regions, stores, GC)                                      │
//! store 1 ────┤ KvService + ChangeDataService ── reader task ─► core ─► dispatch ─► ConnSink ─► pump ─► client
//! store N ────┤ …                                                                          │
//! driver ─────┤ drive_scans (step) / tick_resolved_ts (every resolved_ts_interval)         │
//! SimCluster ─┘ faults, transactions                                                        │
//! ```
//!
//! Shutdown is a `CancellationToken` tree: root → PD, driver, one child per store → one child
//! per stream; every task is spawned on one `TaskTracker` that [`SimCluster::shutdown`] waits
//! for. Stopping a store cancels its subtree: its gRPC server stops accepting, its streams end
//! with `UNAVAILABLE`; restarting binds the same port again.
//!
//! Clients must accept messages up to 6 MiB (TiKV batches events up to that size); tonic's
//! default decoding limit is 4 MiB.
//!
//! # Layout
//!
//! * [`cluster`]: [`SimCluster`], the handle: start, stop and restart stores, faults.
//! * [`state`]: the shared state and the routing of core outputs (why a mutex, not an actor).
//! * [`cdc_stream`]: per-connection queue with TiKV's memory quota, batching, the pump.
//! * [`cdc`]: `ChangeData` (`EventFeed`, `EventFeedV2`, features metadata).
//! * [`kv`]: `Tikv` reads with region checks and error mapping.
//! * [`pd`]: the `PD` service.
//! * [`driver`]: the scan / resolved-ts loop.
//! * [`txn`]: the transaction client.
//! * [`error`]: the error type.

pub mod cdc;
pub mod cdc_stream;
pub mod cluster;
pub mod driver;
pub mod error;
pub mod kv;
pub mod pd;
pub mod pd_http;
pub mod state;
pub mod tls;
pub mod txn;

pub use self::cluster::{
    cluster_id_from_seed, SimCluster, SimConfig, DEFAULT_RESOLVED_TS_INTERVAL,
    DEFAULT_SCAN_STEP_INTERVAL,
};
pub use self::error::{Result, ServerError};
pub use self::txn::{HeldLock, SimTxn};

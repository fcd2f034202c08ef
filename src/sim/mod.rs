//! A faithful in-process TiKV + PD core for tests and demos: pure and synchronous.
//!
//! In: transactional writes and reads (the TiDB layer), `cdcpb` requests (the gRPC shell),
//! region and store changes and faults (scenarios), TSO ticks. Out: `cdcpb::ChangeDataEvent`s
//! per connection, read results, region metadata, GC safe points.
//!
//! Invariants kept, as TiKV keeps them (docs/upstream-facts.md, "TiKV EventFeed"):
//! * no COMMIT/COMMITTED row with `commit_ts ≤` a resolved ts already sent to that downstream;
//! * no resolved ts before INITIALIZED; resolved ts never moves backwards for a downstream;
//! * after an error event, nothing more for that downstream.
//!
//! # Layout
//!
//! * [`ts`]: `Ts`, the TSO allocator, clocks, the seeded RNG.
//! * [`mvcc`]: default/lock/write CFs, Percolator actions, snapshot reads, GC.
//! * [`region`]: regions (encoded ranges, epochs, leaders) and stores.
//! * [`cdc`]: the per-store CDC endpoint (registration, scan, realtime rows, resolved ts).
//! * [`gc`]: PD service GC safe points.
//! * [`core`]: everything wired together for the async shell.
//! * [`server`]: the async gRPC shell (PD, TiKV KV and ChangeData on loopback).
//! * [`error`]: the error type.

pub mod cdc;
pub mod chaos;
pub mod cli;
pub mod core;
pub mod error;
pub mod gc;
pub mod lock;
pub mod mvcc;
pub mod pki;
pub mod region;
pub mod server;
pub mod tidb;
pub mod ts;
pub mod workload;

pub use error::{Result, SimError};
pub use ts::Ts;

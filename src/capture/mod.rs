//! Capture: TiKV's change-data stream in, complete committed rows and a resolved-ts frontier out.
//!
//! This module holds the pure cores of the stage (no I/O, no async); the gRPC shell that owns
//! the store streams drives them.
//!
//! In: `cdcpb` events per region subscription (rows, resolved ts, errors). Out: [`RawRow`]s
//! (every committed `(start_ts, key)` exactly once per subscription, value and old value
//! attached) and the frontier over the watched spans.
//!
//! Invariants (TiKV's resolved-ts promise; docs/upstream-facts.md, "Resolved ts"):
//! * a transaction is identified by `start_ts`; `commit_ts` is not unique;
//! * no row handed out of a region has `commit_ts <=` a resolved ts that region reported;
//! * the frontier never decreases, and spans are compared in the encoded key domain only.
//!
//! # Layout
//!
//! * [`matcher`]: PREWRITE/COMMIT/ROLLBACK matching by `(start_ts, key)`, with caches for the
//!   scan phase and a memory bound.
//! * [`spill`]: where prewrites of transactions larger than memory go (the sorter's RocksDB).
//! * [`region`]: the per-region subscription state machine (Initializing → Normal → Stopped).
//! * [`frontier`]: the resolved-ts frontier over encoded spans.
//! * [`span`]: encoded-domain span helpers (intersect, split, membership of raw row keys).
//! * [`error`]: [`CaptureError`], classified by what the caller must do.
//!
//! [`RawRow`]: crate::model::RawRow

mod async_commit;
mod batch_get;
pub mod error;
pub mod frontier;
pub mod gc_keeper;
pub mod id_map;
pub mod matcher;
pub mod output;
pub mod pd;
pub mod pd_http;
pub mod puller;
pub mod read;
pub mod region;
pub mod region_cache;
pub mod snapshot;
pub mod span;
pub mod spill;
pub mod store_stream;
pub mod table_sizes;

pub use error::{CaptureError, RegionErrorKind, Result, Retry};
pub use frontier::SpanFrontier;
pub use matcher::{Matcher, MatcherConfig, RowEntry};
pub use region::{RegionEvent, RegionFeed, StopCause};
pub use spill::{MemoryBudget, Spill, SpillError, SpillStore};

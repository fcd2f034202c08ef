//! Sorter: turns capture's row changes, which arrive in region order, into transactions in
//! binlog order, spilling to a local RocksDB so that a lagging consumer or a huge transaction
//! costs disk, not memory.
//!
//! In: batches of [`RawRow`](crate::model::RawRow) and [`ResolvedTs`](crate::model::ResolvedTs)
//! from capture (frontier). Out: [`TxnChunk`]s in ascending `(commit_ts, start_ts)`, each
//! transaction's rows grouped by table with deletes before puts, followed by a
//! [`SorterOutput::Resolved`] marker once everything with `commit_ts <=` that ts is out.
//!
//! Invariants:
//! * nothing with `commit_ts > resolved ts` is emitted, and a transaction is emitted only
//!   once every row sent before that resolved ts is in RocksDB or in the memory tier's run
//!   handed over with that resolved ts;
//! * two transactions with the same commit_ts are never merged (key prefix
//!   `(commit_ts, start_ts)`);
//! * memory is bounded: the write quota ([`Config::memory_quota_bytes`]), memtables
//!   of both column families together ([`Config::write_buffer_bytes`] x 2), the block cache
//!   ([`Config::block_cache_bytes`], filled by index and prewrite blocks, not by scans) and
//!   `read_ahead_chunks + 2` batches of chunks of about [`Config::max_chunk_bytes`] on the
//!   read side (many small transactions travel as one batch),
//!   and twice [`Config::memory_run_bytes`] for the memory tier;
//! * the RocksDB is a cache: wiped at open, WAL off, never read across restarts.
//!
//! The role is TiCDC's event store / sorter (`logservice/eventstore` in ticdc,
//! `cdc/processor/sourcemanager/sorter` in tiflow); the code and layout are this crate's own.
//!
//! # Memory tier
//! Most rows are resolved within a second of arriving. The writer keeps arriving rows in memory
//! (up to [`Config::memory_run_bytes`]); at each resolved ts it sorts the rows now resolved and
//! hands them to the reader as a *run*, which the reader merges with the RocksDB scan. Only
//! when the buffer outgrows the bound (a lagging resolved ts, a transaction larger than
//! memory) or the reader has too much waiting (a slow consumer) do rows go to RocksDB. This is
//! TiCDC's unified sorter idea (sort in memory, spill to disk under pressure); the output and
//! its order are the same either way (`tests/sorter.rs` checks both settings).
//!
//! # Threads
//! RocksDB calls block, so [`Sorter::open`] starts two dedicated threads: a writer
//! fed by a channel bounded in bytes ([`quota`]) and a reader that scans on each new resolved
//! ts and pushes chunks into a small bounded channel. [`SortDb`] is the same engine without
//! threads, for benches and tools.
//!
//! # Layout
//! * `key.rs`: key and value byte layout (diagram), encode/decode.
//! * `db.rs`: [`SortDb`], opening the cache.
//! * `write.rs`: `WriteBatch` per input batch, [`SorterWriter`], the writer thread.
//! * `read.rs`: ordered chunked scans (RocksDB merged with memory runs), [`ReadPosition`],
//!   [`SorterReader`], the reader thread.
//! * `mem.rs`: the memory tier's buffer and runs.
//! * `gc.rs`: `DeleteRange` up to the acknowledged position.
//! * `prewrite.rs`: [`PrewriteSpill`], the column family where capture spills the prewrites of
//!   transactions larger than its memory budget.
//! * `quota.rs`: the byte-bounded channel. `metrics.rs`: counters. `error.rs`: [`SorterError`].

mod db;
pub mod error;
mod gc;
pub mod key;
mod mem;
pub mod metrics;
mod prewrite;
pub mod quota;
mod read;
mod write;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

pub use db::SortDb;
pub use error::{Result, SorterError};
pub use metrics::{MetricsHandle, MetricsSnapshot, SorterMetrics};
pub use prewrite::{PrewriteSpill, SpillError, SpillStore};
pub use read::{ChunkIter, ReadPosition, SortedTxn, SorterOutput, SorterReader, TxnChunk, TxnIter};
pub use write::{batch_cost, SorterWriter};

/// Default write quota: 64 MiB of rows accepted and not yet in RocksDB, a few hundred gRPC
/// messages' worth.
pub const DEFAULT_MEMORY_QUOTA_BYTES: usize = 64 << 20;
/// Default block cache: 64 MiB (index blocks live in it too).
pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 64 << 20;
/// Default memtable size: 32 MiB; all memtables together are kept under twice that.
pub const DEFAULT_WRITE_BUFFER_BYTES: usize = 32 << 20;
/// Default chunk bound: 8 MiB of encoded rows per [`TxnChunk`].
pub const DEFAULT_MAX_CHUNK_BYTES: usize = 8 << 20;
/// Default memory tier: up to 32 MiB of rows wait in memory for their resolved ts (and as much
/// again of resolved rows may wait for the reader) before rows go to RocksDB.
pub const DEFAULT_MEMORY_RUN_BYTES: usize = 32 << 20;
/// Default chunks queued between the reader thread and the consumer.
pub const DEFAULT_READ_AHEAD_CHUNKS: usize = 2;

/// Sorter settings. Build with [`Config::new`] and override fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Directory of the RocksDB cache. **Wiped at open**; refused if it holds anything that
    /// is not a previous cache.
    pub data_dir: PathBuf,
    /// Bytes of rows the writer accepts before `send_rows` waits (back-pressure).
    pub memory_quota_bytes: usize,
    /// Memory tier: rows the writer keeps in memory instead of writing them to RocksDB, and
    /// the bound of resolved rows handed to the reader from memory. 0 sends every row through
    /// RocksDB.
    pub memory_run_bytes: usize,
    /// RocksDB block cache.
    pub block_cache_bytes: usize,
    /// RocksDB memtable size.
    pub write_buffer_bytes: usize,
    /// Encoded bytes after which a transaction is cut into another chunk.
    pub max_chunk_bytes: usize,
    /// Batches of chunks (about `max_chunk_bytes` each) the reader thread may have ready before
    /// the consumer takes them.
    pub read_ahead_chunks: usize,
    /// Where the sorter counts (shared with the metrics exporter).
    pub metrics: MetricsHandle,
}

impl Config {
    /// Defaults with the given data dir.
    pub fn new(data_dir: impl Into<PathBuf>) -> Config {
        Config {
            data_dir: data_dir.into(),
            memory_quota_bytes: DEFAULT_MEMORY_QUOTA_BYTES,
            memory_run_bytes: DEFAULT_MEMORY_RUN_BYTES,
            block_cache_bytes: DEFAULT_BLOCK_CACHE_BYTES,
            write_buffer_bytes: DEFAULT_WRITE_BUFFER_BYTES,
            max_chunk_bytes: DEFAULT_MAX_CHUNK_BYTES,
            read_ahead_chunks: DEFAULT_READ_AHEAD_CHUNKS,
            metrics: MetricsHandle::default(),
        }
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, detail| Err(SorterError::Config { field, detail });
        if self.data_dir.as_os_str().is_empty() {
            return bad("data_dir", "empty");
        }
        if self.memory_quota_bytes == 0 || self.memory_quota_bytes > quota::MAX_QUOTA_BYTES {
            return bad("memory_quota_bytes", "must be 1 B ..= 4 GiB");
        }
        if self.write_buffer_bytes < (1 << 20) {
            return bad("write_buffer_bytes", "must be at least 1 MiB");
        }
        if self.max_chunk_bytes == 0 {
            return bad("max_chunk_bytes", "must be positive");
        }
        if self.read_ahead_chunks == 0 {
            return bad("read_ahead_chunks", "must be positive");
        }
        Ok(())
    }
}

/// The sorter's two threads, to wait for after both halves are dropped.
///
/// A process must not exit while they still work on the RocksDB: its static destructors run
/// at exit and pull the engine out from under a thread that is writing or scanning (an
/// abort). [`SorterThreads::join`] returns once both have ended and the last handle on the
/// database is released; it blocks, so call it in `spawn_blocking`.
#[derive(Debug, Clone)]
pub struct SorterThreads(Arc<std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>>);

impl SorterThreads {
    /// Waits for both threads; only the first call waits, later ones return at once. Returns
    /// false when a thread panicked.
    pub fn join(&self) -> bool {
        let handles = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        handles.into_iter().all(|h| h.join().is_ok())
    }
}

/// Entry point of the async facade.
#[derive(Debug)]
pub struct Sorter;

impl Sorter {
    /// Wipes and opens the cache and starts the writer and reader threads. Blocking for the
    /// open (tens of milliseconds); call it before the pipeline starts or in `spawn_blocking`.
    /// The threads stop when both halves are dropped (the reader after yielding everything up
    /// to the last resolved ts, or at once when the [`SorterReader`] is dropped).
    pub fn open(cfg: Config) -> Result<(SorterWriter, SorterReader)> {
        let db = SortDb::open(&cfg)?;
        let ctl = Arc::new(read::ReaderCtl::default());
        let (tx, rx) = quota::quota_channel(cfg.memory_quota_bytes, db.metrics.clone());
        let (out_tx, out_rx) = mpsc::channel(cfg.read_ahead_chunks);
        let spawn_err = |source| SorterError::Spawn { source };
        let writer = {
            let (db, ctl, mem_limit) = (db.clone(), ctl.clone(), cfg.memory_run_bytes);
            std::thread::Builder::new()
                .name("sorter-writer".into())
                .spawn(move || write::run_writer(db, rx, ctl, mem_limit))
                .map_err(spawn_err)?
        };
        let reader = {
            let (db, ctl, max) = (db.clone(), ctl.clone(), cfg.max_chunk_bytes);
            std::thread::Builder::new()
                .name("sorter-reader".into())
                .spawn(move || read::run_reader(db, ctl, out_tx, max))
                .map_err(spawn_err)?
        };
        Ok((
            SorterWriter { tx, db: db.clone() },
            SorterReader {
                rx: out_rx,
                pending: Default::default(),
                ctl,
                db,
                threads: SorterThreads(Arc::new(std::sync::Mutex::new(vec![writer, reader]))),
            },
        ))
    }
}

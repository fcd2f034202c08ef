//! The sync core: one RocksDB instance opened as a throw-away cache.
//!
//! [`SortDb`] is what the writer and reader threads (and the benches) call. Every method
//! blocks on RocksDB: call it from a dedicated thread or `spawn_blocking`, never from an async
//! task. The write path is in `write.rs`, the read path in `read.rs`, deletion in `gc.rs`.

use std::path::Path;
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Options,
    WriteBufferManager, DB,
};

use super::error::{Result, SorterError};
use super::metrics::SorterMetrics;
use super::Config;

/// The sorter's RocksDB, shareable between threads.
#[derive(Clone)]
pub struct SortDb {
    pub(crate) db: Arc<DB>,
    pub(crate) metrics: Arc<SorterMetrics>,
}

impl std::fmt::Debug for SortDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortDb")
            .field("path", &self.db.path())
            .finish_non_exhaustive()
    }
}

/// Memtables one column family may hold at once (one active, the rest waiting for flush).
/// All memtables of both column families together are capped at twice the write buffer by a
/// shared write buffer manager (see [`SortDb::open`]).
const MAX_WRITE_BUFFERS: i32 = 3;
/// 16 KiB blocks: the DB is only ever scanned in order, never point-read, so larger blocks
/// mean fewer index entries and cheaper iteration than the default 4 KiB.
const BLOCK_SIZE: usize = 16 << 10;
/// Level-0 files (one per flushed memtable) before a compaction starts; see [`SortDb::open`].
const L0_COMPACTION_TRIGGER: i32 = 64;
/// Target size of the first level below L0: large, so that L0's size alone does not start a
/// compaction before [`L0_COMPACTION_TRIGGER`] files.
const LEVEL_BASE_BYTES: u64 = 8 << 30;
/// Read-ahead for the ordered scans once data has been flushed to SST files.
const READAHEAD: usize = 2 << 20;

/// Column family of prewrites spilled by capture (`crate::sorter::PrewriteSpill`).
pub(crate) const PREWRITE_CF: &str = "prewrite";

/// The prewrite column family is point-read (a COMMIT looks its prewrite up, a PREWRITE checks
/// for an earlier one), so it gets bloom filters and the default small blocks; it shares the
/// block cache and never compresses (its data lives minutes at most). Its memtables are half
/// the size of the main ones: it only fills while a transaction larger than capture's memory
/// budget is open.
fn prewrite_options(cfg: &Config, cache: &Cache, memtables: &WriteBufferManager) -> Options {
    let mut opts = Options::default();
    opts.set_write_buffer_manager(memtables);
    opts.set_write_buffer_size((cfg.write_buffer_bytes / 2).max(1 << 20));
    opts.set_max_write_buffer_number(MAX_WRITE_BUFFERS);
    opts.set_compression_type(DBCompressionType::None);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_bloom_filter(10.0, false);
    table.set_cache_index_and_filter_blocks(true);
    opts.set_block_based_table_factory(&table);
    opts
}

impl SortDb {
    /// Wipes `cfg.data_dir` and opens a fresh DB there. Blocking (tens of milliseconds).
    ///
    /// The DB is a cache of not-yet-written changes (a restart fetches them again from the
    /// checkpoint): whatever a previous run left is deleted, never read.
    pub fn open(cfg: &Config) -> Result<SortDb> {
        cfg.validate()?;
        wipe(&cfg.data_dir)?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_write_buffer_size(cfg.write_buffer_bytes);
        opts.set_max_write_buffer_number(MAX_WRITE_BUFFERS);
        opts.set_max_background_jobs(2);
        // Compaction is for data that stays. This DB's data is read once, in key order, soon
        // after it is written, then deleted by a range tombstone: a compaction of it is mostly
        // copying rows that are about to go. So level 0 may hold many memtable-sized files
        // before one runs (RocksDB also compacts L0 once it outgrows the base level's size,
        // hence the large base). A consumer far behind still gets its data compacted, once L0
        // holds `L0_COMPACTION_TRIGGER` files, and a writer that outruns compaction is
        // slowed, then stopped, at higher counts, which bounds the merge a read does across
        // L0's files. For a catch-up of 1 GiB of wide rows into the binlog, this took the
        // throughput from 84 to 106 MiB/s (`benches/capture.rs`).
        opts.set_level_zero_file_num_compaction_trigger(L0_COMPACTION_TRIGGER);
        opts.set_level_zero_slowdown_writes_trigger(L0_COMPACTION_TRIGGER * 2);
        opts.set_level_zero_stop_writes_trigger(L0_COMPACTION_TRIGGER * 4);
        opts.set_max_bytes_for_level_base(LEVEL_BASE_BYTES);
        // L0/L1 hold short-lived data that is usually deleted before a compaction reaches it:
        // compressing it costs CPU for nothing. Deeper levels only fill when the consumer lags
        // far behind; lz4 halves their disk at a small CPU price.
        opts.set_compression_per_level(&[
            DBCompressionType::None,
            DBCompressionType::None,
            DBCompressionType::Lz4,
            DBCompressionType::Lz4,
            DBCompressionType::Lz4,
            DBCompressionType::Lz4,
            DBCompressionType::Lz4,
        ]);
        let cache = Cache::new_lru_cache(cfg.block_cache_bytes);
        // One memtable limit for both column families: while a transaction larger than
        // capture's memory is open, its prewrites fill the prewrite family and its commits the
        // main one at the same time, and each family's own bound would add up. Writers are not
        // stalled: past the limit RocksDB flushes the largest memtables.
        let memtables =
            WriteBufferManager::new_write_buffer_manager(cfg.write_buffer_bytes * 2, false);
        opts.set_write_buffer_manager(&memtables);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_block_size(BLOCK_SIZE);
        // Index blocks count against the cache, so the cache size bounds them too.
        table.set_cache_index_and_filter_blocks(true);
        opts.set_block_based_table_factory(&table);
        opts.create_missing_column_families(true);
        let cfs = vec![
            ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone()),
            ColumnFamilyDescriptor::new(PREWRITE_CF, prewrite_options(cfg, &cache, &memtables)),
        ];
        let db = DB::open_cf_descriptors(&opts, &cfg.data_dir, cfs)?;
        // Nothing survives a restart, so memtables need not be flushed at shutdown. The C API
        // sets this mutable DB option only after open; failing to set it costs only time.
        if let Err(e) = db.set_options(&[("avoid_flush_during_shutdown", "true")]) {
            tracing::debug!(error = %e, "sorter: cannot set avoid_flush_during_shutdown");
        }
        Ok(SortDb {
            db: Arc::new(db),
            metrics: cfg.metrics.0.clone(),
        })
    }

    /// The live counters.
    pub fn metrics(&self) -> &Arc<SorterMetrics> {
        &self.metrics
    }

    /// Read options of an ordered scan bounded above by `upper` (exclusive).
    pub(crate) fn scan_options(upper: Option<Vec<u8>>) -> rocksdb::ReadOptions {
        let mut ro = rocksdb::ReadOptions::default();
        if let Some(u) = upper {
            ro.set_iterate_upper_bound(u);
        }
        ro.set_readahead_size(READAHEAD);
        // Every row is read once: its blocks would only push index blocks out of the cache.
        ro.fill_cache(false);
        ro
    }
}

/// Deletes a previous run's cache. Refuses a non-empty directory that does not look like a
/// RocksDB (no `IDENTITY` file), so a mistyped `data_dir` cannot delete unrelated files.
fn wipe(dir: &Path) -> Result<()> {
    let io = |source| SorterError::DataDir {
        path: dir.to_path_buf(),
        source,
    };
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            let empty = entries.next().is_none();
            if !empty && !dir.join("IDENTITY").is_file() {
                return Err(SorterError::Config {
                    field: "data_dir",
                    detail: "exists, is not empty and is not a sorter cache",
                });
            }
            if !empty {
                std::fs::remove_dir_all(dir).map_err(io)?;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    std::fs::create_dir_all(dir).map_err(io)
}

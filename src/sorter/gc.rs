//! Deleting what the consumer has acknowledged, so the DB does not grow.
//!
//! Emitted keys are always a prefix of the key space (reads go forward from the start), so one
//! `DeleteRange([], pos)` removes all of them. Each call writes a single range tombstone whose
//! range covers every earlier one; flushes and compactions then drop the covered data and the
//! older tombstones. The reader thread coalesces acknowledgements so that a consumer acking
//! every transaction does not write a tombstone per transaction.

use std::sync::atomic::Ordering::Relaxed;

use rocksdb::{WriteBatch, WriteOptions};

use super::db::SortDb;
use super::error::{Result, SorterError};
use super::read::ReadPosition;

impl SortDb {
    /// Deletes every key before `pos` (WAL off, like every write to this cache). Blocking.
    pub fn gc_up_to(&self, pos: &ReadPosition) -> Result<()> {
        if pos.as_key().is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        batch.delete_range(&[] as &[u8], pos.as_key());
        let mut wo = WriteOptions::default();
        wo.disable_wal(true);
        self.db.write_opt(batch, &wo)?;
        self.metrics.gc_ranges.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Starts a flush of the memtable without waiting for it.
    pub(crate) fn flush_in_background(&self) -> Result<()> {
        let mut fo = rocksdb::FlushOptions::default();
        fo.set_wait(false);
        self.db.flush_opt(&fo)?;
        Ok(())
    }

    /// Counts the live keys with a full scan. Blocking; for tests and diagnostics.
    pub fn count_keys(&self) -> Result<usize> {
        let mut it = self.db.raw_iterator_opt(SortDb::scan_options(None));
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().map_err(SorterError::from)?;
        Ok(n)
    }

    /// Flushes memtables and compacts everything, so that deleted data leaves the disk now
    /// rather than at the next background compaction. Blocking; for tests and tools.
    pub fn compact_all(&self) -> Result<()> {
        self.db.flush()?;
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(())
    }
}

//! The spill store of capture's matchers: a column family of this RocksDB.
//!
//! Capture keeps the prewrites of transactions larger than its memory budget here until their
//! COMMITs come (`crate::capture::spill` has the key layout and the policy). Like the rest of
//! the DB it is a cache: WAL off, wiped at open.

use rocksdb::WriteBatch;

use super::db::{SortDb, PREWRITE_CF};
use std::fmt;

/// A failed read or write of the spill store; the text names the operation and the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillError(pub String);

impl fmt::Display for SpillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpillError {}

/// Key/value storage for spilled prewrites. Calls block (a local RocksDB: memtable writes with
/// no WAL, point reads); they are short enough to run on the capture task. Defined here, with
/// its implementation, so that the capture (which holds one) depends on the sorter and not
/// the other way round.
pub trait SpillStore: Send + Sync + fmt::Debug {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, SpillError>;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), SpillError>;
    /// Writes all entries at once (one write batch).
    fn put_all(&self, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<(), SpillError>;
    fn delete(&self, key: &[u8]) -> Result<(), SpillError>;
    /// Deletes every key in `[from, to)`.
    fn delete_range(&self, from: &[u8], to: &[u8]) -> Result<(), SpillError>;
}

/// [`SpillStore`] over the sorter's RocksDB; cheap to clone.
#[derive(Debug, Clone)]
pub struct PrewriteSpill {
    db: SortDb,
}

fn err(op: &str, e: rocksdb::Error) -> SpillError {
    SpillError(format!("sorter RocksDB {op}: {e}"))
}

impl PrewriteSpill {
    pub fn new(db: SortDb) -> PrewriteSpill {
        PrewriteSpill { db }
    }

    fn cf(&self) -> Result<&rocksdb::ColumnFamily, SpillError> {
        self.db
            .db
            .cf_handle(PREWRITE_CF)
            .ok_or_else(|| SpillError(format!("sorter RocksDB has no column family {PREWRITE_CF}")))
    }

    fn write_options() -> rocksdb::WriteOptions {
        let mut wo = rocksdb::WriteOptions::default();
        wo.disable_wal(true);
        wo
    }
}

impl SpillStore for PrewriteSpill {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, SpillError> {
        self.db
            .db
            .get_cf(self.cf()?, key)
            .map_err(|e| err("get", e))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), SpillError> {
        self.db
            .db
            .put_cf_opt(self.cf()?, key, value, &Self::write_options())
            .map_err(|e| err("put", e))
    }

    fn put_all(&self, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<(), SpillError> {
        let cf = self.cf()?;
        let mut batch = WriteBatch::default();
        for (k, v) in entries {
            batch.put_cf(cf, k, v);
        }
        self.db
            .db
            .write_opt(batch, &Self::write_options())
            .map_err(|e| err("write", e))
    }

    fn delete(&self, key: &[u8]) -> Result<(), SpillError> {
        self.db
            .db
            .delete_cf_opt(self.cf()?, key, &Self::write_options())
            .map_err(|e| err("delete", e))
    }

    fn delete_range(&self, from: &[u8], to: &[u8]) -> Result<(), SpillError> {
        let cf = self.cf()?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, from, to);
        self.db
            .db
            .write_opt(batch, &Self::write_options())
            .map_err(|e| err("delete range", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::matcher::{Commit, Matcher, MatcherConfig, Prewrite};
    use crate::capture::Spill;
    use crate::model::{Op, RegionId, Ts};
    use std::sync::Arc;

    #[test]
    fn a_matcher_spills_into_the_sorter_db_and_cleans_up() {
        let dir = tempfile::tempdir().expect("ok");
        let db = SortDb::open(&super::super::Config::new(dir.path().join("s"))).expect("ok");
        let store = PrewriteSpill::new(db.clone());
        let spill = Spill::new(Arc::new(store.clone()), 0);
        let config = MatcherConfig {
            spill: Some(spill.clone()),
            ..MatcherConfig::default()
        };
        let mut m = Matcher::new(RegionId(1), config);
        let value = vec![7u8; 10_000];
        for i in 0..200u32 {
            m.on_prewrite(Prewrite {
                start_ts: Ts(10),
                key: i.to_be_bytes().to_vec(),
                op: Op::Put,
                value: value.clone(),
                old_value: b"old".to_vec(),
                generation: 0,
            })
            .expect("ok");
        }
        assert_eq!(m.spilled_prewrites(), 200);
        assert_eq!(spill.budget.used(), 0);
        let count = |db: &SortDb| {
            let cf = db.db.cf_handle(PREWRITE_CF).expect("ok");
            db.db.iterator_cf(cf, rocksdb::IteratorMode::Start).count()
        };
        assert_eq!(count(&db), 200);
        // The sorter's own key space is untouched.
        assert_eq!(db.db.iterator(rocksdb::IteratorMode::Start).count(), 0);
        m.on_initialized(&mut Vec::new()).expect("ok");
        for i in 0..100u32 {
            let row = m
                .on_commit(Commit {
                    start_ts: Ts(10),
                    commit_ts: Ts(20),
                    key: i.to_be_bytes().to_vec(),
                    op: Op::Put,
                    value: Vec::new(),
                })
                .expect("ok")
                .expect("matched");
            assert_eq!(
                (row.value.len(), row.old_value.as_slice()),
                (10_000, &b"old"[..])
            );
        }
        assert_eq!(count(&db), 100);
        drop(m);
        assert_eq!(count(&db), 0, "the rest went with the matcher");
    }
}

//! Where prewrites go when memory is short: huge transactions on disk.
//!
//! TiDB writes transactions far larger than memory (pipelined DML flushes its locks while the
//! statement runs, for gigabytes), and TiKV forwards every lock as a PREWRITE row long before
//! the COMMITs come. Each region's [`Matcher`](super::Matcher) keeps prewrites in memory while
//! all matchers together stay under one [`MemoryBudget`]; past it, a matcher moves whole
//! transactions (its largest first) to a [`SpillStore`] and keeps their later prewrites there
//! too, so memory stays bounded by the budget plus one prewrite whatever the transaction size.
//! A COMMIT or ROLLBACK of a spilled transaction is a point read and delete.
//!
//! The store is a column family of the sorter's RocksDB (`crate::sorter::PrewriteSpill`): a
//! cache like the rest of it, wiped at start. A matcher's entries live under a prefix of its
//! own (a process-unique owner id), so a region that re-subscribes (and gets its locks again
//! from the new incremental scan) never sees the old subscription's entries, and dropping a
//! matcher deletes its prefix with one range delete.
//!
//! ```text
//! key:   owner u64 BE | start_ts u64 BE | raw key
//! value: generation u64 BE | value length u32 BE | value | old value
//! ```

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::model::Ts;

pub use crate::sorter::{SpillError, SpillStore};

/// Bytes of prewrites all matchers may hold in memory together.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
    /// Prewrites written to the store, and their bytes (cumulative).
    spilled_rows: AtomicU64,
    spilled_bytes: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: usize) -> MemoryBudget {
        MemoryBudget {
            limit,
            used: AtomicUsize::new(0),
            spilled_rows: AtomicU64::new(0),
            spilled_bytes: AtomicU64::new(0),
        }
    }
    pub fn limit(&self) -> usize {
        self.limit
    }
    /// Bytes held in memory now by every matcher sharing the budget.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
    /// True if `add` more bytes would pass the limit.
    pub(crate) fn would_exceed(&self, add: usize) -> bool {
        self.used().saturating_add(add) > self.limit
    }
    pub(crate) fn add(&self, n: usize) {
        self.used.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn sub(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }
    pub(crate) fn count_spilled(&self, rows: u64, bytes: u64) {
        self.spilled_rows.fetch_add(rows, Ordering::Relaxed);
        self.spilled_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    /// Prewrites ever written to the spill store.
    pub fn spilled_rows(&self) -> u64 {
        self.spilled_rows.load(Ordering::Relaxed)
    }
    /// Bytes (key, value, old value) of the prewrites ever written to the spill store.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes.load(Ordering::Relaxed)
    }
}

/// A spill store and the budget that decides when to use it; shared by every matcher.
#[derive(Debug, Clone)]
pub struct Spill {
    pub store: Arc<dyn SpillStore>,
    pub budget: Arc<MemoryBudget>,
}

impl Spill {
    pub fn new(store: Arc<dyn SpillStore>, memory_limit: usize) -> Spill {
        Spill {
            store,
            budget: Arc::new(MemoryBudget::new(memory_limit)),
        }
    }
}

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A process-unique prefix for one matcher's entries.
pub(crate) fn next_owner() -> u64 {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

const RECORD_HEADER_LEN: usize = 12;

/// Writes the key of `(owner, start_ts, key)` into `buf` (cleared first).
pub(crate) fn encode_key(buf: &mut Vec<u8>, owner: u64, start_ts: Ts, key: &[u8]) {
    buf.clear();
    buf.extend_from_slice(&owner.to_be_bytes());
    buf.extend_from_slice(&start_ts.0.to_be_bytes());
    buf.extend_from_slice(key);
}

/// The first key after every key of `owner`.
pub(crate) fn owner_range(owner: u64) -> ([u8; 8], [u8; 8]) {
    (owner.to_be_bytes(), (owner + 1).to_be_bytes())
}

/// Writes a prewrite's record into `buf` (cleared first).
pub(crate) fn encode_record(buf: &mut Vec<u8>, generation: u64, value: &[u8], old_value: &[u8]) {
    buf.clear();
    buf.reserve(RECORD_HEADER_LEN + value.len() + old_value.len());
    buf.extend_from_slice(&generation.to_be_bytes());
    buf.extend_from_slice(&(value.len() as u32).to_be_bytes());
    buf.extend_from_slice(value);
    buf.extend_from_slice(old_value);
}

/// A record's generation and whether its value is empty, without copying it.
pub(crate) fn peek_record(rec: &[u8]) -> Result<(u64, bool), SpillError> {
    let (generation, len, _) = header(rec)?;
    Ok((generation, len == 0))
}

fn header(rec: &[u8]) -> Result<(u64, usize, &[u8]), SpillError> {
    if rec.len() < RECORD_HEADER_LEN {
        return Err(SpillError(format!(
            "spilled prewrite record of {} bytes is shorter than its header",
            rec.len()
        )));
    }
    let generation = u64::from_be_bytes(rec[..8].try_into().expect("8 bytes"));
    let len = u32::from_be_bytes(rec[8..12].try_into().expect("4 bytes")) as usize;
    let body = &rec[RECORD_HEADER_LEN..];
    if len > body.len() {
        return Err(SpillError(format!(
            "spilled prewrite record: value of {len} bytes in a body of {}",
            body.len()
        )));
    }
    Ok((generation, len, body))
}

/// Decodes a record into `(generation, value, old value)`.
pub(crate) fn decode_record(rec: &[u8]) -> Result<(u64, Vec<u8>, Vec<u8>), SpillError> {
    let (generation, len, body) = header(rec)?;
    Ok((generation, body[..len].to_vec(), body[len..].to_vec()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// An in-memory store with the same contract, for matcher tests.
    #[derive(Debug, Default)]
    pub(crate) struct MapStore {
        pub(crate) map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
        /// Fail every call from now on.
        pub(crate) broken: std::sync::atomic::AtomicBool,
    }

    impl MapStore {
        fn check(&self) -> Result<(), SpillError> {
            if self.broken.load(Ordering::Relaxed) {
                return Err(SpillError("disk gone".into()));
            }
            Ok(())
        }
        pub(crate) fn len(&self) -> usize {
            self.map.lock().expect("lock").len()
        }
    }

    impl SpillStore for MapStore {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, SpillError> {
            self.check()?;
            Ok(self.map.lock().expect("lock").get(key).cloned())
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<(), SpillError> {
            self.check()?;
            self.map
                .lock()
                .expect("ok")
                .insert(key.to_vec(), value.to_vec());
            Ok(())
        }
        fn put_all(&self, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<(), SpillError> {
            self.check()?;
            let mut map = self.map.lock().expect("lock");
            for (k, v) in entries {
                map.insert(k.clone(), v.clone());
            }
            Ok(())
        }
        fn delete(&self, key: &[u8]) -> Result<(), SpillError> {
            self.check()?;
            self.map.lock().expect("lock").remove(key);
            Ok(())
        }
        fn delete_range(&self, from: &[u8], to: &[u8]) -> Result<(), SpillError> {
            self.check()?;
            self.map
                .lock()
                .expect("ok")
                .retain(|k, _| k.as_slice() < from || k.as_slice() >= to);
            Ok(())
        }
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_errors() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 7, b"value", b"old");
        assert_eq!(peek_record(&buf), Ok((7, false)));
        assert_eq!(
            decode_record(&buf),
            Ok((7, b"value".to_vec(), b"old".to_vec()))
        );
        encode_record(&mut buf, 0, b"", b"gone");
        assert_eq!(peek_record(&buf), Ok((0, true)));
        assert!(decode_record(&buf[..5]).is_err());
        let mut bad = buf.clone();
        bad[8..12].copy_from_slice(&100u32.to_be_bytes());
        assert!(decode_record(&bad).is_err());
    }

    #[test]
    fn keys_sort_by_owner_then_start_ts_then_key() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        encode_key(&mut a, 1, Ts(u64::MAX), b"zz");
        encode_key(&mut b, 2, Ts(0), b"");
        assert!(a < b);
        let (from, to) = owner_range(1);
        assert!(a.as_slice() >= &from[..] && a.as_slice() < &to[..]);
        assert!(b.as_slice() >= &to[..]);
        encode_key(&mut b, 1, Ts(5), b"k");
        assert_eq!(&b[16..], b"k");
    }
}

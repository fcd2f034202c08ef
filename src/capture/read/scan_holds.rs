//! The timestamps of the table scans running now, each held for as long as its scan lives:
//! autocommit reads, results streamed to a slow client, server-side cursors, on either
//! listener. The oldest is published on a watch that keeps PD's GC from removing the history
//! a scan still reads (see `reader::hold_snapshots`); a scan's hold ends when it is dropped,
//! finished, failed, or abandoned with its connection.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

#[derive(Debug)]
struct Inner {
    /// Hold id → timestamp.
    held: Mutex<BTreeMap<u64, u64>>,
    next: AtomicU64,
    oldest: watch::Sender<Option<u64>>,
}

/// The registry of scan holds (cheap to clone, shared by every scan).
#[derive(Debug, Clone)]
pub struct ScanHolds(Arc<Inner>);

impl Default for ScanHolds {
    fn default() -> Self {
        ScanHolds(Arc::new(Inner {
            held: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
            oldest: watch::channel(None).0,
        }))
    }
}

/// One scan's hold: released when dropped.
#[derive(Debug)]
pub struct ScanHold {
    holds: ScanHolds,
    id: u64,
}

impl ScanHolds {
    /// The oldest timestamp held now (`None`: no scan runs).
    pub fn watch(&self) -> watch::Receiver<Option<u64>> {
        self.0.oldest.subscribe()
    }

    /// Holds `ts` until the returned guard is dropped.
    pub fn hold(&self, ts: u64) -> ScanHold {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        self.update(|held| {
            held.insert(id, ts);
        });
        ScanHold {
            holds: self.clone(),
            id,
        }
    }

    fn update(&self, change: impl FnOnce(&mut BTreeMap<u64, u64>)) {
        let mut held = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut held);
        let oldest = held.values().min().copied();
        self.0.oldest.send_if_modified(|cur| {
            let changed = *cur != oldest;
            *cur = oldest;
            changed
        });
    }
}

impl Drop for ScanHold {
    fn drop(&mut self) {
        let id = self.id;
        self.holds.update(|held| {
            held.remove(&id);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_running_scan_is_held_until_it_ends() {
        let holds = ScanHolds::default();
        let watch = holds.watch();
        assert_eq!(*watch.borrow(), None);
        let a = holds.hold(30);
        let b = holds.hold(10);
        let c = holds.hold(10);
        assert_eq!(*watch.borrow(), Some(10));
        drop(b);
        assert_eq!(*watch.borrow(), Some(10), "another scan still reads at 10");
        drop(c);
        assert_eq!(*watch.borrow(), Some(30));
        drop(a);
        assert_eq!(*watch.borrow(), None);
    }
}

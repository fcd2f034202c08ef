//! Resolved ts: the per-region lock tracker (TiKV's `Resolver`) and TiKV's batching of
//! resolved-ts messages (docs/upstream-facts.md, "Resolved ts").

use std::collections::{BTreeMap, HashMap};

use crate::sim::mvcc::{LockType, Modify, WriteBatch};
use crate::sim::ts::Ts;

/// Put/Delete locks of one region, by key and by start_ts.
///
/// Invariant: `resolved_ts` never decreases and is ≤ every tracked lock's start_ts at the time
/// it was computed.
#[derive(Debug, Clone, Default)]
pub struct LockTracker {
    by_key: HashMap<Vec<u8>, Ts>,
    by_ts: BTreeMap<Ts, usize>,
    resolved_ts: Ts,
}

impl LockTracker {
    /// Starts tracking `key` locked by `start_ts` (re-tracking the same lock is a no-op).
    pub fn track(&mut self, key: &[u8], start_ts: Ts) {
        if let Some(old) = self.by_key.insert(key.to_vec(), start_ts) {
            if old == start_ts {
                return;
            }
            self.dec(old);
        }
        *self.by_ts.entry(start_ts).or_default() += 1;
    }

    /// Stops tracking `key`.
    pub fn untrack(&mut self, key: &[u8]) {
        if let Some(ts) = self.by_key.remove(key) {
            self.dec(ts);
        }
    }

    fn dec(&mut self, ts: Ts) {
        if let Some(n) = self.by_ts.get_mut(&ts) {
            *n -= 1;
            if *n == 0 {
                self.by_ts.remove(&ts);
            }
        }
    }

    /// Applies the lock-CF part of a batch whose keys belong to this region.
    pub fn on_batch(&mut self, batch: &WriteBatch) {
        for m in &batch.modifies {
            match m {
                Modify::PutLock { key, lock }
                    if matches!(lock.lock_type, LockType::Put | LockType::Delete) =>
                {
                    self.track(key, lock.start_ts)
                }
                Modify::DeleteLock { key } => self.untrack(key),
                _ => {}
            }
        }
    }

    /// Smallest tracked start_ts.
    pub fn min_lock_ts(&self) -> Option<Ts> {
        self.by_ts.keys().next().copied()
    }

    /// Number of tracked locks.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True when no lock is tracked.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// `resolved = max(previous, min(min_ts, oldest lock))`.
    pub fn resolve(&mut self, min_ts: Ts) -> Ts {
        let candidate = self.min_lock_ts().map_or(min_ts, |l| l.min(min_ts));
        if candidate > self.resolved_ts {
            self.resolved_ts = candidate;
        }
        self.resolved_ts
    }

    /// The last resolved ts.
    pub fn resolved_ts(&self) -> Ts {
        self.resolved_ts
    }
}

/// Splits `(region_id, ts)` pairs into resolved-ts messages: sorted by ts ascending, popped in
/// groups of 8, 32, 128, 512 … (×4), each reported with the group's minimum ts.
pub fn batch_groups(mut items: Vec<(u64, Ts)>) -> Vec<(Vec<u64>, Ts)> {
    items.sort_by_key(|&(region, ts)| (ts, region));
    let mut out = Vec::new();
    let mut size = 8usize;
    let mut rest = items.as_slice();
    while !rest.is_empty() {
        let n = size.min(rest.len());
        let (group, tail) = rest.split_at(n);
        out.push((group.iter().map(|g| g.0).collect(), group[0].1));
        rest = tail;
        size = size.saturating_mul(4);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Event script in the style of TiKV's resolver test.
    #[test]
    fn tracker_script() {
        enum Step {
            Lock(&'static str, u64),
            Unlock(&'static str),
            Resolve(u64, u64),
        }
        use Step::*;
        let script = [
            Resolve(5, 5),
            Lock("a", 10),
            Resolve(20, 10),
            Lock("b", 12),
            Lock("a", 10),
            Unlock("a"),
            Resolve(20, 12),
            Unlock("b"),
            Resolve(8, 12), // never regresses
            Resolve(30, 30),
        ];
        let mut t = LockTracker::default();
        for (i, s) in script.iter().enumerate() {
            match s {
                Lock(k, ts) => t.track(k.as_bytes(), Ts(*ts)),
                Unlock(k) => t.untrack(k.as_bytes()),
                Resolve(min, want) => assert_eq!(t.resolve(Ts(*min)), Ts(*want), "step {i}"),
            }
        }
        assert!(t.is_empty());
    }

    #[test]
    fn groups_are_8_32_128_with_minimum() {
        let items: Vec<(u64, Ts)> = (0..200u64).rev().map(|r| (r, Ts(1000 + r))).collect();
        let g = batch_groups(items);
        let sizes: Vec<usize> = g.iter().map(|x| x.0.len()).collect();
        assert_eq!(sizes, vec![8, 32, 128, 32]);
        assert_eq!(g[0].1, Ts(1000));
        assert_eq!(g[1].1, Ts(1008));
        assert_eq!(g[0].0, (0..8).collect::<Vec<u64>>());
    }
}

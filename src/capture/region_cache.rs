//! What the client believes about regions: their encoded spans, epochs and leaders, and the
//! addresses of stores.
//!
//! The cache is plain data owned by one actor (the puller, or a snapshot reader behind a short
//! lock); it does no I/O. PD is the source of truth: a region error invalidates an entry or
//! updates its leader, and the owner reloads from PD ([`super::pd::PdClient::regions_in`]).
//!
//! Invariant: cached regions never overlap. Inserting a region evicts every entry whose span
//! intersects it, so a stale pre-split or pre-merge view cannot survive next to a fresh one.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use tibinlog_proto::metapb;

use super::id_map::IdMap;
use super::span::intersect;
use crate::model::{end_cmp, RegionId, Span};

/// One region as PD described it.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionInfo {
    pub id: RegionId,
    /// `[start_key, end_key)`, encoded; empty end = +∞.
    pub span: Span,
    /// TiKV checks `version` of CDC registrations and both fields of KV reads.
    pub epoch: metapb::RegionEpoch,
    pub peers: Vec<metapb::Peer>,
    /// The leader peer, if PD knows one.
    pub leader: Option<metapb::Peer>,
}

impl RegionInfo {
    /// From PD's `metapb.Region` and leader. PD sends a missing leader as an empty `Peer{}`.
    pub fn from_pd(region: metapb::Region, leader: Option<metapb::Peer>) -> RegionInfo {
        let leader = leader.filter(|p| p.store_id != 0);
        RegionInfo {
            id: RegionId(region.id),
            span: Span::new(region.start_key, region.end_key),
            epoch: region.region_epoch.unwrap_or_default(),
            peers: region.peers,
            leader,
        }
    }

    /// The store holding the leader, if known.
    pub fn leader_store(&self) -> Option<u64> {
        self.leader.as_ref().map(|p| p.store_id)
    }

    /// Makes the peer on `store_id` the leader; false if the region has no peer there (the
    /// hint is about a newer shape of the region than ours).
    pub fn set_leader_store(&mut self, store_id: u64) -> bool {
        match self.peers.iter().find(|p| p.store_id == store_id) {
            Some(p) => {
                self.leader = Some(*p);
                true
            }
            None => false,
        }
    }
}

/// Regions by start key, and store addresses.
#[derive(Debug, Default)]
pub struct RegionCache {
    /// Encoded start key → region.
    by_start: BTreeMap<Vec<u8>, RegionInfo>,
    /// Region id → its start key in `by_start`.
    by_id: IdMap<RegionId, Vec<u8>>,
    /// Store id → `host:port`.
    stores: HashMap<u64, String>,
}

impl RegionCache {
    /// Estimated heap bytes of the cached regions and stores.
    pub fn heap_bytes(&self) -> usize {
        const ENTRY: usize = 64;
        let regions: usize = self
            .by_start
            .iter()
            .map(|(k, r)| {
                2 * ENTRY
                    + 2 * k.capacity()
                    + std::mem::size_of::<RegionInfo>()
                    + r.span.end.capacity()
                    + r.peers.capacity() * std::mem::size_of::<metapb::Peer>()
            })
            .sum();
        let stores: usize = self.stores.values().map(|a| ENTRY + a.capacity()).sum();
        regions + stores
    }

    /// An empty cache.
    pub fn new() -> RegionCache {
        RegionCache::default()
    }

    /// Number of cached regions.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    /// True if no region is cached.
    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }

    /// Caches `region`, evicting every cached region it overlaps (they are older shapes).
    pub fn insert(&mut self, region: RegionInfo) {
        let overlapping: Vec<Vec<u8>> = self.overlapping(&region.span);
        for start in overlapping {
            if let Some(old) = self.by_start.remove(&start) {
                self.by_id.remove(&old.id);
            }
        }
        if let Some(old_start) = self.by_id.remove(&region.id) {
            self.by_start.remove(&old_start);
        }
        self.by_id.insert(region.id, region.span.start.clone());
        self.by_start.insert(region.span.start.clone(), region);
    }

    fn overlapping(&self, span: &Span) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        // The region starting at or before span.start may reach into it.
        if let Some((k, r)) = self
            .by_start
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(span.start.as_slice())))
            .next_back()
        {
            if intersect(&r.span, span).is_some() {
                out.push(k.clone());
            }
        }
        let end = if span.end.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(span.end.as_slice())
        };
        for (k, _) in self
            .by_start
            .range::<[u8], _>((Bound::Excluded(span.start.as_slice()), end))
        {
            out.push(k.clone());
        }
        out
    }

    /// The cached region holding the encoded key, if any.
    pub fn locate(&self, key: &[u8]) -> Option<&RegionInfo> {
        let (_, r) = self
            .by_start
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        r.span.contains(key).then_some(r)
    }

    /// The cached region holding the keys just below `key` (encoded): the one that starts
    /// before it and does not end before it.
    pub fn locate_before(&self, key: &[u8]) -> Option<&RegionInfo> {
        let (_, r) = self
            .by_start
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
            .next_back()?;
        (r.span.end.is_empty() || r.span.end.as_slice() >= key).then_some(r)
    }

    /// A region by id.
    pub fn get(&self, id: RegionId) -> Option<&RegionInfo> {
        self.by_id.get(&id).and_then(|k| self.by_start.get(k))
    }

    /// The cached regions covering `span` in key order, or `None` if the cache has a hole in it.
    pub fn covering(&self, span: &Span) -> Option<Vec<RegionInfo>> {
        let mut out = Vec::new();
        let mut at = span.start.clone();
        loop {
            let r = self.locate(&at)?;
            out.push(r.clone());
            if r.span.end.is_empty() || end_cmp(&r.span.end, &span.end).is_ge() {
                return Some(out);
            }
            at = r.span.end.clone();
        }
    }

    /// Forgets a region (after EpochNotMatch / RegionNotFound: its shape is unknown now).
    pub fn invalidate(&mut self, id: RegionId) {
        if let Some(start) = self.by_id.remove(&id) {
            self.by_start.remove(&start);
        }
    }

    /// Applies a NotLeader hint. Returns false (and forgets the region) if the hinted store
    /// holds no peer we know of: the cached shape is stale.
    pub fn update_leader(&mut self, id: RegionId, store_id: u64) -> bool {
        let ok = self
            .by_id
            .get(&id)
            .and_then(|k| self.by_start.get_mut(k))
            .is_some_and(|r| r.set_leader_store(store_id));
        if !ok {
            self.invalidate(id);
        }
        ok
    }

    /// A store's address, if cached.
    pub fn store_addr(&self, store_id: u64) -> Option<&str> {
        self.stores.get(&store_id).map(String::as_str)
    }

    /// Caches a store's address.
    pub fn set_store_addr(&mut self, store_id: u64, addr: String) {
        self.stores.insert(store_id, addr);
    }

    /// Forgets a store's address (it may come back elsewhere).
    pub fn invalidate_store(&mut self, store_id: u64) {
        self.stores.remove(&store_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(id: u64, start: &[u8], end: &[u8], version: u64, stores: &[u64]) -> RegionInfo {
        let peers: Vec<metapb::Peer> = stores
            .iter()
            .map(|&s| metapb::Peer {
                id: id * 10 + s,
                store_id: s,
                ..Default::default()
            })
            .collect();
        RegionInfo {
            id: RegionId(id),
            span: Span::new(start.to_vec(), end.to_vec()),
            epoch: metapb::RegionEpoch {
                conf_ver: 1,
                version,
            },
            leader: peers.first().copied(),
            peers,
        }
    }

    #[test]
    fn split_evicts_the_parent_and_covering_finds_holes() {
        let mut c = RegionCache::new();
        c.insert(region(1, b"", b"", 1, &[1, 2]));
        assert_eq!(c.locate(b"k").map(|r| r.id), Some(RegionId(1)));
        // Split at "m": left gets a new id, right keeps id 1 with a newer epoch.
        c.insert(region(2, b"", b"m", 2, &[1, 2]));
        assert!(c.get(RegionId(1)).is_none(), "overlapping parent evicted");
        assert!(c
            .covering(&Span::new(b"a".to_vec(), b"z".to_vec()))
            .is_none());
        c.insert(region(1, b"m", b"", 2, &[1, 2]));
        let cov = c
            .covering(&Span::new(b"a".to_vec(), b"z".to_vec()))
            .expect("covered");
        assert_eq!(
            cov.iter().map(|r| r.id).collect::<Vec<_>>(),
            vec![RegionId(2), RegionId(1)]
        );
        assert_eq!(c.len(), 2);
        // Merge back: one region over everything evicts both.
        c.insert(region(1, b"", b"", 3, &[1, 2]));
        assert_eq!(c.len(), 1);
        c.invalidate(RegionId(1));
        assert!(c.is_empty());
    }

    #[test]
    fn leader_hints_apply_only_to_known_peers() {
        let mut c = RegionCache::new();
        c.insert(region(1, b"a", b"m", 1, &[1, 2]));
        assert!(c.update_leader(RegionId(1), 2));
        assert_eq!(c.get(RegionId(1)).and_then(|r| r.leader_store()), Some(2));
        assert!(!c.update_leader(RegionId(1), 9), "no peer on store 9");
        assert!(c.get(RegionId(1)).is_none(), "stale region forgotten");
        c.set_store_addr(1, "127.0.0.1:1".into());
        assert_eq!(c.store_addr(1), Some("127.0.0.1:1"));
        c.invalidate_store(1);
        assert_eq!(c.store_addr(1), None);
        let empty_leader =
            RegionInfo::from_pd(metapb::Region::default(), Some(metapb::Peer::default()));
        assert_eq!(empty_leader.leader_store(), None);
    }
}

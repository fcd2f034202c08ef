//! Regions and stores: key ranges in the **encoded** key domain, epochs, peers and leaders.
//!
//! Facts kept (TiKV raftstore / PD; docs/upstream-facts.md, "Regions, stores and key domains"):
//! * Split bumps `version` on both sides. TiKV's `right-derive-when-split` defaults to true: the
//!   original region id keeps the **right** part and the new id takes the left part.
//! * Merge: the target absorbs the source's range with `version = max(source, target) + 1`;
//!   the source disappears.
//! * Peer add/remove bumps `conf_ver`; leader transfer changes no epoch.
//! * Region bounds are `EncodeBytes(raw)`; an empty end key means +∞.
//!
//! Every change returns [`AdminEvent`]s for the CDC endpoints of the stores involved.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use tibinlog_proto::metapb;

use super::error::{Result, SimError};

/// What a region change means to CDC observers (TiKV's admin-command observations).
#[derive(Debug, Clone, PartialEq)]
pub enum AdminEvent {
    /// The region split; `regions` are the resulting regions in key order.
    Split {
        /// Id of the region before the split (kept by the right part).
        region_id: u64,
        /// Store of the leader that applied the split.
        store_id: u64,
        /// Resulting regions, left to right.
        regions: Vec<metapb::Region>,
    },
    /// `source` was merged into `target`.
    Merge {
        /// Region that disappears.
        source: u64,
        /// Leader store of the source.
        source_store: u64,
        /// Region that absorbs it.
        target: u64,
        /// Leader store of the target.
        target_store: u64,
    },
    /// The leader on `old_store` stepped down; `new_leader` if one was elected.
    LeaderChanged {
        /// Region.
        region_id: u64,
        /// Store that lost leadership.
        old_store: u64,
        /// New leader peer, if any.
        new_leader: Option<metapb::Peer>,
    },
    /// The region's peer on `store_id` was destroyed.
    PeerRemoved {
        /// Region.
        region_id: u64,
        /// Store whose peer is gone.
        store_id: u64,
    },
}

/// A store (TiKV node) of the simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// Store id.
    pub id: u64,
    /// `host:port` of its gRPC services; filled by the shell.
    pub address: String,
    /// False while stopped.
    pub up: bool,
}

/// A region with its leader.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionInfo {
    /// Id, range (encoded), epoch, peers.
    pub region: metapb::Region,
    /// Current leader peer; `None` while no peer can lead (all stores down).
    pub leader: Option<metapb::Peer>,
}

impl RegionInfo {
    /// Region id.
    pub fn id(&self) -> u64 {
        self.region.id
    }
    /// Epoch version (split/merge counter).
    pub fn version(&self) -> u64 {
        self.region.region_epoch.as_ref().map_or(0, |e| e.version)
    }
    /// Store id of the leader.
    pub fn leader_store(&self) -> Option<u64> {
        self.leader.as_ref().map(|p| p.store_id)
    }
    /// True if a peer lives on `store_id`.
    pub fn has_peer_on(&self, store_id: u64) -> bool {
        self.region.peers.iter().any(|p| p.store_id == store_id)
    }
    /// True if the encoded key falls inside `[start, end)`.
    pub fn contains_encoded(&self, key: &[u8]) -> bool {
        key >= self.region.start_key.as_slice()
            && (self.region.end_key.is_empty() || key < self.region.end_key.as_slice())
    }
    fn epoch_mut(&mut self) -> &mut metapb::RegionEpoch {
        self.region
            .region_epoch
            .get_or_insert_with(Default::default)
    }
}

/// All stores and regions; the region map PD serves and TiKV stores hold.
#[derive(Debug, Clone)]
pub struct Cluster {
    stores: BTreeMap<u64, StoreInfo>,
    regions: HashMap<u64, RegionInfo>,
    /// encoded start key -> region id.
    by_start: BTreeMap<Vec<u8>, u64>,
    next_id: u64,
}

impl Cluster {
    /// A cluster of `store_ids` with one region covering every key, a peer on each store and
    /// the leader on the first store. Ids for regions and peers start above the store ids.
    pub fn new(store_ids: &[u64]) -> Result<Self> {
        let first = *store_ids
            .first()
            .ok_or(SimError::InvalidRequest("cluster needs a store"))?;
        let mut c = Cluster {
            stores: store_ids
                .iter()
                .map(|&id| {
                    (
                        id,
                        StoreInfo {
                            id,
                            address: String::new(),
                            up: true,
                        },
                    )
                })
                .collect(),
            regions: HashMap::new(),
            by_start: BTreeMap::new(),
            next_id: store_ids.iter().copied().max().unwrap_or(0) + 1,
        };
        let id = c.alloc_id();
        let peers: Vec<metapb::Peer> = store_ids.iter().map(|&s| c.new_peer(s)).collect();
        let leader = peers.iter().find(|p| p.store_id == first).cloned();
        let region = metapb::Region {
            id,
            region_epoch: Some(metapb::RegionEpoch {
                conf_ver: 1,
                version: 1,
            }),
            peers,
            ..Default::default()
        };
        c.by_start.insert(Vec::new(), id);
        c.regions.insert(id, RegionInfo { region, leader });
        Ok(c)
    }

    fn alloc_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn new_peer(&mut self, store_id: u64) -> metapb::Peer {
        metapb::Peer {
            id: self.alloc_id(),
            store_id,
            ..Default::default()
        }
    }

    /// Sets a store's advertised address.
    pub fn set_store_address(&mut self, store_id: u64, address: String) -> Result<()> {
        self.stores
            .get_mut(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))?
            .address = address;
        Ok(())
    }

    /// All stores.
    pub fn stores(&self) -> impl Iterator<Item = &StoreInfo> {
        self.stores.values()
    }

    /// One store.
    pub fn store(&self, id: u64) -> Option<&StoreInfo> {
        self.stores.get(&id)
    }

    /// Region by id.
    pub fn region(&self, id: u64) -> Option<&RegionInfo> {
        self.regions.get(&id)
    }

    /// Number of regions.
    pub fn region_count(&self) -> usize {
        self.regions.len()
    }

    /// The region containing an encoded key (PD `GetRegion`).
    pub fn region_by_key(&self, encoded: &[u8]) -> Option<&RegionInfo> {
        let (_, id) = self
            .by_start
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(encoded)))
            .next_back()?;
        self.regions.get(id).filter(|r| r.contains_encoded(encoded))
    }

    /// The region containing a raw key.
    pub fn region_by_raw_key(&self, raw: &[u8]) -> Option<&RegionInfo> {
        self.region_by_key(&encode_key(raw))
    }

    /// The region before the one containing `encoded` (PD `GetPrevRegion`).
    pub fn prev_region(&self, encoded: &[u8]) -> Option<&RegionInfo> {
        let cur = self.region_by_key(encoded)?;
        let (_, id) = self
            .by_start
            .range::<[u8], _>((
                Bound::Unbounded,
                Bound::Excluded(cur.region.start_key.as_slice()),
            ))
            .next_back()?;
        self.regions.get(id)
    }

    /// Regions overlapping `[start, end)` (encoded; empty end = +∞), in key order, at most
    /// `limit` (0 = all) (PD `ScanRegions`).
    pub fn scan_regions(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<&RegionInfo> {
        let first = self
            .region_by_key(start)
            .map(|r| r.region.start_key.clone())
            .unwrap_or_else(|| start.to_vec());
        let mut out = Vec::new();
        for (k, id) in self.by_start.range(first..) {
            if !end.is_empty() && k.as_slice() >= end {
                break;
            }
            if limit != 0 && out.len() >= limit {
                break;
            }
            if let Some(r) = self.regions.get(id) {
                out.push(r);
            }
        }
        out
    }

    /// Splits `region_id` at encoded `split_key`. The new id takes the left part
    /// (right-derive), both sides get `version + 1`.
    pub fn split(&mut self, region_id: u64, split_key: &[u8]) -> Result<Vec<AdminEvent>> {
        let old = self
            .regions
            .get(&region_id)
            .ok_or(SimError::RegionNotFound(region_id))?
            .clone();
        if split_key <= old.region.start_key.as_slice() || !old.contains_encoded(split_key) {
            return Err(SimError::InvalidRegionOp {
                region: region_id,
                reason: "split key outside region",
            });
        }
        let store_id = old.leader_store().ok_or(SimError::InvalidRegionOp {
            region: region_id,
            reason: "no leader",
        })?;
        let new_id = self.alloc_id();
        let peers: Vec<metapb::Peer> = old
            .region
            .peers
            .iter()
            .map(|p| metapb::Peer { id: 0, ..*p })
            .collect();
        let mut left = old.clone();
        left.region.id = new_id;
        left.region.end_key = split_key.to_vec();
        left.region.peers = peers
            .into_iter()
            .map(|p| metapb::Peer {
                id: self.alloc_id(),
                ..p
            })
            .collect();
        left.leader = old
            .leader_store()
            .and_then(|s| left.region.peers.iter().find(|p| p.store_id == s).cloned());
        let mut right = old;
        right.region.start_key = split_key.to_vec();
        right.epoch_mut().version += 1;
        left.epoch_mut().version = right.version();
        let regions = vec![left.region.clone(), right.region.clone()];
        self.by_start.insert(left.region.start_key.clone(), new_id);
        self.by_start.insert(split_key.to_vec(), region_id);
        self.regions.insert(new_id, left);
        self.regions.insert(region_id, right);
        Ok(vec![AdminEvent::Split {
            region_id,
            store_id,
            regions,
        }])
    }

    /// Merges `source` into the adjacent `target`.
    pub fn merge(&mut self, source: u64, target: u64) -> Result<Vec<AdminEvent>> {
        let src = self
            .regions
            .get(&source)
            .ok_or(SimError::RegionNotFound(source))?
            .clone();
        let tgt = self
            .regions
            .get(&target)
            .ok_or(SimError::RegionNotFound(target))?
            .clone();
        let src_store = src.leader_store().ok_or(SimError::InvalidRegionOp {
            region: source,
            reason: "no leader",
        })?;
        let tgt_store = tgt.leader_store().ok_or(SimError::InvalidRegionOp {
            region: target,
            reason: "no leader",
        })?;
        let src_left_of_tgt =
            src.region.end_key == tgt.region.start_key && !src.region.end_key.is_empty();
        let tgt_left_of_src =
            tgt.region.end_key == src.region.start_key && !tgt.region.end_key.is_empty();
        if !src_left_of_tgt && !tgt_left_of_src {
            return Err(SimError::InvalidRegionOp {
                region: source,
                reason: "regions are not adjacent",
            });
        }
        let version = src.version().max(tgt.version()) + 1;
        self.regions.remove(&source);
        self.by_start.remove(&src.region.start_key);
        let t = self
            .regions
            .get_mut(&target)
            .ok_or(SimError::RegionNotFound(target))?;
        if src_left_of_tgt {
            self.by_start.remove(&t.region.start_key);
            t.region.start_key = src.region.start_key.clone();
            self.by_start.insert(src.region.start_key, target);
        } else {
            t.region.end_key = src.region.end_key;
        }
        t.epoch_mut().version = version;
        Ok(vec![AdminEvent::Merge {
            source,
            source_store: src_store,
            target,
            target_store: tgt_store,
        }])
    }

    /// Moves leadership of `region_id` to its peer on `store_id`.
    pub fn transfer_leader(&mut self, region_id: u64, store_id: u64) -> Result<Vec<AdminEvent>> {
        let up = self
            .stores
            .get(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))?
            .up;
        let r = self
            .regions
            .get_mut(&region_id)
            .ok_or(SimError::RegionNotFound(region_id))?;
        let peer = r
            .region
            .peers
            .iter()
            .find(|p| p.store_id == store_id)
            .cloned();
        let Some(peer) = peer.filter(|_| up) else {
            return Err(SimError::InvalidRegionOp {
                region: region_id,
                reason: "no live peer on target store",
            });
        };
        let old = r.leader_store();
        r.leader = Some(peer);
        Ok(match old {
            Some(old_store) if old_store != store_id => {
                vec![AdminEvent::LeaderChanged {
                    region_id,
                    old_store,
                    new_leader: Some(peer),
                }]
            }
            _ => Vec::new(),
        })
    }

    /// Stops a store: leaders on it move to a peer on a live store (or none).
    pub fn stop_store(&mut self, store_id: u64) -> Result<Vec<AdminEvent>> {
        self.stores
            .get_mut(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))?
            .up = false;
        let live: Vec<u64> = self
            .stores
            .values()
            .filter(|s| s.up)
            .map(|s| s.id)
            .collect();
        let mut events = Vec::new();
        let mut ids: Vec<u64> = self.regions.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(r) = self.regions.get_mut(&id) else {
                continue;
            };
            if r.leader_store() != Some(store_id) {
                continue;
            }
            let new_leader = r
                .region
                .peers
                .iter()
                .find(|p| live.contains(&p.store_id))
                .cloned();
            r.leader = new_leader;
            events.push(AdminEvent::LeaderChanged {
                region_id: id,
                old_store: store_id,
                new_leader,
            });
        }
        Ok(events)
    }

    /// Restarts a store: leaderless regions with a peer there elect it.
    pub fn start_store(&mut self, store_id: u64) -> Result<Vec<AdminEvent>> {
        self.stores
            .get_mut(&store_id)
            .ok_or(SimError::StoreNotFound(store_id))?
            .up = true;
        for r in self.regions.values_mut() {
            if r.leader.is_none() {
                r.leader = r
                    .region
                    .peers
                    .iter()
                    .find(|p| p.store_id == store_id)
                    .cloned();
            }
        }
        Ok(Vec::new())
    }

    /// Adds a peer on `store_id` (`conf_ver + 1`).
    pub fn add_peer(&mut self, region_id: u64, store_id: u64) -> Result<Vec<AdminEvent>> {
        if !self.stores.contains_key(&store_id) {
            return Err(SimError::StoreNotFound(store_id));
        }
        let peer = self.new_peer(store_id);
        let r = self
            .regions
            .get_mut(&region_id)
            .ok_or(SimError::RegionNotFound(region_id))?;
        if r.has_peer_on(store_id) {
            return Err(SimError::InvalidRegionOp {
                region: region_id,
                reason: "peer exists",
            });
        }
        r.region.peers.push(peer);
        r.epoch_mut().conf_ver += 1;
        Ok(Vec::new())
    }

    /// Removes the peer on `store_id` (`conf_ver + 1`); the leader cannot be removed.
    pub fn remove_peer(&mut self, region_id: u64, store_id: u64) -> Result<Vec<AdminEvent>> {
        let r = self
            .regions
            .get_mut(&region_id)
            .ok_or(SimError::RegionNotFound(region_id))?;
        if r.leader_store() == Some(store_id) || !r.has_peer_on(store_id) {
            return Err(SimError::InvalidRegionOp {
                region: region_id,
                reason: "not a removable peer",
            });
        }
        r.region.peers.retain(|p| p.store_id != store_id);
        r.epoch_mut().conf_ver += 1;
        Ok(vec![AdminEvent::PeerRemoved {
            region_id,
            store_id,
        }])
    }
}

/// `EncodeBytes(raw)`: the region-key form of a raw key.
pub fn encode_key(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(crate::tidb::codec::encoded_bytes_len(raw.len()));
    crate::tidb::codec::encode_bytes(&mut out, raw);
    out
}

/// A raw key `r` such that every raw key whose encoding is ≥ `encoded` is ≥ `r`: the exactly
/// decoded key when `encoded` is a complete encoding, else its decodable full-group prefix.
pub fn raw_lower_bound(encoded: &[u8]) -> Vec<u8> {
    const GROUP: usize = 8;
    let mut out = Vec::new();
    for chunk in encoded.chunks(GROUP + 1) {
        if chunk.len() < GROUP + 1 {
            break;
        }
        let marker = chunk[GROUP];
        if marker == 0xFF {
            out.extend_from_slice(&chunk[..GROUP]);
            continue;
        }
        let pad = usize::from(0xFF - marker);
        if pad <= GROUP {
            out.extend_from_slice(&chunk[..GROUP - pad]);
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(c: &Cluster) -> Vec<(u64, u64)> {
        c.scan_regions(b"", b"", 0)
            .iter()
            .map(|r| (r.id(), r.version()))
            .collect()
    }

    #[test]
    fn split_right_derives_and_bumps_both_versions() {
        let mut c = Cluster::new(&[1, 2, 3]).expect("cluster");
        let r0 = c.region_by_key(b"").expect("region").id();
        let ev = c.split(r0, &encode_key(b"m")).expect("split");
        let AdminEvent::Split {
            regions, store_id, ..
        } = &ev[0]
        else {
            panic!("{ev:?}")
        };
        assert_eq!(*store_id, 1);
        assert_eq!(regions.len(), 2);
        assert_ne!(regions[0].id, r0, "left part gets the new id");
        assert_eq!(regions[1].id, r0, "right part keeps the id");
        assert_eq!(ids(&c).iter().map(|x| x.1).collect::<Vec<_>>(), vec![2, 2]);
        assert_eq!(c.region_by_raw_key(b"z").expect("r").id(), r0);
        assert_eq!(c.region_by_raw_key(b"a").expect("r").id(), regions[0].id);
        assert_eq!(
            c.prev_region(&encode_key(b"z")).expect("prev").id(),
            regions[0].id
        );
        assert!(
            c.split(r0, &encode_key(b"a")).is_err(),
            "key outside region"
        );
    }

    #[test]
    fn merge_takes_max_version_plus_one() {
        let mut c = Cluster::new(&[1]).expect("cluster");
        let r0 = c.region_by_key(b"").expect("region").id();
        c.split(r0, &encode_key(b"m")).expect("split");
        let left = c.region_by_raw_key(b"a").expect("r").id();
        c.split(r0, &encode_key(b"t")).expect("split");
        let mid = c.region_by_raw_key(b"n").expect("r").id();
        assert_eq!(c.region(r0).expect("r").version(), 3);
        c.merge(left, mid).expect("merge");
        assert!(c.region(left).is_none());
        let m = c.region(mid).expect("r");
        assert_eq!(m.version(), 4);
        assert!(m.region.start_key.is_empty());
        assert_eq!(c.region_count(), 2);
        assert!(c.merge(mid, mid).is_err());
    }

    #[test]
    fn leader_moves_on_stop_and_returns_on_start() {
        let mut c = Cluster::new(&[1, 2]).expect("cluster");
        let r0 = c.region_by_key(b"").expect("region").id();
        let ev = c.stop_store(1).expect("stop");
        assert!(
            matches!(&ev[0], AdminEvent::LeaderChanged { old_store: 1, new_leader: Some(p), .. } if p.store_id == 2)
        );
        c.stop_store(2).expect("stop");
        assert_eq!(c.region(r0).expect("r").leader, None);
        c.start_store(1).expect("start");
        assert_eq!(c.region(r0).expect("r").leader_store(), Some(1));
        assert!(c.transfer_leader(r0, 2).is_err(), "store 2 is down");
        c.start_store(2).expect("start");
        let ev = c.transfer_leader(r0, 2).expect("transfer");
        assert_eq!(ev.len(), 1);
        let ev = c.remove_peer(r0, 1).expect("remove");
        assert_eq!(
            ev,
            vec![AdminEvent::PeerRemoved {
                region_id: r0,
                store_id: 1
            }]
        );
        assert_eq!(
            c.region(r0)
                .expect("r")
                .region
                .region_epoch
                .expect("epoch")
                .conf_ver,
            2
        );
    }

    #[test]
    fn raw_lower_bound_inverts_encoding() {
        for raw in [&b""[..], b"abc", b"12345678", b"123456789"] {
            assert_eq!(raw_lower_bound(&encode_key(raw)), raw);
        }
        let partial = &encode_key(b"123456789abc")[..12];
        assert_eq!(raw_lower_bound(partial), b"12345678");
    }
}

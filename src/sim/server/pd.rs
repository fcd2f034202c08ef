//! `pdpb.PD`: membership, TSO, regions, stores and GC safe points (docs/upstream-facts.md, "PD"),
//! served from the core's `Cluster`, TSO allocator and `GcSafePoints`.
//!
//! Every RPC but `GetMembers` and `GetClusterInfo` checks `header.cluster_id` and fails with
//! `FAILED_PRECONDITION` "mismatch cluster id, need X but got Y" (a transport error, not a
//! header error). A region PD does not know is an OK header with no region (PD leader
//! behaviour).

use std::sync::Arc;

use tibinlog_proto::metapb;
use tibinlog_proto::pdpb::{self, pd_server::Pd};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status, Streaming};

use super::state::Shared;
use crate::sim::region::RegionInfo;
use crate::sim::Ts;

/// Version every simulated component reports (TiCDC accepts `[7.1.0, 10.0.0)`).
pub const SIM_VERSION: &str = "8.5.0";

/// The PD service.
#[derive(Debug, Clone)]
pub struct PdService {
    shared: Arc<Shared>,
    member_id: u64,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

fn header(cluster_id: u64) -> Option<pdpb::ResponseHeader> {
    Some(pdpb::ResponseHeader {
        cluster_id,
        error: None,
    })
}

fn error_header(
    cluster_id: u64,
    kind: pdpb::ErrorType,
    message: impl Into<String>,
) -> Option<pdpb::ResponseHeader> {
    Some(pdpb::ResponseHeader {
        cluster_id,
        error: Some(pdpb::Error {
            r#type: kind as i32,
            message: message.into(),
        }),
    })
}

fn pd_region(r: &RegionInfo) -> pdpb::Region {
    pdpb::Region {
        region: Some(r.region.clone()),
        leader: Some(r.leader.unwrap_or_default()),
        ..Default::default()
    }
}

impl PdService {
    /// The PD member `member_id` (its address is in [`Shared::pd`]).
    pub fn new(
        shared: Arc<Shared>,
        member_id: u64,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        Self {
            shared,
            member_id,
            cancel,
            tracker,
        }
    }

    fn cluster_id(&self) -> u64 {
        self.shared.cluster_id
    }

    /// PD's `validateRequest`: only the leader serves, and the header's cluster id must be
    /// ours.
    fn check(&self, h: Option<&pdpb::RequestHeader>) -> Result<(), Status> {
        if self.shared.pd.leader() != self.member_id {
            return Err(Status::unavailable("not leader"));
        }
        let got = h.map_or(0, |h| h.cluster_id);
        if got != self.cluster_id() {
            return Err(Status::failed_precondition(format!(
                "mismatch cluster id, need {} but got {}",
                self.cluster_id(),
                got
            )));
        }
        Ok(())
    }

    fn member(m: &super::state::PdMember) -> pdpb::Member {
        pdpb::Member {
            name: m.name.clone(),
            member_id: m.id,
            peer_urls: vec![m.url.clone()],
            client_urls: vec![m.url.clone()],
            binary_version: SIM_VERSION.into(),
            ..Default::default()
        }
    }

    fn store(&self, id: u64) -> Option<metapb::Store> {
        let st = self.shared.lock();
        st.core.cluster.store(id).map(|s| metapb::Store {
            id: s.id,
            address: s.address.clone(),
            // A stopped TiKV stays Up in PD until an operator takes it offline.
            state: metapb::StoreState::Up as i32,
            version: SIM_VERSION.into(),
            node_state: metapb::NodeState::Serving as i32,
            ..Default::default()
        })
    }

    fn region_response(&self, r: Option<RegionInfo>) -> pdpb::GetRegionResponse {
        let mut resp = pdpb::GetRegionResponse {
            header: header(self.cluster_id()),
            ..Default::default()
        };
        if let Some(r) = r {
            resp.region = Some(r.region);
            resp.leader = r.leader;
        }
        resp
    }
}

/// Checks BatchScanRegions ranges: each `start < end` (empty end = +∞) and sorted without
/// overlap. Returns PD's error message on failure.
pub fn validate_ranges(ranges: &[pdpb::KeyRange]) -> Result<(), String> {
    for (i, r) in ranges.iter().enumerate() {
        if !r.end_key.is_empty() && r.start_key > r.end_key {
            return Err("invalid key range, start key > end key".into());
        }
        if i > 0 {
            let prev = &ranges[i - 1];
            if prev.end_key.is_empty() || prev.end_key > r.start_key {
                return Err("invalid key range, ranges overlapped".into());
            }
        }
    }
    Ok(())
}

#[tonic::async_trait]
impl Pd for PdService {
    async fn get_cluster_info(
        &self,
        _request: Request<pdpb::GetClusterInfoRequest>,
    ) -> Result<Response<pdpb::GetClusterInfoResponse>, Status> {
        Ok(Response::new(pdpb::GetClusterInfoResponse {
            header: header(self.cluster_id()),
            service_modes: vec![pdpb::ServiceMode::PdSvcMode as i32],
            tso_urls: Vec::new(),
        }))
    }

    async fn get_members(
        &self,
        _request: Request<pdpb::GetMembersRequest>,
    ) -> Result<Response<pdpb::GetMembersResponse>, Status> {
        let up = self.shared.pd.members();
        let leader_id = self.shared.pd.leader();
        let leader = up.iter().find(|m| m.id == leader_id).map(Self::member);
        Ok(Response::new(pdpb::GetMembersResponse {
            header: header(self.cluster_id()),
            members: up.iter().map(Self::member).collect(),
            leader: leader.clone(),
            etcd_leader: leader,
            ..Default::default()
        }))
    }

    async fn tso(
        &self,
        request: Request<Streaming<pdpb::TsoRequest>>,
    ) -> Result<Response<BoxStream<pdpb::TsoResponse>>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel::<Result<pdpb::TsoResponse, Status>>(16);
        let this = self.clone();
        let mut leader = self.shared.pd.watch_leader();
        self.tracker.spawn(async move {
            loop {
                let msg = tokio::select! {
                    _ = this.cancel.cancelled() => break,
                    // A leader that loses the leadership ends its TSO streams.
                    lost = async { leader.wait_for(|&l| l != this.member_id).await.is_ok() } => {
                        if !lost {
                            break;
                        }
                        let _ = tx.send(Err(Status::unavailable("not leader"))).await;
                        break;
                    }
                    m = inbound.message() => m,
                };
                let req = match msg {
                    Ok(Some(r)) => r,
                    Ok(None) | Err(_) => break,
                };
                let reply = this.check(req.header.as_ref()).and_then(|()| {
                    if req.count == 0 {
                        return Err(Status::unknown(
                            "generate timestamp failed, tso count should be positive",
                        ));
                    }
                    let ts = this
                        .shared
                        .lock()
                        .core
                        .tso(req.count)
                        .map_err(|e| Status::unknown(e.to_string()))?;
                    Ok(pdpb::TsoResponse {
                        header: header(this.cluster_id()),
                        count: req.count,
                        timestamp: Some(timestamp(ts)),
                    })
                });
                let stop = reply.is_err();
                if tx.send(reply).await.is_err() || stop {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn get_store(
        &self,
        request: Request<pdpb::GetStoreRequest>,
    ) -> Result<Response<pdpb::GetStoreResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let resp = match self.store(req.store_id) {
            Some(store) => pdpb::GetStoreResponse {
                header: header(self.cluster_id()),
                store: Some(store),
                ..Default::default()
            },
            None => pdpb::GetStoreResponse {
                header: error_header(
                    self.cluster_id(),
                    pdpb::ErrorType::Unknown,
                    format!("invalid store ID {}, not found", req.store_id),
                ),
                ..Default::default()
            },
        };
        Ok(Response::new(resp))
    }

    async fn get_all_stores(
        &self,
        request: Request<pdpb::GetAllStoresRequest>,
    ) -> Result<Response<pdpb::GetAllStoresResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let ids: Vec<u64> = self
            .shared
            .lock()
            .core
            .cluster
            .stores()
            .map(|s| s.id)
            .collect();
        // No simulated store is ever a tombstone, so exclude_tombstone_stores changes nothing.
        let stores = ids.into_iter().filter_map(|id| self.store(id)).collect();
        Ok(Response::new(pdpb::GetAllStoresResponse {
            header: header(self.cluster_id()),
            stores,
        }))
    }

    async fn get_region(
        &self,
        request: Request<pdpb::GetRegionRequest>,
    ) -> Result<Response<pdpb::GetRegionResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let r = self
            .shared
            .lock()
            .core
            .cluster
            .region_by_key(&req.region_key)
            .cloned();
        Ok(Response::new(self.region_response(r)))
    }

    async fn get_prev_region(
        &self,
        request: Request<pdpb::GetRegionRequest>,
    ) -> Result<Response<pdpb::GetRegionResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let r = self
            .shared
            .lock()
            .core
            .cluster
            .prev_region(&req.region_key)
            .cloned();
        Ok(Response::new(self.region_response(r)))
    }

    async fn get_region_by_id(
        &self,
        request: Request<pdpb::GetRegionByIdRequest>,
    ) -> Result<Response<pdpb::GetRegionResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let r = self
            .shared
            .lock()
            .core
            .cluster
            .region(req.region_id)
            .cloned();
        Ok(Response::new(self.region_response(r)))
    }

    async fn scan_regions(
        &self,
        request: Request<pdpb::ScanRegionsRequest>,
    ) -> Result<Response<pdpb::ScanRegionsResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let limit = usize::try_from(req.limit).unwrap_or(0);
        let regions: Vec<RegionInfo> = self
            .shared
            .lock()
            .core
            .cluster
            .scan_regions(&req.start_key, &req.end_key, limit)
            .into_iter()
            .cloned()
            .collect();
        Ok(Response::new(pdpb::ScanRegionsResponse {
            header: header(self.cluster_id()),
            region_metas: regions.iter().map(|r| r.region.clone()).collect(),
            leaders: regions
                .iter()
                .map(|r| r.leader.unwrap_or_default())
                .collect(),
            regions: regions.iter().map(pd_region).collect(),
        }))
    }

    async fn batch_scan_regions(
        &self,
        request: Request<pdpb::BatchScanRegionsRequest>,
    ) -> Result<Response<pdpb::BatchScanRegionsResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let cid = self.cluster_id();
        if let Err(msg) = validate_ranges(&req.ranges) {
            return Ok(Response::new(pdpb::BatchScanRegionsResponse {
                header: error_header(cid, pdpb::ErrorType::Unknown, msg),
                regions: Vec::new(),
            }));
        }
        let limit = usize::try_from(req.limit)
            .ok()
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let st = self.shared.lock();
        let mut out: Vec<pdpb::Region> = Vec::new();
        let mut last_id = None;
        let mut hole = false;
        'ranges: for range in &req.ranges {
            let found = st
                .core
                .cluster
                .scan_regions(&range.start_key, &range.end_key, 0);
            // Coverage check of this range by the regions found.
            let mut covered_to = range.start_key.clone();
            for r in &found {
                if r.region.start_key > covered_to {
                    hole = true;
                }
                covered_to = r.region.end_key.clone();
                if covered_to.is_empty() {
                    break;
                }
            }
            if !covered_to.is_empty() && (range.end_key.is_empty() || covered_to < range.end_key) {
                hole = true;
            }
            for r in found {
                if last_id == Some(r.id()) {
                    continue; // a region spanning two ranges is listed once
                }
                if out.len() >= limit {
                    break 'ranges;
                }
                last_id = Some(r.id());
                out.push(pd_region(r));
            }
        }
        drop(st);
        if req.contain_all_key_range && hole {
            return Ok(Response::new(pdpb::BatchScanRegionsResponse {
                header: error_header(
                    cid,
                    pdpb::ErrorType::RegionsNotContainAllKeyRange,
                    "regions not contain all key range",
                ),
                regions: Vec::new(),
            }));
        }
        Ok(Response::new(pdpb::BatchScanRegionsResponse {
            header: header(cid),
            regions: out,
        }))
    }

    async fn get_gc_safe_point(
        &self,
        request: Request<pdpb::GetGcSafePointRequest>,
    ) -> Result<Response<pdpb::GetGcSafePointResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let sp = self.shared.lock().core.gc.gc_safe_point();
        Ok(Response::new(pdpb::GetGcSafePointResponse {
            header: header(self.cluster_id()),
            safe_point: sp.0,
        }))
    }

    async fn update_service_gc_safe_point(
        &self,
        request: Request<pdpb::UpdateServiceGcSafePointRequest>,
    ) -> Result<Response<pdpb::UpdateServiceGcSafePointResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let outcome = self.shared.lock().core.update_service_safe_point(
            &req.service_id,
            req.ttl,
            Ts(req.safe_point),
        );
        Ok(Response::new(pdpb::UpdateServiceGcSafePointResponse {
            header: header(self.cluster_id()),
            service_id: req.service_id,
            ttl: outcome.ttl_secs,
            min_safe_point: outcome.min_safe_point.0,
        }))
    }
}

/// A `Ts` as a PD `Timestamp`.
pub fn timestamp(ts: Ts) -> pdpb::Timestamp {
    pdpb::Timestamp {
        physical: i64::try_from(ts.physical_ms()).unwrap_or(i64::MAX),
        logical: i64::try_from(ts.logical()).unwrap_or(0),
        suffix_bits: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kr(s: &[u8], e: &[u8]) -> pdpb::KeyRange {
        pdpb::KeyRange {
            start_key: s.to_vec(),
            end_key: e.to_vec(),
        }
    }

    #[test]
    fn batch_ranges_must_be_sorted_and_disjoint() {
        assert!(validate_ranges(&[kr(b"a", b"b"), kr(b"b", b"c"), kr(b"d", b"")]).is_ok());
        assert!(validate_ranges(&[kr(b"b", b"a")]).is_err());
        assert!(validate_ranges(&[kr(b"a", b"c"), kr(b"b", b"d")]).is_err());
        assert!(validate_ranges(&[kr(b"a", b""), kr(b"b", b"d")]).is_err());
    }
}

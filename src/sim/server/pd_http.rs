//! The part of PD's HTTP API that clients of this project read, served on every PD member's
//! client URL beside its gRPC service (PD multiplexes both on one port).
//!
//! `GET /pd/api/v1/stats/region?start_key=K&end_key=E[&count]`: the statistics of the regions
//! overlapping `[K, E)`, keys in region form (memcomparable-encoded, query-escaped; an empty
//! `end_key` has no bound). PD sums what each region's last heartbeat reported: the approximate
//! size in MiB (a non-empty region below 1 MiB counts as 1, and a region of at most 1 MiB is
//! "empty") and the approximate keys; with `count` only the region count is filled. The
//! simulator's regions report what TiKV would (`mvcc::RangeSize`), computed at the request.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use percent_encoding::percent_decode;
use serde::Serialize;

use super::state::Shared;
use crate::sim::core::SimCore;
use crate::sim::region::raw_lower_bound;

/// PD's region size unit.
const MIB: u64 = 1 << 20;
/// The size (MiB) of a region PD counts as empty, and the least a non-empty one reports.
const EMPTY_REGION_SIZE: u64 = 1;

/// The JSON body of `stats/region` (PD's `RegionStats`).
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct RegionStats {
    pub count: u64,
    pub empty_count: u64,
    pub storage_size: u64,
    pub user_storage_size: u64,
    pub storage_keys: u64,
    pub store_leader_count: BTreeMap<u64, u64>,
    pub store_peer_count: BTreeMap<u64, u64>,
    pub store_leader_size: BTreeMap<u64, u64>,
    pub store_leader_keys: BTreeMap<u64, u64>,
    pub store_peer_size: BTreeMap<u64, u64>,
    pub store_peer_keys: BTreeMap<u64, u64>,
}

/// The routes of the HTTP API.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/pd/api/v1/stats/region", get(stats_region))
        .with_state(shared)
}

/// One query parameter, percent-decoded to bytes (`+` is a space, as Go's query parser has
/// it); `None` when absent.
fn param(query: &str, name: &str) -> Option<Vec<u8>> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| percent_decode(v.replace('+', " ").as_bytes()).collect())
    })
}

async fn stats_region(State(shared): State<Arc<Shared>>, RawQuery(q): RawQuery) -> Response {
    let q = q.unwrap_or_default();
    let start = param(&q, "start_key").unwrap_or_default();
    let end = param(&q, "end_key").unwrap_or_default();
    if !end.is_empty() && end <= start {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json("\"end_key\" must be greater than \"start_key\""),
        )
            .into_response();
    }
    let count_only = param(&q, "count").is_some();
    let stats = region_stats(&shared.lock().core, &start, &end, count_only);
    axum::Json(stats).into_response()
}

/// The statistics of the regions overlapping the region-form range `[start, end)`.
pub fn region_stats(core: &SimCore, start: &[u8], end: &[u8], count_only: bool) -> RegionStats {
    let mut s = RegionStats::default();
    for r in core.cluster.scan_regions(start, end, 0) {
        s.count += 1;
        if count_only {
            continue;
        }
        let raw_end = if r.region.end_key.is_empty() {
            Vec::new()
        } else {
            raw_lower_bound(&r.region.end_key)
        };
        let approx = core
            .mvcc
            .approximate_size(&raw_lower_bound(&r.region.start_key), &raw_end);
        let mut size = approx.bytes / MIB;
        if approx.bytes > 0 && size < EMPTY_REGION_SIZE {
            size = EMPTY_REGION_SIZE;
        }
        if size <= EMPTY_REGION_SIZE {
            s.empty_count += 1;
        }
        s.storage_size += size;
        s.user_storage_size += size;
        s.storage_keys += approx.keys;
        if let Some(leader) = r.leader_store() {
            *s.store_leader_count.entry(leader).or_default() += 1;
            *s.store_leader_size.entry(leader).or_default() += size;
            *s.store_leader_keys.entry(leader).or_default() += approx.keys;
        }
        for p in &r.region.peers {
            *s.store_peer_count.entry(p.store_id).or_default() += 1;
            *s.store_peer_size.entry(p.store_id).or_default() += size;
            *s.store_peer_keys.entry(p.store_id).or_default() += approx.keys;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode_to_bytes() {
        let q = "start_key=t%80%00%00%00%00%00%00%FF&end_key=a+b&count";
        assert_eq!(
            param(q, "start_key").expect("start"),
            b"t\x80\0\0\0\0\0\0\xff".to_vec()
        );
        assert_eq!(param(q, "end_key").expect("end"), b"a b".to_vec());
        assert_eq!(param(q, "count"), Some(Vec::new()));
        assert_eq!(param(q, "limit"), None);
    }
}

//! The simulated cluster over real gRPC: PD, TiKV reads and change streams, driven with the
//! generated tonic clients as TiCDC would drive a real cluster.

mod common;

use std::future::Future;
use std::time::Duration;

use common::sim::{
    error, is_initialized, kv, kv_context, pd, pd_header, register, rows, start, start_with, Feed,
};
use tibinlog::sim::region::encode_key;
use tibinlog::sim::server::SimConfig;
use tibinlog_proto::cdcpb::{self, event};
use tibinlog_proto::{kvrpcpb, pdpb};
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn timed<F: Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test timed out");
}

fn ts_of(t: &pdpb::Timestamp) -> u64 {
    ((t.physical as u64) << 18) + t.logical as u64
}

#[tokio::test]
async fn pd_cluster_id_discovery_then_mismatch_is_failed_precondition() {
    timed(async {
        let cluster = start(3, 1).await;
        let mut pd = pd(&cluster).await;
        let members = pd
            .get_members(pdpb::GetMembersRequest::default())
            .await
            .expect("get members")
            .into_inner();
        let cid = members.header.expect("header").cluster_id;
        assert_eq!(cid, cluster.cluster_id());
        assert_ne!(cid, 0);
        let leader = members.leader.expect("leader");
        assert_eq!(leader.client_urls, vec![cluster.pd_url()]);
        assert_eq!(members.members.len(), 1);

        let info = pd
            .get_cluster_info(pdpb::GetClusterInfoRequest::default())
            .await
            .expect("cluster info")
            .into_inner();
        assert_eq!(
            info.service_modes,
            vec![pdpb::ServiceMode::PdSvcMode as i32]
        );

        let err = pd
            .get_all_stores(pdpb::GetAllStoresRequest {
                header: pd_header(cid + 1),
                ..Default::default()
            })
            .await
            .expect_err("wrong cluster id");
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert_eq!(
            err.message(),
            format!("mismatch cluster id, need {cid} but got {}", cid + 1)
        );
        let err = pd
            .get_region(pdpb::GetRegionRequest::default())
            .await
            .expect_err("no header");
        assert_eq!(err.code(), Code::FailedPrecondition);

        let stores = pd
            .get_all_stores(pdpb::GetAllStoresRequest {
                header: pd_header(cid),
                exclude_tombstone_stores: true,
            })
            .await
            .expect("stores")
            .into_inner()
            .stores;
        assert_eq!(stores.len(), 3);
        for s in &stores {
            let addr = cluster.store_addr(s.id).expect("store");
            assert_eq!(s.address, addr.to_string());
        }
        let one = pd
            .get_store(pdpb::GetStoreRequest {
                header: pd_header(cid),
                store_id: 2,
            })
            .await
            .expect("store")
            .into_inner();
        assert_eq!(one.store.expect("store").id, 2);
        let missing = pd
            .get_store(pdpb::GetStoreRequest {
                header: pd_header(cid),
                store_id: 99,
            })
            .await
            .expect("store")
            .into_inner();
        let e = missing.header.and_then(|h| h.error).expect("header error");
        assert_eq!(e.r#type, pdpb::ErrorType::Unknown as i32);
        cluster.shutdown().await;
    })
    .await;
}

/// Three PD members: every one lists all of them and the leader; a follower refuses other calls
/// with `UNAVAILABLE` "not leader"; a leader change ends the old leader's TSO stream the same
/// way, and the new leader's timestamps are above the old one's.
#[tokio::test]
async fn pd_followers_refuse_and_a_leader_change_ends_tso_streams() {
    timed(async {
        let cluster = start_with(SimConfig {
            stores: 1,
            seed: 4,
            pd_members: 3,
            ..SimConfig::default()
        })
        .await;
        let cid = cluster.cluster_id();
        let members = cluster.pd_members();
        assert_eq!(members.len(), 3);
        let dial = |url: &str| {
            let url = url.to_owned();
            async move {
                pdpb::pd_client::PdClient::new(
                    tonic::transport::Channel::from_shared(url)
                        .expect("uri")
                        .connect()
                        .await
                        .expect("connect"),
                )
            }
        };
        let leader_id = cluster.pd_leader();
        let (leader_url, follower_url) = {
            let url = |want: bool| {
                members
                    .iter()
                    .find(|(id, _)| (*id == leader_id) == want)
                    .map(|(_, u)| u.clone())
                    .expect("member")
            };
            (url(true), url(false))
        };
        let mut follower = dial(&follower_url).await;
        let listed = follower
            .get_members(pdpb::GetMembersRequest::default())
            .await
            .expect("a follower answers GetMembers")
            .into_inner();
        assert_eq!(listed.members.len(), 3);
        assert_eq!(
            listed.leader.expect("leader").client_urls,
            std::slice::from_ref(&leader_url)
        );
        let err = follower
            .get_all_stores(pdpb::GetAllStoresRequest {
                header: pd_header(cid),
                ..Default::default()
            })
            .await
            .expect_err("a follower refuses");
        assert_eq!(
            (err.code(), err.message()),
            (Code::Unavailable, "not leader")
        );

        let mut leader = dial(&leader_url).await;
        let (tx, rx) = mpsc::channel(4);
        let mut stream = leader
            .tso(ReceiverStream::new(rx))
            .await
            .expect("tso")
            .into_inner();
        let req = || pdpb::TsoRequest {
            header: pd_header(cid),
            count: 1,
            ..Default::default()
        };
        tx.send(req()).await.expect("send");
        let before = ts_of(
            &stream
                .message()
                .await
                .expect("ts")
                .expect("open")
                .timestamp
                .expect("ts"),
        );
        let (new_id, new_url) = members
            .iter()
            .find(|(id, _)| *id != leader_id)
            .cloned()
            .expect("another member");
        cluster.transfer_pd_leader(new_id).expect("transfer");
        let err = stream
            .message()
            .await
            .expect_err("the old leader's stream ends");
        assert_eq!(err.code(), Code::Unavailable);
        let mut new_leader = dial(&new_url).await;
        let (tx, rx) = mpsc::channel(4);
        let mut stream = new_leader
            .tso(ReceiverStream::new(rx))
            .await
            .expect("tso")
            .into_inner();
        tx.send(req()).await.expect("send");
        let after = ts_of(
            &stream
                .message()
                .await
                .expect("ts")
                .expect("open")
                .timestamp
                .expect("ts"),
        );
        assert!(after > before);
        // The leader dies: another member leads.
        cluster.stop_pd(new_id).await.expect("stop");
        assert!(![0, new_id].contains(&cluster.pd_leader()));
        assert_eq!(cluster.pd_members().len(), 2);
        cluster.restart_pd(new_id).await.expect("restart");
        assert_eq!(cluster.pd_members().len(), 3);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn tso_stream_is_strictly_increasing_and_reports_batch_maximum() {
    timed(async {
        let cluster = start(1, 2).await;
        let cid = cluster.cluster_id();
        let mut pd = pd(&cluster).await;
        let (tx, rx) = mpsc::channel(16);
        let mut stream = pd
            .tso(ReceiverStream::new(rx))
            .await
            .expect("tso")
            .into_inner();
        let mut prev = 0u64;
        for count in [1u32, 10, 3, 1000, 1] {
            tx.send(pdpb::TsoRequest {
                header: pd_header(cid),
                count,
                ..Default::default()
            })
            .await
            .expect("send");
            let resp = stream.message().await.expect("recv").expect("open");
            assert_eq!(resp.count, count);
            let last = ts_of(&resp.timestamp.expect("timestamp"));
            let first = last - u64::from(count) + 1;
            assert!(first > prev, "batch {first}..={last} overlaps {prev}");
            prev = last;
        }
        // Another cluster-wide allocation is above the stream's.
        assert!(cluster.tso().0 > prev);
        tx.send(pdpb::TsoRequest {
            header: pd_header(cid),
            count: 0,
            ..Default::default()
        })
        .await
        .expect("send");
        let err = stream.message().await.expect_err("count 0");
        assert_eq!(err.code(), Code::Unknown);

        let (tx, rx) = mpsc::channel(1);
        let mut stream = pd
            .tso(ReceiverStream::new(rx))
            .await
            .expect("tso")
            .into_inner();
        tx.send(pdpb::TsoRequest {
            header: pd_header(cid ^ 7),
            count: 1,
            ..Default::default()
        })
        .await
        .expect("send");
        let err = stream.message().await.expect_err("mismatch");
        assert_eq!(err.code(), Code::FailedPrecondition);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn regions_after_split_via_get_scan_and_batch_scan() {
    timed(async {
        let cluster = start(2, 3).await;
        let cid = cluster.cluster_id();
        let (left, right) = cluster.split_at(b"m").await.expect("split");
        let mut pd = pd(&cluster).await;
        let get = |key: &[u8]| pdpb::GetRegionRequest {
            header: pd_header(cid),
            region_key: encode_key(key),
            ..Default::default()
        };
        let a = pd.get_region(get(b"a")).await.expect("get").into_inner();
        let ra = a.region.expect("region");
        assert_eq!(ra.id, left);
        assert_eq!(ra.end_key, encode_key(b"m"));
        assert_eq!(ra.region_epoch.expect("epoch").version, 2);
        assert_eq!(a.leader.expect("leader").store_id, 1);
        let z = pd.get_region(get(b"z")).await.expect("get").into_inner();
        assert_eq!(z.region.expect("region").id, right);
        let prev = pd
            .get_prev_region(get(b"z"))
            .await
            .expect("prev")
            .into_inner();
        assert_eq!(prev.region.expect("region").id, left);
        let none = pd
            .get_region_by_id(pdpb::GetRegionByIdRequest {
                header: pd_header(cid),
                region_id: 12345,
                ..Default::default()
            })
            .await
            .expect("by id")
            .into_inner();
        assert!(none.header.expect("header").error.is_none());
        assert!(
            none.region.is_none(),
            "missing region: OK header, no region"
        );

        let scan = pd
            .scan_regions(pdpb::ScanRegionsRequest {
                header: pd_header(cid),
                start_key: Vec::new(),
                limit: 0,
                end_key: Vec::new(),
            })
            .await
            .expect("scan")
            .into_inner();
        assert_eq!(scan.regions.len(), 2);
        assert_eq!(scan.region_metas.len(), 2);
        assert_eq!(scan.leaders.len(), 2);
        assert_eq!(scan.region_metas[0].id, left);
        assert_eq!(scan.regions[1].region.as_ref().expect("region").id, right);
        let limited = pd
            .scan_regions(pdpb::ScanRegionsRequest {
                header: pd_header(cid),
                limit: 1,
                ..Default::default()
            })
            .await
            .expect("scan")
            .into_inner();
        assert_eq!(limited.regions.len(), 1);

        let kr = |s: &[u8], e: &[u8]| pdpb::KeyRange {
            start_key: encode_key(s),
            end_key: encode_key(e),
        };
        let batch = pd
            .batch_scan_regions(pdpb::BatchScanRegionsRequest {
                header: pd_header(cid),
                ranges: vec![kr(b"a", b"b"), kr(b"c", b"n"), kr(b"p", b"q")],
                contain_all_key_range: true,
                ..Default::default()
            })
            .await
            .expect("batch")
            .into_inner();
        assert!(batch.header.expect("header").error.is_none());
        let ids: Vec<u64> = batch
            .regions
            .iter()
            .map(|r| r.region.as_ref().expect("region").id)
            .collect();
        assert_eq!(ids, vec![left, right], "each region once");
        let bad = pd
            .batch_scan_regions(pdpb::BatchScanRegionsRequest {
                header: pd_header(cid),
                ranges: vec![kr(b"a", b"d"), kr(b"c", b"e")],
                ..Default::default()
            })
            .await
            .expect("batch")
            .into_inner();
        let e = bad.header.and_then(|h| h.error).expect("overlap refused");
        assert_eq!(e.r#type, pdpb::ErrorType::Unknown as i32);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn gc_service_safe_point_update_refusal_and_removal() {
    timed(async {
        let cluster = start(1, 4).await;
        let cid = cluster.cluster_id();
        let mut pd = pd(&cluster).await;
        let upd = |id: &str, ttl: i64, sp: u64| pdpb::UpdateServiceGcSafePointRequest {
            header: pd_header(cid),
            service_id: id.as_bytes().to_vec(),
            ttl,
            safe_point: sp,
        };
        let r = pd
            .update_service_gc_safe_point(upd("ticdc", 3600, 100))
            .await
            .expect("update")
            .into_inner();
        assert_eq!((r.min_safe_point, r.ttl), (100, 3600));
        assert_eq!(r.service_id, b"ticdc");
        let r = pd
            .update_service_gc_safe_point(upd("br", 3600, 50))
            .await
            .expect("update")
            .into_inner();
        assert_eq!(r.min_safe_point, 100, "below the minimum: refused");
        let sp = pd
            .get_gc_safe_point(pdpb::GetGcSafePointRequest {
                header: pd_header(cid),
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(sp.safe_point, 0);
        assert_eq!(cluster.run_gc(tibinlog::sim::Ts(1000)).await.0, 100);
        let sp = pd
            .get_gc_safe_point(pdpb::GetGcSafePointRequest {
                header: pd_header(cid),
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(sp.safe_point, 100, "capped by the service safe point");
        pd.update_service_gc_safe_point(upd("ticdc", 0, u64::MAX))
            .await
            .expect("remove");
        assert_eq!(cluster.run_gc(tibinlog::sim::Ts(1000)).await.0, 1000);
        let err = pd
            .get_gc_safe_point(pdpb::GetGcSafePointRequest {
                header: pd_header(0),
            })
            .await
            .expect_err("mismatch");
        assert_eq!(err.code(), Code::FailedPrecondition);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn event_feed_scan_initialized_resolved_then_realtime_txn() {
    timed(async {
        let cluster = start(3, 5).await;
        let cid = cluster.cluster_id();
        let mut t = cluster.begin().await.expect("begin");
        t.put(b"k1".to_vec(), b"v1".to_vec());
        t.put(b"k2".to_vec(), b"v2".to_vec());
        let c1 = t.commit().await.expect("commit");
        let region = cluster.region_by_raw_key(b"k1").expect("region");

        let mut feed = Feed::open(cluster.store_addr(1).expect("addr"), None)
            .await
            .expect("open");
        feed.send(register(cid, &region, 42, 0)).await;
        let events = feed.events_until(is_initialized).await;
        let all: Vec<&event::Row> = events.iter().flat_map(|e| rows(e).iter()).collect();
        assert_eq!(all.len(), 3, "{all:?}");
        for (row, key) in all.iter().zip([b"k1", b"k2"]) {
            assert_eq!(row.r#type, event::LogType::Committed as i32);
            assert_eq!(row.key, key.to_vec());
            assert_eq!(row.commit_ts, c1.0);
            assert_eq!(row.op_type, event::row::OpType::Put as i32);
        }
        assert_eq!(all[2].r#type, event::LogType::Initialized as i32);
        assert!(events
            .iter()
            .all(|e| e.request_id == 42 && e.region_id == region.id()));

        // Non-multiplexed stream: ResolvedTs.request_id is 0.
        let r = feed
            .resolved_until(|r| r.regions.contains(&region.id()))
            .await;
        assert_eq!(r.request_id, 0);
        assert!(r.ts >= c1.0);

        // A 2PC update arrives as PREWRITE (value + old value) then COMMIT.
        let mut t = cluster.begin().await.expect("begin");
        let start_ts = t.start_ts();
        t.put(b"k1".to_vec(), b"v1b".to_vec());
        t.delete(b"k2".to_vec());
        let c2 = t.commit().await.expect("commit");
        let mut seen = Vec::new();
        while seen
            .iter()
            .filter(|r: &&event::Row| r.r#type == event::LogType::Commit as i32)
            .count()
            < 2
        {
            let msg = feed.next().await;
            if let Some(r) = msg.resolved_ts {
                assert!(
                    r.ts < c2.0 || seen.len() >= 4,
                    "resolved ts passed an unseen commit"
                );
            }
            for ev in msg.events {
                seen.extend(rows(&ev).to_vec());
            }
        }
        let prewrites: Vec<_> = seen
            .iter()
            .filter(|r| r.r#type == event::LogType::Prewrite as i32)
            .collect();
        assert_eq!(prewrites.len(), 2);
        let p1 = prewrites.iter().find(|r| r.key == b"k1").expect("k1");
        assert_eq!(
            (p1.value.as_slice(), p1.old_value.as_slice()),
            (&b"v1b"[..], &b"v1"[..])
        );
        assert_eq!(p1.start_ts, start_ts.0);
        let p2 = prewrites.iter().find(|r| r.key == b"k2").expect("k2");
        assert_eq!(p2.op_type, event::row::OpType::Delete as i32);
        assert!(p2.value.is_empty());
        assert_eq!(p2.old_value, b"v2");
        for c in seen
            .iter()
            .filter(|r| r.r#type == event::LogType::Commit as i32)
        {
            assert_eq!((c.start_ts, c.commit_ts), (start_ts.0, c2.0));
        }
        let r = feed.resolved_until(|r| r.ts >= c2.0).await;
        assert!(r.regions.contains(&region.id()));

        // 1PC and async commit.
        let mut t = cluster.begin().await.expect("begin");
        t.put(b"k3".to_vec(), b"v3".to_vec());
        let c3 = t.commit_1pc().await.expect("1pc");
        let ev = feed.events_until(|e| !rows(e).is_empty()).await;
        let row = &rows(ev.last().expect("event"))[0];
        assert_eq!(row.r#type, event::LogType::Committed as i32);
        assert_eq!(row.commit_ts, c3.0);
        let mut t = cluster.begin().await.expect("begin");
        t.put(b"k4".to_vec(), b"v4".to_vec());
        let c4 = t.commit_async().await.expect("async");
        let ev = feed
            .events_until(|e| {
                rows(e)
                    .iter()
                    .any(|r| r.r#type == event::LogType::Commit as i32)
            })
            .await;
        let commit = ev
            .iter()
            .flat_map(|e| rows(e).iter())
            .find(|r| r.r#type == event::LogType::Commit as i32)
            .expect("commit row");
        assert_eq!(commit.commit_ts, c4.0);
        assert!(c4 > c3);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn registration_errors_arrive_as_error_events() {
    timed(async {
        let cluster = start(3, 6).await;
        let cid = cluster.cluster_id();
        let region = cluster.region_by_raw_key(b"a").expect("region");
        let mut feed = Feed::open(cluster.store_addr(1).expect("addr"), None)
            .await
            .expect("open");

        // Region not found.
        let mut req = register(cid, &region, 1, 0);
        req.region_id = 9999;
        feed.send(req).await;
        let ev = feed.events_until(|e| error(e).is_some()).await;
        let last = ev.last().expect("event");
        assert_eq!((last.region_id, last.request_id), (9999, 1));
        assert!(error(last).expect("error").region_not_found.is_some());

        // Stale epoch version.
        let mut req = register(cid, &region, 2, 0);
        if let Some(e) = req.region_epoch.as_mut() {
            e.version = 0;
        }
        feed.send(req).await;
        let ev = feed.events_until(|e| error(e).is_some()).await;
        let e = error(ev.last().expect("event")).expect("error");
        let enm = e.epoch_not_match.as_ref().expect("epoch not match");
        assert_eq!(enm.current_regions[0].id, region.id());

        // Duplicate (request_id, region_id) on one stream.
        feed.send(register(cid, &region, 3, 0)).await;
        feed.send(register(cid, &region, 3, 0)).await;
        let ev = feed
            .events_until(|e| error(e).is_some() && e.request_id == 3)
            .await;
        let dup = error(ev.last().expect("event")).expect("error");
        assert_eq!(
            dup.duplicate_request.as_ref().expect("duplicate").region_id,
            region.id()
        );

        // Cluster id mismatch.
        feed.send(register(cid + 1, &region, 4, 0)).await;
        let ev = feed
            .events_until(|e| error(e).is_some() && e.request_id == 4)
            .await;
        let m = error(ev.last().expect("event"))
            .and_then(|e| e.cluster_id_mismatch.as_ref())
            .expect("cluster id mismatch");
        assert_eq!((m.current, m.request), (cid, cid + 1));

        // Not leader: store 2 holds a follower.
        let mut follower = Feed::open(cluster.store_addr(2).expect("addr"), None)
            .await
            .expect("open");
        follower.send(register(cid, &region, 5, 0)).await;
        let ev = follower.events_until(|e| error(e).is_some()).await;
        let nl = error(ev.last().expect("event"))
            .and_then(|e| e.not_leader.as_ref())
            .expect("not leader");
        assert_eq!(nl.leader.expect("leader").store_id, 1);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn split_stops_subscription_with_epoch_not_match_listing_new_regions() {
    timed(async {
        let cluster = start(1, 7).await;
        let cid = cluster.cluster_id();
        let region = cluster.region_by_raw_key(b"a").expect("region");
        let mut feed = Feed::open(cluster.store_addr(1).expect("addr"), None)
            .await
            .expect("open");
        feed.send(register(cid, &region, 9, 0)).await;
        feed.events_until(is_initialized).await;
        let (left, right) = cluster.split_at(b"m").await.expect("split");
        let ev = feed.events_until(|e| error(e).is_some()).await;
        let e = error(ev.last().expect("event")).expect("error");
        let ids: Vec<u64> = e
            .epoch_not_match
            .as_ref()
            .expect("epoch not match")
            .current_regions
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, vec![left, right]);
        // Re-registering the new left region works.
        let l = cluster.region(left).expect("left");
        feed.send(register(cid, &l, 10, 0)).await;
        feed.events_until(is_initialized).await;
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn stopping_a_store_breaks_its_streams_and_restart_serves_again() {
    timed(async {
        let cluster = start(2, 8).await;
        let cid = cluster.cluster_id();
        let region = cluster.region_by_raw_key(b"a").expect("region");
        let addr = cluster.store_addr(1).expect("addr");
        let mut feed = Feed::open(addr, None).await.expect("open");
        feed.send(register(cid, &region, 1, 0)).await;
        feed.events_until(is_initialized).await;
        let mut kv1 = kv(&cluster, 1).await;

        cluster.stop_store(1).await.expect("stop");
        let broke = loop {
            match feed.try_next().await {
                Ok(Some(_)) => continue,
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        assert!(broke, "stream ends with an error status");
        let err = kv1
            .kv_get(kvrpcpb::GetRequest {
                context: kv_context(&region),
                key: b"a".to_vec(),
                version: cluster.tso().0,
                ..Default::default()
            })
            .await
            .expect_err("store is down");
        assert_eq!(err.code(), Code::Unavailable);
        assert_eq!(
            cluster.region(region.id()).expect("region").leader_store(),
            Some(2)
        );

        cluster.restart_store(1).await.expect("restart");
        cluster
            .transfer_leader(region.id(), 1)
            .await
            .expect("transfer");
        let region = cluster.region(region.id()).expect("region");
        assert_eq!(cluster.store_addr(1), Some(addr), "same port");
        let mut feed = Feed::open(addr, None).await.expect("reopen");
        feed.send(register(cid, &region, 2, 0)).await;
        feed.events_until(is_initialized).await;
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn event_feed_v2_multiplexes_request_ids_and_rejects_unknown_features() {
    timed(async {
        let cluster = start(1, 9).await;
        let cid = cluster.cluster_id();
        let addr = cluster.store_addr(1).expect("addr");
        let region = cluster.region_by_raw_key(b"a").expect("region");

        let err = Feed::open(addr, Some("stream-multiplexing,teleport"))
            .await
            .err()
            .expect("unknown feature refused");
        assert_eq!(err.code(), Code::Unimplemented);

        // TiCDC's probe: open, close the send side, read: end of stream.
        let mut probe = Feed::open(addr, Some("stream-multiplexing"))
            .await
            .expect("probe");
        probe.close_send();
        assert!(probe.try_next().await.expect("clean end").is_none());

        let mut feed = Feed::open(addr, Some("stream-multiplexing"))
            .await
            .expect("open");
        feed.send(register(cid, &region, 7, 0)).await;
        feed.send(register(cid, &region, 8, 0)).await;
        let mut inited = std::collections::BTreeSet::new();
        feed.events_until(|e| {
            if is_initialized(e) {
                inited.insert(e.request_id);
            }
            inited.len() == 2
        })
        .await;
        let mut ids = std::collections::BTreeSet::new();
        while ids.len() < 2 {
            let r = feed.resolved_until(|_| true).await;
            assert_eq!(r.regions, vec![region.id()]);
            ids.insert(r.request_id);
        }
        assert_eq!(ids.into_iter().collect::<Vec<_>>(), vec![7, 8]);

        // Deregister request 7: a region_not_found for it, request 8 keeps going.
        let mut dereg = register(cid, &region, 7, 0);
        dereg.request = Some(cdcpb::change_data_request::Request::Deregister(
            cdcpb::change_data_request::Deregister {},
        ));
        feed.send(dereg).await;
        let ev = feed.events_until(|e| error(e).is_some()).await;
        let last = ev.last().expect("event");
        assert_eq!(last.request_id, 7);
        assert!(error(last).expect("error").region_not_found.is_some());
        let r = feed.resolved_until(|_| true).await;
        assert_eq!(r.request_id, 8);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn kv_reads_see_locks_and_check_the_region() {
    timed(async {
        let cluster = start(2, 10).await;
        let mut t = cluster.begin().await.expect("begin");
        t.put(b"a1".to_vec(), b"old".to_vec());
        t.put(b"a2".to_vec(), b"x".to_vec());
        let c1 = t.commit().await.expect("commit");
        // Held until the reads below are done (`commit_now`), however slow the machine.
        let held = cluster
            .hold_lock(b"a1".to_vec(), b"new".to_vec(), Duration::from_secs(600))
            .await
            .expect("lock");
        let region = cluster.region_by_raw_key(b"a1").expect("region");
        let mut kv1 = kv(&cluster, 1).await;
        let now = cluster.tso().0;

        let get = kv1
            .kv_get(kvrpcpb::GetRequest {
                context: kv_context(&region),
                key: b"a1".to_vec(),
                version: now,
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        let lock = get.error.and_then(|e| e.locked).expect("locked");
        assert_eq!(lock.lock_version, held.start_ts().0);
        assert_eq!(lock.primary_lock, b"a1");
        assert_eq!(lock.key, b"a1");

        // Below the lock's start_ts the old value is readable.
        let get = kv1
            .kv_get(kvrpcpb::GetRequest {
                context: kv_context(&region),
                key: b"a1".to_vec(),
                version: held.start_ts().0 - 1,
                need_commit_ts: true,
            })
            .await
            .expect("get")
            .into_inner();
        assert!(get.error.is_none() && get.region_error.is_none());
        assert_eq!(get.value, b"old");
        assert_eq!(get.commit_ts, c1.0);

        let scan = kv1
            .kv_scan(kvrpcpb::ScanRequest {
                context: kv_context(&region),
                start_key: b"a".to_vec(),
                end_key: b"b".to_vec(),
                limit: 10,
                version: now,
                ..Default::default()
            })
            .await
            .expect("scan")
            .into_inner();
        assert_eq!(scan.pairs.len(), 2);
        assert!(scan.pairs[0]
            .error
            .as_ref()
            .and_then(|e| e.locked.as_ref())
            .is_some());
        assert_eq!(scan.pairs[1].value.as_ref(), b"x");

        let batch = kv1
            .kv_batch_get(kvrpcpb::BatchGetRequest {
                context: kv_context(&region),
                keys: vec![b"a1".to_vec(), b"a2".to_vec(), b"zz".to_vec()],
                version: now,
                ..Default::default()
            })
            .await
            .expect("batch get")
            .into_inner();
        assert_eq!(batch.pairs.len(), 2, "missing keys are left out");
        assert!(batch.pairs[0].error.is_some());

        let commit_ts = held.commit_now().await.expect("commit");
        let get = kv1
            .kv_get(kvrpcpb::GetRequest {
                context: kv_context(&region),
                key: b"a1".to_vec(),
                version: cluster.tso().0,
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(get.value, b"new");
        assert!(commit_ts > c1);

        // Region checks.
        let (left, _right) = cluster.split_at(b"m").await.expect("split");
        let l = cluster.region(left).expect("left");
        let get = kv1
            .kv_get(kvrpcpb::GetRequest {
                context: kv_context(&l),
                key: b"z".to_vec(),
                version: cluster.tso().0,
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        let knr = get
            .region_error
            .and_then(|e| e.key_not_in_region)
            .expect("key not in region");
        assert_eq!((knr.key.as_slice(), knr.region_id), (&b"z"[..], left));
        let get = kv1
            .kv_get(kvrpcpb::GetRequest {
                context: kv_context(&region), // stale epoch
                key: b"a1".to_vec(),
                version: cluster.tso().0,
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        assert!(get.region_error.and_then(|e| e.epoch_not_match).is_some());
        let mut kv2 = kv(&cluster, 2).await;
        let get = kv2
            .kv_get(kvrpcpb::GetRequest {
                context: kv_context(&l),
                key: b"a1".to_vec(),
                version: cluster.tso().0,
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        let nl = get
            .region_error
            .and_then(|e| e.not_leader)
            .expect("not leader");
        assert_eq!(nl.leader.expect("leader").store_id, 1);
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_client_that_stops_reading_gets_congested_instead_of_unbounded_buffering() {
    timed(async {
        let cluster = start_with(SimConfig {
            stores: 1,
            seed: 11,
            resolved_ts_interval: Duration::from_millis(100),
            sink_memory_quota: 64 * 1024,
            ..SimConfig::default()
        })
        .await;
        let cid = cluster.cluster_id();
        let region = cluster.region_by_raw_key(b"a").expect("region");
        let mut feed = Feed::open(cluster.store_addr(1).expect("addr"), None)
            .await
            .expect("open");
        feed.send(register(cid, &region, 1, 0)).await;
        feed.events_until(is_initialized).await;
        // The client does not read while ~4 MiB of rows are written.
        let mut last = tibinlog::sim::Ts(0);
        for i in 0..256u32 {
            let mut t = cluster.begin().await.expect("begin");
            t.put(format!("k{i:05}").into_bytes(), vec![7u8; 16 * 1024]);
            last = t.commit().await.expect("commit");
        }
        let ev = feed.events_until(|e| error(e).is_some()).await;
        let e = error(ev.last().expect("event")).expect("error");
        assert_eq!(
            e.congested.as_ref().expect("congested").region_id,
            region.id()
        );
        // The subscription is gone: registering again (from the last commit on) works.
        feed.send(register(cid, &region, 1, last.0)).await;
        feed.events_until(|e| is_initialized(e) && e.request_id == 1)
            .await;
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn held_lock_and_faults_hold_back_resolved_ts_and_slow_streams() {
    timed(async {
        let cluster = start(1, 12).await;
        let cid = cluster.cluster_id();
        let region = cluster.region_by_raw_key(b"a").expect("region");
        let rid = region.id();
        let mut feed = Feed::open(cluster.store_addr(1).expect("addr"), None)
            .await
            .expect("open");
        feed.send(register(cid, &region, 1, 0)).await;
        feed.events_until(is_initialized).await;

        // A prewritten, not yet committed txn caps resolved ts below its start_ts.
        let held = cluster
            .hold_lock(b"a".to_vec(), b"v".to_vec(), Duration::from_secs(600))
            .await
            .expect("lock");
        let after_lock = cluster.tso().0;
        for _ in 0..3 {
            let r = feed.resolved_until(|_| true).await;
            assert!(r.ts <= held.start_ts().0, "resolved ts passed a held lock");
        }
        let commit_ts = held.commit_now().await.expect("commit");
        let r = feed.resolved_until(|r| r.ts > after_lock).await;
        assert!(r.ts >= commit_ts.0);

        // Dropped resolved ts: nothing for the region while the fault is on.
        // Messages already on their way when the fault was set may still arrive; none may carry
        // a resolved ts computed after it (above the TSO taken once it is on).
        cluster.drop_resolved_ts(rid, 1.0).await;
        let fault_on = cluster.tso().0;
        let quiet = tokio::time::timeout(Duration::from_millis(300), async {
            loop {
                if let Some(r) = feed.next().await.resolved_ts {
                    assert!(
                        r.ts <= fault_on,
                        "a resolved ts {} computed while resolved ts is dropped",
                        r.ts
                    );
                }
            }
        })
        .await;
        assert!(quiet.is_err());
        cluster.drop_resolved_ts(rid, 0.0).await;

        // Delayed resolved ts: 30 s behind the TSO, so (never moving backwards) it stalls.
        cluster
            .delay_resolved_ts(rid, Duration::from_secs(30))
            .await;
        let now = cluster.tso().0;
        for _ in 0..3 {
            let r = feed.resolved_until(|_| true).await;
            assert!(r.ts < now, "a delayed resolved ts advanced");
        }
        cluster.delay_resolved_ts(rid, Duration::ZERO).await;
        feed.resolved_until(|r| r.ts > now).await;

        // Slow stream: every message waits.
        cluster
            .slow_stream(1, Duration::from_millis(250))
            .await
            .expect("slow");
        // Messages sent before the fault may be buffered: skip until one arrives after a wait
        // (the first slowed message), then time the next two.
        let mut last = tokio::time::Instant::now();
        loop {
            let _ = feed.next().await;
            let now = tokio::time::Instant::now();
            if now - last >= Duration::from_millis(200) {
                break;
            }
            last = now;
        }
        let t0 = tokio::time::Instant::now();
        let _ = feed.next().await;
        let _ = feed.next().await;
        assert!(t0.elapsed() >= Duration::from_millis(450));
        cluster.slow_stream(1, Duration::ZERO).await.expect("fast");
        cluster.shutdown().await;
    })
    .await;
}

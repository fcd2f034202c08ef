//! Event-script tests of the CDC endpoint, driven through `SimCore`.

use std::sync::Arc;

use proptest::prelude::*;
use tibinlog_proto::cdcpb::{self, change_data_request, event::LogType, ChangeDataRequest};
use tibinlog_proto::metapb;

use super::*;
use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::mvcc::{Mutation, PrewriteRequest};
use crate::sim::ts::ManualClock;

const CLUSTER: u64 = 7;

fn core_with(cfg: CdcConfig) -> (SimCore, u64) {
    let clock = ManualClock::new(1_000_000);
    let core = SimCore::new(
        &[1, 2, 3],
        CdcConfig {
            cluster_id: CLUSTER,
            ..cfg
        },
        Arc::new(clock),
        42,
    )
    .expect("core");
    let region = core.cluster.region_by_key(b"").expect("region").id();
    (core, region)
}

fn core() -> (SimCore, u64) {
    core_with(CdcConfig::default())
}

fn request(core: &SimCore, request_id: u64, region_id: u64, checkpoint: Ts) -> ChangeDataRequest {
    let version = core.cluster.region(region_id).map_or(1, |r| r.version());
    ChangeDataRequest {
        header: Some(cdcpb::Header {
            cluster_id: CLUSTER,
            ticdc_version: "8.5.0".into(),
        }),
        region_id,
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 1,
            version,
        }),
        checkpoint_ts: checkpoint.0,
        request_id,
        request: Some(change_data_request::Request::Register(Default::default())),
        ..Default::default()
    }
}

fn k(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// Prewrite + commit with TSO timestamps; returns (start_ts, commit_ts).
fn txn(core: &mut SimCore, muts: Vec<Mutation>, out: &mut Vec<StoreOutput>) -> (Ts, Ts) {
    let start = core.ts();
    let (s, o) = prewrite(core, muts.clone(), start);
    out.extend(o);
    let commit = core.ts();
    let keys: Vec<Vec<u8>> = muts.iter().map(|m| m.key().to_vec()).collect();
    out.extend(core.commit(&keys, s, commit).expect("commit"));
    (start, commit)
}

fn prewrite(core: &mut SimCore, muts: Vec<Mutation>, start: Ts) -> (Ts, Vec<StoreOutput>) {
    let primary = muts[0].key().to_vec();
    let req = PrewriteRequest {
        mutations: muts,
        primary,
        start_ts: start,
        lock_ttl_ms: 3000,
        ..Default::default()
    };
    let (_, o) = core.prewrite(&req).expect("prewrite");
    (start, o)
}

fn events(outs: &[StoreOutput]) -> Vec<&cdcpb::Event> {
    outs.iter()
        .flat_map(|o| o.output.event.events.iter())
        .collect()
}

/// (type, start_ts, commit_ts, key, value, old_value) of every row, in order.
type R = (LogType, u64, u64, Vec<u8>, Vec<u8>, Vec<u8>);
fn rows(outs: &[StoreOutput]) -> Vec<R> {
    events(outs)
        .into_iter()
        .filter_map(|e| match &e.event {
            Some(event::Event::Entries(en)) => Some(en.entries.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| {
            (
                r.r#type(),
                r.start_ts,
                r.commit_ts,
                r.key,
                r.value,
                r.old_value,
            )
        })
        .collect()
}

fn errors(outs: &[StoreOutput]) -> Vec<cdcpb::Error> {
    events(outs)
        .into_iter()
        .filter_map(|e| match &e.event {
            Some(event::Event::Error(err)) => Some(err.clone()),
            _ => None,
        })
        .collect()
}

fn resolved(outs: &[StoreOutput]) -> Vec<cdcpb::ResolvedTs> {
    outs.iter()
        .filter_map(|o| o.output.event.resolved_ts.clone())
        .collect()
}

fn subscribe(
    core: &mut SimCore,
    conn: ConnId,
    request_id: u64,
    region: u64,
    checkpoint: Ts,
) -> Vec<StoreOutput> {
    let req = request(core, request_id, region, checkpoint);
    let mut out = core.on_cdc_request(1, conn, &req).expect("request");
    out.extend(core.drive_scans());
    out.extend(
        core.finish_scan(
            1,
            DownstreamId {
                conn,
                request_id,
                region_id: region,
            },
        )
        .expect("scan"),
    );
    out
}

#[test]
fn registration_checks_in_order() {
    let (mut core, region) = core_with(CdcConfig {
        scan_pending_limit: 2,
        ..Default::default()
    });
    core.open_conn(1, 1, true).expect("conn");
    let bad = |core: &SimCore, f: &dyn Fn(&mut ChangeDataRequest)| {
        let mut r = request(core, 1, region, Ts(0));
        f(&mut r);
        r
    };
    // 1: cluster id first, even with a bad kv_api and an unknown region.
    let r = bad(&core, &|r| {
        r.header = Some(cdcpb::Header {
            cluster_id: 9,
            ticdc_version: "8.5.0".into(),
        });
        r.kv_api = 1;
        r.region_id = 999;
    });
    let e = errors(&core.on_cdc_request(1, 1, &r).expect("req"));
    assert_eq!(
        e[0].cluster_id_mismatch,
        Some(cdcpb::ClusterIdMismatch {
            current: CLUSTER,
            request: 9
        })
    );
    // 2: kv_api before the region check.
    let r = bad(&core, &|r| {
        r.kv_api = 2;
        r.region_id = 999;
    });
    let e = errors(&core.on_cdc_request(1, 1, &r).expect("req"));
    assert_eq!(
        e[0].compatibility
            .as_ref()
            .map(|c| c.required_version.as_str()),
        Some("6.2.0")
    );
    // 4: unknown region.
    let e = errors(
        &core
            .on_cdc_request(1, 1, &bad(&core, &|r| r.region_id = 999))
            .expect("req"),
    );
    assert_eq!(
        e[0].region_not_found.as_ref().map(|x| x.region_id),
        Some(999)
    );
    // ok, then 5: duplicate.
    assert!(core
        .on_cdc_request(1, 1, &request(&core, 1, region, Ts(0)))
        .expect("req")
        .is_empty());
    let e = errors(
        &core
            .on_cdc_request(1, 1, &request(&core, 1, region, Ts(0)))
            .expect("req"),
    );
    assert_eq!(
        e[0].duplicate_request.as_ref().map(|x| x.region_id),
        Some(region)
    );
    // 3: pending limit (2) reached → busy, before the region check.
    assert!(core
        .on_cdc_request(1, 1, &request(&core, 2, region, Ts(0)))
        .expect("req")
        .is_empty());
    let e = errors(
        &core
            .on_cdc_request(
                1,
                1,
                &bad(&core, &|r| {
                    r.request_id = 3;
                    r.region_id = 999;
                }),
            )
            .expect("req"),
    );
    assert_eq!(
        e[0].server_is_busy.as_ref().map(|b| b.reason.as_str()),
        Some("too many pending incremental scans")
    );
    // 6: once the region is captured, a stale epoch version is refused with the current region.
    let mut out = core.drive_scans();
    out.extend(
        core.finish_scan(
            1,
            DownstreamId {
                conn: 1,
                request_id: 1,
                region_id: region,
            },
        )
        .expect("scan"),
    );
    let e = errors(
        &core
            .on_cdc_request(
                1,
                1,
                &bad(&core, &|r| {
                    r.request_id = 4;
                    r.region_epoch = Some(metapb::RegionEpoch {
                        conf_ver: 1,
                        version: 0,
                    });
                }),
            )
            .expect("req"),
    );
    let current = e[0]
        .epoch_not_match
        .as_ref()
        .expect("epoch not match")
        .current_regions
        .clone();
    assert_eq!(
        current.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![region]
    );
    // 7: a follower store accepts the registration, then fails the snapshot with not_leader.
    core.open_conn(2, 5, false).expect("conn");
    assert!(core
        .on_cdc_request(2, 5, &request(&core, 1, region, Ts(0)))
        .expect("req")
        .is_empty());
    let e = errors(&core.drive_scans());
    assert_eq!(
        e[0].not_leader
            .as_ref()
            .and_then(|n| n.leader.as_ref())
            .map(|p| p.store_id),
        Some(1)
    );
}

#[test]
fn unparsable_version_skips_cluster_id_check() {
    let (mut core, region) = core();
    core.open_conn(1, 1, false).expect("conn");
    let mut r = request(&core, 1, region, Ts(0));
    r.header = Some(cdcpb::Header {
        cluster_id: 12345,
        ticdc_version: "v8.5.0".into(),
    });
    assert!(
        core.on_cdc_request(1, 1, &r).expect("req").is_empty(),
        "leading v → 0.0.0, no validation"
    );
}

#[test]
fn scan_order_old_values_checkpoint_and_initialized_last() {
    let (mut core, region) = core();
    let mut sink = Vec::new();
    let sb = core.ts(); // b's lock is older than the checkpoint and still sent
    let (_, c1) = txn(&mut core, vec![Mutation::Put(k("a"), k("v1"))], &mut sink);
    let (s2, c2) = txn(&mut core, vec![Mutation::Put(k("a"), k("v2"))], &mut sink);
    let (s3, c3) = txn(&mut core, vec![Mutation::Put(k("a"), k("v3"))], &mut sink);
    txn(&mut core, vec![Mutation::Lock(k("a"))], &mut sink); // Lock record: skipped
    prewrite(&mut core, vec![Mutation::Delete(k("b"))], sb);
    let sa = core.ts();
    prewrite(&mut core, vec![Mutation::Put(k("a"), k("v4"))], sa);
    core.open_conn(1, 1, true).expect("conn");
    let out = subscribe(&mut core, 1, 1, region, c1);
    let got = rows(&out);
    let want: Vec<R> = vec![
        (LogType::Prewrite, sa.0, 0, k("a"), k("v4"), k("v3")),
        (LogType::Committed, s3.0, c3.0, k("a"), k("v3"), k("v2")),
        (LogType::Committed, s2.0, c2.0, k("a"), k("v2"), k("v1")),
        (LogType::Prewrite, sb.0, 0, k("b"), vec![], vec![]),
        (LogType::Initialized, 0, 0, vec![], vec![], vec![]),
    ];
    assert_eq!(got, want);
}

#[test]
fn scan_chunks_into_32k_entries() {
    let (mut core, region) = core();
    let mut sink = Vec::new();
    for i in 0..10 {
        txn(
            &mut core,
            vec![Mutation::Put(
                format!("k{i}").into_bytes(),
                vec![b'x'; 10_000],
            )],
            &mut sink,
        );
    }
    core.open_conn(1, 1, true).expect("conn");
    let out = subscribe(&mut core, 1, 1, region, Ts(0));
    let entries: Vec<&event::Entries> = events(&out)
        .into_iter()
        .filter_map(|e| match &e.event {
            Some(event::Event::Entries(en)) => Some(en),
            _ => None,
        })
        .collect();
    assert_eq!(entries.len(), 4, "3 rows of 10 KB per 32 KiB chunk");
    for en in &entries {
        assert!(en.entries.iter().map(row_bytes).sum::<usize>() <= MAX_ENTRIES_BYTES);
    }
    let last = entries.last().and_then(|e| e.entries.last()).expect("row");
    assert_eq!(last.r#type(), LogType::Initialized);
}

#[test]
fn realtime_rows_for_each_write_kind() {
    let (mut core, region) = core();
    let mut sink = Vec::new();
    txn(&mut core, vec![Mutation::Put(k("a"), k("old"))], &mut sink);
    core.open_conn(1, 1, true).expect("conn");
    let checkpoint = core.mvcc.max_ts();
    subscribe(&mut core, 1, 1, region, checkpoint);
    // 2PC short value: PREWRITE with value and old value, COMMIT with value, no old value.
    let mut out = Vec::new();
    let (s, c) = txn(&mut core, vec![Mutation::Put(k("a"), k("new"))], &mut out);
    assert_eq!(
        rows(&out),
        vec![
            (LogType::Prewrite, s.0, 0, k("a"), k("new"), k("old")),
            (LogType::Commit, s.0, c.0, k("a"), k("new"), vec![]),
        ]
    );
    // Long value: value only in the PREWRITE.
    let long = vec![b'L'; 300];
    let mut out = Vec::new();
    let (s, c) = txn(
        &mut core,
        vec![Mutation::Put(k("b"), long.clone())],
        &mut out,
    );
    assert_eq!(
        rows(&out),
        vec![
            (LogType::Prewrite, s.0, 0, k("b"), long.clone(), vec![]),
            (LogType::Commit, s.0, c.0, k("b"), vec![], vec![]),
        ]
    );
    // Delete: empty value, old value in PREWRITE.
    let mut out = Vec::new();
    let (s, _) = txn(&mut core, vec![Mutation::Delete(k("a"))], &mut out);
    assert_eq!(
        rows(&out)[0],
        (LogType::Prewrite, s.0, 0, k("a"), vec![], k("new"))
    );
    // 1PC: COMMITTED with value and old value.
    let start = core.ts();
    let req = PrewriteRequest {
        mutations: vec![Mutation::Put(k("b"), k("one"))],
        primary: k("b"),
        start_ts: start,
        try_one_pc: true,
        ..Default::default()
    };
    let (r, out) = core.prewrite(&req).expect("1pc");
    assert_eq!(
        rows(&out),
        vec![(
            LogType::Committed,
            start.0,
            r.one_pc_commit_ts.0,
            k("b"),
            k("one"),
            long.clone()
        )]
    );
    // Rollback.
    let start = core.ts();
    prewrite(&mut core, vec![Mutation::Put(k("c"), k("x"))], start);
    let out = core.rollback(&[k("c")], start).expect("rollback");
    assert_eq!(
        rows(&out),
        vec![(LogType::Rollback, start.0, 0, k("c"), vec![], vec![])]
    );
    // Lock mutation and pessimistic locks: nothing.
    let mut out = Vec::new();
    txn(&mut core, vec![Mutation::Lock(k("a"))], &mut out);
    let start = core.ts();
    out.extend(
        core.acquire_pessimistic_lock(&[k("d")], b"d", start, start, 3000)
            .expect("pessimistic"),
    );
    assert!(rows(&out).is_empty());
    out.extend(core.rollback(&[k("d")], start).expect("rollback"));
    // Large-txn heartbeat: a long-value lock rewritten alone is not resent; a short one is.
    let start = core.ts();
    prewrite(
        &mut core,
        vec![
            Mutation::Put(k("e"), long.clone()),
            Mutation::Put(k("f"), k("s")),
        ],
        start,
    );
    let (_, out) = core.txn_heart_beat(b"e", start, 60_000).expect("heartbeat");
    assert!(rows(&out).is_empty());
    let (_, out) = core
        .check_txn_status(b"e", start, Ts::ZERO, false)
        .expect("status");
    assert!(rows(&out).is_empty());
    let mut req = PrewriteRequest {
        mutations: vec![],
        primary: k("f"),
        start_ts: start,
        ..Default::default()
    };
    req.mutations.push(Mutation::Put(k("g"), k("s")));
    let (_, out) = core.prewrite(&req).expect("prewrite g");
    let (_, out2) = core.txn_heart_beat(b"g", start, 60_000).expect("heartbeat");
    assert_eq!(rows(&out).len(), 1);
    assert_eq!(
        rows(&out2),
        rows(&out),
        "short-value lock rewrite re-sends the same PREWRITE"
    );
}

#[test]
fn txn_source_filtering() {
    let (mut core, region) = core();
    core.open_conn(1, 1, true).expect("conn");
    let mut req = request(&core, 1, region, Ts(0));
    req.filter_loop = true;
    core.on_cdc_request(1, 1, &req).expect("req");
    let mut out = core.drive_scans();
    out.extend(
        core.finish_scan(
            1,
            DownstreamId {
                conn: 1,
                request_id: 1,
                region_id: region,
            },
        )
        .expect("scan"),
    );
    for (src, key) in [
        (1u64, "cdc"),
        (1 << 8, "reorg"),
        (1 << 16, "lightning"),
        (0, "user"),
    ] {
        let start = core.ts();
        let p = PrewriteRequest {
            mutations: vec![Mutation::Put(k(key), k("v"))],
            primary: k(key),
            start_ts: start,
            txn_source: src,
            ..Default::default()
        };
        out.extend(core.prewrite(&p).expect("prewrite").1);
    }
    let keys: Vec<Vec<u8>> = rows(&out)
        .into_iter()
        .filter(|r| r.0 == LogType::Prewrite)
        .map(|r| r.3)
        .collect();
    assert_eq!(keys, vec![k("user")]);
}

#[test]
fn realtime_commit_can_precede_scan_prewrite() {
    let (mut core, region) = core();
    let start = core.ts();
    prewrite(&mut core, vec![Mutation::Put(k("a"), k("v"))], start);
    core.set_region_faults(
        region,
        RegionFaults {
            stall_scan: 1.0,
            ..Default::default()
        },
    );
    core.open_conn(1, 1, true).expect("conn");
    let mut out = core
        .on_cdc_request(1, 1, &request(&core, 1, region, Ts(0)))
        .expect("req");
    out.extend(core.drive_scans()); // snapshot taken, scan stalled
    let commit = core.ts();
    out.extend(core.commit(&[k("a")], start, commit).expect("commit"));
    core.set_region_faults(region, RegionFaults::default());
    out.extend(core.drive_scans());
    let types: Vec<LogType> = rows(&out).iter().map(|r| r.0).collect();
    assert_eq!(
        types,
        vec![LogType::Commit, LogType::Prewrite, LogType::Initialized]
    );
}

#[test]
fn resolved_ts_after_initialized_held_by_lock_never_regressing() {
    let (mut core, region) = core();
    core.open_conn(1, 1, true).expect("conn");
    core.on_cdc_request(1, 1, &request(&core, 9, region, Ts(0)))
        .expect("req");
    core.set_region_faults(
        region,
        RegionFaults {
            stall_scan: 1.0,
            ..Default::default()
        },
    );
    core.drive_scans();
    assert!(
        resolved(&core.tick_resolved_ts()).is_empty(),
        "nothing before INITIALIZED"
    );
    core.set_region_faults(region, RegionFaults::default());
    core.drive_scans();
    let r1 = resolved(&core.tick_resolved_ts());
    assert_eq!(r1.len(), 1);
    assert_eq!((r1[0].regions.clone(), r1[0].request_id), (vec![region], 9));
    // A lock holds it back at its start_ts.
    let start = core.ts();
    prewrite(&mut core, vec![Mutation::Put(k("a"), k("v"))], start);
    let r2 = resolved(&core.tick_resolved_ts());
    assert_eq!(r2[0].ts, start.0);
    assert!(r2[0].ts >= r1[0].ts);
    let r3 = resolved(&core.tick_resolved_ts());
    assert_eq!(r3[0].ts, start.0, "sent every tick even if unchanged");
    // A lagging (delayed) resolved ts never goes backwards on the wire.
    let commit = core.ts();
    core.commit(&[k("a")], start, commit).expect("commit");
    let r4 = resolved(&core.tick_resolved_ts());
    core.set_region_faults(
        region,
        RegionFaults {
            resolved_ts_lag_ms: 60_000,
            ..Default::default()
        },
    );
    let r5 = resolved(&core.tick_resolved_ts());
    assert!(r5[0].ts >= r4[0].ts);
    core.set_region_faults(
        region,
        RegionFaults {
            drop_resolved_ts: 1.0,
            ..Default::default()
        },
    );
    assert!(resolved(&core.tick_resolved_ts()).is_empty());
}

#[test]
fn resolved_ts_batches_and_request_ids() {
    let (mut core, first) = core();
    // 10 regions.
    let mut region_ids = vec![first];
    for i in 1..10u8 {
        core.split_region(first, &[b'a' + i]).expect("split");
    }
    region_ids.extend(
        core.cluster
            .scan_regions(b"", b"", 0)
            .iter()
            .map(|r| r.id())
            .filter(|id| *id != first),
    );
    core.open_conn(1, 1, true).expect("multiplexed");
    core.open_conn(1, 2, false).expect("exclusive");
    core.open_conn(1, 3, false).expect("old client");
    for &r in &region_ids {
        subscribe(&mut core, 1, 77, r, Ts(0));
        subscribe(&mut core, 2, 5, r, Ts(0));
    }
    let mut old = request(&core, 6, first, Ts(0));
    old.header = Some(cdcpb::Header {
        cluster_id: CLUSTER,
        ticdc_version: "4.0.0".into(),
    });
    core.on_cdc_request(1, 3, &old).expect("req");
    core.drive_scans();
    let out = core.tick_resolved_ts();
    let on = |conn: ConnId| -> Vec<cdcpb::ResolvedTs> {
        out.iter()
            .filter(|o| o.output.conn == conn)
            .filter_map(|o| o.output.event.resolved_ts.clone())
            .collect()
    };
    let m = on(1);
    assert_eq!(
        m.iter().map(|r| r.regions.len()).collect::<Vec<_>>(),
        vec![8, 2]
    );
    assert!(m.iter().all(|r| r.request_id == 77));
    let x = on(2);
    assert!(
        x.iter().all(|r| r.request_id == 0),
        "non-multiplexed streams report request_id 0"
    );
    let compat: Vec<u64> = out
        .iter()
        .filter(|o| o.output.conn == 3)
        .flat_map(|o| o.output.event.events.iter())
        .filter_map(|e| match e.event {
            Some(event::Event::ResolvedTs(ts)) => Some(ts),
            _ => None,
        })
        .collect();
    assert_eq!(compat.len(), 1, "clients < 4.0.8 get one Event per region");
    for r in m.iter().chain(x.iter()) {
        assert!(r.events_free_message_ok());
    }
}

trait MessageShape {
    fn events_free_message_ok(&self) -> bool;
}
impl MessageShape for cdcpb::ResolvedTs {
    fn events_free_message_ok(&self) -> bool {
        !self.regions.is_empty()
    }
}

#[test]
fn admin_errors_then_silence() {
    let (mut core, region) = core();
    core.open_conn(1, 1, true).expect("conn");
    subscribe(&mut core, 1, 1, region, Ts(0));
    // Split: epoch_not_match with both regions, then nothing for that subscription.
    let out = core.split_region(region, b"m").expect("split");
    let e = errors(&out);
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].epoch_not_match
            .as_ref()
            .map(|x| x.current_regions.len()),
        Some(2)
    );
    let mut after = Vec::new();
    txn(&mut core, vec![Mutation::Put(k("a"), k("v"))], &mut after);
    after.extend(core.tick_resolved_ts());
    assert!(after.is_empty(), "silence after the error: {after:?}");
    // Merge: both sides get epoch_not_match without regions.
    let left = core.cluster.region_by_raw_key(b"a").expect("left").id();
    subscribe(&mut core, 1, 1, left, Ts(0));
    subscribe(&mut core, 1, 1, region, Ts(0));
    let e = errors(&core.merge_regions(left, region).expect("merge"));
    assert_eq!(e.len(), 2);
    assert!(e.iter().all(|x| x
        .epoch_not_match
        .as_ref()
        .is_some_and(|m| m.current_regions.is_empty())));
    // Leader transfer: not_leader naming the new leader.
    subscribe(&mut core, 1, 2, region, Ts(0));
    let e = errors(&core.transfer_leader(region, 3).expect("transfer"));
    assert_eq!(
        e[0].not_leader
            .as_ref()
            .and_then(|n| n.leader.as_ref())
            .map(|p| p.store_id),
        Some(3)
    );
    // Deregister: region_not_found for the dropped subscription.
    core.transfer_leader(region, 1).expect("back");
    subscribe(&mut core, 1, 3, region, Ts(0));
    let mut d = request(&core, 3, 0, Ts(0));
    d.request = Some(change_data_request::Request::Deregister(Default::default()));
    let e = errors(&core.on_cdc_request(1, 1, &d).expect("deregister"));
    assert_eq!(
        e[0].region_not_found.as_ref().map(|x| x.region_id),
        Some(region)
    );
    // Stopped store: streams gone, nothing is produced there.
    subscribe(&mut core, 1, 4, region, Ts(0));
    let out = core.stop_store(1).expect("stop");
    assert!(out.iter().all(|o| o.store_id != 1));
    assert_eq!(core.endpoint(1).expect("ep").downstream_count(), 0);
}

#[test]
fn gc_drops_history_the_scan_would_need() {
    let (mut core, region) = core();
    let mut sink = Vec::new();
    let (_, c1) = txn(&mut core, vec![Mutation::Put(k("a"), k("v1"))], &mut sink);
    let (_, c2) = txn(&mut core, vec![Mutation::Put(k("a"), k("v2"))], &mut sink);
    let out = core.update_service_safe_point(b"ticdc", 3600, c1);
    assert!(out.accepted);
    assert_eq!(core.run_gc(c2), c1, "capped by the service safe point");
    core.update_service_safe_point(b"ticdc", 0, Ts(u64::MAX));
    assert_eq!(core.run_gc(c2), c2);
    core.open_conn(1, 1, true).expect("conn");
    let got = rows(&subscribe(&mut core, 1, 1, region, Ts(0)));
    assert_eq!(got.len(), 2, "only the newest version survives: {got:?}");
    assert_eq!(
        got[0].5,
        Vec::<u8>::new(),
        "old value is gone with the history"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Prewrite(u8, bool),
    Commit(usize),
    Rollback(usize),
    OnePc(u8),
    Tick,
    Scan,
    Register(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6, any::<bool>()).prop_map(|(k, a)| Op::Prewrite(k, a)),
        (0usize..8).prop_map(Op::Commit),
        (0usize..8).prop_map(Op::Rollback),
        (0u8..6).prop_map(Op::OnePc),
        Just(Op::Tick),
        Just(Op::Scan),
        (1u64..4).prop_map(Op::Register),
    ]
}

proptest! {
    /// Random interleavings never send a COMMIT/COMMITTED at or below a resolved ts already
    /// sent to that downstream, and never a resolved ts before INITIALIZED.
    #[test]
    fn no_commit_at_or_below_sent_resolved_ts(ops in proptest::collection::vec(op(), 1..80)) {
        let (mut core, region) = core();
        core.open_conn(1, 1, true).expect("conn");
        let mut open: Vec<(Ts, Vec<u8>, Ts)> = Vec::new(); // (start, key, min_commit_ts)
        let mut sent: HashMap<u64, Ts> = HashMap::new();
        let mut initialized: HashMap<u64, bool> = HashMap::new();
        let mut check = |outs: Vec<StoreOutput>| {
            for o in outs {
                if let Some(r) = &o.output.event.resolved_ts {
                    prop_assert!(initialized.get(&r.request_id).copied().unwrap_or(false));
                    let prev = sent.insert(r.request_id, Ts(r.ts)).unwrap_or(Ts::ZERO);
                    prop_assert!(Ts(r.ts) >= prev, "resolved ts regressed");
                }
                for e in &o.output.event.events {
                    if let Some(event::Event::Entries(en)) = &e.event {
                        for row in &en.entries {
                            match row.r#type() {
                                LogType::Commit | LogType::Committed => {
                                    let limit = sent.get(&e.request_id).copied().unwrap_or(Ts::ZERO);
                                    prop_assert!(Ts(row.commit_ts) > limit, "commit {} ≤ resolved {}", row.commit_ts, limit.0);
                                }
                                LogType::Initialized => { initialized.insert(e.request_id, true); }
                                _ => {}
                            }
                        }
                    }
                }
            }
            Ok(())
        };
        for op in ops {
            let outs = match op {
                Op::Prewrite(key, async_commit) => {
                    let start = core.ts();
                    let key = vec![b'k', key];
                    let req = PrewriteRequest {
                        mutations: vec![Mutation::Put(key.clone(), vec![1; 8])],
                        primary: key.clone(),
                        start_ts: start,
                        lock_ttl_ms: 3000,
                        use_async_commit: async_commit,
                        ..Default::default()
                    };
                    match core.prewrite(&req) {
                        Ok((r, o)) => { open.push((start, key, r.min_commit_ts)); o }
                        Err(_) => Vec::new(),
                    }
                }
                Op::Commit(i) if i < open.len() => {
                    let (start, key, min_commit) = open.remove(i);
                    let ts = core.ts().max(min_commit);
                    core.commit(&[key], start, ts).expect("commit")
                }
                Op::Rollback(i) if i < open.len() => {
                    let (start, key, _) = open.remove(i);
                    core.rollback(&[key], start).expect("rollback")
                }
                Op::OnePc(key) => {
                    let start = core.ts();
                    let key = vec![b'k', key];
                    let req = PrewriteRequest {
                        mutations: vec![Mutation::Put(key.clone(), vec![2; 8])],
                        primary: key,
                        start_ts: start,
                        try_one_pc: true,
                        ..Default::default()
                    };
                    core.prewrite(&req).map(|(_, o)| o).unwrap_or_default()
                }
                Op::Tick => core.tick_resolved_ts(),
                Op::Scan => core.drive_scans(),
                Op::Register(rid) => {
                    let req = request(&core, rid, region, Ts(0));
                    core.on_cdc_request(1, 1, &req).expect("req")
                }
                _ => Vec::new(),
            };
            check(outs)?;
        }
    }
}

//! Wire-format checks for the generated kvproto types.
//!
//! Expected bytes are written out by hand from kvproto's field numbers
//! (tag byte = field_number << 3 | wire_type; wire type 0 = varint,
//! 2 = length-delimited), so a wrong field number or type in the `.proto`
//! files makes these tests fail. The gRPC tests check the exact method paths
//! real TiKV and PD serve.

use prost::Message;
use tibinlog_proto::{cdcpb, encryptionpb, errorpb, kvrpcpb, metapb, pdpb, tikvpb};

/// Parses a hex string, ignoring whitespace.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len() % 2 == 0, "odd number of hex digits");
    digits
        .chunks(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).expect("ascii");
            u8::from_str_radix(text, 16).expect("hex digit")
        })
        .collect()
}

/// Asserts `msg` encodes to exactly `expected_hex` and decodes back from it.
fn assert_wire<M: Message + Default + PartialEq + std::fmt::Debug>(msg: &M, expected_hex: &str) {
    let expected = hex(expected_hex);
    let encoded = msg.encode_to_vec();
    assert_eq!(
        encoded, expected,
        "encoding of {msg:?}\n got:  {encoded:02x?}\n want: {expected:02x?}"
    );
    let decoded = M::decode(expected.as_slice()).expect("decode");
    assert_eq!(&decoded, msg);
}

fn row(
    log_type: cdcpb::event::LogType,
    op_type: cdcpb::event::row::OpType,
    start_ts: u64,
    commit_ts: u64,
) -> cdcpb::event::Row {
    cdcpb::event::Row {
        start_ts,
        commit_ts,
        r#type: log_type as i32,
        op_type: op_type as i32,
        ..Default::default()
    }
}

#[test]
fn change_data_request_register() {
    let req = cdcpb::ChangeDataRequest {
        header: Some(cdcpb::Header {
            cluster_id: 1,
            ticdc_version: "8.5.0".to_owned(),
        }),
        region_id: 2,
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 3,
            version: 4,
        }),
        checkpoint_ts: 300,
        start_key: b"a".to_vec(),
        end_key: b"b".to_vec(),
        request_id: 7,
        extra_op: kvrpcpb::ExtraOp::ReadOldValue as i32,
        request: Some(cdcpb::change_data_request::Request::Register(
            cdcpb::change_data_request::Register {},
        )),
        kv_api: cdcpb::change_data_request::KvApi::TiDb as i32,
        filter_loop: true,
        scan_priority: cdcpb::ScanPriority::High as i32,
    };
    assert_wire(
        &req,
        "0a 09  08 01  12 05 38 2e 35 2e 30 \
         10 02 \
         1a 04  08 03  10 04 \
         20 ac 02 \
         2a 01 61 \
         32 01 62 \
         38 07 \
         40 01 \
         4a 00 \
         60 01 \
         70 02",
    );
}

#[test]
fn change_data_request_deregister_and_kv_api() {
    let req = cdcpb::ChangeDataRequest {
        request_id: 9,
        request: Some(cdcpb::change_data_request::Request::Deregister(
            cdcpb::change_data_request::Deregister {},
        )),
        kv_api: cdcpb::change_data_request::KvApi::RawKv as i32,
        ..Default::default()
    };
    // Field order on the wire is an encoder choice; decoders accept any.
    let expected = hex("38 09  58 01  6a 00");
    let decoded = cdcpb::ChangeDataRequest::decode(expected.as_slice()).expect("decode");
    assert_eq!(decoded, req);

    let notify = cdcpb::ChangeDataRequest {
        request: Some(cdcpb::change_data_request::Request::NotifyTxnStatus(
            cdcpb::change_data_request::NotifyTxnStatus {
                txn_status: vec![cdcpb::TxnStatus {
                    start_ts: 1,
                    min_commit_ts: 2,
                    commit_ts: 3,
                    is_rolled_back: true,
                }],
            },
        )),
        ..Default::default()
    };
    assert_wire(&notify, "52 0a  0a 08  08 01 10 02 18 03 20 01");
}

#[test]
fn event_entries_of_every_row_kind() {
    use cdcpb::event::row::OpType;
    use cdcpb::event::LogType;

    let prewrite = cdcpb::event::Row {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
        old_value: b"o".to_vec(),
        generation: 2,
        ..row(LogType::Prewrite, OpType::Put, 10, 0)
    };
    let commit = cdcpb::event::Row {
        key: b"k".to_vec(),
        ..row(LogType::Commit, OpType::Put, 10, 11)
    };
    let rollback = cdcpb::event::Row {
        key: b"k".to_vec(),
        ..row(LogType::Rollback, OpType::Unknown, 12, 0)
    };
    let committed_delete = cdcpb::event::Row {
        key: b"k".to_vec(),
        old_value: b"o".to_vec(),
        txn_source: 1,
        ..row(LogType::Committed, OpType::Delete, 13, 14)
    };
    let initialized = row(LogType::Initialized, OpType::Unknown, 0, 0);
    let raw_put = cdcpb::event::Row {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
        expire_ts_unix_secs: 1000,
        ..row(LogType::Committed, OpType::Put, 0, 0)
    };

    let event = cdcpb::Event {
        region_id: 5,
        index: 0,
        request_id: 7,
        event: Some(cdcpb::event::Event::Entries(cdcpb::event::Entries {
            entries: vec![
                prewrite,
                commit,
                rollback,
                committed_delete,
                initialized,
                raw_put,
            ],
        })),
    };
    assert_wire(
        &event,
        "08 05 \
         1a 4e \
           0a 11  08 0a  18 01  20 01  2a 01 6b  32 01 76  3a 01 6f  50 02 \
           0a 0b  08 0a  10 0b  18 02  20 01  2a 01 6b \
           0a 07  08 0c  18 03  2a 01 6b \
           0a 10  08 0d  10 0e  18 04  20 02  2a 01 6b  3a 01 6f  48 01 \
           0a 02  18 05 \
           0a 0d  18 04  20 01  2a 01 6b  32 01 76  40 e8 07 \
         38 07",
    );
}

#[test]
fn event_admin_and_long_txn() {
    let admin = cdcpb::Event {
        region_id: 1,
        event: Some(cdcpb::event::Event::Admin(cdcpb::event::Admin {
            admin_request: None,
            admin_response: Some(tibinlog_proto::raft_cmdpb::AdminResponse {
                cmd_type: tibinlog_proto::raft_cmdpb::AdminCmdType::BatchSplit as i32,
                splits: Some(tibinlog_proto::raft_cmdpb::BatchSplitResponse {
                    regions: vec![metapb::Region {
                        id: 9,
                        ..Default::default()
                    }],
                }),
                ..Default::default()
            }),
        })),
        ..Default::default()
    };
    // Admin = Event field 4; admin_response = 2; cmd_type = 1 (BatchSplit = 10);
    // splits = 10 (tag 0x52); regions = 1.
    assert_wire(&admin, "08 01  22 0a  12 08  08 0a  52 04  0a 02 08 09");

    let long_txn = cdcpb::Event {
        region_id: 1,
        event: Some(cdcpb::event::Event::LongTxn(cdcpb::event::LongTxn {
            txn_info: vec![cdcpb::TxnInfo {
                start_ts: 5,
                primary: b"p".to_vec(),
            }],
        })),
        ..Default::default()
    };
    assert_wire(&long_txn, "08 01  42 07  0a 05  08 05 12 01 70");
}

#[test]
fn tso_request_and_response() {
    let req = pdpb::TsoRequest {
        header: Some(pdpb::RequestHeader {
            cluster_id: 6,
            sender_id: 0,
            caller_id: "tb".to_owned(),
            caller_component: String::new(),
        }),
        count: 3,
        dc_location: "global".to_owned(),
    };
    assert_wire(
        &req,
        "0a 06  08 06  1a 02 74 62 \
         10 03 \
         1a 06 67 6c 6f 62 61 6c",
    );

    let resp = pdpb::TsoResponse {
        header: Some(pdpb::ResponseHeader {
            cluster_id: 6,
            error: Some(pdpb::Error {
                r#type: pdpb::ErrorType::NotBootstrapped as i32,
                message: "x".to_owned(),
            }),
        }),
        count: 3,
        timestamp: Some(pdpb::Timestamp {
            physical: 1,
            logical: 2,
            suffix_bits: 3,
        }),
    };
    assert_wire(
        &resp,
        "0a 09  08 06  12 05  08 02 12 01 78 \
         10 03 \
         1a 06  08 01 10 02 18 03",
    );
}

#[test]
fn metapb_region_and_store() {
    let region = metapb::Region {
        id: 1,
        start_key: b"a".to_vec(),
        end_key: Vec::new(),
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 1,
            version: 2,
        }),
        peers: vec![
            metapb::Peer {
                id: 2,
                store_id: 3,
                role: metapb::PeerRole::Voter as i32,
                is_witness: false,
            },
            metapb::Peer {
                id: 4,
                store_id: 5,
                role: metapb::PeerRole::Learner as i32,
                is_witness: true,
            },
        ],
        encryption_meta: Some(encryptionpb::EncryptionMeta {
            key_id: 9,
            iv: b"x".to_vec(),
        }),
        is_in_flashback: true,
        flashback_start_ts: 100,
    };
    assert_wire(
        &region,
        "08 01 \
         12 01 61 \
         22 04  08 01 10 02 \
         2a 04  08 02 10 03 \
         2a 08  08 04 10 05 18 01 20 01 \
         32 05  08 09 12 01 78 \
         38 01 \
         40 64",
    );

    let store = metapb::Store {
        id: 1,
        address: "h:1".to_owned(),
        state: metapb::StoreState::Offline as i32,
        labels: vec![metapb::StoreLabel {
            key: "e".to_owned(),
            value: "t".to_owned(),
        }],
        start_timestamp: 2,
        last_heartbeat: 3,
        physically_destroyed: true,
        node_state: metapb::NodeState::Serving as i32,
        ..Default::default()
    };
    assert_wire(
        &store,
        "08 01  12 03 68 3a 31  18 01  22 06  0a 01 65 12 01 74 \
         48 02  58 03  60 01  68 01",
    );
}

#[test]
fn pd_region_lookup_messages() {
    let req = pdpb::GetRegionRequest {
        header: Some(pdpb::RequestHeader {
            cluster_id: 1,
            ..Default::default()
        }),
        region_key: b"k".to_vec(),
        need_buckets: true,
    };
    assert_wire(&req, "0a 02 08 01  12 01 6b  18 01");

    let resp = pdpb::GetRegionResponse {
        region: Some(metapb::Region {
            id: 2,
            ..Default::default()
        }),
        leader: Some(metapb::Peer {
            id: 3,
            store_id: 4,
            ..Default::default()
        }),
        down_peers: vec![pdpb::PeerStats {
            peer: None,
            down_seconds: 5,
        }],
        pending_peers: vec![metapb::Peer {
            id: 6,
            ..Default::default()
        }],
        ..Default::default()
    };
    // Field 4 is reserved upstream: down_peers is 5 (0x2a), pending 6 (0x32).
    assert_wire(
        &resp,
        "12 02 08 02  1a 04 08 03 10 04  2a 02 10 05  32 02 08 06",
    );

    let batch = pdpb::BatchScanRegionsRequest {
        header: None,
        need_buckets: true,
        ranges: vec![pdpb::KeyRange {
            start_key: b"a".to_vec(),
            end_key: b"b".to_vec(),
        }],
        limit: -1,
        contain_all_key_range: true,
    };
    // int32 -1 is a ten-byte varint.
    assert_wire(
        &batch,
        "10 01  1a 06 0a 01 61 12 01 62  20 ff ff ff ff ff ff ff ff ff 01  28 01",
    );

    let gc = pdpb::UpdateServiceGcSafePointRequest {
        header: None,
        service_id: b"s".to_vec(),
        ttl: 60,
        safe_point: 7,
    };
    assert_wire(&gc, "12 01 73  18 3c  20 07");
}

#[test]
fn kv_get_and_scan_messages() {
    let get = kvrpcpb::GetRequest {
        context: Some(kvrpcpb::Context {
            region_id: 1,
            region_epoch: Some(metapb::RegionEpoch {
                conf_ver: 1,
                version: 1,
            }),
            isolation_level: kvrpcpb::IsolationLevel::Rc as i32,
            request_source: "s".to_owned(),
            cluster_id: 5,
            ..Default::default()
        }),
        key: b"k".to_vec(),
        version: 9,
        need_commit_ts: true,
    };
    // Context: request_source = 24 (tag c2 01), cluster_id = 35 (tag 98 02).
    assert_wire(
        &get,
        "0a 11  08 01  12 04 08 01 10 01  38 01  c2 01 01 73  98 02 05 \
         12 01 6b  18 09  20 01",
    );

    let scan_resp = kvrpcpb::ScanResponse {
        region_error: Some(errorpb::Error {
            message: "m".to_owned(),
            key_not_in_region: Some(errorpb::KeyNotInRegion {
                key: b"k".to_vec(),
                region_id: 1,
                ..Default::default()
            }),
            ..Default::default()
        }),
        pairs: vec![kvrpcpb::KvPair {
            error: Some(Box::new(kvrpcpb::KeyError {
                locked: Some(kvrpcpb::LockInfo {
                    primary_lock: b"p".to_vec(),
                    lock_version: 3,
                    key: b"k".to_vec(),
                    lock_type: kvrpcpb::Op::Del as i32,
                    ..Default::default()
                }),
                ..Default::default()
            })),
            key: b"k".to_vec().into(),
            value: Vec::new().into(),
            commit_ts: 4,
        }],
        error: None,
    };
    assert_wire(
        &scan_resp,
        "0a 0a  0a 01 6d  22 05 0a 01 6b 10 01 \
         12 13  0a 0c  0a 0a  0a 01 70 10 03 1a 01 6b 30 01 \
                12 01 6b  20 04",
    );
}

#[test]
fn decode_hand_built_change_data_event() {
    // One ChangeDataEvent carrying six events: an epoch_not_match error with
    // the current region, a not_leader error, a per-region resolved ts, a
    // cluster_id_mismatch, a server_is_busy and a congested error.
    let bytes = hex(
        "0a 12  08 05  2a 0c  1a 0a  0a 08  08 05 12 01 61 1a 01 6d  38 07 \
         0a 10  08 06  2a 0a  0a 08  08 06 12 04 08 02 10 03  38 07 \
         0a 07  08 06  30 e8 07  38 07 \
         0a 0c  08 06  2a 06  32 04 08 01 10 02  38 07 \
         0a 10  08 06  2a 0a  3a 08 0a 04 62 75 73 79 10 0a  38 07 \
         0a 0a  08 06  2a 04  42 02 08 06  38 07",
    );
    let ev = cdcpb::ChangeDataEvent::decode(bytes.as_slice()).expect("decode");
    assert!(ev.resolved_ts.is_none());
    assert_eq!(ev.events.len(), 6);
    assert!(ev.events.iter().all(|e| e.request_id == 7 && e.index == 0));

    let error = |i: usize| match &ev.events[i].event {
        Some(cdcpb::event::Event::Error(err)) => err.clone(),
        other => panic!("event {i} is not an error: {other:?}"),
    };

    let epoch = error(0).epoch_not_match.expect("epoch_not_match");
    assert_eq!(ev.events[0].region_id, 5);
    assert_eq!(
        epoch.current_regions,
        vec![metapb::Region {
            id: 5,
            start_key: b"a".to_vec(),
            end_key: b"m".to_vec(),
            ..Default::default()
        }]
    );

    let not_leader = error(1).not_leader.expect("not_leader");
    assert_eq!(not_leader.region_id, 6);
    assert_eq!(
        not_leader.leader,
        Some(metapb::Peer {
            id: 2,
            store_id: 3,
            ..Default::default()
        })
    );

    assert_eq!(
        ev.events[2].event,
        Some(cdcpb::event::Event::ResolvedTs(1000))
    );

    assert_eq!(
        error(3).cluster_id_mismatch,
        Some(cdcpb::ClusterIdMismatch {
            current: 1,
            request: 2
        })
    );

    let busy = error(4).server_is_busy.expect("server_is_busy");
    assert_eq!(busy.reason, "busy");
    assert_eq!(busy.backoff_ms, 10);

    assert_eq!(error(5).congested, Some(cdcpb::Congested { region_id: 6 }));
}

#[test]
fn decode_hand_built_resolved_ts() {
    // ResolvedTs in field 2, with the region list packed (as TiKV sends it)...
    let packed = hex("12 0b  0a 04 01 02 ac 02  10 90 03  18 09");
    // ...and unpacked, which proto3 decoders must accept too. An unknown
    // field (99, varint) is skipped.
    let unpacked = hex("12 0f  08 01 08 02 08 ac 02  10 90 03  18 09  98 06 01");
    let want = cdcpb::ResolvedTs {
        regions: vec![1, 2, 300],
        ts: 400,
        request_id: 9,
    };
    for bytes in [packed.clone(), unpacked] {
        let ev = cdcpb::ChangeDataEvent::decode(bytes.as_slice()).expect("decode");
        assert!(ev.events.is_empty());
        assert_eq!(ev.resolved_ts.as_ref(), Some(&want));
    }
    let ev = cdcpb::ChangeDataEvent {
        events: Vec::new(),
        resolved_ts: Some(want),
    };
    assert_eq!(ev.encode_to_vec(), packed);
}

/// gRPC method paths: a server built from the generated code accepts requests
/// sent to hand-written paths, and the generated clients reach it.
mod grpc {
    use super::*;
    use tonic::codegen::http::uri::PathAndQuery;
    use tonic::codegen::tokio_stream::{self, StreamExt};
    use tonic::codegen::BoxStream;
    use tonic::transport::{Channel, Server};
    use tonic::{Code, Request, Response, Status, Streaming};

    struct Cdc;

    impl Cdc {
        /// Answers every request with a resolved ts naming its region id; the
        /// `ts` field tells which method served it.
        async fn feed(
            ts: u64,
            request: Request<Streaming<cdcpb::ChangeDataRequest>>,
        ) -> Result<Response<BoxStream<cdcpb::ChangeDataEvent>>, Status> {
            let features = request
                .metadata()
                .get("features")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let mut inbound = request.into_inner();
            let mut events = Vec::new();
            while let Some(req) = inbound.message().await? {
                events.push(Ok(cdcpb::ChangeDataEvent {
                    events: Vec::new(),
                    resolved_ts: Some(cdcpb::ResolvedTs {
                        regions: vec![req.region_id],
                        ts,
                        request_id: features.len() as u64,
                    }),
                }));
            }
            Ok(Response::new(Box::pin(tokio_stream::iter(events))))
        }
    }

    #[tonic::async_trait]
    impl cdcpb::change_data_server::ChangeData for Cdc {
        async fn event_feed(
            &self,
            request: Request<Streaming<cdcpb::ChangeDataRequest>>,
        ) -> Result<Response<BoxStream<cdcpb::ChangeDataEvent>>, Status> {
            Self::feed(1, request).await
        }

        async fn event_feed_v2(
            &self,
            request: Request<Streaming<cdcpb::ChangeDataRequest>>,
        ) -> Result<Response<BoxStream<cdcpb::ChangeDataEvent>>, Status> {
            Self::feed(2, request).await
        }
    }

    /// Implements a few PD methods; the rest keep the UNIMPLEMENTED default.
    struct Pd;

    fn pd_header(cluster_id: u64) -> Option<pdpb::ResponseHeader> {
        Some(pdpb::ResponseHeader {
            cluster_id,
            error: None,
        })
    }

    #[tonic::async_trait]
    impl pdpb::pd_server::Pd for Pd {
        async fn get_members(
            &self,
            _request: Request<pdpb::GetMembersRequest>,
        ) -> Result<Response<pdpb::GetMembersResponse>, Status> {
            Ok(Response::new(pdpb::GetMembersResponse {
                header: pd_header(42),
                ..Default::default()
            }))
        }

        async fn tso(
            &self,
            request: Request<Streaming<pdpb::TsoRequest>>,
        ) -> Result<Response<BoxStream<pdpb::TsoResponse>>, Status> {
            let mut inbound = request.into_inner();
            let mut out = Vec::new();
            while let Some(req) = inbound.message().await? {
                out.push(Ok(pdpb::TsoResponse {
                    header: pd_header(42),
                    count: req.count,
                    timestamp: Some(pdpb::Timestamp {
                        physical: 1_568_700_549_751,
                        logical: 108,
                        suffix_bits: 0,
                    }),
                }));
            }
            Ok(Response::new(Box::pin(tokio_stream::iter(out))))
        }

        async fn get_region(
            &self,
            request: Request<pdpb::GetRegionRequest>,
        ) -> Result<Response<pdpb::GetRegionResponse>, Status> {
            Ok(Response::new(pdpb::GetRegionResponse {
                header: pd_header(42),
                region: Some(metapb::Region {
                    id: 3,
                    start_key: request.into_inner().region_key,
                    ..Default::default()
                }),
                ..Default::default()
            }))
        }
    }

    struct Kv;

    #[tonic::async_trait]
    impl tikvpb::tikv_server::Tikv for Kv {
        async fn kv_scan(
            &self,
            request: Request<kvrpcpb::ScanRequest>,
        ) -> Result<Response<kvrpcpb::ScanResponse>, Status> {
            let req = request.into_inner();
            Ok(Response::new(kvrpcpb::ScanResponse {
                pairs: vec![kvrpcpb::KvPair {
                    key: req.start_key.into(),
                    value: req.version.to_be_bytes().to_vec().into(),
                    ..Default::default()
                }],
                ..Default::default()
            }))
        }

        async fn kv_get(
            &self,
            request: Request<kvrpcpb::GetRequest>,
        ) -> Result<Response<kvrpcpb::GetResponse>, Status> {
            Ok(Response::new(kvrpcpb::GetResponse {
                value: request.into_inner().key,
                ..Default::default()
            }))
        }
    }

    async fn start() -> Channel {
        let incoming = tonic::transport::server::TcpIncoming::bind(
            "127.0.0.1:0".parse().expect("socket address"),
        )
        .expect("bind");
        let addr = incoming.local_addr().expect("local addr");
        tokio::spawn(
            Server::builder()
                .add_service(cdcpb::change_data_server::ChangeDataServer::new(Cdc))
                .add_service(pdpb::pd_server::PdServer::new(Pd))
                .add_service(tikvpb::tikv_server::TikvServer::new(Kv))
                .serve_with_incoming(incoming),
        );
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect")
    }

    /// Unary call on an explicit path.
    async fn unary<Req, Resp>(
        channel: &Channel,
        path: &'static str,
        req: Req,
    ) -> Result<Resp, Status>
    where
        Req: Message + Send + Sync + 'static,
        Resp: Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready()
            .await
            .map_err(|e| Status::unknown(e.to_string()))?;
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        grpc.unary(Request::new(req), PathAndQuery::from_static(path), codec)
            .await
            .map(Response::into_inner)
    }

    /// Bidi call on an explicit path: sends `reqs`, collects every reply.
    async fn streaming<Req, Resp>(
        channel: &Channel,
        path: &'static str,
        request: Request<Vec<Req>>,
    ) -> Result<Vec<Resp>, Status>
    where
        Req: Message + Send + Sync + 'static,
        Resp: Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready()
            .await
            .map_err(|e| Status::unknown(e.to_string()))?;
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        let request = request.map(tokio_stream::iter);
        let mut replies = grpc
            .streaming(request, PathAndQuery::from_static(path), codec)
            .await?
            .into_inner();
        let mut out = Vec::new();
        while let Some(reply) = replies.message().await? {
            out.push(reply);
        }
        Ok(out)
    }

    fn region_req(region_id: u64) -> cdcpb::ChangeDataRequest {
        cdcpb::ChangeDataRequest {
            region_id,
            ..Default::default()
        }
    }

    fn resolved(ev: &cdcpb::ChangeDataEvent) -> (u64, Vec<u64>, u64) {
        let r = ev.resolved_ts.as_ref().expect("resolved ts");
        (r.ts, r.regions.clone(), r.request_id)
    }

    #[tokio::test]
    async fn cdc_method_paths() {
        let channel = start().await;

        let replies: Vec<cdcpb::ChangeDataEvent> = streaming(
            &channel,
            "/cdcpb.ChangeData/EventFeed",
            Request::new(vec![region_req(11), region_req(12)]),
        )
        .await
        .expect("EventFeed");
        let got: Vec<_> = replies.iter().map(resolved).collect();
        assert_eq!(got, vec![(1, vec![11], 0), (1, vec![12], 0)]);

        let mut request = Request::new(vec![region_req(13)]);
        request
            .metadata_mut()
            .insert("features", "stream-multiplexing".parse().expect("ascii"));
        let replies: Vec<cdcpb::ChangeDataEvent> =
            streaming(&channel, "/cdcpb.ChangeData/EventFeedV2", request)
                .await
                .expect("EventFeedV2");
        let got: Vec<_> = replies.iter().map(resolved).collect();
        assert_eq!(got, vec![(2, vec![13], "stream-multiplexing".len() as u64)]);

        // The generated client reaches the same handlers.
        let mut client = cdcpb::change_data_client::ChangeDataClient::new(channel.clone());
        let mut stream = client
            .event_feed(tokio_stream::iter(vec![region_req(21)]))
            .await
            .expect("EventFeed via client")
            .into_inner();
        let first = stream.next().await.expect("one reply").expect("ok");
        assert_eq!(resolved(&first), (1, vec![21], 0));
        let mut stream = client
            .event_feed_v2(tokio_stream::iter(vec![region_req(22)]))
            .await
            .expect("EventFeedV2 via client")
            .into_inner();
        let first = stream.next().await.expect("one reply").expect("ok");
        assert_eq!(resolved(&first), (2, vec![22], 0));

        // A misspelt path is not served.
        let err = streaming::<cdcpb::ChangeDataRequest, cdcpb::ChangeDataEvent>(
            &channel,
            "/cdcpb.ChangeData/EventFeedV3",
            Request::new(vec![region_req(1)]),
        )
        .await
        .expect_err("unknown method");
        assert_eq!(err.code(), Code::Unimplemented);
    }

    #[tokio::test]
    async fn pd_method_paths() {
        let channel = start().await;

        let members: pdpb::GetMembersResponse = unary(
            &channel,
            "/pdpb.PD/GetMembers",
            pdpb::GetMembersRequest::default(),
        )
        .await
        .expect("GetMembers");
        assert_eq!(members.header.expect("header").cluster_id, 42);

        let tso: Vec<pdpb::TsoResponse> = streaming(
            &channel,
            "/pdpb.PD/Tso",
            Request::new(vec![pdpb::TsoRequest {
                count: 5,
                ..Default::default()
            }]),
        )
        .await
        .expect("Tso");
        assert_eq!(tso.len(), 1);
        assert_eq!(tso[0].count, 5);
        let ts = tso[0].timestamp.as_ref().expect("timestamp");
        assert_eq!((ts.physical << 18) + ts.logical, 411_225_436_913_926_252);

        let region: pdpb::GetRegionResponse = unary(
            &channel,
            "/pdpb.PD/GetRegion",
            pdpb::GetRegionRequest {
                region_key: b"k".to_vec(),
                ..Default::default()
            },
        )
        .await
        .expect("GetRegion");
        assert_eq!(region.region.expect("region").start_key, b"k");

        // Methods that exist but are not implemented answer UNIMPLEMENTED
        // from the default stubs; they are still routed by exact path.
        for path in [
            "/pdpb.PD/GetClusterInfo",
            "/pdpb.PD/GetPrevRegion",
            "/pdpb.PD/GetRegionByID",
            "/pdpb.PD/ScanRegions",
            "/pdpb.PD/BatchScanRegions",
            "/pdpb.PD/GetStore",
            "/pdpb.PD/GetAllStores",
            "/pdpb.PD/GetGCSafePoint",
            "/pdpb.PD/UpdateServiceGCSafePoint",
        ] {
            let err = unary::<pdpb::GetMembersRequest, pdpb::GetMembersResponse>(
                &channel,
                path,
                pdpb::GetMembersRequest::default(),
            )
            .await
            .expect_err(path);
            assert_eq!(err.code(), Code::Unimplemented, "{path}");
            assert_eq!(err.message(), "Not yet implemented", "{path}");
        }
        // Unknown paths are rejected by the router (empty message).
        let err = unary::<pdpb::GetMembersRequest, pdpb::GetMembersResponse>(
            &channel,
            "/pdpb.PD/GetRegionById",
            pdpb::GetMembersRequest::default(),
        )
        .await
        .expect_err("wrong case");
        assert_eq!(err.code(), Code::Unimplemented);
        assert_ne!(err.message(), "Not yet implemented");

        // Generated client.
        let mut client = pdpb::pd_client::PdClient::new(channel.clone());
        let region = client
            .get_region(pdpb::GetRegionRequest {
                region_key: b"z".to_vec(),
                ..Default::default()
            })
            .await
            .expect("GetRegion via client")
            .into_inner();
        assert_eq!(region.region.expect("region").id, 3);
        let err = client
            .get_region_by_id(pdpb::GetRegionByIdRequest::default())
            .await
            .expect_err("default stub");
        assert_eq!(err.message(), "Not yet implemented");
    }

    #[tokio::test]
    async fn tikv_method_paths() {
        let channel = start().await;

        let scan: kvrpcpb::ScanResponse = unary(
            &channel,
            "/tikvpb.Tikv/KvScan",
            kvrpcpb::ScanRequest {
                start_key: b"m".to_vec(),
                version: 7,
                ..Default::default()
            },
        )
        .await
        .expect("KvScan");
        assert_eq!(scan.pairs[0].key.as_ref(), b"m");
        assert_eq!(scan.pairs[0].value.as_ref(), 7u64.to_be_bytes());

        let get: kvrpcpb::GetResponse = unary(
            &channel,
            "/tikvpb.Tikv/KvGet",
            kvrpcpb::GetRequest {
                key: b"g".to_vec(),
                ..Default::default()
            },
        )
        .await
        .expect("KvGet");
        assert_eq!(get.value, b"g");

        for path in [
            "/tikvpb.Tikv/KvBatchGet",
            "/tikvpb.Tikv/KvPrewrite",
            "/tikvpb.Tikv/KvTxnHeartBeat",
            "/tikvpb.Tikv/KvCheckTxnStatus",
            "/tikvpb.Tikv/KvCheckSecondaryLocks",
            "/tikvpb.Tikv/KvCommit",
            "/tikvpb.Tikv/KvCleanup",
            "/tikvpb.Tikv/KvBatchRollback",
            "/tikvpb.Tikv/KvScanLock",
            "/tikvpb.Tikv/KvResolveLock",
        ] {
            let err = unary::<kvrpcpb::GetRequest, kvrpcpb::GetResponse>(
                &channel,
                path,
                kvrpcpb::GetRequest::default(),
            )
            .await
            .expect_err(path);
            assert_eq!(err.code(), Code::Unimplemented, "{path}");
            assert_eq!(err.message(), "Not yet implemented", "{path}");
        }

        let mut client = tikvpb::tikv_client::TikvClient::new(channel);
        let scan = client
            .kv_scan(kvrpcpb::ScanRequest {
                start_key: b"n".to_vec(),
                ..Default::default()
            })
            .await
            .expect("KvScan via client")
            .into_inner();
        assert_eq!(scan.pairs[0].key.as_ref(), b"n");
    }
}

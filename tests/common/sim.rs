//! Helpers for tests that talk to the simulated cluster over real gRPC.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tibinlog::sim::region::RegionInfo;
use tibinlog::sim::server::{SimCluster, SimConfig};
use tibinlog_proto::cdcpb::{self, change_data_client::ChangeDataClient, event};
use tibinlog_proto::kvrpcpb;
use tibinlog_proto::pdpb::{self, pd_client::PdClient};
use tibinlog_proto::tikvpb::tikv_client::TikvClient;
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Request, Status, Streaming};

/// A small table: `id BIGINT NOT NULL` (clustered primary key) and `v VARCHAR(20)`.
pub fn small_table(
    name: &str,
    partition: Option<tibinlog::sim::tidb::PartitionDef>,
) -> tibinlog::sim::tidb::TableDef {
    use tibinlog::sim::tidb::{types as ty, ColumnDef, TableDef};
    use tibinlog::tidb::schema::mysql;
    TableDef {
        name: name.into(),
        columns: vec![
            ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("v", ty::varchar(20)),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// Upper bound for any single wait in a test.
pub const WAIT: Duration = Duration::from_secs(10);

/// Client version announced in `Header.ticdc_version` (batch resolved ts, cluster id checks).
pub const TICDC_VERSION: &str = "8.5.0";

/// A cluster of `stores` stores with a fast resolved-ts tick.
pub async fn start(stores: usize, seed: u64) -> SimCluster {
    start_with(SimConfig {
        stores,
        seed,
        resolved_ts_interval: Duration::from_millis(100),
        ..SimConfig::default()
    })
    .await
}

/// A cluster from an explicit config.
pub async fn start_with(cfg: SimConfig) -> SimCluster {
    let seed = cfg.seed;
    tokio::time::timeout(WAIT, SimCluster::start(cfg))
        .await
        .unwrap_or_else(|_| panic!("cluster start timed out (seed {seed})"))
        .unwrap_or_else(|e| panic!("cluster start failed (seed {seed}): {e}"))
}

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect_timeout(WAIT)
        .connect()
        .await
        .expect("connect")
}

/// A PD client.
pub async fn pd(cluster: &SimCluster) -> PdClient<Channel> {
    PdClient::new(channel(cluster.pd_addr()).await)
}

/// A TiKV KV client for a store.
pub async fn kv(cluster: &SimCluster, store_id: u64) -> TikvClient<Channel> {
    TikvClient::new(channel(cluster.store_addr(store_id).expect("store")).await)
}

/// A PD request header.
pub fn pd_header(cluster_id: u64) -> Option<pdpb::RequestHeader> {
    Some(pdpb::RequestHeader {
        cluster_id,
        ..Default::default()
    })
}

/// A read context for `region` (its id, epoch, leader peer).
pub fn kv_context(region: &RegionInfo) -> Option<kvrpcpb::Context> {
    Some(kvrpcpb::Context {
        region_id: region.id(),
        region_epoch: region.region.region_epoch,
        peer: region.leader,
        ..Default::default()
    })
}

/// A Register request for the whole of `region`.
pub fn register(
    cluster_id: u64,
    region: &RegionInfo,
    request_id: u64,
    checkpoint_ts: u64,
) -> cdcpb::ChangeDataRequest {
    cdcpb::ChangeDataRequest {
        header: Some(cdcpb::Header {
            cluster_id,
            ticdc_version: TICDC_VERSION.into(),
        }),
        region_id: region.id(),
        region_epoch: region.region.region_epoch,
        checkpoint_ts,
        start_key: region.region.start_key.clone(),
        end_key: region.region.end_key.clone(),
        request_id,
        extra_op: kvrpcpb::ExtraOp::ReadOldValue as i32,
        request: Some(cdcpb::change_data_request::Request::Register(
            cdcpb::change_data_request::Register {},
        )),
        ..Default::default()
    }
}

/// One open `EventFeed`/`EventFeedV2` stream.
pub struct Feed {
    tx: Option<mpsc::Sender<cdcpb::ChangeDataRequest>>,
    rx: Streaming<cdcpb::ChangeDataEvent>,
}

impl Feed {
    /// Opens `EventFeed` (`features = None`) or `EventFeedV2` with the given features.
    pub async fn open(addr: SocketAddr, features: Option<&str>) -> Result<Feed, Status> {
        let mut client =
            ChangeDataClient::new(channel(addr).await).max_decoding_message_size(256 * 1024 * 1024);
        let (tx, rx) = mpsc::channel(64);
        let mut req = Request::new(ReceiverStream::new(rx));
        let resp = match features {
            None => tokio::time::timeout(WAIT, client.event_feed(req)).await,
            Some(f) => {
                req.metadata_mut()
                    .insert("features", f.parse().expect("metadata value"));
                tokio::time::timeout(WAIT, client.event_feed_v2(req)).await
            }
        }
        .map_err(|_| Status::deadline_exceeded("open timed out"))??;
        Ok(Feed {
            tx: Some(tx),
            rx: resp.into_inner(),
        })
    }

    /// Sends one request.
    pub async fn send(&self, req: cdcpb::ChangeDataRequest) {
        self.tx
            .as_ref()
            .expect("send side open")
            .send(req)
            .await
            .expect("send");
    }

    /// Closes the send side.
    pub fn close_send(&mut self) {
        self.tx = None;
    }

    /// The next message, end of stream, or the stream's error.
    pub async fn try_next(&mut self) -> Result<Option<cdcpb::ChangeDataEvent>, Status> {
        tokio::time::timeout(WAIT, self.rx.message())
            .await
            .expect("no message in time")
    }

    /// The next message (panics on end, error or timeout).
    pub async fn next(&mut self) -> cdcpb::ChangeDataEvent {
        self.try_next()
            .await
            .expect("stream failed")
            .expect("stream ended")
    }

    /// Events until one satisfies `stop` (inclusive); resolved-ts messages are skipped unless
    /// `stop` looks at them through [`Feed::next`].
    pub async fn events_until(
        &mut self,
        mut stop: impl FnMut(&cdcpb::Event) -> bool,
    ) -> Vec<cdcpb::Event> {
        let mut out = Vec::new();
        loop {
            let msg = self.next().await;
            for ev in msg.events {
                let done = stop(&ev);
                out.push(ev);
                if done {
                    return out;
                }
            }
        }
    }

    /// The first resolved-ts message satisfying `pred`.
    pub async fn resolved_until(
        &mut self,
        mut pred: impl FnMut(&cdcpb::ResolvedTs) -> bool,
    ) -> cdcpb::ResolvedTs {
        loop {
            if let Some(r) = self.next().await.resolved_ts {
                if pred(&r) {
                    return r;
                }
            }
        }
    }
}

/// Rows of an `Entries` event (empty for other events).
pub fn rows(ev: &cdcpb::Event) -> &[event::Row] {
    match &ev.event {
        Some(event::Event::Entries(e)) => &e.entries,
        _ => &[],
    }
}

/// The error of an error event.
pub fn error(ev: &cdcpb::Event) -> Option<&cdcpb::Error> {
    match &ev.event {
        Some(event::Event::Error(e)) => Some(e),
        _ => None,
    }
}

/// True for an event whose rows end with INITIALIZED.
pub fn is_initialized(ev: &cdcpb::Event) -> bool {
    rows(ev)
        .last()
        .is_some_and(|r| r.r#type == event::LogType::Initialized as i32)
}

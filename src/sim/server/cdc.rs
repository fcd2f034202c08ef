//! `cdcpb.ChangeData` of one store: `EventFeed` and `EventFeedV2` (docs/upstream-facts.md,
//! "TiKV EventFeed").
//!
//! Each stream gets its own connection id. A reader task feeds requests to the core
//! (`SimCore::on_cdc_request`) and a pump task ([`super::cdc_stream::pump`]) writes the
//! connection's queued events. When the client closes its send side the stream ends after the
//! queue drains (TiCDC's multiplexing probe relies on this); when it cancels, or the store
//! stops, everything of the connection is dropped.

use std::sync::Arc;

use tibinlog_proto::cdcpb::{self, change_data_server::ChangeData};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status, Streaming};

use super::cdc_stream::{pump, ConnSink};
use super::state::Shared;
use crate::sim::cdc::ConnId;

/// The only feature TiKV knows in the `features` metadata of `EventFeedV2`.
pub const FEATURE_STREAM_MULTIPLEXING: &str = "stream-multiplexing";

/// Reads the comma-separated `features` request metadata; unknown features are refused with
/// `UNIMPLEMENTED` as TiKV does. Returns whether stream multiplexing was asked for.
pub fn parse_features(meta: &tonic::metadata::MetadataMap) -> Result<bool, Status> {
    let mut multiplexing = false;
    for value in meta.get_all("features") {
        let s = value
            .to_str()
            .map_err(|_| Status::unimplemented("unparsable features metadata"))?;
        for f in s.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            if f == FEATURE_STREAM_MULTIPLEXING {
                multiplexing = true;
            } else {
                return Err(Status::unimplemented(format!("unknown feature {f}")));
            }
        }
    }
    Ok(multiplexing)
}

/// The ChangeData service of one store.
#[derive(Debug, Clone)]
pub struct ChangeDataService {
    shared: Arc<Shared>,
    store_id: u64,
    /// Cancelled when the store stops.
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl ChangeDataService {
    /// A service for `store_id`; its streams end when `cancel` fires.
    pub fn new(
        shared: Arc<Shared>,
        store_id: u64,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        Self {
            shared,
            store_id,
            cancel,
            tracker,
        }
    }

    fn open(
        &self,
        inbound: Streaming<cdcpb::ChangeDataRequest>,
        multiplexing: bool,
    ) -> Result<Response<BoxStream<cdcpb::ChangeDataEvent>>, Status> {
        let store_id = self.store_id;
        let quota = self
            .shared
            .quotas
            .get(&store_id)
            .cloned()
            .ok_or_else(|| Status::unavailable("unknown store"))?;
        let delay = self
            .shared
            .stream_delay_us
            .get(&store_id)
            .cloned()
            .ok_or_else(|| Status::unavailable("unknown store"))?;
        let conn = self.shared.next_conn_id();
        let sink = ConnSink::new(quota);
        {
            let mut st = self.shared.lock();
            if !st.core.cluster.store(store_id).is_some_and(|s| s.up) {
                return Err(Status::unavailable("store is stopped"));
            }
            st.core
                .open_conn(store_id, conn, multiplexing)
                .map_err(|e| Status::internal(e.to_string()))?;
            st.sinks.insert((store_id, conn), sink.clone());
        }
        tracing::debug!(store_id, conn, multiplexing, "cdc stream opened");
        let conn_cancel = self.cancel.child_token();
        let (tx, rx) = mpsc::channel(super::cdc_stream::PUMP_MESSAGES);
        self.tracker
            .spawn(pump(sink.clone(), tx, delay, conn_cancel.clone()));
        self.tracker.spawn(read_requests(
            self.shared.clone(),
            store_id,
            conn,
            inbound,
            sink,
            conn_cancel,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Feeds the stream's requests to the core until the client half-closes, fails or `cancel`
/// fires; then drops the connection from the core.
async fn read_requests(
    shared: Arc<Shared>,
    store_id: u64,
    conn: ConnId,
    mut inbound: Streaming<cdcpb::ChangeDataRequest>,
    sink: ConnSink,
    cancel: CancellationToken,
) {
    let half_closed = loop {
        let msg = tokio::select! {
            _ = cancel.cancelled() => break false,
            m = inbound.message() => m,
        };
        match msg {
            Ok(Some(req)) => {
                let r = shared.apply(|core| {
                    if !core.cluster.store(store_id).is_some_and(|s| s.up) {
                        // Stopping: the stream is about to break; register nothing.
                        return Ok(((), Vec::new()));
                    }
                    core.on_cdc_request(store_id, conn, &req)
                        .map(|out| ((), out))
                });
                if let Err(e) = r {
                    tracing::warn!(store_id, conn, error = %e, "cdc request refused");
                }
                shared.scan_kick.notify_one();
            }
            Ok(None) => break true,
            Err(status) => {
                tracing::debug!(store_id, conn, %status, "cdc stream receive failed");
                break false;
            }
        }
    };
    {
        let mut st = shared.lock();
        st.sinks.remove(&(store_id, conn));
        let _ = st.core.close_conn(store_id, conn);
    }
    if half_closed {
        sink.finish();
    } else {
        sink.break_with(Status::unavailable("stream closed"));
        cancel.cancel();
    }
    tracing::debug!(store_id, conn, "cdc stream closed");
}

#[tonic::async_trait]
impl ChangeData for ChangeDataService {
    async fn event_feed(
        &self,
        request: Request<Streaming<cdcpb::ChangeDataRequest>>,
    ) -> Result<Response<BoxStream<cdcpb::ChangeDataEvent>>, Status> {
        // The v1 method knows no features: one subscription set per stream.
        self.open(request.into_inner(), false)
    }

    async fn event_feed_v2(
        &self,
        request: Request<Streaming<cdcpb::ChangeDataRequest>>,
    ) -> Result<Response<BoxStream<cdcpb::ChangeDataEvent>>, Status> {
        let multiplexing = parse_features(request.metadata())?;
        self.open(request.into_inner(), multiplexing)
    }
}

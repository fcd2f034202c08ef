//! One change-data stream per TiKV store: region registrations out, complete rows and
//! resolved ts in (docs/upstream-facts.md, "TiKV EventFeed").
//!
//! ```text
//!  puller ──StoreCommand──► receive half ──ChangeDataRequest──► send half ──► gRPC ──► TiKV
//!     ▲                      (owns the RegionFeeds)                                     │
//!     └──StoreOutput (rows, resolved, failures)◄── dispatch by (request_id, region_id) ◄┘
//! ```
//!
//! * **Connection.** `EventFeedV2` with request metadata `features: stream-multiplexing`; if
//!   the call is refused with `UNIMPLEMENTED` (TiKV < 7.5 or an unknown feature) the actor falls
//!   back to `EventFeed` ([`should_fall_back`]). On a non-multiplexed stream `ResolvedTs`
//!   batches carry `request_id = 0` and are applied to every subscription of the listed regions.
//! * **Halves.** The send half only forwards requests to gRPC. The receive half owns the
//!   [`RegionFeed`]s, accepts commands, and reads the stream; both are joined with `try_join!`
//!   so either failing ends the actor, which then reports every subscription it held in one
//!   [`StoreOutput::StreamFailed`] (the puller reloads them from PD and re-subscribes).
//! * **Back-pressure.** Outputs of one gRPC message are queued locally and the stream is not
//!   read again until the puller took them all, so a slow consumer stalls HTTP/2 flow control
//!   towards TiKV instead of growing a buffer. Commands are accepted meanwhile, so the puller can
//!   never deadlock against a blocked store.
//! * **Scan limit.** At most `scan_limit` subscriptions are registered but not yet INITIALIZED
//!   (each holds a token released at INITIALIZED or on failure); others wait in a queue.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tibinlog_proto::cdcpb::{self, change_data_client::ChangeDataClient};
use tibinlog_proto::{kvrpcpb, metapb};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request, Status, Streaming};

use super::error::CaptureError;
use super::id_map::IdMap;
use super::matcher::MatcherConfig;
use super::pd::{dial, MAX_DECODING_MESSAGE_SIZE};
use super::region::{RegionEvent, RegionFeed};
use super::region_cache::RegionInfo;
use crate::budget::ByteBudget;
use crate::model::{RawRow, RegionId, Span, Ts};

mod message;

/// The `features` value announced on `EventFeedV2`.
pub const FEATURE_STREAM_MULTIPLEXING: &str = "stream-multiplexing";
/// Default most regions registered on one store and not yet INITIALIZED: TiCDC ≤ 6.1's
/// `region-scan-limit` (40). TiKV itself runs at most 6 scans per store
/// (`incremental-scan-concurrency`) and queues the rest, so this only bounds queued scans.
pub const DEFAULT_SCAN_LIMIT: usize = 40;
/// Client version announced in `cdcpb.Header` (≥ 5.3.0 enables batch resolved ts and cluster id
/// checks; no leading `v`: TiKV parses it as strict semver).
pub const TICDC_VERSION: &str = "8.5.0";
/// Capacity of the command channel into a store actor (commands are small; the actor drains
/// them even while its output is blocked).
pub const COMMAND_CHANNEL: usize = 256;
/// Requests buffered between the receive half and the send half.
const REQUEST_CHANNEL: usize = 64;

/// One region subscription to make.
#[derive(Debug, Clone)]
pub struct RegionRequest {
    /// Unique per subscription (this client allocates a fresh one per region request).
    pub request_id: u64,
    /// The table subscription (puller span) it belongs to.
    pub sub: u64,
    pub region: RegionInfo,
    /// The requested span: the region intersected with the table span (encoded).
    pub span: Span,
    /// The table subscription's start ts.
    pub start_ts: Ts,
    /// Commits above this are sent; the span's resolved ts.
    pub checkpoint_ts: Ts,
    /// Failures before INITIALIZED so far (drives the backoff).
    pub attempt: u32,
}

/// Instructions from the puller.
#[derive(Debug)]
pub enum StoreCommand {
    Register(Box<RegionRequest>),
    /// Drops a subscription (table removed); TiKV answers with `region_not_found`, ignored.
    Deregister {
        request_id: u64,
        region_id: RegionId,
    },
}

/// A subscription that ended, with what is needed to resume it.
#[derive(Debug)]
pub struct Ended {
    pub req: RegionRequest,
    /// Last resolved ts it reached (≥ its checkpoint).
    pub resolved_ts: Ts,
    pub initialized: bool,
}

/// What a store actor reports.
#[derive(Debug)]
pub enum StoreOutput {
    /// Complete committed rows, in stream order.
    Rows(Vec<RawRow>),
    /// Resolved ts of subscriptions, by request id (the puller knows each request's span, so
    /// a tick over many regions moves no key bytes).
    Resolved(Vec<(u64, Ts)>),
    /// TiKV ended one subscription (or it broke the protocol: then `error` is fatal).
    /// Boxed: failures are rare and would otherwise make every output large.
    RegionFailed {
        ended: Box<Ended>,
        error: Box<CaptureError>,
    },
    /// The stream is gone; every subscription it held (and queued) is listed.
    StreamFailed {
        store_id: u64,
        generation: u64,
        ended: Vec<Ended>,
        error: Box<CaptureError>,
    },
}

/// How a store actor talks to TiKV.
#[derive(Debug, Clone)]
pub struct StoreStreamConfig {
    pub cluster_id: u64,
    pub ticdc_version: String,
    /// Try `EventFeedV2` with multiplexing first (false: `EventFeed` only).
    pub multiplexing: bool,
    pub scan_limit: usize,
    pub matcher: MatcherConfig,
    pub connect_timeout: Duration,
    /// Mutual TLS to the store (as to PD).
    pub tls: Option<crate::security::ClusterTls>,
    pub metrics: crate::metrics::CaptureMetrics,
}

/// The puller's handle on a store actor.
#[derive(Debug, Clone)]
pub struct StoreHandle {
    pub store_id: u64,
    /// Distinguishes successive actors of one store.
    pub generation: u64,
    pub tx: mpsc::Sender<StoreCommand>,
    /// The actor's state bytes and region count, as it last reported them
    /// ([`STATE_REPORT`]).
    pub state: Arc<StoreState>,
}

/// What a store actor holds, reported at most every [`STATE_REPORT`].
#[derive(Debug, Default)]
pub struct StoreState {
    pub bytes: std::sync::atomic::AtomicUsize,
    pub regions: std::sync::atomic::AtomicUsize,
}

/// How often a store actor sums its state (an O(regions) walk).
pub const STATE_REPORT: std::time::Duration = std::time::Duration::from_secs(1);

/// True if a refused `EventFeedV2` means "use `EventFeed`" (TiCDC's probe).
pub fn should_fall_back(status: &Status) -> bool {
    status.code() == Code::Unimplemented
}

/// Bytes of rows every store actor together may have handed to the puller and the puller not
/// yet passed on: with many stores and messages of megabytes, a count bound alone would let a
/// huge transaction's rows pile up here.
pub const OUTPUT_QUOTA_BYTES: usize = 32 << 20;
/// Fixed cost counted per row besides its payload.
const ROW_OVERHEAD_BYTES: usize = 64;
/// Rows of one message handed on as soon as they reach this many payload bytes: a message of
/// small COMMITs can match prewrites of megabytes each.
const ROWS_FLUSH_BYTES: usize = 4 << 20;
/// Outputs a store actor holds for the puller before it stops reading its stream.
///
/// The actor keeps reading while the puller is briefly busy (subscribing thousands of regions,
/// say): a stream left unread makes HTTP/2 buffer TiKV's messages, and a run of small ones
/// (INITIALIZED, resolved ts) exhausts the client's budget for buffered small DATA frames, on
/// which it closes the connection with ENHANCE_YOUR_CALM. Past this many bytes the puller is
/// truly behind and the stream waits, as it must.
const READ_AHEAD_BYTES: usize = 16 << 20;

/// Messages that had already arrived, handled after one that woke the actor before its outputs
/// go to the puller (up to [`COALESCE_BYTES`] queued). TiKV packs many messages into one HTTP/2
/// frame (with a multiplexed stream, one resolved-ts message per subscription every interval):
/// handling them together hands their resolved ts on as one output instead of thousands.
const COALESCE_MESSAGES: usize = 256;
/// Queued output bytes past which arrived messages no longer wait for the outputs to go.
const COALESCE_BYTES: usize = 1 << 20;

/// Bytes an output queued in a store actor stands for (its rows' payloads, its spans).
fn queued_bytes(o: &StoreOutput) -> usize {
    const FIXED: usize = 64;
    match o {
        StoreOutput::Rows(rows) => rows
            .iter()
            .map(|r| r.payload_len() + ROW_OVERHEAD_BYTES)
            .sum(),
        StoreOutput::Resolved(v) => FIXED + v.len() * std::mem::size_of::<(u64, Ts)>(),
        StoreOutput::RegionFailed { .. } => FIXED * 4,
        StoreOutput::StreamFailed { ended, .. } => FIXED * 4 * (1 + ended.len()),
    }
}

/// The store actors' side of the channel to the puller: bounded in items and in row bytes. A
/// sent output holds its bytes until the puller calls [`OutputTx::release`] for it.
#[derive(Debug, Clone)]
pub struct OutputTx {
    pub tx: mpsc::Sender<StoreOutput>,
    bytes: ByteBudget,
}

impl OutputTx {
    pub fn new(tx: mpsc::Sender<StoreOutput>) -> OutputTx {
        OutputTx {
            tx,
            bytes: ByteBudget::new(OUTPUT_QUOTA_BYTES),
        }
    }

    /// Bytes `o` holds against the quota (an output larger than all of it takes all of it).
    pub fn cost(&self, o: &StoreOutput) -> u32 {
        match o {
            StoreOutput::Rows(rows) => self.bytes.cost(
                rows.iter()
                    .map(|r| r.payload_len() + ROW_OVERHEAD_BYTES)
                    .sum(),
            ),
            _ => 0,
        }
    }

    /// Waits for `cost` bytes and a slot; `None` once the puller is gone. Cancel-safe: the
    /// bytes are taken only together with the slot.
    async fn reserve(&self, cost: u32) -> Option<mpsc::Permit<'_, StoreOutput>> {
        let bytes = self.bytes.hold(cost).await;
        let slot = self.tx.reserve().await.ok()?;
        bytes.forget();
        Some(slot)
    }

    /// Sends `o`, waiting for room; false once the puller is gone.
    async fn send(&self, o: StoreOutput) -> bool {
        match self.reserve(self.cost(&o)).await {
            Some(slot) => {
                slot.send(o);
                true
            }
            None => false,
        }
    }

    /// The puller is done with an output of `cost` bytes.
    pub fn release(&self, cost: u32) {
        self.bytes.give(cost);
    }
}

/// Starts the actor of `store_id` at `addr`.
pub fn spawn(
    store_id: u64,
    generation: u64,
    addr: String,
    cfg: StoreStreamConfig,
    out: OutputTx,
    cancel: CancellationToken,
) -> StoreHandle {
    let (tx, rx) = mpsc::channel(COMMAND_CHANNEL);
    let region_gauges = cfg.metrics.region_gauges(&store_id.to_string());
    let state = Arc::new(StoreState::default());
    let actor = StoreActor {
        state: state.clone(),
        next_report: std::time::Instant::now(),
        store_id,
        generation,
        cfg,
        commands: rx,
        out,
        feeds: IdMap::default(),
        by_region: IdMap::default(),
        pending: VecDeque::new(),
        scanning: 0,
        multiplexed: true,
        outq: VecDeque::new(),
        outq_bytes: 0,
        rows: Vec::new(),
        rows_bytes: 0,
        region_gauges,
    };
    tokio::spawn(actor.run(addr, cancel));
    StoreHandle {
        store_id,
        generation,
        tx,
        state,
    }
}

struct Sub {
    req: RegionRequest,
    feed: RegionFeed,
}

struct StoreActor {
    store_id: u64,
    /// `capture_regions` of this store.
    region_gauges: crate::metrics::RegionGauges,
    generation: u64,
    cfg: StoreStreamConfig,
    commands: mpsc::Receiver<StoreCommand>,
    out: OutputTx,
    feeds: IdMap<(u64, RegionId), Sub>,
    /// Region → request ids subscribed on this stream (for `request_id = 0` resolved ts).
    by_region: IdMap<RegionId, Vec<u64>>,
    /// Registrations waiting for a scan token.
    pending: VecDeque<RegionRequest>,
    /// Registered and not yet INITIALIZED.
    scanning: usize,
    multiplexed: bool,
    /// Outputs of gRPC messages not yet taken by the puller, in stream order.
    outq: VecDeque<StoreOutput>,
    /// [`queued_bytes`] of `outq`: messages are read while it is under [`READ_AHEAD_BYTES`].
    outq_bytes: usize,
    /// Scratch for rows of one message.
    rows: Vec<RawRow>,
    /// Payload bytes in `rows`.
    rows_bytes: usize,
    state: Arc<StoreState>,
    next_report: std::time::Instant,
}

type Feed = (
    mpsc::Sender<cdcpb::ChangeDataRequest>,
    Streaming<cdcpb::ChangeDataEvent>,
);

async fn open(addr: &str, cfg: &StoreStreamConfig) -> Result<(Feed, bool), Status> {
    let ch = dial(addr, cfg.connect_timeout, cfg.tls.as_ref()).await?;
    let mut client = ChangeDataClient::new(ch).max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE);
    if cfg.multiplexing {
        let (tx, rx) = mpsc::channel(REQUEST_CHANNEL);
        let mut req = Request::new(ReceiverStream::new(rx));
        req.metadata_mut().insert(
            "features",
            MetadataValue::from_static(FEATURE_STREAM_MULTIPLEXING),
        );
        match client.event_feed_v2(req).await {
            Ok(resp) => return Ok(((tx, resp.into_inner()), true)),
            Err(s) if should_fall_back(&s) => {
                tracing::info!(addr, "EventFeedV2 unimplemented, falling back to EventFeed");
            }
            Err(s) => return Err(s),
        }
    }
    let (tx, rx) = mpsc::channel(REQUEST_CHANNEL);
    let resp = client
        .event_feed(Request::new(ReceiverStream::new(rx)))
        .await?;
    Ok(((tx, resp.into_inner()), false))
}

impl StoreActor {
    async fn run(mut self, addr: String, cancel: CancellationToken) {
        let store_id = self.store_id;
        let opened = tokio::select! {
            _ = cancel.cancelled() => return,
            r = open(&addr, &self.cfg) => r,
        };
        let result = match opened {
            Ok(((grpc_tx, stream), multiplexed)) => {
                self.multiplexed = multiplexed;
                tracing::debug!(store_id, multiplexed, "change data stream open");
                let (req_tx, req_rx) = mpsc::channel(REQUEST_CHANNEL);
                let send_half = send_half(req_rx, grpc_tx, store_id);
                let recv_half = self.recv_half(stream, req_tx, &cancel);
                tokio::try_join!(send_half, recv_half).map(|_| ())
            }
            Err(source) => Err(CaptureError::Stream {
                store: store_id,
                source,
            }),
        };
        // A store that refuses our certificate (or its common name) refuses it on every
        // reconnect: that stops capture instead of looping.
        let result = result.map_err(|e| match e {
            CaptureError::Stream { store, source } => {
                let status = crate::security::classify(source, &addr);
                if crate::security::is_refusal(&status) {
                    CaptureError::Refused {
                        store,
                        message: status.message().to_string(),
                    }
                } else {
                    CaptureError::Stream {
                        store,
                        source: status,
                    }
                }
            }
            other => other,
        });
        // Zeroed through the actor's own handles: a successor actor of the store may already
        // have resolved the same series.
        self.region_gauges.set(0, 0, 0);
        if let Err(error) = result {
            tracing::info!(store_id, error = %error, "change data stream failed");
            self.fail(error, &cancel).await;
        }
    }

    /// Sums what the actor holds per region: each subscription's request and feed (with the
    /// prewrites its matcher holds), the request-id index, queued registrations and undelivered
    /// outputs.
    fn report_state(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        const ENTRY: usize = 48;
        let request = |r: &RegionRequest| {
            std::mem::size_of::<RegionRequest>()
                + r.span.start.capacity()
                + r.span.end.capacity()
                + r.region.span.start.capacity()
                + r.region.span.end.capacity()
                + r.region.peers.len() * std::mem::size_of::<metapb::Peer>()
        };
        let feeds: usize = self
            .feeds
            .values()
            .map(|s| ENTRY + request(&s.req) + s.feed.state_bytes())
            .sum();
        let index: usize = self
            .by_region
            .values()
            .map(|ids| ENTRY + ids.capacity() * 8)
            .sum();
        let queued: usize = self.pending.iter().map(request).sum();
        let outq = self.outq_bytes;
        self.state
            .bytes
            .store(feeds + index + queued + outq, Relaxed);
        self.state
            .regions
            .store(self.feeds.len() + self.pending.len(), Relaxed);
        self.next_report = std::time::Instant::now() + STATE_REPORT;
    }

    /// Reports every subscription (held, queued, and still in the command channel) as ended.
    async fn fail(mut self, error: CaptureError, cancel: &CancellationToken) {
        self.commands.close();
        while let Ok(cmd) = self.commands.try_recv() {
            if let StoreCommand::Register(req) = cmd {
                self.pending.push_back(*req);
            }
        }
        let mut ended: Vec<Ended> = self
            .feeds
            .drain()
            .map(|(_, s)| Ended {
                resolved_ts: s.feed.resolved_ts(),
                initialized: s.feed.is_initialized(),
                req: s.req,
            })
            .collect();
        ended.extend(self.pending.drain(..).map(|req| Ended {
            resolved_ts: req.checkpoint_ts,
            initialized: false,
            req,
        }));
        // Outputs already produced go first: rows of a message precede its failure.
        for o in self
            .outq
            .drain(..)
            .chain(std::iter::once(StoreOutput::StreamFailed {
                store_id: self.store_id,
                generation: self.generation,
                ended,
                error: Box::new(error),
            }))
        {
            tokio::select! {
                _ = cancel.cancelled() => return,
                sent = self.out.send(o) => if !sent { return },
            }
        }
    }

    async fn recv_half(
        &mut self,
        mut stream: Streaming<cdcpb::ChangeDataEvent>,
        req_tx: mpsc::Sender<cdcpb::ChangeDataRequest>,
        cancel: &CancellationToken,
    ) -> Result<(), CaptureError> {
        enum Woke {
            Cancelled,
            Sent,
            Command(Option<StoreCommand>),
            Message(Result<Option<cdcpb::ChangeDataEvent>, Status>),
        }
        let store = self.store_id;
        loop {
            let cost = self.outq.front().map_or(0, |o| self.out.cost(o));
            let woke = tokio::select! {
                biased;
                _ = cancel.cancelled() => Woke::Cancelled,
                permit = self.out.reserve(cost), if !self.outq.is_empty() => match permit {
                    Some(slot) => {
                        if let Some(o) = self.outq.pop_front() {
                            self.outq_bytes = self.outq_bytes.saturating_sub(queued_bytes(&o));
                            slot.send(o);
                        }
                        Woke::Sent
                    }
                    None => Woke::Cancelled,
                },
                cmd = self.commands.recv() => Woke::Command(cmd),
                msg = stream.message(), if self.outq_bytes < READ_AHEAD_BYTES => Woke::Message(msg),
            };
            if std::time::Instant::now() >= self.next_report {
                self.report_state();
            }
            match woke {
                Woke::Cancelled | Woke::Command(None) => return Ok(()),
                Woke::Sent => {}
                Woke::Command(Some(cmd)) => self.on_command(cmd, &req_tx).await?,
                Woke::Message(Ok(Some(ev))) => {
                    self.on_message(ev, &req_tx, cancel).await?;
                    // Messages already decoded and waiting (a message is cancel-safe to poll).
                    let mut more = 0;
                    while more < COALESCE_MESSAGES && self.outq_bytes < COALESCE_BYTES {
                        use futures_util::FutureExt;
                        match stream.message().now_or_never() {
                            None => break,
                            Some(Ok(Some(ev))) => self.on_message(ev, &req_tx, cancel).await?,
                            Some(Ok(None)) => {
                                return Err(CaptureError::Stream {
                                    store,
                                    source: Status::unavailable("stream ended by TiKV"),
                                })
                            }
                            Some(Err(source)) => {
                                return Err(CaptureError::Stream { store, source })
                            }
                        }
                        more += 1;
                    }
                }
                Woke::Message(Ok(None)) => {
                    return Err(CaptureError::Stream {
                        store,
                        source: Status::unavailable("stream ended by TiKV"),
                    })
                }
                Woke::Message(Err(source)) => return Err(CaptureError::Stream { store, source }),
            }
        }
    }

    fn queue_out(&mut self, o: StoreOutput) {
        // Resolved ts queued back to back travel together (their order within is kept); the
        // queue's bytes stay the sum of `queued_bytes` of its entries.
        if let (StoreOutput::Resolved(v), Some(StoreOutput::Resolved(last))) =
            (&o, self.outq.back_mut())
        {
            self.outq_bytes += v.len() * std::mem::size_of::<(u64, Ts)>();
            last.extend_from_slice(v);
            return;
        }
        self.outq_bytes += queued_bytes(&o);
        self.outq.push_back(o);
    }

    fn request(&self, req: &RegionRequest) -> cdcpb::ChangeDataRequest {
        cdcpb::ChangeDataRequest {
            header: Some(cdcpb::Header {
                cluster_id: self.cfg.cluster_id,
                ticdc_version: self.cfg.ticdc_version.clone(),
            }),
            region_id: req.region.id.0,
            region_epoch: Some(req.region.epoch),
            checkpoint_ts: req.checkpoint_ts.0,
            start_key: req.span.start.clone(),
            end_key: req.span.end.clone(),
            request_id: req.request_id,
            extra_op: kvrpcpb::ExtraOp::ReadOldValue as i32,
            request: Some(cdcpb::change_data_request::Request::Register(
                cdcpb::change_data_request::Register {},
            )),
            ..Default::default()
        }
    }

    async fn send(
        &self,
        req_tx: &mpsc::Sender<cdcpb::ChangeDataRequest>,
        r: cdcpb::ChangeDataRequest,
    ) -> Result<(), CaptureError> {
        req_tx.send(r).await.map_err(|_| CaptureError::Stream {
            store: self.store_id,
            source: Status::unavailable("send half closed"),
        })
    }

    async fn on_command(
        &mut self,
        cmd: StoreCommand,
        req_tx: &mpsc::Sender<cdcpb::ChangeDataRequest>,
    ) -> Result<(), CaptureError> {
        match cmd {
            StoreCommand::Register(req) => {
                self.pending.push_back(*req);
                self.start_pending(req_tx).await
            }
            StoreCommand::Deregister {
                request_id,
                region_id,
            } => {
                let key = (request_id, region_id);
                if let Some(sub) = self.feeds.remove(&key) {
                    self.unindex(region_id, request_id);
                    if !sub.feed.is_initialized() {
                        self.scanning = self.scanning.saturating_sub(1);
                    }
                    let mut r = self.request(&sub.req);
                    r.request = Some(cdcpb::change_data_request::Request::Deregister(
                        cdcpb::change_data_request::Deregister {},
                    ));
                    self.send(req_tx, r).await?;
                } else {
                    self.pending.retain(|p| p.request_id != request_id);
                }
                self.start_pending(req_tx).await
            }
        }
    }

    /// Registers queued subscriptions while scan tokens are free.
    async fn start_pending(
        &mut self,
        req_tx: &mpsc::Sender<cdcpb::ChangeDataRequest>,
    ) -> Result<(), CaptureError> {
        while self.scanning < self.cfg.scan_limit.max(1) {
            let Some(req) = self.pending.pop_front() else {
                break;
            };
            let r = self.request(&req);
            let feed = RegionFeed::new(
                req.region.id,
                req.span.clone(),
                req.start_ts,
                req.checkpoint_ts,
                self.cfg.matcher.clone(),
            );
            tracing::trace!(
                store_id = self.store_id,
                region_id = req.region.id.0,
                ts = req.checkpoint_ts.0,
                "register region"
            );
            self.by_region
                .entry(req.region.id)
                .or_default()
                .push(req.request_id);
            self.feeds
                .insert((req.request_id, req.region.id), Sub { req, feed });
            self.scanning += 1;
            self.send(req_tx, r).await?;
        }
        self.report_regions();
        Ok(())
    }
}

async fn send_half(
    mut req_rx: mpsc::Receiver<cdcpb::ChangeDataRequest>,
    grpc_tx: mpsc::Sender<cdcpb::ChangeDataRequest>,
    store: u64,
) -> Result<(), CaptureError> {
    while let Some(r) = req_rx.recv().await {
        grpc_tx.send(r).await.map_err(|_| CaptureError::Stream {
            store,
            source: Status::unavailable("gRPC request stream closed"),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! The puller: table spans in, complete committed rows and a resolved-ts watermark out.
//!
//! ```text
//!   PullerHandle ──add/remove span──►┐
//!                                    ▼
//!   PD ◄──regions, stores──── puller actor ──Register──► store actor (one per store) ──► TiKV
//!                             (frontier, cache,   ◄──rows / resolved / failures──┘
//!                              retries, dedup)
//!                                    │
//!                                    ▼ RawKvEvent (byte-bounded)
//! ```
//!
//! One actor owns the [`SpanFrontier`], the [`RegionCache`], the retry schedule and the
//! handles of the store actors ([`super::store_stream`]). For every table span it loads the
//! regions from PD, cuts the span at region boundaries and subscribes each piece with
//! `checkpoint_ts` = the piece's own resolved ts (`min_in`), as TiCDC does.
//!
//! # Error handling
//! Every region failure is handled as [`CaptureError::retry`] says: re-send the same region
//! (after TiKV's `backoff_ms` or our backoff; to the hinted leader), or reload the piece from PD
//! and cut it again; a broken stream re-subscribes every region it held that way.
//! Backoff grows exponentially with the failures a subscription had before INITIALIZED, with
//! jitter from a seeded RNG. Errors without a retry (protocol violations, cluster id mismatch,
//! incompatible version, duplicate request) end the actor with [`PullerError`]; the output
//! channel closes and [`PullerHandle::join`] returns the error.
//!
//! # Output and its invariant
//! Invariant: after `Resolved(T)` is sent, no row with `commit_ts <= T` follows. The
//! watermark is the frontier's minimum, which a region advances only after the rows it sent
//! before; rows of one store are handled in stream order.
//!
//! Re-subscribing from a piece's resolved ts makes TiKV send again the rows above it that were
//! already delivered. A row with `commit_ts <=` the emitted watermark was necessarily
//! delivered already: the puller drops it. A row above the watermark may come twice; the
//! sorter collapses such exact duplicates (same `(commit_ts, start_ts, key)` and bytes), so
//! the puller keeps no per-row memory, whose size a long-held lock (a resolved ts that does
//! not move while writes go on) would not bound.
//!
//! # Back-pressure
//! The output is bounded in bytes ([`PullerConfig::output_quota_bytes`], [`super::output`]).
//! When it is full the actor waits, store actors stop reading their gRPC streams, and HTTP/2
//! flow control pushes back on TiKV.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::{CaptureError, Retry};
use super::frontier::SpanFrontier;
use super::id_map::IdMap;
use super::matcher::MatcherConfig;
use super::output::{output_channel, EventSender};
use super::pd::{PdClient, PdConfig, PdError};
use super::region_cache::{RegionCache, RegionInfo};
use super::span::{first_gap, intersect};
use super::store_stream::{
    self, Ended, RegionRequest, StoreCommand, StoreHandle, StoreOutput, StoreStreamConfig,
    DEFAULT_SCAN_LIMIT, TICDC_VERSION,
};
use crate::model::{RawKvEvent, RawRow, RegionId, ResolvedTs, Span, Ts};

mod output;
mod subscribe;

pub use super::output::EventReceiver;

/// Default byte budget of rows waiting in the output: 64 MiB. TiCDC's whole changefeed
/// defaults to a 1 GiB memory quota; this is only the hand-off to the sorter.
pub const DEFAULT_OUTPUT_QUOTA_BYTES: usize = 64 << 20;
/// First retry delay after a failure before INITIALIZED.
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(20);
/// Cap of the retry delay (client-go's TiKV RPC backoff also caps at 2 s).
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// Store outputs queued towards the actor (each is at most one gRPC message's worth).
const STORE_OUTPUT_CHANNEL: usize = 64;

/// Decides, from a committed row on its way out, which spans to capture from the row's commit
/// ts on: a DDL job that creates tables or brings them under the filter. Called in the
/// actor, before the row is sent and before any later watermark: the frontier has not passed
/// the row's commit ts (its region's resolved ts comes after it), so the new spans start there
/// with nothing missed. Each span comes with a key (a physical table id) by which it is
/// removed later.
pub trait SpanHook: Send + 'static {
    fn on_row(&mut self, row: &RawRow, out: &mut Vec<(i64, Span)>);
}

/// Removes keyed spans added by the [`SpanHook`] or at the start, from another task.
#[derive(Debug, Clone)]
pub struct SpanRemover(mpsc::UnboundedSender<(std::collections::HashSet<i64>, Ts)>);

impl SpanRemover {
    /// Stops capturing every keyed span whose key is not in `keep` (the tables the filter
    /// includes once the DDL committed at `ts` applied), unless a row above `ts` asked for
    /// it. Never blocks: the caller may sit downstream of the puller's own output.
    pub fn retain(&self, keep: std::collections::HashSet<i64>, ts: Ts) {
        let _ = self.0.send((keep, ts));
    }
}

/// Errors that stop the puller.
#[derive(Debug, thiserror::Error)]
pub enum PullerError {
    /// PD refused in a way retrying cannot fix (wrong cluster, TSO regression).
    #[error(transparent)]
    Pd(#[from] PdError),
    /// TiKV broke the protocol or refused us for good.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// History at `start_ts` may already be collected.
    #[error("start ts {start_ts} is below the GC safe point {safe_point}")]
    StartTsBeforeGcSafePoint { start_ts: Ts, safe_point: Ts },
    /// The puller task is gone (shut down or failed; see [`PullerHandle::join`]).
    #[error("puller stopped")]
    Stopped,
}

/// What to capture and how.
#[derive(Debug, Clone)]
pub struct PullerConfig {
    pub pd: PdConfig,
    /// Encoded spans (usually [`super::span::table_record_span`]s); subscription ids are
    /// their indices.
    pub spans: Vec<Span>,
    /// Spans with a key (a physical table id), captured from `start_ts` and removable through
    /// [`SpanRemover`]; their subscription ids follow those of `spans`.
    pub keyed_spans: Vec<(i64, Span)>,
    /// Rows with `commit_ts > start_ts` are captured.
    pub start_ts: Ts,
    pub output_quota_bytes: usize,
    pub scan_limit_per_store: usize,
    /// Use `EventFeedV2` with stream multiplexing when the store has it.
    pub multiplexing: bool,
    pub matcher: MatcherConfig,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// Seed of the backoff jitter.
    pub seed: u64,
    /// Announced in `cdcpb.Header.ticdc_version`.
    pub ticdc_version: String,
    /// Where capture counts regions, rows and its watermark.
    pub metrics: crate::metrics::CaptureMetrics,
}

impl PullerConfig {
    /// Defaults for capturing `spans` from `start_ts` through the PD members `pd_addrs`.
    pub fn new(pd_addrs: Vec<String>, spans: Vec<Span>, start_ts: Ts) -> PullerConfig {
        PullerConfig {
            pd: PdConfig::new(pd_addrs),
            spans,
            keyed_spans: Vec::new(),
            start_ts,
            output_quota_bytes: DEFAULT_OUTPUT_QUOTA_BYTES,
            scan_limit_per_store: DEFAULT_SCAN_LIMIT,
            multiplexing: true,
            matcher: MatcherConfig::default(),
            backoff_base: DEFAULT_BACKOFF_BASE,
            backoff_max: DEFAULT_BACKOFF_MAX,
            seed: 0,
            ticdc_version: TICDC_VERSION.to_string(),
            metrics: crate::metrics::CaptureMetrics::default(),
        }
    }
}

/// splitmix64: a small seeded generator for backoff jitter.
#[derive(Debug, Clone)]
struct Jitter(u64);

impl Jitter {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `base · 2^(attempt−1)` capped at `max`, scaled by a factor in [0.5, 1); zero for attempt 0.
fn backoff(base: Duration, max: Duration, attempt: u32, rng: &mut Jitter) -> Duration {
    if attempt == 0 {
        return Duration::ZERO;
    }
    let exp = base.saturating_mul(1u32 << (attempt - 1).min(16)).min(max);
    let frac = 0.5 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 / 2.0;
    exp.mul_f64(frac)
}

/// Commands from the handle.
#[derive(Debug)]
enum Command {
    AddSpan {
        span: Span,
        start_ts: Ts,
        reply: oneshot::Sender<Result<u64, CaptureError>>,
    },
    RemoveSpan {
        sub: u64,
        reply: oneshot::Sender<()>,
    },
}

/// Control of a running puller.
#[derive(Debug)]
pub struct PullerHandle {
    commands: mpsc::Sender<Command>,
    remover: SpanRemover,
    resolved: watch::Receiver<Ts>,
    cluster_id: u64,
    task: JoinHandle<Result<(), PullerError>>,
}

impl PullerHandle {
    /// Starts capturing `span` from `start_ts` (a table created by DDL); returns its
    /// subscription id. `start_ts` must not be below the watermark already emitted, or rows of
    /// the span would arrive after a `Resolved` covering them ([`CaptureError::FrontierRegression`]).
    pub async fn add_span(&self, span: Span, start_ts: Ts) -> Result<u64, PullerError> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::AddSpan {
                span,
                start_ts,
                reply,
            })
            .await
            .map_err(|_| PullerError::Stopped)?;
        Ok(rx.await.map_err(|_| PullerError::Stopped)??)
    }

    /// Stops capturing a subscription (its regions are deregistered; the watermark may rise).
    pub async fn remove_span(&self, sub: u64) -> Result<(), PullerError> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::RemoveSpan { sub, reply })
            .await
            .map_err(|_| PullerError::Stopped)?;
        rx.await.map_err(|_| PullerError::Stopped)
    }

    /// A handle that removes keyed spans without waiting.
    pub fn span_remover(&self) -> SpanRemover {
        self.remover.clone()
    }

    /// The emitted watermark, for a GC keeper or metrics.
    pub fn resolved_ts(&self) -> watch::Receiver<Ts> {
        self.resolved.clone()
    }

    /// The PD cluster id.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// Waits for the puller to stop; `Ok` after cancellation or when the receiver was dropped.
    pub async fn join(self) -> Result<(), PullerError> {
        self.task.await.unwrap_or(Err(PullerError::Stopped))
    }
}

/// Entry point.
#[derive(Debug)]
pub struct Puller;

impl Puller {
    /// Connects to PD, checks `start_ts` against the GC safe point and starts capturing.
    pub async fn start(
        cfg: PullerConfig,
        cancel: CancellationToken,
    ) -> Result<(PullerHandle, EventReceiver), PullerError> {
        let pd = PdClient::connect(cfg.pd.clone(), cancel.child_token()).await?;
        Puller::start_with_pd(pd, cfg, cancel).await
    }

    /// As [`Puller::start`] with an existing PD client.
    pub async fn start_with_pd(
        pd: PdClient,
        cfg: PullerConfig,
        cancel: CancellationToken,
    ) -> Result<(PullerHandle, EventReceiver), PullerError> {
        Puller::start_with_hook(pd, cfg, None, cancel).await
    }

    /// As [`Puller::start_with_pd`], with a hook that adds spans as rows ask for them.
    pub async fn start_with_hook(
        pd: PdClient,
        cfg: PullerConfig,
        hook: Option<Box<dyn SpanHook>>,
        cancel: CancellationToken,
    ) -> Result<(PullerHandle, EventReceiver), PullerError> {
        let safe_point = pd.get_gc_safe_point().await?;
        if cfg.start_ts < safe_point {
            return Err(PullerError::StartTsBeforeGcSafePoint {
                start_ts: cfg.start_ts,
                safe_point,
            });
        }
        let (out, rx) = output_channel(cfg.output_quota_bytes);
        let (cmd_tx, cmd_rx) = mpsc::channel(16);
        let (resolved_tx, resolved_rx) = watch::channel(cfg.start_ts);
        let (store_tx, store_rx) = mpsc::channel(STORE_OUTPUT_CHANNEL);
        let (remove_tx, remove_rx) = mpsc::unbounded_channel();
        let cluster_id = pd.cluster_id();
        let mut actor = Actor {
            stream_cfg: StoreStreamConfig {
                cluster_id,
                ticdc_version: cfg.ticdc_version.clone(),
                multiplexing: cfg.multiplexing,
                scan_limit: cfg.scan_limit_per_store,
                matcher: cfg.matcher.clone(),
                connect_timeout: cfg.pd.connect_timeout,
                tls: pd.tls().cloned(),
                metrics: cfg.metrics.clone(),
            },
            rng: Jitter(cfg.seed),
            frontier: SpanFrontier::new(cfg.start_ts),
            emitted: cfg.start_ts,
            checked: cfg.start_ts,
            pd,
            cfg,
            cancel: cancel.clone(),
            cache: RegionCache::new(),
            subs: IdMap::default(),
            next_sub: 0,
            next_request: 1,
            live: LiveSet::default(),
            stores: IdMap::default(),
            next_generation: 1,
            store_out: store_stream::OutputTx::new(store_tx),
            store_rx,
            retries: BinaryHeap::new(),
            next_seq: 0,
            out,
            resolved_tx,
            commands: cmd_rx,
            duplicates: 0,
            hook,
            hook_out: Vec::new(),
            keyed: HashMap::new(),
            removals: remove_rx,
        };
        let start_ts = actor.cfg.start_ts;
        for span in actor.cfg.spans.clone() {
            actor.add_sub(span, start_ts)?;
        }
        for (key, span) in std::mem::take(&mut actor.cfg.keyed_spans) {
            let sub = actor.add_sub(span, start_ts)?;
            actor.keyed.insert(key, (sub, start_ts));
        }
        let task = tokio::spawn(async move {
            let r = actor.run().await;
            if let Err(e) = &r {
                tracing::error!(error = %e, "puller stopped on a fatal error");
            }
            r
        });
        Ok((
            PullerHandle {
                commands: cmd_tx,
                remover: SpanRemover(remove_tx),
                resolved: resolved_rx,
                cluster_id,
                task,
            },
            rx,
        ))
    }
}

#[derive(Debug, Clone)]
struct SubInfo {
    span: Span,
    start_ts: Ts,
}

#[derive(Debug, Clone)]
struct Live {
    sub: u64,
    region: RegionId,
    span: Span,
    store_id: u64,
    /// Generation of the store actor the request was handed to.
    generation: u64,
}

/// The live requests, by request id and by subscription and region, so that finding a
/// subscription's requests costs its own size, not the number of regions captured.
#[derive(Debug, Default)]
struct LiveSet {
    by_id: IdMap<u64, Live>,
    /// (subscription, region, request id) of every entry of `by_id`.
    by_sub: BTreeSet<(u64, RegionId, u64)>,
}

impl LiveSet {
    fn insert(&mut self, request_id: u64, l: Live) {
        self.by_sub.insert((l.sub, l.region, request_id));
        if let Some(old) = self.by_id.insert(request_id, l) {
            self.by_sub.remove(&(old.sub, old.region, request_id));
        }
    }

    fn remove(&mut self, request_id: &u64) -> Option<Live> {
        let l = self.by_id.remove(request_id)?;
        self.by_sub.remove(&(l.sub, l.region, *request_id));
        Some(l)
    }

    fn len(&self) -> usize {
        self.by_id.len()
    }

    fn get(&self, request_id: u64) -> Option<&Live> {
        self.by_id.get(&request_id)
    }

    fn values(&self) -> impl Iterator<Item = &Live> {
        self.by_id.values()
    }

    fn iter(&self) -> impl Iterator<Item = (&u64, &Live)> {
        self.by_id.iter()
    }

    /// The requests of `sub` on `region`.
    fn of_sub_region(&self, sub: u64, region: RegionId) -> impl Iterator<Item = &Live> {
        self.by_sub
            .range((sub, region, 0)..=(sub, region, u64::MAX))
            .filter_map(|(_, _, id)| self.by_id.get(id))
    }

    /// The request ids of `sub`.
    fn ids_of_sub(&self, sub: u64) -> Vec<u64> {
        self.by_sub
            .range((sub, RegionId(0), 0)..=(sub, RegionId(u64::MAX), u64::MAX))
            .map(|&(_, _, id)| id)
            .collect()
    }
}

#[derive(Debug)]
enum Task {
    /// Reload the piece from PD and subscribe its regions.
    Range { sub: u64, span: Span, attempt: u32 },
    /// Re-send the same region request.
    Region(Box<RegionRequest>),
}

#[derive(Debug)]
struct Scheduled {
    at: Instant,
    seq: u64,
    task: Task,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

struct Actor {
    pd: PdClient,
    cfg: PullerConfig,
    stream_cfg: StoreStreamConfig,
    cancel: CancellationToken,
    cache: RegionCache,
    frontier: SpanFrontier,
    subs: IdMap<u64, SubInfo>,
    next_sub: u64,
    next_request: u64,
    /// Subscriptions handed to store actors.
    live: LiveSet,
    stores: IdMap<u64, StoreHandle>,
    next_generation: u64,
    /// The store actors' sender (bounded in row bytes; see [`store_stream::OutputTx`]).
    store_out: store_stream::OutputTx,
    store_rx: mpsc::Receiver<StoreOutput>,
    retries: BinaryHeap<Reverse<Scheduled>>,
    next_seq: u64,
    rng: Jitter,
    out: EventSender,
    /// The last watermark sent.
    emitted: Ts,
    resolved_tx: watch::Sender<Ts>,
    commands: mpsc::Receiver<Command>,
    /// Rows dropped as already delivered.
    duplicates: u64,
    /// The watermark at the last stall check.
    checked: Ts,
    hook: Option<Box<dyn SpanHook>>,
    /// The hook's output, reused.
    hook_out: Vec<(i64, Span)>,
    /// Keyed spans: their subscription and the highest ts at which they were asked for.
    keyed: HashMap<i64, (u64, Ts)>,
    removals: mpsc::UnboundedReceiver<(std::collections::HashSet<i64>, Ts)>,
}

/// How often the actor checks that its watermark moved; a watermark that did not is reported
/// with the piece holding it back.
const STALL_CHECK: Duration = Duration::from_secs(10);
/// How often the actor publishes capture's state bytes.
const STATE_REPORT: Duration = Duration::from_secs(1);

type Step = Result<(), PullerError>;

impl Actor {
    async fn run(&mut self) -> Step {
        enum Woke {
            Cancelled,
            Command(Option<Command>),
            Remove(Option<(std::collections::HashSet<i64>, Ts)>),
            Store(Option<StoreOutput>),
            Due,
            StallCheck,
            StateReport,
        }
        let mut handle_gone = false;
        let mut removers_gone = false;
        let mut stall_check = tokio::time::interval_at(Instant::now() + STALL_CHECK, STALL_CHECK);
        stall_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut state_report = tokio::time::interval(STATE_REPORT);
        state_report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = self.retries.peek().map(|r| r.0.at);
            let woke = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Woke::Cancelled,
                cmd = self.commands.recv(), if !handle_gone => Woke::Command(cmd),
                r = self.removals.recv(), if !removers_gone => Woke::Remove(r),
                o = self.store_rx.recv() => Woke::Store(o),
                _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => Woke::Due,
                _ = stall_check.tick() => Woke::StallCheck,
                _ = state_report.tick() => Woke::StateReport,
            };
            match woke {
                Woke::Cancelled => return Ok(()),
                Woke::Command(Some(c)) => self.on_command(c).await?,
                Woke::Command(None) => handle_gone = true,
                Woke::Remove(Some((keep, ts))) => self.retain_keyed(&keep, ts).await,
                Woke::Remove(None) => removers_gone = true,
                Woke::Store(Some(o)) => {
                    if !self.on_store_output(o).await? {
                        return Ok(());
                    }
                }
                // The actor holds a sender itself.
                Woke::Store(None) => {}
                Woke::Due => self.run_due().await?,
                Woke::StallCheck => self.check_stall(),
                Woke::StateReport => self.report_state(),
            }
        }
    }

    /// Reports a watermark that has not moved since the last check: the piece holding it back,
    /// the subscription covering that piece (region, store) or its pending retry.
    fn check_stall(&mut self) {
        let stalled = self.emitted == self.checked;
        self.checked = self.emitted;
        if !stalled {
            return;
        }
        let Some((key, ts)) = self.frontier.slowest() else {
            return;
        };
        let holder = self
            .live
            .iter()
            .find(|(_, l)| l.span.contains(key))
            .map(|(id, l)| format!("request {id}: region {} on store {}", l.region, l.store_id));
        let retrying = self
            .retries
            .iter()
            .filter(|r| match &r.0.task {
                Task::Range { span, .. } => span.contains(key),
                Task::Region(req) => req.span.contains(key),
            })
            .count();
        tracing::warn!(
            watermark = self.emitted.0,
            slowest_key = %hex::encode(key),
            slowest_ts = ts.0,
            held_by = holder.as_deref().unwrap_or("no live subscription"),
            retries_pending = retrying,
            live = self.live.len(),
            stores = self.stores.len(),
            "the resolved ts has not advanced for {} s",
            STALL_CHECK.as_secs()
        );
    }

    /// Publishes capture's state bytes: the store actors' (region feeds with what their
    /// matchers hold) and the actor's own (subscriptions, live regions, frontier pieces, the
    /// region cache, pending retries).
    fn report_state(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        const ENTRY: usize = 64;
        let span = |s: &Span| s.start.capacity() + s.end.capacity();
        let (mut bytes, mut regions) = (0usize, 0usize);
        for h in self.stores.values() {
            bytes += h.state.bytes.load(Relaxed);
            regions += h.state.regions.load(Relaxed);
        }
        bytes += self.frontier.heap_bytes();
        bytes += self.cache.heap_bytes();
        bytes += self
            .live
            .values()
            .map(|l| ENTRY + std::mem::size_of::<Live>() + span(&l.span))
            .sum::<usize>();
        bytes += self
            .subs
            .values()
            .map(|s| ENTRY + std::mem::size_of::<SubInfo>() + span(&s.span))
            .sum::<usize>();
        bytes += self.retries.len() * (ENTRY + std::mem::size_of::<Scheduled>());
        let m = &self.stream_cfg.metrics;
        m.state_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        let per_region = bytes.checked_div(regions).unwrap_or(0);
        m.state_bytes_per_region
            .set(i64::try_from(per_region).unwrap_or(i64::MAX));
    }

    fn add_sub(&mut self, span: Span, start_ts: Ts) -> Result<u64, CaptureError> {
        if start_ts < self.emitted {
            return Err(CaptureError::FrontierRegression {
                ts: start_ts,
                frontier: self.emitted,
            });
        }
        self.frontier.watch(&span, start_ts)?;
        let sub = self.next_sub;
        self.next_sub += 1;
        self.subs.insert(
            sub,
            SubInfo {
                span: span.clone(),
                start_ts,
            },
        );
        self.schedule(
            Duration::ZERO,
            Task::Range {
                sub,
                span,
                attempt: 0,
            },
        );
        Ok(sub)
    }

    async fn on_command(&mut self, cmd: Command) -> Step {
        match cmd {
            Command::AddSpan {
                span,
                start_ts,
                reply,
            } => {
                let _ = reply.send(self.add_sub(span, start_ts));
            }
            Command::RemoveSpan { sub, reply } => {
                self.remove_sub(sub).await;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn remove_sub(&mut self, sub: u64) {
        let Some(info) = self.subs.remove(&sub) else {
            return;
        };
        self.frontier.unwatch(&info.span);
        for request_id in self.live.ids_of_sub(sub) {
            let Some(l) = self.live.remove(&request_id) else {
                continue;
            };
            if let Some(h) = self.stores.get(&l.store_id) {
                let cmd = StoreCommand::Deregister {
                    request_id,
                    region_id: l.region,
                };
                // A gone store actor holds nothing to deregister.
                let _ = h.tx.send(cmd).await;
            }
        }
        self.maybe_emit().await;
    }

    /// Removes the keyed spans not in `keep`, except those a row above `ts` asked for (a table
    /// renamed out of the filter and back in: the removal comes from downstream, after the
    /// puller has passed the second rename).
    async fn retain_keyed(&mut self, keep: &std::collections::HashSet<i64>, ts: Ts) {
        let gone: Vec<(i64, u64)> = self
            .keyed
            .iter()
            .filter(|(key, (_, wanted))| *wanted <= ts && !keep.contains(key))
            .map(|(key, (sub, _))| (*key, *sub))
            .collect();
        for (key, sub) in gone {
            self.keyed.remove(&key);
            tracing::debug!(key, ts = ts.0, "capture stops watching a span");
            self.remove_sub(sub).await;
        }
    }

    /// Adds what the hook asks for after `row` (see [`SpanHook`]).
    fn run_hook(&mut self, row: &RawRow) -> Step {
        let Some(hook) = self.hook.as_mut() else {
            return Ok(());
        };
        let mut out = std::mem::take(&mut self.hook_out);
        out.clear();
        hook.on_row(row, &mut out);
        let mut result = Ok(());
        for (key, span) in out.drain(..) {
            if let Some((_, wanted)) = self.keyed.get_mut(&key) {
                *wanted = (*wanted).max(row.commit_ts);
                continue;
            }
            match self.add_sub(span, row.commit_ts) {
                Ok(sub) => {
                    tracing::debug!(key, ts = row.commit_ts.0, "capture watches a new span");
                    self.keyed.insert(key, (sub, row.commit_ts));
                }
                Err(e) => {
                    result = Err(e.into());
                    break;
                }
            }
        }
        self.hook_out = out;
        result
    }
}

#[cfg(test)]
mod tests;

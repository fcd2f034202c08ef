//! The changefeed's supervisor: the relay task moves the changefeed's events into the binlog
//! sink's bounded queue and the sink's flushed checkpoints back into the changefeed.
//!
//! After a transient error capture restarts from the durable checkpoint, with a backoff; after
//! a definite one ([`super::is_definite`]) it stops for good with one error line, and the
//! server keeps serving the binlog (the sink stays up for purges) until the app stops, or the
//! app stops now if so configured. An HA member first follows the owner's binlog
//! ([`crate::ha::follow`]) until its campaign ([`crate::ha::gate::OwnerGate`]) is won.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{ChangeEvent, Changefeed, ChangefeedConfig};
use crate::binlog_store::source::WriterMsg;
use crate::budget::ByteBudget;
use crate::ha::gate::OwnerGate;
use crate::model::Ts;
use crate::server::status::CaptureStatus;

/// Messages queued between the relay task and the writer thread.
pub const WRITER_CHANNEL: usize = 64;
/// Bytes of row images queued between the relay task and the writer thread: a transaction of
/// gigabytes arrives as pieces of up to `max_chunk_bytes` each, and a count bound alone would
/// let [`WRITER_CHANNEL`] of them pile up.
pub const WRITER_QUEUE_BYTES: usize = 32 << 20;

/// Bytes an event holds in the writer's queue (the relay takes them before queueing it, the
/// writer gives them back once it is written).
fn queue_cost(ev: &ChangeEvent) -> usize {
    let ChangeEvent::Rows(t) = ev else {
        return 0;
    };
    let value = |v: &tibinlog_protocol::value::Value| {
        use tibinlog_protocol::value::Value;
        std::mem::size_of::<Value>()
            + match v {
                Value::Bytes(b) => b.len(),
                Value::Decimal(s) => s.len(),
                _ => 0,
            }
    };
    t.rows
        .iter()
        .map(|r| {
            64 + r
                .before
                .iter()
                .chain(r.after.iter())
                .flatten()
                .map(value)
                .sum::<usize>()
        })
        .sum()
}

/// First wait before a failed changefeed is started again (doubles up to [`MAX_RETRY`]).
pub const FIRST_RETRY: Duration = Duration::from_millis(500);
/// Longest wait between two starts of a failing changefeed.
pub const MAX_RETRY: Duration = Duration::from_secs(30);

/// Why the app stopped, when it failed (the first failure wins).
#[derive(Debug, Default)]
pub struct Failure(Mutex<Option<anyhow::Error>>);

impl Failure {
    pub fn set(&self, e: anyhow::Error) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(e);
        }
    }
    pub fn take(&self) -> Option<anyhow::Error> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Starts a changefeed with a sorter cache directory of its own under `<data_dir>/sorter`.
///
/// The cache is throwaway (wiped at every start), but a previous changefeed of this process
/// may still be releasing its directory in the background; a fresh directory never waits for
/// it. Older caches are removed first (best effort).
pub async fn start_changefeed(
    cfg: &ChangefeedConfig,
    stop: &CancellationToken,
) -> anyhow::Result<Changefeed> {
    static STARTS: AtomicU64 = AtomicU64::new(0);
    let mut cfg = cfg.clone();
    let root = cfg.sorter.data_dir.clone();
    if let Ok(entries) = std::fs::read_dir(&root) {
        for e in entries.flatten() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let n = STARTS.fetch_add(1, Ordering::Relaxed);
    cfg.sorter.data_dir = root.join(format!("cache-{}-{n}", std::process::id()));
    Changefeed::start(cfg, stop.child_token())
        .await
        .context("start the changefeed")
}

/// Where the relay reports what happened to capture.
pub struct Verdicts {
    pub status: Arc<CaptureStatus>,
    /// A capture stopped for good stops the app (non-zero exit) instead of leaving the server
    /// serving the binlog.
    pub exit_on_stop: bool,
    pub failure: Arc<Failure>,
}

/// Changefeed → writer thread; flushed checkpoints → changefeed.
///
/// After a transient error capture restarts from the durable checkpoint, with a backoff; after
/// a definite one ([`crate::changefeed::is_definite`]) it stops for good with one error line,
/// and the server keeps serving the binlog (the writer stays up for purges) until the app
/// stops, or the app stops now if so configured.
#[allow(clippy::too_many_arguments)]
pub async fn relay(
    first: Option<anyhow::Result<Changefeed>>,
    owner: Option<OwnerGate>,
    mut cfg: ChangefeedConfig,
    out: mpsc::Sender<WriterMsg<ChangeEvent>>,
    queue: ByteBudget,
    mut flushed: watch::Receiver<Ts>,
    stop: CancellationToken,
    verdicts: Verdicts,
) {
    // When the changefeed in `next` was asked for: the first resolved ts it yields says how
    // long capture took to start (regions scanned, frontier past the start).
    let mut started = std::time::Instant::now();
    let mut next = match (first, owner) {
        (Some(f), _) => f,
        (None, Some(owner)) => {
            // A standby follows the owner's binlog until its campaign is won; then capture
            // resumes from this instance's own checkpoint, regenerating whatever the old owner
            // wrote after it (what the follower still had queued is dropped by the writer).
            let follow_stop = stop.child_token();
            verdicts
                .status
                .ha_member(&owner.candidate.member().instance_id);
            let follower = crate::ha::follow::follow(
                &owner.candidate,
                owner.follow.clone(),
                out.clone(),
                &verdicts.status,
                follow_stop.clone(),
            );
            let won = async {
                let fence = owner.campaign(&stop, &verdicts.status).await;
                follow_stop.cancel();
                fence
            };
            let ((), fence) = tokio::join!(follower, won);
            let Some(fence) = fence else {
                let _ = out.send(WriterMsg::Stop).await;
                return;
            };
            {
                let (stop, failure) = (stop.clone(), verdicts.failure.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        biased;
                        () = stop.cancelled() => {}
                        // A clean stop resigns, which loses the fence too: not a failure.
                        () = fence.lost() => {
                            if stop.is_cancelled() {
                                return;
                            }
                            failure.set(anyhow::anyhow!(
                                "lost the ownership of the HA group: stopped writing; start again \
                                 to rejoin as a standby"
                            ));
                            stop.cancel();
                        }
                    }
                });
            }
            cfg.start_ts = *flushed.borrow();
            started = std::time::Instant::now();
            let feed = start_changefeed(&cfg, &stop).await;
            if let Ok(f) = &feed {
                owner.history.start_from(f.schema().borrow().clone());
            }
            feed
        }
        (None, None) => {
            let _ = out.send(WriterMsg::Stop).await;
            return;
        }
    };
    let mut retry = FIRST_RETRY;
    loop {
        let error = match next {
            Ok(mut f) => {
                verdicts.status.running();
                let error = pump(
                    &mut f,
                    &out,
                    &queue,
                    &mut flushed,
                    &stop,
                    (&mut retry, started),
                )
                .await;
                f.close().await;
                let Some(error) = error else { break };
                // The writer drops the transaction it had open.
                if out.send(WriterMsg::Reset).await.is_err() {
                    break;
                }
                error
            }
            Err(e) => e,
        };
        if stop.is_cancelled() {
            break;
        }
        let text = format!("{error:#}");
        if crate::changefeed::is_definite(&error) {
            tracing::error!(
                error = %text,
                checkpoint = flushed.borrow().0,
                "capture stopped for good: retrying cannot fix this; the binlog written so far \
                 is still served"
            );
            verdicts.status.stopped(text);
            if verdicts.exit_on_stop {
                verdicts
                    .failure
                    .set(error.context("capture stopped for good"));
                stop.cancel();
            }
            stop.cancelled().await;
            break;
        }
        warn!(
            error = %text,
            checkpoint = flushed.borrow().0,
            retry_in = ?retry,
            "capture failed; restarting from the checkpoint"
        );
        verdicts.status.retrying(text);
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(MAX_RETRY);
        cfg.start_ts = *flushed.borrow();
        started = std::time::Instant::now();
        next = start_changefeed(&cfg, &stop).await;
    }
    // Ends the writer even while server sessions still hold purge senders.
    let _ = out.send(WriterMsg::Stop).await;
}

/// Moves events until a stop (`None`) or a changefeed error (`Some`).
async fn pump(
    feed: &mut Changefeed,
    out: &mpsc::Sender<WriterMsg<ChangeEvent>>,
    queue: &ByteBudget,
    flushed: &mut watch::Receiver<Ts>,
    stop: &CancellationToken,
    (retry, started): (&mut Duration, std::time::Instant),
) -> Option<anyhow::Error> {
    let mut resolved_once = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            changed = flushed.changed() => {
                if changed.is_err() {
                    // The writer is gone (it failed and cancelled `stop`).
                    return None;
                }
                feed.advance_checkpoint(*flushed.borrow_and_update());
            }
            ev = feed.next() => match ev {
                Some(Ok(ev)) => {
                    if let ChangeEvent::Resolved(ts) = &ev {
                        *retry = FIRST_RETRY;
                        if !resolved_once {
                            resolved_once = true;
                            info!(
                                resolved_ts = ts.0,
                                after_ms = started.elapsed().as_millis() as u64,
                                "capture running: the first resolved ts"
                            );
                        }
                    }
                    let cost = queue.cost(queue_cost(&ev));
                    tokio::select! {
                        _ = stop.cancelled() => return None,
                        () = queue.take(cost) => {}
                    }
                    tokio::select! {
                        _ = stop.cancelled() => return None,
                        sent = out.send(WriterMsg::Event(ev, cost)) => {
                            if sent.is_err() {
                                return None;
                            }
                        }
                    }
                }
                Some(Err(e)) => return Some(anyhow::Error::new(e)),
                None => return Some(anyhow::anyhow!("the changefeed ended")),
            },
        }
    }
}

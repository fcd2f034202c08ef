//! The send half of one `EventFeed` stream: a byte-bounded queue (TiKV's `Sink`) filled by the
//! core under its lock, and a pump task (TiKV's `Drain`) that batches queued events into
//! `ChangeDataEvent`s and hands them to gRPC through a channel of [`PUMP_MESSAGES`] messages.
//!
//! ```text
//! core (under lock) --try_send/force_send--> ConnSink queue --pump--> mpsc(16) --> tonic --> client
//!                      counted against the store's MemoryQuota    freed when the pump takes it
//! ```
//!
//! # Back-pressure (TiKV `components/cdc/src/channel.rs`)
//!
//! When the client stops reading, HTTP/2 flow control stops tonic from polling the response,
//! the channel stays full, the pump stops taking items, and the queue grows until the
//! store-wide memory quota (TiKV `sink-memory-quota`, 512 MiB) is used up. From then on, like
//! TiKV:
//! * a change event (scan or realtime rows) that does not fit is **not** queued; the core drops
//!   that subscription and the client gets one forced `Error{congested}` for it (TiKV cancels
//!   the downstream with `SendError::Congested`; clients re-send the same region);
//! * a resolved-ts message that does not fit is dropped (safe: the next tick repeats it);
//! * error events are always queued ("forced"), so every stopped subscription is told why.
//!
//! Nothing else is buffered: memory per connection is bounded by the quota plus [`PUMP_MESSAGES`]
//! messages.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tibinlog_proto::cdcpb::{self, event};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

/// A `ChangeDataEvent` carries events up to this many bytes (TiKV `CDC_RESP_MAX_BYTES`, 6 MiB).
pub const MAX_MESSAGE_BYTES: usize = 6 * 1024 * 1024;

/// Messages the pump may hand gRPC ahead of the wire. TiKV writes the messages its drain has
/// ready with gRPC's buffer hint, so gRPC packs them into shared DATA frames; tonic packs the
/// messages it finds ready in its channel the same way, so a run of small messages (one
/// INITIALIZED each, resolved ts) does not reach the client as as many tiny frames.
pub const PUMP_MESSAGES: usize = 16;

/// TiKV's default `sink-memory-quota`: 512 MiB per store.
pub const DEFAULT_SINK_MEMORY_QUOTA: usize = 512 * 1024 * 1024;

/// Store-wide byte budget of queued, not yet sent, events.
#[derive(Debug)]
pub struct MemoryQuota {
    used: AtomicUsize,
    capacity: usize,
}

impl MemoryQuota {
    /// A quota of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            capacity,
        }
    }

    /// Takes `n` bytes if they fit.
    pub fn alloc(&self, n: usize) -> bool {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let Some(next) = cur.checked_add(n).filter(|v| *v <= self.capacity) else {
                return false;
            };
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    }

    /// Takes `n` bytes even over the capacity (error events).
    pub fn alloc_force(&self, n: usize) {
        self.used.fetch_add(n, Ordering::AcqRel);
    }

    /// Gives `n` bytes back.
    pub fn free(&self, n: usize) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            });
    }

    /// Bytes in use.
    /// The quota's size.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

/// The quota would be exceeded: the item was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Congested;

/// Approximate encoded size of an event: row payloads plus a fixed overhead per row and event
/// (protobuf tags, lengths and the varint fields), close enough for quota and batching.
pub fn event_size(ev: &cdcpb::Event) -> usize {
    const EVENT_OVERHEAD: usize = 24;
    const ROW_OVERHEAD: usize = 40;
    let rows = match &ev.event {
        Some(event::Event::Entries(e)) => e
            .entries
            .iter()
            .map(|r| r.key.len() + r.value.len() + r.old_value.len() + ROW_OVERHEAD)
            .sum(),
        Some(event::Event::Error(_)) => 64,
        _ => 0,
    };
    EVENT_OVERHEAD + rows
}

/// Size of a resolved-ts message as TiKV estimates it: 5 bytes per region id, 10 for the ts.
pub fn resolved_size(r: &cdcpb::ResolvedTs) -> usize {
    r.regions.len() * 5 + 10
}

#[derive(Debug)]
enum Item {
    Event(Box<cdcpb::Event>, usize),
    Resolved(cdcpb::ResolvedTs, usize),
}

/// Why the queue stopped taking items.
#[derive(Debug, Clone)]
enum Closed {
    /// The client closed its send side: send what is queued, then end the stream (OK).
    Finished,
    /// The store stopped: end the stream with this error at once.
    Broken(tonic::Status),
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Item>,
    closed: Option<Closed>,
}

#[derive(Debug)]
struct SinkInner {
    queue: Mutex<Queue>,
    notify: Notify,
    quota: Arc<MemoryQuota>,
}

/// The producer side of one connection's queue; cloned into the shared state.
#[derive(Debug, Clone)]
pub struct ConnSink {
    inner: Arc<SinkInner>,
}

/// What the pump gets next.
#[derive(Debug)]
enum Next {
    Message(cdcpb::ChangeDataEvent),
    End,
    Broken(tonic::Status),
}

impl ConnSink {
    /// An empty queue counting against `quota`.
    pub fn new(quota: Arc<MemoryQuota>) -> Self {
        Self {
            inner: Arc::new(SinkInner {
                queue: Mutex::new(Queue::default()),
                notify: Notify::new(),
                quota,
            }),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.inner
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, item: Item, size: usize, force: bool) -> Result<(), Congested> {
        let mut q = self.queue();
        if q.closed.is_some() {
            return Ok(()); // nobody will read it: drop silently, as a closed TiKV sink does
        }
        if force {
            self.inner.quota.alloc_force(size);
        } else if !self.inner.quota.alloc(size) {
            return Err(Congested);
        }
        q.items.push_back(item);
        drop(q);
        self.inner.notify.notify_one();
        Ok(())
    }

    /// Queues a change event if the quota allows.
    pub fn try_send_event(&self, ev: cdcpb::Event) -> Result<(), Congested> {
        let size = event_size(&ev);
        self.push(Item::Event(Box::new(ev), size), size, false)
    }

    /// Queues an (error) event regardless of the quota.
    pub fn force_send_event(&self, ev: cdcpb::Event) {
        let size = event_size(&ev);
        let _ = self.push(Item::Event(Box::new(ev), size), size, true);
    }

    /// Queues a resolved-ts message if the quota allows.
    pub fn try_send_resolved(&self, r: cdcpb::ResolvedTs) -> Result<(), Congested> {
        let size = resolved_size(&r);
        self.push(Item::Resolved(r, size), size, false)
    }

    fn close(&self, how: Closed) {
        let mut q = self.queue();
        if q.closed.is_none() {
            q.closed = Some(how);
        }
        drop(q);
        self.inner.notify.notify_one();
    }

    /// No more input: the stream ends once the queue is drained.
    pub fn finish(&self) {
        self.close(Closed::Finished);
    }

    /// The store went away: the stream ends with `status` now; queued items are dropped.
    pub fn break_with(&self, status: tonic::Status) {
        let mut q = self.queue();
        let freed: usize = q.items.iter().map(item_size).sum();
        q.items.clear();
        drop(q);
        self.inner.quota.free(freed);
        self.close(Closed::Broken(status));
    }

    /// Takes the next message: one resolved ts, or consecutive events up to
    /// [`MAX_MESSAGE_BYTES`] (TiKV never mixes the two in one message).
    fn take(&self) -> Option<Next> {
        let mut q = self.queue();
        if let Some(Closed::Broken(st)) = &q.closed {
            return Some(Next::Broken(st.clone()));
        }
        let mut freed = 0;
        let mut msg = cdcpb::ChangeDataEvent::default();
        while let Some(front) = q.items.front() {
            if let Item::Resolved(..) = front {
                if !msg.events.is_empty() {
                    break;
                }
            }
            match q.items.pop_front() {
                Some(Item::Resolved(r, size)) => {
                    freed += size;
                    msg.resolved_ts = Some(r);
                    break;
                }
                Some(Item::Event(ev, size)) => {
                    freed += size;
                    msg.events.push(*ev);
                    if freed >= MAX_MESSAGE_BYTES {
                        break;
                    }
                }
                None => break,
            }
        }
        let finished = matches!(q.closed, Some(Closed::Finished)) && q.items.is_empty();
        drop(q);
        self.inner.quota.free(freed);
        if !msg.events.is_empty() || msg.resolved_ts.is_some() {
            Some(Next::Message(msg))
        } else if finished {
            Some(Next::End)
        } else {
            None
        }
    }

    async fn next(&self) -> Next {
        loop {
            if let Some(n) = self.take() {
                return n;
            }
            self.inner.notify.notified().await;
        }
    }
}

fn item_size(i: &Item) -> usize {
    match i {
        Item::Event(_, s) | Item::Resolved(_, s) => *s,
    }
}

/// Moves batches from `sink` to the gRPC response channel until the stream ends, the client
/// goes away or `cancel` fires; then cancels `cancel` so the request reader stops too.
///
/// What the client receives is always a prefix of what was queued, as over a real stream: once
/// `cancel` fires (the store stopped, or the reader gave up) nothing more is sent, not even a
/// message already taken from the queue, and every wait checks `cancel` first. A message
/// dropped with later ones still delivered would let a resolved ts pass rows the client never
/// got.
///
/// `delay_us` is the stream-slowing fault: a pause before every message, read each time.
pub async fn pump(
    sink: ConnSink,
    tx: mpsc::Sender<Result<cdcpb::ChangeDataEvent, tonic::Status>>,
    delay_us: Arc<AtomicU64>,
    cancel: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            n = sink.next() => n,
        };
        let msg = match next {
            Next::Message(m) => m,
            Next::End => break,
            Next::Broken(st) => {
                let _ = tokio::time::timeout(Duration::from_millis(200), tx.send(Err(st))).await;
                break;
            }
        };
        let d = delay_us.load(Ordering::Relaxed);
        if d > 0 {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_micros(d)) => {}
            }
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            r = tx.send(Ok(msg)) => if r.is_err() { break },
        }
    }
    if cancel.is_cancelled() {
        // Store stopped (or the reader gave up): break the stream if the client still listens;
        // a full channel means it does not read anyway.
        let _ = tx.try_send(Err(tonic::Status::unavailable("store is stopped")));
    }
    cancel.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_event(region_id: u64, bytes: usize) -> cdcpb::Event {
        cdcpb::Event {
            region_id,
            event: Some(event::Event::Entries(event::Entries {
                entries: vec![event::Row {
                    value: vec![0; bytes],
                    ..Default::default()
                }],
            })),
            ..Default::default()
        }
    }

    #[test]
    fn quota_refuses_events_but_forces_errors_and_batches_split_at_resolved_ts() {
        let quota = Arc::new(MemoryQuota::new(1000));
        let sink = ConnSink::new(quota.clone());
        sink.try_send_event(rows_event(1, 100)).expect("fits");
        sink.try_send_event(rows_event(2, 100)).expect("fits");
        assert_eq!(sink.try_send_event(rows_event(3, 900)), Err(Congested));
        sink.force_send_event(rows_event(3, 900));
        assert!(quota.used() > 1000);
        sink.try_send_resolved(cdcpb::ResolvedTs::default())
            .expect_err("quota is over");
        let Some(Next::Message(m)) = sink.take() else {
            panic!("message expected")
        };
        assert_eq!(m.events.len(), 3, "consecutive events share one message");
        assert_eq!(quota.used(), 0);
        sink.try_send_event(rows_event(1, 10)).expect("fits");
        sink.try_send_resolved(cdcpb::ResolvedTs::default())
            .expect("fits");
        let Some(Next::Message(m)) = sink.take() else {
            panic!("message expected")
        };
        assert_eq!((m.events.len(), m.resolved_ts.is_some()), (1, false));
        let Some(Next::Message(m)) = sink.take() else {
            panic!("message expected")
        };
        assert!(m.events.is_empty() && m.resolved_ts.is_some());
        assert!(sink.take().is_none());
        sink.finish();
        assert!(matches!(sink.take(), Some(Next::End)));
    }

    /// A store that stops while the client lags: the pump holds a message it cannot hand on,
    /// more wait in the queue, and the client frees a slot just after the stop. Whatever it
    /// then receives must be a prefix of the queued messages (then at most the stream's
    /// error), never a later message after a dropped one.
    #[tokio::test(flavor = "current_thread")]
    async fn a_stop_never_leaves_a_gap_in_what_the_client_receives() {
        for round in 0..300u64 {
            let quota = Arc::new(MemoryQuota::new(1 << 20));
            let sink = ConnSink::new(quota.clone());
            for region in 1..=4 {
                sink.try_send_event(rows_event(region, 10)).expect("fits");
                sink.try_send_resolved(cdcpb::ResolvedTs {
                    regions: vec![region],
                    ts: region,
                    request_id: 0,
                })
                .expect("fits");
            }
            let queued = quota.used();
            let (tx, mut rx) = mpsc::channel(1);
            tx.try_send(Ok(cdcpb::ChangeDataEvent::default()))
                .expect("an empty channel");
            let cancel = CancellationToken::new();
            let pump = tokio::spawn(pump(
                sink.clone(),
                tx,
                Arc::new(AtomicU64::new(0)),
                cancel.clone(),
            ));
            // The pump has taken the first message and waits for room in the full channel.
            while quota.used() == queued {
                tokio::task::yield_now().await;
            }
            cancel.cancel();
            let filler = rx.recv().await.expect("the filler message");
            assert!(filler.is_ok_and(|m| m.events.is_empty() && m.resolved_ts.is_none()));
            let mut got = Vec::new();
            let mut error = false;
            while let Some(m) = rx.recv().await {
                match m {
                    Ok(m) => {
                        assert!(!error, "round {round}: a message after the error");
                        got.push(m);
                    }
                    Err(_) => error = true,
                }
            }
            pump.await.expect("pump");
            // Messages alternate: rows of region r, then resolved ts r.
            for (i, m) in got.iter().enumerate() {
                let region = i as u64 / 2 + 1;
                if i % 2 == 0 {
                    assert_eq!(
                        m.events.first().map(|e| e.region_id),
                        Some(region),
                        "round {round}: message {i} skipped the rows of region {region}"
                    );
                } else {
                    assert_eq!(
                        m.resolved_ts.as_ref().map(|r| r.ts),
                        Some(region),
                        "round {round}: message {i} skipped resolved ts {region}"
                    );
                }
            }
        }
    }
}

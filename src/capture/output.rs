//! The puller's output: a channel bounded in **bytes**, not only in items.
//!
//! Each event holds permits of a semaphore sized to the quota for its payload plus a fixed
//! overhead, until the receiver takes it. When the quota is spent the puller's send waits,
//! which stops it from taking store outputs, which stops the store actors from reading their
//! gRPC streams: HTTP/2 flow control then pushes back on TiKV.

use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::budget::ByteBudget;
use crate::model::RawKvEvent;

/// Fixed cost counted per output event besides its payload (struct, allocation headers).
const EVENT_OVERHEAD_BYTES: usize = 64;

/// The receiving end of the puller's output; taking an event frees its bytes.
#[derive(Debug)]
pub struct EventReceiver {
    rx: mpsc::Receiver<(RawKvEvent, OwnedSemaphorePermit)>,
}

impl EventReceiver {
    /// The next event, or `None` once the puller stopped.
    pub async fn recv(&mut self) -> Option<RawKvEvent> {
        self.rx.recv().await.map(|(ev, _permit)| ev)
    }

    /// The next event if one is ready now (to batch what has already arrived).
    pub fn try_recv(&mut self) -> Option<RawKvEvent> {
        self.rx.try_recv().ok().map(|(ev, _permit)| ev)
    }
}

/// Bytes an event holds against the output quota.
pub fn event_cost(ev: &RawKvEvent) -> usize {
    match ev {
        RawKvEvent::Row(r) => r.payload_len() + EVENT_OVERHEAD_BYTES,
        RawKvEvent::Resolved(_) => EVENT_OVERHEAD_BYTES,
    }
}

#[derive(Debug)]
pub(crate) struct EventSender {
    tx: mpsc::Sender<(RawKvEvent, OwnedSemaphorePermit)>,
    bytes: ByteBudget,
}

pub(crate) fn output_channel(quota_bytes: usize) -> (EventSender, EventReceiver) {
    let bytes = ByteBudget::new(quota_bytes.max(EVENT_OVERHEAD_BYTES));
    // Items are bounded by bytes; the count bound only has to exceed quota / overhead.
    let items = (bytes.limit() / EVENT_OVERHEAD_BYTES).max(1);
    let (tx, rx) = mpsc::channel(items);
    (EventSender { tx, bytes }, EventReceiver { rx })
}

impl EventSender {
    /// Waits for room; `false` if the receiver is gone.
    pub(crate) async fn send(&self, ev: RawKvEvent) -> bool {
        let permit = self.bytes.hold(self.bytes.cost(event_cost(&ev))).await;
        self.tx.send((ev, permit)).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::{RawRow, RegionId, Ts};

    #[tokio::test]
    async fn output_is_bounded_in_bytes() {
        let (tx, mut rx) = output_channel(1000);
        let row = |n: usize| {
            RawKvEvent::Row(RawRow {
                op: crate::model::Op::Put,
                key: vec![b'k'; 10],
                value: vec![0; n],
                old_value: Vec::new(),
                start_ts: Ts(1),
                commit_ts: Ts(2),
                region_id: RegionId(1),
            })
        };
        assert!(tx.send(row(600)).await);
        // 674 + 674 > 1000: the second send waits until the first is taken.
        let second = tokio::time::timeout(Duration::from_millis(50), tx.send(row(600))).await;
        assert!(second.is_err(), "quota full");
        assert!(rx.recv().await.is_some());
        assert!(tx.send(row(600)).await);
        // Larger than the whole quota: takes all of it, still passes.
        assert!(rx.recv().await.is_some());
        assert!(tx.send(row(5000)).await);
        assert_eq!(rx.recv().await.map(|e| event_cost(&e)), Some(5074));
    }
}

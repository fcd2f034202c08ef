//! A channel bounded in **bytes** (a memory quota), async on the sending side and blocking or
//! async on the receiving side.
//!
//! Each message carries a byte cost. `send` first takes that many permits from a semaphore
//! sized to the quota, waiting while the quota is spent; the permits travel with the message
//! as a [`Charge`] and come back only when the receiver drops it, i.e. after the message has
//! been *processed*, not merely received. So the quota bounds everything accepted and not yet
//! done with, and a full quota stops the sender, which stops the gRPC reader upstream, which
//! lets HTTP/2 flow control push back on TiKV.
//!
//! A message costing more than the whole quota is charged the whole quota: it waits until
//! everything else has drained and then goes alone, so one huge batch can neither deadlock nor
//! be split.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore, TryAcquireError};

use super::metrics::SorterMetrics;

/// The largest quota one semaphore acquisition can take (`acquire_many` counts in `u32`).
pub const MAX_QUOTA_BYTES: usize = u32::MAX as usize;

/// The sending half. Cheap to clone.
#[derive(Debug)]
pub struct QuotaSender<T> {
    tx: mpsc::UnboundedSender<(T, Charge)>,
    sem: Arc<Semaphore>,
    quota: u32,
    metrics: Arc<SorterMetrics>,
}

impl<T> Clone for QuotaSender<T> {
    fn clone(&self) -> Self {
        QuotaSender {
            tx: self.tx.clone(),
            sem: self.sem.clone(),
            quota: self.quota,
            metrics: self.metrics.clone(),
        }
    }
}

/// The receiving half. Dropping it closes the channel and wakes waiting senders with an error.
#[derive(Debug)]
pub struct QuotaReceiver<T> {
    rx: mpsc::UnboundedReceiver<(T, Charge)>,
    sem: Arc<Semaphore>,
}

/// The quota held by one message; returned to the sender side when dropped.
#[derive(Debug)]
pub struct Charge {
    _permit: OwnedSemaphorePermit,
    bytes: u64,
    metrics: Arc<SorterMetrics>,
}

impl Charge {
    /// Bytes of quota this message holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.metrics.in_flight_bytes.fetch_sub(self.bytes, Relaxed);
    }
}

/// Why a send failed; the message comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// The quota is spent right now (only from `try_send`).
    Full(T),
    /// The receiver is gone.
    Closed(T),
}

/// A channel whose messages may together hold at most `quota_bytes` (clamped to
/// 1..=[`MAX_QUOTA_BYTES`]). The in-use total is kept in `metrics.in_flight_bytes`.
pub fn quota_channel<T>(
    quota_bytes: usize,
    metrics: Arc<SorterMetrics>,
) -> (QuotaSender<T>, QuotaReceiver<T>) {
    let quota = quota_bytes.clamp(1, MAX_QUOTA_BYTES) as u32;
    let sem = Arc::new(Semaphore::new(quota as usize));
    let (tx, rx) = mpsc::unbounded_channel();
    (
        QuotaSender {
            tx,
            sem: sem.clone(),
            quota,
            metrics,
        },
        QuotaReceiver { rx, sem },
    )
}

impl<T> QuotaSender<T> {
    fn cost(&self, bytes: usize) -> u32 {
        bytes.min(self.quota as usize) as u32
    }

    fn enqueue(&self, item: T, permit: OwnedSemaphorePermit) -> Result<(), TrySendError<T>> {
        let bytes = permit.num_permits() as u64;
        self.metrics.in_flight_bytes.fetch_add(bytes, Relaxed);
        let charge = Charge {
            _permit: permit,
            bytes,
            metrics: self.metrics.clone(),
        };
        self.tx
            .send((item, charge))
            .map_err(|e| TrySendError::Closed(e.0 .0))
    }

    /// Sends `item` costing `bytes`, waiting while the quota is spent. Cancel-safe: dropping
    /// the future before it completes sends nothing and holds no quota.
    pub async fn send(&self, item: T, bytes: usize) -> Result<(), TrySendError<T>> {
        let cost = self.cost(bytes);
        match self.sem.clone().acquire_many_owned(cost).await {
            Ok(permit) => self.enqueue(item, permit),
            Err(_closed) => Err(TrySendError::Closed(item)),
        }
    }

    /// Sends `item` only if its cost fits in the quota now.
    pub fn try_send(&self, item: T, bytes: usize) -> Result<(), TrySendError<T>> {
        let cost = self.cost(bytes);
        match self.sem.clone().try_acquire_many_owned(cost) {
            Ok(permit) => self.enqueue(item, permit),
            Err(TryAcquireError::NoPermits) => Err(TrySendError::Full(item)),
            Err(TryAcquireError::Closed) => Err(TrySendError::Closed(item)),
        }
    }

    /// Bytes of quota free right now.
    pub fn available_bytes(&self) -> usize {
        self.sem.available_permits()
    }

    /// The quota in bytes (after clamping).
    pub fn quota_bytes(&self) -> usize {
        self.quota as usize
    }
}

impl<T> QuotaReceiver<T> {
    /// Blocks the current (non-async) thread until a message arrives; `None` once every sender
    /// is gone and the queue is empty.
    pub fn blocking_recv(&mut self) -> Option<(T, Charge)> {
        self.rx.blocking_recv()
    }

    /// Waits for the next message.
    pub async fn recv(&mut self) -> Option<(T, Charge)> {
        self.rx.recv().await
    }
}

impl<T> Drop for QuotaReceiver<T> {
    fn drop(&mut self) {
        self.sem.close();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn oversized_message_takes_whole_quota() {
        let (tx, mut rx) = quota_channel::<u8>(10, Arc::default());
        tx.send(1, 1000).await.unwrap();
        assert_eq!(tx.available_bytes(), 0);
        assert!(matches!(tx.try_send(2, 1), Err(TrySendError::Full(2))));
        let (v, charge) = rx.recv().await.unwrap();
        assert_eq!((v, charge.bytes()), (1, 10));
        drop(charge);
        assert_eq!(tx.available_bytes(), 10);
    }

    #[tokio::test]
    async fn dropped_receiver_fails_senders() {
        let (tx, rx) = quota_channel::<u8>(10, Arc::default());
        drop(rx);
        assert!(matches!(tx.send(1, 1).await, Err(TrySendError::Closed(1))));
    }
}

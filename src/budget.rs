//! Byte budgets for the hand-offs between stages: a queue is bounded in the bytes its items
//! hold, not only in their count, so that pieces of a huge transaction cannot pile up in front
//! of a slow stage.
//!
//! A budget is a semaphore of byte permits. The sender takes an item's cost before handing it
//! on and the receiver gives it back once done with it, either by holding an RAII permit with
//! the item or by [`ByteBudget::take`] / [`ByteBudget::give`] when the item crosses a thread.
//! An item costing more than the whole budget takes all of it: it still passes, alone.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes that items in flight between two stages may hold.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    permits: Arc<Semaphore>,
    limit: u32,
}

impl ByteBudget {
    /// A budget of `limit` bytes (at least 1, at most `u32::MAX`).
    pub fn new(limit: usize) -> ByteBudget {
        let limit = u32::try_from(limit.max(1)).unwrap_or(u32::MAX);
        ByteBudget {
            permits: Arc::new(Semaphore::new(limit as usize)),
            limit,
        }
    }

    /// The whole budget.
    pub fn limit(&self) -> usize {
        self.limit as usize
    }

    /// Bytes free now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// What an item of `bytes` costs: at most the whole budget.
    pub fn cost(&self, bytes: usize) -> u32 {
        u32::try_from(bytes).unwrap_or(u32::MAX).min(self.limit)
    }

    /// Waits for `cost` bytes, held by the returned permit until it is dropped. Cancel-safe:
    /// a dropped wait holds nothing.
    pub async fn hold(&self, cost: u32) -> OwnedSemaphorePermit {
        self.permits
            .clone()
            .acquire_many_owned(cost.min(self.limit))
            .await
            .expect("a budget's semaphore is never closed")
    }

    /// Waits for `cost` bytes, taken until [`ByteBudget::give`] returns them. Cancel-safe.
    pub async fn take(&self, cost: u32) {
        if cost > 0 {
            self.hold(cost).await.forget();
        }
    }

    /// Returns `cost` bytes taken by [`ByteBudget::take`].
    pub fn give(&self, cost: u32) {
        if cost > 0 {
            self.permits.add_permits(cost.min(self.limit) as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn takes_wait_for_bytes_given_back() {
        let b = ByteBudget::new(1000);
        b.take(b.cost(600)).await;
        assert_eq!(b.available(), 400);
        // 600 + 600 > 1000: the second take waits until the first is given back.
        let second = tokio::time::timeout(Duration::from_millis(50), b.take(600)).await;
        assert!(second.is_err(), "budget spent");
        assert_eq!(b.available(), 400, "a dropped wait holds nothing");
        b.give(600);
        b.take(600).await;
        b.give(600);
        // Larger than the whole budget: takes all of it, still passes.
        assert_eq!(b.cost(5000), 1000);
        let all = b.hold(b.cost(5000)).await;
        assert_eq!(b.available(), 0);
        drop(all);
        assert_eq!(b.available(), 1000);
    }

    #[test]
    fn limits_are_clamped() {
        assert_eq!(ByteBudget::new(0).limit(), 1);
        assert_eq!(ByteBudget::new(usize::MAX).cost(usize::MAX), u32::MAX);
    }
}

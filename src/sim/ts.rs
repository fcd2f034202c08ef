//! TSO timestamps and the PD timestamp allocator.
//!
//! A timestamp is `physical_ms << 18 | logical`, as PD composes it. The allocator
//! hands out strictly increasing values in batches, the way PD answers a `TsoRequest` with
//! `count` timestamps and reports the largest one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bits of the logical part of a TSO timestamp.
pub const LOGICAL_BITS: u32 = 18;
/// Logical counter limit: PD moves to the next millisecond before reaching it.
pub const MAX_LOGICAL: u64 = 1 << LOGICAL_BITS;

/// A TSO timestamp (start_ts, commit_ts, resolved ts, safe points).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ts(pub u64);

impl Ts {
    /// The zero timestamp ("none").
    pub const ZERO: Ts = Ts(0);
    /// The largest timestamp, used for "read the latest" snapshots.
    pub const MAX: Ts = Ts(u64::MAX);

    /// Composes `physical_ms << 18 | logical`; logical is masked to 18 bits.
    pub fn compose(physical_ms: u64, logical: u64) -> Ts {
        Ts((physical_ms << LOGICAL_BITS) | (logical & (MAX_LOGICAL - 1)))
    }
    /// Milliseconds since the Unix epoch.
    pub fn physical_ms(self) -> u64 {
        self.0 >> LOGICAL_BITS
    }
    /// The logical counter within the millisecond.
    pub fn logical(self) -> u64 {
        self.0 & (MAX_LOGICAL - 1)
    }
    /// The raw u64 as it travels on the wire.
    pub fn into_inner(self) -> u64 {
        self.0
    }
    /// `self + 1`, saturating.
    pub fn next(self) -> Ts {
        Ts(self.0.saturating_add(1))
    }
    /// `self - 1`, saturating at zero.
    pub fn prev(self) -> Ts {
        Ts(self.0.saturating_sub(1))
    }
    /// True for the zero timestamp.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl From<u64> for Ts {
    fn from(v: u64) -> Self {
        Ts(v)
    }
}

/// A source of wall-clock milliseconds. Injected so that tests control time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to; clones share the same time.
#[derive(Debug, Default, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(now_ms)))
    }
    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    /// Sets the clock (may move backwards, as a skewed wall clock can).
    pub fn set(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A TSO request for zero timestamps, or for more than one physical tick holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid tso count {count}")]
pub struct InvalidTsoCount {
    /// Requested count.
    pub count: u64,
}

/// PD's timestamp oracle: strictly increasing timestamps, even if the clock stalls or goes back.
///
/// Invariant: every returned timestamp is greater than every timestamp returned before.
#[derive(Debug, Default, Clone)]
pub struct TsoAllocator {
    physical: u64,
    logical: u64,
}

impl TsoAllocator {
    /// A fresh allocator; the first timestamp follows the clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Allocates `count` consecutive timestamps and returns the **largest** one, as
    /// `TsoResponse.timestamp` does; the batch is `(last - count + 1) ..= last`.
    pub fn alloc(&mut self, now_ms: u64, count: u32) -> Result<Ts, InvalidTsoCount> {
        let count = u64::from(count);
        if count == 0 || count >= MAX_LOGICAL {
            return Err(InvalidTsoCount { count });
        }
        if now_ms > self.physical {
            self.physical = now_ms;
            self.logical = 0;
        }
        if self.logical + count >= MAX_LOGICAL {
            // PD would wait for the next update window; we step the physical part instead.
            self.physical += 1;
            self.logical = 0;
        }
        self.logical += count;
        Ok(Ts::compose(self.physical, self.logical))
    }

    /// Allocates one timestamp.
    pub fn alloc_one(&mut self, now_ms: u64) -> Ts {
        // count = 1 is always valid.
        self.alloc(now_ms, 1)
            .unwrap_or(Ts::compose(self.physical, self.logical))
    }

    /// The largest timestamp handed out so far (zero before the first).
    pub fn last(&self) -> Ts {
        Ts::compose(self.physical, self.logical)
    }
}

/// A small seeded PRNG (SplitMix64): every random choice of the simulator comes from one of these.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator for `seed`; the same seed replays the same choices.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// True with probability `p` (clamped to [0, 1]).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compose_matches_spec_example() {
        let ts = Ts::compose(1_568_700_549_751, 108);
        assert_eq!(ts.0, 411_225_436_913_926_252);
        assert_eq!(ts.physical_ms(), 1_568_700_549_751);
        assert_eq!(ts.logical(), 108);
    }

    #[test]
    fn strictly_increasing_with_stalled_and_backward_clock() {
        let mut tso = TsoAllocator::new();
        let a = tso.alloc_one(1000);
        let b = tso.alloc_one(1000);
        let c = tso.alloc_one(900); // clock went back
        let d = tso.alloc(1001, 10).expect("batch");
        assert!(a < b && b < c && c < d);
        assert_eq!(d.physical_ms(), 1001);
        assert_eq!(d.logical(), 10, "batch reports its largest ts");
        let e = tso.alloc_one(1001);
        assert_eq!(e, d.next());
    }

    #[test]
    fn logical_overflow_steps_physical() {
        let mut tso = TsoAllocator::new();
        let a = tso.alloc(5, (MAX_LOGICAL - 2) as u32).expect("batch");
        let b = tso.alloc(5, 5).expect("batch");
        assert!(b > a);
        assert_eq!(b.physical_ms(), 6);
        assert!(tso.alloc(5, 0).is_err());
    }

    #[test]
    fn rng_is_deterministic() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        for _ in 0..10 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }
}

//! Plain data that crosses stages: timestamps, ids, spans and the raw rows capture hands on.
//!
//! Nothing here does I/O or knows about gRPC; every type is cheap to build in a test.
//!
//! * [`Ts`]: a TSO timestamp (`physical_ms << 18 | logical`, as PD composes it).
//! * [`RegionId`], [`TableId`]: ids that travel between modules.
//! * [`Span`]: a key range in the **encoded** (memcomparable, PD/region) domain.
//! * [`RawRow`]: one committed row change as TiKV described it (raw key, raw row bytes).
//! * [`ResolvedTs`], [`RawKvEvent`]: what capture hands to the sorter.

use std::cmp::Ordering;
use std::fmt;

/// Bits of the logical part of a TSO timestamp.
pub const TS_LOGICAL_BITS: u32 = 18;
/// Logical counter limit within one millisecond: `2^18`.
pub const TS_MAX_LOGICAL: u64 = 1 << TS_LOGICAL_BITS;

/// A TSO timestamp: start_ts, commit_ts, resolved ts, checkpoint ts.
///
/// The API matches the simulator's timestamp type so the two can be unified later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ts(pub u64);

impl Ts {
    /// The zero timestamp ("none").
    pub const ZERO: Ts = Ts(0);
    /// The largest timestamp.
    pub const MAX: Ts = Ts(u64::MAX);

    /// Composes `physical_ms << 18 | logical`; `logical` is masked to 18 bits.
    pub fn compose(physical_ms: u64, logical: u64) -> Ts {
        Ts((physical_ms << TS_LOGICAL_BITS) | (logical & (TS_MAX_LOGICAL - 1)))
    }
    /// Milliseconds since the Unix epoch (UTC).
    pub fn physical_ms(self) -> u64 {
        self.0 >> TS_LOGICAL_BITS
    }
    /// The logical counter within the millisecond.
    pub fn logical(self) -> u64 {
        self.0 & (TS_MAX_LOGICAL - 1)
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

impl fmt::Display for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A TiKV region id (PD's `metapb.Region.id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RegionId(pub u64);

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A TiDB physical table id (a partition id for partitioned tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TableId(pub i64);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A key range `[start, end)` in the **encoded** domain (`EncodeBytes(raw)`, the form PD region
/// boundaries and `cdcpb` request keys use).
///
/// An empty `start` is −∞ and an empty `end` is +∞, as in TiCDC's `StartCompare`/`EndCompare`.
/// Never put raw TiDB keys in a `Span`: memcomparable encoding keeps order but not prefixes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// Inclusive encoded start key; empty = −∞.
    pub start: Vec<u8>,
    /// Exclusive encoded end key; empty = +∞.
    pub end: Vec<u8>,
}

impl Span {
    /// `[start, end)` from encoded keys.
    pub fn new(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> Span {
        Span {
            start: start.into(),
            end: end.into(),
        }
    }
    /// The whole key space.
    pub fn full() -> Span {
        Span::default()
    }
    /// True if the span holds no key (`start >= end` with a bounded end).
    pub fn is_empty(&self) -> bool {
        !self.end.is_empty() && self.start >= self.end
    }
    /// True if the encoded key `k` lies in `[start, end)`.
    pub fn contains(&self, k: &[u8]) -> bool {
        k >= self.start.as_slice() && (self.end.is_empty() || k < self.end.as_slice())
    }
}

/// Compares two **end** keys where empty means +∞ (TiCDC `EndCompare`). A non-empty `lhs` that is
/// a start key can be passed too: then an empty `rhs` still means +∞.
pub fn end_cmp(lhs: &[u8], rhs: &[u8]) -> Ordering {
    match (lhs.is_empty(), rhs.is_empty()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => lhs.cmp(rhs),
    }
}

/// The kind of a row change (`cdcpb.Event.Row.OpType`, without UNKNOWN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Insert or update: `value` is the new row image.
    Put,
    /// Delete: `value` is empty, the deleted image is `old_value`.
    Delete,
}

/// One committed row change: a matched COMMIT (value and old value taken from its PREWRITE) or a
/// COMMITTED row (scan output or 1PC).
///
/// `key` is the raw TiDB key (`t{id}_r{handle}`, never memcomparable-encoded). `old_value` is
/// empty when there was no previous version or it was a delete (TiKV's old-value rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRow {
    /// Put or Delete.
    pub op: Op,
    /// Raw TiDB key.
    pub key: Vec<u8>,
    /// Raw TiDB row value; empty for a delete.
    pub value: Vec<u8>,
    /// Previous committed value; empty if none.
    pub old_value: Vec<u8>,
    /// The transaction identity.
    pub start_ts: Ts,
    /// Not unique across transactions (async commit, 1PC): order by `(commit_ts, start_ts)`.
    pub commit_ts: Ts,
    /// The region the row came from (diagnostics only).
    pub region_id: RegionId,
}

impl RawRow {
    /// Bytes of payload held by this row (key + value + old value), for memory quotas.
    pub fn payload_len(&self) -> usize {
        self.key.len() + self.value.len() + self.old_value.len()
    }
}

/// A watermark: every row with `commit_ts <= ts` of the watched spans has been handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ResolvedTs(pub Ts);

/// What capture hands downstream, in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawKvEvent {
    /// A committed row change.
    Row(RawRow),
    /// The frontier over every watched span advanced to this ts.
    Resolved(ResolvedTs),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_parts_match_spec_example() {
        let ts = Ts::compose(1_568_700_549_751, 108);
        assert_eq!(ts.0, 411_225_436_913_926_252);
        assert_eq!(ts.physical_ms(), 1_568_700_549_751);
        assert_eq!(ts.logical(), 108);
        assert_eq!(ts.next().prev(), ts);
        assert_eq!(Ts::ZERO.prev(), Ts::ZERO);
        assert_eq!(Ts::MAX.next(), Ts::MAX);
        assert!(Ts::ZERO.is_zero());
        assert_eq!(Ts::from(7).into_inner(), 7);
    }

    #[test]
    fn span_bounds_follow_empty_key_convention() {
        let full = Span::full();
        assert!(full.contains(b""));
        assert!(full.contains(b"\xff\xff\xff\xff\xff\xff"));
        assert!(!full.is_empty());
        let s = Span::new(b"b".to_vec(), b"d".to_vec());
        assert!(!s.contains(b"a"));
        assert!(s.contains(b"b"));
        assert!(s.contains(b"c\xff"));
        assert!(!s.contains(b"d"));
        assert!(Span::new(b"d".to_vec(), b"d".to_vec()).is_empty());
        assert!(!Span::new(b"d".to_vec(), Vec::new()).is_empty());
        assert_eq!(end_cmp(b"", b""), Ordering::Equal);
        assert_eq!(end_cmp(b"", b"a"), Ordering::Greater);
        assert_eq!(end_cmp(b"z", b""), Ordering::Less);
    }
}

//! The resolved-ts frontier over the watched spans (what TiCDC's `cdc/kv/regionlock` tracks).
//!
//! Each region reports a resolved ts for the sub-span it covers. Regions split and merge, so the
//! frontier is kept per **key range**, not per region id: a piece of the key space remembers the
//! highest resolved ts any region covering it reported, whichever region that was. The
//! frontier (the watermark that releases transactions to the binlog) is the minimum over every
//! watched piece.
//!
//! # Structure and cost
//!
//! * `pieces`: an ordered map from a piece's encoded start key to its ts (`None` = not
//!   watched). A piece ends where the next begins; an entry at the empty key (−∞) always exists,
//!   so every key has a piece.
//! * `counts`: an ordered multiset `ts → number of watched pieces`, whose first key is the
//!   minimum.
//!
//! With `n` pieces and `k` pieces inside the span touched, [`SpanFrontier::advance`],
//! [`SpanFrontier::watch`] and [`SpanFrontier::unwatch`] cost `O((k + 1) log n)`; a region
//! reporting over its own span touches `k = 1` piece. [`SpanFrontier::frontier`] is
//! `O(log n)` and [`SpanFrontier::min_in`] `O((k + 1) + log n)`. Memory is `O(n)`; interior
//! boundaries of an advanced span whose neighbours reach the same ts are removed, so after a
//! merge the stale boundary disappears once the merged region has moved past both sides.
//!
//! # Invariants
//!
//! * A piece's ts never decreases while it is watched (`advance` takes the maximum).
//! * [`SpanFrontier::frontier`] never decreases: a span can only be watched at a ts at or above
//!   the current frontier, and removing a span can only raise the minimum.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::error::{CaptureError, Result};
use crate::model::{Span, Ts};

/// The minimum resolved ts over a set of watched encoded spans.
#[derive(Debug, Clone)]
pub struct SpanFrontier {
    /// Piece start key → ts of the piece, `None` if the piece is not watched.
    pieces: BTreeMap<Vec<u8>, Option<Ts>>,
    /// ts → number of watched pieces at that ts.
    counts: BTreeMap<Ts, usize>,
    /// The highest frontier reported so far; the answer while nothing is watched.
    floor: Ts,
}

fn range_of(span: &Span) -> (Bound<&[u8]>, Bound<&[u8]>) {
    let end = if span.end.is_empty() {
        Bound::Unbounded
    } else {
        Bound::Excluded(span.end.as_slice())
    };
    (Bound::Included(span.start.as_slice()), end)
}

fn inc(counts: &mut BTreeMap<Ts, usize>, ts: Ts) {
    *counts.entry(ts).or_default() += 1;
}

fn dec(counts: &mut BTreeMap<Ts, usize>, ts: Ts) {
    if let Some(c) = counts.get_mut(&ts) {
        *c -= 1;
        if *c == 0 {
            counts.remove(&ts);
        }
    }
}

/// Sets a piece's ts to `new`, keeping `counts` the multiset of pieces' ts; true if it changed.
fn set_piece(counts: &mut BTreeMap<Ts, usize>, piece: &mut Option<Ts>, new: Option<Ts>) -> bool {
    if *piece == new {
        return false;
    }
    if let Some(o) = *piece {
        dec(counts, o);
    }
    if let Some(n) = new {
        inc(counts, n);
    }
    *piece = new;
    true
}

impl SpanFrontier {
    /// Estimated heap bytes: each piece's key and map entry, each count entry.
    pub fn heap_bytes(&self) -> usize {
        const ENTRY: usize = 64;
        self.pieces
            .keys()
            .map(|k| k.capacity() + ENTRY)
            .sum::<usize>()
            + self.counts.len() * ENTRY
    }

    /// A frontier watching nothing yet, reporting `checkpoint` until spans are watched.
    pub fn new(checkpoint: Ts) -> SpanFrontier {
        let mut pieces = BTreeMap::new();
        pieces.insert(Vec::new(), None);
        SpanFrontier {
            pieces,
            counts: BTreeMap::new(),
            floor: checkpoint,
        }
    }

    /// A frontier watching `spans`, every key of them starting at `checkpoint`.
    pub fn with_spans<'a>(
        spans: impl IntoIterator<Item = &'a Span>,
        checkpoint: Ts,
    ) -> SpanFrontier {
        let mut f = SpanFrontier::new(checkpoint);
        for s in spans {
            // Cannot fail: ts == floor == frontier.
            let _ = f.watch(s, checkpoint);
        }
        f
    }

    /// The watermark: every watched key has resolved at least this far.
    pub fn frontier(&self) -> Ts {
        match self.counts.first_key_value() {
            Some((min, _)) => {
                debug_assert!(*min >= self.floor, "frontier regressed");
                *min
            }
            None => self.floor,
        }
    }

    /// Number of pieces the key space is cut into (watched or not).
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// True if no key is watched.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Records that every watched key of `span` resolved to `ts` (a region's resolved ts over
    /// its sub-span). Keys already further along keep their ts; unwatched keys are ignored.
    /// Returns the frontier afterwards.
    pub fn advance(&mut self, span: &Span, ts: Ts) -> Ts {
        self.update(span, |old| old.map(|o| o.max(ts)));
        self.frontier()
    }

    /// Starts watching `span`; keys not yet watched start at `ts`, keys already watched keep
    /// theirs. Fails if `ts` is below the current frontier (the frontier would move back).
    pub fn watch(&mut self, span: &Span, ts: Ts) -> Result<()> {
        let frontier = self.frontier();
        if ts < frontier {
            return Err(CaptureError::FrontierRegression { ts, frontier });
        }
        self.update(span, |old| Some(old.map_or(ts, |o| o.max(ts))));
        Ok(())
    }

    /// Stops watching `span` (a table was dropped from the filter). The frontier can only rise.
    pub fn unwatch(&mut self, span: &Span) {
        self.update(span, |_| None);
    }

    /// The watched piece furthest behind: its first key and its ts (the one holding the
    /// watermark back), or `None` if nothing is watched.
    pub fn slowest(&self) -> Option<(&[u8], Ts)> {
        self.pieces
            .iter()
            .filter_map(|(k, v)| v.map(|t| (k.as_slice(), t)))
            .min_by_key(|(_, t)| *t)
    }

    /// The minimum ts over the watched keys of `span`, or `None` if none is watched: the
    /// `checkpoint_ts` for a new request of `span` after a region failure.
    pub fn min_in(&self, span: &Span) -> Option<Ts> {
        if span.is_empty() {
            return None;
        }
        // The piece containing span.start, then every piece starting inside the span.
        let first = self
            .pieces
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(span.start.as_slice())))
            .next_back()
            .and_then(|(_, v)| *v);
        let inner = self
            .pieces
            .range::<[u8], _>(range_of(span))
            .filter_map(|(_, v)| *v)
            .min();
        match (first, inner) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Makes `key` a piece boundary (copying the ts of the piece it falls in).
    fn ensure_boundary(&mut self, key: &[u8]) {
        if key.is_empty() || self.pieces.contains_key(key) {
            return;
        }
        let covering = self
            .pieces
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
            .next_back()
            .and_then(|(_, v)| *v);
        if let Some(ts) = covering {
            inc(&mut self.counts, ts);
        }
        self.pieces.insert(key.to_vec(), covering);
    }

    /// The common case of a region reporting over its own span: `span` is exactly one piece
    /// (its start is a boundary and the next boundary is its end). Applies `f` to that piece with
    /// one descent of the map and returns true; returns false (changing nothing) otherwise.
    fn update_one_piece(&mut self, span: &Span, f: &impl Fn(Option<Ts>) -> Option<Ts>) -> bool {
        let mut it = self
            .pieces
            .range_mut::<[u8], _>((Bound::Included(span.start.as_slice()), Bound::Unbounded));
        let Some((key, v)) = it.next() else {
            return false;
        };
        if key.as_slice() != span.start.as_slice() {
            return false;
        }
        let ends_there = match it.next() {
            Some((next, _)) => next.as_slice() == span.end.as_slice(),
            None => span.end.is_empty(),
        };
        if !ends_there {
            return false;
        }
        if set_piece(&mut self.counts, v, f(*v)) {
            if let Some((min, _)) = self.counts.first_key_value() {
                self.floor = self.floor.max(*min);
            }
        }
        true
    }

    /// Applies `f` to every piece of `span`, then drops interior boundaries that separate equal
    /// pieces. Keeps `floor` at the highest frontier seen.
    fn update(&mut self, span: &Span, f: impl Fn(Option<Ts>) -> Option<Ts>) {
        if span.is_empty() {
            return;
        }
        if self.update_one_piece(span, &f) {
            return;
        }
        self.ensure_boundary(&span.start);
        self.ensure_boundary(&span.end);
        let counts = &mut self.counts;
        let mut prev: Option<Option<Ts>> = None;
        let mut redundant: Vec<Vec<u8>> = Vec::new();
        for (key, v) in self.pieces.range_mut::<[u8], _>(range_of(span)) {
            let new = f(*v);
            set_piece(counts, v, new);
            if prev == Some(new) {
                redundant.push(key.clone());
            }
            prev = Some(new);
        }
        for key in redundant {
            if let Some(Some(ts)) = self.pieces.remove(&key) {
                dec(&mut self.counts, ts);
            }
        }
        if let Some((min, _)) = self.counts.first_key_value() {
            self.floor = self.floor.max(*min);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(a: &str, b: &str) -> Span {
        Span::new(a.as_bytes().to_vec(), b.as_bytes().to_vec())
    }

    /// One step of a frontier script and the frontier expected after it.
    #[derive(Debug)]
    enum Step {
        Advance(&'static str, &'static str, u64, u64),
        Watch(&'static str, &'static str, u64, u64),
        Unwatch(&'static str, &'static str, u64),
        /// min_in(span) expected.
        MinIn(&'static str, &'static str, Option<u64>),
    }
    use Step::*;

    fn run(name: &str, initial: &[Span], checkpoint: u64, script: Vec<Step>) {
        let mut f = SpanFrontier::with_spans(initial, Ts(checkpoint));
        assert_eq!(f.frontier(), Ts(checkpoint), "{name} initial");
        for (i, step) in script.into_iter().enumerate() {
            let ctx = format!("{name} step {i}: {step:?}");
            match step {
                Advance(a, b, ts, want) => {
                    assert_eq!(f.advance(&s(a, b), Ts(ts)), Ts(want), "{ctx}")
                }
                Watch(a, b, ts, want) => {
                    f.watch(&s(a, b), Ts(ts)).expect(&ctx);
                    assert_eq!(f.frontier(), Ts(want), "{ctx}");
                }
                Unwatch(a, b, want) => {
                    f.unwatch(&s(a, b));
                    assert_eq!(f.frontier(), Ts(want), "{ctx}");
                }
                MinIn(a, b, want) => assert_eq!(f.min_in(&s(a, b)), want.map(Ts), "{ctx}"),
            }
        }
    }

    #[test]
    fn scripts() {
        run(
            "one region advances the whole span",
            &[s("b", "f")],
            10,
            vec![
                Advance("b", "f", 20, 20),
                Advance("b", "f", 15, 20),
                Advance("a", "z", 25, 25),
            ],
        );
        run(
            "split: one region's span becomes two with independent ts",
            &[s("b", "f")],
            10,
            vec![
                Advance("b", "f", 20, 20),
                // Region [b,f) split at d; the right half's new region starts at its checkpoint.
                MinIn("d", "f", Some(20)),
                Advance("b", "d", 30, 20),
                Advance("d", "f", 25, 25),
                Advance("d", "f", 40, 30),
                MinIn("b", "f", Some(30)),
                MinIn("c", "e", Some(30)),
                MinIn("e", "f", Some(40)),
            ],
        );
        run(
            "merge: the merged region covers both halves",
            &[s("b", "f")],
            10,
            vec![
                Advance("b", "d", 30, 10),
                Advance("d", "f", 20, 20),
                // Merged region [b,f) requested at min_in = 20; its resolved ts lifts the lower half.
                MinIn("b", "f", Some(20)),
                Advance("b", "f", 25, 25),
                Advance("b", "f", 35, 35),
            ],
        );
        run(
            "never regresses: a lagging region's report cannot lower a piece",
            &[s("b", "f")],
            10,
            vec![
                Advance("b", "f", 50, 50),
                Advance("c", "d", 20, 50),
                MinIn("c", "d", Some(50)),
            ],
        );
        run(
            "holes between watched spans are ignored",
            &[s("b", "c"), s("x", "")],
            10,
            vec![
                Advance("", "", 12, 12),
                Advance("b", "c", 30, 12),
                Advance("m", "p", 5, 12),
                MinIn("m", "p", None),
                Advance("x", "", 40, 30),
                Unwatch("b", "c", 40),
                Watch("c", "d", 45, 40),
                Advance("y", "", 50, 40),
                MinIn("x", "", Some(40)),
            ],
        );
        run(
            "nothing watched reports the floor",
            &[],
            10,
            vec![
                Advance("a", "b", 99, 10),
                Watch("a", "b", 11, 11),
                Unwatch("", "", 11),
            ],
        );
    }

    #[test]
    fn watch_below_frontier_is_refused() {
        let mut f = SpanFrontier::with_spans(&[s("b", "c")], Ts(10));
        f.advance(&s("b", "c"), Ts(20));
        let err = f.watch(&s("d", "e"), Ts(15)).expect_err("below frontier");
        assert!(!err.is_retryable());
        assert_eq!(f.frontier(), Ts(20));
    }

    #[test]
    fn merged_boundaries_are_dropped() {
        let mut f = SpanFrontier::with_spans(&[s("", "")], Ts(1));
        for k in ["b", "c", "d", "e"] {
            f.advance(&s(k, ""), Ts(2));
        }
        assert_eq!(f.pieces(), 5);
        f.advance(&s("", ""), Ts(6));
        assert_eq!(f.pieces(), 1);
        assert_eq!(f.frontier(), Ts(6));
    }

    // ---- property tests against a brute-force model ----

    /// Keys are `""` (−∞ as a start, +∞ as an end) or one byte `1..N`; cell `i` is
    /// `[key(i), key(i+1))`.
    const N: u8 = 8;

    fn key(i: u8) -> Vec<u8> {
        if i == 0 || i >= N {
            Vec::new()
        } else {
            vec![i]
        }
    }

    fn span(a: u8, b: u8) -> Span {
        Span::new(key(a), key(b))
    }

    #[derive(Debug, Clone)]
    enum Op {
        Advance(u8, u8, u64),
        Watch(u8, u8, u64),
        Unwatch(u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        let range = (0..N).prop_flat_map(|a| (Just(a), a + 1..=N));
        prop_oneof![
            6 => (range.clone(), 0u64..100).prop_map(|((a, b), t)| Op::Advance(a, b, t)),
            1 => (range.clone(), 0u64..30).prop_map(|((a, b), t)| Op::Watch(a, b, t)),
            1 => range.prop_map(|(a, b)| Op::Unwatch(a, b)),
        ]
    }

    #[derive(Debug, Clone)]
    struct Model {
        cells: Vec<Option<u64>>,
        floor: u64,
    }

    impl Model {
        fn frontier(&self) -> u64 {
            self.cells
                .iter()
                .flatten()
                .min()
                .copied()
                .unwrap_or(self.floor)
        }
    }

    proptest! {
        /// Any sequence of advances, watches and unwatches: the frontier equals the model's
        /// minimum, and never decreases.
        #[test]
        fn matches_brute_force(ops in prop::collection::vec(op(), 0..60)) {
            let mut f = SpanFrontier::with_spans(&[span(2, 6)], Ts(10));
            let mut m = Model { cells: vec![None; N as usize], floor: 10 };
            for c in &mut m.cells[2..6] { *c = Some(10); }
            let mut last = f.frontier();
            for op in ops {
                match op {
                    Op::Advance(a, b, t) => {
                        f.advance(&span(a, b), Ts(t));
                        for c in m.cells[a as usize..b as usize].iter_mut().flatten() {
                            *c = (*c).max(t);
                        }
                    }
                    Op::Watch(a, b, t) => {
                        let t = t + last.0;
                        f.watch(&span(a, b), Ts(t)).expect("at or above frontier");
                        for c in &mut m.cells[a as usize..b as usize] {
                            *c = Some(c.map_or(t, |o| o.max(t)));
                        }
                    }
                    Op::Unwatch(a, b) => {
                        f.unwatch(&span(a, b));
                        for c in &mut m.cells[a as usize..b as usize] { *c = None; }
                    }
                }
                m.floor = m.frontier().max(m.floor);
                let now = f.frontier();
                prop_assert!(now >= last, "regressed {last:?} -> {now:?}");
                prop_assert_eq!(now.0, m.frontier());
                for a in 0..N {
                    for b in a + 1..=N {
                        let want = m.cells[a as usize..b as usize].iter().flatten().min().copied();
                        prop_assert_eq!(f.min_in(&span(a, b)).map(|t| t.0), want);
                    }
                }
                last = now;
            }
        }

        /// Regions split and merge over one table span; each region reports resolved ts for
        /// its own span, starting from the minimum over its span when it is (re)created. The
        /// frontier never decreases and equals the minimum over the regions' resolved ts.
        #[test]
        fn regions_split_and_merge(steps in prop::collection::vec((0u8..3, 0u8..N, 0u64..20), 0..80)) {
            // Regions as (start cell, resolved ts); region i ends where region i+1 starts.
            let mut regions: Vec<(u8, u64)> = vec![(0, 100)];
            let mut f = SpanFrontier::with_spans(&[Span::full()], Ts(100));
            let mut last = f.frontier();
            let mut max_reported = 100;
            for (kind, at, delta) in steps {
                let idx = regions.iter().rposition(|(s, _)| *s <= at).unwrap_or(0);
                let end = |i: usize, rs: &Vec<(u8, u64)>| rs.get(i + 1).map_or(N, |r| r.0);
                match kind {
                    0 if at > regions[idx].0 => {
                        // Split: both halves are new regions starting at the min over them.
                        let (start, _) = regions[idx];
                        let e = end(idx, &regions);
                        let left = f.min_in(&span(start, at)).expect("watched").0;
                        let right = f.min_in(&span(at, e)).expect("watched").0;
                        regions[idx] = (start, left);
                        regions.insert(idx + 1, (at, right));
                    }
                    1 if idx + 1 < regions.len() => {
                        // Merge with the right neighbour.
                        let start = regions[idx].0;
                        let e = end(idx + 1, &regions);
                        let ts = f.min_in(&span(start, e)).expect("watched").0;
                        regions.remove(idx + 1);
                        regions[idx] = (start, ts);
                    }
                    _ => {
                        let (start, ts) = regions[idx];
                        let ts = ts + delta;
                        regions[idx].1 = ts;
                        max_reported = max_reported.max(ts);
                        f.advance(&span(start, end(idx, &regions)), Ts(ts));
                    }
                }
                let now = f.frontier();
                prop_assert!(now >= last, "regressed {last:?} -> {now:?}");
                let min_region = regions.iter().map(|r| r.1).min().expect("one region");
                prop_assert!(now.0 >= min_region);
                last = now;
            }
            // After every region reports once more above anything reported, the frontier is
            // exactly that ts and only the current region boundaries remain.
            let top = max_reported + 1;
            for i in 0..regions.len() {
                let e = regions.get(i + 1).map_or(N, |r| r.0);
                f.advance(&span(regions[i].0, e), Ts(top));
            }
            prop_assert_eq!(f.frontier(), Ts(top));
            prop_assert_eq!(f.pieces(), regions.len());
            f.advance(&Span::full(), Ts(top + 1));
            prop_assert_eq!(f.pieces(), 1, "all boundaries coalesce");
        }
    }
}

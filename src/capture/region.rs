//! The state of one region subscription: rows, resolved ts and errors in, complete rows out.
//!
//! ```text
//!   Initializing ──INITIALIZED──► Normal
//!        │                          │
//!        └──────error / stop────────┴──► Stopped
//! ```
//!
//! * **Initializing**: the incremental scan runs; scan rows and realtime rows interleave. Commits
//!   without a usable prewrite and rollbacks are cached by the [`Matcher`]; resolved ts is
//!   ignored (TiKV does not send it yet, and a value seen now would mean nothing).
//! * **Normal**: after INITIALIZED. Every COMMIT must match; resolved ts advances.
//! * **Stopped**: TiKV sent an error (it forgets the subscription then), the caller stopped the
//!   subscription, or a protocol violation was found. Later events are ignored, as TiCDC ignores
//!   events of a stale region state.
//!
//! Checks applied on top of the matcher (as TiCDC's `handleEventEntries` applies them):
//! * rows whose encoded key is outside the requested span are dropped (TiKV 6.5 sends the whole
//!   region);
//! * a matched COMMIT with `commit_ts <=` the subscription's start ts is stale and dropped;
//! * a COMMIT or COMMITTED row with `commit_ts <=` the last resolved ts (which starts at the
//!   request's checkpoint ts) is a fatal protocol violation.

use tibinlog_proto::cdcpb;

use super::error::{CaptureError, RegionErrorKind, Result};
use super::matcher::{Matcher, MatcherConfig, RowEntry};
use super::span::encode_key_into;
use crate::model::{RawRow, RegionId, Span, Ts};

/// An input of a region subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionEvent {
    /// One row of an `Entries` event.
    Row(RowEntry),
    /// A resolved ts for this region (from a `ResolvedTs` batch, or the deprecated per-region one).
    ResolvedTs(Ts),
    /// TiKV ended the subscription.
    Error(RegionErrorKind),
}

/// Why a subscription stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// TiKV sent this error.
    Error(RegionErrorKind),
    /// The caller stopped it (deregister, range moved, shutdown).
    Stopped,
    /// A protocol violation was returned to the caller as a fatal error.
    Violation,
}

/// Per-state data; transitions are in [`RegionFeed`]'s impl.
#[derive(Debug)]
enum RegionState {
    Initializing { matcher: Matcher },
    Normal { matcher: Matcher },
    Stopped { cause: StopCause },
}

/// One region subscription `(request_id, region_id)` as the client tracks it.
///
/// Invariant: `resolved_ts` never decreases, and every row handed out has `commit_ts >`
/// the `resolved_ts` at the time it was handed out.
#[derive(Debug)]
pub struct RegionFeed {
    region: RegionId,
    span: Span,
    /// The subscription's start ts: commits at or below it belong to the past.
    start_ts: Ts,
    /// Last accepted resolved ts; starts at the request's checkpoint ts.
    resolved_ts: Ts,
    state: RegionState,
    /// Scratch for encoding row keys to test span membership.
    key_buf: Vec<u8>,
    /// Rows dropped because their key is outside `span`.
    rows_outside_span: u64,
    /// Cached commits dropped at INITIALIZED.
    commits_dropped: u64,
}

impl RegionFeed {
    /// Estimated bytes of this feed: its record, span and scratch, and what its matcher holds
    /// in memory (prewrites, and commits cached before INITIALIZED).
    pub fn state_bytes(&self) -> usize {
        let matcher = match &self.state {
            RegionState::Initializing { matcher } | RegionState::Normal { matcher } => {
                matcher.pending_bytes()
            }
            RegionState::Stopped { .. } => 0,
        };
        std::mem::size_of::<RegionFeed>()
            + self.span.start.capacity()
            + self.span.end.capacity()
            + self.key_buf.capacity()
            + matcher
    }

    /// A subscription of `region` over `span` (encoded, already intersected with the region),
    /// requested with `checkpoint_ts` for a table subscription that started at `start_ts`.
    pub fn new(
        region: RegionId,
        span: Span,
        start_ts: Ts,
        checkpoint_ts: Ts,
        config: MatcherConfig,
    ) -> RegionFeed {
        debug_assert!(
            checkpoint_ts >= start_ts,
            "a region never restarts below its table"
        );
        RegionFeed {
            region,
            span,
            start_ts,
            resolved_ts: checkpoint_ts,
            state: RegionState::Initializing {
                matcher: Matcher::new(region, config),
            },
            key_buf: Vec::new(),
            rows_outside_span: 0,
            commits_dropped: 0,
        }
    }

    /// The region id.
    pub fn region_id(&self) -> RegionId {
        self.region
    }
    /// The requested (encoded) span.
    pub fn span(&self) -> &Span {
        &self.span
    }
    /// The last accepted resolved ts; a re-subscription of this span starts from it.
    pub fn resolved_ts(&self) -> Ts {
        self.resolved_ts
    }
    /// True once INITIALIZED was seen (and not stopped).
    pub fn is_initialized(&self) -> bool {
        matches!(self.state, RegionState::Normal { .. })
    }
    /// True if the subscription no longer accepts events.
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, RegionState::Stopped { .. })
    }
    /// Why the subscription stopped, if it did.
    pub fn stop_cause(&self) -> Option<&StopCause> {
        match &self.state {
            RegionState::Stopped { cause } => Some(cause),
            _ => None,
        }
    }
    /// True if a resolved ts would be accepted now.
    pub fn accepts_resolved_ts(&self) -> bool {
        self.is_initialized()
    }
    /// Bytes held by the matcher (pending prewrites, cached commits and rollbacks).
    pub fn pending_bytes(&self) -> usize {
        match &self.state {
            RegionState::Initializing { matcher } | RegionState::Normal { matcher } => {
                matcher.pending_bytes()
            }
            RegionState::Stopped { .. } => 0,
        }
    }
    /// Rows dropped so far because their key is outside the span.
    pub fn rows_outside_span(&self) -> u64 {
        self.rows_outside_span
    }
    /// Cached commits dropped at INITIALIZED (the scan had emitted them as COMMITTED).
    pub fn commits_dropped(&self) -> u64 {
        self.commits_dropped
    }

    /// Stops the subscription on the caller's behalf; the matcher's memory is released.
    pub fn stop(&mut self) {
        if !self.is_stopped() {
            self.state = RegionState::Stopped {
                cause: StopCause::Stopped,
            };
        }
    }

    /// Handles one event. Complete rows are appended to `out`; returns the new resolved ts if
    /// one was accepted. A region error stops the subscription and comes back as
    /// [`CaptureError::Region`]; protocol violations stop it and come back as fatal errors.
    pub fn on_event(&mut self, ev: RegionEvent, out: &mut Vec<RawRow>) -> Result<Option<Ts>> {
        let r = self.step(ev, out);
        if let Err(e) = &r {
            if !self.is_stopped() {
                let cause = match e {
                    CaptureError::Region { kind, .. } => StopCause::Error(kind.clone()),
                    _ => StopCause::Violation,
                };
                self.state = RegionState::Stopped { cause };
            }
        }
        r
    }

    /// Handles a whole `cdcpb.Event` addressed to this subscription. `Admin` and `LongTxn`
    /// events are not sent by TiKV and are ignored, as TiCDC does.
    pub fn on_cdcpb_event(
        &mut self,
        ev: cdcpb::Event,
        out: &mut Vec<RawRow>,
    ) -> Result<Option<Ts>> {
        use cdcpb::event::Event as E;
        match ev.event {
            Some(E::Entries(entries)) => {
                let mut resolved = None;
                for row in entries.entries {
                    if self.is_stopped() {
                        break;
                    }
                    let entry = match RowEntry::from_cdcpb(row, self.region) {
                        Ok(entry) => entry,
                        Err(e) => {
                            self.state = RegionState::Stopped {
                                cause: StopCause::Violation,
                            };
                            return Err(e);
                        }
                    };
                    resolved = self.on_event(RegionEvent::Row(entry), out)?.or(resolved);
                }
                Ok(resolved)
            }
            Some(E::Error(e)) => {
                self.on_event(RegionEvent::Error(RegionErrorKind::from_cdcpb(&e)), out)
            }
            Some(E::ResolvedTs(ts)) => self.on_event(RegionEvent::ResolvedTs(Ts(ts)), out),
            Some(E::Admin(_)) | Some(E::LongTxn(_)) | None => Ok(None),
        }
    }

    fn step(&mut self, ev: RegionEvent, out: &mut Vec<RawRow>) -> Result<Option<Ts>> {
        let region = self.region;
        match ev {
            RegionEvent::Error(kind) => {
                if self.is_stopped() {
                    return Ok(None);
                }
                Err(CaptureError::Region { region, kind })
            }
            RegionEvent::ResolvedTs(ts) => match self.state {
                RegionState::Normal { .. } if ts >= self.resolved_ts => {
                    self.resolved_ts = ts;
                    Ok(Some(ts))
                }
                // Below the last one (a batch's minimum), before INITIALIZED, or stopped.
                _ => Ok(None),
            },
            RegionEvent::Row(entry) => {
                if self.is_stopped() {
                    return Ok(None);
                }
                if let Some(key) = entry.key() {
                    encode_key_into(key, &mut self.key_buf);
                    if !self.span.contains(&self.key_buf) {
                        self.rows_outside_span += 1;
                        return Ok(None);
                    }
                }
                self.on_row(entry, out)?;
                Ok(None)
            }
        }
    }

    fn on_row(&mut self, entry: RowEntry, out: &mut Vec<RawRow>) -> Result<()> {
        let matcher = match &mut self.state {
            RegionState::Initializing { matcher } | RegionState::Normal { matcher } => matcher,
            RegionState::Stopped { .. } => return Ok(()),
        };
        match entry {
            RowEntry::Prewrite(p) => matcher.on_prewrite(p),
            RowEntry::Rollback(r) => matcher.on_rollback(r),
            RowEntry::Commit(c) => match matcher.on_commit(c)? {
                Some(row) => self.emit_commit(row, out),
                None => Ok(()),
            },
            RowEntry::Committed(row) => {
                self.check_after_resolved(&row)?;
                out.push(row);
                Ok(())
            }
            RowEntry::Initialized => self.on_initialized(out),
        }
    }

    fn on_initialized(&mut self, out: &mut Vec<RawRow>) -> Result<()> {
        let state = std::mem::replace(
            &mut self.state,
            RegionState::Stopped {
                cause: StopCause::Violation,
            },
        );
        let RegionState::Initializing { mut matcher } = state else {
            // TiKV sends INITIALIZED exactly once; a second one means the stream is confused.
            return Err(CaptureError::IllegalTransition {
                region: self.region,
                event: "INITIALIZED",
                state: "Normal",
            });
        };
        let mut replayed = Vec::new();
        self.commits_dropped += matcher.on_initialized(&mut replayed)? as u64;
        self.state = RegionState::Normal { matcher };
        for row in replayed {
            self.emit_commit(row, out)?;
        }
        Ok(())
    }

    /// A matched commit: dropped if stale, fatal if at or below the resolved ts.
    fn emit_commit(&mut self, row: RawRow, out: &mut Vec<RawRow>) -> Result<()> {
        // TiKV can deliver commits of transactions prewritten before the start ts.
        if row.commit_ts <= self.start_ts {
            tracing::debug!(
                region = self.region.0,
                start_ts = row.start_ts.0,
                commit_ts = row.commit_ts.0,
                subscription_start_ts = self.start_ts.0,
                "commit at or below the subscription's start ts dropped"
            );
            return Ok(());
        }
        self.check_after_resolved(&row)?;
        out.push(row);
        Ok(())
    }

    fn check_after_resolved(&self, row: &RawRow) -> Result<()> {
        if row.commit_ts <= self.resolved_ts {
            return Err(CaptureError::CommitBeforeResolved {
                region: self.region,
                start_ts: row.start_ts,
                commit_ts: row.commit_ts,
                resolved_ts: self.resolved_ts,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::matcher as mt;
    use crate::model::Op;
    use crate::tidb::key::encode_region_key;

    /// A step of a region script and what it must produce.
    #[derive(Debug)]
    enum Step {
        /// PREWRITE(start_ts, key, value)
        Prewrite(u64, &'static str, &'static str),
        /// COMMIT(start_ts, commit_ts, key)
        Commit(u64, u64, &'static str),
        /// COMMITTED(start_ts, commit_ts, key, value)
        Committed(u64, u64, &'static str, &'static str),
        Rollback(u64, &'static str),
        Initialized,
        /// Resolved ts in; expected accepted value.
        Resolved(u64, Option<u64>),
        /// An error from TiKV.
        Error(RegionErrorKind),
        /// The last event must have emitted exactly these (start_ts, commit_ts, key, value).
        Emits(Vec<(u64, u64, &'static str, &'static str)>),
        /// The last event must have failed with a fatal error.
        Fatal,
        /// The last event must have failed with a retryable region error.
        Retry,
        /// The state now: "init", "normal" or "stopped".
        State(&'static str),
    }
    use Step::*;

    const START: u64 = 100;

    fn raw(key: &str) -> Vec<u8> {
        let mut k = b"t".to_vec();
        k.extend_from_slice(key.as_bytes());
        k
    }

    fn feed() -> RegionFeed {
        // The span holds raw keys "tb" .. "ty" in the encoded domain.
        let span = Span::new(encode_region_key(b"tb"), encode_region_key(b"ty"));
        RegionFeed::new(
            RegionId(7),
            span,
            Ts(START),
            Ts(START),
            MatcherConfig::default(),
        )
    }

    fn event(step: &Step) -> Option<RegionEvent> {
        let ev = match step {
            Prewrite(s, k, v) => RegionEvent::Row(RowEntry::Prewrite(mt::Prewrite {
                start_ts: Ts(*s),
                key: raw(k),
                op: Op::Put,
                value: v.as_bytes().to_vec(),
                old_value: Vec::new(),
                generation: 0,
            })),
            Commit(s, c, k) => RegionEvent::Row(RowEntry::Commit(mt::Commit {
                start_ts: Ts(*s),
                commit_ts: Ts(*c),
                key: raw(k),
                op: Op::Put,
                value: Vec::new(),
            })),
            Committed(s, c, k, v) => RegionEvent::Row(RowEntry::Committed(RawRow {
                op: Op::Put,
                key: raw(k),
                value: v.as_bytes().to_vec(),
                old_value: Vec::new(),
                start_ts: Ts(*s),
                commit_ts: Ts(*c),
                region_id: RegionId(7),
            })),
            Rollback(s, k) => RegionEvent::Row(RowEntry::Rollback(mt::Rollback {
                start_ts: Ts(*s),
                key: raw(k),
            })),
            Initialized => RegionEvent::Row(RowEntry::Initialized),
            Resolved(ts, _) => RegionEvent::ResolvedTs(Ts(*ts)),
            Error(kind) => RegionEvent::Error(kind.clone()),
            Emits(_) | Fatal | Retry | State(_) => return None,
        };
        Some(ev)
    }

    fn run(name: &str, script: Vec<Step>) {
        let mut f = feed();
        let mut out = Vec::new();
        let mut last: Result<Option<Ts>> = Ok(None);
        for (i, step) in script.iter().enumerate() {
            let ctx = format!("{name} step {i}: {step:?}");
            if let Some(ev) = event(step) {
                out.clear();
                last = f.on_event(ev, &mut out);
                if let Resolved(_, want) = step {
                    assert_eq!(last.as_ref().ok().copied(), Some(want.map(Ts)), "{ctx}");
                }
                continue;
            }
            match step {
                Emits(want) => {
                    assert!(last.is_ok(), "{ctx}: {last:?}");
                    let got: Vec<_> = out
                        .iter()
                        .map(|r| (r.start_ts.0, r.commit_ts.0, r.key.clone(), r.value.clone()))
                        .collect();
                    let want: Vec<_> = want
                        .iter()
                        .map(|(s, c, k, v)| (*s, *c, raw(k), v.as_bytes().to_vec()))
                        .collect();
                    assert_eq!(got, want, "{ctx}");
                }
                Fatal => assert!(
                    matches!(&last, Err(e) if !e.is_retryable()),
                    "{ctx}: {last:?}"
                ),
                Retry => assert!(
                    matches!(&last, Err(e) if e.is_retryable()),
                    "{ctx}: {last:?}"
                ),
                State(s) => {
                    let now = match f.state {
                        RegionState::Initializing { .. } => "init",
                        RegionState::Normal { .. } => "normal",
                        RegionState::Stopped { .. } => "stopped",
                    };
                    assert_eq!(now, *s, "{ctx}");
                }
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn scripts() {
        let cases: Vec<(&str, Vec<Step>)> = vec![
            (
                "scan, initialized, realtime 2PC, resolved ts",
                vec![
                    Committed(90, 110, "c", "scan"),
                    Emits(vec![(90, 110, "c", "scan")]),
                    Prewrite(120, "d", "v"),
                    Emits(vec![]),
                    State("init"),
                    Initialized,
                    State("normal"),
                    Resolved(115, Some(115)),
                    Commit(120, 130, "d"),
                    Emits(vec![(120, 130, "d", "v")]),
                    Resolved(130, Some(130)),
                ],
            ),
            (
                "commit before the scan's prewrite, emitted at INITIALIZED",
                vec![
                    Commit(120, 130, "d"),
                    Emits(vec![]),
                    Prewrite(120, "d", "v"),
                    Initialized,
                    Emits(vec![(120, 130, "d", "v")]),
                ],
            ),
            (
                "unmatched cached commit dropped at INITIALIZED",
                vec![
                    Commit(120, 130, "d"),
                    Committed(120, 130, "d", "scan"),
                    Initialized,
                    Emits(vec![]),
                    State("normal"),
                ],
            ),
            (
                "commit without prewrite after INITIALIZED is fatal",
                vec![Initialized, Commit(120, 130, "d"), Fatal, State("stopped")],
            ),
            (
                "resolved ts before INITIALIZED is ignored; lower values are ignored",
                vec![
                    Resolved(150, None),
                    Initialized,
                    Resolved(150, Some(150)),
                    Resolved(140, None),
                    Resolved(150, Some(150)),
                ],
            ),
            (
                "commit at or below the resolved ts is fatal",
                vec![
                    Prewrite(120, "d", "v"),
                    Initialized,
                    Resolved(130, Some(130)),
                    Commit(120, 130, "d"),
                    Fatal,
                ],
            ),
            (
                "committed at or below the resolved ts is fatal",
                vec![
                    Initialized,
                    Resolved(130, Some(130)),
                    Committed(125, 129, "d", "x"),
                    Fatal,
                ],
            ),
            (
                "committed at or below the checkpoint is fatal even while scanning",
                vec![Committed(90, START, "d", "x"), Fatal],
            ),
            (
                "stale commit (at or below start ts) is dropped",
                vec![
                    Prewrite(90, "d", "v"),
                    Initialized,
                    Commit(90, START, "d"),
                    Emits(vec![]),
                    State("normal"),
                ],
            ),
            (
                "1PC arrives as realtime COMMITTED",
                vec![
                    Initialized,
                    Committed(120, 121, "e", "one-pc"),
                    Emits(vec![(120, 121, "e", "one-pc")]),
                ],
            ),
            (
                "two txns share a commit_ts",
                vec![
                    Initialized,
                    Prewrite(120, "d", "x"),
                    Prewrite(121, "e", "y"),
                    Commit(121, 130, "e"),
                    Emits(vec![(121, 130, "e", "y")]),
                    Commit(120, 130, "d"),
                    Emits(vec![(120, 130, "d", "x")]),
                ],
            ),
            (
                "rollback",
                vec![
                    Initialized,
                    Prewrite(120, "d", "x"),
                    Rollback(120, "d"),
                    Emits(vec![]),
                    Commit(120, 130, "d"),
                    Fatal,
                ],
            ),
            (
                "rows outside the span are dropped",
                vec![
                    Initialized,
                    Committed(120, 121, "a", "left"),
                    Emits(vec![]),
                    Committed(120, 121, "z", "right"),
                    Emits(vec![]),
                    Commit(120, 130, "a"),
                    Emits(vec![]),
                    State("normal"),
                ],
            ),
            (
                "region error stops; later events are ignored",
                vec![
                    Initialized,
                    Error(RegionErrorKind::EpochNotMatch {
                        current_regions: vec![],
                    }),
                    Retry,
                    State("stopped"),
                    Committed(120, 121, "d", "x"),
                    Emits(vec![]),
                    Resolved(200, None),
                ],
            ),
            (
                "duplicate request is fatal",
                vec![
                    Error(RegionErrorKind::DuplicateRequest),
                    Fatal,
                    State("stopped"),
                ],
            ),
            (
                "a second INITIALIZED is a violation",
                vec![Initialized, Initialized, Fatal, State("stopped")],
            ),
        ];
        for (name, script) in cases {
            run(name, script);
        }
    }

    #[test]
    fn cdcpb_events_drive_the_feed() {
        use cdcpb::event::{row::OpType, Entries, Event as E, LogType, Row};
        let mut f = feed();
        let row = |t: LogType, start, commit, key: &str, value: &str| Row {
            start_ts: start,
            commit_ts: commit,
            r#type: t as i32,
            op_type: if t == LogType::Initialized {
                0
            } else {
                OpType::Put as i32
            },
            key: raw(key),
            value: value.as_bytes().to_vec(),
            ..Default::default()
        };
        let entries = |rows| cdcpb::Event {
            region_id: 7,
            event: Some(E::Entries(Entries { entries: rows })),
            ..Default::default()
        };
        let mut out = Vec::new();
        let r = f.on_cdcpb_event(
            entries(vec![
                row(LogType::Commit, 120, 130, "d", ""),
                row(LogType::Prewrite, 120, 0, "d", "v"),
                row(LogType::Initialized, 0, 0, "", ""),
            ]),
            &mut out,
        );
        assert!(matches!(r, Ok(None)));
        assert_eq!(out.len(), 1);
        assert!(f.is_initialized());
        let resolved = cdcpb::Event {
            event: Some(E::ResolvedTs(140)),
            ..Default::default()
        };
        assert_eq!(
            f.on_cdcpb_event(resolved, &mut out).ok(),
            Some(Some(Ts(140)))
        );
        let err = cdcpb::Event {
            event: Some(E::Error(cdcpb::Error {
                congested: Some(cdcpb::Congested { region_id: 7 }),
                ..Default::default()
            })),
            ..Default::default()
        };
        let e = f.on_cdcpb_event(err, &mut out).expect_err("error event");
        assert!(e.is_retryable());
        assert_eq!(
            f.stop_cause(),
            Some(&StopCause::Error(RegionErrorKind::Congested))
        );
        assert_eq!(f.resolved_ts(), Ts(140), "kept for the re-subscription");
        assert_eq!(f.pending_bytes(), 0);

        let mut g = feed();
        let bad = entries(vec![Row {
            r#type: 99,
            ..row(LogType::Commit, 1, 2, "d", "")
        }]);
        assert!(matches!(
            g.on_cdcpb_event(bad, &mut out),
            Err(CaptureError::UnknownRow { .. })
        ));
        assert!(g.is_stopped());
    }

    #[test]
    fn caller_stop_releases_memory() {
        let mut f = feed();
        let mut out = Vec::new();
        let p = mt::Prewrite {
            start_ts: Ts(120),
            key: raw("d"),
            op: Op::Put,
            value: b"v".to_vec(),
            old_value: Vec::new(),
            generation: 0,
        };
        f.on_event(RegionEvent::Row(RowEntry::Prewrite(p)), &mut out)
            .expect("prewrite");
        let c = mt::Commit {
            start_ts: Ts(121),
            commit_ts: Ts(130),
            key: raw("e"),
            op: Op::Delete,
            value: Vec::new(),
        };
        f.on_event(RegionEvent::Row(RowEntry::Commit(c)), &mut out)
            .expect("cached");
        let r = mt::Rollback {
            start_ts: Ts(122),
            key: raw("f"),
        };
        f.on_event(RegionEvent::Row(RowEntry::Rollback(r)), &mut out)
            .expect("cached");
        assert!(f.pending_bytes() > 0);
        f.stop();
        assert_eq!(f.pending_bytes(), 0);
        assert_eq!(f.stop_cause(), Some(&StopCause::Stopped));
    }
}

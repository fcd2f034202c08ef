//! The one error type of the capture stage, classified by what the caller must do.
//!
//! * Retry the region or its range ([`CaptureError::Region`] with a retryable kind): the region
//!   subscription is gone on the TiKV side; [`CaptureError::retry`] says how to re-subscribe
//!   (TiCDC's region failure handler; docs/upstream-facts.md, "Region errors").
//! * Reconnect a store ([`CaptureError::Stream`]): every region on that stream is re-sent.
//! * Stop the changefeed (everything else): TiKV broke a protocol promise, the client was told it
//!   is incompatible, or a configured limit was hit. Continuing would lose or duplicate data.

use std::time::Duration;

use tibinlog_proto::cdcpb;

use crate::model::{RegionId, Ts};

/// Result of the capture stage.
pub type Result<T> = std::result::Result<T, CaptureError>;

/// The most a TiKV `ServerIsBusy.backoff_ms` may delay a retry: 10 minutes, TiCDC's cap, so a
/// corrupt or hostile value cannot park a region forever.
pub const MAX_SERVER_BUSY_BACKOFF: Duration = Duration::from_secs(10 * 60);

/// Errors of the capture stage.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// TiKV ended the subscription of one region with a `cdcpb.Error`; [`RegionErrorKind::retry`]
    /// says whether and how to re-subscribe.
    #[error("region {region}: {kind}")]
    Region {
        region: RegionId,
        kind: RegionErrorKind,
    },
    /// The stream to a store broke: reconnect and re-send every region that was on it.
    #[error("stream to store {store} closed: {}: {}", source.code(), source.message())]
    Stream {
        store: u64,
        #[source]
        source: tonic::Status,
    },
    /// A COMMIT arrived after INITIALIZED without a PREWRITE for `(start_ts, key)`
    /// (TiCDC `ErrPrewriteNotMatch`).
    #[error("region {region}: commit {start_ts}->{commit_ts} has no prewrite (key {key:02x?})")]
    PrewriteNotMatch {
        region: RegionId,
        start_ts: Ts,
        commit_ts: Ts,
        key: Vec<u8>,
    },
    /// A COMMIT/COMMITTED row with `commit_ts <=` a resolved ts already seen for the region
    /// (TiCDC: "The CommitTs must be greater than the resolvedTs").
    #[error(
        "region {region}: commit_ts {commit_ts} <= resolved ts {resolved_ts} (start_ts {start_ts})"
    )]
    CommitBeforeResolved {
        region: RegionId,
        start_ts: Ts,
        commit_ts: Ts,
        resolved_ts: Ts,
    },
    /// A row whose `type` or `op_type` is not one this client understands.
    #[error("region {region}: unexpected row type {log_type} / op {op_type}")]
    UnknownRow {
        region: RegionId,
        log_type: i32,
        op_type: i32,
    },
    /// An event the subscription's state does not allow (e.g. a second INITIALIZED).
    #[error("region {region}: {event} in state {state}")]
    IllegalTransition {
        region: RegionId,
        event: &'static str,
        state: &'static str,
    },
    /// A region's pending prewrites and cached commits exceed the configured bound.
    #[error("region {region}: {used} pending bytes exceed the limit of {limit}")]
    PendingBytesExceeded {
        region: RegionId,
        used: usize,
        limit: usize,
    },
    /// The spill store of huge transactions' prewrites failed (a disk error).
    #[error("region {region}: spilled prewrites: {message}")]
    Spill { region: RegionId, message: String },
    /// A store refused our TLS certificate or its common name (`UNAUTHENTICATED`).
    #[error("store {store} refused the connection: {message}")]
    Refused { store: u64, message: String },
    /// A span was added to the frontier below what the frontier already reported.
    #[error("span watched at {ts} below the reported frontier {frontier}")]
    FrontierRegression { ts: Ts, frontier: Ts },
}

impl CaptureError {
    /// True if capture can go on after re-subscribing or reconnecting.
    pub fn is_retryable(&self) -> bool {
        self.retry().is_some()
    }

    /// How to recover, or `None` if the changefeed must stop.
    pub fn retry(&self) -> Option<Retry> {
        match self {
            Self::Region { kind, .. } => kind.retry(),
            Self::Stream { .. } => Some(Retry::Store),
            Self::PrewriteNotMatch { .. }
            | Self::CommitBeforeResolved { .. }
            | Self::UnknownRow { .. }
            | Self::IllegalTransition { .. }
            | Self::PendingBytesExceeded { .. }
            | Self::Spill { .. }
            | Self::Refused { .. }
            | Self::FrontierRegression { .. } => None,
        }
    }
}

/// What the caller does to recover a failed region subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// Re-send the same region request after `after`; send it to `leader_store` if TiKV named a
    /// new leader.
    Region {
        after: Duration,
        leader_store: Option<u64>,
    },
    /// The region's shape changed or is unknown: reload the regions of the sub-range from PD and
    /// split the sub-range again ("range retry").
    Range,
    /// Reconnect the store and re-send every region subscribed on it.
    Store,
}

/// A `cdcpb.Error`, with the fields a caller acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegionErrorKind {
    /// The peer is not the leader; `leader_store` is the new leader's store if TiKV knows it.
    #[error("not leader (new leader on store {leader_store:?})")]
    NotLeader { leader_store: Option<u64> },
    /// Split, merge or a stale epoch; after a split `current_regions` lists the new regions,
    /// after a merge it is empty. Either way reload from PD.
    #[error("epoch not match ({} current regions)", current_regions.len())]
    EpochNotMatch { current_regions: Vec<RegionId> },
    /// The region is not on that store any more (or was deregistered).
    #[error("region not found")]
    RegionNotFound,
    /// TiKV refuses the registration for now (e.g. too many pending incremental scans).
    #[error("server is busy ({reason}), back off {backoff_ms} ms")]
    ServerIsBusy { reason: String, backoff_ms: u64 },
    /// TiKV's CDC sink is congested.
    #[error("congested")]
    Congested,
    /// The client reused `(request_id, region_id)` while the old subscription was alive: a
    /// client bug.
    #[error("duplicate request")]
    DuplicateRequest,
    /// The client's `ticdc_version` is not accepted.
    #[error("incompatible: TiKV requires version {required_version}")]
    Compatibility { required_version: String },
    /// The request went to another cluster.
    #[error("cluster id mismatch: TiKV has {current}, request had {request}")]
    ClusterIdMismatch { current: u64, request: u64 },
    /// An error with no known field set (a newer TiKV, or an empty message).
    #[error("unknown cdc error")]
    Unknown,
}

impl RegionErrorKind {
    /// Classifies a `cdcpb.Error` (exactly one field is expected to be set; the first set one in
    /// field-number order wins).
    pub fn from_cdcpb(e: &cdcpb::Error) -> RegionErrorKind {
        if let Some(nl) = &e.not_leader {
            // TiCDC trusts the hint only if the peer and its store are both named.
            let leader_store = nl
                .leader
                .as_ref()
                .filter(|p| p.id != 0 && p.store_id != 0)
                .map(|p| p.store_id);
            return Self::NotLeader { leader_store };
        }
        if e.region_not_found.is_some() {
            return Self::RegionNotFound;
        }
        if let Some(enm) = &e.epoch_not_match {
            let current_regions = enm.current_regions.iter().map(|r| RegionId(r.id)).collect();
            return Self::EpochNotMatch { current_regions };
        }
        if e.duplicate_request.is_some() {
            return Self::DuplicateRequest;
        }
        if let Some(c) = &e.compatibility {
            return Self::Compatibility {
                required_version: c.required_version.clone(),
            };
        }
        if let Some(m) = &e.cluster_id_mismatch {
            return Self::ClusterIdMismatch {
                current: m.current,
                request: m.request,
            };
        }
        if let Some(b) = &e.server_is_busy {
            return Self::ServerIsBusy {
                reason: b.reason.clone(),
                backoff_ms: b.backoff_ms,
            };
        }
        if e.congested.is_some() {
            return Self::Congested;
        }
        Self::Unknown
    }

    /// The recovery TiCDC applies (docs/upstream-facts.md, "Region errors"), or `None` if fatal.
    pub fn retry(&self) -> Option<Retry> {
        let same_region = |after| Retry::Region {
            after,
            leader_store: None,
        };
        match self {
            Self::NotLeader {
                leader_store: Some(store),
            } => Some(Retry::Region {
                after: Duration::ZERO,
                leader_store: Some(*store),
            }),
            // No usable leader hint: the cached region is stale, reload it.
            Self::NotLeader { leader_store: None } => Some(Retry::Range),
            Self::EpochNotMatch { .. } | Self::RegionNotFound => Some(Retry::Range),
            Self::ServerIsBusy { backoff_ms, .. } => Some(same_region(
                Duration::from_millis(*backoff_ms).min(MAX_SERVER_BUSY_BACKOFF),
            )),
            Self::Congested | Self::Unknown => Some(same_region(Duration::ZERO)),
            Self::DuplicateRequest
            | Self::Compatibility { .. }
            | Self::ClusterIdMismatch { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tibinlog_proto::{errorpb, metapb};

    fn classify(e: cdcpb::Error) -> (RegionErrorKind, Option<Retry>) {
        let kind = RegionErrorKind::from_cdcpb(&e);
        let retry = kind.retry();
        (kind, retry)
    }

    #[test]
    fn every_cdcpb_error_has_a_reaction() {
        let region_retry = |ms: u64, store| {
            Some(Retry::Region {
                after: Duration::from_millis(ms),
                leader_store: store,
            })
        };
        let cases: Vec<(cdcpb::Error, RegionErrorKind, Option<Retry>)> = vec![
            (
                cdcpb::Error {
                    not_leader: Some(errorpb::NotLeader {
                        region_id: 1,
                        leader: Some(metapb::Peer {
                            id: 5,
                            store_id: 3,
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                },
                RegionErrorKind::NotLeader {
                    leader_store: Some(3),
                },
                region_retry(0, Some(3)),
            ),
            (
                cdcpb::Error {
                    not_leader: Some(errorpb::NotLeader {
                        region_id: 1,
                        leader: None,
                    }),
                    ..Default::default()
                },
                RegionErrorKind::NotLeader { leader_store: None },
                Some(Retry::Range),
            ),
            (
                cdcpb::Error {
                    epoch_not_match: Some(errorpb::EpochNotMatch {
                        current_regions: vec![
                            metapb::Region {
                                id: 7,
                                ..Default::default()
                            },
                            metapb::Region {
                                id: 8,
                                ..Default::default()
                            },
                        ],
                    }),
                    ..Default::default()
                },
                RegionErrorKind::EpochNotMatch {
                    current_regions: vec![RegionId(7), RegionId(8)],
                },
                Some(Retry::Range),
            ),
            (
                cdcpb::Error {
                    region_not_found: Some(errorpb::RegionNotFound { region_id: 1 }),
                    ..Default::default()
                },
                RegionErrorKind::RegionNotFound,
                Some(Retry::Range),
            ),
            (
                cdcpb::Error {
                    server_is_busy: Some(errorpb::ServerIsBusy {
                        reason: "too many pending incremental scans".into(),
                        backoff_ms: 250,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                RegionErrorKind::ServerIsBusy {
                    reason: "too many pending incremental scans".into(),
                    backoff_ms: 250,
                },
                region_retry(250, None),
            ),
            (
                cdcpb::Error {
                    server_is_busy: Some(errorpb::ServerIsBusy {
                        backoff_ms: u64::MAX,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                RegionErrorKind::ServerIsBusy {
                    reason: String::new(),
                    backoff_ms: u64::MAX,
                },
                Some(Retry::Region {
                    after: MAX_SERVER_BUSY_BACKOFF,
                    leader_store: None,
                }),
            ),
            (
                cdcpb::Error {
                    congested: Some(cdcpb::Congested { region_id: 1 }),
                    ..Default::default()
                },
                RegionErrorKind::Congested,
                region_retry(0, None),
            ),
            (
                cdcpb::Error {
                    duplicate_request: Some(cdcpb::DuplicateRequest { region_id: 1 }),
                    ..Default::default()
                },
                RegionErrorKind::DuplicateRequest,
                None,
            ),
            (
                cdcpb::Error {
                    compatibility: Some(cdcpb::Compatibility {
                        required_version: "6.2.0".into(),
                    }),
                    ..Default::default()
                },
                RegionErrorKind::Compatibility {
                    required_version: "6.2.0".into(),
                },
                None,
            ),
            (
                cdcpb::Error {
                    cluster_id_mismatch: Some(cdcpb::ClusterIdMismatch {
                        current: 1,
                        request: 2,
                    }),
                    ..Default::default()
                },
                RegionErrorKind::ClusterIdMismatch {
                    current: 1,
                    request: 2,
                },
                None,
            ),
            (
                cdcpb::Error::default(),
                RegionErrorKind::Unknown,
                region_retry(0, None),
            ),
        ];
        for (i, (input, kind, retry)) in cases.into_iter().enumerate() {
            assert_eq!(classify(input), (kind.clone(), retry.clone()), "case {i}");
            let err = CaptureError::Region {
                region: RegionId(1),
                kind,
            };
            assert_eq!(err.is_retryable(), retry.is_some(), "case {i}");
        }
    }

    #[test]
    fn protocol_violations_are_fatal_and_streams_reconnect() {
        let fatal = CaptureError::CommitBeforeResolved {
            region: RegionId(1),
            start_ts: Ts(1),
            commit_ts: Ts(2),
            resolved_ts: Ts(3),
        };
        assert!(!fatal.is_retryable());
        let stream = CaptureError::Stream {
            store: 4,
            source: tonic::Status::unavailable("gone"),
        };
        assert_eq!(stream.retry(), Some(Retry::Store));
    }
}

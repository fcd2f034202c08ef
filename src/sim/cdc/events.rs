//! Building the events and errors the endpoint sends, and reading the client's version.

use tibinlog_proto::cdcpb::{self, event};
use tibinlog_proto::{errorpb, metapb};

use super::state::{ConnId, DownstreamId, Output};

/// Parses strict `major.minor.patch` (anything else → 0.0.0, as TiKV does).
pub(super) fn parse_version(v: &str) -> (u64, u64, u64) {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<Option<u64>> = core.split('.').map(|p| p.parse().ok()).collect();
    match parts.as_slice() {
        [Some(a), Some(b), Some(c)] => (*a, *b, *c),
        _ => (0, 0, 0),
    }
}

/// An `Error` event for the downstream `id`.
pub(super) fn error_event(id: DownstreamId, err: cdcpb::Error) -> cdcpb::Event {
    cdcpb::Event {
        region_id: id.region_id,
        request_id: id.request_id,
        event: Some(event::Event::Error(err)),
        ..Default::default()
    }
}

/// An `Entries` event of `rows` for the downstream `id`.
pub(super) fn entries_event(id: DownstreamId, rows: Vec<event::Row>) -> cdcpb::Event {
    cdcpb::Event {
        region_id: id.region_id,
        request_id: id.request_id,
        event: Some(event::Event::Entries(event::Entries { entries: rows })),
        ..Default::default()
    }
}

/// A message of `events` to connection `conn`.
pub(super) fn out_events(conn: ConnId, events: Vec<cdcpb::Event>) -> Output {
    Output {
        conn,
        event: cdcpb::ChangeDataEvent {
            events,
            resolved_ts: None,
        },
    }
}

/// The `EpochNotMatch` error, with the current `regions`.
pub(super) fn epoch_not_match(regions: Vec<metapb::Region>) -> cdcpb::Error {
    cdcpb::Error {
        epoch_not_match: Some(errorpb::EpochNotMatch {
            current_regions: regions,
        }),
        ..Default::default()
    }
}

/// The `RegionNotFound` error.
pub(super) fn region_not_found(region_id: u64) -> cdcpb::Error {
    cdcpb::Error {
        region_not_found: Some(errorpb::RegionNotFound { region_id }),
        ..Default::default()
    }
}

/// The `NotLeader` error, with the leader if known.
pub(super) fn not_leader(region_id: u64, leader: Option<metapb::Peer>) -> cdcpb::Error {
    cdcpb::Error {
        not_leader: Some(errorpb::NotLeader { region_id, leader }),
        ..Default::default()
    }
}

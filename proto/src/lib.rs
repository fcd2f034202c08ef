//! The part of TiKV's `kvproto` protocol definitions that tibinlog speaks,
//! compiled with prost (messages) and tonic (gRPC clients and servers).
//!
//! Package, message, service and method names, and every field number and
//! type, follow upstream kvproto, so these types interoperate with real TiKV
//! and PD servers. Only messages and RPCs tibinlog uses are included, but each
//! included message is complete, so decoding real traffic loses no field.
//!
//! * [`cdcpb`]: TiKV change-data stream (`ChangeData/EventFeed`, `EventFeedV2`).
//! * [`pdpb`]: PD cluster discovery, TSO, region/store lookup, GC safe points.
//! * [`tikvpb`]: TiKV transactional KV service (reads, 2PC, lock resolution),
//!   whose messages live in [`kvrpcpb`].
//! * [`metapb`], [`errorpb`]: shared metadata and region errors.
//! * The remaining modules hold the few types the above refer to.

/// Generates one module per protobuf package, with lints silenced for the
/// generated code only.
macro_rules! proto_package {
    ($(#[$doc:meta])* $name:ident, $package:literal) => {
        $(#[$doc])*
        #[allow(
            missing_docs,
            clippy::all,
            clippy::pedantic,
            clippy::nursery,
            clippy::unwrap_used,
            rustdoc::all
        )]
        pub mod $name {
            tonic::include_proto!($package);
        }
    };
}

proto_package!(
    /// Keyspace identity (`apipb`), referenced by `kvrpcpb::Context`.
    apipb,
    "apipb"
);
proto_package!(
    /// TiKV change-data capture: `ChangeData` service and its events.
    cdcpb,
    "cdcpb"
);
proto_package!(
    /// Deadlock wait-for entries (`deadlock`), referenced by key errors.
    deadlock,
    "deadlock"
);
proto_package!(
    /// Encryption metadata (`encryptionpb`), referenced by `metapb::Region`.
    encryptionpb,
    "encryptionpb"
);
proto_package!(
    /// Raft log entry types (`eraftpb`), referenced by admin commands.
    eraftpb,
    "eraftpb"
);
proto_package!(
    /// Region-level errors returned by TiKV.
    errorpb,
    "errorpb"
);
proto_package!(
    /// Transactional KV request/response messages.
    kvrpcpb,
    "kvrpcpb"
);
proto_package!(
    /// Cluster, store, region and peer metadata.
    metapb,
    "metapb"
);
proto_package!(
    /// PD service: members, TSO, regions, stores, GC safe points.
    pdpb,
    "pdpb"
);
proto_package!(
    /// Raft admin commands (`raft_cmdpb`), referenced by `cdcpb` admin events.
    raft_cmdpb,
    "raft_cmdpb"
);
proto_package!(
    /// Region-local raft state (`raft_serverpb`), referenced by merge commands.
    raft_serverpb,
    "raft_serverpb"
);
proto_package!(
    /// Resource-group consumption (`resource_manager`).
    resource_manager,
    "resource_manager"
);
proto_package!(
    /// TiKV KV service (`Tikv`); messages are in [`kvrpcpb`].
    tikvpb,
    "tikvpb"
);
proto_package!(
    /// Trace context (`tracepb`), referenced by `kvrpcpb::Context`.
    tracepb,
    "tracepb"
);

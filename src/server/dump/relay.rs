//! Relay sessions: a standby of an HA group follows the owner's binlog as an ordinary dump
//! client by file and position that set `@tibinlog_relay` before COM_BINLOG_DUMP. Its stream
//! is the ordinary one plus artificial relay events that no other client receives, with what
//! the standby's store needs besides the bytes (`BinlogStore::relay_txn`): after each
//! transaction its TiDB timestamps, and a snapshot point whenever the stream is caught up.
//! The events' layout is the protocol crate's (`binlog::events::relay`); they take no room in
//! the file (log_pos 0), so the positions of the stream stay the file's.

pub use tibinlog_protocol::binlog::events::relay::{Relay, RelayTag};

/// The user variable a relay client sets (any value).
pub const USER_VAR: &str = "tibinlog_relay";

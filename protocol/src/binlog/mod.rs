//! Binlog event codec: turns table definitions, row values and transaction metadata into the
//! byte-exact events of a MySQL 8.0 binlog file (and a MariaDB-flavoured subset).
//!
//! In: [`TableDef`]s, rows of [`crate::value::Value`], GTIDs and positions decided by the caller.
//! Out: complete events (header, body, CRC32) appended to a caller's `Vec<u8>`, with `log_pos`
//! equal to each event's end offset in its file. Nothing here does I/O.
//!
//! # Invariants
//! * `event_size` = bytes appended for the event; `log_pos` = start offset + `event_size`
//!   (0 only when the caller asks for it, for artificial events).
//! * FORMAT_DESCRIPTION always ends with the checksum-algorithm byte and a CRC32.
//! * Only binlog types of MySQL 5.6.4+ are emitted (no legacy temporal, VAR_STRING, ENUM/SET
//!   top-level types).
//! * A value that does not fit its column is an error; no partial event is left behind.
//!
//! # Layout
//! - [`header`]: common header, type codes, flags, [`BINLOG_MAGIC`].
//! - [`checksum`]: CRC32 and [`ChecksumAlg`].
//! - [`writer`]: [`EventBody`], [`EventWriter`] (framing).
//! - [`transaction`]: [`Transaction`], a GTID + BEGIN + rows + XID append.
//! - [`events`]: event bodies (FORMAT_DESCRIPTION, ROTATE, PREVIOUS_GTIDS, GTID, QUERY, XID,
//!   TABLE_MAP, rows, heartbeats, MariaDB events).
//! - [`table`]: [`TableDef`] / [`ColumnDef`] / [`ColumnKind`]: binlog types and metadata.
//! - [`value`]: row images. [`decimal`], [`time`], [`json`]: value formats.
//! - [`gtid`]: [`Sid`], [`GtidSet`] and the SID-block encoding.
//! - [`read`]: the read side of the event fields the server looks into.
//! - [`mariadb_stream`]: a MySQL-flavoured stream as a MariaDB peer reads it (collations,
//!   MariaDB GTIDs and FORMAT_DESCRIPTION, positions kept).
//! - [`codec`]: lenenc and a panic-free reader. [`error`]: [`BinlogError`].

pub mod checksum;
pub mod codec;
pub mod decimal;
pub mod error;
pub mod events;
pub mod gtid;
pub mod header;
pub mod json;
pub mod mariadb_stream;
pub mod read;
pub mod table;
pub mod time;
pub mod transaction;
pub mod value;
pub mod writer;

pub use checksum::ChecksumAlg;
pub use error::{BinlogError, Result};
pub use events::format_desc::FormatDescription;
pub use events::gtid::GtidEvent;
pub use events::mariadb::{
    MariadbAnnotateRows, MariadbBinlogCheckpoint, MariadbGtid, MariadbGtidEvent, MariadbGtidList,
};
pub use events::query::{QueryEvent, QueryStatus};
pub use events::rows::{RowsKind, RowsVersion, RowsWriter};
pub use events::table_map::{RowMetadata, TableMap};
pub use events::{Heartbeat, HeartbeatV2, PreviousGtids, Rotate, RowsQuery, Stop, Xid};
pub use gtid::{GtidSet, Sid};
pub use header::{flags, EventHeader, EventType, BINLOG_MAGIC, HEADER_LEN};
pub use table::{ColumnDef, ColumnKind, TableDef};
pub use transaction::Transaction;
pub use writer::{shift_log_pos, EventBody, EventMeta, EventWriter, LogPos};

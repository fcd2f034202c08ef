//! MySQL wire packets: the server half of the client/server protocol that a binlog master speaks.
//!
//! Bytes in, bytes out; no sockets. The server's connection loop reads bytes into a buffer,
//! asks [`packet::PacketCodec`] for complete payloads, decodes them with the modules below and
//! frames the payloads these modules build.
//!
//! ```text
//!  socket bytes ─► packet (framing, seq id) ─► handshake / auth_exchange (connection phase)
//!                                           └► command (command phase) ─► server logic
//!  server logic ─► response (OK / ERR / EOF / result sets) ─► packet ─► socket bytes
//! ```
//!
//! # Relation to mysql_common
//!
//! Packet layouts come from `mysql_common` wherever it has a type: the greeting
//! (`HandshakePacket`), the client's `HandshakeResponse` / `SslRequest`, `ErrPacket`,
//! `AuthSwitchRequest`, `AuthMoreData`, `ComRegisterSlave`. We hand-write what it lacks, gets
//! wrong, or parses unsafely on hostile input:
//! - OK / EOF packets (mysql_common only parses them);
//! - text result rows;
//! - column definitions (`Column::serialize` in 0.38.2 writes the column length before the
//!   charset, the reverse of the wire layout its own parser reads);
//! - `COM_BINLOG_DUMP` (mysql_common rejects unknown flag bits);
//! - `COM_BINLOG_DUMP_GTID` (mysql_common pre-allocates `n_sids` entries straight from the wire,
//!   so a forged count aborts the process).
//!
//! # Error handling
//!
//! Nothing here panics on bytes from the network. Decoders return [`WireError`]; the caller
//! decides from [`WireError::is_fatal`] whether the connection can continue (answer an ERR
//! packet) or must be closed (framing is lost).
//!
//! # Layout
//! - [`packet`]: packet framing (3-byte length, sequence id, 16 MiB continuation).
//! - [`handshake`]: HandshakeV10 greeting, client HandshakeResponse41 / SSLRequest, auth-phase packets.
//! - [`auth`]: password scramble verification (mysql_native_password, caching_sha2_password).
//! - [`auth_exchange`]: the authentication state machine after the client's response.
//! - [`response`]: OK, ERR, EOF, column definitions, text result sets.
//! - [`command`]: command-phase payloads, including the replication commands.
//! - [`stmt`]: the prepared-statement protocol (parameters, binary rows).
//! - [`errors`]: MySQL error codes with their SQL states.

pub mod auth;
pub mod auth_exchange;
pub mod command;
pub mod errors;
pub mod handshake;
pub mod packet;
pub mod response;
pub mod stmt;

/// Everything that can go wrong turning wire bytes into values.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A payload did not have the layout of the packet we expected. In the command phase the
    /// connection survives this: answer an ERR and read the next command.
    #[error("malformed {packet} packet: {detail}")]
    Malformed {
        /// Which packet was being decoded, e.g. `"COM_BINLOG_DUMP_GTID"`.
        packet: &'static str,
        /// What was wrong, for logs.
        detail: String,
    },
    /// A packet arrived with the wrong sequence id: the byte stream can no longer be trusted.
    #[error("packet sequence id {got}, expected {expected}")]
    SequenceMismatch { expected: u8, got: u8 },
    /// The peer sent (or announced) a payload larger than the configured limit.
    #[error("payload of at least {len} bytes exceeds the limit of {max} bytes")]
    PayloadTooLarge { len: usize, max: usize },
    /// The client lacks a capability the server requires (e.g. CLIENT_PROTOCOL_41).
    #[error("client does not support {0}")]
    UnsupportedClient(&'static str),
    /// A result-set row had a different number of values than the result set has columns:
    /// a bug in the caller, reported instead of sending a corrupt result set.
    #[error("result set row has {values} values for {columns} columns")]
    RowWidth { columns: usize, values: usize },
}

impl WireError {
    /// True when the connection must be closed rather than answered with an ERR packet.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, Self::Malformed { .. } | Self::RowWidth { .. })
    }

    pub(crate) fn malformed(packet: &'static str, detail: impl ToString) -> Self {
        Self::Malformed {
            packet,
            detail: detail.to_string(),
        }
    }
}

/// Result of the wire decoders.
pub type Result<T, E = WireError> = std::result::Result<T, E>;

/// Re-exports of the mysql_common flag sets our API speaks in, so callers need not depend on
/// mysql_common directly.
pub use mysql_common::constants::{CapabilityFlags, ColumnFlags, ColumnType, StatusFlags};

//! Connection phase packets: the server greeting, the client's answer, and the small packets of
//! the authentication dialogue.
//!
//! ```text
//! server                                   client
//!   HandshakeV10 (seq 0)  ───────────────►
//!                         ◄───────────────  SSLRequest (seq 1, 32 bytes)   [TLS only; then TLS
//!                                                                           handshake, and the
//!                         ◄───────────────  HandshakeResponse41 (seq 2)     rest is encrypted]
//!                         ◄───────────────  HandshakeResponse41 (seq 1)    [plain]
//!   AuthSwitchRequest / AuthMoreData / OK / ERR …   (driven by `auth_exchange`)
//! ```
//!
//! HandshakeV10 layout (serialised by `mysql_common::packets::HandshakePacket`):
//!
//! ```text
//! 1   protocol version = 10
//! n+1 server version, NUL-terminated
//! 4   connection id
//! 8   auth-plugin-data part 1 (nonce[0..8])
//! 1   filler 0x00
//! 2   capability flags, low 16 bits
//! 1   default collation
//! 2   status flags
//! 2   capability flags, high 16 bits
//! 1   auth-plugin-data length = 21
//! 10  reserved zeros
//! 13  auth-plugin-data part 2 (nonce[8..20] + 0x00)
//! n+1 auth plugin name, NUL-terminated
//! ```
//!
//! The nonce bytes are printable (0x21..=0x7E): connector-java turns the nonce into a Java
//! string with the platform charset, which corrupts other bytes.

use mysql_common::{
    io::ParseBuf,
    packets::{AuthMoreData, AuthSwitchRequest, HandshakePacket, HandshakeResponse, SslRequest},
    proto::{MyDeserialize, MySerialize},
};

use super::{
    auth::{AuthMethod, NONCE_LEN},
    CapabilityFlags, Result, StatusFlags, WireError,
};

/// Protocol version byte of HandshakeV10.
pub const PROTOCOL_VERSION: u8 = 10;

/// `utf8mb4_0900_ai_ci`: the default collation a MySQL 8.0 server announces.
pub const COLLATION_UTF8MB4_0900_AI_CI: u8 = 255;
/// `utf8mb4_general_ci`: what a MariaDB-flavoured greeting announces.
pub const COLLATION_UTF8MB4_GENERAL_CI: u8 = 45;

/// Bytes of an SSLRequest payload (a truncated HandshakeResponse41).
pub const SSL_REQUEST_LEN: usize = 32;

/// AuthMoreData status byte: caching_sha2 fast authentication succeeded, an OK follows.
pub const FAST_AUTH_SUCCESS: u8 = 0x03;
/// AuthMoreData status byte: the server needs the password (full authentication).
pub const PERFORM_FULL_AUTH: u8 = 0x04;
/// The client's request for the server's RSA public key during caching_sha2 full auth.
pub const REQUEST_PUBLIC_KEY: u8 = 0x02;

/// The capabilities we offer: everything a replica or JDBC driver needs, never COMPRESS or
/// QUERY_ATTRIBUTES (we do not parse either), SSL only when TLS is configured.
pub fn server_capabilities(tls: bool) -> CapabilityFlags {
    let mut caps = CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_FOUND_ROWS
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_INTERACTIVE
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_DEPRECATE_EOF;
    if tls {
        caps |= CapabilityFlags::CLIENT_SSL;
    }
    caps
}

/// The capabilities in force for a connection: those both sides announced.
pub fn negotiate(server: CapabilityFlags, client: CapabilityFlags) -> CapabilityFlags {
    server & client
}

/// The 20-byte authentication nonce, all bytes printable.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Scramble([u8; NONCE_LEN]);

impl std::fmt::Debug for Scramble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scramble(..)")
    }
}

impl Scramble {
    /// Maps 20 random bytes into the printable range 0x21..=0x7E.
    pub fn from_random(bytes: [u8; NONCE_LEN]) -> Self {
        // 94 printable values; the modulo bias (256 = 2·94 + 68) is irrelevant for a nonce.
        Self(bytes.map(|b| 0x21 + b % 94))
    }

    /// A fresh nonce from the standard library's per-process random hash keys.
    ///
    /// `RandomState` is seeded from the OS and every instance gets distinct keys, so nonces are
    /// unpredictable to a peer; a caller with a CSPRNG at hand may prefer [`Self::from_random`].
    pub fn generate() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut raw = [0u8; NONCE_LEN];
        let state = std::collections::hash_map::RandomState::new();
        for (i, chunk) in raw.chunks_mut(8).enumerate() {
            let mut h = state.build_hasher();
            h.write_usize(i);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default(),
            );
            let bytes = h.finish().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Self::from_random(raw)
    }

    /// The nonce bytes (what both sides hash).
    pub fn as_bytes(&self) -> &[u8; NONCE_LEN] {
        &self.0
    }
}

/// The server greeting (HandshakeV10).
#[derive(Debug, Clone)]
pub struct Greeting {
    /// Version string; clients parse `major.minor.patch` from it and pick statements by it.
    pub server_version: String,
    /// Non-zero and unique: clients `KILL` it to end an old dump connection.
    pub connection_id: u32,
    /// The nonce for this connection.
    pub scramble: Scramble,
    /// Usually [`server_capabilities`].
    pub capabilities: CapabilityFlags,
    /// [`COLLATION_UTF8MB4_0900_AI_CI`] for the MySQL flavour, [`COLLATION_UTF8MB4_GENERAL_CI`] for MariaDB.
    pub collation: u8,
    /// Usually SERVER_STATUS_AUTOCOMMIT.
    pub status: StatusFlags,
    /// The plugin the client should use for its first response.
    pub auth_method: AuthMethod,
}

impl Greeting {
    /// A MySQL-flavoured greeting with the recommended defaults.
    pub fn new(server_version: impl Into<String>, connection_id: u32, scramble: Scramble) -> Self {
        Self {
            server_version: server_version.into(),
            connection_id,
            scramble,
            capabilities: server_capabilities(false),
            collation: COLLATION_UTF8MB4_0900_AI_CI,
            status: StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            auth_method: AuthMethod::CachingSha2Password,
        }
    }

    /// Appends the greeting payload to `buf`.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        let nonce = self.scramble.as_bytes();
        let mut part1 = [0u8; 8];
        part1.copy_from_slice(&nonce[..8]);
        // Part 2 carries the remaining 12 bytes and a NUL, and the length byte says 21.
        let mut part2 = [0u8; 13];
        part2[..12].copy_from_slice(&nonce[8..]);
        let packet = HandshakePacket::new(
            PROTOCOL_VERSION,
            self.server_version.as_bytes(),
            self.connection_id,
            part1,
            Some(&part2[..]),
            self.capabilities,
            self.collation,
            self.status,
            Some(self.auth_method.name().as_bytes()),
        );
        packet.serialize(buf);
    }
}

/// The client's first packet after the greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientHello {
    /// The client wants TLS: upgrade the socket, then read a [`ClientHandshake`] (seq 2).
    SslRequest {
        capabilities: CapabilityFlags,
        max_packet_size: u32,
        collation: u8,
    },
    /// The login (HandshakeResponse41).
    Response(ClientHandshake),
}

/// The fields of the client's HandshakeResponse41 the server uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHandshake {
    /// What the client can do; intersect with ours via [`negotiate`].
    pub capabilities: CapabilityFlags,
    pub max_packet_size: u32,
    pub collation: u8,
    /// User name, lossily converted to UTF-8.
    pub user: String,
    /// The scramble (or, for some plugins, other data) computed with `auth_plugin`.
    pub auth_response: Vec<u8>,
    /// Initial schema, if CLIENT_CONNECT_WITH_DB.
    pub database: Option<String>,
    /// Plugin the client used for `auth_response`; `None` without CLIENT_PLUGIN_AUTH (then it
    /// is mysql_native_password).
    pub auth_plugin: Option<String>,
    /// Connection attributes (`_client_name`, `program_name`, …), sorted by key.
    pub connect_attrs: Vec<(String, String)>,
}

impl ClientHandshake {
    /// The method the client's response was computed with, if it is one we verify.
    pub fn auth_method(&self) -> Option<AuthMethod> {
        match &self.auth_plugin {
            None => Some(AuthMethod::NativePassword),
            Some(name) => AuthMethod::from_name(name.as_bytes()),
        }
    }
}

/// Decodes the client's answer to the greeting: an SSLRequest or a HandshakeResponse41.
///
/// Clients without CLIENT_PROTOCOL_41 (pre-4.1 protocol) are refused with
/// [`WireError::UnsupportedClient`].
pub fn decode_client_hello(payload: &[u8]) -> Result<ClientHello> {
    const WHAT: &str = "HandshakeResponse41";
    let Some(flags) = payload.get(..4) else {
        return Err(WireError::malformed(
            WHAT,
            "shorter than the capability flags",
        ));
    };
    let raw_caps = u32::from_le_bytes([flags[0], flags[1], flags[2], flags[3]]);
    let caps = CapabilityFlags::from_bits_truncate(raw_caps);
    if !caps.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
        return Err(WireError::UnsupportedClient("CLIENT_PROTOCOL_41"));
    }
    if payload.len() == SSL_REQUEST_LEN {
        if !caps.contains(CapabilityFlags::CLIENT_SSL) {
            return Err(WireError::malformed(
                WHAT,
                "32-byte packet without CLIENT_SSL",
            ));
        }
        let req = SslRequest::deserialize((), &mut ParseBuf(payload))
            .map_err(|e| WireError::malformed("SSLRequest", e))?;
        return Ok(ClientHello::SslRequest {
            capabilities: req.capabilities(),
            max_packet_size: req.max_packet_size(),
            collation: req.character_set(),
        });
    }
    if payload.len() < SSL_REQUEST_LEN {
        return Err(WireError::malformed(WHAT, "shorter than the fixed part"));
    }
    let resp = match HandshakeResponse::deserialize((), &mut ParseBuf(payload)) {
        Ok(resp) => resp,
        // Some clients set CLIENT_CONNECT_ATTRS and send no attributes; MySQL accepts that,
        // so retry without the flag before giving up.
        Err(first) if caps.contains(CapabilityFlags::CLIENT_CONNECT_ATTRS) => {
            let mut patched = payload.to_vec();
            let cleared = raw_caps & !CapabilityFlags::CLIENT_CONNECT_ATTRS.bits();
            patched[..4].copy_from_slice(&cleared.to_le_bytes());
            let resp = HandshakeResponse::deserialize((), &mut ParseBuf(&patched))
                .map_err(|_| WireError::malformed(WHAT, &first))?;
            return Ok(ClientHello::Response(client_handshake(&resp, payload)));
        }
        Err(e) => return Err(WireError::malformed(WHAT, e)),
    };
    Ok(ClientHello::Response(client_handshake(&resp, payload)))
}

/// `payload` is at least 32 bytes long (checked by the caller).
fn client_handshake(resp: &HandshakeResponse<'_>, payload: &[u8]) -> ClientHandshake {
    // mysql_common parses but does not expose max_packet_size (bytes 4..8).
    let max_packet_size = payload
        .get(4..8)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or_default();
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut connect_attrs: Vec<(String, String)> = resp
        .connect_attributes()
        .map(|m| m.into_iter().collect())
        .unwrap_or_default();
    connect_attrs.sort();
    ClientHandshake {
        capabilities: resp.capabilities(),
        max_packet_size,
        collation: resp.collation(),
        user: lossy(resp.user()),
        auth_response: resp.scramble_buf().to_vec(),
        database: resp.db_name().map(lossy),
        auth_plugin: resp.auth_plugin().map(|p| lossy(p.as_bytes())),
        connect_attrs,
    }
}

/// AuthSwitchRequest: asks the client to answer again with `method` over `nonce`.
///
/// ```text
/// 0xFE | plugin name NUL | nonce (20) | 0x00
/// ```
/// The trailing NUL is what MySQL sends (the nonce is a C string there); clients strip it.
pub fn auth_switch_request(method: AuthMethod, nonce: &Scramble) -> Vec<u8> {
    let mut data = Vec::with_capacity(NONCE_LEN + 1);
    data.extend_from_slice(nonce.as_bytes());
    data.push(0);
    let mut buf = Vec::new();
    AuthSwitchRequest::new(method.name().as_bytes(), data).serialize(&mut buf);
    buf
}

/// AuthMoreData: `0x01` followed by `data` (e.g. [`FAST_AUTH_SUCCESS`], [`PERFORM_FULL_AUTH`]).
pub fn auth_more_data(data: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(1 + data.len());
    AuthMoreData::new(data).serialize(&mut buf);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_printable_and_varies() {
        let a = Scramble::generate();
        let b = Scramble::generate();
        assert!(a.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b)));
        assert_ne!(a, b);
        let all = Scramble::from_random([0xff; 20]);
        assert!(all.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b)));
    }

    #[test]
    fn greeting_layout() {
        let g = Greeting::new("8.0.35-tibinlog", 7, Scramble::from_random([0; 20]));
        let mut buf = Vec::new();
        g.encode_into(&mut buf);
        assert_eq!(buf[0], 10);
        let v_end = 1 + "8.0.35-tibinlog".len();
        assert_eq!(&buf[1..v_end], b"8.0.35-tibinlog");
        assert_eq!(buf[v_end], 0);
        let rest = &buf[v_end + 1..];
        assert_eq!(&rest[..4], &7u32.to_le_bytes());
        assert_eq!(rest[12], 0, "filler");
        assert_eq!(rest[15], 255, "collation");
        assert_eq!(&rest[16..18], &[2, 0], "autocommit");
        assert_eq!(rest[20], 21, "auth-plugin-data length");
        assert_eq!(&rest[21..31], &[0; 10]);
        assert_eq!(rest[31 + 12], 0, "part 2 NUL");
        assert_eq!(&rest[44..], b"caching_sha2_password\0");
    }

    #[test]
    fn short_and_pre41_hellos_are_rejected() {
        assert!(decode_client_hello(&[]).is_err());
        assert!(matches!(
            decode_client_hello(&[0, 0, 0, 0, 0]),
            Err(WireError::UnsupportedClient(_))
        ));
        let mut ssl_no_flag = vec![0u8; 32];
        ssl_no_flag[1] = 0x02; // PROTOCOL_41 only
        assert!(decode_client_hello(&ssl_no_flag).is_err());
    }

    #[test]
    fn auth_switch_and_more_data_bytes() {
        let s = Scramble::from_random([1; 20]);
        let p = auth_switch_request(AuthMethod::NativePassword, &s);
        assert_eq!(p[0], 0xfe);
        assert_eq!(&p[1..23], b"mysql_native_password\0");
        assert_eq!(&p[23..43], s.as_bytes());
        assert_eq!(p[43], 0);
        assert_eq!(auth_more_data(&[FAST_AUTH_SUCCESS]), vec![0x01, 0x03]);
    }
}

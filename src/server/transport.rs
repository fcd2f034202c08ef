//! The transport under a connection: a byte stream (plain TCP, or TLS after the client's
//! SSLRequest), cut into MySQL packets with one sequence counter.
//!
//! It knows packets, not what they mean: the handshake, commands and dumps sit above it and it
//! imports none of them.

use tibinlog_protocol::wire::packet::{Packet, PacketCodec, DEFAULT_MAX_PAYLOAD};
use tibinlog_protocol::wire::WireError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A byte stream: plain TCP or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// What a TLS connection negotiated, in the words MySQL's status variables use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSession {
    /// `Ssl_version`: `TLSv1.3`, `TLSv1.2`.
    pub version: String,
    /// `Ssl_cipher`, OpenSSL's name (`TLS_AES_256_GCM_SHA384`, `ECDHE-RSA-AES256-GCM-SHA384`).
    pub cipher: String,
    /// The client certificate's subject common name; `None` without a certificate.
    pub peer_common_name: Option<String>,
    /// The client presented a certificate (verified against `tls_ca`).
    pub peer_certificate: bool,
}

impl TlsSession {
    fn of(conn: &tokio_rustls::rustls::ServerConnection) -> TlsSession {
        use tokio_rustls::rustls::ProtocolVersion;
        let version = match conn.protocol_version() {
            Some(ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
            Some(ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
            Some(v) => format!("{v:?}"),
            None => String::new(),
        };
        let cipher = conn
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .map(openssl_cipher_name)
            .unwrap_or_default();
        let first = conn.peer_certificates().and_then(|c| c.first());
        TlsSession {
            version,
            cipher,
            peer_common_name: first.and_then(|c| crate::security::common_name(c)),
            peer_certificate: first.is_some(),
        }
    }
}

/// OpenSSL's name of an IANA cipher suite name (what `Ssl_cipher` shows on MySQL).
pub fn openssl_cipher_name(iana: &str) -> String {
    if let Some(rest) = iana.strip_prefix("TLS13_") {
        return format!("TLS_{rest}");
    }
    let Some(rest) = iana.strip_prefix("TLS_") else {
        return iana.to_string();
    };
    let Some((kx, cipher)) = rest.split_once("_WITH_") else {
        return iana.to_string();
    };
    let kx = kx.replace('_', "-");
    let cipher = match cipher {
        "AES_128_GCM_SHA256" => "AES128-GCM-SHA256".to_string(),
        "AES_256_GCM_SHA384" => "AES256-GCM-SHA384".to_string(),
        "CHACHA20_POLY1305_SHA256" => "CHACHA20-POLY1305".to_string(),
        other => other.replace('_', "-"),
    };
    format!("{kx}-{cipher}")
}

/// Why a connection ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol: {0}")]
    Wire(#[from] WireError),
    #[error("client closed the connection")]
    Closed,
    #[error("TLS handshake: {0}")]
    Tls(String),
    #[error("authentication failed for user {user}")]
    AuthFailed { user: String },
    #[error("dump: {0}")]
    Dump(String),
    #[error("internal: {0}")]
    Internal(String),
}

/// Packet-level I/O over a (possibly TLS) stream with one sequence counter.
pub struct PacketIo {
    stream: Box<dyn Io>,
    rbuf: Vec<u8>,
    /// Bytes of `rbuf` already consumed.
    rpos: usize,
    pub(crate) codec: PacketCodec,
    wbuf: Vec<u8>,
    /// The session's `net_write_timeout`, for [`Self::flush_timed`].
    write_timeout: std::time::Duration,
    /// Bytes written to and read from the client (after TLS, the plaintext).
    sent: u64,
    received: u64,
    /// Where the bytes are also counted server-wide.
    metrics: Option<crate::metrics::ServerMetrics>,
}

/// Buffers larger than this after a packet (a big statement, a burst of events) are given
/// back, so that an idle connection holds a few KiB whatever it once sent or received.
const KEEP_BUFFER: usize = 64 << 10;

impl std::fmt::Debug for PacketIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketIo")
            .field("buffered", &(self.rbuf.len() - self.rpos))
            .field("pending_write", &self.wbuf.len())
            .finish()
    }
}

/// How long a write waits for a client that reads nothing: MySQL's default `net_write_timeout`.
pub const NET_WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl PacketIo {
    pub fn new(stream: Box<dyn Io>) -> Self {
        Self {
            stream,
            rbuf: Vec::with_capacity(4096),
            rpos: 0,
            codec: PacketCodec::new(DEFAULT_MAX_PAYLOAD),
            wbuf: Vec::with_capacity(4096),
            write_timeout: NET_WRITE_TIMEOUT,
            sent: 0,
            received: 0,
            metrics: None,
        }
    }

    /// Counts this connection's bytes in `metrics` too.
    pub fn count_into(&mut self, metrics: &crate::metrics::ServerMetrics) {
        self.metrics = Some(metrics.clone());
    }

    /// Bytes written to the client so far.
    pub fn sent_bytes(&self) -> u64 {
        self.sent
    }

    /// Bytes read from the client so far.
    pub fn received_bytes(&self) -> u64 {
        self.received
    }

    /// Reads one complete payload; `Err(Closed)` at end of stream.
    pub async fn read_packet(&mut self) -> Result<Packet, ConnError> {
        loop {
            if let Some(p) = self.codec.decode(&self.rbuf[self.rpos..])? {
                self.rpos += p.wire_len;
                if self.rpos == self.rbuf.len() {
                    self.rbuf.clear();
                    self.rpos = 0;
                    if self.rbuf.capacity() > KEEP_BUFFER {
                        self.rbuf.shrink_to(4096);
                    }
                }
                return Ok(p);
            }
            if self.rpos > 0 {
                self.rbuf.drain(..self.rpos);
                self.rpos = 0;
            }
            let n = self.stream.read_buf(&mut self.rbuf).await?;
            if n == 0 {
                return Err(ConnError::Closed);
            }
            self.received += n as u64;
            if let Some(m) = &self.metrics {
                m.received_bytes.inc_by(n as u64);
            }
        }
    }

    /// Reads raw bytes, bypassing framing (0 = the client closed the stream).
    pub async fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stream.read(buf).await?;
        self.received += n as u64;
        if let Some(m) = &self.metrics {
            m.received_bytes.inc_by(n as u64);
        }
        Ok(n)
    }

    /// Frames `payload` into the write buffer.
    pub fn queue(&mut self, payload: &[u8]) {
        self.codec.encode(payload, &mut self.wbuf);
    }

    /// Frames a payload made of `parts` (e.g. the 0x00 of a binlog event packet and the event).
    pub fn queue_parts(&mut self, parts: &[&[u8]]) {
        self.codec.encode_parts(parts, &mut self.wbuf);
    }

    /// Queues bytes that are already framed packets (their sequence ids from a clone of
    /// this codec, handed back with [`Self::codec`] afterwards).
    pub fn queue_framed(&mut self, bytes: &[u8]) {
        self.wbuf.extend_from_slice(bytes);
    }

    /// Bytes queued but not yet flushed.
    pub fn pending(&self) -> usize {
        self.wbuf.len()
    }

    /// [`Self::flush`] that fails with `TimedOut` when the client reads nothing for `limit`
    /// (MySQL's `net_write_timeout`): a client that stops reading must not hold the connection,
    /// nor the binlog file its dump is on, forever.
    pub async fn flush_within(&mut self, limit: std::time::Duration) -> std::io::Result<()> {
        match tokio::time::timeout(limit, self.flush()).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client read nothing for net_write_timeout",
            )),
        }
    }

    /// The limit [`Self::flush_timed`] applies (the session's `net_write_timeout`).
    pub fn set_write_timeout(&mut self, limit: std::time::Duration) {
        self.write_timeout = limit;
    }

    /// [`Self::flush_within`] the session's `net_write_timeout`.
    pub async fn flush_timed(&mut self) -> std::io::Result<()> {
        self.flush_within(self.write_timeout).await
    }

    /// Writes everything queued.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf).await?;
            let n = self.wbuf.len() as u64;
            self.sent += n;
            if let Some(m) = &self.metrics {
                m.sent_bytes.inc_by(n);
            }
            self.wbuf.clear();
            if self.wbuf.capacity() > 16 * KEEP_BUFFER {
                self.wbuf.shrink_to(KEEP_BUFFER);
            }
        }
        self.stream.flush().await
    }

    /// Queues and flushes one payload.
    pub async fn send(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.queue(payload);
        self.flush().await
    }

    /// Runs the server side of a TLS handshake on this stream and goes on inside the tunnel.
    /// The client starts the TLS handshake right after its SSLRequest: bytes already read are
    /// handed to the handshake, and the packet sequence goes on inside the tunnel.
    pub async fn upgrade_tls(
        &mut self,
        acceptor: &tokio_rustls::TlsAcceptor,
    ) -> Result<TlsSession, ConnError> {
        let codec = self.codec.clone();
        let old = std::mem::replace(self, PacketIo::new(Box::new(tokio::io::empty())));
        let stream = acceptor
            .accept(old.into_stream())
            .await
            .map_err(|e| ConnError::Tls(e.to_string()))?;
        let session = TlsSession::of(stream.get_ref().1);
        *self = PacketIo::new(Box::new(stream));
        self.codec = codec;
        Ok(session)
    }

    /// The stream, with any bytes already read but not consumed put back in front of it (a
    /// client starts its TLS handshake right behind its SSLRequest, without waiting).
    fn into_stream(self) -> Box<dyn Io> {
        let rest = self.rbuf[self.rpos..].to_vec();
        if rest.is_empty() {
            self.stream
        } else {
            Box::new(Prefixed {
                prefix: rest,
                pos: 0,
                inner: self.stream,
            })
        }
    }
}

/// A stream whose first bytes come from a buffer.
struct Prefixed {
    prefix: Vec<u8>,
    pos: usize,
    inner: Box<dyn Io>,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = buf.remaining().min(self.prefix.len() - self.pos);
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

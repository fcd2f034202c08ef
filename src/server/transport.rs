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
}

impl std::fmt::Debug for PacketIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketIo")
            .field("buffered", &(self.rbuf.len() - self.rpos))
            .field("pending_write", &self.wbuf.len())
            .finish()
    }
}

impl PacketIo {
    pub fn new(stream: Box<dyn Io>) -> Self {
        Self {
            stream,
            rbuf: Vec::with_capacity(4096),
            rpos: 0,
            codec: PacketCodec::new(DEFAULT_MAX_PAYLOAD),
            wbuf: Vec::with_capacity(4096),
            write_timeout: super::session::NET_WRITE_TIMEOUT,
        }
    }

    /// Reads one complete payload; `Err(Closed)` at end of stream.
    pub async fn read_packet(&mut self) -> Result<Packet, ConnError> {
        loop {
            if let Some(p) = self.codec.decode(&self.rbuf[self.rpos..])? {
                self.rpos += p.wire_len;
                if self.rpos == self.rbuf.len() {
                    self.rbuf.clear();
                    self.rpos = 0;
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
        }
    }

    /// Reads raw bytes, bypassing framing (0 = the client closed the stream).
    pub async fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.stream.read(buf).await
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
            self.wbuf.clear();
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
    ) -> Result<(), ConnError> {
        let codec = self.codec.clone();
        let old = std::mem::replace(self, PacketIo::new(Box::new(tokio::io::empty())));
        let stream = acceptor
            .accept(old.into_stream())
            .await
            .map_err(|e| ConnError::Tls(e.to_string()))?;
        *self = PacketIo::new(Box::new(stream));
        self.codec = codec;
        Ok(())
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

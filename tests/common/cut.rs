//! A MySQL-protocol-aware TCP proxy that cuts a replica's binlog dump in the middle of an
//! event: the connection drops after half of one event packet went through, as when a
//! load balancer or a dying server drops it. A cut between packets is an ordinary EOF to a
//! binlog client; a cut inside one is what a client must also survive.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// COM_BINLOG_DUMP and COM_BINLOG_DUMP_GTID.
const DUMP_COMMANDS: [u8; 2] = [0x12, 0x1e];

pub struct MidEventCutter {
    addr: SocketAddr,
    cuts: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
}

impl MidEventCutter {
    /// Forwards to `target`. On each connection that starts a binlog dump, once `after_events`
    /// event packets of at least `min_len` bytes went through, it forwards half of the next such
    /// packet and drops the connection; it does so `cuts` times in all.
    pub async fn start(
        target: SocketAddr,
        cuts: usize,
        after_events: usize,
        min_len: usize,
    ) -> MidEventCutter {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let done = Arc::new(AtomicUsize::new(0));
        let count = done.clone();
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = connections.clone();
        tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    return;
                };
                accepted.fetch_add(1, Ordering::SeqCst);
                let count = count.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut c_read, mut c_write) = inbound.into_split();
                    let (mut s_read, mut s_write) = outbound.into_split();
                    let dumping = Arc::new(std::sync::atomic::AtomicBool::new(false));
                    let seen = dumping.clone();
                    // Client to server: packets as they come, noting a dump command.
                    let up = tokio::spawn(async move {
                        while let Some(packet) = read_packet(&mut c_read).await {
                            if packet[3] == 0
                                && packet.len() > 4
                                && DUMP_COMMANDS.contains(&packet[4])
                            {
                                seen.store(true, Ordering::SeqCst);
                            }
                            if s_write.write_all(&packet).await.is_err() {
                                return;
                            }
                        }
                        let _ = s_write.shutdown().await;
                    });
                    // Server to client: whole packets, cutting one of them in half when due.
                    let mut events = 0usize;
                    while let Some(packet) = read_packet(&mut s_read).await {
                        let event = dumping.load(Ordering::SeqCst)
                            && packet.len() >= 4 + min_len
                            && packet[4] == 0;
                        if event {
                            events += 1;
                        }
                        if event
                            && events > after_events
                            && count
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                    (n < cuts).then_some(n + 1)
                                })
                                .is_ok()
                        {
                            let _ = c_write.write_all(&packet[..packet.len() / 2]).await;
                            let _ = c_write.flush().await;
                            break;
                        }
                        if c_write.write_all(&packet).await.is_err() {
                            break;
                        }
                    }
                    up.abort();
                    // Dropping both halves closes both sockets.
                });
            }
        });
        MidEventCutter {
            addr,
            cuts: done,
            connections,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections it has accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Connections it has cut so far.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

/// One whole packet, header included; `None` at EOF or on an error.
async fn read_packet<R: AsyncReadExt + Unpin>(r: &mut R) -> Option<Vec<u8>> {
    let mut header = [0u8; 4];
    r.read_exact(&mut header).await.ok()?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut packet = Vec::with_capacity(4 + len);
    packet.extend_from_slice(&header);
    packet.resize(4 + len, 0);
    r.read_exact(&mut packet[4..]).await.ok()?;
    Some(packet)
}

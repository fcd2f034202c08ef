//! Real etcd for the HA tests (Debian's `etcd-server`): members on loopback ports in a temp
//! dir, killed on drop; and a TCP proxy that can cut a client off from it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::peer::{find_tool, missing};

/// Upper bound of a wait for etcd to answer.
const READY: Duration = Duration::from_secs(30);

/// A single-member etcd.
pub struct Etcd {
    child: Option<Child>,
    bin: PathBuf,
    dir: tempfile::TempDir,
    client: SocketAddr,
    peer: SocketAddr,
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

impl Etcd {
    /// Starts one; `None` when etcd is not installed (outside CI: the test is skipped).
    pub async fn start() -> Option<Etcd> {
        let Some(bin) = find_tool("etcd") else {
            missing("etcd (Debian package etcd-server)");
            return None;
        };
        let mut e = Etcd {
            child: None,
            bin,
            dir: tempfile::tempdir().expect("tempdir"),
            client: free_addr(),
            peer: free_addr(),
        };
        e.spawn();
        e.wait_ready().await;
        Some(e)
    }

    fn spawn(&mut self) {
        let (c, p) = (
            format!("http://{}", self.client),
            format!("http://{}", self.peer),
        );
        let log = std::fs::File::create(self.dir.path().join("etcd.log")).expect("log");
        let child = Command::new(&self.bin)
            .args(["--name", "m1", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &c, "--advertise-client-urls", &c])
            .args([
                "--listen-peer-urls",
                &p,
                "--initial-advertise-peer-urls",
                &p,
            ])
            .args(["--initial-cluster", &format!("m1={p}")])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
    }

    /// Waits until it answers a status request.
    pub async fn wait_ready(&self) {
        let deadline = tokio::time::Instant::now() + READY;
        loop {
            let ok = async {
                let mut c = etcd_client::Client::connect([self.endpoint()], None).await?;
                c.status().await.map(|_| ())
            };
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(2), ok).await {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "etcd did not answer in {READY:?}; its log: {}",
                std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Its client URL.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.client)
    }

    pub fn client_addr(&self) -> SocketAddr {
        self.client
    }

    /// SIGKILL, then the same member started again on its data.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn();
        self.wait_ready().await;
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TCP proxy to `target` that can cut every connection through it (and refuse new ones)
/// until healed: a client partitioned from etcd while the others still reach it.
pub struct CutProxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
}

impl CutProxy {
    pub async fn start(target: SocketAddr) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (cut, cut_rx) = watch::channel(false);
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if *cut_rx.borrow() {
                    let _ = inbound.shutdown().await;
                    continue;
                }
                let mut cut_rx = cut_rx.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_rx.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        CutProxy { addr, cut }
    }

    /// The URL clients use instead of the target's.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

/// A virtual address in front of the members of a group: new connections go to the member it
/// points at, and pointing it elsewhere (or nowhere) drops every connection through it, as a
/// load balancer does when its health check moves. Consumers given this one address follow
/// the group.
pub struct Vip {
    addr: SocketAddr,
    target: watch::Sender<Option<SocketAddr>>,
}

impl Vip {
    pub async fn start() -> Vip {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (target, target_rx) = watch::channel(None::<SocketAddr>);
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let mut target_rx = target_rx.clone();
                let Some(to) = *target_rx.borrow_and_update() else {
                    let _ = inbound.shutdown().await;
                    continue;
                };
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(to).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = target_rx.changed() => {}
                    }
                });
            }
        });
        Vip { addr, target }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// New connections go to `to`; the ones through it so far are dropped.
    pub fn point(&self, to: Option<SocketAddr>) {
        self.target.send_if_modified(|t| {
            let changed = *t != to;
            *t = to;
            changed
        });
    }
}

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

/// One etcd member process.
struct EtcdMember {
    name: String,
    child: Option<Child>,
    client: SocketAddr,
    peer: SocketAddr,
}

/// An etcd cluster (one member, or three for the partition case).
pub struct Etcd {
    members: Vec<EtcdMember>,
    bin: PathBuf,
    dir: tempfile::TempDir,
}

/// `n` distinct free ports: every listener is held until all are bound, so the kernel cannot
/// hand the same port out twice (a cluster's members need distinct peer and client ports).
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    held.iter().map(|l| l.local_addr().expect("addr")).collect()
}

impl Etcd {
    /// Starts a single member; `None` when etcd is not installed (outside CI: the test is
    /// skipped).
    pub async fn start() -> Option<Etcd> {
        Etcd::start_cluster(1).await
    }

    /// Starts an `n`-member cluster and waits until each member answers.
    pub async fn start_cluster(n: usize) -> Option<Etcd> {
        let Some(bin) = find_tool("etcd") else {
            missing("etcd (Debian package etcd-server)");
            return None;
        };
        let addrs = free_addrs(2 * n);
        let mut e = Etcd {
            members: (1..=n)
                .map(|i| EtcdMember {
                    name: format!("m{i}"),
                    child: None,
                    client: addrs[2 * (i - 1)],
                    peer: addrs[2 * (i - 1) + 1],
                })
                .collect(),
            bin,
            dir: tempfile::tempdir().expect("tempdir"),
        };
        for i in 0..n {
            e.spawn(i);
        }
        for i in 0..n {
            e.wait_ready(i).await;
        }
        Some(e)
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    fn spawn(&mut self, i: usize) {
        let cluster: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect();
        let m = &self.members[i];
        let (c, p) = (format!("http://{}", m.client), format!("http://{}", m.peer));
        let log = std::fs::File::create(self.log_path(i)).expect("log");
        let child = Command::new(&self.bin)
            .args(["--name", &m.name, "--data-dir"])
            .arg(self.dir.path().join(format!("{}.data", m.name)))
            .args(["--listen-client-urls", &c, "--advertise-client-urls", &c])
            .args([
                "--listen-peer-urls",
                &p,
                "--initial-advertise-peer-urls",
                &p,
            ])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-token", "tibinlog-test"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            // As PD runs its embedded etcd (`enable-prevote`, default true): a member back from
            // a partition does not force an election with its higher term.
            .arg("--pre-vote")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i].child = Some(child);
    }

    /// Waits until member `i` answers a status request.
    async fn wait_ready(&self, i: usize) {
        let deadline = tokio::time::Instant::now() + READY;
        loop {
            let ok = async {
                let mut c = etcd_client::Client::connect([self.endpoint_of(i)], None).await?;
                c.status().await.map(|_| ())
            };
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(2), ok).await {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "etcd {} did not answer in {READY:?}; its log: {}",
                self.members[i].name,
                std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The first member's client URL.
    pub fn endpoint(&self) -> String {
        self.endpoint_of(0)
    }

    /// Member `i`'s client URL.
    pub fn endpoint_of(&self, i: usize) -> String {
        format!("http://{}", self.members[i].client)
    }

    pub fn client_addr(&self) -> SocketAddr {
        self.members[0].client
    }

    /// The index of the member that leads the raft group, as member `asked` sees it.
    pub async fn leader(&self, asked: usize) -> Option<usize> {
        let mut c = etcd_client::Client::connect([self.endpoint_of(asked)], None)
            .await
            .ok()?;
        let leader = c.status().await.ok()?.leader();
        let list = c.member_list().await.ok()?;
        let name = list
            .members()
            .iter()
            .find(|m| m.id() == leader)?
            .name()
            .to_owned();
        self.members.iter().position(|m| m.name == name)
    }

    /// Sends `sig` (`-STOP`, `-CONT`) to member `i`: a stopped member neither sends nor
    /// answers anything, as a member cut off by a network partition.
    pub fn signal(&self, i: usize, sig: &str) {
        let pid = self.members[i].child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(ok.success(), "kill {sig} etcd {}", self.members[i].name);
    }

    /// SIGKILL, then the same member started again on its data (the first member).
    pub async fn restart(&mut self) {
        self.kill_member(0);
        self.spawn(0);
        self.wait_ready(0).await;
    }

    fn kill_member(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn kill(&mut self) {
        for i in 0..self.members.len() {
            self.kill_member(i);
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
    connections: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Vip {
    pub async fn start() -> Vip {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (target, target_rx) = watch::channel(None::<SocketAddr>);
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let count = connections.clone();
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
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
        Vip {
            addr,
            target,
            connections,
        }
    }

    /// Connections it has forwarded so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(std::sync::atomic::Ordering::Relaxed)
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

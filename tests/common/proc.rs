//! `tibinlog` server processes for the tests that kill, stop and restart them, and a replica
//! that follows a server by GTID across its restarts (or across the members of an HA group).

#![allow(dead_code)]

use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::{BinlogStreamRequest, GnoInterval, Sid as MySid};
use serde_json::Value as Json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::app::opts;
use super::mysql_binlog::{Assembler, SeenTxn};
use super::parent;

/// Upper bound of any single wait.
pub const WAIT: Duration = Duration::from_secs(180);
/// Interval of polls and client reconnect attempts.
pub const POLL: Duration = Duration::from_millis(50);
/// Interval of the polls of a client's sessions while waiting for them to end.
const SIZE_POLL: Duration = Duration::from_millis(10);
/// `server_id` the streaming client registers with.
pub const CLIENT_SERVER_ID: u32 = 1001;

/// The `tibinlog` binary under test.
pub fn binary() -> PathBuf {
    std::env::var_os("TIBINLOG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tibinlog")))
}

/// The last `n` lines of a log file.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A `tibinlog` subprocess: stdout lines on a channel, stderr appended to a log file, killed on
/// drop.
pub struct Proc {
    pub name: &'static str,
    pub child: Child,
    pub lines: mpsc::UnboundedReceiver<String>,
    pub log: PathBuf,
    pub started: Instant,
}

impl Proc {
    pub fn spawn(name: &'static str, args: &[String], log: &Path) -> Proc {
        let err = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open log file");
        let mut child = parent::tibinlog_command(&binary(), args, err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn tibinlog {name}: {e}"));
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            name,
            child,
            lines: rx,
            log: log.to_path_buf(),
            started: Instant::now(),
        }
    }

    pub fn tail(&self) -> String {
        log_tail(&self.log, 60)
    }

    /// The next stdout line that is a JSON object with an `event`; `None` once stdout closed
    /// (the process is exiting).
    pub async fn next_event(&mut self, deadline: Instant) -> Option<Json> {
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "tibinlog {}: no output in time; log:\n{}",
                        self.name,
                        self.tail()
                    )
                })?;
            if let Ok(j) = serde_json::from_str::<Json>(&line) {
                if j.get("event").is_some() {
                    return Some(j);
                }
            }
        }
    }

    /// Waits for the `event` line.
    pub async fn wait_event(&mut self, event: &str) -> Json {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.next_event(deadline).await {
                Some(j) if j["event"] == event => return j,
                Some(_) => {}
                None => {
                    let st = self.exit_status().await;
                    panic!(
                        "tibinlog {} exited ({st}) before `{event}`; log:\n{}",
                        self.name,
                        self.tail()
                    );
                }
            }
        }
    }

    pub async fn exit_status(&mut self) -> ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("process exits in time")
            .expect("wait for the process")
    }

    /// SIGKILL, then reap. Panics if the process had already exited by itself.
    pub async fn kill9(&mut self) {
        if let Some(st) = self.child.try_wait().expect("try_wait") {
            panic!(
                "tibinlog {} had exited by itself ({st}); log:\n{}",
                self.name,
                self.tail()
            );
        }
        self.child.start_kill().expect("SIGKILL");
        self.exit_status().await;
    }
}

/// What the streaming client saw.
#[derive(Debug, Default)]
pub struct Follow {
    pub txns: Vec<SeenTxn>,
    /// When each of `txns` arrived.
    pub received_at: Vec<Instant>,
    /// Dump sessions that streamed.
    pub sessions: usize,
    /// Connection or dump requests that failed (server down).
    pub failed_connects: usize,
    /// Sessions that ended inside a transaction (dropped; it comes again).
    pub partial_dropped: usize,
    /// MySQL errors the server answered (1236 "more GTIDs than the master" would mean it had
    /// served a transaction it then lost).
    pub server_errors: Vec<String>,
    pub last_error: Option<String>,
    /// Connection attempts begun and finished (failed, or streamed and ended): equal once
    /// every session with a killed server has ended and its transactions are in `txns`.
    pub attempts_begun: usize,
    pub attempts_ended: usize,
    /// Keep a digest of each transaction's rows instead of the rows (long runs).
    pub digest: bool,
}

impl Follow {
    pub fn on_error(&mut self, e: &mysql_async::Error) {
        if let mysql_async::Error::Server(s) = e {
            self.server_errors.push(format!("{} {}", s.code, s.message));
        }
        self.last_error = Some(e.to_string());
    }
}

pub fn lock(f: &Mutex<Follow>) -> MutexGuard<'_, Follow> {
    f.lock().unwrap_or_else(|p| p.into_inner())
}

/// `uuid:1-n` for the transactions received, as the dump request carries it.
pub fn received_set(sid: [u8; 16], txns: &[SeenTxn]) -> Option<MySid<'static>> {
    let mut gnos: Vec<u64> = txns.iter().map(|t| t.gno).collect();
    gnos.sort_unstable();
    gnos.dedup();
    let mut s = MySid::new(sid);
    let mut i = 0;
    while i < gnos.len() {
        let mut j = i;
        while j + 1 < gnos.len() && gnos[j + 1] == gnos[j] + 1 {
            j += 1;
        }
        s = s.with_interval(GnoInterval::new(gnos[i], gnos[j] + 1));
        i = j + 1;
    }
    (!gnos.is_empty()).then_some(s)
}

/// A replica following the master by GTID across its restarts.
/// While `paused` is true it stays disconnected, as a replica that is stopped.
pub async fn follow(
    mut addr: watch::Receiver<Option<SocketAddr>>,
    mut paused: watch::Receiver<bool>,
    sid: [u8; 16],
    seen: Arc<Mutex<Follow>>,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        tokio::select! {
            _ = stop.cancelled() => return,
            r = paused.wait_for(|p| !*p) => r.map(|_| ()).expect("pause watch open"),
        }
        let Some(a) = *addr.borrow_and_update() else {
            break;
        };
        let set = {
            let mut f = lock(&seen);
            f.attempts_begun += 1;
            received_set(sid, &f.txns)
        };
        let open = async {
            let conn = mysql_async::Conn::new(opts(a, "root")).await?;
            let mut req = BinlogStreamRequest::new(CLIENT_SERVER_ID).with_gtid();
            if let Some(s) = set {
                req = req.with_gtid_set(vec![s]);
            }
            conn.get_binlog_stream(req).await
        };
        let opened = tokio::select! {
            _ = stop.cancelled() => return,
            r = tokio::time::timeout(WAIT, open) => r,
        };
        let mut stream = match opened {
            Ok(Ok(s)) => s,
            other => {
                {
                    let mut f = lock(&seen);
                    f.failed_connects += 1;
                    f.attempts_ended += 1;
                    match other {
                        Ok(Err(e)) => f.on_error(&e),
                        _ => f.last_error = Some("connect timed out".to_owned()),
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = addr.changed() => {}
                    _ = tokio::time::sleep(POLL) => {}
                }
                continue;
            }
        };
        lock(&seen).sessions += 1;
        // A new session: a transaction the last one left open is dropped and comes again.
        let mut asm = Assembler::default();
        loop {
            let ev = tokio::select! {
                _ = stop.cancelled() => return,
                _ = paused.wait_for(|p| *p) => None,
                ev = stream.next() => ev,
            };
            match ev {
                Some(Ok(ev)) => {
                    if let Some(mut t) = asm.on_event(&ev, &stream) {
                        let mut f = lock(&seen);
                        if f.digest {
                            t.digest_rows();
                        }
                        f.txns.push(t);
                        f.received_at.push(Instant::now());
                    }
                }
                Some(Err(e)) => {
                    lock(&seen).on_error(&e);
                    break;
                }
                None => break,
            }
        }
        let mut f = lock(&seen);
        if asm.in_txn() {
            f.partial_dropped += 1;
        }
        f.attempts_ended += 1;
    }
}

/// Waits until every session the client had with the killed server has ended; returns the
/// highest GNO it received.
pub async fn client_settled(seen: &Mutex<Follow>) -> u64 {
    let deadline = Instant::now() + WAIT;
    loop {
        {
            let f = lock(seen);
            if f.attempts_begun == f.attempts_ended {
                return f.txns.iter().map(|t| t.gno).max().unwrap_or(0);
            }
        }
        assert!(
            Instant::now() < deadline,
            "the client's session with the killed server never ended"
        );
        tokio::time::sleep(SIZE_POLL).await;
    }
}

//! Serving benchmarks of the replication server. Prints figures; asserts no time limit.
//!
//! Sections (`SERVE_BENCH=throughput,clients,latency,tailers,standby`; by default the first
//! three):
//!
//! * `throughput`: a binlog of `SERVE_ROWS` narrow rows (INT, VARCHAR(32), BIGINT) in
//!   transactions of `SERVE_TXN_ROWS`, written with the binlog store and served by our server,
//!   read whole by `mariadb-binlog --read-from-remote-server --raw --to-last-log`; then the same
//!   rows (same values, same transaction size) loaded into a throwaway MariaDB master
//!   (`log-bin`, `binlog_format=ROW`) and read the same way. Prints both and the ratio. Each
//!   master is also read by a raw COM_BINLOG_DUMP client that only counts packets, which shows
//!   the server apart from `mariadb-binlog` (it writes every event with its own syscalls, so
//!   it costs per event). `mariadb-binlog` is a GTID-aware MariaDB peer, so both masters send
//!   it MariaDB's GTID flavour: four events per transaction (the raw client gets our MySQL
//!   stream, five). One read takes about a second, so the two masters are read in
//!   `SERVE_ROUNDS` (5) alternating rounds and medians printed. `SERVE_MARIADB_ROW_METADATA`
//!   (MariaDB's default `NO_LOG`) sets the MariaDB master's `binlog_row_metadata`: `FULL` makes
//!   its TABLE_MAP events carry the optional metadata ours always carries.
//! * `clients`: `SERVE_CLIENTS` (100) raw COM_BINLOG_DUMP clients read the whole prepared
//!   binlog at once (non-blocking); prints the aggregate and the slowest client.
//! * `latency`: the simulated cluster (resolved-ts interval `LATENCY_RESOLVED_MS`, 200 ms) and a
//!   writer committing `LATENCY_ROWS_PER_SEC` (10 000) narrow rows per second in transactions of
//!   `LATENCY_TXN_ROWS` → the app (changefeed → store → server) → a `mysql_async` binlog stream.
//!   For every transaction: receive time (its XID event) − commit time, where commit time is
//!   the commit_ts physical part (the GTID event's `immediate_commit_timestamp`, which the
//!   store sets to it; the simulator's clock follows the wall clock in 20 ms steps) and,
//!   separately, the wall clock when the commit returned; that one is split at the moment the
//!   app's durable checkpoint passed the commit. Percentiles over `LATENCY_SECS` after
//!   `LATENCY_WARMUP_SECS`.
//! * `tailers`: the same with `SERVE_TAILERS` (1000) more blocking dump clients tailing the
//!   binlog from its start, run in a child process (this bench binary again) so that this
//!   process's RSS is the server's (and the simulator's, which grows with the data): prints
//!   the RSS before the clients connect, with them connected and idle (the difference per
//!   client), and at the end; and each tailer's receive − commit_ts over the window (from the
//!   GTID event's `immediate_commit_timestamp`, kept in a histogram of 0.1 ms buckets), after
//!   checking that every tailer received every transaction of the window.
//! * `standby`: the same with the app in an HA group (a real etcd 3.4, started here) and a
//!   second member that starts once the first owns the group and follows its binlog; a client
//!   on each from the start. Prints, per transaction, the standby's client's receive time minus
//!   the owner's client's: how far a consumer of the standby is behind one of the owner.
//!
//! `cargo bench --bench serve` (not criterion: each figure is one run over a large volume).

mod common;
use common::narrow_table;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use mysql_async::binlog::events::EventData;
use mysql_async::binlog::EventType as MyEventType;
use mysql_async::BinlogStreamRequest;
use tibinlog::app::{App, AppConfig};
use tibinlog::binlog_store::source::{StoreSource, WriterMsg};
use tibinlog::binlog_store::{BinlogStore, StoreConfig};
use tibinlog::model::Ts;
use tibinlog::mounter::{RowChange, RowOp};
use tibinlog::server::{EmptySchema, Server, ServerConfig};
use tibinlog::sim::cli::{Epoch, SimArgs, SimBuilder, WorkloadKind};
use tibinlog::sim::tidb::Ddl;
use tibinlog::tidb::key::{record_key, Handle};
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::auth::AuthMethod;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

#[path = "../tests/common/etcd.rs"]
mod etcd;
#[path = "../tests/common/peer.rs"]
mod peer;
// The narrow table of the read benchmarks; this one uses only its definition.
#[path = "common/narrow.rs"]
#[allow(dead_code)]
mod narrow;
use narrow::mariadb;
#[path = "common/util.rs"]
mod util;
use util::{env_num, free_port, mb};

/// VARCHAR(32) value of every row (16 bytes).
use narrow::NAME;
/// `c3` of row `i` of a transaction.
const C3_STEP: i64 = 1_000_003;
/// Event types counted in the binlogs.
const WRITE_ROWS_V1: u8 = 23;
const WRITE_ROWS_V2: u8 = 30;
const XID: u8 = 16;

fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

// ---------------------------------------------------------------------------------------------
// The prepared binlog and our server over it.

/// Values of row `i` of transaction `k` (both sides of the throughput comparison).
fn row_values(k: u64, i: usize, txn_rows: usize) -> (i64, i64) {
    (k as i64 * txn_rows as i64 + i as i64, i as i64 * C3_STEP)
}

/// A store holding the prepared binlog, open (its end watch stays live) while served.
struct Prepared {
    _dir: tempfile::TempDir,
    store: BinlogStore,
    rows: u64,
    txns: u64,
    /// Bytes of the binlog files.
    bytes: u64,
}

fn prepare_binlog(rows: u64, txn_rows: usize) -> Prepared {
    let t = narrow_table();
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = StoreConfig::new(dir.path().join("binlog"), 1, Sid([7; 16]));
    let (mut store, _) = BinlogStore::open(cfg).expect("open store");
    let txns = rows.div_ceil(txn_rows as u64);
    let mut last = Ts::ZERO;
    for k in 0..txns {
        let commit = Ts::compose(1_700_000_000_000 + k, 1);
        let start = Ts(commit.0 - 1);
        let batch: Vec<RowChange> = (0..txn_rows)
            .map(|i| {
                let (c1, c3) = row_values(k, i, txn_rows);
                RowChange {
                    table: t.clone(),
                    op: RowOp::Insert,
                    before: None,
                    after: Some(vec![
                        Value::Int(c1),
                        Value::Bytes(NAME.as_bytes().to_vec()),
                        Value::Int(c3),
                    ]),
                    start_ts: start,
                    commit_ts: commit,
                }
            })
            .collect();
        store.begin_txn(start, commit).expect("begin");
        store.write_rows(&batch).expect("rows");
        store.commit_txn().expect("commit");
        last = commit;
        if k % 1000 == 999 {
            store.flush(commit).expect("flush");
        }
    }
    store.flush(last).expect("flush");
    let bytes = store.files().list().iter().map(|(_, size)| size).sum();
    Prepared {
        _dir: dir,
        store,
        rows: txns * txn_rows as u64,
        txns,
        bytes,
    }
}

/// Our server over the prepared store; stops when `cancel` fires.
async fn serve(p: &Prepared, cancel: CancellationToken) -> SocketAddr {
    // No writer thread: a purge would be refused (the benchmark sends none).
    let (writer_tx, _) = tokio::sync::mpsc::channel::<WriterMsg<()>>(1);
    let source = StoreSource::new(p.store.files(), true, writer_tx);
    let cfg = ServerConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        users: std::sync::Arc::new(tibinlog::server::users::Users::single("root", "")),
        rsa_key: None,
        server_id: SERVER_ID,
        server_uuid: Sid([7; 16]),
        mariadb: false,
        tls: None,
        auth_plugin: AuthMethod::NativePassword,
        default_heartbeat: None,
        snapshot: None,
        max_binlog_size: 1 << 30,
        expire_logs_seconds: 0,
        net_write_timeout: tibinlog::server::session::NET_WRITE_TIMEOUT,
        limits: tibinlog::server::Limits::default(),
        capture: None,
        metrics: Default::default(),
    };
    let server = Server::bind(cfg, Arc::new(source), Arc::new(EmptySchema))
        .await
        .expect("bind");
    let addr = server.local_addr();
    tokio::spawn(async move { server.run(cancel).await.expect("server") });
    addr
}

// ---------------------------------------------------------------------------------------------
// Section 1: mariadb-binlog --raw against us and against MariaDB.

/// Events of a raw binlog file by type, and its size.
#[derive(Debug, Default)]
struct FileCount {
    bytes: u64,
    events: u64,
    rows_events: u64,
    xids: u64,
}

fn count_events(files: &[PathBuf]) -> FileCount {
    let mut c = FileCount::default();
    for f in files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
        assert_eq!(&data[..4], b"\xfebin", "{} is a binlog file", f.display());
        c.bytes += data.len() as u64;
        let mut at = 4;
        while at < data.len() {
            assert!(at + 19 <= data.len(), "{}: torn event at {at}", f.display());
            let size = u32::from_le_bytes(data[at + 9..at + 13].try_into().expect("4 bytes"));
            let size = size as usize;
            assert!(
                size >= 19 && at + size <= data.len(),
                "{}: bad event size at {at}",
                f.display()
            );
            c.events += 1;
            match data[at + 4] {
                WRITE_ROWS_V1 | WRITE_ROWS_V2 => c.rows_events += 1,
                XID => c.xids += 1,
                _ => {}
            }
            at += size;
        }
    }
    c
}

/// Runs `mariadb-binlog --raw` for the whole binlog from `first` into `out`; returns the time.
async fn mariadb_binlog_raw(
    tool: &Path,
    port: u16,
    user: &str,
    first: &str,
    out: &Path,
) -> Duration {
    let began = Instant::now();
    let res = tokio::process::Command::new(tool)
        .arg("--no-defaults")
        .args(["--read-from-remote-server", "--raw", "--to-last-log"])
        .arg(format!("--result-file={}/", out.display()))
        .args(["-h127.0.0.1", &format!("-P{port}"), &format!("-u{user}")])
        .arg(first)
        .output()
        .await
        .expect("run mariadb-binlog");
    let took = began.elapsed();
    assert!(
        res.status.success(),
        "mariadb-binlog failed:\n{}\n{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    took
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    v.sort();
    v
}

struct Side {
    took: Duration,
    count: FileCount,
    /// Bytes of the master's own binlog files.
    master_bytes: u64,
    /// The same binlog read by [`RawDump`] (a client that only counts).
    raw: DumpStats,
}

impl Side {
    fn print(&self, who: &str, rows: u64) {
        let s = self.took.as_secs_f64();
        println!(
            "  {who:<8} {rows} rows in {s:.3} s = {:.0} rows/s, {:.0} row events/s, {:.1} MB/s \
             (received {:.1} MB, {} events, {} row events, {} XIDs; master binlog {:.1} MB)",
            rows as f64 / s,
            self.count.rows_events as f64 / s,
            mb(self.count.bytes) / s,
            mb(self.count.bytes),
            self.count.events,
            self.count.rows_events,
            self.count.xids,
            mb(self.master_bytes),
        );
        let r = self.raw;
        let s = r.took.as_secs_f64();
        println!(
            "  {who:<8} raw dump client: {s:.3} s = {:.0} rows/s, {:.0} events/s, {:.1} MB/s",
            rows as f64 / s,
            r.events as f64 / s,
            mb(r.bytes) / s
        );
    }
}

/// A master to read: where it listens, as whom, what the raw client sets first.
struct Master<'a> {
    port: u16,
    user: &'a str,
    raw_init: &'a [&'a str],
    master_bytes: u64,
}

/// Reads `m` whole once with `mariadb-binlog --raw` and once with the raw client.
async fn read_once(tool: &Path, m: &Master<'_>, txns: u64) -> Side {
    let out = tempfile::tempdir().expect("temp dir");
    let took = mariadb_binlog_raw(tool, m.port, m.user, "binlog.000001", out.path()).await;
    let count = count_events(&files_in(out.path()));
    assert!(count.xids >= txns, "every transaction received");
    let addr = SocketAddr::from(([127, 0, 0, 1], m.port));
    let raw = RawDump::connect(addr, m.user, m.raw_init)
        .await
        .dump("binlog.000001", RAW_SERVER_ID)
        .await;
    assert!(raw.xids >= txns, "every transaction received");
    Side {
        took,
        count,
        master_bytes: m.master_bytes,
        raw,
    }
}

/// The round with the median `mariadb-binlog` time and the median raw-client time.
fn median(mut sides: Vec<Side>) -> Side {
    let n = sides.len() / 2;
    let mut raws: Vec<DumpStats> = sides.iter().map(|s| s.raw).collect();
    raws.sort_by_key(|r| r.took);
    sides.sort_by_key(|s| s.took);
    let mut m = sides.swap_remove(n);
    m.raw = raws[n];
    m
}

async fn throughput(p: &Prepared, addr: SocketAddr, txn_rows: usize) {
    let rounds = env_num("SERVE_ROUNDS", 5usize).max(1);
    println!(
        "== serving throughput: mariadb-binlog --raw (and a raw dump client), {} rows in {} \
         transactions of {txn_rows}; medians of {rounds} alternating rounds",
        p.rows, p.txns
    );
    let Some(tool) = find_tool("mariadb-binlog") else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "mariadb-binlog is not installed; run scripts/install-deps.sh"
        );
        println!("  skipped: mariadb-binlog is not installed (run scripts/install-deps.sh)");
        return;
    };
    let ours = Master {
        port: addr.port(),
        user: "root",
        raw_init: &[],
        master_bytes: p.bytes,
    };
    let first = read_once(&tool, &ours, p.txns).await;
    assert_eq!(first.count.xids, p.txns, "every transaction received");
    assert_eq!(
        first.count.rows_events, p.txns,
        "the raw copy has every rows event"
    );
    let Some((db, port)) = mariadb_master(p.txns, txn_rows).await else {
        median(vec![first]).print("tibinlog", p.rows);
        return;
    };
    let theirs = Master {
        port,
        user: "bench",
        // MariaDB GTID events, as mariadb-binlog gets them (MARIA_SLAVE_CAPABILITY_GTID).
        raw_init: &["SET @mariadb_slave_capability=4"],
        master_bytes: db
            .binlog_files("binlog")
            .iter()
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .sum(),
    };
    let (mut a, mut b) = (vec![first], Vec::new());
    for round in 0..rounds {
        b.push(read_once(&tool, &theirs, p.txns).await);
        if round + 1 < rounds {
            a.push(read_once(&tool, &ours, p.txns).await);
        }
    }
    let (ours, theirs) = (median(a), median(b));
    ours.print("tibinlog", p.rows);
    theirs.print("MariaDB", p.rows);
    let ratio = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64();
    println!(
        "  ratio tibinlog/MariaDB (rows/s): mariadb-binlog --raw {:.2}, raw dump client {:.2}",
        ratio(ours.took, theirs.took),
        ratio(ours.raw.took, theirs.raw.took)
    );
    drop(db);
}

/// Our server's id.
const SERVER_ID: u32 = 1;

/// Server id of the single raw dump client (differs from both masters').
const RAW_SERVER_ID: u32 = 900;

/// A MariaDB master loaded with the same rows (same values, same transaction size), and its port.
async fn mariadb_master(txns: u64, txn_rows: usize) -> Option<(mariadb::MariaDb, u16)> {
    let port = free_port();
    let port_arg = format!("--port={port}");
    // MariaDB's default leaves TABLE_MAP without optional metadata; `FULL` makes it carry what
    // ours always does (column names, signedness, charsets, primary key).
    let metadata = std::env::var("SERVE_MARIADB_ROW_METADATA").unwrap_or_else(|_| "NO_LOG".into());
    let metadata_arg = format!("--binlog-row-metadata={metadata}");
    println!("  MariaDB master with {metadata_arg}");
    let db = mariadb::MariaDb::start(&[
        &metadata_arg,
        "--skip-networking=0",
        "--bind-address=127.0.0.1",
        &port_arg,
        "--skip-name-resolve",
        "--log-bin=binlog",
        "--binlog-format=ROW",
        // Our binlog has no statement text; MariaDB would log it in ANNOTATE_ROWS events.
        "--binlog-annotate-row-events=OFF",
        "--max-binlog-size=1073741824",
        // Loading speed only: durability does not change what is served.
        "--sync-binlog=0",
        "--innodb-flush-log-at-trx-commit=0",
        "--innodb-buffer-pool-size=268435456",
    ])?;
    db.sql(
        "CREATE USER bench@'%'; GRANT ALL PRIVILEGES ON *.* TO bench@'%'; \
         CREATE DATABASE bench; \
         CREATE TABLE bench.narrow (c1 INT NOT NULL PRIMARY KEY, c2 VARCHAR(32), c3 BIGINT) \
         DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    );
    let began = Instant::now();
    load_mariadb(&db, txns, txn_rows);
    println!(
        "  MariaDB loaded {txns} transactions in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    Some((db, port))
}

/// One `BEGIN; INSERT … VALUES (…), …; COMMIT;` per transaction, piped into the client.
fn load_mariadb(db: &mariadb::MariaDb, txns: u64, txn_rows: usize) {
    use std::io::Write;
    let mut child = db
        .client()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start mariadb client");
    {
        let stdin = child.stdin.as_mut().expect("client stdin");
        let mut w = std::io::BufWriter::with_capacity(1 << 20, stdin);
        for k in 0..txns {
            write!(w, "BEGIN;INSERT INTO bench.narrow VALUES ").expect("write");
            for i in 0..txn_rows {
                let (c1, c3) = row_values(k, i, txn_rows);
                let sep = if i == 0 { "" } else { "," };
                write!(w, "{sep}({c1},'{NAME}',{c3})").expect("write");
            }
            writeln!(w, ";COMMIT;").expect("write");
        }
        w.flush().expect("flush");
    }
    let st = child.wait().expect("mariadb client");
    assert!(st.success(), "loading MariaDB failed");
}

// ---------------------------------------------------------------------------------------------
// Section 2: many concurrent dump clients.

/// A minimal replication client: native-password login with an empty password, then one
/// COM_BINLOG_DUMP read to its EOF.
struct RawDump {
    stream: BufReader<TcpStream>,
    seq: u8,
    buf: Vec<u8>,
}

#[derive(Debug, Clone, Copy, Default)]
struct DumpStats {
    took: Duration,
    bytes: u64,
    events: u64,
    rows_events: u64,
    xids: u64,
}

impl RawDump {
    /// Logs in and announces CRC32 checksums, then runs `sets` (more `SET` statements).
    async fn connect(addr: SocketAddr, user: &str, sets: &[&str]) -> RawDump {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let mut c = RawDump {
            stream: BufReader::with_capacity(256 << 10, tcp),
            seq: 0,
            buf: Vec::with_capacity(64 << 10),
        };
        c.read().await;
        assert_eq!(c.buf.first(), Some(&10), "handshake v10");
        // PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | LONG_PASSWORD | TRANSACTIONS
        let caps: u32 = 0x200 | 0x8000 | 0x80000 | 0x1 | 0x2000;
        let mut p = Vec::new();
        p.extend_from_slice(&caps.to_le_bytes());
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(255);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(0); // empty auth response: empty password
        p.extend_from_slice(b"mysql_native_password\0");
        c.write(&p).await;
        c.read().await;
        if c.buf.first() == Some(&0xfe) {
            // Auth switch (the app's default plugin): an empty password answers empty.
            c.write(&[]).await;
            c.read().await;
        }
        assert_eq!(c.buf.first(), Some(&0), "login OK");
        for sql in ["SET @master_binlog_checksum='CRC32'"].iter().chain(sets) {
            let mut p = vec![0x03];
            p.extend_from_slice(sql.as_bytes());
            c.command(&p).await;
            assert_eq!(c.buf.first(), Some(&0), "{sql}: OK");
        }
        c
    }

    /// Like [`RawDump::connect`] with small buffers (a tailer reads a few KiB at a time).
    async fn connect_small(addr: SocketAddr, user: &str) -> RawDump {
        let mut c = RawDump::connect(addr, user, &[]).await;
        let tcp = c.stream.into_inner();
        c.stream = BufReader::with_capacity(16 << 10, tcp);
        c.buf = Vec::with_capacity(4 << 10);
        c
    }

    async fn write(&mut self, payload: &[u8]) {
        let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(self.seq);
        self.seq = self.seq.wrapping_add(1);
        p.extend_from_slice(payload);
        let s = self.stream.get_mut();
        s.write_all(&p).await.expect("write");
    }

    async fn command(&mut self, payload: &[u8]) {
        self.seq = 0;
        self.write(payload).await;
        self.read().await;
    }

    /// Reads one payload (joining 16 MiB continuation packets) into `buf`.
    async fn read(&mut self) {
        self.buf.clear();
        loop {
            let mut h = [0u8; 4];
            self.stream.read_exact(&mut h).await.expect("read header");
            let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
            self.seq = h[3].wrapping_add(1);
            let at = self.buf.len();
            self.buf.resize(at + len, 0);
            self.stream
                .read_exact(&mut self.buf[at..])
                .await
                .expect("read body");
            if len < 0xff_ffff {
                return;
            }
        }
    }

    /// COM_BINLOG_DUMP from `file`:4, non-blocking, until EOF.
    async fn dump(mut self, file: &str, server_id: u32) -> DumpStats {
        let began = Instant::now();
        let mut p = vec![0x12];
        p.extend_from_slice(&4u32.to_le_bytes());
        p.extend_from_slice(&1u16.to_le_bytes()); // BINLOG_DUMP_NON_BLOCK
        p.extend_from_slice(&server_id.to_le_bytes());
        p.extend_from_slice(file.as_bytes());
        self.seq = 0;
        self.write(&p).await;
        let mut s = DumpStats::default();
        loop {
            self.read().await;
            match self.buf.first() {
                Some(0) if self.buf.len() >= 20 => {
                    s.events += 1;
                    s.bytes += self.buf.len() as u64 - 1;
                    match self.buf[5] {
                        WRITE_ROWS_V1 | WRITE_ROWS_V2 => s.rows_events += 1,
                        XID => s.xids += 1,
                        _ => {}
                    }
                }
                Some(0xfe) if self.buf.len() < 9 => break,
                _ => panic!(
                    "unexpected packet in the dump: {:?}",
                    &self.buf[..self.buf.len().min(64)]
                ),
            }
        }
        s.took = began.elapsed();
        s
    }
}

async fn clients(p: &Prepared, addr: SocketAddr, n: usize) {
    println!(
        "== {n} concurrent dump clients, non-blocking, whole binlog ({} rows, {:.1} MB) each",
        p.rows,
        mb(p.bytes)
    );
    let barrier = Arc::new(tokio::sync::Barrier::new(n + 1));
    let mut tasks = Vec::new();
    for i in 0..n {
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let c = RawDump::connect(addr, "root", &[]).await;
            barrier.wait().await;
            c.dump("binlog.000001", 1000 + i as u32).await
        }));
    }
    barrier.wait().await;
    let began = Instant::now();
    let mut all = Vec::new();
    for t in tasks {
        all.push(t.await.expect("client task"));
    }
    let wall = began.elapsed().as_secs_f64();
    for s in &all {
        assert_eq!(s.xids, p.txns, "every client got every transaction");
    }
    let bytes: u64 = all.iter().map(|s| s.bytes).sum();
    let rows = p.rows * n as u64;
    all.sort_by_key(|s| s.took);
    let slowest = all[all.len() - 1];
    let median = all[all.len() / 2];
    println!(
        "  aggregate: {rows} rows in {wall:.3} s = {:.0} rows/s, {:.0} events/s, {:.1} MB/s",
        rows as f64 / wall,
        all.iter().map(|s| s.events).sum::<u64>() as f64 / wall,
        mb(bytes) / wall
    );
    for (what, s) in [
        ("fastest", all[0]),
        ("median", median),
        ("slowest", slowest),
    ] {
        let t = s.took.as_secs_f64();
        println!(
            "  {what} client: {t:.3} s = {:.0} rows/s, {:.1} MB/s",
            p.rows as f64 / t,
            mb(s.bytes) / t
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Section 3: commit-to-client latency through the whole app.

fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A transaction the writer committed.
#[derive(Debug, Clone, Copy)]
struct Sent {
    start_ts: u64,
    commit_ts: u64,
    /// Wall clock when the commit returned (µs since the epoch).
    wall_us: u64,
}

/// A transaction the client received (at its XID event).
#[derive(Debug, Clone, Copy)]
struct Received {
    xid: u64,
    /// `immediate_commit_timestamp` of its GTID event (µs).
    commit_us: u64,
    recv_us: u64,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn print_latency(what: &str, mut ms: Vec<f64>) {
    ms.sort_by(f64::total_cmp);
    println!(
        "  {what}: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} transactions)",
        percentile(&ms, 0.50),
        percentile(&ms, 0.90),
        percentile(&ms, 0.99),
        ms.last().copied().unwrap_or(f64::NAN),
        ms.len()
    );
}

/// A blocking dump (non-zero server id) from `binlog.000001:4` at `addr`: every transaction
/// received (at its XID event) and the last XID.
fn spawn_client(
    addr: SocketAddr,
) -> (
    Arc<Mutex<Vec<Received>>>,
    Arc<AtomicU64>,
    tokio::task::JoinHandle<()>,
) {
    let received = Arc::new(Mutex::new(Vec::<Received>::new()));
    let last_xid = Arc::new(AtomicU64::new(0));
    let client = {
        let (received, last_xid) = (received.clone(), last_xid.clone());
        tokio::spawn(async move {
            let opts = util::mysql_opts(addr.port(), "root");
            let conn = mysql_async::Conn::new(opts).await.expect("connect");
            let mut stream = conn
                .get_binlog_stream(
                    BinlogStreamRequest::new(77)
                        .with_filename(b"binlog.000001")
                        .with_pos(4),
                )
                .await
                .expect("binlog stream");
            let mut commit_us = 0;
            while let Some(ev) = stream.next().await {
                let ev = ev.expect("event");
                let ty = ev.header().event_type();
                if !matches!(ty, Ok(MyEventType::GTID_EVENT | MyEventType::XID_EVENT)) {
                    continue;
                }
                match ev.read_data().expect("event decodes") {
                    Some(EventData::GtidEvent(g)) => commit_us = g.immediate_commit_timestamp(),
                    Some(EventData::XidEvent(x)) => {
                        let recv_us = wall_us();
                        received.lock().expect("received").push(Received {
                            xid: x.xid,
                            commit_us,
                            recv_us,
                        });
                        last_xid.store(x.xid, Ordering::Release);
                    }
                    _ => {}
                }
            }
        })
    };
    (received, last_xid, client)
}

/// An HA group's owner config: `instance`, on `etcd`.
fn ha(cfg: &mut AppConfig, etcd: &etcd::Etcd, instance: &str) {
    cfg.instance_id = Some(instance.into());
    cfg.ha = Some(tibinlog::app::HaConfig {
        etcd: vec![etcd.endpoint()],
        prefix: Some("/bench".into()),
        lease_ttl: Duration::from_secs(10),
        advertise: None,
        user: "root".into(),
        password: String::new(),
    });
}

async fn latency(with_standby: bool, tailers: usize) {
    let rows_per_sec: f64 = env_num("LATENCY_ROWS_PER_SEC", 10_000.0);
    let txn_rows: usize = env_num("LATENCY_TXN_ROWS", 10);
    let warmup = Duration::from_secs_f64(env_num("LATENCY_WARMUP_SECS", 5.0));
    let measure = Duration::from_secs_f64(env_num("LATENCY_SECS", 25.0));
    let resolved = Duration::from_millis(env_num("LATENCY_RESOLVED_MS", 200));
    println!(
        "== commit-to-client latency: {rows_per_sec} rows/s in transactions of {txn_rows}, \
         resolved ts every {} ms, {} s measured after {} s warm-up",
        resolved.as_millis(),
        measure.as_secs_f64(),
        warmup.as_secs_f64()
    );
    let sim = SimBuilder::new(SimArgs {
        stores: 3,
        workload: WorkloadKind::None,
        seed: Some(1),
        resolved_ts_interval: resolved,
        // The clock follows the wall clock, so commit_ts is a wall time.
        epoch_ms: Epoch::Now,
        progress_interval: Duration::from_secs(3600),
        ..SimArgs::default()
    })
    .start(CancellationToken::new())
    .await
    .expect("sim");
    let cluster = sim.cluster().clone();
    let tidb = sim.tidb();
    let table_id = cluster
        .apply(|core| {
            let mut t = tidb.lock().expect("tidb");
            let out = t
                .execute_ddl(
                    core,
                    &Ddl::CreateTable {
                        db: "test".into(),
                        table: narrow::narrow_table(),
                    },
                )
                .expect("create");
            let id = t.table("test", "narrow").expect("narrow").info.id;
            Ok((id, out.outputs))
        })
        .expect("ddl");
    // Three regions, one led by each store: the resolved ts is the minimum over all of them.
    let expected = (rows_per_sec * (warmup + measure).as_secs_f64() * 1.2) as i64;
    for i in 1..3 {
        let at = record_key(table_id, &Handle::Int(expected * i / 3));
        cluster.split_at(&at).await.expect("split");
    }
    for (i, r) in cluster.regions().iter().enumerate() {
        let _ = cluster.transfer_leader(r.id(), 1 + (i as u64 % 3)).await;
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = AppConfig::new(
        vec![cluster.pd_url()],
        "127.0.0.1:0".parse().expect("addr"),
        dir.path(),
    );
    cfg.start_ts = Some(Ts(cluster.tso().0));
    cfg.progress_interval = Duration::from_secs(3600);
    cfg.limits.max_connections = cfg.limits.max_connections.max(tailers as u32 + 16);
    let etcd = if with_standby {
        match etcd::Etcd::start().await {
            Some(e) => Some(e),
            None => return,
        }
    } else {
        None
    };
    if let Some(e) = &etcd {
        ha(&mut cfg, e, "a");
    }
    let app = App::start(cfg.clone(), CancellationToken::new())
        .await
        .expect("app start");
    let addr = app.local_addr();
    // With a standby: it starts once the first member owns the group, and follows it.
    let standby_dir = tempfile::tempdir().expect("temp dir");
    let standby = match &etcd {
        Some(e) => {
            let observer = tibinlog::ha::Candidate::connect(tibinlog::ha::ElectionConfig {
                endpoints: vec![e.endpoint()],
                prefix: "/bench".into(),
                member: tibinlog::ha::MemberInfo {
                    instance_id: "observer".into(),
                    mysql: String::new(),
                },
                lease_ttl: Duration::from_secs(10),
            })
            .await
            .expect("etcd");
            let deadline = Instant::now() + Duration::from_secs(60);
            while !matches!(observer.owner().await, Ok(Some(o)) if o.instance_id == "a") {
                assert!(
                    Instant::now() < deadline,
                    "the first member never owned the group"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut b = cfg.clone();
            b.data_dir = standby_dir.path().to_path_buf();
            ha(&mut b, e, "b");
            let b = App::start(b, CancellationToken::new())
                .await
                .expect("standby start");
            Some((b, observer))
        }
        None => None,
    };

    // When each checkpoint became durable (the writer flushed up to it).
    let flushed = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let checkpoints = {
        let flushed = flushed.clone();
        let mut cp = app.checkpoint();
        tokio::spawn(async move {
            while cp.changed().await.is_ok() {
                let ts = cp.borrow_and_update().0;
                flushed.lock().expect("flushed").push((ts, wall_us()));
            }
        })
    };

    // The client: a blocking dump (non-zero server id) from the start; with a standby, one
    // on each member.
    let (received, last_xid, client) = spawn_client(addr);
    let mut tail = if tailers > 0 {
        Some(Tailers::start(addr, tailers).await)
    } else {
        None
    };
    let standby_client = standby.as_ref().map(|(b, _)| spawn_client(b.local_addr()));

    // The writer: paced commits on a thread of its own (commits take the cluster's lock).
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (cluster, tidb, stop) = (cluster.clone(), tidb.clone(), stop.clone());
        std::thread::spawn(move || {
            let period = Duration::from_secs_f64(txn_rows as f64 / rows_per_sec);
            let pad = "x".repeat(24);
            let began = Instant::now();
            let mut sent = Vec::new();
            let mut id = 0i64;
            for k in 0u32.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // Pacing: commit k is due at k periods after the start.
                let due = began + period * k;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let (start_ts, commit_ts) = cluster
                    .apply(|core| {
                        let mut t = tidb.lock().expect("tidb");
                        let mut txn = t.begin(core);
                        for _ in 0..txn_rows {
                            id += 1;
                            let row = [
                                Value::Int(id),
                                Value::Int(id * 7),
                                Value::Bytes(format!("{pad}{id:08}").into_bytes()),
                            ];
                            txn.insert("test", "narrow", &row).expect("insert");
                        }
                        let c = txn.commit().expect("commit");
                        Ok(((c.start_ts.0, c.commit_ts.0), c.outputs))
                    })
                    .expect("commit");
                sent.push(Sent {
                    start_ts,
                    commit_ts,
                    wall_us: wall_us(),
                });
            }
            sent
        })
    };

    let began_us = wall_us();
    if let Some(t) = &mut tail {
        let from = began_us + warmup.as_micros() as u64;
        t.say(&format!(
            "window {from} {}",
            from + measure.as_micros() as u64
        ))
        .await;
    }
    tokio::time::sleep(warmup + measure).await;
    stop.store(true, Ordering::Relaxed);
    let sent = writer.join().expect("writer thread");
    let last = sent.last().expect("the writer committed").start_ts;
    // Wait (bounded) for the client to receive the last transaction.
    let deadline = Instant::now() + Duration::from_secs(60);
    while last_xid.load(Ordering::Acquire) < last {
        assert!(
            Instant::now() < deadline,
            "the client did not receive the last transaction within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.abort();
    checkpoints.abort();
    let tailed = match tail {
        Some(mut t) => Some(t.finish(last).await),
        None => None,
    };
    let (rss_end, hwm_end) = util::rss("self");
    let received = std::mem::take(&mut *received.lock().expect("received"));
    let flushed = std::mem::take(&mut *flushed.lock().expect("flushed"));
    // The standby's client receives the last transaction too.
    let standby_received = match standby_client {
        Some((r, last_b, c)) => {
            let deadline = Instant::now() + Duration::from_secs(60);
            while last_b.load(Ordering::Acquire) < last {
                assert!(
                    Instant::now() < deadline,
                    "the standby's client did not receive the last transaction within 60 s"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            c.abort();
            let r = std::mem::take(&mut *r.lock().expect("received"));
            Some(r)
        }
        None => None,
    };
    if let Some((b, _observer)) = standby {
        b.stop().await.expect("standby stop");
    }
    app.stop().await.expect("app stop");
    sim.shutdown().await.expect("sim shutdown");

    let by_xid: HashMap<u64, Received> = received.iter().map(|r| (r.xid, *r)).collect();
    let from = began_us + warmup.as_micros() as u64;
    let to = from + measure.as_micros() as u64;
    let window: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.wall_us >= from && s.wall_us < to)
        .collect();
    let mut vs_ts = Vec::new();
    let mut vs_wall = Vec::new();
    let mut to_durable = Vec::new();
    let mut durable_to_client = Vec::new();
    for s in &window {
        let r = by_xid
            .get(&s.start_ts)
            .unwrap_or_else(|| panic!("transaction {} not received", s.start_ts));
        assert_eq!(
            r.commit_us,
            (s.commit_ts >> 18) * 1000,
            "immediate_commit_timestamp is the commit_ts physical part"
        );
        vs_ts.push(r.recv_us.saturating_sub(r.commit_us) as f64 / 1000.0);
        vs_wall.push(r.recv_us.saturating_sub(s.wall_us) as f64 / 1000.0);
        let i = flushed.partition_point(|(ts, _)| *ts < s.commit_ts);
        let &(_, durable_us) = flushed
            .get(i)
            .unwrap_or_else(|| panic!("no checkpoint at or after {}", s.commit_ts));
        to_durable.push(durable_us.saturating_sub(s.wall_us) as f64 / 1000.0);
        durable_to_client.push(r.recv_us.saturating_sub(durable_us) as f64 / 1000.0);
    }
    let secs = measure.as_secs_f64();
    println!(
        "  achieved {:.0} rows/s ({:.0} transactions/s) in the window; {} transactions sent in all",
        window.len() as f64 * txn_rows as f64 / secs,
        window.len() as f64 / secs,
        sent.len()
    );
    if let Some(rb) = &standby_received {
        let b_by_xid: HashMap<u64, u64> = rb.iter().map(|r| (r.xid, r.recv_us)).collect();
        let mut lag = Vec::new();
        let mut b_vs_wall = Vec::new();
        for s in &window {
            let a = by_xid[&s.start_ts].recv_us;
            let b = *b_by_xid.get(&s.start_ts).unwrap_or_else(|| {
                panic!("transaction {} not received from the standby", s.start_ts)
            });
            lag.push((b as f64 - a as f64) / 1000.0);
            b_vs_wall.push(b.saturating_sub(s.wall_us) as f64 / 1000.0);
        }
        println!("  a standby following the owner, each with a client from the start:");
        print_latency("standby's client - owner's client (receive)", lag);
        print_latency(
            "standby's client receive - commit returned (wall)",
            b_vs_wall,
        );
    }
    print_latency("receive - commit_ts", vs_ts);
    print_latency("receive - commit returned (wall)", vs_wall);
    println!(
        "  RSS of this process (server and simulator) at the end: {:.1} MiB, peak {:.1} MiB",
        mb(rss_end),
        mb(hwm_end)
    );
    if let Some(t) = tailed {
        // The tailers' window is by commit_ts (all they see of a transaction).
        let by_ts = sent
            .iter()
            .filter(|s| (from..to).contains(&((s.commit_ts >> 18) * 1000)))
            .count();
        assert_eq!(
            t.count,
            (by_ts * tailers) as u64,
            "every tailer received every transaction of the window once"
        );
        println!("  {tailers} tailing dump clients (child process):");
        println!(
            "    server RSS before they connect {:.1} MiB, with them idle at the end of the \
             binlog {:.1} MiB: {:.1} KiB per client",
            mb(t.rss_before),
            mb(t.rss_idle),
            t.rss_idle.saturating_sub(t.rss_before) as f64 / 1024.0 / tailers as f64
        );
        println!(
            "    receive - commit_ts over all of them: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, \
             max {:.1} ms ({} receipts)",
            t.p50, t.p90, t.p99, t.max, t.count
        );
        println!(
            "    the clients' own process: RSS {:.1} MiB at the end",
            mb(t.child_rss)
        );
    }
    println!("  of which:");
    print_latency("  commit returned - checkpoint flushed", to_durable);
    print_latency("  checkpoint flushed - receive", durable_to_client);
    println!(
        "  {} group commits, {:.1} per second",
        flushed.len(),
        flushed.len() as f64 / (warmup + measure).as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// Section 4: many tailing dump clients, in a child process.

/// Set in the child's environment: the server's address. `SERVE_TAILERS` is the client count.
const TAILER_CHILD: &str = "SERVE_TAILER_CHILD";
const GTID: u8 = 33;
/// Histogram buckets of 0.1 ms up to 60 s (the last bucket takes everything longer).
const TAIL_BUCKETS: usize = 600_000;

/// The parent's side of the child process running the tailers: line commands on its stdin
/// (`window FROM_US TO_US`, `last XID`), line answers on its stdout (`ready`, `done …`).
struct Tailers {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    rss_before: u64,
    rss_idle: u64,
}

/// What the tailers measured.
struct Tailed {
    rss_before: u64,
    rss_idle: u64,
    count: u64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    child_rss: u64,
}

impl Tailers {
    /// Starts the child with `n` clients on `addr` and waits until every one is dumping.
    async fn start(addr: SocketAddr, n: usize) -> Tailers {
        use tokio::io::AsyncBufReadExt;
        let rss_before = util::rss("self").0;
        let mut child = tokio::process::Command::new(std::env::current_exe().expect("exe"))
            .env(TAILER_CHILD, addr.to_string())
            .env("SERVE_TAILERS", n.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the tailers' process");
        let stdin = child.stdin.take().expect("stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let ready = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("the tailers connect within 120 s")
            .expect("read")
            .expect("a line");
        assert_eq!(ready, "ready", "the tailers' process");
        // Let the sessions reach the end of the binlog and wait there.
        let idle_from = Instant::now();
        let mut rss_idle = util::rss("self").0;
        while idle_from.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            rss_idle = rss_idle.max(util::rss("self").0);
        }
        Tailers {
            child,
            stdin,
            lines,
            rss_before,
            rss_idle,
        }
    }

    async fn say(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to the tailers");
    }

    /// Waits until every tailer received transaction `last` and collects the figures.
    async fn finish(&mut self, last: u64) -> Tailed {
        self.say(&format!("last {last}")).await;
        let done = tokio::time::timeout(Duration::from_secs(180), self.lines.next_line())
            .await
            .expect("the tailers finish within 180 s")
            .expect("read")
            .expect("a line");
        let f: Vec<&str> = done.split_whitespace().collect();
        assert_eq!(f.first(), Some(&"done"), "the tailers' process: {done}");
        let num = |i: usize| -> f64 { f[i].parse().expect("a number") };
        let _ = self.child.kill().await;
        Tailed {
            rss_before: self.rss_before,
            rss_idle: self.rss_idle,
            count: num(1) as u64,
            p50: num(2),
            p90: num(3),
            p99: num(4),
            max: num(5),
            child_rss: num(6) as u64,
        }
    }
}

/// What the tailers share: the window, each one's last XID, the latency histogram.
struct TailShared {
    from_us: AtomicU64,
    to_us: AtomicU64,
    last: Vec<AtomicU64>,
    hist: Vec<AtomicU64>,
}

impl RawDump {
    /// COM_BINLOG_DUMP from `binlog.000001:4`, blocking: for every transaction, its XID and,
    /// if its commit time is inside the window, receive − commit into the histogram.
    async fn tail(mut self, me: usize, shared: Arc<TailShared>) {
        let mut p = vec![0x12];
        p.extend_from_slice(&4u32.to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        p.extend_from_slice(&(2000 + me as u32).to_le_bytes());
        p.extend_from_slice(b"binlog.000001");
        self.seq = 0;
        self.write(&p).await;
        let mut commit_us = 0u64;
        loop {
            self.read().await;
            let b = &self.buf;
            match b.first() {
                Some(0) if b.len() >= 20 => match b[5] {
                    // Post-header: flags 1, SID 16, GNO 8, logical clock type 1, last committed
                    // 8, sequence number 8, then the 7-byte immediate commit timestamp (µs),
                    // whose top bit says an original commit timestamp follows.
                    GTID if b.len() >= 20 + 49 => {
                        let mut t = [0u8; 8];
                        t[..7].copy_from_slice(&b[62..69]);
                        commit_us = u64::from_le_bytes(t) & ((1 << 55) - 1);
                    }
                    XID if b.len() >= 28 => {
                        let recv = wall_us();
                        let xid = u64::from_le_bytes(b[20..28].try_into().expect("8 bytes"));
                        let (from, to) = (
                            shared.from_us.load(Ordering::Relaxed),
                            shared.to_us.load(Ordering::Relaxed),
                        );
                        if commit_us >= from && commit_us < to {
                            let i = (recv.saturating_sub(commit_us) / 100) as usize;
                            shared.hist[i.min(TAIL_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
                        }
                        shared.last[me].store(xid, Ordering::Release);
                    }
                    _ => {}
                },
                _ => panic!(
                    "tailer {me}: unexpected packet: {:?}",
                    &b[..b.len().min(64)]
                ),
            }
        }
    }
}

/// The child process: `SERVE_TAILERS` clients tail the server at `SERVE_TAILER_CHILD`.
fn tailer_child() {
    let addr: SocketAddr = std::env::var(TAILER_CHILD)
        .expect("address")
        .parse()
        .expect("an address");
    let n: usize = env_num("SERVE_TAILERS", 1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        use tokio::io::AsyncBufReadExt;
        let shared = Arc::new(TailShared {
            from_us: AtomicU64::new(u64::MAX),
            to_us: AtomicU64::new(0),
            last: (0..n).map(|_| AtomicU64::new(0)).collect(),
            hist: (0..TAIL_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        });
        // Connect in waves so the listener's backlog is never the limit.
        let mut clients = Vec::with_capacity(n);
        for wave in (0..n).collect::<Vec<_>>().chunks(100) {
            let conns = futures_util::future::join_all(
                wave.iter().map(|_| RawDump::connect_small(addr, "root")),
            )
            .await;
            clients.extend(conns);
        }
        for (i, c) in clients.into_iter().enumerate() {
            tokio::spawn(c.tail(i, shared.clone()));
        }
        println!("ready");
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let f: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .map(|v| v.parse().expect("a number"))
                .collect();
            if line.starts_with("window ") {
                shared.to_us.store(f[1], Ordering::Relaxed);
                shared.from_us.store(f[0], Ordering::Relaxed);
            } else if line.starts_with("last ") {
                let deadline = Instant::now() + Duration::from_secs(150);
                while shared.last.iter().any(|l| l.load(Ordering::Acquire) < f[0]) {
                    if Instant::now() > deadline {
                        let behind = shared
                            .last
                            .iter()
                            .filter(|l| l.load(Ordering::Acquire) < f[0])
                            .count();
                        println!("timeout: {behind} tailers behind");
                        std::process::exit(1);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let hist: Vec<u64> = shared
                    .hist
                    .iter()
                    .map(|h| h.load(Ordering::Relaxed))
                    .collect();
                let count: u64 = hist.iter().sum();
                let at = |q: f64| -> f64 {
                    let want = ((count as f64) * q).ceil().max(1.0) as u64;
                    let mut seen = 0;
                    for (i, c) in hist.iter().enumerate() {
                        seen += c;
                        if seen >= want {
                            return (i as f64 + 1.0) / 10.0;
                        }
                    }
                    f64::NAN
                };
                println!(
                    "done {count} {} {} {} {} {}",
                    at(0.5),
                    at(0.9),
                    at(0.99),
                    at(1.0),
                    util::rss("self").0
                );
                std::process::exit(0);
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------

fn main() {
    if std::env::var_os(TAILER_CHILD).is_some() {
        tailer_child();
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let sections =
        std::env::var("SERVE_BENCH").unwrap_or_else(|_| "throughput,clients,latency".into());
    let on = |s: &str| sections.split(',').any(|x| x.trim() == s);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if on("throughput") || on("clients") {
        let rows: u64 = env_num("SERVE_ROWS", 1_000_000);
        let txn_rows: usize = env_num("SERVE_TXN_ROWS", 10);
        let n: usize = env_num("SERVE_CLIENTS", 100);
        let began = Instant::now();
        let p = prepare_binlog(rows, txn_rows);
        println!(
            "prepared binlog: {} rows, {} transactions, {:.1} MB in {:.1} s",
            p.rows,
            p.txns,
            mb(p.bytes),
            began.elapsed().as_secs_f64()
        );
        rt.block_on(async {
            let cancel = CancellationToken::new();
            let addr = serve(&p, cancel.clone()).await;
            if on("throughput") {
                throughput(&p, addr, txn_rows).await;
            }
            if on("clients") {
                clients(&p, addr, n).await;
            }
            cancel.cancel();
        });
        p.store.close().expect("close store");
    }
    if on("latency") {
        rt.block_on(latency(false, 0));
    }
    if on("tailers") {
        rt.block_on(latency(false, env_num("SERVE_TAILERS", 1000)));
    }
    if on("standby") {
        println!("(with a standby in an HA group)");
        rt.block_on(latency(true, 0));
    }
}

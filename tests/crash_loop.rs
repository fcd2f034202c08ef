//! Crash safety end to end: `tibinlog server` is killed with
//! SIGKILL 20 times while `tibinlog sim` (its own process) runs a seeded OLTP workload with
//! faults and an aggressive GC, and is restarted on the same data dir each time.
//!
//! The kill delays are seeded and printed: some kills land during start-up or recovery, most
//! while transactions are being written. After some kills the test also leaves the files as a
//! crash inside a group commit would: the last group commit's binlog bytes missing while its
//! map records (fsynced first) are there, when no client had received it; a cut-off copy of
//! the last transaction appended to the last binlog file; a partial record appended to the map.
//!
//! Afterwards:
//! - the binlog read from `binlog.000001:4` equals the truth log exactly, GTIDs dense 1..n;
//! - a client that streamed by GTID across every restart (stopped during some of them),
//!   reconnecting with the set of the transactions it had received completely (GTID … XID, or
//!   GTID + DDL QUERY), received every transaction exactly once, in order, with the same
//!   content, and was never refused;
//! - PD's GC safe point passed the first start ts: the history each restart resumed from was
//!   still there only because the server's service safe point kept it.
//!
//! Replay the kill schedule and workload of a run with `TIBINLOG_CRASH_SEED=<seed>`;
//! `TIBINLOG_BIN=<path>` runs another build of the binary (e.g. a release build).
//!
//! A soak (`scripts/soak.sh`) runs the same test larger: `TIBINLOG_CRASH_KILLS` kills (20),
//! `TIBINLOG_CRASH_RATE` transactions per second (200), `TIBINLOG_CRASH_TXNS` transactions at
//! least (0: as many as the kills take; otherwise kill `k` waits until `k / KILLS` of them are
//! in the truth log, so the kills spread over the whole run), `TIBINLOG_CRASH_BINLOG_SIZE`
//! bytes per binlog file (64 KiB).

use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::BinlogStreamRequest;
use serde_json::Value as Json;
use tibinlog::capture::pd::{PdClient, PdConfig};
use tibinlog::model::Ts;
use tibinlog::sim::ts::SimRng;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod common;
use common::app::{dense_set, master_gtids, truth_line};
use common::mysql_binlog::{
    assert_seen_equals_truth, digest_truth, expected, read_binlog_with, SeenTxn,
};
use common::proc::{client_settled, follow, lock, Follow, Proc, POLL, WAIT};

/// Seed of the workload and of the kill schedule unless `TIBINLOG_CRASH_SEED` is set.
const DEFAULT_SEED: u64 = 1_729;
/// Kills of the server (`TIBINLOG_CRASH_KILLS`).
const KILLS: usize = 20;
/// Workload pace (`TIBINLOG_CRASH_RATE`). It has no end: it runs until the test stops the
/// simulator after the last kill, so every kill lands while it runs, however slow the machine.
const RATE: u64 = 200;
/// Every `EARLY_EVERY`th kill is aimed at start-up: at a delay in `[0, EARLY_MS)` after the
/// process started (connecting to PD, recovering the store, bootstrapping the schema). The
/// others land at a delay in `[0, SPAN_MS)` after the server, once serving, appended to its map
/// (capture and group commit are running), so that they hit it while it writes.
const EARLY_EVERY: usize = 4;
const EARLY_MS: u64 = 400;
const SPAN_MS: u64 = 1_500;
/// Share of the kills while writing during which the client is stopped.
const PAUSE_SHARE: f64 = 0.4;
/// Interval of the polls of the store's size while waiting for the first write.
const SIZE_POLL: Duration = Duration::from_millis(10);
/// Binlog files rotate past this size, so kills also land around rotations
/// (`TIBINLOG_CRASH_BINLOG_SIZE`).
const MAX_BINLOG_SIZE: u64 = 64 << 10;
/// PD service id of the test's own safe point, held until the server holds its own.
const TEST_SERVICE_ID: &str = "crash-loop-test";

/// Binlog event type codes (MySQL `Log_event_type`).
const QUERY_EVENT: u8 = 2;
const XID_EVENT: u8 = 16;
const GTID_EVENT: u8 = 33;
/// Bytes of a binlog event header; its length field is at offset 9.
const HEADER_LEN: usize = 19;
/// Bytes of one record of the mapping file.
const MAP_RECORD_LEN: u64 = 48;

/// `name` from the environment, or `default`.
fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={s}: not a number")),
        Err(_) => default,
    }
}

/// Lines of a file that only grows (the truth log), counted from where the last call stopped.
#[derive(Default)]
struct LineCounter {
    offset: u64,
    lines: u64,
}

impl LineCounter {
    fn update(&mut self, path: &Path) -> u64 {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(path) else {
            return self.lines;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return self.lines;
        }
        let mut buf = vec![0u8; 1 << 20];
        while let Ok(n) = f.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.offset += n as u64;
            self.lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        }
        self.lines
    }
}

/// The run's directory, kept (and named) if the test fails: its logs, truth log and binlog
/// are what explains a failure of a long soak.
struct KeepOnPanic(tempfile::TempDir);

impl KeepOnPanic {
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for KeepOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.disable_cleanup(true);
            eprintln!("crash loop: files kept in {}", self.0.path().display());
        }
    }
}

/// The truth log's transactions after `after` (as the binlog must hold them, rows reduced to
/// digests), read line by line, and the number of lines.
fn truth_digested(path: &Path, after: Ts) -> (Vec<Json>, u64) {
    use std::io::BufRead;
    let f = std::fs::File::open(path).expect("truth log");
    let mut want = Vec::new();
    let mut lines = 0;
    for line in std::io::BufReader::new(f).lines() {
        let line = line.expect("read the truth log");
        lines += 1;
        if let Some(mut v) = truth_line(&line, after) {
            digest_truth(&mut v);
            want.push(v);
        }
    }
    (want, lines)
}

/// Where the binlog's transactions first differ from the truth's (by XID = start ts, or DDL),
/// with the neighbours on both sides and whether the differing one is a copy of another.
fn first_divergence(seen: &[SeenTxn], want: &[Json]) -> String {
    let key = |t: &SeenTxn| match &t.ddl {
        Some(q) => format!("ddl {q}"),
        None => format!("start_ts {}", t.xid.unwrap_or(0)),
    };
    let truth_key = |v: &Json| match v["ddl"].as_str() {
        Some(q) => format!("ddl {q}"),
        None => format!("start_ts {}", v["start_ts"]),
    };
    let Some(i) =
        (0..seen.len()).find(|&i| want.get(i).is_none_or(|w| key(&seen[i]) != truth_key(w)))
    else {
        return format!("the binlog's {} transactions are the truth's", seen.len());
    };
    let t = &seen[i];
    let copies: Vec<u64> = seen
        .iter()
        .filter(|o| o.gno != t.gno && key(o) == key(t))
        .map(|o| o.gno)
        .collect();
    let in_truth = want.iter().position(|w| truth_key(w) == key(t));
    let around = |from: usize, to: usize| -> String {
        (from..to.min(want.len()))
            .map(|j| {
                format!(
                    "\n  truth {}: {} commit_ts {}",
                    j + 1,
                    truth_key(&want[j]),
                    want[j]["commit_ts"]
                )
            })
            .collect()
    };
    format!(
        "first difference at GNO {} ({} at {}:{}, {:?}): the truth has {}; the same transaction \
         is also GNO {copies:?} and truth index {in_truth:?}{}",
        t.gno,
        key(t),
        t.file,
        t.pos,
        t.digest,
        want.get(i).map_or("nothing".to_owned(), truth_key),
        around(i.saturating_sub(2), i + 3)
    )
}

fn seed() -> u64 {
    match std::env::var("TIBINLOG_CRASH_SEED") {
        Ok(s) => s.trim().parse().expect("TIBINLOG_CRASH_SEED is a u64"),
        Err(_) => DEFAULT_SEED,
    }
}

/// The last `n` lines of the log at `path` that contain one of `words`.
fn log_grep(path: &Path, words: &[&str], n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| words.iter().any(|w| l.contains(w)))
        .collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The server process across its restarts: same data dir, same port (unless another process
/// took the port meanwhile; then a new one, published to the client).
struct Master {
    proc: Option<Proc>,
    pd: String,
    data_dir: PathBuf,
    log: PathBuf,
    start_ts: Ts,
    port: u16,
    /// The serving line of the current process arrived.
    served: bool,
    addr: watch::Sender<Option<SocketAddr>>,
    uuid: Option<String>,
    /// Restarts on a new port because the old one was taken.
    port_changes: usize,
}

impl Master {
    fn spawn(&mut self) {
        let args: Vec<String> = [
            "server",
            "--pd",
            &self.pd,
            "--listen",
            &format!("127.0.0.1:{}", self.port),
            "--data-dir",
            self.data_dir.to_str().expect("utf-8 path"),
            "--start-ts",
            &self.start_ts.0.to_string(),
            "--max-binlog-size",
            &env_u64("TIBINLOG_CRASH_BINLOG_SIZE", MAX_BINLOG_SIZE).to_string(),
        ]
        .map(str::to_owned)
        .into();
        self.served = false;
        self.proc = Some(Proc::spawn("server", &args, &self.log));
    }

    fn proc(&mut self) -> &mut Proc {
        self.proc.as_mut().expect("a server process")
    }

    fn on_serving(&mut self, j: &Json) {
        let addr: SocketAddr = j["listen"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("serving line without an address: {j}"));
        let uuid = j["server_uuid"].as_str().expect("server_uuid").to_owned();
        if let Some(u) = &self.uuid {
            assert_eq!(*u, uuid, "server_uuid stays the same across restarts");
        }
        self.uuid = Some(uuid);
        self.port = addr.port();
        self.served = true;
        self.addr.send_replace(Some(addr));
    }

    /// Runs the current process until `deadline` (`None`: until it serves), following its
    /// output. A process that exits by itself fails the test, except for a taken port.
    async fn run(&mut self, deadline: Option<Instant>) {
        let wait_deadline = Instant::now() + WAIT;
        loop {
            if deadline.is_none() && self.served {
                return;
            }
            let until = deadline.unwrap_or(wait_deadline);
            let proc = self.proc.as_mut().expect("a server process");
            let ev = tokio::select! {
                _ = tokio::time::sleep_until(until) => None,
                ev = proc.next_event(wait_deadline) => Some(ev),
            };
            let Some(ev) = ev else {
                assert!(
                    deadline.is_some(),
                    "the server did not serve in time; log:\n{}",
                    self.proc().tail()
                );
                return;
            };
            match ev {
                Some(j) if j["event"] == "serving" => self.on_serving(&j),
                Some(_) => {}
                None => {
                    let st = self.proc().exit_status().await;
                    let tail = self.proc().tail();
                    let last_start = tail.rfind("tibinlog").map_or("", |i| &tail[i..]);
                    if self.port != 0 && last_start.contains("cannot listen") {
                        eprintln!("port {} taken by another process; new port", self.port);
                        self.port = 0;
                        self.port_changes += 1;
                        self.spawn();
                        continue;
                    }
                    panic!("the server exited by itself ({st}); log:\n{tail}");
                }
            }
        }
    }
}

/// What the test did to the files after a kill.
#[derive(Debug, Default, Clone, Copy)]
struct Torn {
    /// Transactions of the last group commit cut from the binlog, as if the process had died
    /// after fsyncing their map records and before writing them (see [`unwrite_last_batch`]).
    batch: Option<usize>,
    /// Bytes of a cut-off copy of the last transaction appended to the last binlog file.
    binlog: Option<usize>,
    /// Bytes of a partial record appended to the map.
    map: Option<u64>,
}

/// Bytes of the map and of all binlog files of the store in `dir` (zero when absent).
fn store_size(dir: &Path) -> (u64, u64) {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let binlog = binlog_files(dir).iter().map(|p| len(p)).sum();
    (len(&dir.join("binlog.map")), binlog)
}

/// The numbered binlog files, in order.
fn binlog_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.len() == 6 && e.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    files.sort();
    files
}

/// The last binlog file (highest sequence number).
fn last_binlog_file(dir: &Path) -> Option<PathBuf> {
    binlog_files(dir).pop()
}

/// `[start, end)` of the file's last transaction, if the file ends exactly after one.
fn last_transaction(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut at = 4;
    let mut last_gtid = None;
    let mut last_type = 0u8;
    while at + HEADER_LEN <= bytes.len() {
        let size = u32::from_le_bytes(bytes[at + 9..at + 13].try_into().ok()?) as usize;
        if size < HEADER_LEN || at + size > bytes.len() {
            return None;
        }
        last_type = bytes[at + 4];
        if last_type == GTID_EVENT {
            last_gtid = Some(at);
        }
        at += size;
    }
    let ends_a_txn = matches!(last_type, XID_EVENT | QUERY_EVENT);
    (at == bytes.len() && ends_a_txn)
        .then_some(last_gtid?)
        .map(|s| (s, at))
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open for append");
    f.write_all(bytes).expect("append");
    f.sync_all().expect("sync");
}

/// One record of the map (see `binlog_store::map`): kind, file sequence, GNO (Txn) and binlog
/// offset (Txn: end of the transaction; Checkpoint: end it requires).
#[derive(Debug, Clone, Copy)]
struct MapRecord {
    kind: u8,
    file_seq: u32,
    gno: u64,
    offset: u64,
}

const MAP_TXN: u8 = 1;
const MAP_CHECKPOINT: u8 = 2;
const MAP_SYNCED: u8 = 3;

/// The valid records of the map, up to the first torn or damaged one.
fn map_records(path: &Path) -> Vec<MapRecord> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let len = MAP_RECORD_LEN as usize;
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    bytes
        .chunks_exact(len)
        .map_while(|b| {
            let crc = u32::from_le_bytes(b[44..48].try_into().expect("4 bytes"));
            (crc32fast::hash(&b[..44]) == crc).then(|| MapRecord {
                kind: b[0],
                file_seq: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
                gno: u64_at(b, 24),
                offset: u64_at(b, 32),
            })
        })
        .collect()
}

/// The binlog sequence number of a file name `binlog.000042`.
fn file_seq(path: &Path) -> Option<u32> {
    path.extension()?.to_str()?.parse().ok()
}

/// Cuts the last group commit out of the binlog, leaving its map records: the state of a
/// server that died after fsyncing the map records of a group commit (its Txn records and the
/// Checkpoint that needs them) and before writing its binlog bytes. Done only when the batch is
/// the last thing in the last file, follows the previous Checkpoint in the same file, and no
/// client received any of its transactions (`client_max_gno`): nobody can tell it from a real
/// crash. Returns the number of transactions cut.
fn unwrite_last_batch(binlog_dir: &Path, client_max_gno: u64) -> Option<usize> {
    let last = last_binlog_file(binlog_dir)?;
    let seq = file_seq(&last)?;
    let len = std::fs::metadata(&last).ok()?.len();
    let recs = map_records(&binlog_dir.join("binlog.map"));
    let checkpoints: Vec<usize> = recs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == MAP_CHECKPOINT)
        .map(|(i, _)| i)
        .collect();
    let [.., prev, last_cp] = checkpoints[..] else {
        return None;
    };
    let (p, l) = (recs[prev], recs[last_cp]);
    let batch = &recs[prev + 1..last_cp];
    let txns: Vec<&MapRecord> = batch.iter().filter(|r| r.kind == MAP_TXN).collect();
    let fits = last_cp + 1 == recs.len()
        && p.file_seq == seq
        && l.file_seq == seq
        && l.offset == len
        && p.offset < l.offset
        && !txns.is_empty()
        && batch
            .iter()
            .all(|r| (r.kind == MAP_TXN || r.kind == MAP_SYNCED) && r.file_seq == seq)
        && txns.iter().all(|t| t.gno > client_max_gno);
    if !fits {
        return None;
    }
    let f = OpenOptions::new()
        .write(true)
        .open(&last)
        .expect("open the last binlog file");
    f.set_len(p.offset).expect("truncate");
    f.sync_all().expect("sync");
    Some(txns.len())
}

/// Leaves a torn tail, as a crash in the middle of the next group commit would.
fn tear_tail(binlog_dir: &Path, rng: &mut SimRng, client_max_gno: u64) -> Torn {
    let mut torn = Torn::default();
    if rng.chance(0.5) {
        torn.batch = unwrite_last_batch(binlog_dir, client_max_gno);
    }
    let (tear_binlog, tear_map) = (rng.chance(0.4), rng.chance(0.25));
    let cut = rng.next_u64();
    if tear_binlog {
        if let Some(last) = last_binlog_file(binlog_dir) {
            let bytes = std::fs::read(&last).expect("read the last binlog file");
            if let Some((start, end)) = last_transaction(&bytes) {
                // 1 ..= len-1 bytes: never a whole transaction.
                let n = 1 + (cut % (end - start - 1) as u64) as usize;
                append(&last, &bytes[start..start + n]);
                torn.binlog = Some(n);
            }
        }
    }
    let map = binlog_dir.join("binlog.map");
    if tear_map && map.exists() {
        let n = 1 + cut % (MAP_RECORD_LEN - 1);
        let junk: Vec<u8> = (0..n).map(|i| (cut >> (i % 8 * 8)) as u8 ^ 0x5a).collect();
        append(&map, &junk);
        torn.map = Some(n);
    }
    torn
}

/// `(truncated_bytes > 0, dropped_records > 0)` of every store open in the server log.
fn recoveries(log: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("binlog store open"))
        .map(|l| {
            let field = |name: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                    .unwrap_or(0)
            };
            (field("truncated_bytes"), field("dropped_records"))
        })
        .collect()
}

#[derive(Debug)]
struct Round {
    /// Aimed at start-up (else at writes).
    early: bool,
    delay: Duration,
    /// The server had printed its serving line when killed.
    served: bool,
    /// The binlog grew during the process's life: it was killed while capturing and writing.
    wrote: bool,
    /// The client was stopped while the server wrote and until it restarted.
    client_paused: bool,
    torn: Torn,
    /// Store opens in the server log when the next process started: the open that repaired
    /// this round's torn files is the next one, if that process logged it before its kill.
    opens_before_next: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_twenty_times_loses_and_doubles_nothing() {
    let test_start = Instant::now();
    let seed = seed();
    let kills = env_u64("TIBINLOG_CRASH_KILLS", KILLS as u64) as usize;
    let rate = env_u64("TIBINLOG_CRASH_RATE", RATE);
    let target_txns = env_u64("TIBINLOG_CRASH_TXNS", 0);
    eprintln!(
        "crash loop: seed {seed} (replay with TIBINLOG_CRASH_SEED={seed}), {kills} kills, \
         {rate} transactions/s{}",
        if target_txns > 0 {
            format!(", at least {target_txns} transactions")
        } else {
            String::new()
        }
    );
    let mut truth_lines = LineCounter::default();
    let mut rng = SimRng::new(seed ^ 0x6b69_6c6c);
    let dir = KeepOnPanic(
        tempfile::Builder::new()
            .prefix("crash-loop")
            .tempdir()
            .expect("tempdir"),
    );
    let truth_path = dir.path().join("truth.jsonl");
    let data_dir = dir.path().join("data");
    let binlog_dir = data_dir.join("binlog");

    let sim_args: Vec<String> = [
        "sim",
        "--pd-listen",
        "127.0.0.1:0",
        "--stores",
        "3",
        "--regions-per-table",
        "2",
        "--workload",
        "oltp",
        "--rate",
        &rate.to_string(),
        "--seed",
        &seed.to_string(),
        "--truth",
        truth_path.to_str().expect("utf-8 path"),
        "--resolved-ts-interval",
        "100ms",
        "--chaos-interval",
        "400ms",
        "--gc-interval",
        "200ms",
        "--gc-life-time",
        "1s",
        // Inserts into a full table delete instead: a soak of a million transactions keeps
        // its data (held in the simulator's memory) bounded.
        "--max-live-rows",
        "500",
        // ... and at most this many tables: a CREATE TABLE beyond it is a DROP TABLE instead
        // (a million transactions create thousands of tables otherwise, and the simulator
        // slows down as they fill).
        "--max-tables",
        "64",
        // A fixed TSO epoch: the seed replays the run.
        "--epoch-ms",
        "1735689600000",
    ]
    .map(str::to_owned)
    .into();
    let mut sim = Proc::spawn("sim", &sim_args, &dir.path().join("sim.log"));
    let ready = sim.wait_event("ready").await;
    let pd = ready["pd"].as_str().expect("pd address").to_owned();

    // The first start ts, protected by a service safe point of the test's own until the server
    // holds one (PD's GC runs every 200 ms and keeps only 1 s of history).
    let pd_cancel = CancellationToken::new();
    let _pd_guard = pd_cancel.clone().drop_guard();
    let pd_client = PdClient::connect(PdConfig::new(vec![pd.clone()]), pd_cancel.clone())
        .await
        .expect("connect to PD");
    let start_ts = pd_client.tso().await.expect("TSO");
    let min = pd_client
        .update_service_gc_safe_point(TEST_SERVICE_ID, 3600, start_ts.prev())
        .await
        .expect("hold a service safe point");
    assert!(min <= start_ts.prev(), "GC already past the start ts");

    let (addr_tx, addr_rx) = watch::channel(None);
    let mut master = Master {
        proc: None,
        pd,
        data_dir: data_dir.clone(),
        log: dir.path().join("server.log"),
        start_ts,
        port: 0,
        served: false,
        addr: addr_tx,
        uuid: None,
        port_changes: 0,
    };
    master.spawn();
    master.run(None).await;
    pd_client
        .update_service_gc_safe_point(TEST_SERVICE_ID, 0, start_ts.prev())
        .await
        .expect("drop the test's service safe point");
    let uuid = master.uuid.clone().expect("server_uuid");
    let sid: [u8; 16] = hex::decode(uuid.replace('-', ""))
        .expect("uuid hex")
        .try_into()
        .expect("16 bytes");

    // Rows are kept as digests: a soak's million transactions would not fit otherwise.
    let seen = Arc::new(Mutex::new(Follow {
        digest: true,
        ..Follow::default()
    }));
    let stop_client = CancellationToken::new();
    let (pause_tx, pause_rx) = watch::channel(false);
    let client = tokio::spawn(follow(
        addr_rx,
        pause_rx,
        sid,
        seen.clone(),
        stop_client.clone(),
    ));

    let mut rounds = Vec::new();
    let mut binlog_at_spawn = 0;
    for round in 0..kills {
        // A soak spreads the kills over its transactions.
        let due = target_txns * round as u64 / kills as u64;
        while truth_lines.update(&truth_path) < due {
            master
                .run(Some(Instant::now() + Duration::from_millis(200)))
                .await;
        }
        // The first process has served already (the test's own safe point is gone by then).
        let early = round % EARLY_EVERY == EARLY_EVERY - 1;
        let delay = Duration::from_millis(rng.below(if early { EARLY_MS } else { SPAN_MS }));
        // Sometimes the client is stopped while the server writes and until it restarts, so
        // that the last group commit can be one nobody received.
        let client_paused = !early && rng.chance(PAUSE_SHARE);
        let from = if early {
            master.proc().started
        } else {
            master.run(None).await;
            let (map0, _) = store_size(&binlog_dir);
            let deadline = Instant::now() + WAIT;
            while store_size(&binlog_dir).0 <= map0 {
                assert!(
                    Instant::now() < deadline,
                    "the server never wrote; log:\n{}\n--- its warnings ---\n{}\n--- the simulator's faults ---\n{}",
                    master.proc().tail(),
                    log_grep(&master.log, &["WARN", "ERROR", "binlog store open", "serving"], 40),
                    log_grep(&dir.path().join("sim.log"), &["chaos", "WARN", "ERROR"], 40),
                );
                master.run(Some(Instant::now() + SIZE_POLL)).await;
            }
            pause_tx.send_replace(client_paused);
            Instant::now()
        };
        master.run(Some(from + delay)).await;
        master.proc().kill9().await;
        let wrote = store_size(&binlog_dir).1 > binlog_at_spawn;
        let client_max_gno = client_settled(&seen).await;
        let torn = tear_tail(&binlog_dir, &mut rng, client_max_gno);
        let r = Round {
            early,
            delay,
            served: master.served,
            wrote,
            client_paused,
            torn,
            opens_before_next: recoveries(&master.log).len(),
        };
        eprintln!(
            "kill {:2} at {:5.1} s: {} + {:4} ms, {}, {}{}, torn {:?}, client has {} txns",
            round + 1,
            test_start.elapsed().as_secs_f64(),
            if r.early { "start" } else { "first write" },
            r.delay.as_millis(),
            if r.served { "serving" } else { "starting" },
            if r.wrote { "wrote" } else { "no writes" },
            if r.client_paused {
                ", client stopped"
            } else {
                ""
            },
            r.torn,
            lock(&seen).txns.len(),
        );
        rounds.push(r);
        binlog_at_spawn = store_size(&binlog_dir).1;
        master.spawn();
        pause_tx.send_replace(false);
    }
    master.run(None).await;
    while truth_lines.update(&truth_path) < target_txns {
        master
            .run(Some(Instant::now() + Duration::from_millis(200)))
            .await;
    }
    let addr = (*master.addr.borrow()).expect("address");

    // Every kill is done: end the workload (it has no `--txns`, so it ran through all of them).
    let sim_pid = sim.child.id().expect("the simulator is running");
    let signalled = std::process::Command::new("kill")
        .args(["-USR1", &sim_pid.to_string()])
        .status()
        .expect("run kill");
    assert!(signalled.success(), "SIGUSR1 to the simulator");
    let workload_done = sim.wait_event("workload_done").await;
    let (want, lines) = truth_digested(&truth_path, start_ts);
    assert_eq!(
        workload_done["truth_lines"], lines,
        "the truth log is complete: {workload_done}"
    );

    // The server catches up: every transaction of the truth log is executed.
    let want_set = dense_set(&uuid, want.len());
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    let mut past_truth = false;
    let mut stuck = false;
    while last != want_set {
        if Instant::now() >= deadline {
            // Read the binlog below: it names the transaction that is missing.
            stuck = true;
            break;
        }
        match master_gtids(addr).await {
            Ok(s) => last = s,
            Err(e) => last = format!("error: {e}"),
        }
        // More GNOs than transactions: something was written twice or without being in the
        // truth; the binlog says which (below).
        let top = last
            .rsplit([':', '-'])
            .next()
            .and_then(|n| n.parse::<usize>().ok());
        if top.is_some_and(|n| n > want.len()) {
            past_truth = true;
            break;
        }
        if last != want_set {
            tokio::time::sleep(POLL).await;
        }
    }

    let from_start = BinlogStreamRequest::new(0)
        .with_filename(b"binlog.000001")
        .with_pos(4);
    let dump = read_binlog_with(addr, from_start, None, true).await;
    assert!(dump.eof, "the dump reached the end");
    if stuck {
        panic!(
            "Executed_Gtid_Set stuck at {last:?}, want {want_set:?}: {}\nfiles kept in {}; log:\n{}",
            first_divergence(&dump.txns, &want),
            dir.path().display(),
            master.proc().tail()
        );
    }
    if past_truth {
        panic!(
            "Executed_Gtid_Set {last:?} goes past the {} transactions of the truth log: {}\n\
             files kept in {}",
            want.len(),
            first_divergence(&dump.txns, &want),
            dir.path().display()
        );
    }
    assert_eq!(dump.uuid, uuid, "GTID source is the server_uuid");
    let all = expected(&want, 1..=want.len() as u64);
    let compared = assert_seen_equals_truth("binlog", &dump.txns, &all);

    // The client catches up too, then stops.
    let deadline = Instant::now() + WAIT;
    loop {
        let (got, last_error) = {
            let f = lock(&seen);
            (f.txns.len(), f.last_error.clone())
        };
        if got >= want.len() || client.is_finished() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the GTID client is stuck at {got} of {} transactions: {last_error:?}",
            want.len(),
        );
        tokio::time::sleep(POLL).await;
    }
    stop_client.cancel();
    client.await.expect("the GTID client task");
    let follow = std::mem::take(&mut *lock(&seen));
    assert_seen_equals_truth("GTID client", &follow.txns, &all);
    assert!(
        follow.server_errors.is_empty(),
        "the server refused the GTID client: {:?}",
        follow.server_errors
    );

    // GC really ran past the start: the restarts resumed from history it had to keep.
    let gc_safe_point = pd_client.get_gc_safe_point().await.expect("GC safe point");
    assert!(
        gc_safe_point > start_ts,
        "GC safe point {gc_safe_point:?} never passed the start ts {start_ts:?}"
    );

    let recs = recoveries(&master.log);
    let truncated = recs.iter().filter(|r| r.0 > 0).count();
    let dropped = recs.iter().filter(|r| r.1 > 0).count();
    let torn_binlog = rounds.iter().filter(|r| r.torn.binlog.is_some()).count();
    let torn_map = rounds.iter().filter(|r| r.torn.map.is_some()).count();
    let unwritten: Vec<usize> = rounds.iter().filter_map(|r| r.torn.batch).collect();
    let count = |f: fn(&Round) -> bool| rounds.iter().filter(|r| f(r)).count();
    let wrote = count(|r| r.wrote);
    eprintln!(
        "crash loop seed {seed}: {} transactions ({compared} values compared), {} binlog files, \
         {:.1} s; {kills} kills: {} aimed at start-up, {} before the serving line, {wrote} \
         while writing (the workload ran through every kill); last group commit unwritten \
         {} times ({} transactions); torn tails added: binlog {torn_binlog}, map {torn_map}; \
         store opens {}, that cut a binlog tail {truncated}, \
         that dropped map records {dropped}; port changes {}; client: {} sessions, {} failed \
         connects, {} partial transactions dropped; GC safe point {} > start ts {}",
        want.len(),
        dump.rotations + 1,
        test_start.elapsed().as_secs_f64(),
        count(|r| r.early),
        count(|r| !r.served),
        unwritten.len(),
        unwritten.iter().sum::<usize>(),
        recs.len(),
        master.port_changes,
        follow.sessions,
        follow.failed_connects,
        follow.partial_dropped,
        gc_safe_point.0,
        start_ts.0,
    );
    assert!(
        wrote >= kills / 2,
        "only {wrote} kills landed while the server was writing the workload"
    );
    assert!(follow.sessions > 1, "the client streamed across restarts");
    let served = rounds.iter().filter(|r| r.served).count();
    assert!(
        recs.len() > served,
        "{served} killed processes and the last one served, but the log has {} store opens",
        recs.len()
    );
    // Each tear was repaired by the next store open, unless the next process was killed before
    // it logged its open (an early kill can land between the repair and the log line; then the
    // repair is not visible anywhere and the round is not checked).
    let mut checked = 0;
    for (i, r) in rounds.iter().enumerate() {
        let next_end = rounds
            .get(i + 1)
            .map_or(recs.len(), |n| n.opens_before_next);
        if next_end <= r.opens_before_next {
            continue;
        }
        let (cut, dropped_records) = recs[r.opens_before_next];
        if r.torn.batch.is_some() {
            assert!(
                dropped_records > 0,
                "kill {}: map records of an unwritten group commit were not dropped",
                i + 1
            );
            checked += 1;
        }
        if r.torn.binlog.is_some() {
            assert!(cut > 0, "kill {}: a torn binlog tail was not cut", i + 1);
            checked += 1;
        }
    }
    assert!(
        unwritten.is_empty() && torn_binlog == 0 || checked > 0,
        "no tear's repair was logged"
    );
    master.proc().kill9().await;
    drop(sim);
}

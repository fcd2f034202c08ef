//! `tibinlog sim` as a process: the printed addresses, the truth log (complete, ordered,
//! replayable by seed), PD reachable over gRPC while it runs, SIGTERM and chaos runs.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use tibinlog_proto::pdpb::{self, pd_client::PdClient};

/// Upper bound of any wait.
const WAIT: Duration = Duration::from_secs(60);
/// Interval of the polls (exit status, file lines).
const POLL: Duration = Duration::from_millis(20);

/// A running `tibinlog sim` with its stdout lines and stderr text collected.
struct Sim {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// The `workload_done` line, once [`Sim::done`] has read it.
    workload_done: Option<Json>,
}

impl Sim {
    fn spawn(args: &[&str]) -> Sim {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tibinlog"))
            .arg("sim")
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tibinlog sim");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().expect("stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("stderr lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Sim {
            child,
            stdout: rx,
            stderr,
            workload_done: None,
        }
    }

    fn child_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// The next stdout line.
    fn line(&self) -> String {
        self.stdout
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no stdout line in time; stderr:\n{}", self.stderr()))
    }

    /// Reads `seed=N` and the `ready` JSON line.
    fn ready(&self) -> (u64, Json) {
        let seed_line = self.line();
        let seed = seed_line
            .strip_prefix("seed=")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("first line is not seed=N: {seed_line:?}"));
        let ready: Json = serde_json::from_str(&self.line()).expect("ready line is JSON");
        assert_eq!(ready["event"], "ready", "{ready}");
        assert_eq!(ready["seed"], seed, "{ready}");
        (seed, ready)
    }

    /// Waits for the exit (killing the process on timeout).
    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "tibinlog sim did not exit in time; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits for a clean exit and returns the `done` line (keeping a `workload_done` line
    /// before it in `self.workload_done`).
    fn done(&mut self) -> Json {
        let st = self.wait();
        assert!(st.success(), "exit {st:?}; stderr:\n{}", self.stderr());
        let mut line: Json = serde_json::from_str(&self.line()).expect("line is JSON");
        if line["event"] == "workload_done" {
            self.workload_done = Some(line);
            line = serde_json::from_str(&self.line()).expect("done line is JSON");
        }
        assert_eq!(line["event"], "done", "{line}");
        line
    }

    #[cfg(unix)]
    fn sigterm(&self) {
        self.signal("-TERM");
    }

    #[cfg(unix)]
    fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(st.success());
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every line of a truth file, parsed and checked: the required fields, `start_ts <
/// commit_ts`, commit ts non-decreasing, a complete last line.
fn check_truth(path: &Path) -> Vec<Json> {
    let text = std::fs::read_to_string(path).expect("read truth");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "incomplete last line"
    );
    let mut last = 0u64;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let j: Json = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {line}", i + 1));
        let start = j["start_ts"].as_u64().expect("start_ts");
        let commit = j["commit_ts"].as_u64().expect("commit_ts");
        assert!(start < commit, "line {}: {line}", i + 1);
        assert!(commit >= last, "line {}: commit_ts went back", i + 1);
        last = commit;
        let rows = j["rows"].as_array().expect("rows");
        assert!(j["ddl"].is_null() || j["ddl"].is_string(), "ddl: {line}");
        assert!(
            !rows.is_empty() || j["ddl"].is_string(),
            "empty txn: {line}"
        );
        for r in rows {
            assert!(r["db"].is_string() && r["table"].is_string(), "{r}");
            let op = r["op"].as_str().expect("op");
            let (before, after) = (&r["before"], &r["after"]);
            match op {
                "insert" => assert!(before.is_null() && after.is_object(), "{r}"),
                "update" => assert!(before.is_object() && after.is_object(), "{r}"),
                "delete" => assert!(before.is_object() && after.is_null(), "{r}"),
                _ => panic!("bad op {op}"),
            }
        }
        out.push(j);
    }
    out
}

/// Lines of a file so far (0 if it does not exist yet).
fn complete_lines(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

fn wait_for_lines(sim: &Sim, path: &Path, n: usize) {
    let deadline = Instant::now() + WAIT;
    while complete_lines(path) < n {
        assert!(
            Instant::now() < deadline,
            "truth log stuck below {n} lines; stderr:\n{}",
            sim.stderr()
        );
        std::thread::sleep(POLL);
    }
}

fn run_to_end(seed: u64, truth: &Path) -> Json {
    let seed = seed.to_string();
    let mut sim = Sim::spawn(&[
        "--pd-listen",
        "127.0.0.1:0",
        "--stores",
        "2",
        "--txns",
        "200",
        "--seed",
        &seed,
        "--truth",
        truth.to_str().expect("utf-8 path"),
        "--exit-when-done",
        "--rate",
        "0",
        // Byte-identical runs need a fixed TSO epoch (the default is the wall clock).
        "--epoch-ms",
        "1735689600000",
    ]);
    sim.ready();
    sim.done()
}

#[test]
fn truth_log_is_complete_and_ordered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("truth.jsonl");
    let mut sim = Sim::spawn(&[
        "--pd-listen",
        "127.0.0.1:0",
        "--stores",
        "2",
        "--txns",
        "200",
        "--seed",
        "7",
        "--truth",
        f.to_str().expect("utf-8 path"),
        "--exit-when-done",
        "--rate",
        "0",
    ]);
    let (seed, ready) = sim.ready();
    assert_eq!(seed, 7);
    assert!(
        ready["cluster_id"].as_u64().is_some_and(|c| c > 0),
        "{ready}"
    );
    assert!(ready["pd"].as_str().is_some_and(|p| !p.ends_with(":0")));
    assert_eq!(ready["stores"].as_array().map(Vec::len), Some(2), "{ready}");
    let done = sim.done();
    assert_eq!(done["txns"], 200, "{done}");
    let lines = check_truth(&f);
    assert!(lines.len() >= 200, "{} lines", lines.len());
    assert_eq!(done["truth_lines"], lines.len() as u64, "{done}");
    // Announced before the exit, with the truth log already complete.
    let workload_done = sim.workload_done.take().expect("workload_done line");
    assert_eq!(workload_done["txns"], 200, "{workload_done}");
    assert_eq!(
        workload_done["truth_lines"],
        lines.len() as u64,
        "{workload_done}"
    );
    assert!(lines
        .iter()
        .any(|l| !l["rows"].as_array().expect("rows").is_empty()));
}

#[test]
fn same_seed_gives_identical_truth() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (
        dir.path().join("a.jsonl"),
        dir.path().join("b.jsonl"),
        dir.path().join("c.jsonl"),
    );
    run_to_end(7, &a);
    run_to_end(7, &b);
    run_to_end(8, &c);
    let (a, b, c) = (
        std::fs::read(&a).expect("a"),
        std::fs::read(&b).expect("b"),
        std::fs::read(&c).expect("c"),
    );
    assert!(!a.is_empty());
    assert!(a == b, "same seed, different truth logs");
    assert!(a != c, "different seeds, same truth log");
}

#[cfg(unix)]
#[tokio::test]
async fn pd_answers_while_running() {
    let mut sim = Sim::spawn(&["--stores", "2", "--rate", "200", "--seed", "3"]);
    let (_, ready) = sim.ready();
    let pd_url = ready["pd_url"].as_str().expect("pd_url").to_owned();
    let cluster_id = ready["cluster_id"].as_u64().expect("cluster_id");
    let channel = tokio::time::timeout(
        WAIT,
        tonic::transport::Channel::from_shared(pd_url)
            .expect("uri")
            .connect(),
    )
    .await
    .expect("connect in time")
    .expect("connect to PD");
    let mut pd = PdClient::new(channel);
    let members = pd
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .expect("GetMembers")
        .into_inner();
    assert_eq!(members.header.expect("header").cluster_id, cluster_id);
    assert!(members.leader.is_some());
    let stores = pd
        .get_all_stores(pdpb::GetAllStoresRequest {
            header: Some(pdpb::RequestHeader {
                cluster_id,
                ..Default::default()
            }),
            exclude_tombstone_stores: true,
        })
        .await
        .expect("GetAllStores")
        .into_inner();
    let mut got: Vec<(u64, String)> = stores
        .stores
        .iter()
        .map(|s| (s.id, s.address.clone()))
        .collect();
    got.sort();
    let want: Vec<(u64, String)> = ready["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .map(|s| {
            (
                s["id"].as_u64().expect("id"),
                s["addr"].as_str().expect("addr").to_owned(),
            )
        })
        .collect();
    assert_eq!(got, want);
    sim.sigterm();
    tokio::task::spawn_blocking(move || sim.done())
        .await
        .expect("join");
}

#[cfg(unix)]
#[test]
fn sigterm_stops_cleanly_with_a_complete_truth_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("truth.jsonl");
    let mut sim = Sim::spawn(&[
        "--stores",
        "2",
        "--rate",
        "500",
        "--seed",
        "5",
        "--truth",
        f.to_str().expect("utf-8 path"),
    ]);
    sim.ready();
    wait_for_lines(&sim, &f, 30);
    sim.sigterm();
    let done = sim.done();
    assert!(sim.workload_done.is_none(), "unlimited workload never done");
    let lines = check_truth(&f);
    assert!(lines.len() >= 30);
    assert_eq!(done["truth_lines"], lines.len() as u64, "{done}");
    assert!(sim.stderr().contains("SIGTERM"));
}

/// SIGUSR1 ends an unlimited workload as `--txns` would: `workload_done` with the totals, the
/// truth log complete, the cluster still serving until SIGTERM.
#[cfg(unix)]
#[test]
fn sigusr1_ends_the_workload_and_the_cluster_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("truth.jsonl");
    let mut sim = Sim::spawn(&[
        "--stores",
        "2",
        "--rate",
        "500",
        "--seed",
        "5",
        "--truth",
        f.to_str().expect("utf-8 path"),
    ]);
    sim.ready();
    wait_for_lines(&sim, &f, 30);
    sim.signal("-USR1");
    let done: Json = serde_json::from_str(&sim.line()).expect("JSON line");
    assert_eq!(done["event"], "workload_done", "{done}");
    let lines = check_truth(&f);
    assert_eq!(done["truth_lines"], lines.len() as u64, "{done}");
    // Still serving: nothing more is committed, and only SIGTERM ends it.
    assert!(sim.child_running(), "the cluster keeps serving");
    sim.sigterm();
    let end = sim.done();
    assert_eq!(end["truth_lines"], lines.len() as u64, "{end}");
    assert_eq!(check_truth(&f).len(), lines.len());
}

#[test]
fn chaos_run_completes_with_faults_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("truth.jsonl");
    let mut sim = Sim::spawn(&[
        "--stores",
        "3",
        "--regions-per-table",
        "2",
        "--txns",
        "300",
        "--rate",
        "300",
        "--seed",
        "11",
        "--chaos-interval",
        "20ms",
        "--resolved-ts-interval",
        "100ms",
        "--truth",
        f.to_str().expect("utf-8 path"),
        "--exit-when-done",
    ]);
    let (_, ready) = sim.ready();
    assert!(
        ready["regions"].as_u64().is_some_and(|r| r >= 20),
        "{ready}"
    );
    let done = sim.done();
    assert_eq!(done["txns"], 300, "{done}");
    assert!(done["faults"].as_u64().is_some_and(|n| n > 0), "{done}");
    assert!(sim.stderr().contains("chaos fault injected"));
    assert!(check_truth(&f).len() >= 300);
}

#[test]
fn idle_cluster_has_only_the_setup_ddls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("truth.jsonl");
    let mut sim = Sim::spawn(&[
        "--workload",
        "none",
        "--stores",
        "1",
        "--truth",
        f.to_str().expect("utf-8 path"),
        "--exit-when-done",
    ]);
    sim.ready();
    let done = sim.done();
    assert_eq!(done["txns"], 0, "{done}");
    let lines = check_truth(&f);
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|l| l["ddl"].is_string()));
}

#[test]
fn non_loopback_pd_address_is_refused() {
    let mut sim = Sim::spawn(&["--pd-listen", "0.0.0.0:0", "--exit-when-done"]);
    let st = sim.wait();
    assert!(!st.success());
    assert!(sim.stderr().contains("loopback"), "{}", sim.stderr());
}

#[cfg(unix)]
#[tokio::test]
async fn gc_advances_up_to_the_service_safe_points() {
    use tibinlog::capture::pd::{PdClient, PdConfig};
    use tokio_util::sync::CancellationToken;

    let mut sim = Sim::spawn(&[
        "--workload",
        "none",
        "--stores",
        "1",
        "--seed",
        "4",
        "--gc-interval",
        "20ms",
        "--gc-life-time",
        "0s",
    ]);
    let (_, ready) = sim.ready();
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let pd = PdClient::connect(
        PdConfig::new(vec![ready["pd"].as_str().expect("pd").to_owned()]),
        cancel.clone(),
    )
    .await
    .expect("connect to PD");
    let poll = |what: &'static str, want: Box<dyn Fn(u64) -> bool + Send>| {
        let pd = &pd;
        async move {
            let deadline = Instant::now() + WAIT;
            loop {
                let sp = pd.get_gc_safe_point().await.expect("GetGCSafePoint").0;
                if want(sp) {
                    return sp;
                }
                assert!(Instant::now() < deadline, "GC safe point {sp}: {what}");
                tokio::time::sleep(POLL).await;
            }
        }
    };
    // No service: GC follows the clock.
    poll("moves with no service", Box::new(|sp| sp > 0)).await;
    // A service safe point caps it.
    let held = pd.tso().await.expect("TSO");
    let min = pd
        .update_service_gc_safe_point("test", 3600, held)
        .await
        .expect("UpdateServiceGCSafePoint");
    assert_eq!(min, held, "accepted");
    let h = held.0;
    poll(
        "reaches the service safe point",
        Box::new(move |sp| sp == h),
    )
    .await;
    // The clock moves on; GC stays at the service safe point.
    let later = loop {
        let t = pd.tso().await.expect("TSO");
        if t.physical_ms() > held.physical_ms() + 200 {
            break t;
        }
        tokio::time::sleep(POLL).await;
    };
    assert_eq!(pd.get_gc_safe_point().await.expect("GetGCSafePoint"), held);
    // A service may not go below the minimum (PD ≤ 8.5 semantics).
    let refused = pd
        .update_service_gc_safe_point("other", 3600, held.prev())
        .await
        .expect("UpdateServiceGCSafePoint");
    assert_eq!(refused, held, "refused below the minimum");
    // Released: GC moves on.
    pd.update_service_gc_safe_point("test", 0, held)
        .await
        .expect("remove the service safe point");
    let l = later.0;
    poll(
        "moves on once released",
        Box::new(move |sp| sp >= l >> 18 << 18),
    )
    .await;
    sim.sigterm();
    tokio::task::spawn_blocking(move || sim.done())
        .await
        .expect("join");
}

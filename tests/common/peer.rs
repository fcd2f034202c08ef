//! Finding the real peers (programs, jars) that tests talk to. A missing peer skips the test
//! locally but fails it under CI (`CI=true`), so CI can never pass by silently not testing.

#![allow(dead_code)]

use std::path::PathBuf;

/// True when running under CI (`CI=true`).
pub fn under_ci() -> bool {
    std::env::var("CI").map(|v| v == "true").unwrap_or(false)
}

/// Finds an executable on PATH (or in /usr/bin, /usr/sbin).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Reports a missing peer: panics under CI, otherwise prints why the test is skipped.
pub fn missing(what: &str) {
    assert!(
        !under_ci(),
        "{what} is missing; scripts/install-deps.sh installs it"
    );
    eprintln!("skipped: {what} is missing (run scripts/install-deps.sh)");
}

/// The directory `scripts/peer-jars.sh install NAME` filled for the Maven peer
/// `tests/peers/NAME/pom.xml` (its `libs/` holds the jars), or `None`, after reporting it
/// missing, when it is not installed.
pub fn maven_peer(name: &str) -> Option<PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/peer-jars.sh"))
        .args(["path", name])
        .output()
        .expect("run scripts/peer-jars.sh");
    assert!(out.status.success(), "scripts/peer-jars.sh path {name}");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !dir.join(".complete").is_file() {
        missing(&format!(
            "the jars of tests/peers/{name} in {} (scripts/peer-jars.sh install {name})",
            dir.display()
        ));
        return None;
    }
    Some(dir)
}

/// A peer program (Canal's or Maxwell's JVM) running as a child process: its output file, its
/// log file, and how a test waits on it, checks it and stops it. Killed when dropped.
pub struct JavaPeer {
    name: &'static str,
    child: tokio::process::Child,
    /// Where the program writes what it hands out.
    pub out: std::path::PathBuf,
    /// Its log.
    pub err: std::path::PathBuf,
    /// Lines of the log a failure quotes.
    tail: usize,
}

/// Upper bound of a peer's start and stop.
pub const PEER_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

impl JavaPeer {
    /// Starts `cmd` (its stdout and stderr are set here: to `out` when `stdout_is_out`, else
    /// discarded, and to `err`), killed on drop.
    pub fn spawn(
        name: &'static str,
        mut cmd: tokio::process::Command,
        out: &std::path::Path,
        err: &std::path::Path,
        stdout_is_out: bool,
        tail: usize,
    ) -> JavaPeer {
        let log = std::fs::File::create(err).expect("peer log file");
        let stdout = if stdout_is_out {
            std::process::Stdio::from(std::fs::File::create(out).expect("peer output file"))
        } else {
            std::process::Stdio::null()
        };
        let child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        JavaPeer {
            name,
            child,
            out: out.to_path_buf(),
            err: err.to_path_buf(),
            tail,
        }
    }

    /// The last lines of the log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.err).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(self.tail)..].join("\n")
    }

    /// Panics (with the log) if the program has exited.
    pub fn assert_running(&mut self, what: &str) {
        if let Some(st) = self.child.try_wait().expect("poll the peer") {
            panic!(
                "{what}: {} exited ({st}); log:\n{}",
                self.name,
                self.log_tail()
            );
        }
    }

    /// Waits until the log holds `marker` (the program said it is ready), failing if it exits
    /// or takes longer than [`PEER_WAIT`].
    pub async fn wait_for_log(&mut self, marker: &str, what: &str) {
        let deadline = std::time::Instant::now() + PEER_WAIT;
        loop {
            self.assert_running(&format!("before it would {what}"));
            let log = std::fs::read_to_string(&self.err).unwrap_or_default();
            if log.contains(marker) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not {what} in time; log:\n{}",
                self.name,
                self.log_tail()
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Stops the program as an operator stops a service (SIGTERM: its shutdown hook runs).
    pub async fn stop(mut self) -> std::process::ExitStatus {
        self.assert_running("at stop");
        let pid = self.child.id().expect("the peer's pid");
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "SIGTERM to {}", self.name);
        self.wait_exit("stop").await
    }

    /// Kills the program with SIGKILL: no shutdown hook runs.
    pub async fn kill(mut self) -> std::process::ExitStatus {
        self.assert_running("at kill");
        self.child.start_kill().expect("SIGKILL to the peer");
        self.wait_exit("die").await
    }

    async fn wait_exit(&mut self, what: &str) -> std::process::ExitStatus {
        tokio::time::timeout(PEER_WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} does not {what} in time", self.name))
            .expect("wait for the peer")
    }
}

/// Polls `done` every 100 ms until it gives a value, checking `peer` is still running and
/// failing after `deadline`, naming `what` and the state `done` last described (its error),
/// with the peer's log.
pub async fn wait_until<T>(
    peer: &mut JavaPeer,
    what: &str,
    deadline: std::time::Instant,
    mut done: impl FnMut() -> Result<T, String>,
) -> T {
    loop {
        let state = match done() {
            Ok(v) => return v,
            Err(state) => state,
        };
        peer.assert_running(what);
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {} {state}; log:\n{}",
            peer.name,
            peer.log_tail()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

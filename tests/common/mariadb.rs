//! A throwaway MariaDB server for real-peer tests: its own data dir and socket under a temp dir,
//! no TCP, binary log on. Dropped = killed and removed.
//!
//! The server binaries come from Debian's `mariadb-server` (installed by `scripts/install-deps.sh`).
//! Without them a test is skipped locally but fails under CI (`CI=true`), so CI can never pass by
//! silently not testing.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct MariaDb {
    child: Child,
    dir: tempfile::TempDir,
}

fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl MariaDb {
    /// Starts a server with `extra` options added to its command line, or returns `None` (after
    /// saying why) when MariaDB is not installed and we are not under CI.
    pub fn start(extra: &[&str]) -> Option<MariaDb> {
        let (Some(server), Some(install)) = (find("mariadbd"), find("mariadb-install-db")) else {
            let ci = std::env::var("CI").map(|v| v == "true").unwrap_or(false);
            assert!(
                !ci,
                "MariaDB is not installed; scripts/install-deps.sh installs it"
            );
            eprintln!("skipped: MariaDB is not installed (run scripts/install-deps.sh)");
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let out = Command::new(install)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ])
            .output()
            .expect("run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let sock = dir.path().join("sock");
        let child = Command::new(server)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", sock.display()))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .arg(format!(
                "--log-error={}",
                dir.path().join("err.log").display()
            ))
            .args(["--user=root", "--skip-networking", "--server-id=7"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        let mut db = MariaDb { child, dir };
        db.wait_ready();
        Some(db)
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = self.child.try_wait().expect("poll mariadbd") {
                let log =
                    std::fs::read_to_string(self.dir.path().join("err.log")).unwrap_or_default();
                panic!("mariadbd exited early ({st}):\n{log}");
            }
            let ok = self
                .client()
                .args(["-e", "SELECT 1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "mariadbd did not become ready in 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A `mariadb` client command connected to this server as root.
    pub fn client(&self) -> Command {
        let mut c = Command::new(find("mariadb").expect("mariadb client installed"));
        c.arg("--no-defaults")
            .arg(format!(
                "--socket={}",
                self.dir.path().join("sock").display()
            ))
            .arg("-uroot");
        c
    }

    /// Runs SQL, panicking with the server's message on failure.
    pub fn sql(&self, sql: &str) {
        let out = self
            .client()
            .args(["-e", sql])
            .output()
            .expect("run mariadb");
        assert!(
            out.status.success(),
            "SQL failed: {}\n{sql}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The binlog files listed in the index `<basename>.index`, in order.
    pub fn binlog_files(&self, basename: &str) -> Vec<PathBuf> {
        let index = self.data_dir().join(format!("{basename}.index"));
        let text = std::fs::read_to_string(&index).expect("read binlog index");
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let p = Path::new(l.trim());
                if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    self.data_dir().join(p.file_name().expect("file name"))
                }
            })
            .collect()
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

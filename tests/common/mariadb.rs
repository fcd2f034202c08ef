//! A throwaway MariaDB server for real-peer tests: its own data dir and socket under a temp dir,
//! no TCP. Dropped = killed and removed. It can be a replica of our server: a replica connects
//! out to its master, so it needs no TCP port of its own.
//!
//! The server binaries come from Debian's `mariadb-server`, the tools (`mariadb`,
//! `mariadb-binlog`) from `mariadb-client` (both installed by `scripts/install-deps.sh`).
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

/// An executable on PATH (or in /usr/sbin, /usr/bin).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn under_ci() -> bool {
    std::env::var("CI").map(|v| v == "true").unwrap_or(false)
}

/// The executable `name`, or `None` after saying that the test is skipped; under CI a missing
/// tool fails the test instead.
pub fn require_tool(name: &str) -> Option<PathBuf> {
    let found = find_tool(name);
    if found.is_none() {
        assert!(
            !under_ci(),
            "{name} is not installed; scripts/install-deps.sh installs it"
        );
        eprintln!("skipped: {name} is not installed (run scripts/install-deps.sh)");
    }
    found
}

impl MariaDb {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A server listening on a free loopback TCP port too (for JDBC drivers, which have no
    /// Unix sockets), with that port; `None` as [`MariaDb::start`].
    pub fn start_tcp() -> Option<(MariaDb, u16)> {
        MariaDb::start_tcp_with(&[])
    }

    /// [`MariaDb::start_tcp`] with `extra` options as [`MariaDb::start`] takes them.
    pub fn start_tcp_with(extra: &[&str]) -> Option<(MariaDb, u16)> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let port_arg = format!("--port={port}");
        let mut args = vec!["--skip-networking=0", &port_arg, "--bind-address=127.0.0.1"];
        args.extend_from_slice(extra);
        let db = MariaDb::start(&args)?;
        Some((db, port))
    }

    /// Starts a server (`--server-id=7`) with `extra` options added to its command line (they
    /// come last, so they override, e.g. another `--server-id`), or returns `None` (after saying
    /// why) when MariaDB is not installed and we are not under CI.
    pub fn start(extra: &[&str]) -> Option<MariaDb> {
        let (Some(server), Some(install)) =
            (find_tool("mariadbd"), find_tool("mariadb-install-db"))
        else {
            assert!(
                !under_ci(),
                "MariaDB is not installed; scripts/install-deps.sh installs it"
            );
            eprintln!("skipped: MariaDB is not installed (run scripts/install-deps.sh)");
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        // A server removes every `#sql*` file in its tmpdir when it starts: with the shared /tmp,
        // one test's server start deletes another's bootstrap temp tables. Each gets its own.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).expect("tmp dir");
        let out = Command::new(install)
            .env("TMPDIR", &tmp)
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
            .env("TMPDIR", &tmp)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
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
        let mut c = Command::new(find_tool("mariadb").expect("mariadb client installed"));
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
        self.query(sql);
    }

    /// The text result of `sql` (tab-separated columns, no header), panicking on failure.
    pub fn query(&self, sql: &str) -> String {
        let out = self
            .client()
            .args(["-N", "-e", sql])
            .output()
            .expect("run mariadb");
        assert!(
            out.status.success(),
            "SQL failed: {}\n{sql}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 result")
    }

    /// The server's Unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// A `mysql_async` connection as root over the Unix socket (text protocol answers keep
    /// NULL and binary values apart, which the CLI's batch output does not).
    pub async fn conn(&self) -> mysql_async::Conn {
        let opts = mysql_async::OptsBuilder::default()
            .socket(Some(self.socket().to_string_lossy().into_owned()))
            .user(Some("root"));
        mysql_async::Conn::new(opts)
            .await
            .expect("connect to MariaDB")
    }

    /// The server's error log (for failure messages).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("err.log")).unwrap_or_default()
    }

    /// `SHOW SLAVE STATUS`, or `None` when no replication is configured.
    pub async fn slave_status(&self) -> Option<SlaveStatus> {
        use mysql_async::prelude::Queryable;
        let mut conn = self.conn().await;
        let row: Option<mysql_async::Row> = conn
            .query_first("SHOW SLAVE STATUS")
            .await
            .expect("SHOW SLAVE STATUS");
        let _ = conn.disconnect().await;
        let row = row?;
        let text = |name: &str| -> String {
            row.get::<Option<String>, _>(name)
                .unwrap_or_else(|| panic!("SHOW SLAVE STATUS has no {name}"))
                .unwrap_or_default()
        };
        let number = |name: &str| -> u64 {
            text(name)
                .parse()
                .unwrap_or_else(|_| panic!("{name} is not a number"))
        };
        Some(SlaveStatus {
            io_running: text("Slave_IO_Running"),
            sql_running: text("Slave_SQL_Running"),
            master_log_file: text("Master_Log_File"),
            read_master_log_pos: number("Read_Master_Log_Pos"),
            relay_master_log_file: text("Relay_Master_Log_File"),
            exec_master_log_pos: number("Exec_Master_Log_Pos"),
            last_error: text("Last_Error"),
            last_io_error: text("Last_IO_Error"),
            last_sql_error: text("Last_SQL_Error"),
            last_io_errno: number("Last_IO_Errno"),
            using_gtid: text("Using_Gtid"),
            gtid_io_pos: text("Gtid_IO_Pos"),
        })
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

/// The `SHOW SLAVE STATUS` columns the tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveStatus {
    pub io_running: String,
    pub sql_running: String,
    /// Where the I/O thread has read to, in the master's coordinates.
    pub master_log_file: String,
    pub read_master_log_pos: u64,
    /// Where the SQL thread has executed to, in the master's coordinates.
    pub relay_master_log_file: String,
    pub exec_master_log_pos: u64,
    pub last_error: String,
    pub last_io_error: String,
    pub last_sql_error: String,
    pub last_io_errno: u64,
    /// `No`, `Slave_Pos` or `Current_Pos`.
    pub using_gtid: String,
    /// The MariaDB GTID position of the I/O thread (`domain-server-seq,…`).
    pub gtid_io_pos: String,
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

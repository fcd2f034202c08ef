//! A `tibinlog` child process of a benchmark (`regions`, `huge_txn`): its stdout JSON log lines
//! arrive on a channel, its stderr goes to a log file; killed on drop and with the benchmark.

use std::path::Path;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;

#[path = "../../tests/common/parent.rs"]
mod parent;

pub struct Proc {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Proc {
    /// Runs the project's binary with `args` (`RUST_LOG=info`), stderr into `log`.
    pub fn spawn(args: &[String], log: &Path) -> Proc {
        let err = std::fs::File::create(log).expect("log file");
        let program = Path::new(env!("CARGO_BIN_EXE_tibinlog"));
        let mut child = parent::tibinlog_command(program, args, err)
            .spawn()
            .expect("spawn tibinlog");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut r = BufReader::new(out).lines();
            while let Ok(Some(l)) = r.next_line().await {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// The first stdout JSON line with `"event": event`; panics with the log's tail if the
    /// process ends first.
    pub async fn wait_event(&mut self, event: &str, log: &Path) -> serde_json::Value {
        loop {
            let Some(line) = self.lines.recv().await else {
                let tail = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(30).collect();
                panic!("process ended before `{event}`:\n{}", tail.join("\n"));
            };
            if let Ok(j) = serde_json::from_str::<serde_json::Value>(&line) {
                if j["event"] == event {
                    return j;
                }
            }
        }
    }
}

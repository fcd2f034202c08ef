//! `tibinlog check`: proves that a downstream copy (a MySQL or MariaDB replica of a tibinlog
//! server, or a database loaded from its binlog) equals TiDB at one binlog position, lists
//! every row that differs, and with `--repair` writes (and with `--apply` runs) what makes
//! the target equal.
//!
//! - [`align`]: both sides at the same position P (a replica is run to P by its own
//!   replication and held there while it is read; TiDB is read at the timestamp of P).
//! - [`sql`]: the statements, the same text on both sides (chunk checksums in SQL, so equal
//!   chunks never cross the network).
//! - [`plan`]: one chunk's check, a pure state machine (checksum, bisect, read rows, diff).
//! - [`shape`]: which tables and columns both sides have, and the key that orders them.
//! - [`run`]: the async shell: connections, alignment, catalogs, progress.
//! - [`worker`]: chunk boundaries from the source's key, and the workers that check chunks.
//! - [`report`]: the summary, the differences and the repair, as text and JSON.
//! - [`metrics`]: its figures on `/metrics` (`--status-addr`) while it runs.

pub mod align;
pub mod metrics;
pub mod plan;
pub mod report;
pub mod run;
pub mod shape;
pub mod sql;
pub mod worker;

use std::path::PathBuf;

/// Arguments of `tibinlog check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// The tibinlog server whose TiDB tables are the truth (HOST:PORT).
    #[arg(long)]
    pub source: String,
    #[arg(long, default_value = "root")]
    pub source_user: String,
    #[arg(long, default_value = "")]
    pub source_password: String,
    /// The copy to check (HOST:PORT): a MySQL or MariaDB replica of the source, or any
    /// MySQL-protocol database loaded from its binlog (then `--at` says which position).
    #[arg(long)]
    pub target: String,
    #[arg(long, default_value = "root")]
    pub target_user: String,
    #[arg(long, default_value = "")]
    pub target_password: String,
    /// Databases to check (all but the system ones by default).
    #[arg(long, value_delimiter = ',', conflicts_with = "tables")]
    pub databases: Vec<String>,
    /// Tables to check, as db.table.
    #[arg(long, value_delimiter = ',')]
    pub tables: Vec<String>,
    /// Rows per chunk (each chunk is checksummed on both sides).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(2..))]
    pub chunk_rows: u64,
    /// Chunks checked at once (each with a connection to each side).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub threads: u64,
    /// The position the target reflects, for a target that does not replicate from the
    /// source: FILE:POS of the source's binlog, the GTID set it has applied, or ts:TSO.
    #[arg(long)]
    pub at: Option<String>,
    /// Write the statements that make the target equal (REPLACE / DELETE by key, one
    /// transaction per chunk) into the report.
    #[arg(long)]
    pub repair: bool,
    /// Run the repair on the target (with `--repair`), while it is held at the position.
    #[arg(long, requires = "repair")]
    pub apply: bool,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Differences listed per table (all are counted and repaired).
    #[arg(long, default_value_t = 10_000)]
    pub max_listed: usize,
    /// Serve the check's figures on `/metrics` (Prometheus) at this address while it runs.
    #[arg(long)]
    pub status_addr: Option<std::net::SocketAddr>,
}

/// Why a check could not run (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{side} {addr}: {error}")]
    Connect {
        side: &'static str,
        addr: String,
        error: String,
    },
    #[error("on the source, {sql}: {error}")]
    Source { sql: String, error: String },
    #[error("on the target, {sql}: {error}")]
    Target { sql: String, error: String },
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
}

/// At most this much of a statement goes into an error message.
const SQL_IN_ERRORS: usize = 300;

fn clip(sql: &str) -> String {
    if sql.len() <= SQL_IN_ERRORS {
        return sql.to_owned();
    }
    let mut end = SQL_IN_ERRORS;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &sql[..end])
}

impl CheckError {
    pub fn source(sql: &str, e: impl std::fmt::Display) -> CheckError {
        CheckError::Source {
            sql: clip(sql),
            error: e.to_string(),
        }
    }

    pub fn target(sql: &str, e: impl std::fmt::Display) -> CheckError {
        CheckError::Target {
            sql: clip(sql),
            error: e.to_string(),
        }
    }
}

/// Exit status: every checked table equal.
pub const EXIT_EQUAL: u8 = 0;
/// Exit status: differences found (listed).
pub const EXIT_DIFFERENT: u8 = 1;
/// Exit status: the check could not run.
pub const EXIT_ERROR: u8 = 2;

/// Runs `tibinlog check`: the report on stdout (and as JSON with `--json`), progress on
/// stderr; returns the exit status. Cancelling `stop` (the binary does on Ctrl-C or SIGTERM)
/// ends the check, a held replica let go on first.
pub async fn main(args: CheckArgs, stop: tokio_util::sync::CancellationToken) -> u8 {
    let metrics = metrics::CheckMetrics::default();
    let served = match args.status_addr {
        Some(addr) => match metrics::serve(addr, std::sync::Arc::new(metrics.clone())).await {
            Ok((local, task)) => {
                eprintln!("tibinlog check: metrics on http://{local}/metrics");
                Some(task)
            }
            Err(e) => {
                eprintln!("tibinlog check: --status-addr {addr}: {e}");
                return EXIT_ERROR;
            }
        },
        None => None,
    };
    let mut stderr = std::io::stderr();
    let checked = run::check(&args, run::Watch::new(&mut stderr, metrics), &stop).await;
    if let Some(task) = served {
        task.abort();
    }
    let report = match checked {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tibinlog check: {e}");
            return EXIT_ERROR;
        }
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = report.write_text(&mut out) {
        eprintln!("tibinlog check: writing the report: {e}");
        return EXIT_ERROR;
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(path, json) {
            eprintln!("tibinlog check: writing {}: {e}", path.display());
            return EXIT_ERROR;
        }
    }
    if report.equal {
        EXIT_EQUAL
    } else {
        EXIT_DIFFERENT
    }
}

//! The arguments of `tibinlog sim`, their defaults and parsers, and the seed and pre-split
//! span derived from them.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::builder::TypedValueParser as _;

use crate::sim::server::DEFAULT_RESOLVED_TS_INTERVAL;

/// Default `--rate`: transactions per second (0 = unthrottled).
pub const DEFAULT_RATE: f64 = 1000.0;
/// The fixed epoch of in-process clusters ([`SimArgs::default`]): 2025-01-01T00:00:00Z.
pub const DEFAULT_EPOCH_MS: u64 = 1_735_689_600_000;
/// Default `--stores`.
pub const DEFAULT_STORES: usize = 3;
/// Default `--progress-interval`.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(5);
/// Pre-split handle span when `--txns` is unlimited.
pub const UNLIMITED_HANDLE_SPAN: i64 = 100_000;
/// Default `--gc-life-time` (TiDB's `tidb_gc_life_time`).
pub const DEFAULT_GC_LIFE_TIME: Duration = Duration::from_secs(10 * 60);

/// Which workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadKind {
    /// Tables are created and split, then the cluster stays idle.
    None,
    /// The seeded OLTP mix (inserts, updates, deletes, PK changes, DDL now and then).
    Oltp,
    /// One transaction of `--huge-bytes` into `huge.big`, prewritten batch by batch, then
    /// committed; the cluster then stays idle.
    Huge,
}

/// Start of the virtual clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epoch {
    /// The wall clock at start.
    Now,
    /// Unix milliseconds.
    Ms(u64),
}

impl FromStr for Epoch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("now") {
            return Ok(Epoch::Now);
        }
        s.parse::<u64>()
            .map(Epoch::Ms)
            .map_err(|_| format!("expected `now` or Unix milliseconds, got {s:?}"))
    }
}

/// Arguments of `tibinlog sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// PD's listen address; the host must be loopback, port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub pd_listen: SocketAddr,
    /// Number of TiKV stores (each on a free loopback port).
    #[arg(long, default_value_t = DEFAULT_STORES, value_parser = clap::value_parser!(u16).range(1..).map(usize::from))]
    pub stores: usize,
    /// Regions per workload table record span (each partition's span for partitioned tables).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..).map(usize::from))]
    pub regions_per_table: usize,
    /// Idle tables `scale.t00001` … `scale.tN` (BIGINT primary key, INT, VARCHAR(32)), created
    /// in batches of one CREATE TABLES job each and split like the workload tables, with the
    /// leaders of their regions spread over the stores as PD's balancer leaves them: the
    /// many-tables, many-regions cluster of the scale benchmark.
    #[arg(long, default_value_t = 0)]
    pub tables: usize,
    /// Workload to run.
    #[arg(long, value_enum, default_value_t = WorkloadKind::Oltp)]
    pub workload: WorkloadKind,
    /// Transactions per second; 0 = as fast as possible.
    #[arg(long, default_value_t = DEFAULT_RATE)]
    pub rate: f64,
    /// Transactions to run (setup DDLs not counted); unlimited when absent.
    #[arg(long)]
    pub txns: Option<u64>,
    /// Seed of every random choice; from the time when absent (printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Truth log: one JSON line per committed user transaction or DDL, written as it commits.
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// TiKV `cdc.min-ts-interval`: how often resolved ts is sent.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub resolved_ts_interval: Duration,
    /// Inject one random fault every interval (off when absent).
    #[arg(long, value_parser = parse_duration)]
    pub chaos_interval: Option<Duration>,
    /// Run GC every interval (off when absent): the GC safe point moves to
    /// `now − --gc-life-time`, capped by the PD service safe points.
    #[arg(long, value_parser = parse_duration)]
    pub gc_interval: Option<Duration>,
    /// History GC keeps (TiDB's `tidb_gc_life_time`), on the virtual clock.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub gc_life_time: Duration,
    /// Exit once `--txns` transactions are done (otherwise keep serving until a signal).
    #[arg(long)]
    pub exit_when_done: bool,
    /// Start of the virtual TSO clock: Unix milliseconds (a fixed value makes runs of one seed
    /// byte-identical), or `now`, like a real PD.
    #[arg(long, default_value = "now")]
    pub epoch_ms: Epoch,
    /// How often a progress line is logged.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub progress_interval: Duration,
    /// Create the workload tables without their JSON columns (for MariaDB replicas and
    /// `mariadb-binlog`, which cannot read MySQL's binary JSON).
    #[arg(long)]
    pub no_json: bool,
    /// Keep to the DDL that leaves every row in its table: no RENAME TABLES, TRUNCATE
    /// PARTITION or EXCHANGE PARTITION (for consumers that track tables by name).
    #[arg(long)]
    pub basic_ddl: bool,
    /// Run no EXCHANGE PARTITION (its `CREATE TABLES` make plain tables instead of exchange
    /// pairs), for consumers whose DDL parser rejects it (Maxwell 1.22).
    #[arg(long)]
    pub no_exchange_partition: bool,
    /// Keep at most this many live rows per workload table: an insert into a full table
    /// deletes a row instead, so that a long run's data stays bounded (the store is in memory).
    #[arg(long)]
    pub max_live_rows: Option<usize>,
    /// Keep at most this many workload tables: a DDL that would create one more drops one
    /// the workload created instead, so that a long run's tables stay bounded.
    #[arg(long)]
    pub max_tables: Option<usize>,
    /// PD members: the first listens on --pd-listen and leads at start, the others on free
    /// ports (a client given the first learns them through GetMembers).
    #[arg(long, default_value_t = 1)]
    pub pd_members: usize,
    /// Serve PD and TiKV over mutual TLS: the CA that signs every certificate (with --cert and
    /// --key; `tibinlog certs` makes a set). URLs become `https://`.
    #[arg(long, requires_all = ["cert", "key"])]
    pub ca: Option<PathBuf>,
    /// The servers' certificate (for 127.0.0.1 and localhost).
    #[arg(long, requires = "ca")]
    pub cert: Option<PathBuf>,
    /// Its private key.
    #[arg(long, requires = "ca")]
    pub key: Option<PathBuf>,
    /// PD's `cert-allowed-cn`: client certificate names PD accepts, checked in the handshake
    /// (empty: any the CA signed).
    #[arg(long, value_delimiter = ',', requires = "ca")]
    pub pd_cert_allowed_cn: Vec<String>,
    /// TiKV's `cert-allowed-cn`, checked on every call (UNAUTHENTICATED otherwise).
    #[arg(long, value_delimiter = ',', requires = "ca")]
    pub tikv_cert_allowed_cn: Vec<String>,
    /// `--workload huge`: bytes of row values in the one transaction (suffixes K, M, G).
    #[arg(long, value_parser = parse_size, default_value = "1G")]
    pub huge_bytes: u64,
    /// `--workload huge`: bytes of each row's value.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..=(64 << 20)).map(|v| v as usize))]
    pub huge_row_bytes: usize,
}

/// Parses a byte count such as `512`, `64K`, `100M`, `5G` (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("expected a byte count such as 512, 64K, 100M or 5G, got {s:?}"))
}

impl Default for SimArgs {
    fn default() -> Self {
        SimArgs {
            pd_listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            stores: DEFAULT_STORES,
            regions_per_table: 1,
            tables: 0,
            workload: WorkloadKind::Oltp,
            rate: DEFAULT_RATE,
            txns: None,
            seed: None,
            truth: None,
            resolved_ts_interval: DEFAULT_RESOLVED_TS_INTERVAL,
            chaos_interval: None,
            gc_interval: None,
            gc_life_time: DEFAULT_GC_LIFE_TIME,
            exit_when_done: false,
            epoch_ms: Epoch::Ms(DEFAULT_EPOCH_MS),
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
            no_json: false,
            basic_ddl: false,
            no_exchange_partition: false,
            max_live_rows: None,
            max_tables: None,
            pd_members: 1,
            ca: None,
            cert: None,
            key: None,
            pd_cert_allowed_cn: Vec::new(),
            tikv_cert_allowed_cn: Vec::new(),
            huge_bytes: 1 << 30,
            huge_row_bytes: 8192,
        }
    }
}

/// Parses a duration such as `250ms`, `1s`, `1.5s`, `2m`, `1h30m` (humantime's units).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (e.g. 250ms, 1s, 1.5s, 2m, 1h30m)");
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match rest[..unit_end].trim() {
            "ns" | "nsec" => 1e-9,
            "us" | "usec" | "µs" => 1e-6,
            "ms" | "msec" => 1e-3,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            "" if num == 0.0 => 0.0,
            _ => return Err(bad()),
        };
        total += num * secs;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// A seed from the wall clock and the process id.
pub(super) fn seed_from_time() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut rng = crate::sim::ts::SimRng::new(nanos ^ (u64::from(std::process::id()) << 32));
    rng.next_u64() >> 1
}

/// The handle span the pre-split spreads over: roughly the largest handle `txns` transactions
/// reach in one table (each inserts ~1.4 rows per table touched and bumps the next key by 1–3).
pub fn presplit_handle_span(txns: Option<u64>) -> i64 {
    match txns {
        Some(n) => i64::try_from(n)
            .unwrap_or(i64::MAX / 2)
            .clamp(16, i64::MAX / 2),
        None => UNLIMITED_HANDLE_SPAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn epoch() {
        assert_eq!("now".parse::<Epoch>(), Ok(Epoch::Now));
        assert_eq!("12".parse::<Epoch>(), Ok(Epoch::Ms(12)));
        assert!("yesterday".parse::<Epoch>().is_err());
    }
}

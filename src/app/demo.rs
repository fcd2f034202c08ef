//! `tibinlog demo`: the simulated TiDB cluster with its OLTP workload (DDL included) and the
//! app serving it, in one process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use tibinlog_protocol::binlog::RowMetadata;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::{App, AppConfig};
use crate::model::Ts;
use crate::sim::cli::{Epoch, SimArgs, SimBuilder};

/// Arguments of `tibinlog demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// MySQL protocol listen address (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:3307")]
    pub listen: SocketAddr,
    /// A second listen address that greets as MariaDB 10.11, for MariaDB replicas replicating
    /// by GTID (`MASTER_USE_GTID=slave_pos`).
    #[arg(long)]
    pub mariadb_listen: Option<SocketAddr>,
    /// HTTP address of Prometheus `/metrics`, the `/api/v1` JSON status and the status page
    /// ("off": none; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8300")]
    pub status_listen: String,
    /// Directory of the binlog files; a fresh temporary directory (removed at exit) when
    /// absent. Must not hold a binlog already: the simulated cluster is new on every run.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// User name to log in with.
    #[arg(long, default_value = "root")]
    pub user: String,
    /// Its password.
    #[arg(long, default_value = "")]
    pub password: String,
    /// Stop the workload after this many transactions (the server keeps serving).
    #[arg(long)]
    pub txns: Option<u64>,
    /// Workload transactions per second; 0 = as fast as it can.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Seed of the workload; from the time when absent.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the simulator's truth log (one JSON line per transaction) to this file.
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// `@@binlog_row_metadata` of the binlog written: FULL, MINIMAL or NONE (see the server's
    /// `--binlog-row-metadata`).
    #[arg(long, default_value = "FULL", value_parser = parse_row_metadata)]
    pub binlog_row_metadata: RowMetadata,
    /// Run no EXCHANGE PARTITION (for consumers whose DDL parser rejects it, e.g. Maxwell
    /// 1.22).
    #[arg(long)]
    pub no_exchange_partition: bool,
}

fn parse_row_metadata(s: &str) -> Result<RowMetadata, String> {
    RowMetadata::parse(s).ok_or_else(|| format!("{s:?} is not FULL, MINIMAL or NONE"))
}

/// Runs the demo until `shutdown` fires.
pub async fn run(args: DemoArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    if !args.rate.is_finite() || args.rate < 0.0 {
        anyhow::bail!("--rate {}: must be 0 or a positive number", args.rate);
    }
    if args.user.is_empty() {
        anyhow::bail!("--user must not be empty");
    }
    let (data_dir, temporary) = match &args.data_dir {
        Some(d) => {
            if d.join("binlog").join("binlog.index").exists() {
                anyhow::bail!(
                    "{} already holds a binlog; the demo's simulated cluster is new on every run, \
                     so give it an empty (or no) --data-dir",
                    d.display()
                );
            }
            (d.clone(), false)
        }
        None => {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let d = std::env::temp_dir()
                .join(format!("tibinlog-demo-{}-{nanos:08x}", std::process::id()));
            (d, true)
        }
    };
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("create data dir {}", data_dir.display()))?;
    let result = run_in(&args, data_dir.clone(), shutdown).await;
    if temporary {
        if let Err(e) = std::fs::remove_dir_all(&data_dir) {
            tracing::warn!(dir = %data_dir.display(), error = %e, "could not remove the demo's data dir");
        }
    }
    result
}

async fn run_in(
    args: &DemoArgs,
    data_dir: PathBuf,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let sim_args = SimArgs {
        rate: args.rate,
        txns: args.txns,
        seed: args.seed,
        truth: args.truth.clone(),
        resolved_ts_interval: Duration::from_millis(200),
        epoch_ms: Epoch::Now,
        progress_interval: Duration::from_secs(3600),
        no_exchange_partition: args.no_exchange_partition,
        ..SimArgs::default()
    };
    let sim = SimBuilder::new(sim_args)
        .start(shutdown.child_token())
        .await
        .context("start the simulated cluster")?;
    let start_ts = Ts(sim.cluster().tso().0);
    let mut cfg = AppConfig::new(vec![sim.cluster().pd_url()], args.listen, data_dir.clone());
    cfg.start_ts = Some(start_ts);
    cfg.row_metadata = args.binlog_row_metadata;
    cfg.mariadb_listen = args.mariadb_listen;
    cfg.status_listen =
        match args.status_listen.trim() {
            "" | "off" => None,
            text => Some(text.parse().with_context(|| {
                format!("--status-listen {text:?} is not HOST:PORT (or \"off\")")
            })?),
        };
    cfg.users = std::sync::Arc::new(crate::server::users::Users::single(
        &args.user,
        &args.password,
    ));
    cfg.progress_interval = Duration::from_secs(5);
    let app = match App::start(cfg, shutdown.clone()).await {
        Ok(app) => app,
        Err(e) => {
            let _ = sim.shutdown().await;
            return Err(e);
        }
    };
    let addr = app.local_addr();
    let (host, port) = (addr.ip(), addr.port());
    let pw = if args.password.is_empty() {
        String::new()
    } else {
        " -p".to_owned()
    };
    println!("tibinlog demo: MySQL protocol on {addr}");
    if let Some(m) = app.mariadb_addr() {
        println!("MariaDB-flavoured listener (GTID replicas) on {m}");
    }
    if let Some(s) = app.status_addr() {
        println!("status page:  http://{s}/   (metrics: http://{s}/metrics, API: http://{s}/api/v1/status)");
    }
    println!(
        "seed={} start_ts={} server_uuid={}",
        sim.info().seed,
        start_ts.0,
        app.server_uuid()
    );
    println!("data dir: {}", data_dir.display());
    println!("connect:      mysql -h{host} -P{port} -u{}{pw}", args.user);
    println!("              (then e.g. SHOW MASTER STATUS; SHOW BINARY LOGS; SHOW BINLOG EVENTS;)");
    println!(
        "read binlog:  mariadb-binlog --read-from-remote-server -h{host} -P{port} -u{}{pw} binlog.000001",
        args.user
    );
    println!("stop with Ctrl-C");
    let mut workload_running = true;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = app.stopped() => break,
            _ = sim.workload_done(), if workload_running => {
                workload_running = false;
                let s = sim.summary();
                println!("workload done: {} transactions, {} DDLs; still serving", s.txns, s.ddls);
                info!(txns = s.txns, "workload done");
            }
        }
    }
    let served = app.wait().await;
    let sim_result = sim.shutdown().await;
    served?;
    sim_result.map(drop)
}

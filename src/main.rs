//! The `tibinlog` command line: parses arguments, sets up logging, runs one subcommand.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

/// Serves a TiDB cluster's committed row changes as a MySQL binlog master.
#[derive(Debug, Parser)]
#[command(name = "tibinlog", version, about)]
struct Cli {
    /// Log lines as text or as JSON objects, one per line (also TIBINLOG_LOG_FORMAT).
    #[arg(long, global = true, value_enum)]
    log_format: Option<LogFormat>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr at `RUST_LOG`'s levels (info by default), as text or JSON lines with the
/// span fields (connection id, user, replica server id) in each line.
fn init_logging(format: Option<LogFormat>) -> anyhow::Result<()> {
    let format = match format {
        Some(f) => f,
        None => match std::env::var("TIBINLOG_LOG_FORMAT").ok().as_deref() {
            None | Some("") | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => anyhow::bail!("TIBINLOG_LOG_FORMAT={other:?}: expected text or json"),
        },
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .flatten_event(true)
            .init(),
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode keys, row values and binlog files offline.
    Inspect {
        #[command(subcommand)]
        what: Inspect,
    },
    /// Serve a TiDB cluster's row changes as a MySQL binlog master.
    Server(tibinlog::app::config::ServerArgs),
    /// Compare a downstream copy (a MySQL or MariaDB replica, or a database loaded from the
    /// binlog) with TiDB at the same binlog position: exit 0 when equal, 1 with the differing
    /// rows listed, 2 when the check could not run.
    Check(Box<tibinlog::check::CheckArgs>),
    /// Run the server on an embedded simulated TiDB cluster with a live workload.
    #[cfg(feature = "sim")]
    Demo(tibinlog::app::demo::DemoArgs),
    /// Run a simulated TiDB cluster (PD + TiKV on loopback) with a seeded workload.
    #[cfg(feature = "sim")]
    Sim(tibinlog::sim::cli::SimArgs),
    /// Print a password hash for `password_hash` in the configuration (MySQL's stored form),
    /// reading the password from the first line of standard input.
    HashPassword {
        /// caching_sha2_password (`$A$005$…`) or mysql_native_password (`*…`).
        #[arg(long, default_value = "caching_sha2_password")]
        plugin: String,
    },
    /// Make a test certificate set: a CA, a server pair for 127.0.0.1/localhost and a client
    /// pair (for `sim --ca/--cert/--key`, `server --ca/--cert/--key` and the MySQL listener).
    #[cfg(feature = "sim")]
    Certs {
        /// Directory to write ca.pem, server.pem, server-key.pem, client.pem, client-key.pem.
        #[arg(long)]
        out: PathBuf,
        /// Common name of the server certificate.
        #[arg(long, default_value = "tidb-server")]
        server_cn: String,
        /// Host names and IP addresses the server certificate is valid for.
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1,::1,localhost")]
        server_names: Vec<String>,
        /// Common name of the client certificate.
        #[arg(long, default_value = "tibinlog")]
        client_cn: String,
    },
}

#[derive(Debug, Subcommand)]
enum Inspect {
    /// Print the events of a binlog file as `mysqlbinlog -vv` does.
    Binlog {
        /// Path of the binlog file.
        file: PathBuf,
    },
    /// Decode a TiKV key (hex) into table/handle, index or meta parts, as JSON.
    Key {
        /// The key is in PD/region form (memcomparable-encoded), not a raw TiDB key.
        #[arg(long)]
        encoded: bool,
        /// The key bytes in hex.
        hex: String,
    },
    /// Decode a TiDB row value (hex, row format v1 or v2) with a TableInfo JSON file.
    Row {
        /// TableInfo JSON, as TiDB stores it in its meta keys.
        #[arg(long)]
        table_info: PathBuf,
        /// The row handle, for tables whose integer primary key is the handle.
        #[arg(long, conflicts_with = "key", allow_negative_numbers = true)]
        handle: Option<i64>,
        /// The record key (hex) the value belongs to; its handle fills the primary key.
        #[arg(long)]
        key: Option<String>,
        /// The row value bytes in hex.
        hex: String,
    },
}

/// glibc's allocator as a long-running pipeline needs it, set before any thread starts.
///
/// By default glibc gives threads up to 8 arenas per core, and memory freed in one arena
/// serves only that arena: rows allocated by the gRPC readers and freed by the sorter and
/// writer threads stay resident in many half-empty arenas. Two arenas, and buffers of 1 MiB
/// and more in their own mappings (returned to the system when freed, instead of the
/// threshold glibc raises to 32 MiB after the first large free), keep the resident set close
/// to the memory the pipeline's bounds allow: a 1 GiB transaction peaks at about 450 MiB
/// instead of about 505 (`benches/huge_txn.rs`). `MALLOC_ARENA_MAX` or
/// `MALLOC_MMAP_THRESHOLD_` in the environment win over these.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // `mallopt` is a C call; nothing else in the project is unsafe.
fn tune_allocator() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes allocator parameters; called before other threads.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    }
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: as above.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    if let Err(e) = init_logging(cli.log_format) {
        eprintln!("error: {e:#}");
        return ExitCode::FAILURE;
    }
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `tibinlog check`, with its own exit statuses (0 equal, 1 different, 2 could not run).
fn check(args: tibinlog::check::CheckArgs) -> ExitCode {
    let status = runtime().and_then(|rt| {
        rt.block_on(async {
            let stop = CancellationToken::new();
            let signals = tokio::spawn(cancel_on_signal(stop.clone())?);
            let status = tibinlog::check::main(args, stop.clone()).await;
            stop.cancel();
            let _ = signals.await;
            Ok(status)
        })
    });
    match status {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(tibinlog::check::EXIT_ERROR)
        }
    }
}

/// Runs one subcommand; its exit status.
fn run(command: Command) -> anyhow::Result<ExitCode> {
    let done = match command {
        Command::Inspect { what } => tibinlog::inspect::run(what.into()),
        #[cfg(feature = "sim")]
        Command::Sim(args) => run_until_signal(|shutdown| async move {
            tibinlog::sim::cli::run(args, shutdown).await.map(drop)
        }),
        #[cfg(feature = "sim")]
        Command::Certs {
            out,
            server_cn,
            server_names,
            client_cn,
        } => {
            let files = tibinlog::sim::pki::write_set(&out, &server_cn, &server_names, &client_cn)?;
            println!(
                "{}",
                serde_json::json!({
                    "ca": files.ca,
                    "server_cert": files.server_cert,
                    "server_key": files.server_key,
                    "client_cert": files.client_cert,
                    "client_key": files.client_key,
                })
            );
            Ok(())
        }
        Command::HashPassword { plugin } => {
            let method = tibinlog_protocol::wire::auth::AuthMethod::from_name(plugin.as_bytes())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--plugin {plugin:?}: expected caching_sha2_password or mysql_native_password"
                    )
                })?;
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            let password = line.strip_suffix('\n').unwrap_or(&line);
            let password = password.strip_suffix('\r').unwrap_or(password);
            let hash = tibinlog::server::users::hash_password(method, password.as_bytes())
                .map_err(|e| anyhow::anyhow!(e))?;
            println!("{hash}");
            Ok(())
        }
        Command::Server(args) => {
            use tibinlog::app::config;
            let settings = config::settings(&args, &config::process_env)?;
            if args.print_config {
                print!("{}", config::render(&settings));
                return Ok(ExitCode::SUCCESS);
            }
            let cfg = config::app_config(&settings)?;
            run_until_signal(|shutdown| async move {
                let app = tibinlog::app::App::start(cfg, shutdown).await?;
                println!("{}", app.serving_line());
                app.wait().await
            })
        }
        #[cfg(feature = "sim")]
        Command::Demo(args) => {
            run_until_signal(|shutdown| tibinlog::app::demo::run(args, shutdown))
        }
        Command::Check(args) => return Ok(check(*args)),
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// The multi-threaded runtime every async subcommand runs on.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the async runtime")
}

/// Runs `f` on the runtime with a token that Ctrl-C or SIGTERM cancels.
fn run_until_signal<F, Fut>(f: F) -> anyhow::Result<()>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    runtime()?.block_on(async {
        let shutdown = CancellationToken::new();
        let signals = tokio::spawn(cancel_on_signal(shutdown.clone())?);
        let r = f(shutdown.clone()).await;
        shutdown.cancel();
        let _ = signals.await;
        r
    })
}

/// Registers Ctrl-C and (on unix) SIGTERM handlers now, and returns a future that cancels
/// `token` when one of them arrives (or ends when `token` is cancelled otherwise). Registering
/// before any work starts means a signal sent after the first output line is never lost.
fn cancel_on_signal(
    token: CancellationToken,
) -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    let (mut term, mut int) = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()).context("listen for SIGTERM")?,
            signal(SignalKind::interrupt()).context("listen for SIGINT")?,
        )
    };
    Ok(async move {
        #[cfg(unix)]
        let got = async {
            tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            }
        };
        #[cfg(not(unix))]
        let got = async {
            match tokio::signal::ctrl_c().await {
                Ok(()) => "Ctrl-C",
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            signal = got => {
                tracing::info!(signal, "signal received, shutting down");
                token.cancel();
            }
            _ = token.cancelled() => {}
        }
    })
}

impl From<Inspect> for tibinlog::inspect::Request {
    fn from(i: Inspect) -> Self {
        match i {
            Inspect::Binlog { file } => Self::Binlog { file },
            Inspect::Key { encoded, hex } => Self::Key { hex, encoded },
            Inspect::Row {
                table_info,
                handle,
                key,
                hex,
            } => Self::Row {
                table_info,
                hex,
                handle: match (handle, key) {
                    (Some(h), _) => tibinlog::inspect::row::HandleArg::Int(h),
                    (None, Some(k)) => tibinlog::inspect::row::HandleArg::Key(k),
                    (None, None) => tibinlog::inspect::row::HandleArg::None,
                },
            },
        }
    }
}

//! Many regions and tables in one instance. Prints figures; asserts no time limit.
//!
//! Two processes besides this one: `tibinlog sim --workload none --tables N
//! --regions-per-table R` (the simulated cluster: `N` idle tables, each split into `R` regions
//! whose leaders are spread over 3 stores; TiKV sends resolved ts every second) and `tibinlog
//! server` (the one measured, with its default filter, so capture subscribes every table's
//! record span). This bench reads the server's status API (`/api/v1/status`) and `/proc`.
//!
//! Prints:
//! * the time from the server's start until every region it subscribed is initialized
//!   (`regions.queued` and `regions.initializing` at 0, `regions.normal` covering every table's
//!   regions), and the regions per second;
//! * the server's peak RSS (`VmHWM`) after initialization and at the end;
//! * its CPU while idle, as a share of one core, over `REGIONS_IDLE_SECS` (30) with the
//!   resolved ts advancing every second (user + system time from `/proc/PID/stat`), and the
//!   simulator's beside it;
//! * the resolved-ts lag (wall clock − the resolved ts's physical part; the simulator's clock
//!   follows the wall clock) sampled every 100 ms over the same window: p50, p99, max. With
//!   resolved ts sent once a second, a lag sawtooths between the pipeline's delay and that
//!   plus a second.
//!
//! `REGIONS_TABLES` (10000), `REGIONS_PER_TABLE` (10), `REGIONS_IDLE_SECS` (30).
//! `cargo bench --bench regions`.

use std::time::{Duration, Instant};

#[path = "common/child.rs"]
mod child;
#[path = "common/util.rs"]
mod util;
use child::Proc;

/// User + system CPU seconds of a process.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which ends at the last ')': utime and stime are the 12th
    // and 13th of them (fields 14 and 15 of the line).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / clock_ticks_per_second()
}

/// `getconf CLK_TCK`: the unit of the times in `/proc/PID/stat`.
fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let tables: usize = util::env_num("REGIONS_TABLES", 10_000);
    let per_table: usize = util::env_num("REGIONS_PER_TABLE", 10);
    let idle_secs: u64 = util::env_num("REGIONS_IDLE_SECS", 30);
    let dir = tempfile::tempdir().expect("temp dir");

    let began = Instant::now();
    let sim_log = dir.path().join("sim.log");
    let mut sim = Proc::spawn(
        &[
            "sim",
            "--workload",
            "none",
            "--tables",
            &tables.to_string(),
            "--regions-per-table",
            &per_table.to_string(),
            "--resolved-ts-interval",
            "1s",
            "--epoch-ms",
            "now",
            "--seed",
            "18",
        ]
        .map(String::from),
        &sim_log,
    );
    let ready = sim.wait_event("ready", &sim_log).await;
    let pd = ready["pd"].as_str().expect("pd address").to_string();
    let regions = ready["regions"].as_u64().unwrap_or(0);
    println!(
        "simulated cluster: {tables} idle tables × {per_table} regions, {regions} regions in all, ready in {:.1} s",
        began.elapsed().as_secs_f64()
    );

    let port = util::free_port();
    let status_port = util::free_port();
    let data_dir = dir.path().join("server-data");
    let args: Vec<String> = [
        "server",
        "--pd",
        &pd,
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--status-listen",
        &format!("127.0.0.1:{status_port}"),
        "--data-dir",
        data_dir.to_str().expect("utf-8 path"),
    ]
    .map(String::from)
    .into();
    let server_log = dir.path().join("server.log");
    let started = Instant::now();
    let mut server = Proc::spawn(&args, &server_log);
    server.wait_event("serving", &server_log).await;
    let pid = server.pid();
    let serving = started.elapsed();

    // Every table's regions initialized.
    let want = (tables * per_table) as u64;
    let mut last_print = Instant::now();
    let initialized = loop {
        if let Some(s) = util::status(status_port) {
            let r = &s["capture"]["regions"];
            let (q, i, n) = (
                r["queued"].as_u64().unwrap_or(u64::MAX),
                r["initializing"].as_u64().unwrap_or(u64::MAX),
                r["normal"].as_u64().unwrap_or(0),
            );
            if q == 0 && i == 0 && n >= want {
                break (started.elapsed(), n);
            }
            if last_print.elapsed() >= Duration::from_secs(10) {
                println!("  … {n} normal, {i} initializing, {q} queued");
                last_print = Instant::now();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "regions not initialized within 30 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (init, normal) = initialized;
    let init_hwm = util::rss(&pid.to_string()).1;
    println!(
        "server: serving after {:.1} s; {normal} regions initialized after {:.1} s = {:.0} regions/s; peak RSS {:.0} MiB",
        serving.as_secs_f64(),
        init.as_secs_f64(),
        normal as f64 / init.as_secs_f64(),
        util::mb(init_hwm)
    );

    // Idle: let the last scans' work drain, then measure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu0 = (cpu_seconds(pid), cpu_seconds(sim.pid()));
    let t0 = Instant::now();
    let mut lags = Vec::new();
    while t0.elapsed() < Duration::from_secs(idle_secs) {
        if let Some(s) = util::status(status_port) {
            if let Some(l) = s["capture"]["resolved_lag_seconds"].as_f64() {
                lags.push(l);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu_seconds(pid) - cpu0.0) / wall;
    let sim_cpu = (cpu_seconds(sim.pid()) - cpu0.1) / wall;
    lags.sort_by(f64::total_cmp);
    println!(
        "idle for {wall:.0} s: server CPU {:.1}% of one core (simulator {:.1}%); resolved-ts lag over {} samples p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        cpu * 100.0,
        sim_cpu * 100.0,
        lags.len(),
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or(f64::NAN)
    );
    let end_hwm = util::rss(&pid.to_string()).1;
    let state = util::status(status_port)
        .map(|s| s["capture"].clone())
        .unwrap_or_default();
    println!(
        "server peak RSS at the end {:.0} MiB ({:.1} KiB per region); capture state {}, {} region errors; simulator peak RSS {:.0} MiB",
        util::mb(end_hwm),
        end_hwm as f64 / 1024.0 / normal.max(1) as f64,
        state["state"],
        state["region_errors_total"],
        util::mb(util::rss(&sim.pid().to_string()).1)
    );
    drop(server);
    drop(sim);
}

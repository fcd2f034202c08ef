//! One transaction larger than memory, from TiKV to a dump client. Prints figures; asserts no
//! time limit.
//!
//! Three processes: `tibinlog sim --workload huge` (the simulated TiKV keeps the data, so it
//! runs apart), `tibinlog server` (the one measured) and this bench as the client, a
//! `mysql_async` binlog stream that decodes every WRITE_ROWS row and checks its id and every
//! byte of its value (a function of the seed and the id). The transaction starts once the
//! server's capture has subscribed the table; its prewrites reach the server batch by batch
//! and, past `--prewrite-memory-bytes`, go to the sorter's RocksDB until the commits come.
//!
//! Prints: rows and bytes, seconds from the first prewrite to the client's XID, throughput,
//! the server's peak RSS (`VmHWM`) and the largest RSS sampled in each phase.
//!
//! `HUGE_BYTES` (`1G`; suffixes K, M, G), `HUGE_ROW_BYTES` (8192), `HUGE_PREWRITE_MEMORY`
//! (the server's default when unset), `HUGE_DIR` (a temporary directory when unset: it needs
//! about three times `HUGE_BYTES` of disk: spilled prewrites, sorter, binlog).
//!
//! `cargo bench --bench huge_txn`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::binlog::events::EventData;
use mysql_async::binlog::value::BinlogValue;
use mysql_async::BinlogStreamRequest;
use tibinlog::sim::cli::parse_size;
use tibinlog::sim::workload::huge::row_value;

#[path = "common/child.rs"]
mod child;
#[path = "common/util.rs"]
mod util;
use child::Proc;

const SEED: u64 = 20261202;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bytes = parse_size(&env_or("HUGE_BYTES", "1G")).expect("HUGE_BYTES");
    let row_bytes: usize = util::env_num("HUGE_ROW_BYTES", 8192);
    let rows = (bytes / row_bytes as u64).max(1);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = std::env::var_os("HUGE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("bench dir");
    let data_dir = dir.join("server-data");
    let _ = std::fs::remove_dir_all(&data_dir);
    println!(
        "huge transaction: {rows} rows of {row_bytes} B = {:.0} MiB of values; dir {}",
        util::mb(rows * row_bytes as u64),
        dir.display()
    );

    let sim_log = dir.join("sim.log");
    let mut sim = Proc::spawn(
        &[
            "sim",
            "--workload",
            "huge",
            "--huge-bytes",
            &bytes.to_string(),
            "--huge-row-bytes",
            &row_bytes.to_string(),
            "--seed",
            &SEED.to_string(),
            "--epoch-ms",
            "now",
        ]
        .map(String::from),
        &sim_log,
    );
    let ready = sim.wait_event("ready", &sim_log).await;
    let pd = ready["pd"].as_str().expect("pd address").to_string();

    let port = util::free_port();
    let mut args: Vec<String> = [
        "server",
        "--pd",
        &pd,
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
        data_dir.to_str().expect("utf-8 path"),
    ]
    .map(String::from)
    .into();
    if let Ok(m) = std::env::var("HUGE_PREWRITE_MEMORY") {
        let m = parse_size(&m).expect("HUGE_PREWRITE_MEMORY");
        args.extend(["--prewrite-memory-bytes".to_string(), m.to_string()]);
    }
    let server_log = dir.join("server.log");
    let mut server = Proc::spawn(&args, &server_log);
    server.wait_event("serving", &server_log).await;
    let pid = server.pid();

    // RSS sampler: the largest RSS seen while the client has no row yet (prewrites, commits,
    // sorting) and after (writing and serving).
    let rows_seen = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let peaks = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let sampler = {
        let (rows_seen, stop, peaks) = (rows_seen.clone(), stop.clone(), peaks.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let (now, _) = util::rss(&pid.to_string());
                let phase = usize::from(rows_seen.load(Ordering::Relaxed) > 0);
                peaks[phase].fetch_max(now, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let opts = util::mysql_opts(port, "root");
    let conn = mysql_async::Conn::new(opts).await.expect("connect");
    let mut stream = conn
        .get_binlog_stream(
            BinlogStreamRequest::new(77)
                .with_filename(b"binlog.000001")
                .with_pos(4),
        )
        .await
        .expect("binlog stream");
    let began = Instant::now();
    let mut first_row: Option<Instant> = None;
    let mut got = 0u64;
    let mut expected = Vec::new();
    let mut in_txn = false;
    while let Some(ev) = stream.next().await {
        let ev = ev.expect("event");
        match ev.read_data().expect("event decodes") {
            Some(EventData::RowsEvent(re)) => {
                let tme = stream.get_tme(re.table_id()).expect("table map").clone();
                if tme.table_name() != "big" {
                    continue;
                }
                in_txn = true;
                first_row.get_or_insert_with(Instant::now);
                for row in re.rows(&tme) {
                    let (_, after) = row.expect("row decodes");
                    let after = after.expect("after image");
                    let id = match after.as_ref(0) {
                        Some(BinlogValue::Value(mysql_async::Value::Int(i))) => *i,
                        other => panic!("id: {other:?}"),
                    };
                    row_value(SEED, id, row_bytes, &mut expected);
                    match after.as_ref(1) {
                        Some(BinlogValue::Value(mysql_async::Value::Bytes(b))) => {
                            assert!(*b == expected, "row {id}: value differs")
                        }
                        other => panic!("row {id}: value {:?}", other.map(|_| "not bytes")),
                    }
                    got += 1;
                }
                rows_seen.store(got, Ordering::Relaxed);
            }
            Some(EventData::XidEvent(_)) if in_txn => break,
            _ => {}
        }
    }
    let done = Instant::now();
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let (_, hwm) = util::rss(&pid.to_string());
    let sim_hwm = util::rss(&sim.pid().to_string()).1;
    let disk = dir_size(&data_dir);
    assert_eq!(got, rows, "rows received");

    let secs = done.duration_since(began).as_secs_f64();
    let serve_secs = first_row.map_or(0.0, |f| done.duration_since(f).as_secs_f64());
    let value_bytes = rows * row_bytes as u64;
    println!(
        "received {got} rows, every value checked, in {secs:.1} s from the dump's start: {:.1} MiB/s of values ({serve_secs:.1} s from the first row to the XID)",
        util::mb(value_bytes) / secs
    );
    println!(
        "server peak RSS {:.0} MiB (VmHWM); largest sample before the first row {:.0} MiB, after {:.0} MiB; value bytes / peak RSS = {:.1}",
        util::mb(hwm),
        util::mb(peaks[0].load(Ordering::Relaxed)),
        util::mb(peaks[1].load(Ordering::Relaxed)),
        value_bytes as f64 / hwm.max(1) as f64
    );
    println!(
        "server data dir at the end {:.0} MiB; simulator peak RSS {:.0} MiB",
        util::mb(disk),
        util::mb(sim_hwm)
    );
    let spill = std::fs::read_to_string(&server_log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("spill to disk"))
        .count();
    println!("server log: {spill} transaction spill(s) of prewrites to disk");
    drop(stream);
    drop(server);
    drop(sim);
}

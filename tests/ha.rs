//! High availability (ARCHITECTURE "High availability"): the bytes of the binlog are a function
//! of the upstream history and the point capture starts from, so an instance that takes over
//! from another's last transaction writes what the other wrote after it, byte for byte.

use std::path::Path;
use std::time::{Duration, Instant};

use tibinlog::app::HaConfig;
use tibinlog::binlog_store::map::TxnEntry;
use tibinlog::capture::pd::{PdClient, PdConfig};
use tibinlog::ha::{Candidate, ElectionConfig, ElectionError, MemberInfo};
use tibinlog::model::Ts;
use tokio_util::sync::CancellationToken;

mod common;
use common::app::{
    app_config, finish_workload, opts, start_app_with, start_sim, start_sim_at_rate,
    wait_checkpoint, wait_until,
};
use common::etcd::{CutProxy, Etcd};
use mysql_async::prelude::*;

const SEED: u64 = 20_261_203;
/// Transactions of the workload (DDL and faults included).
const TXNS: u64 = 600;
/// Small files: the cuts land in different files and the runs rotate many times.
const MAX_BINLOG_SIZE: u64 = 48 << 10;

/// Warnings and errors of the apps go to the test's output (shown when a test fails).
fn log_warnings() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// Copies the data directory `from` into `to`, without the sorter (a cache, wiped at start).
fn copy_data_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("dir entry");
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().expect("file type").is_dir() {
            if e.file_name() != "sorter" {
                copy_data_dir(&src, &dst);
            }
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

/// Leaves in `binlog_dir` only what was written up to the end of `cut`: later files removed
/// from the directory and the index, the file of `cut` truncated after it. The map keeps its
/// later records: recovery drops those whose binlog is gone, as after a crash.
fn cut_binlog(binlog_dir: &Path, cut: &TxnEntry) {
    let name = |seq: u32| format!("binlog.{seq:06}");
    let mut kept = String::new();
    let index = std::fs::read_to_string(binlog_dir.join("binlog.index")).expect("index");
    for line in index.lines() {
        let seq: u32 = line
            .rsplit('.')
            .next()
            .and_then(|s| s.parse().ok())
            .expect("index line");
        if seq > cut.file_seq {
            std::fs::remove_file(binlog_dir.join(name(seq))).expect("remove");
        } else {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    std::fs::write(binlog_dir.join("binlog.index"), kept).expect("write index");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(binlog_dir.join(name(cut.file_seq)))
        .expect("open");
    f.set_len(cut.end_pos).expect("truncate");
}

/// Every file of the binlog directory but the map (whose records are in write order, so a
/// resumed run's differs) as (name, bytes), sorted.
fn binlog_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry"))
        .filter(|e| e.file_name() != "binlog.map")
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    out.sort();
    out
}

/// How an HA member presents its group to MySQL clients: `Tibinlog_ha_role`,
/// `Tibinlog_ha_owner` and `Tibinlog_ha_following` of `SHOW STATUS`, the `Tibinlog_Owner`
/// column of `SHOW MASTER STATUS`, and the ports `SHOW REPLICAS` lists.
#[derive(Debug, PartialEq, Eq)]
struct HaView {
    role: String,
    owner: String,
    following: String,
    master_status_owner: String,
    replica_ports: Vec<u16>,
}

async fn ha_view(addr: std::net::SocketAddr) -> HaView {
    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let vars: Vec<(String, String)> = conn
        .query("SHOW STATUS LIKE 'Tibinlog_ha_%'")
        .await
        .expect("SHOW STATUS");
    let var = |name: &str| {
        vars.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{name} missing from {vars:?}"))
    };
    let row: mysql_async::Row = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .expect("SHOW MASTER STATUS")
        .expect("a row");
    let master_status_owner: String = row.get("Tibinlog_Owner").expect("Tibinlog_Owner column");
    let replicas: Vec<mysql_async::Row> = conn.query("SHOW REPLICAS").await.expect("SHOW REPLICAS");
    let mut replica_ports: Vec<u16> = replicas
        .iter()
        .map(|r| r.get("Port").expect("Port"))
        .collect();
    replica_ports.sort_unstable();
    let _ = conn.disconnect().await;
    HaView {
        role: var("Tibinlog_ha_role"),
        owner: var("Tibinlog_ha_owner"),
        following: var("Tibinlog_ha_following"),
        master_status_owner,
        replica_ports,
    }
}

/// `schema.table.column type` of every column SQL clients see, sorted.
async fn columns(addr: std::net::SocketAddr) -> Vec<String> {
    let mut conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let rows: Vec<(String, String, String, String)> = conn
        .query(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS",
        )
        .await
        .expect("information_schema.COLUMNS");
    let _ = conn.disconnect().await;
    let mut out: Vec<String> = rows
        .into_iter()
        .filter(|(db, ..)| {
            !["information_schema", "mysql", "performance_schema"].contains(&db.as_str())
        })
        .map(|(db, t, c, ty)| format!("{db}.{t}.{c} {ty}"))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no tables seen at {addr}");
    out
}

/// Every binlog file of `short` is the start of the file of that name in `long` (the FORMAT_
/// DESCRIPTION's BINLOG_IN_USE flag aside: a file the other has closed has it cleared), and
/// `long` has no file `short` lacks before `short`'s last.
fn assert_binlog_prefix(short: &Path, long: &Path) {
    const FDE_FLAGS: std::ops::Range<usize> = 4 + 17..4 + 19;
    // The follower first: the owner's files only grow.
    let short = binlog_files(short);
    let long: std::collections::BTreeMap<_, _> = binlog_files(long).into_iter().collect();
    let data: Vec<_> = short
        .iter()
        .filter(|(n, _)| {
            n.strip_prefix("binlog.")
                .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    assert!(!data.is_empty(), "no binlog files");
    for (name, bytes) in data {
        let other = long
            .get(name)
            .unwrap_or_else(|| panic!("{name} is missing from the owner"));
        assert!(
            bytes.len() <= other.len(),
            "{name}: {} bytes, the owner's {}",
            bytes.len(),
            other.len()
        );
        let masked = |b: &[u8]| {
            let mut b = b.to_vec();
            b[FDE_FLAGS].fill(0);
            b
        };
        let (mine, theirs) = (masked(bytes), masked(&other[..bytes.len()]));
        if let Some(at) = mine.iter().zip(&theirs).position(|(x, y)| x != y) {
            panic!("{name} differs from the owner's at byte {at}");
        }
    }
}

/// One instance captures the whole history; others start from copies of its binlog cut at
/// different transactions (one the last of its file, so the resumed run makes the rotation),
/// each resuming capture from the checkpoint its copy has. At the end every binlog file and the
/// index are byte-identical to the first instance's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_resuming_from_different_points_write_identical_binlogs() {
    log_warnings();
    let run = start_sim(SEED, TXNS).await;
    // The resumed copies go back into the history: a service safe point of the test's own
    // holds it (in a group, each member's own safe point does).
    let pd = PdClient::connect(
        PdConfig::new(vec![run.sim.cluster().pd_url()]),
        CancellationToken::new(),
    )
    .await
    .expect("connect to PD");
    let min = pd
        .update_service_gc_safe_point("ha-test", 3600, run.start_ts.prev())
        .await
        .expect("hold a service safe point");
    assert!(min <= run.start_ts.prev());
    let root = tempfile::tempdir().expect("tempdir");
    let first_dir = root.path().join("first");
    let mut cfg = app_config(&run, &first_dir);
    cfg.max_binlog_size = MAX_BINLOG_SIZE;
    let first = start_app_with(cfg.clone()).await;
    let truth = finish_workload(&run, &first).await;
    let last_commit = truth
        .iter()
        .filter_map(|t| t["commit_ts"].as_u64())
        .max()
        .expect("transactions");
    let files = first.files();
    let entries: Vec<TxnEntry> = truth
        .iter()
        .filter(|t| t["ddl"].is_null())
        .filter_map(|t| files.find_txn(Ts(t["start_ts"].as_u64()?)))
        .collect();
    assert!(entries.len() > 100, "{} row transactions", entries.len());
    let binlog_dir = first.binlog_dir().to_path_buf();
    first.stop().await.expect("clean stop");
    let reference = binlog_files(&binlog_dir);
    assert!(
        reference.len() > 4,
        "the run rotated: {} files",
        reference.len() - 1
    );

    let n = entries.len();
    let last_of_a_file = entries
        .windows(2)
        .skip(n / 10)
        .find(|w| w[0].file_seq != w[1].file_seq)
        .map(|w| w[0])
        .expect("a transaction that ends a file");
    let cuts = [
        entries[n / 5],
        entries[n / 2],
        last_of_a_file,
        entries[n - 2],
    ];
    for (i, cut) in cuts.iter().enumerate() {
        let dir = root.path().join(format!("resumed-{i}"));
        copy_data_dir(&first_dir, &dir);
        cut_binlog(&dir.join("binlog"), cut);
        let mut c = cfg.clone();
        c.data_dir = dir.clone();
        let resumed = start_app_with(c).await;
        assert!(
            resumed.start_ts() <= cut.commit_ts,
            "cut {i}: capture resumed at {} after the cut's commit {}",
            resumed.start_ts().0,
            cut.commit_ts.0
        );
        let mut checkpoint = resumed.checkpoint();
        let reached = tokio::time::timeout(
            Duration::from_secs(60),
            checkpoint.wait_for(|c| c.0 >= last_commit),
        )
        .await
        .is_ok_and(|r| r.is_ok());
        if !reached {
            let mut conn = mysql_async::Conn::new(opts(resumed.local_addr(), "root"))
                .await
                .expect("connect");
            let status: Vec<(String, String)> = conn
                .query("SHOW STATUS LIKE 'Tibinlog%'")
                .await
                .expect("status");
            panic!(
                "cut {i} (gno {}, commit {}): checkpoint {} short of {last_commit} after 60 s; \
                 started at {}, {} written; {status:?}",
                cut.gno,
                cut.commit_ts.0,
                checkpoint.borrow().0,
                resumed.start_ts().0,
                resumed.txns_written()
            );
        }
        resumed.stop().await.expect("clean stop");
        let got = binlog_files(&dir.join("binlog"));
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&reference), "cut {i}: files");
        for ((name, bytes), (_, want)) in got.iter().zip(&reference) {
            if bytes != want {
                let at = bytes.iter().zip(want).position(|(a, b)| a != b);
                panic!(
                    "cut {i} (gno {} in binlog.{:06} at {}): {name} differs at byte {at:?} \
                     (lengths {} and {})",
                    cut.gno,
                    cut.file_seq,
                    cut.end_pos,
                    bytes.len(),
                    want.len()
                );
            }
        }
    }
}

/// A candidate of group `prefix` named `id`, reaching etcd at `endpoint`.
async fn candidate(endpoint: String, prefix: &str, id: &str, ttl: Duration) -> Candidate {
    Candidate::connect(ElectionConfig {
        endpoints: vec![endpoint],
        prefix: prefix.into(),
        member: MemberInfo {
            instance_id: id.into(),
            mysql: format!("{id}.example:3306"),
        },
        lease_ttl: ttl,
    })
    .await
    .expect("connect to etcd")
}

/// The owner is cut off from etcd: its fence is lost (it stops writing) before the standby's
/// campaign wins, and once it reaches etcd again its conditional write is refused there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_owner_is_fenced_before_another_takes_over() {
    let Some(etcd) = Etcd::start().await else {
        return;
    };
    let ttl = Duration::from_secs(2);
    let proxy = CutProxy::start(etcd.client_addr()).await;
    let a = candidate(proxy.endpoint(), "/t/cut", "a", ttl).await;
    let b = candidate(etcd.endpoint(), "/t/cut", "b", ttl).await;
    let cancel = CancellationToken::new();

    let owner_a = a.campaign(&cancel).await.expect("a wins");
    assert_eq!(b.owner().await.expect("owner"), Some(a.member().clone()));
    let fence_a = owner_a.fence();
    assert_eq!(fence_a.check(), Ok(()));
    assert!(owner_a
        .publish_end("binlog.000001:4")
        .await
        .expect("publish"));
    assert_eq!(
        b.published_end().await.expect("end").as_deref(),
        Some("binlog.000001:4")
    );
    let mut observed = b.observe(cancel.clone());
    observed
        .wait_for(|o| o.as_ref().is_some_and(|m| m.instance_id == "a"))
        .await
        .expect("observe a");
    let b_campaign = {
        let (b, cancel) = (b.clone(), cancel.clone());
        tokio::spawn(async move {
            let o = b.campaign(&cancel).await;
            (Instant::now(), o)
        })
    };
    // The keep-alives keep a owning past several TTLs.
    tokio::time::sleep(ttl * 2).await;
    assert_eq!(fence_a.check(), Ok(()), "keep-alives hold the lease");
    assert!(!b_campaign.is_finished());

    proxy.cut();
    tokio::time::timeout(ttl * 3, fence_a.lost())
        .await
        .expect("the fence is lost within its TTL");
    // From this instant on a refused every write, whenever the test saw it.
    let a_fenced_at = fence_a.valid_until();
    assert!(fence_a.check().is_err());
    let (b_won_at, owner_b) = tokio::time::timeout(ttl * 5, b_campaign)
        .await
        .expect("b wins once a's lease expires")
        .expect("campaign task");
    let owner_b = owner_b.expect("b wins");
    assert!(
        a_fenced_at <= b_won_at,
        "a stopped writing {:?} after b took over",
        a_fenced_at - b_won_at
    );
    observed
        .wait_for(|o| o.as_ref().is_some_and(|m| m.instance_id == "b"))
        .await
        .expect("observe b");
    assert!(owner_b
        .publish_end("binlog.000001:999")
        .await
        .expect("publish"));

    // Back in reach, the old owner still cannot write: a lost fence is lost for good.
    proxy.heal();
    assert!(
        owner_a.publish_end("binlog.000001:5").await.is_err(),
        "refused locally: the fence is lost"
    );
    assert_eq!(
        b.published_end().await.expect("end").as_deref(),
        Some("binlog.000001:999")
    );
    cancel.cancel();
}

/// A clean stop resigns: the standby wins without waiting for the lease; the old ownership's
/// fence is lost and a conditional write with its revision fails at etcd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resigning_owner_hands_over_and_a_restarted_etcd_keeps_the_owner() {
    let Some(mut etcd) = Etcd::start().await else {
        return;
    };
    let ttl = Duration::from_secs(30);
    let a = candidate(etcd.endpoint(), "/t/resign", "a", ttl).await;
    let b = candidate(etcd.endpoint(), "/t/resign", "b", ttl).await;
    let cancel = CancellationToken::new();
    let owner_a = a.campaign(&cancel).await.expect("a wins");
    let fence_a = owner_a.fence();

    // etcd restarts (SIGKILL): the lease outlives it, the keep-alive stream is reopened.
    etcd.restart().await;
    assert!(owner_a.publish_end("after restart").await.expect("publish"));
    assert_eq!(fence_a.check(), Ok(()));

    let b_campaign = {
        let (b, cancel) = (b.clone(), cancel.clone());
        tokio::spawn(async move { b.campaign(&cancel).await })
    };
    // With a 30 s TTL, b can only win this soon if a resigned.
    owner_a.resign().await.expect("resign");
    assert!(fence_a.is_lost());
    let owner_b = tokio::time::timeout(ttl / 2, b_campaign)
        .await
        .expect("b wins at once")
        .expect("campaign task")
        .expect("b wins");
    assert_eq!(b.owner().await.expect("owner"), Some(b.member().clone()));
    assert!(owner_b.publish_end("b").await.expect("publish"));

    // A campaign that is cancelled gives its lease back.
    let c = candidate(etcd.endpoint(), "/t/resign", "c", ttl).await;
    let stop = CancellationToken::new();
    let c_campaign = {
        let (c, stop) = (c.clone(), stop.clone());
        tokio::spawn(async move { c.campaign(&stop).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.cancel();
    assert!(matches!(
        c_campaign.await.expect("task"),
        Err(ElectionError::Stopped)
    ));
    cancel.cancel();
}

/// Two app instances in one HA group on a running workload: the first owns and writes, the
/// second stands by writing nothing; the owner is killed (no resign: its lease runs out), the
/// standby takes over and regenerates the binlog from its own (empty) one; the killed one
/// comes back as a standby; at the end the owner stops cleanly (resigns), the other takes over
/// at once and catches up. Both binlogs hold every transaction once and are byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_owner_is_replaced_and_both_instances_end_with_the_same_binlog() {
    log_warnings();
    let Some(etcd) = Etcd::start().await else {
        return;
    };
    let run = start_sim_at_rate(SEED + 1, 400, 150.0).await;
    let root = tempfile::tempdir().expect("tempdir");
    let cfg = |name: &str| {
        let mut c = app_config(&run, &root.path().join(name));
        c.max_binlog_size = MAX_BINLOG_SIZE;
        c.instance_id = Some(name.into());
        c.ha = Some(HaConfig {
            etcd: vec![etcd.endpoint()],
            prefix: Some("/t/app".into()),
            lease_ttl: Duration::from_secs(2),
            advertise: None,
            user: "root".into(),
            password: String::new(),
        });
        c
    };
    let a = start_app_with(cfg("a")).await;
    wait_until("a owns and writes", || a.txns_written() > 20).await;
    // b is new, and its store starts with a timestamp of its own (seconds before a's): it
    // takes a's first file and follows a's binlog as it grows.
    let b = start_app_with({
        let mut c = cfg("b");
        c.start_ts = Some(Ts::compose(a.start_ts().physical_ms() - 2_000, 0));
        c
    })
    .await;
    let sid = a.server_uuid();
    wait_until("b follows a", || {
        b.files().gtid_executed().last_gno(&sid) > a.files().gtid_executed().last_gno(&sid) / 2
            && b.files().gtid_executed().last_gno(&sid) > 60
    })
    .await;
    assert_binlog_prefix(b.binlog_dir(), a.binlog_dir());
    // Both say who owns; b follows a, and a lists b among its replicas.
    let a_owns = format!("a ({})", a.local_addr());
    assert_eq!(
        ha_view(b.local_addr()).await,
        HaView {
            role: "standby".into(),
            owner: a_owns.clone(),
            following: "ON".into(),
            master_status_owner: a_owns.clone(),
            replica_ports: Vec::new(),
        }
    );
    assert_eq!(
        ha_view(a.local_addr()).await,
        HaView {
            role: "owner".into(),
            owner: a_owns.clone(),
            following: "OFF".into(),
            master_status_owner: a_owns,
            replica_ports: vec![b.local_addr().port()],
        }
    );
    let observer = candidate(
        etcd.endpoint(),
        "/t/app",
        "observer",
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(
        observer
            .owner()
            .await
            .expect("owner")
            .map(|m| m.instance_id),
        Some("a".into())
    );
    let a_wrote = a.files().gtid_executed().last_gno(&sid);
    a.kill().await;
    // b relays what a made durable, then takes over and captures what comes after.
    wait_until("b takes over and writes", || {
        b.files().gtid_executed().last_gno(&sid) > a_wrote + 20
    })
    .await;
    assert_eq!(
        observer
            .owner()
            .await
            .expect("owner")
            .map(|m| m.instance_id),
        Some("b".into())
    );
    let a = start_app_with(cfg("a")).await;
    let truth = finish_workload(&run, &b).await;
    // a follows b now: once it holds all of b's binlog, SQL sees the same tables on both (a
    // read the schema at its checkpoint when it started and after each DDL it relayed).
    wait_until("a follows b to its end", || {
        a.files().gtid_executed() == b.files().gtid_executed()
    })
    .await;
    assert_eq!(columns(a.local_addr()).await, columns(b.local_addr()).await);
    let b_dir = b.binlog_dir().to_path_buf();
    b.stop().await.expect("b stops cleanly");
    let last_commit = truth
        .iter()
        .filter_map(|t| t["commit_ts"].as_u64())
        .max()
        .expect("transactions");
    wait_checkpoint(&a, last_commit).await;
    let gtids = a.files().gtid_executed().to_string();
    assert_eq!(
        gtids,
        format!("{}:1-{}", a.server_uuid(), truth.len()),
        "every transaction once"
    );
    let a_dir = a.binlog_dir().to_path_buf();
    a.stop().await.expect("a stops cleanly");
    let (got, want) = (binlog_files(&a_dir), binlog_files(&b_dir));
    assert_eq!(got.len(), want.len(), "same files");
    for ((name, bytes), (_, other)) in got.iter().zip(&want) {
        assert!(bytes == other, "{name} differs between the instances");
    }
}

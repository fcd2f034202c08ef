//! `mysql_async`'s binlog stream against the whole product (simulated cluster with the seeded
//! OLTP workload, DDL and faults → changefeed → binlog store → MySQL server), by GTID set
//! (COM_BINLOG_DUMP_GTID) and by file/position (COM_BINLOG_DUMP), resuming after a disconnect:
//! the client drops its connection in the middle of the stream and comes back with the GTID set
//! it had seen, or with the file and position after the last transaction it received whole;
//! the union must be the truth log exactly (every row and value, in order, nothing lost or
//! doubled). Reading by file/pos from the start is also covered by `app_server.rs`.

mod common;

use std::collections::BTreeSet;
use std::str::FromStr;

use common::app::{dense_set, finish_workload, master_gtids, start_app, start_sim};
use common::mysql_binlog::{assert_seen_equals_truth, expected, read_binlog, SeenTxn};
use mysql_async::{BinlogStreamRequest, Sid};

/// Server id this replica announces.
const REPLICA_ID: u32 = 77;

/// `uuid:a-b:c:...` for the GNOs in `gnos`.
fn set_text(uuid: &str, gnos: &BTreeSet<u64>) -> String {
    let mut out = String::from(uuid);
    let mut it = gnos.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end = it.next().expect("peeked");
        }
        if start == end {
            out.push_str(&format!(":{start}"));
        } else {
            out.push_str(&format!(":{start}-{end}"));
        }
    }
    out
}

fn gtid_request(set: &str) -> BinlogStreamRequest<'static> {
    let sids: Vec<Sid<'static>> = set
        .split(',')
        .map(|s| Sid::from_str(s.trim()).expect("GTID set text"))
        .collect();
    BinlogStreamRequest::new(REPLICA_ID)
        .with_gtid()
        .with_gtid_set(sids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_async_by_gtid_set_and_resume_after_disconnect() {
    let seed = 32;
    let run = start_sim(seed, 1_500).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start_app(&run, dir.path()).await;
    let want = finish_workload(&run, &app).await;
    let n = want.len() as u64;
    assert!(n > 500, "seed {seed}: only {n} transactions");
    let uuid = app.server_uuid().to_string();
    let addr = app.local_addr();
    assert_eq!(
        master_gtids(addr).await.expect("SHOW MASTER STATUS"),
        dense_set(&uuid, n as usize)
    );

    // (a) A GTID set with holes: exactly the transactions outside it arrive.
    let set = format!("{uuid}:1-3:7-9:{}-{}", n / 2, n / 2 + 10);
    let d = read_binlog(addr, gtid_request(&set), None).await;
    assert!(d.eof);
    let gnos: Vec<u64> = (4..=6).chain(10..n / 2).chain(n / 2 + 11..=n).collect();
    let compared =
        assert_seen_equals_truth("mysql_async GTID set", &d.txns, &expected(&want, gnos));
    assert!(compared > 10_000, "only {compared} values compared");
    // Transactions with a rows event mysql_common cannot decode (see tests/common/mysql_binlog.rs)
    // are compared without their rows; most must be compared whole.
    let undecodable = d.txns.iter().filter(|t| t.undecodable).count();
    assert!(
        undecodable * 5 < d.txns.len(),
        "{undecodable} of {} transactions have rows mysql_common cannot decode",
        d.txns.len()
    );

    // (b) GTID auto-positioning across disconnects: each leg stops after k transactions and
    // drops the connection; the next leg sends what was seen so far.
    let mut seen_gnos: BTreeSet<u64> = BTreeSet::from([1]);
    let mut seen: Vec<SeenTxn> = Vec::new();
    for (leg, k) in [400, 1, 350]
        .into_iter()
        .map(Some)
        .chain([None])
        .enumerate()
    {
        let d = read_binlog(addr, gtid_request(&set_text(&uuid, &seen_gnos)), k).await;
        if let Some(k) = k {
            assert_eq!(d.txns.len(), k, "GTID leg {leg} stops after {k}");
            assert!(!d.eof);
        } else {
            assert!(d.eof, "GTID leg {leg} reads to the end");
        }
        seen_gnos.extend(d.txns.iter().map(|t| t.gno));
        seen.extend(d.txns);
    }
    assert_seen_equals_truth("mysql_async GTID resumed", &seen, &expected(&want, 2..=n));
    assert_eq!(set_text(&uuid, &seen_gnos), dense_set(&uuid, n as usize));

    // (c) File/position across disconnects: each leg starts where the previous one's last
    // whole transaction ended (a leg that stops inside a rotation resumes in the new file).
    let mut at = ("binlog.000001".to_string(), 4u64);
    let mut seen: Vec<SeenTxn> = Vec::new();
    for (leg, k) in [300, 1, 500]
        .into_iter()
        .map(Some)
        .chain([None])
        .enumerate()
    {
        let request = BinlogStreamRequest::new(REPLICA_ID)
            .with_filename(at.0.as_bytes())
            .with_pos(at.1);
        let d = read_binlog(addr, request, k).await;
        if let Some(k) = k {
            assert_eq!(d.txns.len(), k, "file/pos leg {leg} stops after {k}");
            assert!(!d.eof);
        } else {
            assert!(d.eof, "file/pos leg {leg} reads to the end");
        }
        if let Some(last) = d.txns.last() {
            at = (last.file.clone(), last.pos);
        }
        seen.extend(d.txns);
    }
    assert_seen_equals_truth(
        "mysql_async file/pos resumed",
        &seen,
        &expected(&want, 1..=n),
    );

    eprintln!(
        "seed {seed}: {n} transactions, {compared} values compared in the GTID-set read, \
         {undecodable} transactions ({} rows events) undecodable by mysql_common, summary {:?}",
        d.undecodable,
        run.sim.summary()
    );
    app.stop().await.expect("clean stop");
    run.sim.shutdown().await.expect("sim shutdown");
}

//! The binlog store end to end: files written from real `MountedTable`s are read back with
//! mysql_common's binlog parser and every event, GTID, position and length is checked; crash
//! recovery is checked by truncating copies of a store at every byte of its last transactions
//! (and at random points) and reopening them; rotation, the index, purge, and the read side
//! (positions, ROTATE following, live tailing) are covered too.
#![allow(clippy::unwrap_used)]

#[path = "common/mariadb.rs"]
mod mariadb;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mysql_common::binlog::consts::BinlogVersion;
use mysql_common::binlog::events::{Event, EventData};
use mysql_common::binlog::row::BinlogRow;
use mysql_common::binlog::value::BinlogValue;
use mysql_common::binlog::BinlogFile;
use tibinlog::binlog_store::{BinlogStore, DumpError, Recovery, StoreConfig, StoreError, StorePos};
use tibinlog::model::Ts;
use tibinlog::mounter::{DdlEvent, MountedTable, RowChange, RowOp, TableFilter};
use tibinlog::tidb::schema::{mysql, schema_state, CIStr, ColumnInfo, FieldType, TableInfo};
use tibinlog_protocol::binlog::{GtidSet, Sid};
use tibinlog_protocol::value::Value;

const SERVER_ID: u32 = 77;
const BASE_MS: u64 = 1_700_000_000_000;

fn sid() -> Sid {
    Sid::parse("3e11fa47-71ca-11e1-9e33-c80aa9429562").unwrap()
}

fn cfg(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir, SERVER_ID, sid());
    c.server_version = "8.0.36-tibinlog-0.1.0".into();
    c.first_file_ts = Ts::compose(BASE_MS, 0);
    c
}

fn column(id: i64, name: &str, ft: FieldType) -> ColumnInfo {
    ColumnInfo {
        id,
        name: CIStr::new(name),
        offset: (id - 1) as usize,
        field_type: ft,
        state: schema_state::PUBLIC,
        ..ColumnInfo::default()
    }
}

/// `CREATE TABLE app.<name> (id INT NOT NULL, name VARCHAR(64))`, or with a MEDIUMBLOB `data`
/// column instead of `name`.
fn table(id: i64, name: &str, blob: bool) -> Arc<MountedTable> {
    let mut int = FieldType::new(mysql::TYPE_LONG);
    int.flag = mysql::NOT_NULL_FLAG;
    let second = if blob {
        let mut b = FieldType::new(mysql::TYPE_MEDIUM_BLOB);
        b.charset = "binary".into();
        b.collate = "binary".into();
        column(2, "data", b)
    } else {
        let mut v = FieldType::new(mysql::TYPE_VARCHAR);
        v.flen = 64;
        v.charset = "utf8mb4".into();
        v.collate = "utf8mb4_bin".into();
        column(2, "name", v)
    };
    let info = TableInfo {
        id,
        name: CIStr::new(name),
        charset: "utf8mb4".into(),
        collate: "utf8mb4_bin".into(),
        columns: vec![column(1, "id", int), second],
        state: schema_state::PUBLIC,
        max_col_id: 2,
        ..TableInfo::default()
    };
    Arc::new(MountedTable::new(1, "app", info, &TableFilter::all()).unwrap())
}

fn row(
    t: &Arc<MountedTable>,
    op: RowOp,
    (start_ts, commit_ts): (Ts, Ts),
    before: Option<(i64, &[u8])>,
    after: Option<(i64, &[u8])>,
) -> RowChange {
    let img = |(id, s): (i64, &[u8])| vec![Value::Int(id), Value::Bytes(s.to_vec())];
    RowChange {
        table: t.clone(),
        op,
        before: before.map(img),
        after: after.map(img),
        start_ts,
        commit_ts,
    }
}

/// The k-th (1-based) transaction of the test script: (start_ts, commit_ts). Some share a
/// commit_ts with the one before (async commit) and differ by start_ts.
fn txn_ts(k: u64) -> (Ts, Ts) {
    let commit = Ts::compose(BASE_MS + 1000 * (k / 2), 7);
    (Ts(commit.0 - 1000 + k), commit)
}

/// Kinds of transactions in the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A, A inserts; B insert; A update; A delete.
    Dml,
    Ddl,
}

fn kind(k: u64) -> Kind {
    if k % 5 == 3 {
        Kind::Ddl
    } else {
        Kind::Dml
    }
}

struct Tables {
    a: Arc<MountedTable>,
    b: Arc<MountedTable>,
}

fn tables() -> Tables {
    Tables {
        a: table(101, "a", false),
        b: table(102, "b", false),
    }
}

/// Writes script transaction `k` (not flushed).
fn write_txn(s: &mut BinlogStore, t: &Tables, k: u64) -> tibinlog::binlog_store::Committed {
    try_write_txn(s, t, k).unwrap()
}

/// [`write_txn`] that returns the store's error.
fn try_write_txn(
    s: &mut BinlogStore,
    t: &Tables,
    k: u64,
) -> Result<tibinlog::binlog_store::Committed, StoreError> {
    let ts = txn_ts(k);
    match kind(k) {
        Kind::Ddl => s.write_ddl(&DdlEvent {
            commit_ts: ts.1,
            start_ts: ts.0,
            part: 0,
            job_id: k as i64,
            action: 3,
            schema: "app".into(),
            query: format!("CREATE TABLE t{k} (id INT)"),
            table: None,
            catalog: None,
        }),
        Kind::Dml => {
            let id = k as i64 * 10;
            s.begin_txn(ts.0, ts.1)?;
            s.write_rows(&[
                row(&t.a, RowOp::Insert, ts, None, Some((id, b"x"))),
                row(&t.a, RowOp::Insert, ts, None, Some((id + 1, b"y"))),
                row(&t.b, RowOp::Insert, ts, None, Some((id + 2, b"z"))),
            ])?;
            s.write_rows(&[
                row(&t.a, RowOp::Update, ts, Some((id, b"x")), Some((id, b"xx"))),
                row(&t.a, RowOp::Delete, ts, Some((id + 1, b"y")), None),
            ])?;
            s.commit_txn()
        }
    }
}

/// Every event of a file with its start offset.
fn events_of(path: &Path) -> Vec<(u64, Event)> {
    let bytes = std::fs::read(path).unwrap();
    let f = BinlogFile::new(BinlogVersion::Version4, &bytes[..]).unwrap();
    let mut pos = 4u64;
    f.map(|e| {
        let e = e.unwrap();
        let start = pos;
        pos += u64::from(e.header().event_size());
        assert_eq!(u64::from(e.header().log_pos()), pos, "log_pos = end offset");
        assert_eq!(e.header().server_id(), SERVER_ID);
        (start, e)
    })
    .collect()
}

fn bin(dir: &Path, seq: u32) -> PathBuf {
    dir.join(format!("binlog.{seq:06}"))
}

fn int_at(r: &BinlogRow, i: usize) -> i64 {
    match r.as_ref(i) {
        Some(BinlogValue::Value(mysql_common::Value::Int(v))) => *v,
        other => panic!("column {i}: {other:?}"),
    }
}

fn gtids(n: u64) -> GtidSet {
    let mut s = GtidSet::new();
    s.add_interval(sid(), 1, n + 1);
    s
}

/// Checks the transactions of one file against the script: GTIDs, lengths, event shapes,
/// timestamps and row values. `first_gno` is the GNO of the first transaction in the file.
/// Returns the number of transactions and whether the file ends with ROTATE.
fn check_transactions(events: &[(u64, Event)], first_gno: u64) -> (u64, Option<String>) {
    let mut i = 2; // after FDE and PREVIOUS_GTIDS
    let mut n = 0u64;
    while i < events.len() {
        let (start, e) = &events[i];
        if e.header().event_type_raw() == 4 {
            let Some(EventData::RotateEvent(r)) = e.read_data().unwrap() else {
                panic!()
            };
            assert_eq!(r.position(), 4);
            assert_eq!(i, events.len() - 1, "ROTATE is the last event");
            return (n, Some(r.name().into_owned()));
        }
        let Some(EventData::GtidEvent(g)) = e.read_data().unwrap() else {
            panic!("expected GTID at {start}")
        };
        let gno = first_gno + n;
        n += 1;
        let (start_ts, commit_ts) = txn_ts(gno);
        assert_eq!((g.sid(), g.gno()), (sid().0, gno));
        assert_eq!((g.sequence_number(), g.last_committed()), (n, n - 1));
        assert_eq!(
            g.immediate_commit_timestamp(),
            commit_ts.physical_ms() * 1000
        );
        assert_eq!(
            g.original_commit_timestamp(),
            commit_ts.physical_ms() * 1000
        );
        assert_eq!(g.immediate_server_version(), 80036);
        let secs = (commit_ts.physical_ms() / 1000) as u32;
        let mut len = 0u64;
        let mut shape = Vec::new();
        loop {
            let (_, e) = &events[i];
            assert_eq!(e.header().timestamp(), secs);
            len += u64::from(e.header().event_size());
            let ty = e.header().event_type_raw();
            shape.push(ty);
            i += 1;
            if ty == 16 || (ty == 2 && shape.len() == 2 && kind(gno) == Kind::Ddl) {
                break;
            }
        }
        assert_eq!(g.tx_length(), len, "transaction_length of gno {gno}");
        match kind(gno) {
            Kind::Ddl => {
                assert_eq!(shape, [33, 2]);
                let Some(EventData::QueryEvent(q)) = events[i - 1].1.read_data().unwrap() else {
                    panic!()
                };
                assert_eq!(q.schema(), "app");
                assert_eq!(q.query(), format!("CREATE TABLE t{gno} (id INT)"));
            }
            Kind::Dml => {
                // GTID BEGIN | TM(a) WRITE(2) | TM(b) WRITE | TM(a) UPDATE | TM(a) DELETE | XID
                assert_eq!(shape, [33, 2, 19, 30, 19, 30, 19, 31, 19, 32, 16]);
                let base = i - shape.len();
                let Some(EventData::QueryEvent(q)) = events[base + 1].1.read_data().unwrap() else {
                    panic!()
                };
                assert_eq!(q.query(), "BEGIN");
                let Some(EventData::XidEvent(x)) = events[i - 1].1.read_data().unwrap() else {
                    panic!()
                };
                assert_eq!(x.xid, start_ts.0, "XID = start_ts");
                let id = gno as i64 * 10;
                let mut tme = None;
                let mut seen = Vec::new();
                for (_, e) in &events[base + 2..i - 1] {
                    match e.read_data().unwrap().unwrap() {
                        EventData::TableMapEvent(t) => {
                            assert_eq!(t.database_name(), "app");
                            tme = Some(t.into_owned());
                        }
                        EventData::RowsEvent(r) => {
                            let tme = tme.as_ref().unwrap();
                            assert_eq!(r.flags().bits() & 1, 1, "STMT_END_F");
                            for rr in r.rows(tme) {
                                let (b, a) = rr.unwrap();
                                seen.push((
                                    tme.table_name().into_owned(),
                                    b.as_ref().map(|b| int_at(b, 0)),
                                    a.as_ref().map(|a| int_at(a, 0)),
                                ));
                            }
                        }
                        other => panic!("{other:?}"),
                    }
                }
                let s = |t: &str, b: Option<i64>, a: Option<i64>| (t.to_owned(), b, a);
                assert_eq!(
                    seen,
                    [
                        s("a", None, Some(id)),
                        s("a", None, Some(id + 1)),
                        s("b", None, Some(id + 2)),
                        s("a", Some(id), Some(id)),
                        s("a", Some(id + 1), None),
                    ]
                );
            }
        }
    }
    (n, None)
}

/// Checks the prologue of a file: FDE (BINLOG_IN_USE as given) and PREVIOUS_GTIDS.
fn check_prologue(events: &[(u64, Event)], in_use: bool, previous: u64) {
    let (_, fde) = &events[0];
    assert_eq!(fde.header().event_type_raw(), 15);
    assert_eq!(fde.header().log_pos(), 126);
    assert_eq!(fde.header().flags_raw() & 1, u16::from(in_use));
    let Some(EventData::FormatDescriptionEvent(f)) = fde.read_data().unwrap() else {
        panic!()
    };
    assert_eq!(
        f.server_version().trim_end_matches('\0'),
        "8.0.36-tibinlog-0.1.0"
    );
    assert_eq!(f.create_timestamp(), 0);
    let Some(EventData::PreviousGtidsEvent(p)) = events[1].1.read_data().unwrap() else {
        panic!()
    };
    if previous == 0 {
        assert!(p.sids().is_empty());
    } else {
        assert_eq!(p.sids().len(), 1);
        assert_eq!(p.sids()[0].uuid(), sid().0);
        let iv = p.sids()[0].intervals();
        assert_eq!((iv.len(), iv[0].start(), iv[0].end()), (1, 1, previous + 1));
    }
}

#[test]
fn events_gtids_positions_and_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, rec) = BinlogStore::open(cfg(dir.path())).unwrap();
    assert!(rec.created);
    assert_eq!((rec.next_gno, rec.end), (1, StorePos::new(1, 126 + 31)));
    let t = tables();
    for k in 1..=6 {
        let c = write_txn(&mut s, &t, k);
        assert_eq!(c.gno, k);
    }
    let files = s.files();
    // Nothing is visible before the group commit.
    assert_eq!(files.current_end(), ("binlog.000001".into(), 157));
    s.flush(txn_ts(6).1).unwrap();
    let len = std::fs::metadata(bin(dir.path(), 1)).unwrap().len();
    assert_eq!(files.current_end(), ("binlog.000001".into(), len));
    assert_eq!(files.list(), vec![("binlog.000001".into(), len)]);
    assert_eq!(files.gtid_executed(), gtids(6));
    assert!(files.purged_gtids().is_empty());

    let ev = events_of(&bin(dir.path(), 1));
    check_prologue(&ev, true, 0);
    assert_eq!(check_transactions(&ev, 1), (6, None));
    s.close().unwrap();
    let ev = events_of(&bin(dir.path(), 1));
    check_prologue(&ev, false, 0);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("binlog.index")).unwrap(),
        "./binlog.000001\n"
    );

    // Reopen after a clean close: same file continues, nothing cut.
    let (mut s, rec) = BinlogStore::open(cfg(dir.path())).unwrap();
    assert_eq!(rec.truncated_bytes, 0);
    assert_eq!(rec.checkpoint, Some(txn_ts(6).1));
    assert_eq!(rec.last_written, Some((txn_ts(6).1, txn_ts(6).0, 0)));
    assert!(rec.already_written(txn_ts(6).1, txn_ts(6).0, 0));
    assert!(!rec.already_written(txn_ts(7).1, txn_ts(7).0, 0));
    assert_eq!((rec.next_gno, rec.gtid_executed.clone()), (7, gtids(6)));
    for k in 7..=9 {
        write_txn(&mut s, &t, k);
    }
    s.flush(txn_ts(9).1).unwrap();
    let ev = events_of(&bin(dir.path(), 1));
    check_prologue(&ev, true, 0);
    assert_eq!(check_transactions(&ev, 1), (9, None));
}

#[test]
fn caller_errors_leave_the_store_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    let is_bug = |e: StoreError| assert!(e.is_caller_bug(), "{e}");
    is_bug(s.write_rows(&[]).unwrap_err());
    is_bug(s.commit_txn().unwrap_err());
    write_txn(&mut s, &t, 1);
    // Not after the last transaction.
    is_bug(s.begin_txn(txn_ts(1).0, txn_ts(1).1).unwrap_err());
    let ts = txn_ts(2);
    s.begin_txn(ts.0, ts.1).unwrap();
    is_bug(s.begin_txn(ts.0, ts.1).unwrap_err());
    is_bug(s.flush(ts.1).unwrap_err());
    let wrong = row(&t.a, RowOp::Insert, txn_ts(3), None, Some((1, b"a")));
    is_bug(s.write_rows(&[wrong]).unwrap_err());
    let no_image = row(&t.a, RowOp::Update, ts, None, Some((1, b"a")));
    is_bug(s.write_rows(&[no_image]).unwrap_err());
    // A value that does not fit its column: the statement leaves nothing behind.
    let too_long = row(&t.a, RowOp::Insert, ts, None, Some((1, &[b'x'; 300])));
    assert!(matches!(
        s.write_rows(&[too_long]),
        Err(StoreError::Codec(_))
    ));
    s.abort_txn().unwrap();
    write_txn(&mut s, &t, 2);
    s.flush(txn_ts(2).1).unwrap();
    is_bug(s.flush(txn_ts(1).1).unwrap_err());
    let ev = events_of(&bin(dir.path(), 1));
    assert_eq!(check_transactions(&ev, 1), (2, None));
}

/// Every file of a directory with its bytes.
fn dir_bytes(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// A write guard that says no from its `allowed`-th question on, for every `allowed` until the
/// script (transactions, group commits, rotations, a purge, a clean close) runs through: from
/// the refusal on no file of the store changes, whichever step it meets (the map append, the
/// binlog write, the FORMAT_DESCRIPTION flag, the new file, the index's write and rename, the
/// map's rewrite, a file's removal), and the store reopens to every transaction flushed
/// before it.
#[test]
fn a_refusing_write_guard_stops_every_change_to_the_files() {
    use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
    use tibinlog::binlog_store::WriteGuard;
    let t = tables();
    let mut refusals = 0;
    for allowed in 0.. {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cfg(dir.path());
        c.max_binlog_size = 1500;
        let (mut s, _) = BinlogStore::open(c.clone()).unwrap();
        let left = Arc::new(AtomicI64::new(allowed));
        let l = left.clone();
        s.set_write_guard(WriteGuard::new(move || {
            if l.fetch_sub(1, SeqCst) > 0 {
                Ok(())
            } else {
                Err("refused by the test".into())
            }
        }));
        let mut flushed = 0;
        let mut step = |s: &mut BinlogStore, k: u64| -> Result<(), StoreError> {
            try_write_txn(s, &t, k)?;
            if k % 3 == 0 {
                s.flush(txn_ts(k).1)?;
                flushed = k;
            }
            if k == 24 {
                s.purge_to("binlog.000002")?;
            }
            Ok(())
        };
        let mut refused = None;
        for k in 1..=30 {
            match step(&mut s, k) {
                Ok(()) => {}
                Err(StoreError::Refused(why)) => {
                    assert_eq!(why, "refused by the test");
                    refused = Some(k);
                    break;
                }
                Err(e) => panic!("allowed {allowed}: transaction {k}: {e}"),
            }
        }
        let Some(k) = refused else {
            // The whole script ran; the last refusal point is the close's.
            match s.close() {
                Ok(()) => break,
                Err(StoreError::Refused(_)) => {
                    refusals += 1;
                    let (s, _) = BinlogStore::open(c).unwrap();
                    assert_eq!(s.next_gno() - 1, 30, "allowed {allowed}: after the close");
                    continue;
                }
                Err(e) => panic!("allowed {allowed}: close: {e}"),
            }
        };
        refusals += 1;
        let frozen = dir_bytes(dir.path());
        // The refused store goes on being asked to write: nothing changes.
        let _ = s.abort_txn();
        let _ = try_write_txn(&mut s, &t, k + 1);
        let _ = s.flush(txn_ts(k + 1).1);
        let _ = s.purge_to("binlog.000003");
        assert!(
            s.close().is_err(),
            "allowed {allowed}: the close is refused"
        );
        assert!(
            dir_bytes(dir.path()) == frozen,
            "allowed {allowed}: a file changed after the refusal at transaction {k}"
        );
        // As after a crash there: everything flushed before the refusal is back.
        let (s, rec) = BinlogStore::open(c).unwrap();
        let gno = s.next_gno() - 1;
        assert!(
            gno >= flushed && gno <= k,
            "allowed {allowed}: {gno} transactions back, {flushed} flushed, refused at {k}: \
             {rec:?}"
        );
    }
    assert!(refusals > 60, "only {refusals} refusal points");
}

/// Writes `n` script transactions with rotation at `max` bytes, flushing every `every`.
fn rotated_store(dir: &Path, max: u64, n: u64, every: u64) -> (BinlogStore, Vec<StorePos>) {
    let mut c = cfg(dir);
    c.max_binlog_size = max;
    let (mut s, _) = BinlogStore::open(c).unwrap();
    let t = tables();
    let mut ends = Vec::new();
    for k in 1..=n {
        ends.push(write_txn(&mut s, &t, k).end);
        if k % every == 0 {
            s.flush(txn_ts(k).1).unwrap();
        }
    }
    s.flush(txn_ts(n).1).unwrap();
    (s, ends)
}

#[test]
fn rotation_index_and_previous_gtids() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ends) = rotated_store(dir.path(), 2000, 30, 4);
    let files = s.files();
    let list = files.list();
    assert!(list.len() >= 4, "{list:?}");
    let index = std::fs::read_to_string(dir.path().join("binlog.index")).unwrap();
    let want: String = list.iter().map(|(n, _)| format!("./{n}\n")).collect();
    assert_eq!(index, want);
    let mut gno = 1;
    for (i, (name, size)) in list.iter().enumerate() {
        let seq = i as u32 + 1;
        assert_eq!(name, &format!("binlog.{seq:06}"));
        let path = bin(dir.path(), seq);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), *size);
        let ev = events_of(&path);
        let last = i + 1 == list.len();
        check_prologue(&ev, last, gno - 1);
        let (n, rotate) = check_transactions(&ev, gno);
        // Only the open file can be empty (the last transaction filled the one before).
        assert!(n >= 1 || last);
        if last {
            assert_eq!(rotate, None);
        } else {
            assert_eq!(rotate, Some(format!("binlog.{:06}", seq + 1)));
            // Rotated after the transaction that took the file to the limit.
            let rot = &ev[ev.len() - 1];
            assert!(rot.0 >= 2000);
            if n > 1 {
                // The end of the transaction before the last one (gno + n - 2).
                assert!(ends[(gno + n - 3) as usize].offset < 2000);
            }
        }
        for k in gno..gno + n {
            assert_eq!(ends[k as usize - 1].file_seq, seq);
        }
        gno += n;
    }
    assert_eq!(gno, 31);
    assert_eq!(files.gtid_executed(), gtids(30));
    let end = files.end_pos();
    drop(s);
    let (_, rec) = BinlogStore::open(cfg(dir.path())).unwrap();
    assert_eq!(rec.gtid_executed, gtids(30));
    assert_eq!(rec.next_gno, 31);
    assert_eq!(rec.end, end);
    assert_eq!(rec.truncated_bytes, 0);
}

#[test]
fn purge_to_before_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, ends) = rotated_store(dir.path(), 2000, 30, 3);
    let files = s.files();
    let n_files = files.list().len() as u32;
    assert!(matches!(
        s.purge_to("binlog.999999"),
        Err(StoreError::UnknownFile { .. })
    ));
    assert_eq!(
        s.purge_to("binlog.000003").unwrap().files,
        vec!["binlog.000001".to_string(), "binlog.000002".into()]
    );
    assert!(!bin(dir.path(), 1).exists() && !bin(dir.path(), 2).exists());
    assert!(bin(dir.path(), 3).exists());
    assert_eq!(files.list()[0].0, "binlog.000003");
    assert_eq!(files.first_file(), "binlog.000003");
    let first_gno_3 = ends.iter().position(|e| e.file_seq == 3).unwrap() as u64 + 1;
    assert_eq!(files.purged_gtids(), gtids(first_gno_3 - 1));
    assert_eq!(files.gtid_executed(), gtids(30));
    // A client that lacks purged GTIDs is refused (MySQL's error 1236 for purged GTIDs).
    let err = files.locate_gtid(&gtids(1)).unwrap_err();
    assert!(matches!(err, DumpError::GtidsPurged { .. }), "{err}");
    // Transactions after a ts inside the purged range may be gone.
    assert!(matches!(
        files.locate_ts(txn_ts(1).1),
        Err(DumpError::TsPurged { .. })
    ));
    assert!(matches!(
        files.open_reader("binlog.000001", 4),
        Err(DumpError::UnknownFile { .. })
    ));
    // Purge by time never removes the open file.
    let far = u64::from(u32::MAX);
    let gone = s.purge_before(far).unwrap().files;
    assert_eq!(gone.len() as u32, n_files - 3);
    assert_eq!(files.list().len(), 1);
    assert_eq!(
        s.purge_expired(far).unwrap().files,
        Vec::<String>::new(),
        "expiry off"
    );
    let index = std::fs::read_to_string(dir.path().join("binlog.index")).unwrap();
    assert_eq!(index, format!("./binlog.{n_files:06}\n"));
    let purged = files.purged_gtids();
    drop(s);
    let (s, rec) = BinlogStore::open(cfg(dir.path())).unwrap();
    let files = s.files();
    assert_eq!(rec.gtid_executed, gtids(30));
    assert_eq!(files.purged_gtids(), purged);
    assert_eq!(files.list().len(), 1);
    assert_eq!(files.locate_ts(txn_ts(30).1).unwrap(), files.end_pos());
    assert!(files.locate_ts(txn_ts(20).1).is_err());
}

#[test]
fn purge_stops_before_a_file_a_reader_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = rotated_store(dir.path(), 2000, 30, 3);
    let files = s.files();
    assert!(files.list().len() >= 5, "{:?}", files.list());
    let mut reader = files.open_reader("binlog.000002", 4).unwrap();
    // Wanted: files 1, 2 and 3; file 2 is being read, so only file 1 goes.
    let purged = s.purge_to("binlog.000004").unwrap();
    assert_eq!(purged.files, vec!["binlog.000001".to_string()]);
    let stop = purged.in_use.expect("stopped at the reader's file");
    assert_eq!(
        stop.message(purged.files.len()),
        "file binlog.000002 was not purged because it was being read by 1 thread(s), purged \
         only 1 out of 3 files."
    );
    assert!(bin(dir.path(), 2).exists() && !bin(dir.path(), 1).exists());
    // A second reader on the same file is counted.
    let second = files.open_reader("binlog.000002", 4).unwrap();
    let purged = s.purge_to("binlog.000004").unwrap();
    assert!(purged.files.is_empty());
    assert_eq!(purged.in_use.expect("stopped").readers, 2);
    drop(second);
    // The reader moves on into file 3: its claim moves with it, and file 2 can go.
    while reader.position().file_seq == 2 {
        reader
            .try_next()
            .unwrap()
            .expect("file 2 is closed: its events are all durable");
    }
    assert_eq!(reader.position().file_seq, 3);
    let purged = s.purge_to("binlog.000004").unwrap();
    assert_eq!(purged.files, vec!["binlog.000002".to_string()]);
    assert_eq!(purged.in_use.expect("file 3 is read").file, "binlog.000003");
    // Every event of file 3 is still there for the reader.
    while reader.position().file_seq == 3 {
        reader.try_next().unwrap().expect("file 3 is closed");
    }
    drop(reader);
    // Nobody reads: expiry (here: everything before the open file) goes through.
    let far = u64::from(u32::MAX);
    let purged = s.purge_before(far).unwrap();
    assert!(purged.in_use.is_none());
    assert_eq!(files.list().len(), 1);
    // A purged file cannot be opened.
    assert!(matches!(
        files.open_reader("binlog.000003", 4),
        Err(DumpError::UnknownFile { .. })
    ));
}

#[test]
fn expiry_purges_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.max_binlog_size = 1500;
    c.expire_logs_seconds = 10;
    let (mut s, _) = BinlogStore::open(c).unwrap();
    let t = tables();
    for k in 1..=20 {
        write_txn(&mut s, &t, k);
        s.flush(txn_ts(k).1).unwrap();
    }
    let files = s.files();
    let before = files.list().len();
    // Now = the last commit + 10 s: files whose last transaction is older than the last commit
    // go, the file holding the last commits stays.
    let now = txn_ts(20).1.physical_ms() / 1000 + 10;
    let gone = s.purge_expired(now).unwrap().files;
    assert!(!gone.is_empty() && gone.len() < before, "{gone:?}");
    for (name, _) in files.list() {
        let seq: u32 = name[7..].parse().unwrap();
        let ev = events_of(&bin(dir.path(), seq));
        let last_ts = ev
            .iter()
            .map(|(_, e)| e.header().timestamp())
            .max()
            .unwrap();
        assert!(u64::from(last_ts) >= now - 10, "{name} kept");
    }
}

/// Copies every file of `from` into a new temp dir.
fn copy_dir(from: &Path) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.path().join(e.file_name())).unwrap();
    }
    to
}

/// Small deterministic generator for truncation points.
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

fn assert_recovered(rec: &Recovery, ends: &[StorePos], k: usize, prologue_end: u64) {
    let end = if k == 0 {
        prologue_end
    } else {
        ends[k - 1].offset
    };
    assert_eq!(rec.end, StorePos::new(1, end), "k={k}");
    assert_eq!(rec.gtid_executed, gtids(k as u64));
    assert_eq!(rec.next_gno, k as u64 + 1);
    if k == 0 {
        assert_eq!(rec.last_written, None);
        assert_eq!(rec.checkpoint, None);
    } else {
        let (st, ct) = txn_ts(k as u64);
        assert_eq!(rec.last_written, Some((ct, st, 0)));
        assert_eq!(rec.checkpoint, Some(ct));
        assert!(rec.already_written(ct, st, 0));
    }
    let (st, ct) = txn_ts(k as u64 + 1);
    assert!(!rec.already_written(ct, st, 0));
}

#[test]
fn recovery_after_truncation_at_any_byte() {
    truncation_case(true);
}

#[test]
fn recovery_after_truncation_at_any_byte_without_checksums() {
    truncation_case(false);
}

fn truncation_case(checksum: bool) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |d: &Path| {
        let mut c = cfg(d);
        c.checksum = checksum;
        c
    };
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    let n = 8u64;
    let mut ends = Vec::new();
    for k in 1..=n {
        ends.push(write_txn(&mut s, &t, k).end);
        s.flush(txn_ts(k).1).unwrap();
    }
    drop(s); // like kill -9: everything was flushed
    let full = std::fs::read(bin(dir.path(), 1)).unwrap();
    let len = full.len() as u64;
    let prologue_end = if checksum { 157 } else { 153 };

    let mut points: Vec<u64> = (ends[n as usize - 3].offset..=len).collect();
    let mut seed = 42;
    points.extend((0..40).map(|_| prologue_end + lcg(&mut seed) % (len - prologue_end + 1)));
    for (i, &cut) in points.iter().enumerate() {
        let copy = copy_dir(dir.path());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(bin(copy.path(), 1))
            .unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        let (mut s, rec) = BinlogStore::open(cfg(copy.path())).unwrap();
        let k = ends.iter().filter(|e| e.offset <= cut).count();
        assert_recovered(&rec, &ends, k, prologue_end);
        assert_eq!(rec.truncated_bytes, cut - rec.end.offset);
        assert_eq!(
            std::fs::metadata(bin(copy.path(), 1)).unwrap().len(),
            rec.end.offset
        );
        // Reopening again finds the same state (recovery is idempotent).
        if i % 16 == 0 {
            drop(s);
            let (s2, rec2) = BinlogStore::open(cfg(copy.path())).unwrap();
            assert_eq!(rec2.end, rec.end);
            assert_eq!(rec2.checkpoint, rec.checkpoint);
            s = s2;
        }
        // Capture resends from the checkpoint: writing the lost transactions again gives the
        // same bytes as before the crash (positions, GTIDs, lengths).
        if i % 7 == 0 || i >= points.len() - 40 {
            let t = tables();
            for k in k as u64 + 1..=n {
                let c = write_txn(&mut s, &t, k);
                assert_eq!(c.end, ends[k as usize - 1]);
            }
            s.flush(txn_ts(n).1).unwrap();
            drop(s);
            let again = std::fs::read(bin(copy.path(), 1)).unwrap();
            assert_eq!(again, full, "cut at {cut}");
        }
    }
}

#[test]
fn unflushed_and_half_spilled_transactions_are_not_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    write_txn(&mut s, &t, 1);
    s.flush(txn_ts(1).1).unwrap();
    // Never flushed, but the spill below writes it (its map record first): complete in the
    // file, so recovery keeps it.
    let c2 = write_txn(&mut s, &t, 2);
    // A big transaction that spills to the file, then the process dies before its commit.
    let big = table(103, "big", true);
    let ts = txn_ts(3);
    s.begin_txn(ts.0, ts.1).unwrap();
    let blob = vec![7u8; 1 << 20];
    for i in 0..18 {
        let r = RowChange {
            table: big.clone(),
            op: RowOp::Insert,
            before: None,
            after: Some(vec![Value::Int(i), Value::Bytes(blob.clone())]),
            start_ts: ts.0,
            commit_ts: ts.1,
        };
        s.write_rows(&[r]).unwrap();
    }
    let on_disk = std::fs::metadata(bin(dir.path(), 1)).unwrap().len();
    assert!(on_disk > 16 << 20, "spilled: {on_disk}");
    drop(s);
    // Junk after the last map record (a torn record).
    let map = dir.path().join("binlog.map");
    let mut m = std::fs::read(&map).unwrap();
    m.extend_from_slice(&[1, 0, 0, 0, 9, 9]);
    std::fs::write(&map, m).unwrap();

    let (s, rec) = BinlogStore::open(cfg(dir.path())).unwrap();
    assert_eq!(rec.end, c2.end);
    assert!(rec.truncated_bytes > 16 << 20);
    assert_eq!(rec.gtid_executed, gtids(2));
    assert_eq!((rec.next_gno, rec.checkpoint), (3, Some(txn_ts(1).1)));
    assert!(rec.already_written(txn_ts(2).1, txn_ts(2).0, 0));
    assert!(!rec.already_written(txn_ts(3).1, txn_ts(3).0, 0));
    assert_eq!(std::fs::metadata(&map).unwrap().len() % 48, 0);
    drop(s);
}

#[test]
fn big_transaction_streams_and_gets_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    write_txn(&mut s, &t, 1);
    let big = table(103, "big", true);
    let ts = txn_ts(2);
    s.begin_txn(ts.0, ts.1).unwrap();
    let blob = vec![7u8; 1 << 20];
    let rows = 18;
    for i in 0..rows {
        let r = RowChange {
            table: big.clone(),
            op: RowOp::Insert,
            before: None,
            after: Some(vec![Value::Int(i), Value::Bytes(blob.clone())]),
            start_ts: ts.0,
            commit_ts: ts.1,
        };
        s.write_rows(&[r]).unwrap();
        // A spilled transaction can still be abandoned: the file is cut back.
    }
    let c = s.commit_txn().unwrap();
    write_txn(&mut s, &t, 3);
    s.flush(txn_ts(3).1).unwrap();
    let ev = events_of(&bin(dir.path(), 1));
    // The big one: GTID with the 9-byte length form, BEGIN, 18 x (TABLE_MAP, WRITE), XID.
    let gi = ev
        .iter()
        .position(|(_, e)| {
            matches!(e.read_data().unwrap(), Some(EventData::GtidEvent(g)) if g.gno() == 2)
        })
        .unwrap();
    let Some(EventData::GtidEvent(g)) = ev[gi].1.read_data().unwrap() else {
        panic!()
    };
    assert_eq!(ev[gi].1.header().event_size(), 76 + 9);
    let end = c.end.offset;
    assert_eq!(g.tx_length(), end - ev[gi].0);
    assert!(g.tx_length() > 18 << 20);
    let n_rows: usize = ev
        .iter()
        .filter(|(p, e)| *p > ev[gi].0 && *p < end && e.header().event_type_raw() == 30)
        .count();
    assert_eq!(n_rows, rows as usize);
    let Some(EventData::XidEvent(x)) = ev
        .iter()
        .find(|(p, _)| *p + 31 == end)
        .unwrap()
        .1
        .read_data()
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(x.xid, ts.0 .0);
    // The other two transactions are intact around it.
    let gnos: Vec<u64> = ev
        .iter()
        .filter_map(|(_, e)| match e.read_data().unwrap() {
            Some(EventData::GtidEvent(g)) => Some(g.gno()),
            _ => None,
        })
        .collect();
    assert_eq!(gnos, [1, 2, 3]);

    // Abort of a spilled transaction cuts the file back; the store goes on.
    let ts = txn_ts(4);
    s.begin_txn(ts.0, ts.1).unwrap();
    for i in 0..18 {
        let r = RowChange {
            table: big.clone(),
            op: RowOp::Insert,
            before: None,
            after: Some(vec![Value::Int(i), Value::Bytes(blob.clone())]),
            start_ts: ts.0,
            commit_ts: ts.1,
        };
        s.write_rows(&[r]).unwrap();
    }
    s.abort_txn().unwrap();
    write_txn(&mut s, &t, 5);
    s.flush(txn_ts(5).1).unwrap();
    let ev = events_of(&bin(dir.path(), 1));
    let gnos: Vec<u64> = ev
        .iter()
        .filter_map(|(_, e)| match e.read_data().unwrap() {
            Some(EventData::GtidEvent(g)) => Some(g.gno()),
            _ => None,
        })
        .collect();
    assert_eq!(gnos, [1, 2, 3, 4]);
}

#[test]
fn readers_validate_positions_and_follow_rotate() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = rotated_store(dir.path(), 2000, 12, 5);
    let files = s.files();
    let list = files.list();
    assert!(list.len() >= 3);
    let bytes1 = std::fs::read(bin(dir.path(), 1)).unwrap();
    let ev1 = events_of(&bin(dir.path(), 1));
    let mut boundaries: Vec<u64> = ev1.iter().map(|(p, _)| *p).collect();
    boundaries.push(bytes1.len() as u64);
    for &b in &boundaries {
        let mut r = files.open_reader("binlog.000001", b).unwrap();
        let e = r.try_next().unwrap().unwrap();
        if b == bytes1.len() as u64 {
            // The end of a closed file: the reader goes on in the next file.
            assert_eq!((e.file_seq, e.start), (2, 4));
        } else {
            assert_eq!((e.file_seq, e.start), (1, b));
            assert_eq!(e.bytes, &bytes1[b as usize..e.end() as usize]);
        }
    }
    for w in boundaries.windows(2) {
        for inside in [w[0] + 1, (w[0] + w[1]) / 2, w[1] - 1] {
            if inside == w[0] {
                continue;
            }
            let err = files.open_reader("binlog.000001", inside).unwrap_err();
            assert!(
                matches!(err, DumpError::NotEventBoundary { pos, .. } if pos == inside),
                "{inside}: {err}"
            );
        }
    }
    let err = files.open_reader("binlog.000001", 3).unwrap_err();
    assert!(matches!(err, DumpError::PositionBelow4 { pos: 3 }), "{err}");
    let err = files
        .open_reader("binlog.000001", bytes1.len() as u64 + 1)
        .unwrap_err();
    assert!(matches!(err, DumpError::PositionPastEnd { .. }), "{err}");
    for bad in ["binlog.000099", "nope", "", "binlog.index"] {
        let err = files.open_reader(bad, 4).unwrap_err();
        assert!(matches!(err, DumpError::UnknownFile { .. }), "{bad}: {err}");
    }
    // The open file's FORMAT_DESCRIPTION says BINLOG_IN_USE; a dump session clears it and the
    // CRC still holds.
    let last_name = files.file_name(list.len() as u32);
    let mut r = files.open_reader(&last_name, 4).unwrap();
    let mut fde = r.try_next().unwrap().unwrap().bytes.to_vec();
    assert_eq!(fde[17] & 1, 1);
    tibinlog_protocol::binlog::events::format_desc::clear_binlog_in_use(&mut fde);
    assert_eq!(fde[17] & 1, 0);
    tibinlog_protocol::binlog::checksum::verify_event(&fde).unwrap();
    // From the start of file 1 to the durable end: every event of every file, in order,
    // byte for byte.
    let mut r = files.open_reader("binlog.000001", 4).unwrap();
    let mut got: Vec<(u32, u64, Vec<u8>)> = Vec::new();
    while let Some(e) = r.try_next().unwrap() {
        got.push((e.file_seq, e.start, e.bytes.to_vec()));
    }
    let mut want = Vec::new();
    for (i, _) in list.iter().enumerate() {
        let seq = i as u32 + 1;
        let bytes = std::fs::read(bin(dir.path(), seq)).unwrap();
        for (p, e) in events_of(&bin(dir.path(), seq)) {
            let end = p as usize + e.header().event_size() as usize;
            want.push((seq, p, bytes[p as usize..end].to_vec()));
        }
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want);
    assert_eq!(r.position(), files.end_pos());
}

#[test]
fn locate_by_gtid_set_and_ts() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ends) = rotated_store(dir.path(), 2000, 12, 5);
    let files = s.files();
    let start_of = |k: usize| -> StorePos {
        // Start of transaction k (1-based) = end of k-1 in the same file, else the prologue end.
        let e = ends[k - 1];
        match k.checked_sub(2).map(|j| ends[j]) {
            Some(p) if p.file_seq == e.file_seq => p,
            _ => StorePos::new(e.file_seq, if e.file_seq == 1 { 157 } else { 197 }),
        }
    };
    assert_eq!(files.locate_gtid(&GtidSet::new()).unwrap(), start_of(1));
    for k in 1..12 {
        assert_eq!(
            files.locate_gtid(&gtids(k)).unwrap(),
            start_of(k as usize + 1),
            "{k}"
        );
    }
    assert_eq!(files.locate_gtid(&gtids(12)).unwrap(), files.end_pos());
    // A set with a hole: the first missing transaction.
    let mut holes = gtids(5);
    holes.add(sid(), 7);
    assert_eq!(files.locate_gtid(&holes).unwrap(), start_of(6));
    // GTIDs of another server are irrelevant.
    let other = GtidSet::parse("11111111-2222-3333-4444-555555555555:1-100").unwrap();
    assert_eq!(files.locate_gtid(&other).unwrap(), start_of(1));
    let err = files.locate_gtid(&gtids(13)).unwrap_err();
    assert!(matches!(err, DumpError::ClientHasMoreGtids { .. }));

    // The capture started after `first_file_ts`: older timestamps lack what came between.
    let origin = Ts::compose(BASE_MS, 0);
    assert_eq!(files.ts_range().0, Some(origin));
    assert!(matches!(
        files.locate_ts(Ts::ZERO),
        Err(DumpError::TsPurged { purged_up_to, .. }) if purged_up_to == origin
    ));
    assert_eq!(files.locate_ts(origin).unwrap(), start_of(1));
    // Past the newest checkpoint, transactions up to the ts may still be on their way.
    let newest = files.ts_range().1.expect("a checkpoint");
    let ahead = files.locate_ts(Ts(newest.0 + 1)).unwrap_err();
    assert!(matches!(ahead, DumpError::TsAhead { .. }), "{ahead:?}");
    assert!(
        ahead.to_string().contains("the binlog covers ts"),
        "{ahead}"
    );
    for k in 1..12usize {
        // Transactions sharing a commit_ts are never split.
        let ct = txn_ts(k as u64).1;
        let first_after = (1..=12usize).find(|&j| txn_ts(j as u64).1 > ct);
        let want = first_after.map_or(files.end_pos(), start_of);
        assert_eq!(files.locate_ts(ct).unwrap(), want, "{k}");
    }
    // Every position returned is a valid reader position whose first event is a GTID.
    let p = files.locate_gtid(&gtids(4)).unwrap();
    let mut r = files.open_reader_at(p).unwrap();
    assert_eq!(r.try_next().unwrap().unwrap().event_type().0, 33);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reader_wakes_on_flush_and_ends_when_writer_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let files = s.files();
    let t = tables();
    let end = files.end_pos();
    let mut r = files.open_reader_at(end).unwrap();
    let waiter = tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            match r.next().await {
                Ok(e) => seen.push((e.event_type().0, e.start)),
                Err(DumpError::WriterGone) => return seen,
                Err(e) => panic!("{e}"),
            }
        }
    });
    write_txn(&mut s, &t, 1);
    // Committed but not flushed: invisible.
    let mut probe = files.open_reader_at(end).unwrap();
    assert!(probe.try_next().unwrap().is_none());
    s.flush(txn_ts(1).1).unwrap();
    let e = probe.try_next().unwrap().unwrap();
    assert_eq!((e.event_type().0, e.start), (33, end.offset));
    write_txn(&mut s, &t, 2);
    s.flush(txn_ts(2).1).unwrap();
    drop(s); // the writer goes away: the waiting reader ends after the durable data
    let seen = tokio::time::timeout(std::time::Duration::from_secs(30), waiter)
        .await
        .expect("reader woke")
        .unwrap();
    let types: Vec<u8> = seen.iter().map(|x| x.0).collect();
    let one = [33u8, 2, 19, 30, 19, 30, 19, 31, 19, 32, 16];
    assert_eq!(types, [&one[..], &one[..]].concat());
    assert_eq!(seen[0].1, end.offset);
}

#[test]
fn checksum_change_starts_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    write_txn(&mut s, &t, 1);
    s.flush(txn_ts(1).1).unwrap();
    drop(s);
    let mut c = cfg(dir.path());
    c.checksum = false;
    let (mut s, rec) = BinlogStore::open(c).unwrap();
    assert_eq!(rec.end.file_seq, 2);
    write_txn(&mut s, &t, 2);
    s.flush(txn_ts(2).1).unwrap();
    let ev = events_of(&bin(dir.path(), 2));
    assert!(ev[2..].iter().all(|(_, e)| e.checksum().is_none()));
    check_prologue(&ev, true, 1);
    let ev1 = events_of(&bin(dir.path(), 1));
    assert_eq!(
        check_transactions(&ev1, 1),
        (1, Some("binlog.000002".into()))
    );
    // gno 2 is the first transaction of file 2.
    let Some(EventData::GtidEvent(g)) = ev[2].1.read_data().unwrap() else {
        panic!()
    };
    assert_eq!((g.gno(), g.sequence_number()), (2, 1));
}

#[test]
fn server_uuid_change_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    write_txn(&mut s, &tables(), 1);
    s.flush(txn_ts(1).1).unwrap();
    drop(s);
    let mut c = cfg(dir.path());
    c.server_uuid = Sid::parse("11111111-2222-3333-4444-555555555555").unwrap();
    assert!(matches!(
        BinlogStore::open(c),
        Err(StoreError::ServerUuidChanged { .. })
    ));
}

#[test]
fn mariadb_binlog_lists_our_files() {
    let Some(mariadb_binlog) = mariadb::require_tool("mariadb-binlog") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = rotated_store(dir.path(), 2000, 8, 3);
    drop(s);
    let out = Command::new(&mariadb_binlog)
        .args(["--no-defaults", "-vv", "--base64-output=decode-rows"])
        .arg(bin(dir.path(), 1))
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{listing}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        listing.contains(&format!("Xid = {}", txn_ts(1).0 .0)),
        "{listing}"
    );
    assert!(
        listing.contains("Rotate to binlog.000002  pos: 4"),
        "{listing}"
    );
    assert!(listing.contains("### INSERT INTO `app`.`a`"), "{listing}");
    assert!(listing.contains("### DELETE FROM `app`.`a`"), "{listing}");
}

#[test]
fn unflushed_transactions_are_lost_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    let c1 = write_txn(&mut s, &t, 1);
    s.flush(txn_ts(1).1).unwrap();
    write_txn(&mut s, &t, 2);
    let ts = txn_ts(3);
    s.begin_txn(ts.0, ts.1).unwrap();
    drop(s); // kill -9: nothing after the last flush reached the file
    let (_, rec) = BinlogStore::open(cfg(dir.path())).unwrap();
    assert_eq!(rec.end, c1.end);
    assert_eq!(rec.truncated_bytes, 0);
    assert_eq!((rec.next_gno, &rec.gtid_executed), (2, &gtids(1)));
    assert!(!rec.already_written(txn_ts(2).1, txn_ts(2).0, 0));
}

#[test]
fn recovery_of_the_last_of_several_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.max_binlog_size = 2000;
    let (mut s, _) = BinlogStore::open(c.clone()).unwrap();
    let t = tables();
    let mut ends = Vec::new();
    let mut k = 0;
    // Until the open file holds three transactions.
    while ends.len() < 6
        || ends
            .iter()
            .rev()
            .take(3)
            .any(|e: &StorePos| e.file_seq != s.write_pos().file_seq)
    {
        k += 1;
        ends.push(write_txn(&mut s, &t, k).end);
        s.flush(txn_ts(k).1).unwrap();
    }
    let last_seq = s.write_pos().file_seq;
    assert!(last_seq >= 3);
    drop(s);
    let path = bin(dir.path(), last_seq);
    let full = std::fs::read(&path).unwrap();
    let prologue_end = 197;
    for cut in prologue_end..=full.len() as u64 {
        let copy = copy_dir(dir.path());
        std::fs::OpenOptions::new()
            .write(true)
            .open(bin(copy.path(), last_seq))
            .unwrap()
            .set_len(cut)
            .unwrap();
        let mut c2 = c.clone();
        c2.data_dir = copy.path().to_owned();
        let (mut s, rec) = BinlogStore::open(c2).unwrap();
        let kept = ends
            .iter()
            .filter(|e| e.file_seq < last_seq || e.offset <= cut)
            .count();
        let want_end = ends
            .iter()
            .rev()
            .find(|e| e.file_seq == last_seq && e.offset <= cut)
            .map_or(prologue_end, |e| e.offset);
        assert_eq!(rec.end, StorePos::new(last_seq, want_end), "cut {cut}");
        assert_eq!(rec.gtid_executed, gtids(kept as u64));
        assert_eq!(rec.next_gno, kept as u64 + 1);
        assert_eq!(rec.checkpoint, Some(txn_ts(kept as u64).1));
        if cut % 5 == 0 {
            for j in kept as u64 + 1..=k {
                assert_eq!(write_txn(&mut s, &t, j).end, ends[j as usize - 1]);
            }
            s.flush(txn_ts(k).1).unwrap();
            drop(s);
            assert!(std::fs::read(bin(copy.path(), last_seq)).unwrap() == full);
        }
    }
}

#[test]
fn crash_between_rotation_steps() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.max_binlog_size = 2000;
    let (mut s, _) = BinlogStore::open(c.clone()).unwrap();
    let t = tables();
    let mut k = 0;
    while s.write_pos().file_seq < 3 {
        k += 1;
        write_txn(&mut s, &t, k);
        s.flush(txn_ts(k).1).unwrap();
    }
    // The commit of k rotated to file 3; suppose the index never got file 3.
    drop(s);
    std::fs::write(
        dir.path().join("binlog.index"),
        "./binlog.000001\n./binlog.000002\n",
    )
    .unwrap();
    let size2 = std::fs::metadata(bin(dir.path(), 2)).unwrap().len();
    let (mut s, rec) = BinlogStore::open(c.clone()).unwrap();
    // The ROTATE naming a file outside the index is cut and the stray file removed; file 2 is
    // still full, so recovery rotates where the uninterrupted run did: file 3 is made again.
    let rotate_len = 19 + 8 + "binlog.000003".len() as u64 + 4;
    assert_eq!(rec.truncated_bytes, rotate_len);
    assert_eq!(std::fs::metadata(bin(dir.path(), 2)).unwrap().len(), size2);
    assert_eq!(rec.end.file_seq, 3);
    assert_eq!((rec.next_gno, rec.gtid_executed.clone()), (k + 1, gtids(k)));
    assert_eq!(rec.checkpoint, Some(txn_ts(k).1));
    write_txn(&mut s, &t, k + 1);
    s.flush(txn_ts(k + 1).1).unwrap();
    assert_eq!(s.write_pos().file_seq, 3);
    drop(s);
    let first2 = ends_first_gno(dir.path(), 2);
    let ev = events_of(&bin(dir.path(), 2));
    assert_eq!(
        check_transactions(&ev, first2).1,
        Some("binlog.000003".into())
    );
    check_prologue(&events_of(&bin(dir.path(), 3)), true, k);
    // Byte for byte what a run without the crash wrote.
    let reference = tempfile::tempdir().unwrap();
    let mut r = cfg(reference.path());
    r.max_binlog_size = 2000;
    let (mut s, _) = BinlogStore::open(r).unwrap();
    for j in 1..=k + 1 {
        write_txn(&mut s, &t, j);
        s.flush(txn_ts(j).1).unwrap();
    }
    drop(s);
    for seq in 1..=3 {
        assert_eq!(
            std::fs::read(bin(dir.path(), seq)).unwrap(),
            std::fs::read(bin(reference.path(), seq)).unwrap(),
            "binlog.00000{seq}"
        );
    }
}

/// A crash after the transaction that filled the file and before its ROTATE: recovery
/// rotates, so the next transaction is where an uninterrupted run put it.
#[test]
fn crash_before_the_rotation_a_full_file_needs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.max_binlog_size = 2000;
    let (mut s, _) = BinlogStore::open(c.clone()).unwrap();
    let t = tables();
    let mut k = 0;
    while s.write_pos().file_seq < 2 {
        k += 1;
        write_txn(&mut s, &t, k);
        s.flush(txn_ts(k).1).unwrap();
    }
    for j in k + 1..=k + 3 {
        write_txn(&mut s, &t, j);
        s.flush(txn_ts(j).1).unwrap();
    }
    drop(s);
    let full1 = std::fs::read(bin(dir.path(), 1)).unwrap();
    let full2 = std::fs::read(bin(dir.path(), 2)).unwrap();
    // As if the crash came before the ROTATE reached file 1 and before file 2 was made.
    let rotate_len = 19 + 8 + "binlog.000002".len() + 4;
    std::fs::write(bin(dir.path(), 1), &full1[..full1.len() - rotate_len]).unwrap();
    std::fs::remove_file(bin(dir.path(), 2)).unwrap();
    std::fs::write(dir.path().join("binlog.index"), "./binlog.000001\n").unwrap();
    let (mut s, rec) = BinlogStore::open(c).unwrap();
    assert_eq!(rec.end.file_seq, 2);
    assert_eq!(rec.next_gno, k + 1);
    for j in k + 1..=k + 3 {
        write_txn(&mut s, &t, j);
        s.flush(txn_ts(j).1).unwrap();
    }
    drop(s);
    assert_eq!(std::fs::read(bin(dir.path(), 1)).unwrap(), full1);
    assert_eq!(std::fs::read(bin(dir.path(), 2)).unwrap(), full2);
}

/// GNO of the first transaction of file `seq` (from its PREVIOUS_GTIDS).
fn ends_first_gno(dir: &Path, seq: u32) -> u64 {
    let ev = events_of(&bin(dir, seq));
    let Some(EventData::PreviousGtidsEvent(p)) = ev[1].1.read_data().unwrap() else {
        panic!()
    };
    p.sids().first().map_or(1, |s| s.intervals()[0].end())
}

#[test]
fn crash_between_purge_steps() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ends) = rotated_store(dir.path(), 2000, 20, 2);
    let files = s.files();
    let seqs: Vec<u32> = (1..=files.list().len() as u32).collect();
    drop(s);
    // The purge rewrote the index (files 1 and 2 gone) and stopped: map not compacted, files
    // not deleted.
    let index: String = seqs[2..]
        .iter()
        .map(|q| format!("./binlog.{q:06}\n"))
        .collect();
    std::fs::write(dir.path().join("binlog.index"), index).unwrap();
    let mut c = cfg(dir.path());
    c.max_binlog_size = 2000;
    let (s, rec) = BinlogStore::open(c).unwrap();
    assert_eq!(rec.truncated_bytes, 0);
    assert_eq!(rec.gtid_executed, gtids(20));
    assert!(!bin(dir.path(), 1).exists() && !bin(dir.path(), 2).exists());
    let files = s.files();
    let first3 = ends.iter().position(|e| e.file_seq == 3).unwrap() as u64 + 1;
    assert_eq!(files.purged_gtids(), gtids(first3 - 1));
    assert_eq!(
        files.locate_gtid(&gtids(first3)).unwrap(),
        ends[first3 as usize - 1]
    );
    // Transactions after a ts just before the last purged commit may be gone.
    let horizon = txn_ts(first3 - 1).1;
    assert!(files.locate_ts(Ts(horizon.0 - 1)).is_err());
    assert!(files.locate_ts(horizon).is_ok());
}

#[test]
fn readers_never_see_bytes_past_the_durable_end() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    write_txn(&mut s, &t, 1);
    s.flush(txn_ts(1).1).unwrap();
    // A big transaction spills bytes past the durable end...
    let big = table(103, "big", true);
    let ts = txn_ts(2);
    s.begin_txn(ts.0, ts.1).unwrap();
    for i in 0..18 {
        let r = RowChange {
            table: big.clone(),
            op: RowOp::Insert,
            before: None,
            after: Some(vec![Value::Int(i), Value::Bytes(vec![1; 1 << 20])]),
            start_ts: ts.0,
            commit_ts: ts.1,
        };
        s.write_rows(&[r]).unwrap();
    }
    // ...while a reader reads everything durable.
    let files = s.files();
    let mut r = files.open_reader("binlog.000001", 4).unwrap();
    let mut n = 0;
    while r.try_next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2 + 11);
    // The big transaction is abandoned and other bytes take its place.
    s.abort_txn().unwrap();
    write_txn(&mut s, &t, 3);
    s.flush(txn_ts(3).1).unwrap();
    let bytes = std::fs::read(bin(dir.path(), 1)).unwrap();
    let mut types = Vec::new();
    while let Some(e) = r.try_next().unwrap() {
        assert_eq!(e.bytes, &bytes[e.start as usize..e.end() as usize]);
        types.push(e.event_type().0);
    }
    assert_eq!(types, [33, 2]); // transaction 3 is a DDL
}

/// A reader of the open file reads ahead in blocks bounded by the durable end: across many
/// blocks and group commits it returns exactly the file's bytes, each event once, in order.
#[test]
fn live_reader_returns_the_file_bytes_across_read_ahead_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    let files = s.files();
    let mut r = files.open_reader("binlog.000001", 4).unwrap();
    let mut got: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut drain = |r: &mut tibinlog::binlog_store::StoreReader| {
        while let Some(e) = r.try_next().unwrap() {
            got.push((e.start, e.bytes.to_vec()));
        }
    };
    let n = 600;
    for k in 1..=n {
        write_txn(&mut s, &t, k);
        if k % 37 == 0 || k == n {
            s.flush(txn_ts(k).1).unwrap();
            drain(&mut r);
        }
    }
    let bytes = std::fs::read(bin(dir.path(), 1)).unwrap();
    assert!(bytes.len() > 3 * 64 * 1024, "{} bytes", bytes.len());
    let mut at = 4;
    for (start, ev) in &got {
        assert_eq!(*start, at as u64);
        assert_eq!(&bytes[at..at + ev.len()], &ev[..], "event at {at}");
        at += ev.len();
    }
    assert_eq!(at, bytes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reader_follows_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.max_binlog_size = 1200;
    let (mut s, _) = BinlogStore::open(c).unwrap();
    let files = s.files();
    let t = tables();
    let mut watch = files.subscribe();
    let mut r = files.open_reader_at(files.end_pos()).unwrap();
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(e) = r.next().await {
            seen.push((e.file_seq, e.start, e.event_type().0));
        }
        seen
    });
    for k in 1..=8 {
        write_txn(&mut s, &t, k);
        s.flush(txn_ts(k).1).unwrap();
    }
    assert!(watch.has_changed().unwrap());
    assert_eq!(*watch.borrow_and_update(), files.end_pos());
    let last_file = s.write_pos().file_seq;
    assert!(last_file >= 3, "{last_file}");
    drop(s);
    let seen = tokio::time::timeout(std::time::Duration::from_secs(30), reader)
        .await
        .expect("reader ended")
        .unwrap();
    // Every file's events, in order: … ROTATE | FDE PREVIOUS_GTIDS …
    let mut want = Vec::new();
    for seq in 1..=last_file {
        for (p, e) in events_of(&bin(dir.path(), seq)) {
            if seq > 1 || p >= 157 {
                want.push((seq, p, e.header().event_type_raw()));
            }
        }
    }
    assert_eq!(seen, want);
    assert!(seen.windows(2).any(|w| w[0].2 == 4 && w[1] == (2, 4, 15)));
}

#[test]
fn garbage_after_the_last_transaction_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = BinlogStore::open(cfg(dir.path())).unwrap();
    let t = tables();
    for k in 1..=3 {
        write_txn(&mut s, &t, k);
        s.flush(txn_ts(k).1).unwrap();
    }
    let end = s.durable_end();
    drop(s);
    let full = std::fs::read(bin(dir.path(), 1)).unwrap();
    let mut seed = 7;
    for len in [1usize, 18, 19, 20, 23, 100, 5000] {
        for variant in 0..3 {
            let copy = copy_dir(dir.path());
            let mut junk: Vec<u8> = (0..len).map(|_| lcg(&mut seed) as u8).collect();
            if variant == 1 && len >= 19 {
                // A plausible header: right size field, GTID type.
                junk[4] = 33;
                junk[9..13].copy_from_slice(&(len as u32).to_le_bytes());
            }
            if variant == 2 {
                junk.iter_mut().for_each(|b| *b = 0);
            }
            let mut bytes = full.clone();
            bytes.extend_from_slice(&junk);
            std::fs::write(bin(copy.path(), 1), &bytes).unwrap();
            let (_, rec) = BinlogStore::open(cfg(copy.path())).unwrap();
            assert_eq!(rec.end, end, "len {len} variant {variant}");
            assert_eq!(rec.truncated_bytes, len as u64);
            assert_eq!(rec.next_gno, 4);
            assert_eq!(std::fs::read(bin(copy.path(), 1)).unwrap(), full);
        }
    }
}

#[test]
fn dump_sessions_can_skip_transactions_they_do_not_need() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ends) = rotated_store(dir.path(), 2000, 12, 3);
    let files = s.files();
    // A replica that has every even GNO: from the first missing transaction on, skip the ones
    // in its set with transaction_length.
    let mut have = GtidSet::new();
    for g in (2..=12).step_by(2) {
        have.add(sid(), g);
    }
    let start = files.locate_gtid(&have).unwrap();
    assert_eq!(start, StorePos::new(1, 157));
    let mut r = files.open_reader_at(start).unwrap();
    let mut sent = Vec::new();
    while let Some(e) = r.try_next().unwrap() {
        if let Some((g_sid, gno, len)) = e.gtid() {
            assert_eq!(g_sid, sid());
            assert_eq!(e.start + len, ends[gno as usize - 1].offset, "gno {gno}");
            if have.contains(&g_sid, gno) {
                let to = e.start + len;
                r.skip_to(to).unwrap();
                continue;
            }
            sent.push(gno);
        }
    }
    assert_eq!(sent, [1, 3, 5, 7, 9, 11]);
    // Skipping backwards or past the durable end is refused.
    let mut r = files.open_reader("binlog.000001", 157).unwrap();
    assert!(r.skip_to(100).is_err());
    assert!(r.skip_to(1 << 40).is_err());
}

/// A standby's store fed the owner's transactions as bytes (with the mapping's timestamps)
/// ends byte-identical to the owner's, rotations included (it rotates itself where the
/// owner did); a transaction that is not the next one is refused and leaves the store usable.
#[test]
fn relayed_transactions_make_an_identical_binlog() {
    let owner_dir = tempfile::tempdir().unwrap();
    let mut c = cfg(owner_dir.path());
    c.max_binlog_size = 2000;
    let (mut owner, _) = BinlogStore::open(c).unwrap();
    let t = tables();
    let n = 30u64;
    let mut spans = Vec::new();
    for k in 1..=n {
        let start = owner.write_pos();
        let end = write_txn(&mut owner, &t, k).end;
        assert_eq!(start.file_seq, end.file_seq);
        spans.push((start, end));
        owner.flush(txn_ts(k).1).unwrap();
    }
    drop(owner);
    assert!(spans.last().unwrap().1.file_seq >= 3, "rotated");
    let bytes_of = |(start, end): (StorePos, StorePos)| {
        let f = std::fs::read(bin(owner_dir.path(), start.file_seq)).unwrap();
        f[start.offset as usize..end.offset as usize].to_vec()
    };

    let standby_dir = tempfile::tempdir().unwrap();
    let mut c = cfg(standby_dir.path());
    c.max_binlog_size = 2000;
    let (mut standby, _) = BinlogStore::open(c.clone()).unwrap();
    for k in 1..=n {
        let (st, ct) = txn_ts(k);
        let events = bytes_of(spans[k as usize - 1]);
        // Refused: the one after next, a damaged copy, a copy cut short, and this one again
        // once written.
        if k < n {
            let next = bytes_of(spans[k as usize]);
            let (st2, ct2) = txn_ts(k + 1);
            let e = standby.relay_txn(&next, st2, ct2, 0).unwrap_err();
            assert!(matches!(e, StoreError::RelayMismatch { .. }), "{e}");
        }
        let mut damaged = events.clone();
        let mid = damaged.len() / 2;
        damaged[mid] ^= 0x40;
        assert!(standby.relay_txn(&damaged, st, ct, 0).is_err());
        assert!(standby
            .relay_txn(&events[..events.len() - 1], st, ct, 0)
            .is_err());
        let got = standby.relay_txn(&events, st, ct, 0).unwrap();
        assert_eq!(got.end, spans[k as usize - 1].1, "k={k}");
        let e = standby.relay_txn(&events, st, ct, 0).unwrap_err();
        assert!(matches!(e, StoreError::OutOfOrder { .. }), "{e}");
        if k % 3 == 0 {
            standby.flush(ct).unwrap();
        }
    }
    standby.flush(txn_ts(n).1).unwrap();
    drop(standby);
    let last = spans.last().unwrap().1.file_seq;
    for seq in 1..=last {
        assert_eq!(
            std::fs::read(bin(standby_dir.path(), seq)).unwrap(),
            std::fs::read(bin(owner_dir.path(), seq)).unwrap(),
            "binlog.{seq:06}"
        );
    }
    // The standby's mapping is the owner's: it reopens where the owner would, and could go on
    // writing as the owner from there.
    let (mut s, rec) = BinlogStore::open(c).unwrap();
    assert_eq!(rec.next_gno, n + 1);
    assert_eq!(rec.checkpoint, Some(txn_ts(n).1));
    assert!(rec.already_written(txn_ts(n).1, txn_ts(n).0, 0));
    write_txn(&mut s, &t, n + 1);
    s.flush(txn_ts(n + 1).1).unwrap();
}

/// The optional-metadata fields of the first TABLE_MAP of a store written with `metadata`, by
/// name (`ColumnName`, `Signedness`, …).
fn table_map_fields(metadata: tibinlog_protocol::binlog::RowMetadata) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.row_metadata = metadata;
    let (mut s, _) = BinlogStore::open(c).unwrap();
    write_txn(&mut s, &tables(), 1);
    s.flush(txn_ts(1).1).unwrap();
    let ev = events_of(&bin(dir.path(), 1));
    let tme = ev
        .iter()
        .find_map(|(_, e)| match e.read_data().unwrap() {
            Some(EventData::TableMapEvent(t)) => Some(t.into_owned()),
            _ => None,
        })
        .expect("a TABLE_MAP");
    tme.iter_optional_meta()
        .map(|f| {
            let f = format!("{:?}", f.unwrap());
            f.split(['(', ' ', '{']).next().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn binlog_row_metadata_sets_the_table_maps_optional_metadata() {
    use tibinlog_protocol::binlog::RowMetadata;
    let full = table_map_fields(RowMetadata::Full);
    assert!(full.contains(&"ColumnName".to_owned()), "{full:?}");
    assert!(full.contains(&"ColumnVisibility".to_owned()), "{full:?}");
    let minimal = table_map_fields(RowMetadata::Minimal);
    assert_eq!(minimal, ["Signedness", "DefaultCharset"]);
    assert!(table_map_fields(RowMetadata::None).is_empty());
}

use super::*;
use crate::model::{Op, RegionId};

fn put(commit: u64, start: u64, handle: u8) -> RawRow {
    let mut key = crate::tidb::key::record_prefix(1);
    key.push(handle);
    RawRow {
        op: Op::Put,
        key,
        value: vec![handle; 3],
        old_value: Vec::new(),
        start_ts: Ts(start),
        commit_ts: Ts(commit),
        region_id: RegionId(1),
    }
}

fn open(dir: &tempfile::TempDir) -> SortDb {
    let mut cfg = super::super::Config::new(dir.path().join("db"));
    cfg.write_buffer_bytes = 1 << 20;
    cfg.block_cache_bytes = 1 << 20;
    SortDb::open(&cfg).unwrap()
}

#[test]
fn corrupt_value_is_a_typed_error_and_ends_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.write_rows(&[put(10, 5, 1), put(11, 6, 2)]).unwrap();
    let mut k = Vec::new();
    encode_key_into(&put(10, 5, 1), &mut k);
    db.db.put(&k, [1u8, 2, 3]).unwrap();
    let out: Vec<_> = db
        .read_up_to(Ts(20), &ReadPosition::start(), 1 << 20)
        .collect();
    assert_eq!(out.len(), 1);
    assert!(matches!(
        out[0],
        Err(SorterError::Corrupt {
            what: "value",
            len: 3,
            ..
        })
    ));
}

#[test]
fn corrupt_key_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.db.put([0u8; 20], [0u8]).unwrap();
    let out: Vec<_> = db.read_up_to(Ts::MAX, &ReadPosition::start(), 1).collect();
    assert!(matches!(
        out[..],
        [Err(SorterError::Corrupt { what: "key", .. })]
    ));
}

#[test]
fn positions_order_like_keys() {
    let mut k = Vec::new();
    encode_key_into(&put(10, 5, 1), &mut k);
    let after_row = ReadPosition::after_key(&k);
    assert!(ReadPosition::start() < after_row);
    assert!(after_row < ReadPosition::after_txn(Ts(10), Ts(5)));
    assert!(ReadPosition::after_txn(Ts(10), Ts(5)) < ReadPosition::after_commit_ts(Ts(10)));
    assert!(ReadPosition::after_commit_ts(Ts(10)) < ReadPosition::after_commit_ts(Ts(11)));
    assert_eq!(
        format!("{after_row:?}"),
        format!(
            "ReadPosition {{ commit_ts: Some(10), start_ts: Some(5), len: {} }}",
            k.len() + 1
        )
    );
}

#[test]
fn resume_mid_txn_is_not_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.write_rows(&[put(10, 5, 1), put(10, 5, 2), put(10, 5, 3)])
        .unwrap();
    let all: Vec<_> = db
        .read_up_to(Ts(10), &ReadPosition::start(), 1)
        .map(|c| c.unwrap())
        .collect();
    let flags: Vec<_> = all.iter().map(|c| (c.first, c.last)).collect();
    assert_eq!(flags, vec![(true, false), (false, false), (false, true)]);
    let rest: Vec<_> = db
        .read_up_to(Ts(10), &all[0].end, 1 << 20)
        .map(|c| c.unwrap())
        .collect();
    assert_eq!(rest.len(), 1);
    assert_eq!(
        (rest[0].first, rest[0].last, rest[0].rows.len()),
        (false, true, 2)
    );
    let txns: Vec<_> = db
        .read_txns_up_to(Ts(10), &ReadPosition::start())
        .map(|t| t.unwrap())
        .collect();
    assert_eq!(txns.len(), 1);
    assert_eq!(txns[0].rows.len(), 3);
    assert_eq!(txns[0].end, all[2].end);
}

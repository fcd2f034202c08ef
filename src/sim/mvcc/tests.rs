use super::*;
use crate::sim::error::SimError;
use crate::sim::ts::{SimRng, Ts};

fn k(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn put(key: &str, v: &[u8]) -> Mutation {
    Mutation::Put(k(key), v.to_vec())
}

fn req(muts: Vec<Mutation>, primary: &str, start: u64) -> PrewriteRequest {
    PrewriteRequest {
        mutations: muts,
        primary: k(primary),
        start_ts: Ts(start),
        lock_ttl_ms: 3000,
        txn_size: 1,
        ..Default::default()
    }
}

fn value_at(s: &mut MvccStore, key: &str, ts: u64) -> Option<Vec<u8>> {
    s.get(key.as_bytes(), Ts(ts), &[])
        .expect("read")
        .map(|r| r.value)
}

#[test]
fn prewrite_commit_short_and_long_values() {
    let mut s = MvccStore::new();
    let long = vec![7u8; SHORT_VALUE_MAX_LEN + 1];
    let r = s
        .prewrite(&req(vec![put("a", b"1"), put("b", &long)], "a", 10))
        .expect("prewrite");
    let kinds: Vec<&str> = r
        .batch
        .modifies
        .iter()
        .map(|m| match m {
            Modify::PutLock { .. } => "lock",
            Modify::PutDefault { .. } => "default",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["lock", "default", "lock"],
        "long value goes to the default CF"
    );
    assert!(matches!(
        s.get(b"a", Ts(11), &[]),
        Err(SimError::KeyIsLocked { .. })
    ));
    assert_eq!(
        value_at(&mut s, "a", 9),
        None,
        "a lock newer than the read does not block"
    );
    // Retried prewrite is a no-op.
    assert!(s
        .prewrite(&req(vec![put("a", b"1")], "a", 10))
        .expect("retry")
        .batch
        .is_empty());
    let b = s.commit(&[k("a"), k("b")], Ts(10), Ts(15)).expect("commit");
    assert_eq!(b.modifies.len(), 4);
    assert_eq!(value_at(&mut s, "a", 15).as_deref(), Some(&b"1"[..]));
    assert_eq!(value_at(&mut s, "b", 20), Some(long));
    assert_eq!(value_at(&mut s, "a", 14), None);
    assert!(s
        .commit(&[k("a")], Ts(10), Ts(15))
        .expect("idempotent")
        .is_empty());
    assert_eq!(
        s.get(b"a", Ts(30), &[]).expect("get").map(|r| r.commit_ts),
        Some(Ts(15))
    );
}

#[test]
fn rollback_blocks_commit_and_late_prewrite() {
    let mut s = MvccStore::new();
    s.prewrite(&req(vec![put("a", b"1")], "a", 10))
        .expect("prewrite");
    let b = s.rollback(&[k("a")], Ts(10)).expect("rollback");
    assert!(b.modifies.iter().any(
        |m| matches!(m, Modify::PutWrite { write, .. } if write.write_type == WriteType::Rollback)
    ));
    assert!(matches!(
        s.commit(&[k("a")], Ts(10), Ts(20)),
        Err(SimError::TxnLockNotFound { .. })
    ));
    assert!(matches!(
        s.prewrite(&req(vec![put("a", b"1")], "a", 10)),
        Err(SimError::WriteConflict { .. })
    ));
    assert!(s.rollback(&[k("a")], Ts(10)).expect("again").is_empty());
    // Rollback of a committed txn fails.
    s.prewrite(&req(vec![put("b", b"1")], "b", 30))
        .expect("prewrite");
    s.commit(&[k("b")], Ts(30), Ts(31)).expect("commit");
    assert!(matches!(
        s.rollback(&[k("b")], Ts(30)),
        Err(SimError::Committed {
            commit_ts: Ts(31),
            ..
        })
    ));
}

#[test]
fn conflicts() {
    let mut s = MvccStore::new();
    s.prewrite(&req(vec![put("a", b"1")], "a", 10))
        .expect("prewrite");
    let e = s
        .prewrite(&req(vec![put("a", b"2")], "a", 12))
        .expect_err("locked");
    assert!(matches!(e, SimError::KeyIsLocked { ref lock, .. } if lock.start_ts == Ts(10)));
    s.commit(&[k("a")], Ts(10), Ts(20)).expect("commit");
    let e = s
        .prewrite(&req(vec![put("a", b"2")], "a", 12))
        .expect_err("conflict");
    assert!(matches!(
        e,
        SimError::WriteConflict {
            conflict_commit_ts: Ts(20),
            ..
        }
    ));
    assert!(matches!(
        s.prewrite(&req(vec![Mutation::Insert(k("a"), b"x".to_vec())], "a", 25)),
        Err(SimError::AlreadyExist { .. })
    ));
    assert!(matches!(
        s.commit(&[k("a")], Ts(20), Ts(20)),
        Err(SimError::InvalidTxnTso { .. })
    ));
    // All-or-nothing: one locked key keeps the other key unlocked.
    s.prewrite(&req(vec![put("z", b"1")], "z", 30))
        .expect("prewrite");
    assert!(s
        .prewrite(&req(vec![put("y", b"1"), put("z", b"2")], "y", 31))
        .is_err());
    assert!(s.entry(b"y").is_none());
}

#[test]
fn one_pc_writes_directly_above_max_ts() {
    let mut s = MvccStore::new();
    s.get(b"a", Ts(100), &[]).expect("read raises max_ts");
    let mut r = req(vec![put("a", b"1"), Mutation::Delete(k("b"))], "a", 50);
    r.try_one_pc = true;
    let res = s.prewrite(&r).expect("1pc");
    assert!(res.batch.one_pc);
    assert_eq!(res.one_pc_commit_ts, Ts(101));
    assert!(s.locks().next().is_none());
    assert_eq!(value_at(&mut s, "a", 101).as_deref(), Some(&b"1"[..]));
}

#[test]
fn async_commit_two_txns_get_equal_commit_ts() {
    let mut s = MvccStore::new();
    s.update_max_ts(Ts(100));
    let mut a = req(vec![put("a", b"1")], "a", 90);
    a.use_async_commit = true;
    a.secondaries = vec![];
    let mut b = req(vec![put("b", b"1")], "b", 95);
    b.use_async_commit = true;
    let ra = s.prewrite(&a).expect("a");
    let rb = s.prewrite(&b).expect("b");
    assert_eq!(ra.min_commit_ts, Ts(101));
    assert_eq!(
        rb.min_commit_ts,
        Ts(101),
        "commit_ts is computed, not unique"
    );
    assert!(matches!(
        s.commit(&[k("a")], Ts(90), Ts(100)),
        Err(SimError::CommitTsExpired { .. })
    ));
    s.commit(&[k("a")], Ts(90), ra.min_commit_ts)
        .expect("commit a");
    s.commit(&[k("b")], Ts(95), rb.min_commit_ts)
        .expect("commit b");
    // A reader at 100 ignored the lock of an async txn whose min_commit_ts is above it.
    s.prewrite(&{
        let mut c = req(vec![put("c", b"1")], "c", 102);
        c.use_async_commit = true;
        c
    })
    .expect("c");
    assert_eq!(
        s.entry(b"c")
            .and_then(|e| e.lock())
            .map(|l| l.min_commit_ts),
        Some(Ts(103))
    );
}

#[test]
fn large_txn_heartbeat_and_ttl_expiry() {
    let mut s = MvccStore::new();
    let start = Ts::compose(1_000, 0);
    let mut r = req(vec![put("p", b"1")], "p", start.0);
    r.lock_ttl_ms = 5_000;
    s.prewrite(&r).expect("prewrite");
    let (ttl, b) = s.txn_heart_beat(b"p", start, 20_000).expect("heartbeat");
    assert_eq!(ttl, 20_000);
    assert_eq!(b.modifies.len(), 1);
    let (st, _) = s
        .check_txn_status(
            b"p",
            start,
            Ts::compose(1_500, 0),
            Ts::compose(10_000, 0),
            false,
        )
        .expect("status");
    assert!(
        matches!(st, TxnStatus::Locked { ttl_ms: 20_000, min_commit_ts, .. } if min_commit_ts == Ts::compose(1_500, 1))
    );
    let (st, b) = s
        .check_txn_status(b"p", start, Ts::ZERO, Ts::compose(30_000, 0), false)
        .expect("status");
    assert_eq!(st, TxnStatus::TtlExpireRollback);
    assert!(!b.is_empty());
    let (st, _) = s
        .check_txn_status(b"p", start, Ts::ZERO, Ts::compose(30_000, 0), false)
        .expect("status");
    assert_eq!(st, TxnStatus::RolledBack);
    let (st, _) = s
        .check_txn_status(b"q", Ts(5), Ts::ZERO, Ts(6), true)
        .expect("status");
    assert_eq!(st, TxnStatus::LockNotExistRollback);
}

#[test]
fn resolve_lock_commits_every_key_of_txn() {
    let mut s = MvccStore::new();
    s.prewrite(&req(vec![put("a", b"1"), put("b", b"2")], "a", 10))
        .expect("prewrite");
    s.resolve_lock(Ts(10), Ts(12), None).expect("resolve");
    assert!(s.locks().next().is_none());
    assert_eq!(value_at(&mut s, "b", 12).as_deref(), Some(&b"2"[..]));
}

#[test]
fn reads_with_locks_scan_and_batch_get() {
    let mut s = MvccStore::new();
    for (i, key) in ["a", "b", "c"].iter().enumerate() {
        s.prewrite(&req(vec![put(key, b"v")], key, 10 + i as u64))
            .expect("prewrite");
        s.commit(&[k(key)], Ts(10 + i as u64), Ts(20 + i as u64))
            .expect("commit");
    }
    s.prewrite(&req(vec![Mutation::Delete(k("b"))], "b", 30))
        .expect("prewrite");
    s.prewrite(&req(vec![Mutation::Lock(k("c"))], "c", 31))
        .expect("lock-type lock");
    let pairs = s.scan(b"", b"", 0, Ts(40), false, &[]).expect("scan");
    assert_eq!(pairs.len(), 3);
    assert!(pairs[0].result.is_ok());
    assert!(matches!(pairs[1].result, Err(SimError::KeyIsLocked { .. })));
    assert!(pairs[2].result.is_ok(), "Lock-type locks never block reads");
    let pairs = s
        .scan(b"a", b"c", 1, Ts(40), true, &[Ts(30)])
        .expect("scan");
    assert_eq!(pairs.len(), 1);
    assert_eq!(
        pairs[0].result.as_ref().map(|r| r.value.len()).ok(),
        Some(0),
        "key only"
    );
    let got = s
        .batch_get(&[k("b"), k("zz")], Ts(40), &[Ts(30)])
        .expect("batch get");
    assert_eq!(got.len(), 1, "resolved lock bypassed, missing key skipped");
    assert_eq!(s.max_ts(), Ts(40));
}

#[test]
fn gc_really_drops_history() {
    let mut s = MvccStore::new();
    let long = vec![1u8; 300];
    let mut ts = 10;
    for v in [&b"v1"[..], &long, b"v3"] {
        s.prewrite(&req(vec![put("a", v)], "a", ts))
            .expect("prewrite");
        s.commit(&[k("a")], Ts(ts), Ts(ts + 1)).expect("commit");
        ts += 10;
    }
    s.rollback(&[k("a")], Ts(35)).expect("rollback record");
    s.prewrite(&req(vec![Mutation::Delete(k("d"))], "d", 5))
        .expect("prewrite");
    s.commit(&[k("d")], Ts(5), Ts(6)).expect("commit");
    let b = s.gc(Ts(25));
    // a: v1@11 dropped, long@21 kept (newest Put ≤ 25), v3@31 kept; d: Delete@6 dropped.
    assert!(b
        .modifies
        .iter()
        .all(|m| matches!(m, Modify::DeleteWrite { .. } | Modify::DeleteDefault { .. })));
    assert_eq!(value_at(&mut s, "a", 25), Some(long));
    assert!(matches!(
        s.get(b"a", Ts(15), &[]),
        Err(SimError::DataCompacted { .. })
    ));
    assert!(s.entry(b"d").is_none(), "the deleted key is gone entirely");
    s.gc(Ts(40));
    let e = s.entry(b"a").expect("a");
    assert_eq!(
        e.writes_newest_first().count(),
        1,
        "rollback and older versions dropped"
    );
    assert_eq!(
        e.defaults.len(),
        0,
        "default CF value of the dropped long Put dropped"
    );
}

#[test]
fn overlapped_rollback_flags_the_existing_record() {
    let mut s = MvccStore::new();
    s.prewrite(&req(vec![put("a", b"1")], "a", 10))
        .expect("prewrite");
    s.commit(&[k("a")], Ts(10), Ts(20)).expect("commit");
    // Txn 20 rolls back on a key where txn 10 committed at 20.
    let b = s.rollback(&[k("a")], Ts(20)).expect("rollback");
    assert!(
        matches!(&b.modifies[0], Modify::PutWrite { write, .. } if write.has_overlapped_rollback && write.write_type == WriteType::Put)
    );
    assert!(s.commit(&[k("a")], Ts(20), Ts(25)).is_err());
    assert_eq!(value_at(&mut s, "a", 30).as_deref(), Some(&b"1"[..]));
}

#[test]
fn pessimistic_prewrite_needs_its_lock() {
    let mut s = MvccStore::new();
    let mut r = req(vec![put("a", b"1")], "a", 10);
    r.for_update_ts = Ts(12);
    assert!(matches!(
        s.prewrite(&r),
        Err(SimError::PessimisticLockNotFound { .. })
    ));
    s.acquire_pessimistic_lock(&[k("a")], b"a", Ts(10), Ts(12), 3000)
        .expect("lock");
    assert_eq!(
        value_at(&mut s, "a", 50),
        None,
        "pessimistic locks do not block reads"
    );
    s.prewrite(&r).expect("prewrite");
    assert_eq!(
        s.entry(b"a").and_then(|e| e.lock()).map(|l| l.lock_type),
        Some(LockType::Put)
    );
}

/// What a full pass over every key leaves at `safe_point`: per key, the records above it, and
/// at or below it only the newest data record if that is a Put.
fn expected_after_gc(s: &MvccStore, safe_point: Ts) -> Vec<(Vec<u8>, Vec<Ts>)> {
    let mut out = Vec::new();
    for (key, e) in s.entries_from(b"") {
        let mut kept: Vec<Ts> = e
            .writes_newest_first()
            .filter(|(t, _)| *t > safe_point)
            .map(|(t, _)| t)
            .collect();
        let newest_data = e
            .writes_at_or_before(safe_point)
            .find(|(_, w)| matches!(w.write_type, WriteType::Put | WriteType::Delete));
        if let Some((t, w)) = newest_data {
            if w.write_type == WriteType::Put {
                kept.push(t);
            }
        }
        if !kept.is_empty() || e.lock().is_some() {
            out.push((key.to_vec(), kept));
        }
    }
    out
}

fn write_records(s: &MvccStore) -> Vec<(Vec<u8>, Vec<Ts>)> {
    s.entries_from(b"")
        .map(|(key, e)| {
            (
                key.to_vec(),
                e.writes_newest_first().map(|(t, _)| t).collect(),
            )
        })
        .collect()
}

#[test]
fn incremental_gc_leaves_what_a_pass_over_every_key_would() {
    let mut rng = SimRng::new(0x6763);
    let mut s = MvccStore::new();
    let mut ts = 10u64;
    let mut safe_point = 0u64;
    let long = vec![9u8; SHORT_VALUE_MAX_LEN + 1];
    for round in 0..400 {
        let key = format!("k{}", rng.below(12));
        ts += 1 + rng.below(3);
        let start = ts;
        let m = match rng.below(5) {
            0 => Mutation::Delete(k(&key)),
            1 => put(&key, &long),
            _ => put(&key, format!("v{round}").as_bytes()),
        };
        s.prewrite(&req(vec![m], &key, start)).expect("prewrite");
        ts += 1;
        if rng.chance(0.2) {
            s.rollback(&[k(&key)], Ts(start)).expect("rollback");
        } else {
            s.commit(&[k(&key)], Ts(start), Ts(ts)).expect("commit");
        }
        if rng.chance(0.15) {
            // Safe points trail the newest writes, as PD's do, so that keys stay queued
            // across passes.
            safe_point = safe_point.max(ts.saturating_sub(rng.below(40)));
            let expected = expected_after_gc(&s, Ts(safe_point));
            s.gc(Ts(safe_point));
            assert_eq!(
                write_records(&s),
                expected,
                "round {round}, safe point {safe_point}"
            );
            for (key, e) in s.entries_from(b"") {
                for (_, w) in e.writes_newest_first() {
                    if w.write_type == WriteType::Put && w.short_value.is_none() {
                        assert!(e.defaults.contains_key(&w.start_ts), "{key:?}");
                    }
                }
                assert!(
                    e.defaults.len() <= e.writes_newest_first().count(),
                    "a dropped long value left its default-CF record behind"
                );
            }
        }
    }
}

#[test]
fn approximate_size_counts_every_version_and_the_long_values() {
    let mut s = MvccStore::new();
    let long = vec![7u8; SHORT_VALUE_MAX_LEN + 1];
    s.prewrite(&req(vec![put("a", b"1"), put("b", &long)], "a", 10))
        .expect("prewrite");
    s.commit(&[k("a"), k("b")], Ts(10), Ts(15)).expect("commit");
    // A lock is not a version: nothing counts until the commit.
    s.prewrite(&req(vec![put("a", b"2")], "a", 20))
        .expect("prewrite");
    assert_eq!(s.approximate_size(b"a", b"c").keys, 2);
    s.commit(&[k("a")], Ts(20), Ts(25)).expect("commit");
    let all = s.approximate_size(b"", b"");
    assert_eq!(all.keys, 3, "two versions of a, one of b");
    let a = s.approximate_size(b"a", b"b");
    assert_eq!(a.keys, 2);
    let b = s.approximate_size(b"b", b"");
    assert_eq!(b.keys, 1);
    assert_eq!(a.bytes + b.bytes, all.bytes);
    assert!(
        b.bytes > long.len() as u64,
        "the long value counts in the default family"
    );
    assert_eq!(s.approximate_size(b"c", b"").keys, 0);
}

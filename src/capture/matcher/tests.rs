use super::*;
use crate::capture::spill::tests::MapStore;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One step of a matcher script; the expectation is what the step emits.
#[derive(Debug, Clone)]
enum Step {
    /// Prewrite(start_ts, key, value, generation)
    Prewrite(u64, &'static str, &'static str, u64),
    /// Delete prewrite(start_ts, key, old value)
    PrewriteDel(u64, &'static str, &'static str),
    /// Commit(start_ts, commit_ts, key) -> expected (value, old_value) or None if cached
    Commit(u64, u64, &'static str, Option<(&'static str, &'static str)>),
    /// A commit after INITIALIZED that has no prewrite: an error.
    CommitFails(u64, u64, &'static str),
    Rollback(u64, &'static str),
    /// INITIALIZED -> expected replayed (start_ts, commit_ts, key, value), dropped count
    Initialized(Vec<(u64, u64, &'static str, &'static str)>, usize),
    /// Pending prewrites expected now.
    Pending(usize),
}
use Step::{Commit, CommitFails, Initialized, Pending, Prewrite, PrewriteDel, Rollback};

fn put(start_ts: u64, key: &str, value: &str, generation: u64) -> super::Prewrite {
    super::Prewrite {
        start_ts: Ts(start_ts),
        key: key.as_bytes().to_vec(),
        op: Op::Put,
        value: value.as_bytes().to_vec(),
        old_value: format!("old-{key}").into_bytes(),
        generation,
    }
}

fn commit(start_ts: u64, commit_ts: u64, key: &str) -> super::Commit {
    super::Commit {
        start_ts: Ts(start_ts),
        commit_ts: Ts(commit_ts),
        key: key.as_bytes().to_vec(),
        op: Op::Put,
        value: Vec::new(),
    }
}

/// A config that spills past `budget` bytes of prewrites, and its store.
fn spilling(budget: usize) -> (MatcherConfig, Arc<MapStore>) {
    let store = Arc::new(MapStore::default());
    let config = MatcherConfig {
        pending_bytes_limit: DEFAULT_PENDING_BYTES_LIMIT,
        spill: Some(Spill::new(store.clone(), budget)),
    };
    (config, store)
}

/// Drops the matcher and checks that it left nothing behind in the store or the budget.
fn dropped_clean(m: Matcher, store: &MapStore) {
    let budget = m.config.spill.as_ref().map(|s| s.budget.clone());
    drop(m);
    assert_eq!(store.len(), 0, "spilled entries left after drop");
    if let Some(b) = budget {
        assert_eq!(b.used(), 0, "budget not released");
    }
}

fn run(name: &str, script: Vec<Step>) {
    // Once in memory, once with every prewrite on disk: the same behaviour.
    run_with(name, script.clone(), MatcherConfig::default());
    let (config, store) = spilling(0);
    run_with(&format!("{name} (spilled)"), script, config);
    assert_eq!(store.len(), 0, "{name}: spilled entries left after drop");
}

fn run_with(name: &str, script: Vec<Step>, config: MatcherConfig) {
    let mut m = Matcher::new(RegionId(1), config);
    for (i, step) in script.into_iter().enumerate() {
        let ctx = format!("{name} step {i}: {step:?}");
        match step {
            Prewrite(s, k, v, g) => m.on_prewrite(put(s, k, v, g)).expect(&ctx),
            PrewriteDel(s, k, old) => {
                let mut p = put(s, k, "", 0);
                p.op = Op::Delete;
                p.old_value = old.as_bytes().to_vec();
                m.on_prewrite(p).expect(&ctx)
            }
            Commit(s, c, k, want) => {
                let got = m.on_commit(commit(s, c, k)).expect(&ctx);
                let got = got.map(|r| (r.value, r.old_value));
                let want = want.map(|(v, o)| (v.as_bytes().to_vec(), o.as_bytes().to_vec()));
                assert_eq!(got, want, "{ctx}");
            }
            CommitFails(s, c, k) => {
                let err = m.on_commit(commit(s, c, k)).expect_err(&ctx);
                assert!(
                    matches!(err, CaptureError::PrewriteNotMatch { .. }),
                    "{ctx}"
                );
                assert!(!err.is_retryable(), "{ctx}");
            }
            Rollback(s, k) => m
                .on_rollback(super::Rollback {
                    start_ts: Ts(s),
                    key: k.as_bytes().to_vec(),
                })
                .expect(&ctx),
            Initialized(want, want_dropped) => {
                let mut out = Vec::new();
                let dropped = m.on_initialized(&mut out).expect(&ctx);
                let got: Vec<_> = out
                    .iter()
                    .map(|r| (r.start_ts.0, r.commit_ts.0, r.key.clone(), r.value.clone()))
                    .collect();
                let want: Vec<_> = want
                    .iter()
                    .map(|(s, c, k, v)| (*s, *c, k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                    .collect();
                assert_eq!(got, want, "{ctx}");
                assert_eq!(dropped, want_dropped, "{ctx}");
                assert_eq!(m.cached_commits(), 0, "{ctx}");
            }
            Pending(n) => assert_eq!(m.pending_prewrites(), n, "{ctx}"),
        }
    }
}

#[test]
    #[rustfmt::skip]
    fn scripts() {
        let cases: Vec<(&str, Vec<Step>)> = vec![
            ("prewrite then commit", vec![
                Prewrite(10, "a", "v", 0), Initialized(vec![], 0),
                Commit(10, 15, "a", Some(("v", "old-a"))), Pending(0)]),
            ("commit before the scan's prewrite is cached and matched at INITIALIZED", vec![
                Commit(10, 15, "a", None), Prewrite(10, "a", "v", 0), Pending(1),
                Initialized(vec![(10, 15, "a", "v")], 0), Pending(0)]),
            ("cached commit still unmatched at INITIALIZED is dropped", vec![
                Commit(10, 15, "a", None), Commit(11, 16, "b", None), Prewrite(11, "b", "w", 0),
                Initialized(vec![(11, 16, "b", "w")], 1)]),
            ("commit without prewrite after INITIALIZED is a violation", vec![
                Initialized(vec![], 0), CommitFails(10, 15, "a")]),
            ("empty prewrite does not overwrite", vec![
                Prewrite(10, "a", "v", 0), Prewrite(10, "a", "", 0),
                Commit(10, 15, "a", Some(("v", "old-a")))]),
            ("a fake (empty) prewrite alone does not match before INITIALIZED", vec![
                Prewrite(10, "a", "", 0), Commit(10, 15, "a", None), Prewrite(10, "a", "v", 0),
                Initialized(vec![(10, 15, "a", "v")], 0)]),
            ("a delete prewrite has no value and matches after INITIALIZED", vec![
                PrewriteDel(10, "a", "gone"), Commit(10, 15, "a", None),
                Initialized(vec![(10, 15, "a", "")], 0)]),
            ("delete prewrite matches directly after INITIALIZED", vec![
                Initialized(vec![], 0), PrewriteDel(10, "a", "gone"),
                Commit(10, 15, "a", Some(("", "gone")))]),
            ("same commit_ts in two txns: matched by start_ts", vec![
                Initialized(vec![], 0), Prewrite(10, "a", "x", 0), Prewrite(11, "a", "y", 0),
                Commit(11, 20, "a", Some(("y", "old-a"))), Commit(10, 20, "a", Some(("x", "old-a"))),
                Pending(0)]),
            ("rollback forgets the prewrite", vec![
                Initialized(vec![], 0), Prewrite(10, "a", "v", 0), Rollback(10, "a"), Pending(0),
                CommitFails(10, 15, "a")]),
            ("rollback before INITIALIZED applies after the scan's prewrite", vec![
                Rollback(10, "a"), Prewrite(10, "a", "v", 0), Pending(1),
                Initialized(vec![], 0), Pending(0)]),
            ("rollback of an unknown key is harmless", vec![
                Initialized(vec![], 0), Rollback(9, "z"), Pending(0)]),
            ("pipelined DML keeps the highest generation", vec![
                Prewrite(10, "a", "g1", 1), Prewrite(10, "a", "g3", 3), Prewrite(10, "a", "g2", 2),
                Initialized(vec![], 0), Commit(10, 15, "a", Some(("g3", "old-a")))]),
            ("pipelined prewrite does not match before INITIALIZED", vec![
                Prewrite(10, "a", "g1", 1), Commit(10, 15, "a", None), Prewrite(10, "a", "g2", 2),
                Initialized(vec![(10, 15, "a", "g2")], 0)]),
            ("duplicate prewrite with a value replaces (lock rewrite)", vec![
                Prewrite(10, "a", "v", 0), Prewrite(10, "a", "v", 0), Pending(1),
                Commit(10, 15, "a", Some(("v", "old-a"))), Pending(0)]),
        ];
        for (name, script) in cases {
            run(name, script);
        }
    }

#[test]
fn commit_short_value_used_when_prewrite_has_none() {
    let mut m = Matcher::new(RegionId(1), MatcherConfig::default());
    m.on_initialized(&mut Vec::new()).expect("initialized");
    m.on_prewrite(put(10, "a", "", 0)).expect("prewrite");
    let mut c = commit(10, 15, "a");
    c.value = b"short".to_vec();
    let row = m.on_commit(c).expect("commit").expect("matched");
    assert_eq!(row.value, b"short");
    assert_eq!(row.region_id, RegionId(1));
}

#[test]
fn pending_bytes_are_accounted_and_bounded() {
    let one = super::Pending {
        value: b"v".to_vec(),
        old_value: b"old-a".to_vec(),
        generation: 0,
    }
    .charge(b"a");
    let limit = 2 * one;
    let mut m = Matcher::new(
        RegionId(3),
        MatcherConfig {
            pending_bytes_limit: limit,
            spill: None,
        },
    );
    m.on_prewrite(put(10, "a", "v", 0)).expect("first");
    assert_eq!(m.pending_bytes(), one);
    m.on_prewrite(put(11, "a", "v", 0)).expect("second");
    assert_eq!(m.pending_bytes(), limit);
    let err = m
        .on_prewrite(put(12, "a", "v", 0))
        .expect_err("over the limit");
    assert!(matches!(
        err,
        CaptureError::PendingBytesExceeded { used, limit: l, .. } if used == 3 * one && l == limit
    ));
    assert!(!err.is_retryable());
    assert_eq!(m.pending_prewrites(), 2, "nothing stored on failure");
    // Replacing an entry with one of equal size is always allowed.
    m.on_prewrite(put(11, "a", "w", 0)).expect("replace");
    m.on_initialized(&mut Vec::new()).expect("initialized");
    m.on_commit(commit(10, 20, "a")).expect("commit");
    m.on_rollback(super::Rollback {
        start_ts: Ts(11),
        key: b"a".to_vec(),
    })
    .expect("rollback");
    assert_eq!(m.pending_bytes(), 0);
}

fn put_n(start_ts: u64, i: usize) -> super::Prewrite {
    super::Prewrite {
        start_ts: Ts(start_ts),
        key: format!("k{i:06}").into_bytes(),
        op: Op::Put,
        value: format!("value-{start_ts}-{i:06}").into_bytes(),
        old_value: Vec::new(),
        generation: 0,
    }
}

fn commit_n(start_ts: u64, i: usize) -> super::Commit {
    super::Commit {
        start_ts: Ts(start_ts),
        commit_ts: Ts(start_ts + 100),
        key: format!("k{i:06}").into_bytes(),
        op: Op::Put,
        value: Vec::new(),
    }
}

#[test]
fn a_transaction_larger_than_the_shared_budget_spills_and_memory_stays_bounded() {
    let p = put_n(10, 0);
    let one = prewrite_charge(p.key.len(), p.value.len(), p.old_value.len());
    let budget = 10 * one;
    let (config, store) = spilling(budget);
    let shared = config.spill.as_ref().expect("spill").budget.clone();
    let mut a = Matcher::new(RegionId(1), config.clone());
    let mut b = Matcher::new(RegionId(2), config);
    for m in [&mut a, &mut b] {
        m.on_initialized(&mut Vec::new()).expect("initialized");
    }
    // Region 2 holds a small transaction; region 1 one of 1,000 rows.
    for i in 0..3 {
        b.on_prewrite(put_n(20, i)).expect("small");
    }
    for i in 0..1000 {
        a.on_prewrite(put_n(10, i)).expect("huge");
        assert!(
            shared.used() <= budget,
            "row {i}: {} > {budget}",
            shared.used()
        );
    }
    assert_eq!(a.pending_prewrites(), 1000);
    assert_eq!(a.spilled_prewrites(), 1000, "the huge one went to disk");
    assert_eq!(b.spilled_prewrites(), 0, "the small one stayed in memory");
    assert_eq!(a.pending_bytes(), 0);
    assert_eq!(shared.used(), 3 * one);
    assert_eq!(store.len(), 1000);
    assert_eq!(shared.spilled_rows(), 1000);
    for i in (0..1000).rev() {
        let row = a.on_commit(commit_n(10, i)).expect("commit").expect("row");
        assert_eq!(row.value, format!("value-10-{i:06}").into_bytes());
        assert_eq!(row.commit_ts, Ts(110));
    }
    assert_eq!((a.pending_prewrites(), store.len()), (0, 0));
    for i in 0..3 {
        b.on_commit(commit_n(20, i)).expect("commit").expect("row");
    }
    dropped_clean(a, &store);
    dropped_clean(b, &store);
    assert_eq!(shared.used(), 0);
}

#[test]
fn the_largest_transaction_spills_first_and_later_prewrites_follow_it() {
    let p = put_n(10, 0);
    let one = prewrite_charge(p.key.len(), p.value.len(), p.old_value.len());
    let (config, store) = spilling(6 * one);
    let mut m = Matcher::new(RegionId(1), config);
    for i in 0..5 {
        m.on_prewrite(put_n(10, i)).expect("medium");
    }
    m.on_prewrite(put_n(11, 0)).expect("small");
    assert_eq!(m.spilled_prewrites(), 0);
    // The next prewrite of the small transaction passes the budget: the medium one moves.
    m.on_prewrite(put_n(11, 1)).expect("small again");
    assert_eq!(m.spilled_prewrites(), 5);
    assert_eq!(m.pending_bytes(), 2 * one);
    // A later prewrite of the spilled transaction goes to disk as well.
    m.on_prewrite(put_n(10, 5)).expect("follows");
    assert_eq!((m.spilled_prewrites(), store.len()), (6, 6));
    // A fake (empty) prewrite does not overwrite a spilled one; a higher generation does.
    let mut fake = put_n(10, 5);
    fake.value.clear();
    m.on_prewrite(fake).expect("fake");
    let mut newer = put_n(10, 4);
    newer.generation = 2;
    newer.value = b"gen-2".to_vec();
    m.on_prewrite(newer).expect("generation 2");
    assert_eq!(m.pending_prewrites(), 8);
    // Before INITIALIZED a generation > 0 does not match: the commit is cached.
    assert!(m.on_commit(commit_n(10, 4)).expect("cached").is_none());
    let mut out = Vec::new();
    assert_eq!(m.on_initialized(&mut out).expect("initialized"), 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].value, b"gen-2");
    let row = m.on_commit(commit_n(10, 5)).expect("commit").expect("row");
    assert_eq!(
        row.value, b"value-10-000005",
        "the fake prewrite did not win"
    );
    m.on_rollback(super::Rollback {
        start_ts: Ts(10),
        key: b"k000000".to_vec(),
    })
    .expect("rollback");
    assert!(m.on_commit(commit_n(10, 0)).is_err(), "rolled back");
    assert_eq!(m.spilled_prewrites(), 3);
    dropped_clean(m, &store);
}

#[test]
fn a_dropped_matcher_deletes_only_its_own_spilled_prewrites() {
    let (config, store) = spilling(0);
    let mut old = Matcher::new(RegionId(7), config.clone());
    let mut new = Matcher::new(RegionId(7), config);
    for i in 0..4 {
        old.on_prewrite(put_n(10, i)).expect("old");
        new.on_prewrite(put_n(10, i))
            .expect("new (the same locks again)");
    }
    assert_eq!(store.len(), 8);
    drop(old);
    assert_eq!(store.len(), 4);
    new.on_initialized(&mut Vec::new()).expect("initialized");
    for i in 0..4 {
        new.on_commit(commit_n(10, i))
            .expect("commit")
            .expect("row");
    }
    dropped_clean(new, &store);
}

#[test]
fn a_failing_spill_store_is_a_definite_error_naming_the_region() {
    let (config, store) = spilling(0);
    let mut m = Matcher::new(RegionId(9), config);
    m.on_prewrite(put_n(10, 0)).expect("first");
    store
        .broken
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let err = m.on_prewrite(put_n(10, 1)).expect_err("disk gone");
    assert!(matches!(
        err,
        CaptureError::Spill {
            region: RegionId(9),
            ..
        }
    ));
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("region 9") && err.to_string().contains("disk gone"));
    m.on_initialized(&mut Vec::new()).expect("nothing cached");
    let err = m
        .on_commit(commit_n(10, 0))
        .expect_err("the commit reads the store");
    assert!(matches!(err, CaptureError::Spill { .. }));
}

#[test]
fn wire_rows_are_typed() {
    let row = |t: LogType, op: OpType| Row {
        start_ts: 1,
        commit_ts: 2,
        r#type: t as i32,
        op_type: op as i32,
        key: b"k".to_vec(),
        ..Default::default()
    };
    let r = RegionId(9);
    assert!(matches!(
        RowEntry::from_cdcpb(row(LogType::Rollback, OpType::Unknown), r),
        Ok(RowEntry::Rollback(_))
    ));
    assert_eq!(
        RowEntry::from_cdcpb(row(LogType::Initialized, OpType::Unknown), r).ok(),
        Some(RowEntry::Initialized)
    );
    match RowEntry::from_cdcpb(row(LogType::Committed, OpType::Delete), r) {
        Ok(RowEntry::Committed(raw)) => {
            assert_eq!(
                (raw.op, raw.commit_ts, raw.region_id),
                (Op::Delete, Ts(2), r)
            )
        }
        other => panic!("unexpected {other:?}"),
    }
    for bad in [
        row(LogType::Prewrite, OpType::Unknown),
        row(LogType::Commit, OpType::Unknown),
        row(LogType::Unknown, OpType::Put),
        Row {
            r#type: 42,
            ..row(LogType::Commit, OpType::Put)
        },
    ] {
        assert!(matches!(
            RowEntry::from_cdcpb(bad, r),
            Err(CaptureError::UnknownRow { .. })
        ));
    }
}

/// A transaction of the random model: keys it writes and whether it commits.
#[derive(Debug, Clone)]
struct Txn {
    start_ts: u64,
    keys: Vec<u8>,
    commit: bool,
}

/// Builds, per txn, the ordered list of its rows, then interleaves them by `picks`.
fn interleave(txns: &[Txn], picks: &[usize]) -> Vec<RowEntry> {
    let mut queues: Vec<Vec<RowEntry>> = txns
        .iter()
        .map(|t| {
            let key = |k: &u8| vec![b'k', *k];
            let mut q: Vec<RowEntry> = t
                .keys
                .iter()
                .map(|k| {
                    RowEntry::Prewrite(super::Prewrite {
                        start_ts: Ts(t.start_ts),
                        key: key(k),
                        op: Op::Put,
                        value: format!("v{}-{k}", t.start_ts).into_bytes(),
                        old_value: Vec::new(),
                        generation: 0,
                    })
                })
                .collect();
            for k in &t.keys {
                q.push(if t.commit {
                    RowEntry::Commit(super::Commit {
                        start_ts: Ts(t.start_ts),
                        // Shared commit_ts on purpose: identity is start_ts.
                        commit_ts: Ts(1000),
                        key: key(k),
                        op: Op::Put,
                        value: Vec::new(),
                    })
                } else {
                    RowEntry::Rollback(super::Rollback {
                        start_ts: Ts(t.start_ts),
                        key: key(k),
                    })
                });
            }
            q.reverse();
            q
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while queues.iter().any(|q| !q.is_empty()) {
        let live: Vec<usize> = (0..queues.len())
            .filter(|&j| !queues[j].is_empty())
            .collect();
        let pick = live[picks.get(i).copied().unwrap_or(0) % live.len()];
        i += 1;
        if let Some(e) = queues[pick].pop() {
            out.push(e);
        }
    }
    out
}

fn txns() -> impl Strategy<Value = Vec<Txn>> {
    prop::collection::vec(
        (prop::collection::btree_set(0u8..6, 1..4), any::<bool>()),
        1..6,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (keys, commit))| Txn {
                start_ts: 10 + i as u64,
                keys: keys.into_iter().collect(),
                commit,
            })
            .collect()
    })
}

proptest! {
    /// Fed any interleaving (per txn: prewrites before its commits/rollbacks), the matcher
    /// emits every committed (start_ts, key) exactly once with its prewrite's value, nothing
    /// for rolled-back ones, and ends holding nothing.
    #[test]
    fn agrees_with_model(
        txns in txns(),
        picks in prop::collection::vec(0usize..8, 0..64),
        budget in prop::option::of(0usize..600),
    ) {
        let (config, store) = match budget {
            Some(b) => spilling(b),
            None => (MatcherConfig::default(), Arc::new(MapStore::default())),
        };
        let mut m = Matcher::new(RegionId(1), config);
        m.on_initialized(&mut Vec::new()).expect("initialized");
        let mut got: BTreeMap<(u64, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for e in interleave(&txns, &picks) {
            match e {
                RowEntry::Prewrite(p) => m.on_prewrite(p).expect("prewrite"),
                RowEntry::Commit(c) => {
                    let row = m.on_commit(c).expect("commit matches").expect("emitted");
                    let dup = got.insert((row.start_ts.0, row.key), row.value);
                    prop_assert!(dup.is_none(), "emitted twice");
                }
                RowEntry::Rollback(r) => m.on_rollback(r).expect("rollback"),
                _ => unreachable!(),
            }
        }
        let want: BTreeMap<(u64, Vec<u8>), Vec<u8>> = txns
            .iter()
            .filter(|t| t.commit)
            .flat_map(|t| t.keys.iter().map(move |k| {
                ((t.start_ts, vec![b'k', *k]), format!("v{}-{k}", t.start_ts).into_bytes())
            }))
            .collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(m.pending_prewrites(), 0);
        prop_assert_eq!(m.pending_bytes(), 0);
        prop_assert_eq!(store.len(), 0);
        dropped_clean(m, &store);
    }

    /// During the scan, the scan's prewrites may come after realtime commits and rollbacks;
    /// after INITIALIZED everything committed has been emitted exactly once.
    #[test]
    fn scan_interleaving_agrees_with_model(
        txns in txns(),
        picks in prop::collection::vec(0usize..8, 0..64),
        late_prewrites in prop::collection::vec(any::<bool>(), 0..32),
        budget in prop::option::of(0usize..600),
    ) {
        let (config, store) = match budget {
            Some(b) => spilling(b),
            None => (MatcherConfig::default(), Arc::new(MapStore::default())),
        };
        let mut m = Matcher::new(RegionId(1), config);
        let mut rows = Vec::new();
        let mut late = Vec::new();
        // Some prewrites are delayed until just before INITIALIZED, as a slow scan would.
        for (i, e) in interleave(&txns, &picks).into_iter().enumerate() {
            match e {
                RowEntry::Prewrite(p) if late_prewrites.get(i).copied().unwrap_or(false) => {
                    late.push(p)
                }
                RowEntry::Prewrite(p) => m.on_prewrite(p).expect("prewrite"),
                RowEntry::Commit(c) => rows.extend(m.on_commit(c).expect("commit")),
                RowEntry::Rollback(r) => m.on_rollback(r).expect("rollback"),
                _ => unreachable!(),
            }
        }
        for p in late {
            m.on_prewrite(p).expect("late prewrite");
        }
        prop_assert_eq!(m.on_initialized(&mut rows).expect("initialized"), 0);
        let got: BTreeSet<(u64, Vec<u8>, Vec<u8>)> =
            rows.iter().map(|r| (r.start_ts.0, r.key.clone(), r.value.clone())).collect();
        prop_assert_eq!(got.len(), rows.len(), "emitted twice");
        let want: BTreeSet<(u64, Vec<u8>, Vec<u8>)> = txns
            .iter()
            .filter(|t| t.commit)
            .flat_map(|t| t.keys.iter().map(move |k| {
                (t.start_ts, vec![b'k', *k], format!("v{}-{k}", t.start_ts).into_bytes())
            }))
            .collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(m.pending_prewrites(), 0);
        prop_assert_eq!(m.pending_bytes(), 0);
        prop_assert_eq!(store.len(), 0);
        dropped_clean(m, &store);
    }
}

use std::sync::Arc;

use super::*;
use crate::sim::cdc::CdcConfig;
use crate::sim::tidb::{TidbConfig, TruthCollector};

fn run(seed: u64) -> (Vec<String>, RunStats) {
    let clock = ManualClock::new(1_000_000);
    let mut core =
        SimCore::new(&[1, 2], CdcConfig::default(), Arc::new(clock.clone()), seed).expect("core");
    let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("boot");
    let truth = TruthCollector::new();
    tidb.set_truth_sink(Box::new(truth.clone()));
    let mix = Mix {
        ddl: 10,
        ..Mix::default()
    };
    let cfg = WorkloadConfig {
        seed,
        txns: 150,
        mix,
        large_rows: 50,
        ..WorkloadConfig::default()
    };
    let mut wl = Workload::new(cfg, Some(clock));
    wl.setup(&mut tidb, &mut core).expect("setup");
    let stats = wl.run(&mut tidb, &mut core, |_| {}).expect("run");
    (truth.lines(), stats)
}

#[test]
fn ddl_heavy_mix_is_deterministic() {
    let (a, sa) = run(3);
    let (b, sb) = run(3);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    assert!(sa.ddls > 3, "{sa:?}");
    // One line per transaction, one more for each further table of a CREATE TABLES.
    assert!(a.len() as u64 >= 6 + sa.txns);
}

#[test]
fn no_exchange_keeps_the_other_moving_ddl() {
    let clock = ManualClock::new(1_000_000);
    let mut core =
        SimCore::new(&[1, 2], CdcConfig::default(), Arc::new(clock.clone()), 3).expect("core");
    let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("boot");
    let truth = TruthCollector::new();
    tidb.set_truth_sink(Box::new(truth.clone()));
    let cfg = WorkloadConfig {
        seed: 3,
        txns: 400,
        mix: Mix {
            ddl: 30,
            ..Mix::default()
        },
        large_rows: 20,
        no_exchange: true,
        ..WorkloadConfig::default()
    };
    let mut wl = Workload::new(cfg, Some(clock));
    wl.setup(&mut tidb, &mut core).expect("setup");
    wl.run(&mut tidb, &mut core, |_| {}).expect("run");
    let ddl: Vec<String> = truth
        .lines()
        .iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v["ddl"].as_str().map(str::to_owned)
        })
        .collect();
    assert!(
        !ddl.iter().any(|d| d.contains(" EXCHANGE PARTITION ")),
        "{ddl:?}"
    );
    for kind in [
        " TRUNCATE PARTITION ",
        "RENAME TABLE ",
        "CREATE TABLE `wl`.`t_batch",
    ] {
        assert!(ddl.iter().any(|d| d.contains(kind)), "no {kind} in {ddl:?}");
    }
}

#[test]
fn a_row_cap_turns_inserts_into_full_tables_into_deletes() {
    let clock = ManualClock::new(1_000_000);
    let mut core =
        SimCore::new(&[1, 2], CdcConfig::default(), Arc::new(clock.clone()), 5).expect("core");
    let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("boot");
    let cfg = WorkloadConfig {
        seed: 5,
        txns: 300,
        mix: Mix {
            large: 20,
            ..Mix::default()
        },
        large_rows: 40,
        max_live_rows: Some(25),
        ..WorkloadConfig::default()
    };
    let mut wl = Workload::new(cfg, Some(clock));
    wl.setup(&mut tidb, &mut core).expect("setup");
    let stats = wl.run(&mut tidb, &mut core, |_| {}).expect("run");
    let live: Vec<usize> = wl.tables.iter().map(|t| t.live.len()).collect();
    assert!(live.iter().all(|&n| n <= 25), "{live:?}");
    assert!(live.contains(&25), "no table reached the cap: {live:?}");
    assert!(stats.row_changes > 300 * 2, "{stats:?}");
}

#[test]
fn a_table_cap_turns_creates_into_drops_of_the_workloads_own_tables() {
    let clock = ManualClock::new(1_000_000);
    let mut core =
        SimCore::new(&[1, 2], CdcConfig::default(), Arc::new(clock.clone()), 9).expect("core");
    let (mut tidb, _) = Tidb::bootstrap(&mut core, TidbConfig::default()).expect("boot");
    let truth = TruthCollector::new();
    tidb.set_truth_sink(Box::new(truth.clone()));
    let cfg = WorkloadConfig {
        seed: 9,
        txns: 1500,
        mix: Mix {
            ddl: 30,
            ..Mix::default()
        },
        large_rows: 10,
        max_tables: Some(12),
        ..WorkloadConfig::default()
    };
    let mut wl = Workload::new(cfg, Some(clock));
    wl.setup(&mut tidb, &mut core).expect("setup");
    let mut most = 0;
    for _ in 0..1500 {
        wl.step(&mut tidb, &mut core).expect("step");
        let in_catalog = tidb.catalog().db("wl").map_or(0, |d| d.tables.len());
        assert_eq!(
            in_catalog,
            wl.tables.len(),
            "the workload's tables are the catalog's"
        );
        most = most.max(in_catalog);
    }
    // A CREATE TABLES adds two, so the cap may be passed by one.
    assert!(most <= 13, "{most} tables");
    let lines = truth.lines();
    let drops: Vec<&String> = lines.iter().filter(|l| l.contains("DROP TABLE")).collect();
    assert!(drops.len() > 3, "{} drops", drops.len());
    // Setup's tables are never dropped.
    assert!(wl.tables.len() >= wl.initial && wl.initial > 0);
    // Rows still flow after the drops.
    let first_drop = lines
        .iter()
        .position(|l| l.contains("DROP TABLE"))
        .expect("a drop");
    assert!(
        lines[first_drop..]
            .iter()
            .filter(|l| !l.contains("\"rows\":[]"))
            .count()
            > 100,
        "few row changes after the first drop"
    );
}

#[test]
fn pick_respects_zero_weights() {
    let mut rng = SimRng::new(1);
    for _ in 0..100 {
        assert_eq!(pick(&mut rng, &[0, 5, 0]), 1);
    }
}

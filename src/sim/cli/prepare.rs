//! The setup before the workload starts: TiDB bootstrap, the truth sinks, the workload tables
//! and their pre-split regions.

use std::fs::File;
use std::sync::Arc;

use anyhow::Context as _;

use crate::sim::server::SimCluster;
use crate::sim::tidb::catalog::{key_datum, HandleKind, TableMeta};
use crate::sim::tidb::{Tidb, TidbConfig, TruthLog, TruthSink};
use crate::sim::ts::ManualClock;
use crate::sim::workload::{Workload, WorkloadConfig};
use crate::tidb::key::{record_key, record_span, Handle};

use super::args::{presplit_handle_span, SimArgs, WorkloadKind};
use super::report::{CountingSink, Stats, TeeSink};
use super::shared::apply_tidb;

/// The TiDB, the workload and the chaos lock prefixes [`prepare`] returns.
pub(super) type Prepared = (Tidb, Option<Workload>, Vec<Vec<u8>>);

/// Bootstrap, truth sink, workload tables, pre-split. Returns the TiDB, the workload (None for
/// `--workload none`) and the key prefixes where chaos may hold locks (one per physical table).
pub(super) async fn prepare(
    cluster: &SimCluster,
    args: &SimArgs,
    seed: u64,
    clock: &ManualClock,
    truth_file: Option<&File>,
    extra_truth: Option<Box<dyn TruthSink>>,
    stats: &Stats,
) -> anyhow::Result<Prepared> {
    let mut tidb = apply_tidb(cluster, |core| {
        // A fresh millisecond: TSOs handed out before (PD clients) cannot shift bootstrap's.
        clock.advance(1);
        Tidb::bootstrap(core, TidbConfig::default())
    })
    .context("bootstrap the simulated TiDB")?;
    let mut sinks: Vec<Box<dyn TruthSink>> = Vec::new();
    if let Some(f) = truth_file {
        sinks.push(Box::new(TruthLog::new(
            f.try_clone().context("clone the truth log handle")?,
        )));
    }
    sinks.extend(extra_truth);
    tidb.set_truth_sink(Box::new(CountingSink {
        inner: Box::new(TeeSink(sinks)),
        count: stats.truth_lines.clone(),
    }));

    let tick_ms = if args.rate > 0.0 {
        (1000.0 / args.rate).round().max(1.0) as u64
    } else {
        1
    };
    let cfg = WorkloadConfig {
        seed,
        txns: args.txns.unwrap_or(u64::MAX),
        rate: None,
        tick_ms,
        json_columns: !args.no_json,
        moving_ddl: !args.basic_ddl,
        no_exchange: args.no_exchange_partition,
        max_live_rows: args.max_live_rows,
        max_tables: args.max_tables,
        ..WorkloadConfig::default()
    };
    let db = cfg.db.clone();
    let mut wl = Workload::new(cfg, Some(clock.clone()));
    apply_tidb(cluster, |core| Ok(((), wl.setup(&mut tidb, core)?)))
        .context("create the workload tables")?;

    if args.workload == WorkloadKind::Huge {
        for ddl in crate::sim::workload::huge::ddls() {
            apply_tidb(cluster, |core| {
                clock.advance(1);
                let out = tidb.execute_ddl(core, &ddl)?;
                Ok(((), out.outputs))
            })
            .context("create the huge table")?;
        }
    }

    let tables: Vec<Arc<TableMeta>> = tidb
        .catalog()
        .db(&db)
        .map(|d| d.tables.values().cloned().collect())
        .unwrap_or_default();
    let span = presplit_handle_span(args.txns);
    for ddl in crate::sim::workload::scale::ddls(args.tables) {
        apply_tidb(cluster, |core| {
            clock.advance(1);
            let out = tidb.execute_ddl(core, &ddl)?;
            Ok(((), out.outputs))
        })
        .context("create the scale tables")?;
    }
    let scale_tables: Vec<Arc<TableMeta>> = tidb
        .catalog()
        .db(crate::sim::workload::scale::DB)
        .map(|d| d.tables.values().cloned().collect())
        .unwrap_or_default();
    let mut leader = 0usize;
    for t in &scale_tables {
        let pid = t.info.id;
        let (start, end) = record_span(pid);
        let mut keys = vec![start];
        for i in 1..args.regions_per_table {
            let h = span.saturating_mul(i as i64) / args.regions_per_table as i64;
            keys.push(handle_key(t, pid, h)?);
        }
        keys.push(end);
        for k in &keys {
            split_once(cluster, k).await?;
        }
        // Every region of the table's span, its leader on the next store in turn.
        for k in &keys[..keys.len() - 1] {
            let region = cluster
                .region_by_raw_key(k)
                .map(|r| r.id())
                .context("a region holds the split key")?;
            let store = 1 + (leader % args.stores.max(1)) as u64;
            leader += 1;
            cluster
                .transfer_leader(region, store)
                .await
                .with_context(|| format!("move region {region}'s leader to store {store}"))?;
        }
    }
    let mut prefixes = Vec::new();
    for t in &tables {
        for pid in t.physical_ids() {
            let (start, end) = record_span(pid);
            let mut keys = vec![start.clone()];
            for i in 1..args.regions_per_table {
                let h = span.saturating_mul(i as i64) / args.regions_per_table as i64;
                keys.push(handle_key(t, pid, h)?);
            }
            keys.push(end);
            for k in keys {
                split_once(cluster, &k).await?;
            }
            // Chaos holds its locks under an index id no index has: the lock stalls resolved
            // ts like any other, but no row read or DDL backfill scan of the workload meets it.
            let mut lock_prefix = crate::tidb::key::table_prefix(pid);
            lock_prefix.extend_from_slice(crate::tidb::key::INDEX_SEP);
            prefixes.push(lock_prefix);
        }
    }
    let regions = cluster.with_core(|c| c.cluster.region_count());
    tracing::info!(
        tables = tables.len(),
        scale_tables = scale_tables.len(),
        physical_tables = prefixes.len(),
        regions_per_table = args.regions_per_table,
        handle_span = span,
        regions,
        "workload tables created and split"
    );
    let wl = (args.workload == WorkloadKind::Oltp).then_some(wl);
    Ok((tidb, wl, prefixes))
}

/// The record key of handle `h` in physical table `pid`, built the way the workload builds
/// primary keys (strings `k{h:08}`, the other columns `h`).
fn handle_key(t: &TableMeta, pid: i64, h: i64) -> anyhow::Result<Vec<u8>> {
    let handle = match &t.handle {
        HandleKind::Int(_) | HandleKind::RowId => Handle::Int(h),
        HandleKind::Common(pos) => {
            let datums = pos
                .iter()
                .map(|&p| {
                    let ft = &t.types[p];
                    let v = if ft.is_string_kind() {
                        tibinlog_protocol::value::Value::Bytes(format!("k{h:08}").into_bytes())
                    } else if ft.is_unsigned() {
                        tibinlog_protocol::value::Value::UInt(h as u64)
                    } else {
                        tibinlog_protocol::value::Value::Int(h)
                    };
                    key_datum(&v, ft)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Handle::common_from_datums(&datums)?
        }
    };
    Ok(record_key(pid, &handle))
}

/// Splits at raw `key` unless a region already starts there.
async fn split_once(cluster: &SimCluster, key: &[u8]) -> anyhow::Result<()> {
    let encoded = crate::sim::region::encode_key(key);
    let at_boundary = cluster
        .region_by_raw_key(key)
        .is_some_and(|r| r.region.start_key == encoded);
    if !at_boundary {
        cluster
            .split_at(key)
            .await
            .with_context(|| format!("pre-split at {}", hex::encode(key)))?;
    }
    Ok(())
}

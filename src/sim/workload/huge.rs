//! One transaction larger than memory: `tibinlog sim --workload huge --huge-bytes 5G`.
//!
//! The table `huge.big (id BIGINT PRIMARY KEY, v LONGBLOB)` gets `bytes / row_bytes` rows in a
//! single 2PC transaction. client-go sends a big transaction's prewrites in batches and TiKV
//! applies each batch (and forwards its locks to CDC as PREWRITE rows) as it comes, so the
//! transaction's size never has to fit anywhere but in TiKV; this driver does the same: each
//! batch of about [`FLUSH_BYTES`] is one prewrite request, then the primary commits and the
//! secondaries commit in batches. Nothing of the transaction stays in the driver's memory.
//!
//! The transaction starts once a change-data client captures the table's region (scan done),
//! so the consumer sees it live, as an already running changefeed would.
//!
//! Between batches the driver waits while the stores' CDC queues hold more than half their
//! memory quota, so the benchmark measures the consumer, not TiKV's congestion path (a region
//! whose queue overflows is deregistered and rescanned, as in TiKV, which for one transaction of
//! gigabytes would only repeat the same locks).
//!
//! Values are a function of `(seed, id)` ([`row_value`]), so a consumer checks every byte it
//! receives without a truth log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tibinlog_protocol::value::Value;

use crate::sim::mvcc::{Mutation, PrewriteRequest};
use crate::sim::server::SimCluster;
use crate::sim::tidb::ddl::Ddl;
use crate::sim::tidb::types::{self as ty, ColumnDef, TableDef};
use crate::sim::tidb::Tidb;
use crate::sim::Ts;
use crate::tidb::key::{record_key, Handle};
use crate::tidb::schema::mysql;

/// Database of the huge table.
pub const DB: &str = "huge";
/// The huge table.
pub const TABLE: &str = "big";
/// Bytes of row values per prewrite (and commit) batch.
pub const FLUSH_BYTES: usize = 4 << 20;
/// Lock TTL of the transaction: an hour (client-go keeps a big transaction's primary alive with
/// heartbeats; a long TTL stands for them).
const LOCK_TTL_MS: u64 = 3_600_000;

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugeConfig {
    /// Total bytes of row values.
    pub bytes: u64,
    /// Bytes of one row's `v`.
    pub row_bytes: usize,
    pub seed: u64,
}

impl HugeConfig {
    /// Rows written: `bytes / row_bytes`, at least one.
    pub fn rows(&self) -> u64 {
        (self.bytes / self.row_bytes.max(1) as u64).max(1)
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugeSummary {
    pub start_ts: Ts,
    pub commit_ts: Ts,
    pub rows: u64,
    pub value_bytes: u64,
}

/// The value of row `id`: `len` bytes of a xorshift stream seeded by `(seed, id)`.
pub fn row_value(seed: u64, id: i64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(len);
    let mut x = (seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        let n = (len - out.len()).min(8);
        out.extend_from_slice(&b[..n]);
    }
}

/// The table's DDL: database and table, as jobs.
pub fn ddls() -> Vec<Ddl> {
    let mut id = ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false));
    id.nullable = false;
    vec![
        Ddl::CreateDatabase { name: DB.into() },
        Ddl::CreateTable {
            db: DB.into(),
            table: TableDef {
                name: TABLE.into(),
                columns: vec![id, ColumnDef::new("v", ty::longblob())],
                primary_key: vec!["id".into()],
                clustered: true,
                indexes: Vec::new(),
                partition: None,
                foreign_keys: Vec::new(),
                checks: Vec::new(),
            },
        },
    ]
}

fn key_of(pid: i64, id: i64) -> Vec<u8> {
    record_key(pid, &Handle::Int(id))
}

/// Writes and commits the transaction; returns once every key is committed.
pub async fn run(
    cluster: &SimCluster,
    tidb: &Arc<Mutex<Tidb>>,
    cfg: HugeConfig,
) -> anyhow::Result<HugeSummary> {
    let t = {
        let tidb = tidb.lock().unwrap_or_else(|e| e.into_inner());
        tidb.table(DB, TABLE)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("table {DB}.{TABLE} does not exist"))?
    };
    let pid = t.info.id;
    let rows = cfg.rows();
    let per_batch = (FLUSH_BYTES / cfg.row_bytes.max(1)).max(1) as i64;
    let primary = key_of(pid, 1);
    tracing::info!("huge transaction: waiting for a change-data client of {DB}.{TABLE}");
    wait_for_capture(cluster, &primary).await;
    let start_ts = cluster.tso();
    let mut value = Vec::new();
    let mut id = 1i64;
    while id as u64 <= rows {
        let end = (id + per_batch).min(rows as i64 + 1);
        let mut mutations = Vec::with_capacity((end - id) as usize);
        for i in id..end {
            row_value(cfg.seed, i, cfg.row_bytes, &mut value);
            let mut encoded = Vec::with_capacity(cfg.row_bytes + 32);
            t.codec
                .encode_v2(&[Value::Int(i), Value::Bytes(value.clone())], &mut encoded)?;
            mutations.push(Mutation::Put(key_of(pid, i), encoded));
        }
        let req = PrewriteRequest {
            mutations,
            primary: primary.clone(),
            start_ts,
            lock_ttl_ms: LOCK_TTL_MS,
            txn_size: rows,
            min_commit_ts: start_ts.next(),
            ..PrewriteRequest::default()
        };
        cluster.prewrite(&req)?;
        id = end;
        drain(cluster).await;
    }
    let commit_ts = cluster.tso();
    cluster.apply(|core| Ok(((), core.commit(&[primary], start_ts, commit_ts)?)))?;
    let per_commit = per_batch.max(1024);
    let mut id = 2i64;
    while id as u64 <= rows {
        let end = (id + per_commit).min(rows as i64 + 1);
        let keys: Vec<Vec<u8>> = (id..end).map(|i| key_of(pid, i)).collect();
        cluster.apply(|core| Ok(((), core.commit(&keys, start_ts, commit_ts)?)))?;
        id = end;
        drain(cluster).await;
    }
    Ok(HugeSummary {
        start_ts,
        commit_ts,
        rows,
        value_bytes: rows * cfg.row_bytes as u64,
    })
}

/// Waits until some store captures the region of `raw_key` and its scan is done.
async fn wait_for_capture(cluster: &SimCluster, raw_key: &[u8]) {
    let stores = cluster.store_ids();
    loop {
        if let Some(id) = cluster.region_by_raw_key(raw_key).map(|r| r.id()) {
            let captured = cluster.with_core(|core| {
                stores
                    .iter()
                    .any(|s| core.endpoint(*s).is_ok_and(|ep| ep.captures(id)))
            });
            if captured && !cluster.scan_running(id) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits while any store's CDC queue is more than half full.
async fn drain(cluster: &SimCluster) {
    while cluster.sink_fill() > 0.5 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_a_function_of_seed_and_id() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        row_value(7, 3, 100, &mut a);
        row_value(7, 3, 100, &mut b);
        assert_eq!(a, b);
        assert_eq!(a.len(), 100);
        row_value(7, 4, 100, &mut b);
        assert_ne!(a, b);
        row_value(8, 3, 100, &mut b);
        assert_ne!(a, b);
        assert_eq!(
            HugeConfig {
                bytes: 10_000,
                row_bytes: 3000,
                seed: 0
            }
            .rows(),
            3
        );
    }
}

//! Write path: input batches become RocksDB `WriteBatch`es on a dedicated thread.
//!
//! ```text
//!  capture task ──send_rows(batch)──► quota channel (bytes) ──► writer thread ──► RocksDB
//!               ──send_resolved(ts)─►                                 │ (WAL off)
//!                                                                     └─► reader control:
//!                                                                         resolved ts applied
//! ```
//!
//! * One input batch is one `WriteBatch`: a gRPC message's rows land atomically.
//! * The WAL is off: the DB is a cache, wiped at every start, so a crash loses nothing
//!   that the restart from the checkpoint does not fetch again.
//! * A resolved ts travels through the same channel as the rows, so when the writer thread
//!   applies it every row sent before it is already in RocksDB or in the memory run handed to
//!   the reader with it (`mem.rs`); only then may the reader read up to it. Invariant: the
//!   applied resolved ts never decreases.
//! * A row whose commit_ts is not above the resolved ts already applied is dropped and counted
//!   in `sorter_late_rows_total`: the reader may have passed its position. Capture filters
//!   these (a region re-subscribed from the checkpoint resends rows already delivered), so a
//!   non-zero counter means a duplicate at best and a capture bug at worst.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use rocksdb::{WriteBatch, WriteOptions};
use tracing::{debug, warn};

use super::db::SortDb;
use super::error::{Result, SorterError};
use super::key::{encode_key_into, encode_value_into, KEY_HEADER_LEN, VALUE_HEADER_LEN};
use super::mem::Buffer;
use super::metrics::MetricsSnapshot;
use super::quota::{QuotaReceiver, QuotaSender, TrySendError};
use super::read::ReaderCtl;
use crate::model::{RawKvEvent, RawRow, ResolvedTs, Ts};

/// Quota charged for a resolved-ts message, so that even a flood of them is bounded.
const RESOLVED_COST: usize = 64;

/// Memory one queued row holds: the struct plus its three heap buffers.
fn row_cost(row: &RawRow) -> usize {
    std::mem::size_of::<RawRow>() + row.payload_len()
}

/// Quota cost of a batch of rows.
pub fn batch_cost(rows: &[RawRow]) -> usize {
    rows.iter().map(row_cost).sum::<usize>() + std::mem::size_of::<Vec<RawRow>>()
}

impl SortDb {
    /// Writes `rows` as one `WriteBatch` with the WAL off. Blocking. Returns the encoded bytes
    /// written. Two buffers are allocated per call, none per row.
    pub fn write_rows(&self, rows: &[RawRow]) -> Result<usize> {
        if rows.is_empty() {
            return Ok(0);
        }
        let payload: usize = rows.iter().map(RawRow::payload_len).sum();
        let bytes = payload + rows.len() * (KEY_HEADER_LEN + VALUE_HEADER_LEN);
        // RocksDB's own per-entry record overhead is ~ 8 bytes; reserve it too.
        let mut batch = WriteBatch::with_capacity_bytes(bytes + rows.len() * 8 + 16);
        let mut key = Vec::with_capacity(256);
        let mut value = Vec::with_capacity(256);
        for row in rows {
            key.clear();
            value.clear();
            encode_key_into(row, &mut key);
            encode_value_into(row, &mut value);
            batch.put(&key, &value);
        }
        let mut wo = WriteOptions::default();
        wo.disable_wal(true);
        self.db.write_opt(batch, &wo)?;
        let m = &self.metrics;
        m.write_rows.fetch_add(rows.len() as u64, Relaxed);
        m.write_bytes.fetch_add(bytes as u64, Relaxed);
        m.write_batches.fetch_add(1, Relaxed);
        Ok(bytes)
    }
}

/// What the writer thread is fed.
#[derive(Debug)]
pub(crate) enum WriterMsg {
    Rows(Vec<RawRow>),
    Resolved(ResolvedTs),
}

/// The async sending half of the sorter. Cheap to clone; the writer thread stops once every
/// clone is dropped.
#[derive(Debug, Clone)]
pub struct SorterWriter {
    pub(crate) tx: QuotaSender<WriterMsg>,
    pub(crate) db: SortDb,
}

impl SorterWriter {
    /// The column family where capture spills prewrites of transactions larger than memory.
    pub fn prewrite_spill(&self) -> super::PrewriteSpill {
        super::PrewriteSpill::new(self.db.clone())
    }
}

fn closed<T>(_: TrySendError<T>) -> SorterError {
    SorterError::Closed("writer")
}

impl SorterWriter {
    /// Queues one batch of rows (kept intact as one `WriteBatch`). Waits while the memory
    /// quota is spent: that wait is the back-pressure on capture.
    pub async fn send_rows(&self, rows: Vec<RawRow>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let cost = batch_cost(&rows);
        self.tx
            .send(WriterMsg::Rows(rows), cost)
            .await
            .map_err(closed)
    }

    /// Queues the batch only if the quota has room now; gives it back if not.
    pub fn try_send_rows(
        &self,
        rows: Vec<RawRow>,
    ) -> std::result::Result<(), TrySendError<Vec<RawRow>>> {
        let cost = batch_cost(&rows);
        self.tx
            .try_send(WriterMsg::Rows(rows), cost)
            .map_err(|e| match e {
                TrySendError::Full(WriterMsg::Rows(r)) => TrySendError::Full(r),
                TrySendError::Closed(WriterMsg::Rows(r)) => TrySendError::Closed(r),
                // Only rows were sent above.
                TrySendError::Full(WriterMsg::Resolved(_))
                | TrySendError::Closed(WriterMsg::Resolved(_)) => TrySendError::Closed(Vec::new()),
            })
    }

    /// Queues a resolved ts: once applied, the reader emits every transaction with
    /// `commit_ts <= ts`, then a [`super::SorterOutput::Resolved`] marker.
    pub async fn send_resolved(&self, ts: ResolvedTs) -> Result<()> {
        self.tx
            .send(WriterMsg::Resolved(ts), RESOLVED_COST)
            .await
            .map_err(closed)
    }

    /// Queues capture's events in order: each run of rows between resolved events becomes one
    /// batch.
    pub async fn send_events(&self, events: Vec<RawKvEvent>) -> Result<()> {
        let mut rows = Vec::new();
        for ev in events {
            match ev {
                RawKvEvent::Row(r) => rows.push(r),
                RawKvEvent::Resolved(ts) => {
                    self.send_rows(std::mem::take(&mut rows)).await?;
                    self.send_resolved(ts).await?;
                }
            }
        }
        self.send_rows(rows).await
    }

    /// Bytes of the memory quota in use (accepted, not yet in RocksDB).
    pub fn in_flight_bytes(&self) -> usize {
        self.tx.quota_bytes() - self.tx.available_bytes()
    }

    /// The sorter's counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.db.metrics.snapshot()
    }
}

/// The writer thread's loop. Ends when every [`SorterWriter`] is dropped, or on the first
/// RocksDB error, which it hands to the reader so the consumer sees it.
///
/// With a memory tier (`mem_limit > 0`) rows wait in a [`Buffer`]; a resolved ts hands the
/// rows it covers to the reader as one sorted [`Run`](super::mem::Run), unless the reader
/// already has `mem_limit` bytes of runs waiting, in which case they go to RocksDB first. A
/// buffer that outgrows `mem_limit` is written to RocksDB whole.
pub(crate) fn run_writer(
    db: SortDb,
    mut rx: QuotaReceiver<WriterMsg>,
    ctl: Arc<ReaderCtl>,
    mem_limit: usize,
) {
    let mut resolved = Ts::ZERO;
    let mut buf = Buffer::default();
    while let Some((msg, charge)) = rx.blocking_recv() {
        let step = match msg {
            WriterMsg::Rows(mut rows) => {
                let before = rows.len();
                rows.retain(|r| r.commit_ts > resolved);
                let late = before - rows.len();
                if late > 0 {
                    db.metrics.late_rows.fetch_add(late as u64, Relaxed);
                    warn!(
                        late,
                        resolved_ts = resolved.0,
                        "sorter dropped rows at or below the resolved ts"
                    );
                }
                if mem_limit == 0 {
                    db.write_rows(&rows).map(drop)
                } else {
                    buf.extend(rows);
                    if buf.bytes() > mem_limit {
                        db.write_rows(&buf.take_all()).map(drop)
                    } else {
                        Ok(())
                    }
                }
            }
            WriterMsg::Resolved(ResolvedTs(ts)) if ts > resolved => {
                resolved = ts;
                db.metrics.resolved_ts.store(ts.0, Relaxed);
                hand_over(&db, &ctl, &mut buf, ts, mem_limit)
            }
            WriterMsg::Resolved(_) => Ok(()),
        };
        if let Err(e) = step {
            ctl.fail(e);
            return;
        }
        drop(charge);
    }
    debug!(resolved_ts = resolved.0, "sorter writer stopped");
    ctl.writer_done();
}

/// Applies resolved ts `ts`: the buffered rows it covers go to the reader as a run, or to
/// RocksDB when the reader has too much waiting; then the reader may read up to `ts`.
fn hand_over(
    db: &SortDb,
    ctl: &ReaderCtl,
    buf: &mut Buffer,
    ts: Ts,
    mem_limit: usize,
) -> Result<()> {
    if buf.is_empty() {
        ctl.advance_resolved(ts);
        return Ok(());
    }
    let run = buf.take_resolved(ts);
    if run.rows.is_empty() {
        ctl.advance_resolved(ts);
    } else if ctl.waiting_run_bytes() + run.bytes > mem_limit {
        db.write_rows(&run.rows)?;
        ctl.advance_resolved(ts);
    } else {
        db.metrics
            .mem_rows
            .fetch_add(run.rows.len() as u64, Relaxed);
        ctl.advance_resolved_with(run);
    }
    Ok(())
}

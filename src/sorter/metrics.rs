//! Sorter counters. Incremented per batch or per chunk, never per row on a hot path.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Rows written into RocksDB.
pub const WRITE_ROWS_TOTAL: &str = "sorter_write_rows_total";
/// Encoded bytes (key + value) written into RocksDB.
pub const WRITE_BYTES_TOTAL: &str = "sorter_write_bytes_total";
/// Write batches into RocksDB (one per input batch, or one per spill of the memory tier).
pub const WRITE_BATCHES_TOTAL: &str = "sorter_write_batches_total";
/// Rows dropped because their commit_ts was already covered by a resolved ts.
pub const LATE_ROWS_TOTAL: &str = "sorter_late_rows_total";
/// Bytes accepted by the writer and not yet in RocksDB (the memory quota in use).
pub const IN_FLIGHT_BYTES: &str = "sorter_in_flight_bytes";
/// Rows handed from the memory tier to the reader without passing through RocksDB.
pub const MEM_ROWS_TOTAL: &str = "sorter_mem_rows_total";
/// Rows read out in order.
pub const READ_ROWS_TOTAL: &str = "sorter_read_rows_total";
/// Chunks read out.
pub const READ_CHUNKS_TOTAL: &str = "sorter_read_chunks_total";
/// DeleteRange calls issued by GC.
pub const GC_RANGES_TOTAL: &str = "sorter_gc_ranges_total";
/// The resolved ts the writer has applied (everything up to it is in RocksDB or handed to the
/// reader).
pub const RESOLVED_TS: &str = "sorter_resolved_ts";

/// Live counters, shared by the writer and reader threads.
#[derive(Debug, Default)]
pub struct SorterMetrics {
    pub(crate) write_rows: AtomicU64,
    pub(crate) write_bytes: AtomicU64,
    pub(crate) write_batches: AtomicU64,
    pub(crate) late_rows: AtomicU64,
    pub(crate) in_flight_bytes: AtomicU64,
    pub(crate) mem_rows: AtomicU64,
    pub(crate) read_rows: AtomicU64,
    pub(crate) read_chunks: AtomicU64,
    pub(crate) gc_ranges: AtomicU64,
    pub(crate) resolved_ts: AtomicU64,
}

/// A point-in-time copy of [`SorterMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub write_rows_total: u64,
    pub write_bytes_total: u64,
    pub write_batches_total: u64,
    pub late_rows_total: u64,
    pub in_flight_bytes: u64,
    pub mem_rows_total: u64,
    pub read_rows_total: u64,
    pub read_chunks_total: u64,
    pub gc_ranges_total: u64,
    pub resolved_ts: u64,
}

/// The counters a sorter updates, shared with whoever exports them; one handle may serve
/// successive sorters (a restarted changefeed), so totals keep counting. Equal when it is the
/// same set of counters.
#[derive(Debug, Clone, Default)]
pub struct MetricsHandle(pub std::sync::Arc<SorterMetrics>);

impl PartialEq for MetricsHandle {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MetricsHandle {}

impl SorterMetrics {
    /// Metric names with their help texts, in the order of [`Self::pairs`].
    pub const NAMES: [(&'static str, &'static str); 10] = [
        (WRITE_ROWS_TOTAL, "Rows written into the sorter's RocksDB"),
        (
            WRITE_BYTES_TOTAL,
            "Encoded bytes written into the sorter's RocksDB",
        ),
        (
            WRITE_BATCHES_TOTAL,
            "Write batches into the sorter's RocksDB",
        ),
        (
            LATE_ROWS_TOTAL,
            "Rows dropped as already covered by a resolved ts",
        ),
        (
            IN_FLIGHT_BYTES,
            "Bytes accepted by the sorter and not yet written (its memory quota in use)",
        ),
        (
            MEM_ROWS_TOTAL,
            "Rows handed to the reader from the memory tier",
        ),
        (READ_ROWS_TOTAL, "Rows read out in order"),
        (READ_CHUNKS_TOTAL, "Chunks read out"),
        (
            GC_RANGES_TOTAL,
            "DeleteRange calls issued by the sorter's GC",
        ),
        (RESOLVED_TS, "The resolved ts the sorter has applied"),
    ];

    /// Reads every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            write_rows_total: self.write_rows.load(Relaxed),
            write_bytes_total: self.write_bytes.load(Relaxed),
            write_batches_total: self.write_batches.load(Relaxed),
            late_rows_total: self.late_rows.load(Relaxed),
            in_flight_bytes: self.in_flight_bytes.load(Relaxed),
            mem_rows_total: self.mem_rows.load(Relaxed),
            read_rows_total: self.read_rows.load(Relaxed),
            read_chunks_total: self.read_chunks.load(Relaxed),
            gc_ranges_total: self.gc_ranges.load(Relaxed),
            resolved_ts: self.resolved_ts.load(Relaxed),
        }
    }

    /// `(name, value)` pairs under the metric names above, for an exporter.
    pub fn pairs(&self) -> [(&'static str, u64); 10] {
        let s = self.snapshot();
        [
            (WRITE_ROWS_TOTAL, s.write_rows_total),
            (WRITE_BYTES_TOTAL, s.write_bytes_total),
            (WRITE_BATCHES_TOTAL, s.write_batches_total),
            (LATE_ROWS_TOTAL, s.late_rows_total),
            (IN_FLIGHT_BYTES, s.in_flight_bytes),
            (MEM_ROWS_TOTAL, s.mem_rows_total),
            (READ_ROWS_TOTAL, s.read_rows_total),
            (READ_CHUNKS_TOTAL, s.read_chunks_total),
            (GC_RANGES_TOTAL, s.gc_ranges_total),
            (RESOLVED_TS, s.resolved_ts),
        ]
    }
}

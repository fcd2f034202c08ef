//! Snapshot reads of TiDB tables for SQL clients ([`SnapshotSource`]): the record keys of a
//! table (each partition's) scanned at the statement's timestamp through the capture's TiKV
//! reader, page by page, decoded with the table version of the catalog the statement reads.
//!
//! The clustered key's ranges (`sql/keyrange.rs`) bound the scanned key ranges; an index read
//! scans the index's entries and fetches the rows they point at page by page
//! (`index_lookup.rs`); partitions read in order are merged (`scan_merge.rs`). A statement's
//! LIMIT sizes the pages, and nothing is read ahead past it.
//!
//! Keys order integer handles as signed 64-bit numbers, so an `UNSIGNED` key's values from
//! 2^63 up sort first: ranges over them are split, and ascending order is served by scanning
//! `[0, 2^63)` before `[2^63, 2^64)`.

mod index_lookup;
pub mod scan_holds;
mod scan_merge;

use std::collections::HashMap;
use std::sync::Arc;

use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR;

use crate::capture::pd::PdClient;
use crate::capture::snapshot::BlockingSnapshotReader;
use crate::capture::table_sizes::TableSizes;
use crate::model::Ts;
use crate::sql::catalog::{RowDecoder, TableEstimate, TableMeta, TableStats};
use crate::sql::error::{Result, SqlError};
use crate::sql::exec::RowStream;
use crate::sql::keyrange::{Access, KeyRanges, KeySpan, ScanOrder, ScanRequest};
use crate::sql::plan::SnapshotSource;
use crate::tidb::key::{encode_record_key, index_prefix, record_prefix, record_span, Handle};
use scan_holds::{ScanHold, ScanHolds};
use scan_merge::{Merge, Pair, Pop, INDEX_PREFIX_LEN, RECORD_PREFIX_LEN};

/// Rows of the first TiKV page of a snapshot scan without a LIMIT; the pages that follow
/// double up to [`SCAN_PAGE_MAX`] while they stay under [`SCAN_PAGE_BYTES`] (a whole table
/// takes few round trips, wide rows keep pages small; a LIMIT sizes the pages itself). A
/// chunk of a few thousand rows is read in a few pages (starting at 256 rows, a chunk of
/// 8,096 took six round trips).
pub const SCAN_PAGE: u32 = 1_024;
/// Most rows of one page. Every buffer a page passes through (TiKV's response, the received
/// message, the decoded pairs) scales with it; kept under a megabyte or so, they are recycled
/// by the allocator instead of each holding on to memory of its own (measured: a 10M-row
/// `SELECT *` grew the resident set by 76 MB with pages of 16,384 rows, 29 MB with 4,096, at
/// no more CPU per row).
pub const SCAN_PAGE_MAX: u32 = 4_096;
/// Bytes of a page above which the next one is halved.
pub const SCAN_PAGE_BYTES: usize = 1 << 20;

/// [`SnapshotSource`] over the capture's TiKV reader.
#[derive(Debug, Clone)]
pub struct TableReader {
    reader: BlockingSnapshotReader,
    pd: PdClient,
    handle: tokio::runtime::Handle,
    /// Every scan holds its timestamp here while it runs.
    holds: ScanHolds,
    /// Table size estimates from PD.
    sizes: Arc<TableSizes>,
}

impl TableReader {
    pub fn new(
        reader: BlockingSnapshotReader,
        pd: PdClient,
        handle: tokio::runtime::Handle,
        holds: ScanHolds,
    ) -> Self {
        TableReader {
            reader,
            sizes: Arc::new(TableSizes::new(pd.clone())),
            pd,
            handle,
            holds,
        }
    }

    /// Runs `f` to completion from a blocking thread (a statement's) or a multi-threaded
    /// runtime's worker.
    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.handle.block_on(f))
            }
            _ => self.handle.block_on(f),
        }
    }

    /// Refuses a read below PD's GC safe point, as TiDB does: the history may be gone.
    fn check_gc(&self, ts: u64) -> Result<()> {
        let safe = self.block_on(self.pd.get_gc_safe_point()).map_err(|e| {
            SqlError::new(ER_UNKNOWN_ERROR, format!("reading PD's GC safe point: {e}"))
        })?;
        if ts < safe.0 {
            return Err(SqlError::new(
                ER_UNKNOWN_ERROR,
                format!(
                    "snapshot ts {ts} is older than the GC safe point {}: its history may be gone",
                    safe.0
                ),
            ));
        }
        Ok(())
    }
}

fn record_key(table_id: i64, handle: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(19);
    encode_record_key(&mut k, table_id, &Handle::Int(handle));
    k
}

/// Raw key ranges `[start, end)` of one physical table for `ranges`, in ascending key order.
fn key_ranges(table_id: i64, ranges: &KeyRanges, unsigned: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    match ranges {
        KeyRanges::All => int_key_ranges(table_id, &None, unsigned),
        KeyRanges::Int(r) => int_key_ranges(table_id, &Some(r.clone()), unsigned),
        KeyRanges::Common(spans) => {
            let prefix = record_prefix(table_id);
            let with = |b: &[u8]| [prefix.as_slice(), b].concat();
            spans
                .iter()
                .map(|(s, e)| {
                    let end = e.as_deref().map_or_else(|| record_span(table_id).1, with);
                    (with(s), end)
                })
                .collect()
        }
    }
}

/// Raw key ranges `[start, end)` of one physical table for inclusive handle `ranges` in the
/// order the rows must come (`None`: the whole table).
fn int_key_ranges(
    table_id: i64,
    ranges: &Option<Vec<(i128, i128)>>,
    unsigned: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (start, end) = record_span(table_id);
    let Some(ranges) = ranges else {
        if !unsigned {
            return vec![(start, end)];
        }
        // Handles 0..2^63 (keys of non-negative i64), then 2^63.. (keys of negative i64).
        return vec![
            (record_key(table_id, 0), end.clone()),
            (start, record_key(table_id, 0)),
        ];
    };
    let mut out = Vec::new();
    let mut high = Vec::new();
    for &(lo, hi) in ranges {
        // In the signed key domain: pieces below 2^63 and pieces at or above it.
        let split = 1i128 << 63;
        let piece = |lo: i128, hi: i128, into: &mut Vec<(Vec<u8>, Vec<u8>)>| {
            let (a, b) = if unsigned && lo >= split {
                ((lo - (1i128 << 64)) as i64, (hi - (1i128 << 64)) as i64)
            } else {
                (lo as i64, hi as i64)
            };
            let to = if b == i64::MAX {
                end.clone()
            } else {
                record_key(table_id, b + 1)
            };
            into.push((record_key(table_id, a), to));
        };
        if unsigned && lo < split && hi >= split {
            piece(lo, split - 1, &mut out);
            piece(split, hi, &mut high);
        } else if unsigned && lo >= split {
            piece(lo, hi, &mut high);
        } else {
            piece(lo, hi, &mut out);
        }
    }
    out.extend(high);
    out
}

/// Raw key ranges `[start, end)` of index `index` of one physical table for spans of its
/// entries' datums (`None`: the whole index), ascending.
fn index_key_ranges(
    table_id: i64,
    index: i64,
    spans: &Option<Vec<KeySpan>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let prefix = index_prefix(table_id, index);
    let with = |b: &[u8]| [prefix.as_slice(), b].concat();
    // Every datum starts with a flag below 0xFF.
    let end = with(&[0xFF]);
    match spans {
        None => vec![(prefix.clone(), end)],
        Some(spans) => spans
            .iter()
            .map(|(s, e)| (with(s), e.as_deref().map_or_else(|| end.clone(), with)))
            .collect(),
    }
}

/// Bytes of PD's size unit.
const MIB: u64 = 1 << 20;

impl TableStats for TableReader {
    fn estimates(&self, ids: &[i64]) -> HashMap<i64, TableEstimate> {
        self.block_on(self.sizes.of(ids))
            .into_iter()
            .map(|(id, s)| {
                let e = TableEstimate {
                    rows: s.storage_keys,
                    data_length: s.storage_size.saturating_mul(MIB),
                };
                (id, e)
            })
            .collect()
    }
}

impl SnapshotSource for TableReader {
    fn stats(&self) -> Option<&dyn TableStats> {
        Some(self)
    }

    fn scan(&self, table: &TableMeta, ts: u64, request: ScanRequest) -> Result<Box<dyn RowStream>> {
        let ScanRequest {
            access,
            order,
            rows,
            columns,
        } = request;
        // Held first, then checked: from here on GC keeps the history at `ts` until the scan
        // ends; a `ts` GC already passed fails before anything is read.
        let hold = self.holds.hold(ts);
        self.check_gc(ts)?;
        let decoder = table.rows.clone().ok_or_else(|| {
            SqlError::unsupported(format!("reading `{}`.`{}`", table.db, table.name))
        })?;
        if let Some(why) = decoder.refused() {
            return Err(SqlError::new(ER_UNKNOWN_ERROR, why));
        }
        let unsigned = matches!(
            table.handle,
            crate::sql::catalog::HandleKind::IntPk { unsigned: true, .. }
        );
        // Each input's key ranges: a physical table's records, or its index entries (a
        // global index's under the logical table).
        let (inputs, prefix, lookup): (Vec<_>, _, _) = match &access {
            Access::Table(r) => (
                decoder
                    .physical_ids()
                    .into_iter()
                    .map(|id| key_ranges(id, r, unsigned))
                    .collect(),
                RECORD_PREFIX_LEN,
                None,
            ),
            Access::Index {
                index,
                columns,
                ranges,
            } => {
                let ids = if index.global {
                    vec![table.id]
                } else {
                    decoder.physical_ids()
                };
                let inputs = ids
                    .into_iter()
                    .map(|id| index_key_ranges(id, index.id, ranges))
                    .collect();
                (inputs, INDEX_PREFIX_LEN, Some(*columns))
            }
        };
        let desc = order == ScanOrder::Descending;
        // Partitions read in order are merged: each is a cursor of its own, with a share of
        // the page budget (every one holds a page while the merge runs).
        let (cursors, merge) = if order != ScanOrder::Unordered && inputs.len() > 1 {
            let n = inputs.len();
            let max = (SCAN_PAGE_MAX / n as u32).max(SCAN_PAGE_MIN_MERGED);
            let cursors = inputs
                .into_iter()
                .map(|r| Cursor::new(r, desc, max, rows))
                .collect();
            let unsigned = unsigned && lookup.is_none();
            (cursors, Some(Merge::new(n, desc, unsigned, prefix)))
        } else {
            let all = inputs.into_iter().flatten().collect();
            (vec![Cursor::new(all, desc, SCAN_PAGE_MAX, rows)], None)
        };
        Ok(Box::new(TableScan {
            reader: self.reader.clone(),
            decoder,
            ts: Ts(ts),
            cursors,
            merge,
            lookup,
            columns,
            table: format!("{}.{}", table.db, table.name),
            _hold: hold,
        }))
    }
}

/// Most rows of one page of a partition's cursor in a merge, however many partitions.
const SCAN_PAGE_MIN_MERGED: u32 = 64;

/// Key ranges of one scan, read page by page; the next page is read on the runtime while the
/// rows of the one before are decoded and sent.
struct Cursor {
    /// Rows in descending key order (each range read downwards from its end).
    desc: bool,
    /// Key ranges still to read, the next one last.
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    /// The read of the page that starts `pending`'s last range, if started.
    ahead: Option<crate::capture::snapshot::PageRead>,
    /// Rows to ask for in the next page.
    limit: u32,
    /// Most rows of a page.
    max: u32,
    /// Rows the statement still takes at most (its LIMIT), while it says: nothing is read
    /// ahead past them.
    left: Option<u64>,
}

impl Cursor {
    /// A cursor over `ranges` (ascending key order) for a statement that takes at most
    /// `wanted` rows.
    fn new(mut ranges: Vec<(Vec<u8>, Vec<u8>)>, desc: bool, max: u32, wanted: Option<u64>) -> Self {
        // The next range is the last: the lowest first upwards, the highest first downwards.
        if !desc {
            ranges.reverse();
        }
        let limit = match wanted {
            Some(w) => w.clamp(1, u64::from(max)) as u32,
            None => SCAN_PAGE.min(max),
        };
        Cursor {
            desc,
            pending: ranges,
            ahead: None,
            limit,
            max,
            left: wanted,
        }
    }

    fn start_next(&mut self, reader: &BlockingSnapshotReader, ts: Ts) {
        if let Some((start, end)) = self.pending.last() {
            let (start, end) = (start.clone(), end.clone());
            let limit = match self.left {
                Some(left) if left > 0 => self.limit.min(left.min(u64::from(u32::MAX)) as u32),
                _ => self.limit,
            };
            self.ahead = Some(if self.desc {
                reader.start_page_rev(start, end, ts, limit)
            } else {
                reader.start_page(start, end, ts, limit)
            });
        }
    }

    /// The next page (possibly empty), or `None` when every range is read.
    fn next_page(
        &mut self,
        reader: &BlockingSnapshotReader,
        ts: Ts,
        table: &str,
    ) -> Result<Option<Vec<Pair>>> {
        if self.ahead.is_none() {
            // Asked past the LIMIT (the WHERE dropped rows): read on as without one.
            if self.left == Some(0) {
                self.left = None;
            }
            self.start_next(reader, ts);
        }
        let Some(page) = self.ahead.take() else {
            return Ok(None);
        };
        let (start, end) = self.pending.pop().expect("a page read has its range");
        let (pairs, next) = reader.wait_page(page).map_err(|e| {
            SqlError::new(
                ER_UNKNOWN_ERROR,
                format!("reading {table} at ts {}: {e}", ts.0),
            )
        })?;
        let bytes: usize = pairs.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.limit = if bytes > SCAN_PAGE_BYTES {
            (self.limit / 2).max(1)
        } else {
            (self.limit * 2).min(self.max)
        };
        // What is left of the range: above the page going up, below it going down.
        if let Some(n) = next {
            self.pending
                .push(if self.desc { (start, n) } else { (n, end) });
        }
        // The next page is read while this one is decoded, unless the LIMIT is reached.
        self.left = self.left.map(|l| l.saturating_sub(pairs.len() as u64));
        if self.left != Some(0) {
            self.start_next(reader, ts);
        }
        Ok(Some(pairs))
    }
}

/// The pages of one table scan: one cursor, or one per partition merged in key order; for an
/// index, each page of entries followed by one batch read of their rows.
struct TableScan {
    reader: BlockingSnapshotReader,
    decoder: Arc<dyn RowDecoder>,
    ts: Ts,
    cursors: Vec<Cursor>,
    merge: Option<Merge>,
    /// Columns of the index read, when the cursors read index entries.
    lookup: Option<usize>,
    /// The columns the statement reads (`None`: all); the others are not decoded.
    columns: Option<Vec<bool>>,
    table: String,
    /// The scan's GC hold, released with it.
    _hold: ScanHold,
}

impl TableScan {
    fn error(&self, what: &str, e: impl std::fmt::Display) -> SqlError {
        SqlError::new(
            ER_UNKNOWN_ERROR,
            format!("{what} {} at ts {}: {e}", self.table, self.ts.0),
        )
    }

    /// The next pairs in order (possibly none), or `None` at the end.
    fn next_pairs(&mut self) -> Result<Option<Vec<Pair>>> {
        let Some(merge) = self.merge.as_mut() else {
            return self.cursors[0].next_page(&self.reader, self.ts, &self.table);
        };
        let mut out = Vec::new();
        loop {
            match merge.pop() {
                Pop::Pair(p) => {
                    out.push(p);
                    if out.len() >= SCAN_PAGE_MAX as usize {
                        return Ok(Some(out));
                    }
                }
                // What is merged so far goes first: a LIMIT may need no more.
                Pop::Need(_) if !out.is_empty() => return Ok(Some(out)),
                Pop::Need(i) => {
                    match self.cursors[i].next_page(&self.reader, self.ts, &self.table)? {
                        Some(p) => merge.push_page(i, p),
                        None => merge.finish(i),
                    }
                }
                Pop::Done => return Ok((!out.is_empty()).then_some(out)),
            }
        }
    }

    /// The rows index `entries` point at, in the entries' order.
    fn look_up(&self, entries: &[Pair], columns: usize) -> Result<Vec<Pair>> {
        let keys = index_lookup::record_keys(entries, columns)
            .map_err(|e| self.error("reading an index entry of", e))?;
        let fetched = self
            .reader
            .batch_get(&index_lookup::sorted_unique(&keys), self.ts)
            .map_err(|e| self.error("reading the rows of", e))?;
        index_lookup::in_order(keys, &fetched).map_err(|k| {
            self.error(
                "an index entry points at no row (the index and the table disagree) in",
                format!("{k:?}"),
            )
        })
    }
}

impl RowStream for TableScan {
    fn next_batch(
        &mut self,
        out: &mut Vec<Vec<Value>>,
        spare: &mut Vec<Vec<Value>>,
    ) -> Result<bool> {
        loop {
            let Some(mut pairs) = self.next_pairs()? else {
                return Ok(false);
            };
            if pairs.is_empty() {
                continue;
            }
            if let Some(columns) = self.lookup {
                pairs = self.look_up(&pairs, columns)?;
            }
            out.reserve(pairs.len());
            for (k, v) in &pairs {
                // Every cell is overwritten by the decoder.
                let mut row = spare.pop().unwrap_or_default();
                self.decoder
                    .decode(k, v, self.columns.as_deref(), &mut row)
                    .map_err(|e| self.error("decoding a row of", e))?;
                out.push(row);
            }
            return Ok(true);
        }
    }
}

/// How long PD keeps the snapshot hold if it is not refreshed (the process died).
const HOLD_TTL_SECS: i64 = 600;
/// How often a held snapshot's service safe point is refreshed.
const HOLD_REFRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// Holds PD's GC at the oldest snapshot an SQL session reads at, with a service safe point of
/// its own (`service_id`): the capture's own safe point moves on with the checkpoint, a
/// consistent snapshot taken earlier must stay readable while its session lives. Released when
/// no session holds one.
pub async fn hold_snapshots(
    pd: PdClient,
    service_id: String,
    mut oldest: tokio::sync::watch::Receiver<Option<u64>>,
    cancel: tokio_util::sync::CancellationToken,
) {
    let mut held = None;
    loop {
        let want = *oldest.borrow_and_update();
        let result = match want {
            Some(ts) => pd
                .update_service_gc_safe_point(&service_id, HOLD_TTL_SECS, Ts(ts.saturating_sub(1)))
                .await
                .map(|min| {
                    if min.0 > ts.saturating_sub(1) {
                        tracing::warn!(
                            ts,
                            min_safe_point = min.0,
                            "a snapshot is older than PD's GC safe point"
                        );
                    }
                }),
            None if held.is_some() => pd
                .update_service_gc_safe_point(&service_id, 0, Ts::MAX)
                .await
                .map(|_| ()),
            None => Ok(()),
        };
        match result {
            Ok(()) => held = want,
            Err(e) => tracing::warn!(error = %e, "holding the GC safe point for SQL snapshots"),
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            r = oldest.changed() => if r.is_err() { break },
            _ = tokio::time::sleep(HOLD_REFRESH), if held.is_some() => {}
        }
    }
    if held.is_some() {
        let _ = pd
            .update_service_gc_safe_point(&service_id, 0, Ts::MAX)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_ranges_come_in_value_order() {
        let id = 7;
        let k = |h: i64| record_key(id, h);
        assert_eq!(
            key_ranges(id, &KeyRanges::Int(vec![(5, 9)]), false),
            vec![(k(5), k(10))]
        );
        let top = u64::MAX as i128;
        let r = key_ranges(id, &KeyRanges::Int(vec![(10, top)]), true);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0], (k(10), record_span(id).1));
        assert_eq!(r[1], (k(i64::MIN), k(0)));
        let whole = key_ranges(id, &KeyRanges::All, true);
        assert_eq!(whole[0].0, k(0));
        assert_eq!(whole[1].1, k(0));
    }
}

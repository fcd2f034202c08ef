//! Snapshot reads of TiDB tables for SQL clients ([`SnapshotSource`]): the record keys of a
//! table (each partition's) scanned at the statement's timestamp through the capture's TiKV
//! reader, page by page, decoded with the table version of the catalog the statement reads.
//!
//! Integer handles bound the scanned key ranges. Keys order handles as signed 64-bit numbers,
//! so an `UNSIGNED` key's values from 2^63 up sort first: ranges over them are split, and
//! ascending order is served by scanning `[0, 2^63)` before `[2^63, 2^64)`.

use std::sync::Arc;

use tibinlog_protocol::value::Value;
use tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR;

use super::scan_holds::{ScanHold, ScanHolds};
use crate::capture::pd::PdClient;
use crate::capture::snapshot::BlockingSnapshotReader;
use crate::model::Ts;
use crate::mounter::MountedTable;
use crate::sql::catalog::{RowDecoder, TableMeta};
use crate::sql::error::{Result, SqlError};
use crate::sql::exec::RowStream;
use crate::sql::plan::SnapshotSource;
use crate::tidb::key::{decode_record_key, encode_record_key, record_span, Handle};

/// Rows of the first TiKV page of a snapshot scan; the pages that follow double up to
/// [`SCAN_PAGE_MAX`] while they stay under [`SCAN_PAGE_BYTES`] (a `LIMIT 1` reads little, a
/// whole table takes few round trips, wide rows keep pages small).
pub const SCAN_PAGE: u32 = 256;
/// Most rows of one page. Every buffer a page passes through (TiKV's response, the received
/// message, the decoded pairs) scales with it; kept under a megabyte or so, they are recycled
/// by the allocator instead of each holding on to memory of its own (measured: a 10M-row
/// `SELECT *` grew the resident set by 76 MB with pages of 16,384 rows, 29 MB with 4,096, at
/// no more CPU per row).
pub const SCAN_PAGE_MAX: u32 = 4_096;
/// Bytes of a page above which the next one is halved.
pub const SCAN_PAGE_BYTES: usize = 1 << 20;

/// Row decoding with a mounted table version.
#[derive(Debug)]
pub struct MountedRows(pub Arc<MountedTable>);

impl RowDecoder for MountedRows {
    fn physical_ids(&self) -> Vec<i64> {
        self.0.info.physical_ids()
    }

    fn decode(
        &self,
        key: &[u8],
        value: &[u8],
        out: &mut Vec<Value>,
    ) -> std::result::Result<(), String> {
        let (_, handle) = decode_record_key(key).map_err(|e| e.to_string())?;
        self.0
            .decode_row(value, Some(&handle), out)
            .map_err(|e| e.to_string())
    }

    fn refused(&self) -> Option<String> {
        let t = &self.0;
        t.uncomputable.as_ref().map(|u| {
            format!(
                "virtual generated column {}.{}.{} cannot be computed ({} in `{}`)",
                t.def.schema, t.def.table, u.column, u.reason, u.expression
            )
        })
    }
}

/// [`SnapshotSource`] over the capture's TiKV reader.
#[derive(Debug, Clone)]
pub struct TableReader {
    reader: BlockingSnapshotReader,
    pd: PdClient,
    handle: tokio::runtime::Handle,
    /// Every scan holds its timestamp here while it runs.
    holds: ScanHolds,
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
            pd,
            handle,
            holds,
        }
    }

    /// Refuses a read below PD's GC safe point, as TiDB does: the history may be gone.
    fn check_gc(&self, ts: u64) -> Result<()> {
        let pd = self.pd.clone();
        let safe = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.handle.block_on(pd.get_gc_safe_point()))
            }
            _ => self.handle.block_on(pd.get_gc_safe_point()),
        }
        .map_err(|e| SqlError::new(ER_UNKNOWN_ERROR, format!("reading PD's GC safe point: {e}")))?;
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

/// Raw key ranges `[start, end)` of one physical table for inclusive handle `ranges` in the
/// order the rows must come (`None`: the whole table).
fn key_ranges(
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

impl SnapshotSource for TableReader {
    fn scan(
        &self,
        table: &TableMeta,
        ts: u64,
        ranges: Option<Vec<(i128, i128)>>,
        desc: bool,
    ) -> Result<Box<dyn RowStream>> {
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
        let mut pending = Vec::new();
        for id in decoder.physical_ids() {
            pending.extend(key_ranges(id, &ranges, unsigned));
        }
        // The next range is the last: the lowest first upwards, the highest first downwards.
        if !desc {
            pending.reverse();
        }
        Ok(Box::new(TableScan {
            desc,
            reader: self.reader.clone(),
            decoder,
            ts: Ts(ts),
            pending,
            ahead: None,
            limit: SCAN_PAGE,
            table: format!("{}.{}", table.db, table.name),
            _hold: hold,
        }))
    }
}

/// The pages of one table scan. The next page of the current range is read on the runtime
/// while the rows of the one before are decoded and sent.
struct TableScan {
    /// Rows in descending key order (each range read downwards from its end).
    desc: bool,
    reader: BlockingSnapshotReader,
    decoder: Arc<dyn RowDecoder>,
    ts: Ts,
    /// Key ranges still to read, the next one last.
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    /// The read of the page that starts `pending`'s last range, if started.
    ahead: Option<crate::capture::snapshot::PageRead>,
    /// Rows to ask for in the next page.
    limit: u32,
    table: String,
    /// The scan's GC hold, released with it.
    _hold: ScanHold,
}

impl TableScan {
    fn start_next(&mut self) {
        if let Some((start, end)) = self.pending.last() {
            let (start, end) = (start.clone(), end.clone());
            self.ahead = Some(if self.desc {
                self.reader.start_page_rev(start, end, self.ts, self.limit)
            } else {
                self.reader.start_page(start, end, self.ts, self.limit)
            });
        }
    }
}

impl RowStream for TableScan {
    fn next_batch(
        &mut self,
        out: &mut Vec<Vec<Value>>,
        spare: &mut Vec<Vec<Value>>,
    ) -> Result<bool> {
        loop {
            if self.ahead.is_none() {
                self.start_next();
            }
            let Some(page) = self.ahead.take() else {
                return Ok(false);
            };
            let (start, end) = self.pending.pop().expect("a page read has its range");
            let (pairs, next) = self.reader.wait_page(page).map_err(|e| {
                SqlError::new(
                    ER_UNKNOWN_ERROR,
                    format!("reading {} at ts {}: {e}", self.table, self.ts.0),
                )
            })?;
            let bytes: usize = pairs.iter().map(|(k, v)| k.len() + v.len()).sum();
            self.limit = if bytes > SCAN_PAGE_BYTES {
                (self.limit / 2).max(1)
            } else {
                (self.limit * 2).min(SCAN_PAGE_MAX)
            };
            // What is left of the range: above the page going up, below it going down.
            if let Some(n) = next {
                self.pending
                    .push(if self.desc { (start, n) } else { (n, end) });
            }
            // The next page is read while this one is decoded.
            self.start_next();
            if pairs.is_empty() {
                continue;
            }
            out.reserve(pairs.len());
            for (k, v) in &pairs {
                // Every cell is overwritten by the decoder.
                let mut row = spare.pop().unwrap_or_default();
                self.decoder.decode(k, v, &mut row).map_err(|e| {
                    SqlError::new(
                        ER_UNKNOWN_ERROR,
                        format!("decoding a row of {} at ts {}: {e}", self.table, self.ts.0),
                    )
                })?;
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
            key_ranges(id, &Some(vec![(5, 9)]), false),
            vec![(k(5), k(10))]
        );
        let top = u64::MAX as i128;
        let r = key_ranges(id, &Some(vec![(10, top)]), true);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0], (k(10), record_span(id).1));
        assert_eq!(r[1], (k(i64::MIN), k(0)));
        let whole = key_ranges(id, &None, true);
        assert_eq!(whole[0].0, k(0));
        assert_eq!(whole[1].1, k(0));
    }
}

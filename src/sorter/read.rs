//! Read path: everything with `commit_ts <= resolved ts`, in binlog order, in bounded chunks.
//!
//! ```text
//!  writer thread ──advance_resolved(ts)──► ReaderCtl ◄──ack(pos)── consumer (SorterReader)
//!                                             │                        ▲
//!                                   reader thread: ChunkIter           │ bounded channel
//!                                   over [pos, ts+1) ──chunks, then Resolved(ts)──┘
//! ```
//!
//! # Order
//! Keys sort as `(commit_ts, start_ts, table, op, raw key)` (see `key.rs`), so one forward scan
//! yields transactions in `(commit_ts, start_ts)` order, each transaction's rows grouped by
//! table with deletes before puts. A transaction is never merged with another one sharing its
//! commit_ts: chunks never cross the 16-byte `(commit_ts, start_ts)` prefix.
//!
//! # Chunks
//! A chunk holds whole rows of one transaction, closed once it reaches `max_chunk_bytes`
//! (encoded key + value bytes, so a chunk overshoots by at most one row). `first`/`last` mark
//! the transaction's boundaries; a transaction that fits is one chunk with both set. So a
//! 2 GB transaction streams through in bounded memory and is never held whole.
//!
//! # Resumption
//! Every chunk carries `end`, the [`ReadPosition`] just after its last key. A read started at
//! that position continues with the next row, without duplicates, even in the middle of a
//! transaction (the next chunk then has `first == false`). The consumer hands positions back
//! with `ack` once it has durably used the rows; `gc.rs` deletes everything before them.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rocksdb::{DBRawIteratorWithThreadMode, DB};
use tokio::sync::mpsc;
use tracing::debug;

use super::db::SortDb;
use super::error::{Result, SorterError};
use super::key::{
    cmp_row_key, decode_row, encode_key_into, encoded_len, successor, txn_prefix, upper_bound,
    KEY_HEADER_LEN, TXN_PREFIX_LEN,
};
use super::mem::Run;
use super::metrics::MetricsSnapshot;
use crate::model::{RawRow, ResolvedTs, Ts};

/// Where a read starts: the smallest stored key not yet emitted. Ordered like the keys.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ReadPosition {
    next: Vec<u8>,
}

impl std::fmt::Debug for ReadPosition {
    /// Shows the transaction, not the user's key bytes (user keys and values stay out of logs).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ts = |r: std::ops::Range<usize>| {
            self.next
                .get(r)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
        };
        f.debug_struct("ReadPosition")
            .field("commit_ts", &ts(0..8))
            .field("start_ts", &ts(8..16))
            .field("len", &self.next.len())
            .finish()
    }
}

impl ReadPosition {
    /// Before everything.
    pub fn start() -> ReadPosition {
        ReadPosition::default()
    }

    /// Just after every key with `commit_ts <= ts`: where a read continues once everything up
    /// to the resolved ts `ts` has been emitted. (`u64::MAX` is not a TSO TiKV hands out; it
    /// maps to the start of commit_ts `u64::MAX`.)
    pub fn after_commit_ts(ts: Ts) -> ReadPosition {
        let next = match upper_bound(ts) {
            Some(b) => b.to_vec(),
            None => u64::MAX.to_be_bytes().to_vec(),
        };
        ReadPosition { next }
    }

    /// Just after the whole transaction `(commit_ts, start_ts)`.
    pub fn after_txn(commit_ts: Ts, start_ts: Ts) -> ReadPosition {
        let next = match start_ts.0.checked_add(1) {
            Some(s) => txn_prefix(commit_ts, Ts(s)).to_vec(),
            None => ReadPosition::after_commit_ts(commit_ts).next,
        };
        ReadPosition { next }
    }

    /// Just after the stored key `key`.
    pub(crate) fn after_key(key: &[u8]) -> ReadPosition {
        ReadPosition {
            next: successor(key),
        }
    }

    /// The position as a key: every stored key below it has been emitted.
    pub fn as_key(&self) -> &[u8] {
        &self.next
    }
}

/// Rows of one transaction, in order: the whole transaction or a bounded piece of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnChunk {
    pub start_ts: Ts,
    pub commit_ts: Ts,
    /// Grouped by table, deletes before puts within a table, then by raw key.
    pub rows: Vec<RawRow>,
    /// This chunk opens the transaction (false when it continues one, also after a resume).
    pub first: bool,
    /// This chunk closes the transaction.
    pub last: bool,
    /// Where a read resumes after this chunk; what the consumer acknowledges.
    pub end: ReadPosition,
}

/// One whole transaction. Only from [`TxnIter`], which holds it whole: use chunks for
/// transactions of unbounded size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortedTxn {
    pub start_ts: Ts,
    pub commit_ts: Ts,
    pub rows: Vec<RawRow>,
    pub end: ReadPosition,
}

/// What the async reader yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SorterOutput {
    /// The next piece of the next transaction.
    Chunk(TxnChunk),
    /// Every transaction with `commit_ts <= ts` has been yielded: the checkpoint may move to
    /// `ts` once the consumer has written them.
    Resolved(ResolvedTs),
}

impl SorterOutput {
    /// The position to acknowledge once this output is durably used.
    pub fn position(&self) -> ReadPosition {
        match self {
            SorterOutput::Chunk(c) => c.end.clone(),
            SorterOutput::Resolved(ResolvedTs(ts)) => ReadPosition::after_commit_ts(*ts),
        }
    }
}

/// An ordered scan of `[from, resolved + 1)` yielding [`TxnChunk`]s. Borrows the DB. Merges
/// the RocksDB scan with the memory tier's rows handed over for the same range, if any.
pub struct ChunkIter<'a> {
    it: DBRawIteratorWithThreadMode<'a, DB>,
    /// Memory-tier rows, in key order (runs arrive in ts order, each sorted).
    mem: std::iter::Peekable<std::vec::IntoIter<RawRow>>,
    /// Reused buffer for a memory row's encoded key.
    scratch: Vec<u8>,
    db: &'a SortDb,
    max_chunk_bytes: usize,
    /// Prefix of the transaction the previous chunk left open.
    open_txn: Option<[u8; TXN_PREFIX_LEN]>,
    done: bool,
}

impl SortDb {
    /// Scans every row with `commit_ts <= resolved` from `from` on, in chunks of about
    /// `max_chunk_bytes` (at least one row each). Blocking.
    pub fn read_up_to(
        &self,
        resolved: Ts,
        from: &ReadPosition,
        max_chunk_bytes: usize,
    ) -> ChunkIter<'_> {
        self.read_merged(resolved, from, max_chunk_bytes, Vec::new())
    }

    /// [`Self::read_up_to`] merged with `mem`: rows in key order, all with `commit_ts <=
    /// resolved` and after `from`. A row in both (TiKV sent it twice, once spilled) comes out
    /// once.
    pub(crate) fn read_merged(
        &self,
        resolved: Ts,
        from: &ReadPosition,
        max_chunk_bytes: usize,
        mem: Vec<RawRow>,
    ) -> ChunkIter<'_> {
        let upper = upper_bound(resolved).map(|b| b.to_vec());
        let mut it = self.db.raw_iterator_opt(SortDb::scan_options(upper));
        it.seek(from.as_key());
        // A position inside a transaction (after one of its rows) resumes that transaction.
        let open_txn = (from.next.len() > KEY_HEADER_LEN)
            .then(|| from.next.get(..TXN_PREFIX_LEN))
            .flatten()
            .and_then(|p| <[u8; TXN_PREFIX_LEN]>::try_from(p).ok());
        ChunkIter {
            it,
            mem: mem.into_iter().peekable(),
            scratch: Vec::with_capacity(64),
            db: self,
            max_chunk_bytes: max_chunk_bytes.max(1),
            open_txn,
            done: false,
        }
    }

    /// Whole transactions with `commit_ts <= resolved` from `from` on. Holds each transaction
    /// whole: for tests, tools and callers that know their transactions are small.
    pub fn read_txns_up_to(&self, resolved: Ts, from: &ReadPosition) -> TxnIter<'_> {
        TxnIter(self.read_up_to(resolved, from, usize::MAX))
    }
}

impl ChunkIter<'_> {
    fn fail(&mut self, e: SorterError) -> Option<Result<TxnChunk>> {
        self.done = true;
        Some(Err(e))
    }

    /// Ends the scan at an invalid iterator: a RocksDB error or the end of the range.
    fn status(&mut self) -> Result<()> {
        self.it.status().map_err(SorterError::from)
    }
}

/// Which source holds the next row of a merged scan.
enum Src {
    Rocks,
    Mem,
    End,
}

impl ChunkIter<'_> {
    /// The source of the smallest next row. Of a row present in both, skips the RocksDB copy.
    fn pick(&mut self) -> Src {
        loop {
            let Some(row) = self.mem.peek() else {
                return if self.it.valid() {
                    Src::Rocks
                } else {
                    Src::End
                };
            };
            let Some(k) = self.it.key() else {
                return Src::Mem;
            };
            match cmp_row_key(row, k, &mut self.scratch) {
                std::cmp::Ordering::Less => return Src::Mem,
                std::cmp::Ordering::Greater => return Src::Rocks,
                std::cmp::Ordering::Equal => self.it.next(),
            }
        }
    }

    /// The transaction prefix of the next row, if any (`Err` for a corrupt RocksDB key).
    fn next_prefix(&mut self) -> Option<Result<[u8; TXN_PREFIX_LEN]>> {
        match self.pick() {
            Src::End => None,
            Src::Mem => self
                .mem
                .peek()
                .map(|r| Ok(txn_prefix(r.commit_ts, r.start_ts))),
            Src::Rocks => {
                let k = self.it.key()?;
                Some(
                    k.get(..TXN_PREFIX_LEN)
                        .and_then(|p| p.try_into().ok())
                        .ok_or(SorterError::Corrupt {
                            what: "key",
                            len: k.len(),
                            detail: "shorter than the transaction prefix",
                        }),
                )
            }
        }
    }
}

impl Iterator for ChunkIter<'_> {
    type Item = Result<TxnChunk>;

    fn next(&mut self) -> Option<Result<TxnChunk>> {
        if self.done {
            return None;
        }
        let prefix: [u8; TXN_PREFIX_LEN] = match self.next_prefix() {
            None => {
                self.done = true;
                return self.status().err().map(Err);
            }
            Some(Err(e)) => return self.fail(e),
            Some(Ok(p)) => p,
        };
        let mut rows = Vec::new();
        let mut bytes = 0usize;
        loop {
            let row = match self.pick() {
                Src::End => break,
                Src::Mem => {
                    if self
                        .mem
                        .peek()
                        .is_none_or(|r| txn_prefix(r.commit_ts, r.start_ts) != prefix)
                    {
                        break;
                    }
                    match self.mem.next() {
                        Some(r) => r,
                        None => break,
                    }
                }
                Src::Rocks => {
                    let (Some(k), Some(v)) = (self.it.key(), self.it.value()) else {
                        break;
                    };
                    if !k.starts_with(&prefix) {
                        break;
                    }
                    let row = match decode_row(k, v) {
                        Ok(r) => r,
                        Err(e) => return self.fail(e),
                    };
                    self.it.next();
                    row
                }
            };
            bytes += encoded_len(&row);
            rows.push(row);
            if bytes >= self.max_chunk_bytes {
                break;
            }
        }
        if !self.it.valid() {
            if let Err(e) = self.status() {
                return self.fail(e);
            }
        }
        let closes_txn = match self.next_prefix() {
            None => true,
            Some(Ok(p)) => p != prefix,
            // The next call reports it.
            Some(Err(_)) => true,
        };
        let Some(last_row) = rows.last() else {
            // The loop always takes the row the prefix came from.
            debug_assert!(false, "empty chunk");
            return self.fail(SorterError::Closed("reader"));
        };
        let mut last_key = Vec::with_capacity(KEY_HEADER_LEN + last_row.key.len());
        encode_key_into(last_row, &mut last_key);
        let first = self.open_txn != Some(prefix);
        self.open_txn = (!closes_txn).then_some(prefix);
        let m = &self.db.metrics;
        m.read_rows.fetch_add(rows.len() as u64, Relaxed);
        m.read_chunks.fetch_add(1, Relaxed);
        Some(Ok(TxnChunk {
            start_ts: last_row.start_ts,
            commit_ts: last_row.commit_ts,
            rows,
            first,
            last: closes_txn,
            end: ReadPosition::after_key(&last_key),
        }))
    }
}

/// Whole transactions, from a [`ChunkIter`] with no chunk bound.
pub struct TxnIter<'a>(ChunkIter<'a>);

impl Iterator for TxnIter<'_> {
    type Item = Result<SortedTxn>;

    fn next(&mut self) -> Option<Result<SortedTxn>> {
        let mut txn: Option<SortedTxn> = None;
        loop {
            let c = match self.0.next()? {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            let t = txn.get_or_insert_with(|| SortedTxn {
                start_ts: c.start_ts,
                commit_ts: c.commit_ts,
                rows: Vec::new(),
                end: ReadPosition::start(),
            });
            t.rows.extend(c.rows);
            t.end = c.end;
            if c.last {
                return txn.map(Ok);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The async facade: a reader thread fed by the writer thread's resolved ts and the consumer's
// acknowledgements.

/// Shared between the writer thread, the reader thread and [`SorterReader`].
#[derive(Debug, Default)]
pub(crate) struct ReaderCtl {
    state: Mutex<CtlState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct CtlState {
    /// Applied by the writer: everything with commit_ts <= resolved is in RocksDB or `runs`.
    resolved: Ts,
    /// Memory-tier runs handed over with resolved ts, oldest first, not yet taken.
    runs: Vec<Run>,
    /// Bytes of runs handed over and not yet fully emitted (taken or not).
    run_bytes: usize,
    /// The newest acknowledged position not yet collected.
    ack: Option<ReadPosition>,
    writer_done: bool,
    reader_gone: bool,
    error: Option<SorterError>,
}

/// What woke the reader thread.
struct Wake {
    resolved: Ts,
    runs: Vec<Run>,
    ack: Option<ReadPosition>,
    writer_done: bool,
    reader_gone: bool,
    error: Option<SorterError>,
}

impl ReaderCtl {
    fn lock(&self) -> MutexGuard<'_, CtlState> {
        // A panic elsewhere while holding this lock leaves plain data behind: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut CtlState)) {
        f(&mut self.lock());
        self.cv.notify_all();
    }

    pub(crate) fn advance_resolved(&self, ts: Ts) {
        self.update(|s| s.resolved = s.resolved.max(ts));
    }

    /// Advances to `run.upto` with the memory rows it covers.
    pub(crate) fn advance_resolved_with(&self, run: Run) {
        self.update(|s| {
            s.resolved = s.resolved.max(run.upto);
            s.run_bytes += run.bytes;
            s.runs.push(run);
        });
    }

    /// Bytes of memory runs the reader has not finished with.
    pub(crate) fn waiting_run_bytes(&self) -> usize {
        self.lock().run_bytes
    }

    /// The reader emitted runs of `bytes`.
    fn runs_done(&self, bytes: usize) {
        let mut s = self.lock();
        s.run_bytes = s.run_bytes.saturating_sub(bytes);
    }

    pub(crate) fn fail(&self, e: SorterError) {
        self.update(|s| {
            s.error.get_or_insert(e);
        });
    }

    pub(crate) fn writer_done(&self) {
        self.update(|s| s.writer_done = true);
    }

    fn ack(&self, pos: ReadPosition) {
        self.update(|s| {
            if s.ack.as_ref().is_none_or(|a| *a < pos) {
                s.ack = Some(pos);
            }
        });
    }

    fn reader_gone(&self) {
        self.update(|s| s.reader_gone = true);
    }

    fn take_ack(&self) -> Option<ReadPosition> {
        self.lock().ack.take()
    }

    /// Blocks until there is something to do past `emitted`.
    fn wait(&self, emitted: Ts) -> Wake {
        let mut s = self.lock();
        while s.resolved <= emitted
            && s.ack.is_none()
            && !s.writer_done
            && !s.reader_gone
            && s.error.is_none()
        {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        Wake {
            resolved: s.resolved,
            runs: std::mem::take(&mut s.runs),
            ack: s.ack.take(),
            writer_done: s.writer_done,
            reader_gone: s.reader_gone,
            error: s.error.take(),
        }
    }
}

/// The async receiving half of the sorter. Dropping it stops the reader thread.
#[derive(Debug)]
pub struct SorterReader {
    pub(crate) rx: mpsc::Receiver<Vec<Result<SorterOutput>>>,
    /// The rest of the last batch received.
    pub(crate) pending: std::collections::VecDeque<Result<SorterOutput>>,
    pub(crate) ctl: Arc<ReaderCtl>,
    pub(crate) db: SortDb,
    pub(crate) threads: super::SorterThreads,
}

impl SorterReader {
    /// The sorter's threads, to wait for once both halves are dropped.
    pub fn threads(&self) -> super::SorterThreads {
        self.threads.clone()
    }

    /// The next chunk or resolved marker. `None` once the writer is dropped and everything up
    /// to its last resolved ts has been yielded. After an `Err` the sorter is stopped.
    pub async fn next(&mut self) -> Option<Result<SorterOutput>> {
        loop {
            if let Some(out) = self.pending.pop_front() {
                return Some(out);
            }
            self.pending = self.rx.recv().await?.into();
        }
    }

    /// Acknowledges that everything before `pos` has been durably used: GC may delete it.
    /// Non-blocking; acknowledgements are coalesced and may arrive in any order.
    pub fn ack(&self, pos: ReadPosition) {
        self.ctl.ack(pos);
    }

    /// The sorter's counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.db.metrics.snapshot()
    }

    /// Stored keys (a full scan; for tests and diagnostics). Blocking: use `spawn_blocking`.
    pub fn count_keys_blocking(&self) -> Result<usize> {
        self.db.count_keys()
    }
}

impl Drop for SorterReader {
    fn drop(&mut self) {
        self.ctl.reader_gone();
    }
}

/// The reader thread's loop.
/// Least time between two range deletions: each one is a range tombstone that every new
/// iterator must process until a flush, so one per resolved tick would make an idle reader
/// spend ever more CPU per tick.
const GC_INTERVAL: Duration = Duration::from_secs(1);
/// Range tombstones written before the memtable holding them is flushed (in the background),
/// so they never pile up in a memtable that little data fills.
const GC_FLUSH_EVERY: u32 = 32;

/// Turns acknowledgements into range deletions: only over keys that were really emitted since
/// the last one, at most one per [`GC_INTERVAL`] unless forced.
struct Collector {
    db: SortDb,
    /// Everything before this has been deleted.
    collected: ReadPosition,
    /// The newest acknowledgement not yet applied.
    pending: ReadPosition,
    /// The end of the last chunk emitted.
    emitted: ReadPosition,
    last: Option<Instant>,
    since_flush: u32,
}

impl Collector {
    fn new(db: SortDb) -> Collector {
        Collector {
            db,
            collected: ReadPosition::start(),
            pending: ReadPosition::start(),
            emitted: ReadPosition::start(),
            last: None,
            since_flush: 0,
        }
    }

    fn emitted_to(&mut self, end: &ReadPosition) {
        if *end > self.emitted {
            self.emitted = end.clone();
        }
    }

    fn collect(&mut self, ack: Option<ReadPosition>, force: bool) -> Result<()> {
        if let Some(a) = ack {
            if a > self.pending {
                self.pending = a;
            }
        }
        // Nothing emitted lies in [collected, pending): a tombstone would delete nothing.
        if self.pending <= self.collected || self.emitted <= self.collected {
            return Ok(());
        }
        if !force && self.last.is_some_and(|t| t.elapsed() < GC_INTERVAL) {
            return Ok(());
        }
        self.db.gc_up_to(&self.pending)?;
        self.collected = self.pending.clone();
        self.last = Some(Instant::now());
        self.since_flush += 1;
        if self.since_flush >= GC_FLUSH_EVERY {
            self.since_flush = 0;
            self.db.flush_in_background()?;
        }
        Ok(())
    }
}

/// The reader's outputs on their way to the consumer, sent in batches: one channel message per
/// about `limit` bytes of rows or per resolved step, so a stream of small transactions does not
/// cost two thread wake-ups per transaction. A batch never holds more than `limit` bytes of
/// rows unless a single chunk does.
struct Outbox {
    out: mpsc::Sender<Vec<Result<SorterOutput>>>,
    batch: Vec<Result<SorterOutput>>,
    bytes: usize,
    limit: usize,
}

impl Outbox {
    /// Queues a chunk; `false` once the consumer is gone.
    fn chunk(&mut self, chunk: TxnChunk) -> bool {
        let bytes: usize = chunk.rows.iter().map(encoded_len).sum();
        if !self.batch.is_empty() && self.bytes + bytes > self.limit && !self.flush() {
            return false;
        }
        self.bytes += bytes;
        self.batch.push(Ok(SorterOutput::Chunk(chunk)));
        self.bytes < self.limit || self.flush()
    }

    /// Queues a resolved marker or an error and sends the batch.
    fn last(&mut self, item: Result<SorterOutput>) -> bool {
        self.batch.push(item);
        self.flush()
    }

    fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        self.bytes = 0;
        self.out
            .blocking_send(std::mem::take(&mut self.batch))
            .is_ok()
    }
}

pub(crate) fn run_reader(
    db: SortDb,
    ctl: Arc<ReaderCtl>,
    out: mpsc::Sender<Vec<Result<SorterOutput>>>,
    max_chunk_bytes: usize,
) {
    let mut pos = ReadPosition::start();
    let mut emitted = Ts::ZERO;
    let mut gc = Collector::new(db.clone());
    let mut outbox = Outbox {
        out,
        batch: Vec::new(),
        bytes: 0,
        limit: max_chunk_bytes,
    };
    loop {
        let wake = ctl.wait(emitted);
        if wake.reader_gone {
            break;
        }
        if let Some(e) = wake.error {
            outbox.last(Err(e));
            break;
        }
        if let Err(e) = gc.collect(wake.ack, false) {
            outbox.last(Err(e));
            break;
        }
        if wake.resolved > emitted {
            let run_bytes: usize = wake.runs.iter().map(|r| r.bytes).sum();
            let mut mem = Vec::new();
            for run in wake.runs {
                if mem.is_empty() {
                    mem = run.rows;
                } else {
                    mem.extend(run.rows);
                }
            }
            for chunk in db.read_merged(wake.resolved, &pos, max_chunk_bytes, mem) {
                let chunk = match chunk {
                    Ok(c) => c,
                    Err(e) => {
                        outbox.last(Err(e));
                        return;
                    }
                };
                pos = chunk.end.clone();
                gc.emitted_to(&pos);
                if !outbox.chunk(chunk) {
                    return;
                }
                if let Err(e) = gc.collect(ctl.take_ack(), false) {
                    outbox.last(Err(e));
                    return;
                }
            }
            ctl.runs_done(run_bytes);
            emitted = wake.resolved;
            pos = pos.max(ReadPosition::after_commit_ts(emitted));
            if !outbox.last(Ok(SorterOutput::Resolved(ResolvedTs(emitted)))) {
                return;
            }
        } else if wake.writer_done {
            break;
        }
    }
    if let Err(e) = gc.collect(ctl.take_ack(), true) {
        outbox.last(Err(e));
    }
    debug!(emitted_ts = emitted.0, "sorter reader stopped");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

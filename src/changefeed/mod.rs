//! The capture core wired end to end: TiKV change streams → transactions in binlog order.
//!
//! ```text
//!  PD ─┐                      ingress task                     sorter (RocksDB)            egress task
//!  TiKV stores ─► Puller ─► EventReceiver ─► record rows only ─► writer thread ─► reader thread ─► Mounter ─► ChangeEvent
//!                 (matcher, frontier)        batched, quota        ▲                   │ chunks ≤ resolved ts
//!                                                                  └── back-pressure ──┘ (bounded channels)
//! ```
//!
//! What comes out ([`Changefeed::next`]) is, in ascending `(commit_ts, start_ts)`:
//! * [`ChangeEvent::Rows`]: a piece of one transaction's typed row changes. A transaction that
//!   fits in a sorter chunk is one piece with `first` and `last` set; a larger one is streamed
//!   in pieces, never held whole. Rows are grouped by table, deletes before puts.
//! * [`ChangeEvent::Ddl`]: a finished DDL job of a table inside the filter, at its commit ts.
//! * [`ChangeEvent::Resolved`]: every transaction with `commit_ts <= ts` has been yielded.
//!
//! The consumer calls [`Changefeed::advance_checkpoint`] with a resolved ts once everything up
//! to it is durably written. That frees sorter space, lets the schema store drop old versions
//! and moves the PD service GC safe point to `checkpoint − 1`.
//! A new changefeed started with `start_ts = checkpoint` yields exactly the transactions with
//! `commit_ts > checkpoint`: nothing lost, nothing doubled.
//!
//! # What is captured (filter push-down)
//! Only the record spans of the tables the filter includes (every partition's), and those of
//! the DDL job tables, which the schema follows. A finished DDL job that leaves tables behind
//! (creates, truncates, partitions, renames, exchanges, recovers) is seen by the puller's
//! [`SpanHook`] as its row passes: their record spans are captured from the job's commit ts
//! on, before the watermark can pass it, so no row of a new table is missed. Jobs whose names
//! the filter rejects are skipped; where the job does not say the final names (renames,
//! exchanges, recoveries) the tables are captured anyway and the mounter decides. Once the
//! mounter has applied a DDL, spans of tables no longer included are removed (unless a later
//! job asked for them again). Index keys never reach the sorter; rows of an excluded table
//! captured for a while are dropped by the mounter.
//! [`ChangefeedConfig::push_down`] off captures the whole table key space `[t, u)` instead.

pub mod supervisor;

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::capture::gc_keeper::{GcError, GcKeeper, GcKeeperConfig};
use crate::capture::output::EventReceiver;
use crate::capture::pd::{PdClient, PdConfig, PdError};
use crate::capture::puller::{
    Puller, PullerConfig, PullerError, PullerHandle, SpanHook, SpanRemover,
};
use crate::capture::snapshot::{BlockingSnapshotReader, SnapshotConfig, SnapshotReader};
use crate::capture::span::table_record_span;
use crate::model::{RawKvEvent, RawRow, ResolvedTs, Span, Ts};
use crate::mounter::ddl::{is_ddl_key, JobDecoder};
use crate::mounter::{Mounted, Mounter, MounterError, SchemaStore, TableFilter};
use crate::sorter::{self, ReadPosition, SorterError, SorterOutput, SorterReader, SorterWriter};
use crate::tidb::key;
use crate::tidb::schema::action;

/// Rows taken from the puller before they are handed to the sorter as one batch.
const INGRESS_BATCH_ROWS: usize = 4096;
/// ... or payload bytes (wide rows make few rows a lot of memory).
const INGRESS_BATCH_BYTES: usize = 4 << 20;
/// Pieces queued between the egress task and the consumer.
const OUTPUT_CHANNEL: usize = 8;

/// Result of the changefeed.
pub type Result<T> = std::result::Result<T, ChangefeedError>;

/// Why the changefeed stopped. Every error means: start again from the last checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum ChangefeedError {
    #[error(transparent)]
    Pd(#[from] PdError),
    #[error(transparent)]
    Puller(#[from] PullerError),
    #[error(transparent)]
    Gc(#[from] GcError),
    #[error(transparent)]
    Sorter(#[from] SorterError),
    #[error(transparent)]
    Mounter(#[from] MounterError),
    /// The schema bootstrap task did not finish.
    #[error("schema bootstrap task failed: {0}")]
    Bootstrap(String),
}

impl ChangefeedError {
    /// True when restarting capture cannot help: the same error would come back at the same
    /// point (history already collected, another cluster, data this version cannot decode), so
    /// capture stops for good instead of looping. Everything else (PD or TiKV unreachable,
    /// streams that break, the sorter's disk) is transient: capture restarts from the
    /// checkpoint.
    pub fn is_definite(&self) -> bool {
        use crate::capture::error::CaptureError;
        match self {
            Self::Pd(e) | Self::Puller(PullerError::Pd(e)) | Self::Gc(GcError::Pd(e)) => {
                !e.is_retryable()
            }
            Self::Puller(PullerError::StartTsBeforeGcSafePoint { .. })
            | Self::Gc(GcError::SafePointPassed { .. }) => true,
            // A row kind this client does not know comes back on every restart; the other
            // protocol surprises (a commit without its prewrite, a stale commit) are what a
            // restart from the checkpoint repairs, as TiCDC restarts for them.
            Self::Puller(PullerError::Capture(e)) => matches!(
                e,
                CaptureError::UnknownRow { .. } | CaptureError::Refused { .. }
            ),
            Self::Puller(PullerError::Stopped) | Self::Sorter(_) | Self::Bootstrap(_) => false,
            Self::Mounter(e) => !e.is_retryable(),
        }
    }
}

/// True when `e` (or an error it wraps) is a [`ChangefeedError::is_definite`] one.
pub fn is_definite(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<ChangefeedError>())
        .any(ChangefeedError::is_definite)
}

/// What to capture and how.
#[derive(Debug, Clone)]
pub struct ChangefeedConfig {
    pub pd_addrs: Vec<String>,
    /// Capture transactions with `commit_ts > start_ts`; the schema is read at `start_ts`.
    pub start_ts: Ts,
    pub filter: TableFilter,
    /// The sorter's RocksDB (its data dir is wiped at start).
    pub sorter: sorter::Config,
    /// PD service id of the GC safe point held for this changefeed.
    pub gc_service_id: String,
    /// TTL of that safe point: how long the history stays after the changefeed stops.
    pub gc_ttl: std::time::Duration,
    /// Tuning of the puller (spans and start ts are set by the changefeed).
    pub puller: Option<PullerConfig>,
    /// Mutual TLS to PD and TiKV.
    pub tls: Option<crate::security::ClusterTls>,
    /// Memory for prewrites waiting for their commit, all regions together; beyond it they
    /// spill to the sorter's RocksDB.
    pub prewrite_memory_bytes: usize,
    /// Capture only the included tables' spans (see the module doc); off, the whole table
    /// key space.
    pub push_down: bool,
}

impl ChangefeedConfig {
    /// Defaults: everything the filter admits, sorter in `sorter_dir`.
    pub fn new(
        pd_addrs: Vec<String>,
        start_ts: Ts,
        filter: TableFilter,
        sorter_dir: impl Into<std::path::PathBuf>,
    ) -> ChangefeedConfig {
        ChangefeedConfig {
            pd_addrs,
            start_ts,
            filter,
            sorter: sorter::Config::new(sorter_dir),
            gc_service_id: "tibinlog".to_string(),
            gc_ttl: crate::capture::gc_keeper::DEFAULT_GC_TTL,
            puller: None,
            tls: None,
            prewrite_memory_bytes: crate::capture::matcher::DEFAULT_PREWRITE_MEMORY_BYTES,
            push_down: true,
        }
    }
}

/// The record spans of the DDL job tables, which the schema store follows.
pub fn ddl_spans() -> Vec<Span> {
    [key::DDL_JOB_TABLE_ID, key::DDL_HISTORY_TABLE_ID]
        .into_iter()
        .map(|id| table_record_span(crate::model::TableId(id)))
        .collect()
}

/// The puller's view of finished DDL jobs: the physical tables a job leaves that the filter
/// may include, captured from the job's commit ts on (see the module doc).
struct DdlSpans {
    decoder: JobDecoder,
    filter: TableFilter,
}

impl SpanHook for DdlSpans {
    fn on_row(&mut self, row: &RawRow, out: &mut Vec<(i64, Span)>) {
        if !is_ddl_key(&row.key) {
            return;
        }
        // A row the mounter cannot decode fails there, with the reason.
        let Ok(Some(job)) = self.decoder.decode(row) else {
            return;
        };
        let Some(info) = job.binlog.as_ref() else {
            return;
        };
        // Where the job does not name the tables it leaves, capture them: the mounter decides.
        let named = !job.schema_name.is_empty()
            && !matches!(
                job.action,
                action::RENAME_TABLE
                    | action::RENAME_TABLES
                    | action::EXCHANGE_TABLE_PARTITION
                    | action::RECOVER_TABLE
                    | action::RECOVER_SCHEMA
            );
        for t in info.table_info.iter().chain(&info.multiple_table_infos) {
            if t.is_view_or_sequence()
                || (named && !self.filter.matches(&job.schema_name, &t.name.o))
            {
                continue;
            }
            for id in t.physical_ids() {
                out.push((id, table_record_span(crate::model::TableId(id))));
            }
        }
    }
}

pub use crate::mounter::event::{ChangeEvent, TxnRows};

/// The current version of every included base table and view, as the mounter last saw it.
pub type SchemaSnapshot = crate::mounter::Catalog;

/// The included base tables and views of `store` in their newest versions.
pub fn schema_snapshot(store: &SchemaStore) -> SchemaSnapshot {
    schema_snapshot_at(store, Ts::MAX)
}

/// The included base tables and views of `store` at `ts`.
pub fn schema_snapshot_at(store: &SchemaStore, ts: Ts) -> SchemaSnapshot {
    store.included_at(ts)
}

/// A running changefeed.
#[derive(Debug)]
pub struct Changefeed {
    out: mpsc::Receiver<Result<ChangeEvent>>,
    schema: watch::Receiver<SchemaSnapshot>,
    checkpoint: watch::Sender<Ts>,
    cluster_id: u64,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    puller: Option<PullerHandle>,
    /// The highest resolved ts [`Changefeed::next`] has yielded (the start ts before any).
    yielded: Ts,
    sorter: sorter::SorterThreads,
}

/// Whether a raw key is a row key (`t{id}_r…`), the only keys the mounter uses.
fn is_record_key(raw: &[u8]) -> bool {
    raw.len() >= key::RECORD_PREFIX_LEN
        && raw[0] == key::TABLE_PREFIX
        && &raw[9..11] == key::RECORD_SEP
}

/// The encoded span of every table key: `[t, u)`.
pub fn table_key_space() -> Span {
    Span::new(
        key::encode_region_key(&[key::TABLE_PREFIX]),
        key::encode_region_key(&[key::TABLE_PREFIX + 1]),
    )
}

impl Changefeed {
    /// Holds the GC safe point, reads the schema at `start_ts`, opens the sorter and starts
    /// capturing. Needs a multi-threaded runtime (the schema bootstrap blocks one worker).
    pub async fn start(cfg: ChangefeedConfig, cancel: CancellationToken) -> Result<Changefeed> {
        let began = std::time::Instant::now();
        let mut pd_cfg = PdConfig::new(cfg.pd_addrs.clone());
        pd_cfg.tls = cfg.tls.clone();
        let pd = PdClient::connect(pd_cfg, cancel.child_token()).await?;
        let cluster_id = pd.cluster_id();
        let mut gc_cfg = GcKeeperConfig::new(cfg.gc_service_id.clone());
        gc_cfg.ttl = cfg.gc_ttl;
        GcKeeper::hold(&pd, &gc_cfg, cfg.start_ts).await?;
        let held = began.elapsed();

        let store = {
            let reader = Arc::new(SnapshotReader::new(pd.clone(), SnapshotConfig::default()));
            let reader = BlockingSnapshotReader::new(reader, tokio::runtime::Handle::current());
            let (filter, ts) = (cfg.filter.clone(), cfg.start_ts);
            tokio::task::spawn_blocking(move || SchemaStore::bootstrap(&reader, ts, filter))
                .await
                .map_err(|e| ChangefeedError::Bootstrap(e.to_string()))??
        };
        let bootstrapped = began.elapsed();

        let (schema_tx, schema) = watch::channel(schema_snapshot(&store));

        let sorter_cfg = cfg.sorter.clone();
        let (writer, reader) =
            tokio::task::spawn_blocking(move || sorter::Sorter::open(sorter_cfg))
                .await
                .map_err(|e| ChangefeedError::Bootstrap(e.to_string()))??;

        let mut pcfg = cfg
            .puller
            .clone()
            .unwrap_or_else(|| PullerConfig::new(cfg.pd_addrs.clone(), Vec::new(), cfg.start_ts));
        let hook: Option<Box<dyn SpanHook>> = if cfg.push_down {
            pcfg.spans = ddl_spans();
            pcfg.keyed_spans = store
                .included_physical_ids()
                .into_iter()
                .map(|id| (id, table_record_span(crate::model::TableId(id))))
                .collect();
            Some(Box::new(DdlSpans {
                decoder: JobDecoder::new(&store),
                filter: cfg.filter.clone(),
            }))
        } else {
            pcfg.spans = vec![table_key_space()];
            pcfg.keyed_spans = Vec::new();
            None
        };
        pcfg.matcher.spill = Some(crate::capture::Spill::new(
            Arc::new(writer.prewrite_spill()),
            cfg.prewrite_memory_bytes,
        ));
        pcfg.start_ts = cfg.start_ts;
        let (puller, events) =
            Puller::start_with_hook(pd.clone(), pcfg, hook, cancel.child_token()).await?;
        let remover = cfg.push_down.then(|| puller.span_remover());
        info!(
            start_ts = cfg.start_ts.0,
            tables = store.included_physical_ids().len(),
            pd_and_gc_ms = held.as_millis() as u64,
            schema_ms = (bootstrapped - held).as_millis() as u64,
            sorter_and_puller_ms = (began.elapsed() - bootstrapped).as_millis() as u64,
            "changefeed started"
        );

        let sorter_threads = reader.threads();
        let (out_tx, out) = mpsc::channel(OUTPUT_CHANNEL);
        let (checkpoint, checkpoint_rx) = watch::channel(cfg.start_ts);
        let gc = GcKeeper::spawn(pd, gc_cfg, checkpoint_rx.clone(), cancel.child_token());
        let tasks = vec![
            tokio::spawn(ingress(events, writer, out_tx.clone(), cancel.clone())),
            tokio::spawn(egress(
                reader,
                Mounter::new(store),
                out_tx.clone(),
                checkpoint_rx,
                schema_tx,
                remover,
                cancel.clone(),
            )),
            tokio::spawn(async move {
                if let Err(e) = gc.join().await {
                    let _ = out_tx.send(Err(e.into())).await;
                }
            }),
        ];
        Ok(Changefeed {
            out,
            schema,
            checkpoint,
            cluster_id,
            cancel,
            tasks,
            puller: Some(puller),
            yielded: cfg.start_ts,
            sorter: sorter_threads,
        })
    }

    /// The next event; `None` once stopped. After an `Err` nothing more comes.
    pub async fn next(&mut self) -> Option<Result<ChangeEvent>> {
        match self.out.recv().await {
            Some(ev) => {
                if let Ok(ChangeEvent::Resolved(ts)) = &ev {
                    self.yielded = self.yielded.max(*ts);
                }
                Some(ev)
            }
            None => match self.puller.take() {
                // The pipeline ended: report why the puller stopped, if it failed.
                Some(p) => p.join().await.err().map(|e| Err(e.into())),
                None => None,
            },
        }
    }

    /// Everything with `commit_ts <= ts` is durably written downstream. Never moves backwards,
    /// and never past the highest resolved ts this changefeed has yielded: a consumer that
    /// restarted its changefeed may still be writing what an earlier one yielded, and a
    /// checkpoint from those writes would let this one forget schema versions and sorted rows
    /// it has not used yet.
    pub fn advance_checkpoint(&self, ts: Ts) {
        let ts = ts.min(self.yielded);
        self.checkpoint.send_if_modified(|cur| {
            if ts > *cur {
                *cur = ts;
                true
            } else {
                false
            }
        });
    }

    /// The checkpoint last advanced to.
    pub fn checkpoint(&self) -> Ts {
        *self.checkpoint.borrow()
    }

    /// A watch of the included tables' newest versions; it changes after each DDL the mounter
    /// applies (which may be ahead of what the consumer has written).
    pub fn schema(&self) -> watch::Receiver<SchemaSnapshot> {
        self.schema.clone()
    }

    /// The TiDB cluster id.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// Stops every task and waits for them, the sorter's threads included, so that the
    /// process may exit once this returns (the GC safe point is kept: a restart needs it).
    pub async fn close(mut self) {
        self.cancel.cancel();
        self.out.close();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        if let Some(p) = self.puller.take() {
            let _ = p.join().await;
        }
        let threads = self.sorter.clone();
        match tokio::task::spawn_blocking(move || threads.join()).await {
            Ok(true) => {}
            Ok(false) => warn!("a sorter thread panicked"),
            Err(e) => warn!(error = %e, "waiting for the sorter threads failed"),
        }
    }
}

/// Puller → sorter: row keys only, batched, resolved ts in stream order.
async fn ingress(
    mut events: EventReceiver,
    writer: SorterWriter,
    out: mpsc::Sender<Result<ChangeEvent>>,
    cancel: CancellationToken,
) {
    let mut rows: Vec<RawRow> = Vec::with_capacity(INGRESS_BATCH_ROWS);
    let mut batch_bytes = 0usize;
    let send = |r: std::result::Result<(), SorterError>| r.map_err(ChangefeedError::from);
    loop {
        let first = tokio::select! {
            _ = cancel.cancelled() => return,
            ev = events.recv() => ev,
        };
        let Some(first) = first else {
            debug!("puller output closed");
            return;
        };
        let mut next = Some(first);
        let mut result = Ok(());
        while let Some(ev) = next.take() {
            match ev {
                RawKvEvent::Row(r) => {
                    if is_record_key(&r.key) {
                        batch_bytes += r.payload_len();
                        rows.push(r);
                    }
                    if rows.len() >= INGRESS_BATCH_ROWS || batch_bytes >= INGRESS_BATCH_BYTES {
                        batch_bytes = 0;
                        result = send(writer.send_rows(std::mem::take(&mut rows)).await);
                    }
                }
                RawKvEvent::Resolved(ts) => {
                    batch_bytes = 0;
                    result = send(writer.send_rows(std::mem::take(&mut rows)).await);
                    if result.is_ok() {
                        result = send(writer.send_resolved(ts).await);
                    }
                }
            }
            if result.is_err() {
                break;
            }
            next = events.try_recv();
        }
        if result.is_ok() && !rows.is_empty() {
            batch_bytes = 0;
            result = send(writer.send_rows(std::mem::take(&mut rows)).await);
        }
        if let Err(e) = result {
            let _ = out.send(Err(e)).await;
            return;
        }
    }
}

/// Where the egress task is inside a transaction.
#[derive(Debug, Default)]
struct Open {
    /// A piece of the current transaction has been yielded.
    yielded: bool,
}

/// Sorter → mounter → consumer.
async fn egress(
    mut reader: SorterReader,
    mut mounter: Mounter,
    out: mpsc::Sender<Result<ChangeEvent>>,
    mut checkpoint: watch::Receiver<Ts>,
    schema: watch::Sender<SchemaSnapshot>,
    remover: Option<SpanRemover>,
    cancel: CancellationToken,
) {
    let mut open = Open::default();
    let mut schema_ts = mounter.store().resolved_ts();
    loop {
        let item = tokio::select! {
            _ = cancel.cancelled() => return,
            changed = checkpoint.changed() => {
                if changed.is_ok() {
                    let ts = *checkpoint.borrow_and_update();
                    reader.ack(ReadPosition::after_commit_ts(ts));
                    mounter.store_mut().gc(ts);
                }
                continue;
            }
            item = reader.next() => item,
        };
        let Some(item) = item else {
            debug!("sorter output closed");
            return;
        };
        let events = match item {
            Err(e) => Err(ChangefeedError::from(e)),
            Ok(SorterOutput::Resolved(ResolvedTs(ts))) => Ok(vec![ChangeEvent::Resolved(ts)]),
            Ok(SorterOutput::Chunk(chunk)) => {
                let evs = mount_chunk(&mut mounter, &mut open, chunk);
                if mounter.store().resolved_ts() != schema_ts {
                    schema_ts = mounter.store().resolved_ts();
                    schema.send_replace(schema_snapshot(mounter.store()));
                    // DDLs applied: stop capturing what they took out of the filter.
                    if let Some(r) = &remover {
                        let keep = mounter
                            .store()
                            .included_physical_ids()
                            .into_iter()
                            .collect();
                        r.retain(keep, schema_ts);
                    }
                }
                evs
            }
        };
        match events {
            Ok(evs) => {
                for ev in evs {
                    if out.send(Ok(ev)).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => {
                let _ = out.send(Err(e)).await;
                return;
            }
        }
    }
}

/// Mounts one sorter chunk into the pieces the consumer sees.
fn mount_chunk(
    mounter: &mut Mounter,
    open: &mut Open,
    chunk: sorter::TxnChunk,
) -> Result<Vec<ChangeEvent>> {
    if chunk.first {
        open.yielded = false;
    }
    let mut evs = Vec::new();
    let mut rows = Vec::new();
    for raw in &chunk.rows {
        match mounter.mount(raw)? {
            Mounted::Row(c) => rows.push(c),
            Mounted::Ddl(ddl) => evs.extend(ddl.into_iter().map(|mut d| {
                // Versions made at ts T serve rows committed after T.
                d.catalog = Some(schema_snapshot_at(mounter.store(), Ts(d.commit_ts.0 + 1)));
                ChangeEvent::Ddl(d)
            })),
            Mounted::Skipped => {}
        }
    }
    if !rows.is_empty() || (chunk.last && open.yielded) {
        evs.push(ChangeEvent::Rows(TxnRows {
            start_ts: chunk.start_ts,
            commit_ts: chunk.commit_ts,
            rows,
            first: !open.yielded,
            last: chunk.last,
        }));
        open.yielded = true;
    }
    Ok(evs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_by_what_a_restart_can_do() {
        let definite = |e: ChangefeedError| is_definite(&anyhow::Error::new(e).context("start"));
        let gone = || PdError::Unavailable {
            addrs: vec!["pd:2379".into()],
            last: "refused".into(),
        };
        assert!(!definite(ChangefeedError::Pd(gone())));
        assert!(!definite(ChangefeedError::Gc(GcError::Pd(gone()))));
        assert!(definite(ChangefeedError::Pd(PdError::ClusterIdMismatch {
            expected: 1,
            got: 2
        })));
        assert!(definite(ChangefeedError::Puller(
            PullerError::StartTsBeforeGcSafePoint {
                start_ts: Ts(5),
                safe_point: Ts(9)
            }
        )));
        assert!(definite(ChangefeedError::Gc(GcError::SafePointPassed {
            wanted: Ts(5),
            min_safe_point: Ts(9)
        })));
        assert!(definite(ChangefeedError::Mounter(
            MounterError::UnknownTable {
                table_id: 7,
                commit_ts: Ts(9)
            }
        )));
        assert!(!definite(ChangefeedError::Mounter(
            MounterError::Snapshot {
                ts: Ts(9),
                source: "timeout".into()
            }
        )));
        assert!(!definite(ChangefeedError::Puller(PullerError::Stopped)));
        assert!(!definite(ChangefeedError::Bootstrap("panicked".into())));
        assert!(!is_definite(&anyhow::anyhow!("the changefeed ended")));
    }

    #[test]
    fn only_row_keys_pass_ingress() {
        let rec = key::record_key(42, &key::Handle::Int(7));
        assert!(is_record_key(&rec));
        let idx = key::index_prefix(42, 1);
        assert!(!is_record_key(&idx));
        assert!(!is_record_key(b"mDDLJobHistory"));
        assert!(!is_record_key(b"t"));
        let (s, e) = key::record_span(key::DDL_HISTORY_TABLE_ID);
        assert!(is_record_key(&s) && !e.is_empty());
    }

    #[test]
    fn table_key_space_covers_every_table() {
        let span = table_key_space();
        for id in [1, 42, key::DDL_JOB_TABLE_ID, key::DDL_HISTORY_TABLE_ID] {
            let (s, _) = key::table_span_encoded(id);
            assert!(span.contains(&s), "table {id}");
        }
        assert!(!span.contains(&key::encode_region_key(b"mDBs")));
    }
}

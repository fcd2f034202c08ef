//! The binlog sink: the writer thread that turns the changefeed's events (or, on an HA
//! standby, the owner's relayed transactions) into the binlog store.
//!
//! * Row pieces → `begin_txn`/`write_rows`/`commit_txn`, DDL → `write_ddl`; a transaction the
//!   binlog already has (a capture restart resends everything after the checkpoint) is skipped
//!   whole. `Resolved(ts)` → `flush(ts)` (group commit + checkpoint), then the changefeed's
//!   checkpoint may advance to `ts` (the `flushed` watch).
//! * Between resolved ts, a transaction with a higher commit ts than the last one proves that
//!   everything up to `commit_ts - 1` is written (they come in commit order): after
//!   [`INTERMEDIATE_CHECKPOINT`] without a flush, the sink checkpoints there. A catch-up batch
//!   (one resolved ts after minutes of history) thus makes progress that survives a crash,
//!   instead of being redone whole by every restart.
//! * Purges (`PURGE BINARY LOGS`, `binlog_expire_logs_seconds`) change the store, so they come
//!   here as [`WriterMsg::Purge`] too; expiry also runs whenever the binlog rotated.
//! * In an HA group every write is fenced by the ownership ([`OwnerFence`]).
//! * Which event may come where is the pure [`super::gate`]: an event out of order stops the
//!   sink before it writes a byte.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::catalog_history::SchemaHistory;
use super::gate::{Gate, Piece};
use super::source::{self, Purge, PurgeRequest, WriterMsg};
use super::{BinlogFiles, BinlogStore, StoreError};
use crate::budget::ByteBudget;
use crate::model::Ts;
use crate::mounter::ChangeEvent;
use crate::server::source::RelayTag;

/// Longest stretch an HA standby appends relayed transactions without a group commit.
pub const RELAY_FLUSH_EVERY: Duration = Duration::from_millis(20);

/// Longest stretch of writing without a checkpoint (see the module docs).
pub const INTERMEDIATE_CHECKPOINT: Duration = Duration::from_millis(200);
/// Progress of the writer, shared with the progress log and tests.
#[derive(Debug, Default)]
pub struct SinkStats {
    pub txns: AtomicU64,
    pub skipped: AtomicU64,
    pub next_gno: AtomicU64,
    pub checkpoint: AtomicU64,
}

/// The writer thread's state.
pub struct Sink {
    store: Option<BinlogStore>,
    /// The byte bound of the queue this writer drains.
    queue: ByteBudget,
    /// Where the sink stands between the changefeed's events.
    gate: Gate,
    flushed: watch::Sender<Ts>,
    stats: Arc<SinkStats>,
    /// Catalog versions for SQL answers, by binlog position.
    history: Arc<SchemaHistory>,
    files: BinlogFiles,
    /// When the last checkpoint was flushed.
    last_flush: std::time::Instant,
    /// [`INTERMEDIATE_CHECKPOINT`] (tests use zero).
    checkpoint_every: Duration,
    /// The file the last expiry check saw open: expiry runs again when the binlog rotated
    /// (as MySQL purges expired files at rotation), besides [`expire_binlogs`]' timer.
    expiry_seen: u32,
    /// In an HA group: the ownership's fence. Every event and every flush checks it: a lost
    /// fence fails the writer before another byte is written (the unflushed tail is dropped,
    /// as after a crash; a restart rejoins as a standby).
    fence: Option<OwnerFence>,
    /// An HA standby: the checkpoint the relayed transactions proved, not yet flushed.
    relay_checkpoint: Option<Ts>,
    /// An HA standby: why the owner's binlog was refused (until the follower asks again).
    relay_error: Option<String>,
}

/// In an HA group, what the sink asks before each write: `None` while this instance does not
/// own its group, else whether its ownership still holds (the reason when it does not). The HA
/// gate answers it from the ownership it won.
pub type OwnerFence = Arc<dyn Fn() -> Option<Result<(), String>> + Send + Sync>;

impl Sink {
    /// A sink writing `store`; `flushed` carries each durable checkpoint, `fence` the HA
    /// ownership (`None` outside a group).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: BinlogStore,
        queue: ByteBudget,
        flushed: watch::Sender<Ts>,
        stats: Arc<SinkStats>,
        history: Arc<SchemaHistory>,
        fence: Option<OwnerFence>,
    ) -> Sink {
        Sink {
            files: store.files(),
            store: Some(store),
            queue,
            gate: Gate::Idle,
            flushed,
            stats,
            history,
            last_flush: std::time::Instant::now(),
            checkpoint_every: INTERMEDIATE_CHECKPOINT,
            expiry_seen: 0,
            fence,
            relay_checkpoint: None,
            relay_error: None,
        }
    }

    fn store(&mut self) -> anyhow::Result<&mut BinlogStore> {
        self.store
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("the binlog store is closed"))
    }

    /// Writes what `rx` brings until [`WriterMsg::Stop`] or a store error; then closes the
    /// store (dropped without closing when `abrupt` is set, as in a crash).
    pub fn run(
        &mut self,
        mut rx: mpsc::Receiver<WriterMsg<ChangeEvent>>,
        abrupt: &AtomicBool,
    ) -> anyhow::Result<()> {
        while let Some(msg) = rx.blocking_recv() {
            match msg {
                WriterMsg::Event(ev, cost) => {
                    let written = self.on_event(ev);
                    self.queue.give(cost);
                    written?;
                    let open = self.files.end_pos().file_seq;
                    if open != self.expiry_seen && !self.gate.writing() {
                        self.expiry_seen = open;
                        self.on_purge(PurgeRequest {
                            purge: Purge::Expired(unix_now()),
                            reply: None,
                        });
                    }
                }
                WriterMsg::Purge(req) => self.on_purge(req),
                WriterMsg::Stop => break,
                WriterMsg::Relayed {
                    events,
                    tag,
                    catalog,
                } => {
                    self.on_relayed(&events, tag, catalog)?;
                    // Group commit: when nothing more is queued, and at least every
                    // RELAY_FLUSH_EVERY while the owner's stream never pauses.
                    if rx.is_empty() || self.last_flush.elapsed() >= RELAY_FLUSH_EVERY {
                        self.relay_flush()?;
                    }
                }
                WriterMsg::RelayedCheckpoint { ts, file, pos } => {
                    if !self.owns() {
                        let store = self.store()?;
                        let at = store.files().parse_position(&file, pos);
                        if at == Some(store.write_pos()) {
                            self.relay_checkpoint = self.relay_checkpoint.max(Some(Ts(ts)));
                        }
                        self.relay_flush()?;
                    }
                }
                WriterMsg::RelayedFirstFile { timestamp } => {
                    if !self.owns()
                        && self.store()?.is_pristine()
                        && self.store()?.adopt_first_file(timestamp)?
                    {
                        info!(timestamp, "took the owner's first binlog file");
                    }
                }
                WriterMsg::RelayFrom(reply) => {
                    let answer = if self.owns() {
                        Err("this instance owns the group".to_owned())
                    } else {
                        self.relay_flush()?;
                        match self.relay_error.take() {
                            Some(e) => Err(e),
                            None => {
                                let store = self.store()?;
                                let pristine = store.is_pristine();
                                let end = store.write_pos();
                                Ok(source::RelayStart {
                                    file: self.files.file_name(end.file_seq),
                                    pos: if pristine { 4 } else { end.offset },
                                    pristine,
                                })
                            }
                        }
                    };
                    let _ = reply.send(answer);
                }
                WriterMsg::Reset => {
                    if self.gate.reset() {
                        self.store()?.abort_txn()?;
                    }
                }
            }
        }
        let Some(store) = self.store.take() else {
            return Ok(());
        };
        if abrupt.load(Ordering::SeqCst) {
            warn!("binlog store dropped without a clean close");
            drop(store);
            return Ok(());
        }
        store.close().context("close the binlog store")?;
        info!("binlog store closed");
        Ok(())
    }

    /// This instance owns its HA group (it won the campaign).
    fn owns(&self) -> bool {
        self.fence.as_ref().is_some_and(|f| f().is_some())
    }

    /// A standby appends a transaction of the owner's binlog. A refusal (the bytes are not
    /// what this store would write next) stops the relay until the follower asks again; it is
    /// not the writer's failure. An owner ignores what a follower still had queued: its
    /// capture regenerates it.
    fn on_relayed(
        &mut self,
        events: &[u8],
        tag: RelayTag,
        catalog: Option<crate::mounter::Catalog>,
    ) -> anyhow::Result<()> {
        if self.owns() || self.relay_error.is_some() {
            return Ok(());
        }
        let (start, commit) = (Ts(tag.start_ts), Ts(tag.commit_ts));
        match self.store()?.relay_txn(events, start, commit, tag.part) {
            Ok(c) => {
                self.stats.txns.fetch_add(1, Ordering::Relaxed);
                self.stats.next_gno.store(c.gno + 1, Ordering::Relaxed);
                // Everything committed before it is in the binlog (binlog order).
                self.relay_checkpoint = self.relay_checkpoint.max(Some(commit.prev()));
                if let Some(cat) = catalog {
                    let end = self.files.end_pos();
                    let readers = self.files.snapshot_point().map_or(end, |p| p.end.min(end));
                    self.history
                        .push(c.end, (commit, start, tag.part), cat, readers);
                }
                Ok(())
            }
            Err(e @ (StoreError::RelayMismatch { .. } | StoreError::OutOfOrder { .. })) => {
                tracing::error!(error = %e, "the owner's binlog differs from what this instance would write; not following it");
                self.relay_error = Some(format!(
                    "the owner's binlog differs from this instance's ({e}); the members of a group \
                     must share server_id, server_uuid, max_binlog_size, the filter and the version"
                ));
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A standby's group commit, with the newest checkpoint the relay proved.
    fn relay_flush(&mut self) -> anyhow::Result<()> {
        let pending = self.relay_checkpoint.take();
        let store = self.store()?;
        let Some(ts) = pending.max(store.checkpoint()) else {
            return Ok(());
        };
        store.flush(ts)?;
        self.last_flush = std::time::Instant::now();
        self.stats.checkpoint.store(ts.0, Ordering::Relaxed);
        // The store's checkpoint is the truth here: a new member's first one can be below the
        // timestamp it started with, which its GC keeper and a later takeover must follow.
        self.flushed.send_if_modified(|cur| {
            let changed = *cur != ts;
            *cur = ts;
            changed
        });
        Ok(())
    }

    /// Fails unless this instance may write (always, outside an HA group).
    fn check_fence(&self) -> anyhow::Result<()> {
        let Some(fence) = &self.fence else {
            return Ok(());
        };
        match fence() {
            Some(r) => r.map_err(|e| {
                anyhow::anyhow!("not writing: lost the ownership of the HA group: {e}")
            }),
            None => Err(anyhow::anyhow!(
                "not writing: this instance does not own its HA group"
            )),
        }
    }

    fn on_event(&mut self, ev: ChangeEvent) -> anyhow::Result<()> {
        self.check_fence()?;
        match ev {
            ChangeEvent::Rows(p) => {
                let key = (p.commit_ts, p.start_ts);
                if p.first {
                    self.gate.may_start(key)?;
                    self.maybe_checkpoint_before(p.commit_ts)?;
                    if self.store()?.already_written(p.commit_ts, p.start_ts, 0) {
                        self.gate.skip(key);
                    } else {
                        self.store()?.begin_txn(p.start_ts, p.commit_ts)?;
                        self.gate.begin(key);
                    }
                }
                match self.gate.piece(key, p.last)? {
                    Piece::Skip { done } => {
                        if done {
                            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Piece::Write { commit } => {
                        let store = self.store()?;
                        if !p.rows.is_empty() {
                            store.write_rows(&p.rows)?;
                        }
                        if commit {
                            let c = store.commit_txn()?;
                            self.stats.txns.fetch_add(1, Ordering::Relaxed);
                            self.stats.next_gno.store(c.gno + 1, Ordering::Relaxed);
                        }
                    }
                }
            }
            ChangeEvent::Ddl(d) => {
                self.gate.may_ddl((d.commit_ts, d.start_ts))?;
                self.maybe_checkpoint_before(d.commit_ts)?;
                let key = (d.commit_ts, d.start_ts, d.part);
                if self
                    .store()?
                    .already_written(d.commit_ts, d.start_ts, d.part)
                {
                    if let Some(c) = d.catalog.clone() {
                        self.history.replayed(key, c);
                    }
                    self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                let c = self.store()?.write_ddl(&d)?;
                if let Some(cat) = d.catalog.clone() {
                    // Versions are kept back to the snapshot point: reads (and the catalog
                    // answers with them) stand there, which can be behind the durable end.
                    let end = self.files.end_pos();
                    let readers = self.files.snapshot_point().map_or(end, |p| p.end.min(end));
                    self.history.push(c.end, key, cat, readers);
                }
                self.stats.txns.fetch_add(1, Ordering::Relaxed);
                self.stats.next_gno.store(c.gno + 1, Ordering::Relaxed);
            }
            ChangeEvent::Resolved(ts) => {
                self.gate.may_resolve(ts)?;
                self.checkpoint(ts)?;
            }
        }
        Ok(())
    }

    /// Group commit with checkpoint `ts`, then the changefeed may move on.
    fn checkpoint(&mut self, ts: Ts) -> anyhow::Result<()> {
        self.check_fence()?;
        self.store()?.flush(ts)?;
        self.last_flush = std::time::Instant::now();
        self.stats.checkpoint.store(ts.0, Ordering::Relaxed);
        self.flushed.send_if_modified(|cur| {
            if ts > *cur {
                *cur = ts;
                true
            } else {
                false
            }
        });
        Ok(())
    }

    /// Before a transaction (or DDL) committed at `commit_ts`, outside any transaction: every
    /// transaction committed before it was handed over already (the changefeed emits in commit
    /// order), so `commit_ts - 1` is a valid checkpoint once it is past the stored one.
    fn maybe_checkpoint_before(&mut self, commit_ts: Ts) -> anyhow::Result<()> {
        if self.last_flush.elapsed() < self.checkpoint_every {
            return Ok(());
        }
        let ts = commit_ts.prev();
        if self.store()?.checkpoint().is_some_and(|c| c >= ts) {
            return Ok(());
        }
        self.checkpoint(ts)
    }

    fn on_purge(&mut self, req: PurgeRequest) {
        let result = match self.store() {
            Err(e) => Err(crate::server::SourceError::Refused(e.to_string())),
            Ok(store) => source::purge_answer(match &req.purge {
                Purge::To(file) => store.purge_to(file),
                Purge::Before(secs) => store.purge_before(*secs),
                Purge::Expired(now) => store.purge_expired(*now),
            }),
        };
        match (req.reply, result) {
            (Some(reply), result) => {
                let _ = reply.send(result);
            }
            // Expiry: what stopped it is logged (the purge itself logs the files it deleted).
            (None, Ok(warnings)) => {
                for w in warnings {
                    debug!(reason = %w.message, "binlog expiry stopped early");
                }
            }
            (None, Err(e)) => warn!(error = %e, "binlog expiry failed"),
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How often expired binlog files are looked for (at most; sooner when the expiry is shorter).
const EXPIRY_CHECK: Duration = Duration::from_secs(60);

/// `binlog_expire_logs_seconds`: asks the writer to purge expired files at start and then
/// every `EXPIRY_CHECK` (the writer never purges the open file or one a reader is on).
pub async fn expire_binlogs(
    writer: mpsc::Sender<WriterMsg<ChangeEvent>>,
    expire_secs: u64,
    stop: CancellationToken,
) {
    if expire_secs == 0 {
        return;
    }
    let every = EXPIRY_CHECK.min(Duration::from_secs(expire_secs));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let req = PurgeRequest {
            purge: Purge::Expired(unix_now()),
            reply: None,
        };
        // A full channel means the writer is busy with events: try again at the next tick.
        match writer.try_send(WriterMsg::Purge(req)) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::Path;

    use tibinlog_protocol::binlog::Sid;

    use super::*;
    use crate::binlog_store::StoreConfig;

    /// The queue bound the tests' sinks drain.
    const WRITER_QUEUE_BYTES: usize = 32 << 20;

    fn txn(commit: u64, start: u64) -> ChangeEvent {
        ChangeEvent::Rows(crate::mounter::TxnRows {
            start_ts: Ts(start),
            commit_ts: Ts(commit),
            rows: Vec::new(),
            first: true,
            last: true,
        })
    }

    fn writer(dir: &Path) -> (Sink, watch::Receiver<Ts>) {
        let cfg = StoreConfig::new(dir, 1, Sid([7; 16]));
        let (store, _) = BinlogStore::open(cfg).unwrap();
        let files = store.files();
        let (flushed, rx) = watch::channel(Ts(0));
        let w = Sink {
            queue: ByteBudget::new(WRITER_QUEUE_BYTES),
            store: Some(store),
            gate: Gate::Idle,
            flushed,
            stats: Arc::new(SinkStats::default()),
            history: Arc::new(SchemaHistory::new(Arc::new(Vec::new()))),
            files,
            last_flush: std::time::Instant::now(),
            checkpoint_every: Duration::ZERO,
            expiry_seen: 0,
            fence: None,
            relay_checkpoint: None,
            relay_error: None,
        };
        (w, rx)
    }

    #[test]
    fn an_ha_member_that_does_not_own_its_group_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut w, _rx) = writer(dir.path());
        w.fence = Some(Arc::new(|| None));
        let e = w.on_event(txn(10, 9)).expect_err("refused");
        assert!(format!("{e:#}").contains("does not own"), "{e:#}");
        assert!(w.on_event(ChangeEvent::Resolved(Ts(10))).is_err());
        let store = w.store.as_ref().expect("store");
        assert_eq!(store.last_written(), None);
        assert_eq!(store.checkpoint(), None);
    }

    /// A standby's writer: the owner's transactions are appended with the checkpoint each
    /// proves, group-committed when nothing more is queued; the owner's snapshot point is taken
    /// where the binlogs end alike; a transaction whose bytes differ is refused, the follower
    /// learns why when it asks where to resume, and following goes on from the last good one.
    #[test]
    fn a_standby_writer_appends_the_owner_s_transactions_and_refuses_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let owner_dir = dir.path().join("owner");
        let (mut owner, _) =
            BinlogStore::open(StoreConfig::new(&owner_dir, 1, Sid([7; 16]))).expect("open");
        let mut txns = Vec::new();
        let mut from = owner.write_pos().offset;
        for (start, commit) in [(5, 10), (6, 20), (7, 20), (8, 30)] {
            owner.begin_txn(Ts(start), Ts(commit)).expect("begin");
            let c = owner.commit_txn().expect("commit");
            txns.push((from, c.end.offset, start, commit));
            from = c.end.offset;
        }
        owner.flush(Ts(35)).expect("flush");
        let owner_end = owner.write_pos();
        let bytes = std::fs::read(owner_dir.join("binlog.000001")).expect("read");
        let relayed = |i: usize, flip: bool| {
            let (a, b, start, commit) = txns[i];
            let mut events = bytes[a as usize..b as usize].to_vec();
            if flip {
                events[30] ^= 1;
            }
            WriterMsg::Relayed {
                events,
                tag: RelayTag {
                    start_ts: start,
                    commit_ts: commit,
                    part: 0,
                },
                catalog: None,
            }
        };

        let (w, flushed) = writer(&dir.path().join("standby"));
        let (tx, rx) = mpsc::channel(64);
        let thread = std::thread::spawn(move || {
            let mut w = w;
            w.run(rx, &AtomicBool::new(false)).map(|()| w)
        });
        let ask = |tx: &mpsc::Sender<WriterMsg<ChangeEvent>>| {
            let (reply, answer) = tokio::sync::oneshot::channel();
            tx.blocking_send(WriterMsg::RelayFrom(reply)).expect("send");
            answer.blocking_recv().expect("answer")
        };
        assert_eq!(
            ask(&tx),
            Ok(source::RelayStart {
                file: "binlog.000001".into(),
                pos: 4,
                pristine: true
            })
        );
        for m in [relayed(0, false), relayed(1, false), relayed(2, true)] {
            tx.blocking_send(m).expect("send");
        }
        // Refused, and nothing after it is taken until the follower asks again.
        tx.blocking_send(relayed(3, false)).expect("send");
        let refused = ask(&tx).expect_err("the flipped transaction is refused");
        assert!(refused.contains("differs"), "{refused}");
        assert_eq!(
            *flushed.borrow(),
            Ts(19),
            "the checkpoint the second one proves"
        );
        assert_eq!(
            ask(&tx),
            Ok(source::RelayStart {
                file: "binlog.000001".into(),
                pos: txns[1].1,
                pristine: false
            })
        );
        for m in [relayed(2, false), relayed(3, false)] {
            tx.blocking_send(m).expect("send");
        }
        // A snapshot point elsewhere is not taken; the owner's end is.
        tx.blocking_send(WriterMsg::RelayedCheckpoint {
            ts: 99,
            file: "binlog.000001".into(),
            pos: txns[2].1,
        })
        .expect("send");
        assert!(ask(&tx).is_ok());
        assert_eq!(*flushed.borrow(), Ts(29));
        tx.blocking_send(WriterMsg::RelayedCheckpoint {
            ts: 35,
            file: "binlog.000001".into(),
            pos: owner_end.offset,
        })
        .expect("send");
        tx.blocking_send(WriterMsg::Stop).expect("send");
        let w = thread.join().expect("writer thread").expect("writer");
        assert_eq!(*flushed.borrow(), Ts(35));
        assert_eq!(w.stats.txns.load(Ordering::Relaxed), 4);
        let standby = std::fs::read(dir.path().join("standby/binlog.000001")).expect("read");
        assert_eq!(standby.len() as u64, owner_end.offset);
        // Only the open file's BINLOG_IN_USE flag differs (the standby closed its store).
        assert_eq!(standby[..21], bytes[..21]);
        assert_eq!(standby[23..], bytes[23..owner_end.offset as usize]);
    }

    #[test]
    fn a_long_batch_checkpoints_before_each_new_commit_ts() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, flushed) = writer(dir.path());
        for ev in [txn(10, 5), txn(20, 6), txn(20, 7), txn(30, 8)] {
            w.on_event(ev).unwrap();
        }
        // Before @30 everything up to 29 was written: that is the checkpoint, and a snapshot
        // point at the end of the transactions before it.
        let store = w.store.as_ref().unwrap();
        assert_eq!(store.checkpoint(), Some(Ts(29)));
        assert_eq!(*flushed.borrow(), Ts(29));
        let point = store.files().snapshot_point().unwrap();
        assert_eq!(point.ts, Ts(29));
        assert_eq!(
            point.gtid_executed.to_string(),
            format!("{}:1-3", Sid([7; 16]))
        );
        w.on_event(ChangeEvent::Resolved(Ts(40))).unwrap();
        w.store.take().unwrap().close().unwrap();

        // A restart resends from 40: nothing to skip. One that resumed from an older
        // checkpoint skips what it has, and its checkpoints on the way are no snapshot
        // points while the binlog holds transactions committed after them.
        let (mut w, _) = writer(dir.path());
        assert_eq!(w.store.as_ref().unwrap().checkpoint(), Some(Ts(40)));
        let store = w.store.as_mut().unwrap();
        store.begin_txn(Ts(41), Ts(50)).unwrap();
        store.commit_txn().unwrap();
        w.on_event(txn(50, 41)).unwrap();
        let store = w.store.as_ref().unwrap();
        assert_eq!(store.checkpoint(), Some(Ts(49)));
        assert_eq!(store.files().snapshot_point().unwrap().ts, Ts(40));
        w.on_event(txn(60, 55)).unwrap();
        let store = w.store.as_ref().unwrap();
        assert_eq!(store.checkpoint(), Some(Ts(59)));
        assert_eq!(store.files().snapshot_point().unwrap().ts, Ts(59));
        assert_eq!(w.stats.skipped.load(Ordering::Relaxed), 1);
    }

    fn ddl(commit: u64, start: u64, part: u32, table: &str) -> ChangeEvent {
        ChangeEvent::Ddl(crate::mounter::DdlEvent {
            commit_ts: Ts(commit),
            start_ts: Ts(start),
            part,
            job_id: 1,
            action: crate::tidb::schema::action::CREATE_TABLES,
            schema: "app".into(),
            query: format!("CREATE TABLE `{table}` (`id` INT PRIMARY KEY)"),
            table: None,
            catalog: None,
        })
    }

    #[test]
    fn each_statement_of_a_ddl_batch_is_a_transaction_and_a_resend_skips_the_written_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = writer(dir.path());
        w.on_event(txn(10, 5)).unwrap();
        // A batch create of three tables, one commit ts: the capture stops after two.
        w.on_event(ddl(20, 15, 0, "a")).unwrap();
        w.on_event(ddl(20, 15, 1, "b")).unwrap();
        assert_eq!(w.store.as_ref().unwrap().next_gno(), 4);
        assert_eq!(w.store.as_ref().unwrap().checkpoint(), Some(Ts(19)));
        w.store.take().unwrap().close().unwrap();
        // The restart resends the batch from its checkpoint (19): the first two statements
        // are skipped, the third is written, then what follows.
        let (mut w, _) = writer(dir.path());
        for ev in [
            ddl(20, 15, 0, "a"),
            ddl(20, 15, 1, "b"),
            ddl(20, 15, 2, "c"),
            txn(30, 25),
        ] {
            w.on_event(ev).unwrap();
        }
        assert_eq!(w.stats.skipped.load(Ordering::Relaxed), 2);
        let store = w.store.take().unwrap();
        assert_eq!(store.next_gno(), 6);
        assert_eq!(store.last_written(), Some((Ts(30), Ts(25), 0)));
        let files = store.files();
        store.close().unwrap();
        let mut r = files.open_reader("binlog.000001", 4).unwrap();
        let mut queries = Vec::new();
        while let Some(ev) = r.try_next().unwrap() {
            if ev.event_type().0 == 2 {
                let text = String::from_utf8_lossy(ev.bytes).into_owned();
                if let Some(at) = text.find("CREATE TABLE") {
                    queries.push(text[at..].chars().take(16).collect::<String>());
                }
            }
        }
        assert_eq!(
            queries,
            ["CREATE TABLE `a`", "CREATE TABLE `b`", "CREATE TABLE `c`"]
        );
        // A statement of a batch before the last one written counts as written.
        let (mut w, _) = writer(dir.path());
        assert!(w.on_event(ddl(40, 35, 1, "d")).is_ok());
        assert!(
            w.on_event(ddl(40, 35, 0, "e")).is_ok(),
            "an older part is skipped"
        );
        assert_eq!(w.stats.skipped.load(Ordering::Relaxed), 1);
    }
}

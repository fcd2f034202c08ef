//! The socket shell of a dump session: reads the files on the blocking pool, hands every event
//! to the [`DumpPlan`], frames what it emits, flushes, waits for the binlog to grow, and sends
//! heartbeats when it stays silent. Every decision about what goes out is the plan's.

use std::sync::Arc;
use std::time::Duration;

use tibinlog_protocol::wire::errors::ER_MASTER_FATAL_ERROR_READING_BINLOG;
use tibinlog_protocol::wire::response::{encode_eof_into, ErrResponse, OkResponse};
use tibinlog_protocol::wire::StatusFlags;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::super::session::ConnInfo;
use super::super::source::{BinlogPosition, BinlogReader, EventBatch};
use super::super::transport::{ConnError, PacketIo};
use super::super::Shared;
use super::plan::{DumpPlan, PlanError, ReadFrom};
use super::relay::Relay;
use tibinlog_protocol::binlog::EventType;

/// Events read from the source per blocking batch, and the byte cap of one batch. Small row
/// events are ~100 bytes: the event cap lets a batch reach the byte cap, so a session that
/// streams a backlog pays the blocking-pool round trip once per ~1 MiB, not per 50 KiB.
const BATCH_EVENTS: usize = 8192;
const BATCH_BYTES: usize = 1 << 20;
/// Flush the socket buffer when it holds this much.
const FLUSH_BYTES: usize = 64 * 1024;

impl From<PlanError> for ConnError {
    fn from(e: PlanError) -> Self {
        ConnError::Dump(e.to_string())
    }
}

/// A reader of a file, and the first event it read (the FORMAT_DESCRIPTION, if the file has
/// one).
type OpenedFile = (Box<dyn BinlogReader>, Option<Vec<u8>>);

/// Frames one event as a binlog packet (0x00, then the event) into the write buffer.
fn queue_event(io: &mut PacketIo) -> impl FnMut(&[u8]) + '_ {
    move |ev| io.queue_parts(&[&[0u8], ev])
}

/// When a session that caught up waits, and for how long it stays silent.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pacing {
    /// A HEARTBEAT after each silent period of this length (`None`: never).
    pub heartbeat: Option<Duration>,
    /// End with EOF at the end of the binlog instead of waiting for more.
    pub non_block: bool,
    /// The session's `net_write_timeout`: a client that reads nothing for this long ends the
    /// dump (and releases the binlog file it holds from purges), as on MySQL.
    pub write_timeout: Duration,
    /// A standby of an HA group: relay events after each transaction and at snapshot points
    /// ([`super::relay`]).
    pub relay: bool,
}

pub(super) struct DumpSession {
    shared: Arc<Shared>,
    io: PacketIo,
    plan: DumpPlan,
    reader: Option<Box<dyn BinlogReader>>,
    /// The event buffer, reused by every read (taken while a read runs).
    batch: Option<EventBatch>,
    heartbeat: Option<Duration>,
    non_block: bool,
    write_timeout: Duration,
    relay: bool,
    deprecate_eof: bool,
    cancel: CancellationToken,
    conn_id: u32,
    activity: Arc<super::super::activity::Activity>,
}

impl DumpSession {
    pub(super) fn new(
        shared: Arc<Shared>,
        io: PacketIo,
        info: &ConnInfo,
        plan: DumpPlan,
        reader: Box<dyn BinlogReader>,
        pacing: Pacing,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            shared,
            io,
            plan,
            reader: Some(reader),
            batch: Some(EventBatch::default()),
            heartbeat: pacing.heartbeat,
            non_block: pacing.non_block,
            write_timeout: pacing.write_timeout,
            relay: pacing.relay,
            deprecate_eof: tibinlog_protocol::wire::response::deprecate_eof(info.capabilities),
            cancel,
            conn_id: info.id,
            activity: info.activity.clone(),
        }
    }

    pub(super) async fn stream(&mut self) -> Result<(), ConnError> {
        debug!(conn = self.conn_id, file = %self.plan.file(), pos = self.plan.pos(), "dump starts");
        let mut end_rx = self.shared.source.subscribe_end();
        let first = if self.plan.start_needs_format_description() {
            Some(self.open_at_format_description(self.plan.file().to_string())?)
        } else {
            None
        };
        let (fde_reader, fde) = first.unzip();
        let read_from = self
            .plan
            .on_start(fde.flatten().as_deref(), &mut queue_event(&mut self.io))?;
        if read_from == ReadFrom::AfterFormatDescription {
            self.reader = fde_reader;
        }
        self.io.flush_within(self.write_timeout).await?;
        let mut closing = false;
        loop {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            end_rx.borrow_and_update();
            let mut batch = self.read_batch().await?;
            if !batch.is_empty() {
                let sent = self.send_batch(&mut batch).await;
                self.batch = Some(batch);
                sent?;
                if self.plan.until_reached() {
                    // MariaDB ends the dump after the UNTIL group as at the end of a
                    // non-blocking dump.
                    self.send_eof().await?;
                    return Ok(());
                }
                continue;
            }
            self.batch = Some(batch);
            // Caught up with this file.
            let next = self.next_file();
            if let Some(next) = next {
                if !closing {
                    // The file was closed: read once more to take its last events.
                    closing = true;
                    continue;
                }
                closing = false;
                self.switch_to(next)?;
                self.io.flush_within(self.write_timeout).await?;
                continue;
            }
            let mut sent = self.plan.on_caught_up(&mut queue_event(&mut self.io))?;
            sent |= self.send_relay_checkpoint()?;
            if sent {
                self.io.flush_within(self.write_timeout).await?;
            }
            self.publish(0, true);
            if self.non_block {
                self.send_eof().await?;
                return Ok(());
            }
            if !self.wait(&mut end_rx).await? {
                return Ok(());
            }
        }
    }

    /// A reader of `file` from offset 4, after it read the file's first event (the
    /// FORMAT_DESCRIPTION, if the file has one).
    fn open_at_format_description(&self, file: String) -> Result<OpenedFile, ConnError> {
        let mut reader = self
            .shared
            .source
            .open(&file, 4)
            .map_err(|e| ConnError::Dump(e.to_string()))?;
        let first = reader
            .next_event()
            .map_err(|e| ConnError::Dump(e.to_string()))?;
        Ok((reader, first))
    }

    /// The EOF packet that ends a dump.
    async fn send_eof(&mut self) -> Result<(), ConnError> {
        let mut p = Vec::with_capacity(8);
        if self.deprecate_eof {
            OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).encode_as_eof_into(&mut p);
        } else {
            encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p);
        }
        self.io.send(&p).await?;
        Ok(())
    }

    /// Waits for new events. False when the session must end (client gone, cancelled).
    async fn wait(
        &mut self,
        end_rx: &mut tokio::sync::watch::Receiver<BinlogPosition>,
    ) -> Result<bool, ConnError> {
        loop {
            let period = self.heartbeat.unwrap_or(Duration::from_secs(3600));
            let mut scratch = [0u8; 512];
            tokio::select! {
                _ = self.cancel.cancelled() => return Ok(false),
                r = tokio::time::timeout(period, end_rx.changed()) => match r {
                    Ok(Ok(())) => return Ok(true),
                    Ok(Err(_)) => return Err(ConnError::Dump("binlog writer is gone".into())),
                    Err(_elapsed) => {
                        if self.heartbeat.is_some() {
                            self.plan.on_heartbeat(&mut queue_event(&mut self.io))?;
                            // A checkpoint can move without new events (an idle upstream).
                            self.send_relay_checkpoint()?;
                            self.io.flush_within(self.write_timeout).await?;
                        }
                    }
                },
                r = self.io.read_some(&mut scratch) => match r {
                    // Whatever the client writes on a dump socket is ignored: the socket is
                    // one-way (connector-java's keep-alive COM_PINGs expect no answer).
                    Ok(0) | Err(_) => return Ok(false),
                    Ok(_) => {}
                },
            }
        }
    }

    /// A relay session caught up at the newest snapshot point learns its timestamp. True if
    /// something was queued.
    fn send_relay_checkpoint(&mut self) -> Result<bool, ConnError> {
        if !self.relay {
            return Ok(false);
        }
        let Some(p) = self.shared.source.snapshot_point() else {
            return Ok(false);
        };
        if p.end.file != self.plan.file() || p.end.pos != self.plan.pos() {
            return Ok(false);
        }
        let relay = Relay::Checkpoint {
            ts: p.ts,
            file: p.end.file,
            pos: p.end.pos,
        };
        self.plan.on_relay(&relay, &mut queue_event(&mut self.io))?;
        Ok(true)
    }

    /// Tells the process list where the session is; `event_secs` is the header timestamp of
    /// the last event sent (0: unchanged).
    fn publish(&self, event_secs: u32, caught_up: bool) {
        self.activity.dump_sent(
            self.plan.file(),
            self.plan.pos(),
            event_secs,
            caught_up,
            self.io.sent_bytes(),
        );
    }

    /// Sends the events of `batch`, flushing as the socket buffer fills.
    async fn send_batch(&mut self, batch: &mut EventBatch) -> Result<(), ConnError> {
        let mut last_secs = 0;
        for i in 0..batch.len() {
            if let Some(ts) = batch.get_mut(i).first_chunk::<4>() {
                last_secs = u32::from_le_bytes(*ts);
            }
            let ev = batch.get_mut(i);
            let ends_txn = self.relay
                && matches!(
                    ev.get(4).copied().map(EventType),
                    Some(EventType::XID | EventType::QUERY)
                );
            self.plan.on_event(ev, &mut queue_event(&mut self.io))?;
            if ends_txn {
                // XID, or a DDL's QUERY ("BEGIN" ends nothing: no transaction ends there).
                let tag = self
                    .shared
                    .source
                    .txn_ending_at(self.plan.file(), self.plan.pos());
                if let Some(tag) = tag {
                    self.plan
                        .on_relay(&Relay::Txn(tag), &mut queue_event(&mut self.io))?;
                }
            }
            if self.plan.until_reached() {
                break;
            }
            if self.io.pending() >= FLUSH_BYTES {
                self.io.flush_within(self.write_timeout).await?;
                self.publish(last_secs, false);
            }
        }
        self.io.flush_within(self.write_timeout).await?;
        self.publish(last_secs, false);
        Ok(())
    }

    /// Reads the next events on the blocking pool, into the session's reused batch buffer.
    async fn read_batch(&mut self) -> Result<EventBatch, ConnError> {
        let Some(mut reader) = self.reader.take() else {
            return Err(ConnError::Dump("reader lost".into()));
        };
        let mut out = self.batch.take().unwrap_or_default();
        out.clear();
        let task = tokio::task::spawn_blocking(move || {
            let res = reader.read_batch(&mut out, BATCH_EVENTS, BATCH_BYTES);
            (reader, out, res)
        });
        let (reader, mut out, res) = task
            .await
            .map_err(|e| ConnError::Dump(format!("reader task failed: {e}")))?;
        self.reader = Some(reader);
        if out.byte_len() < FLUSH_BYTES {
            out.shrink_to(4 * FLUSH_BYTES);
        }
        match res {
            Ok(()) => Ok(out),
            Err(e) if out.is_empty() => {
                let err = ErrResponse::new(ER_MASTER_FATAL_ERROR_READING_BINLOG, e.to_string());
                self.io.send(&err.to_payload()).await?;
                Err(ConnError::Dump(e.to_string()))
            }
            // Send what was read; the error comes back on the next call.
            Err(_) => Ok(out),
        }
    }

    fn next_file(&self) -> Option<String> {
        let files = self.shared.source.files();
        let i = files.iter().position(|f| f.name == self.plan.file())?;
        files.get(i + 1).map(|f| f.name.clone())
    }

    /// Goes on with the next file from its start.
    fn switch_to(&mut self, next: String) -> Result<(), ConnError> {
        let (reader, fde) = if self.plan.next_file_needs_format_description() {
            self.open_at_format_description(next.clone())?
        } else {
            let reader = self
                .shared
                .source
                .open(&next, 4)
                .map_err(|e| ConnError::Dump(e.to_string()))?;
            (reader, None)
        };
        // Whichever the plan answers, a new file is read from this reader: at offset 4, or
        // after the FORMAT_DESCRIPTION the plan already sent its own of.
        self.reader = Some(reader);
        self.plan
            .on_next_file(&next, fde.as_deref(), &mut queue_event(&mut self.io))?;
        Ok(())
    }
}

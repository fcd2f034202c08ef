//! Reading the store's events: [`StoreReader`] yields the raw bytes of each event (header,
//! body, CRC exactly as in the file) from a position onwards, follows ROTATE into the next
//! file, and at the live end waits on the writer's watch of the durable end. The index and
//! metadata it reads from are [`BinlogFiles`]'.
//!
//! Readers only ever see fsynced, complete transactions: the watch moves at group commit, after
//! the fsync. Files are plain reads through the page cache; a caller that wants them off the
//! async runtime can call [`StoreReader::try_next`] from `spawn_blocking`.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::sync::Arc;

use tibinlog_protocol::binlog::{EventHeader, EventType, GtidEvent, Sid, HEADER_LEN};
use tokio::sync::watch;

use super::error::DumpError;
use super::files::{BinlogFiles, Shared};
use super::index::file_name;
use super::scan::{open_at, read_event, ReadOutcome};
use super::StorePos;

impl BinlogFiles {
    /// A reader at `file`/`pos` (COM_BINLOG_DUMP). The position must be 4 or the end of an
    /// event at or before the durable end of the file.
    pub fn open_reader(&self, file: &str, pos: u64) -> Result<StoreReader, DumpError> {
        let seq = self.resolve(file)?;
        if pos < 4 {
            return Err(DumpError::PositionBelow4 { pos });
        }
        // On the file before it is checked, so that a purge either sees the reader or has
        // already taken the file out of the state.
        let guard = FileInUse::enter(&self.shared, seq).ok_or_else(|| DumpError::UnknownFile {
            file: file.to_owned(),
        })?;
        let end = self.end_pos();
        let (size, scan_from) = {
            let st = self.shared.read();
            let f = st.file(seq).ok_or_else(|| DumpError::UnknownFile {
                file: file.to_owned(),
            })?;
            let size = if seq == end.file_seq {
                end.offset
            } else {
                f.size
            };
            // Start the boundary check at the last transaction end at or before `pos`.
            let r = st.entries_of(seq);
            let k = st.entries[r.clone()].partition_point(|e| e.end_pos <= pos);
            let from = if k == 0 {
                4
            } else {
                st.entries[r.start + k - 1].end_pos
            };
            (size, from)
        };
        if pos > size {
            return Err(DumpError::PositionPastEnd {
                file: file.to_owned(),
                pos,
                size,
            });
        }
        if pos != scan_from {
            self.check_boundary(seq, scan_from, pos)?;
        }
        self.reader_at(StorePos::new(seq, pos), guard)
    }

    /// Hops event headers from `from` (a known boundary) to `pos`.
    fn check_boundary(&self, seq: u32, from: u64, pos: u64) -> Result<(), DumpError> {
        let path = self.shared.path(seq);
        let io = |source| DumpError::Io {
            path: path.clone(),
            source,
        };
        let mut r = open_at(&path, from).map_err(io)?;
        let mut at = from;
        let mut hdr = [0u8; HEADER_LEN];
        while at < pos {
            std::io::Read::read_exact(&mut r, &mut hdr).map_err(io)?;
            let h = EventHeader::parse(&hdr).map_err(|_| DumpError::Corrupt {
                file: self.file_name(seq),
                offset: at,
                reason: "bad event header",
            })?;
            at += u64::from(h.event_size);
            std::io::Seek::seek_relative(&mut r, i64::from(h.event_size) - HEADER_LEN as i64)
                .map_err(io)?;
        }
        if at != pos {
            return Err(DumpError::NotEventBoundary {
                file: self.file_name(seq),
                pos,
            });
        }
        Ok(())
    }

    fn reader_at(&self, pos: StorePos, in_use: FileInUse) -> Result<StoreReader, DumpError> {
        let path = self.shared.path(pos.file_seq);
        let file = open_at(&path, pos.offset).map_err(|source| DumpError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(StoreReader {
            shared: self.shared.clone(),
            end_rx: self.shared.end_rx.clone(),
            pos,
            file,
            in_sync: true,
            ahead: ReadAhead::default(),
            buf: Vec::with_capacity(16 * 1024),
            current: None,
            claim: in_use,
        })
    }

    /// A reader at the start of the file (position 4): what COM_BINLOG_DUMP_GTID streams from.
    pub fn open_reader_at(&self, pos: StorePos) -> Result<StoreReader, DumpError> {
        self.open_reader(&self.file_name(pos.file_seq), pos.offset)
    }
}

/// One event as read from a file.
#[derive(Debug, Clone, Copy)]
pub struct EventRef<'a> {
    /// File the event is in.
    pub file_seq: u32,
    /// Its start offset.
    pub start: u64,
    /// Header, body and CRC as stored.
    pub bytes: &'a [u8],
}

impl EventRef<'_> {
    /// The event's type code.
    pub fn event_type(&self) -> EventType {
        EventType(self.bytes[4])
    }
    /// Offset after the event.
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// For a GTID event: its `sid:gno` and `transaction_length` (bytes of the whole
    /// transaction from this event's start), so that a dump session can skip a transaction the
    /// replica already has with [`StoreReader::skip_to`]`(start + transaction_length)`.
    pub fn gtid(&self) -> Option<(Sid, u64, u64)> {
        if self.event_type() != EventType::GTID {
            return None;
        }
        let g = GtidEvent::parse(self.bytes.get(HEADER_LEN..)?, false).ok()?;
        Some((g.sid, g.gno, g.transaction_length))
    }
}

/// Bytes of one positioned read ahead of a reader in the open file.
const READ_AHEAD: u64 = 64 * 1024;

/// Bytes of the open file read ahead of the reader. Every byte was below the durable end when it
/// was read, and durable bytes never change, so one positioned read serves many events (instead
/// of two reads per event).
#[derive(Debug, Default)]
struct ReadAhead {
    file_seq: u32,
    /// File offset of `bytes[0]`.
    offset: u64,
    bytes: Vec<u8>,
}

impl ReadAhead {
    /// Bytes `[pos, pos + n)` of file `file_seq`; `pos + n` must not pass `limit`. When they are
    /// not held, reads from `pos` at least `n` and up to [`READ_AHEAD`] bytes, never past `limit`.
    fn get(
        &mut self,
        file: &File,
        file_seq: u32,
        pos: u64,
        n: u64,
        limit: u64,
    ) -> std::io::Result<&[u8]> {
        use std::os::unix::fs::FileExt;
        let held = self.file_seq == file_seq
            && pos >= self.offset
            && pos + n <= self.offset + self.bytes.len() as u64;
        if !held {
            let len = n.max(READ_AHEAD).min(limit - pos) as usize;
            self.bytes.clear();
            self.bytes.resize(len, 0);
            if let Err(e) = file.read_exact_at(&mut self.bytes, pos) {
                self.bytes.clear();
                return Err(e);
            }
            self.file_seq = file_seq;
            self.offset = pos;
        }
        let at = (pos - self.offset) as usize;
        Ok(&self.bytes[at..at + n as usize])
    }
}

/// Reads the event at `pos` of the open file `file_seq`, never past `limit` (the durable end).
fn read_event_at(
    ahead: &mut ReadAhead,
    file: &File,
    file_seq: u32,
    pos: u64,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<ReadOutcome> {
    if pos >= limit {
        return Ok(ReadOutcome::Eof);
    }
    if limit - pos < HEADER_LEN as u64 {
        return Ok(ReadOutcome::Torn);
    }
    let header = ahead.get(file, file_seq, pos, HEADER_LEN as u64, limit)?;
    let Ok(h) = EventHeader::parse(header) else {
        return Ok(ReadOutcome::Torn);
    };
    let size = u64::from(h.event_size);
    if size > limit - pos {
        return Ok(ReadOutcome::Torn);
    }
    buf.clear();
    buf.extend_from_slice(ahead.get(file, file_seq, pos, size, limit)?);
    Ok(ReadOutcome::Event)
}

/// Streams events from a position onwards, across files; see the module docs. The server reads
/// through its one-file `BinlogReader`s, which the store's source adapter builds on this.
#[derive(Debug)]
pub struct StoreReader {
    shared: Arc<Shared>,
    end_rx: watch::Receiver<StorePos>,
    /// Position of the next event.
    pos: StorePos,
    /// Buffered reads, used in closed files only: bytes past the durable end of the open file
    /// can still change (a spilled transaction that is aborted, a GTID event patched at commit),
    /// so the open file is read with positioned reads of exactly one event, never buffered.
    file: BufReader<File>,
    /// `file`'s position is `pos` (false after positioned reads).
    in_sync: bool,
    /// Read-ahead for the open file.
    ahead: ReadAhead,
    buf: Vec<u8>,
    /// Start of the event in `buf`, once loaded.
    current: Option<StorePos>,
    /// Keeps the file of `pos` from being purged.
    claim: FileInUse,
}

/// A reader's claim on one file: a purge stops before it. Moves with the reader from file to
/// file; released when dropped.
#[derive(Debug)]
struct FileInUse {
    shared: Arc<Shared>,
    seq: u32,
}

impl FileInUse {
    /// `None` when the file is purged or being purged.
    fn enter(shared: &Arc<Shared>, seq: u32) -> Option<Self> {
        shared.in_use().enter(seq).then(|| FileInUse {
            shared: shared.clone(),
            seq,
        })
    }

    /// Moves the claim to the next file (a reader that crossed a ROTATE). The next file is
    /// never purged while this one is held.
    fn advance(&mut self, seq: u32) {
        let mut u = self.shared.in_use();
        u.leave(self.seq);
        u.readers.entry(seq).and_modify(|n| *n += 1).or_insert(1);
        self.seq = seq;
    }
}

impl Drop for FileInUse {
    fn drop(&mut self) {
        self.shared.in_use().leave(self.seq);
    }
}

impl StoreReader {
    /// Position of the next event to read.
    pub fn position(&self) -> StorePos {
        self.pos
    }

    /// Name of the file of the next event.
    pub fn file_name(&self) -> String {
        file_name(&self.shared.basename, self.pos.file_seq)
    }

    /// Continues at `offset` of the current file, which must be an event boundary at or after
    /// the current position and not past the durable end (e.g. the end of a transaction to skip,
    /// from [`EventRef::gtid`]).
    pub fn skip_to(&mut self, offset: u64) -> Result<(), DumpError> {
        let end = *self.end_rx.borrow();
        let limit = if self.pos.file_seq == end.file_seq {
            end.offset
        } else {
            // A closed file: its whole length (the descriptor outlives a purge).
            self.file.get_ref().metadata().map_or(0, |m| m.len())
        };
        let target = StorePos::new(self.pos.file_seq, offset);
        if offset < self.pos.offset || offset > limit {
            return Err(DumpError::NotEventBoundary {
                file: self.file_name(),
                pos: offset,
            });
        }
        self.pos = target;
        self.in_sync = false;
        self.current = None;
        Ok(())
    }

    /// The next durable event, or `None` at the durable end (never blocks on the writer).
    pub fn try_next(&mut self) -> Result<Option<EventRef<'_>>, DumpError> {
        let end = *self.end_rx.borrow();
        Ok(if self.load(end)? {
            self.current()
        } else {
            None
        })
    }

    /// The next event, waiting for the writer at the live end. `Err(WriterGone)` once the
    /// writer is dropped and everything durable was read.
    pub async fn next(&mut self) -> Result<EventRef<'_>, DumpError> {
        loop {
            let end = *self.end_rx.borrow_and_update();
            if self.load(end)? {
                break;
            }
            self.end_rx
                .changed()
                .await
                .map_err(|_| DumpError::WriterGone)?;
        }
        self.current().ok_or(DumpError::WriterGone)
    }

    fn current(&self) -> Option<EventRef<'_>> {
        self.current.map(|p| EventRef {
            file_seq: p.file_seq,
            start: p.offset,
            bytes: &self.buf,
        })
    }

    /// Loads the next event into `buf` if there is a durable one. Crosses into the next file
    /// at the end of a closed file.
    fn load(&mut self, end: StorePos) -> Result<bool, DumpError> {
        self.current = None;
        loop {
            if self.pos >= end {
                return Ok(false);
            }
            let name = || file_name(&self.shared.basename, self.pos.file_seq);
            let limit = (self.pos.file_seq == end.file_seq).then_some(end.offset);
            let seq = self.pos.file_seq;
            let io = |source| DumpError::Io {
                path: self.shared.path(seq),
                source,
            };
            let outcome = match limit {
                Some(limit) => {
                    self.in_sync = false;
                    read_event_at(
                        &mut self.ahead,
                        self.file.get_ref(),
                        seq,
                        self.pos.offset,
                        limit,
                        &mut self.buf,
                    )
                    .map_err(io)?
                }
                None => {
                    if !self.in_sync {
                        self.file
                            .seek(SeekFrom::Start(self.pos.offset))
                            .map_err(io)?;
                        self.in_sync = true;
                    }
                    read_event(&mut self.file, &mut self.buf).map_err(io)?
                }
            };
            match outcome {
                ReadOutcome::Event => {
                    let len = self.buf.len() as u64;
                    let corrupt = |reason| DumpError::Corrupt {
                        file: name(),
                        offset: self.pos.offset,
                        reason,
                    };
                    if limit.is_some_and(|l| self.pos.offset + len > l) {
                        return Err(corrupt("event crosses the durable end"));
                    }
                    let log_pos = u32::from_le_bytes([
                        self.buf[13],
                        self.buf[14],
                        self.buf[15],
                        self.buf[16],
                    ]);
                    // Modulo 2^32: a file that a huge transaction took past 4 GiB wraps it.
                    if log_pos != (self.pos.offset + len) as u32 {
                        return Err(corrupt("log_pos does not match the event's end"));
                    }
                    self.current = Some(self.pos);
                    self.pos.offset += len;
                    return Ok(true);
                }
                ReadOutcome::Eof if limit.is_none() => {
                    // End of a closed file: continue at the start of the next one.
                    let next = self.pos.file_seq + 1;
                    let path = self.shared.path(next);
                    if self.shared.read().file(next).is_none() {
                        return Err(DumpError::UnknownFile {
                            file: file_name(&self.shared.basename, next),
                        });
                    }
                    self.file = open_at(&path, 4).map_err(|source| DumpError::Io {
                        path: path.clone(),
                        source,
                    })?;
                    self.in_sync = true;
                    self.claim.advance(next);
                    self.pos = StorePos::new(next, 4);
                }
                ReadOutcome::Eof | ReadOutcome::Torn => {
                    return Err(DumpError::Corrupt {
                        file: name(),
                        offset: self.pos.offset,
                        reason: "durable bytes missing",
                    })
                }
            }
        }
    }
}

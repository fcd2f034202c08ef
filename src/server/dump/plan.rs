//! The decisions of a dump session, without sockets, tasks or clocks: given the request, the
//! client's session settings and the events read from the binlog, which events go out.
//!
//! ```text
//!  plan_start(request) ─► Start (file, pos, GTIDs to skip, MariaDB position/UNTIL) | 1236 text
//!  DumpPlan::new(start)
//!    on_start(file FDE) ─► fake ROTATE, [FORMAT_DESCRIPTION]
//!    on_event(ev)       ─► ev as sent (CRC stripped, FDE patched, MariaDB flavour) | nothing
//!    on_next_file(..)   ─► fake ROTATE(next, 4) [, MariaDB FORMAT_DESCRIPTION]
//!    on_caught_up()     ─► HEARTBEAT or MariaDB fake GTID_LIST after skipped transactions
//!    on_heartbeat()     ─► HEARTBEAT at the current position
//! ```
//!
//! The shell ([`super::session`]) reads the files, calls these in file order and frames what
//! they emit; when and how often it calls `on_heartbeat`, and how it flushes, is its business.
//! Events are emitted through a callback, so an event that goes out as stored (or patched in
//! place) is never copied here.
//!
//! [`plan_start`] reads the source's index only (files and GTID sets, which sources keep in
//! memory), never an event.

use tibinlog_protocol::binlog::checksum::strip_crc;
use tibinlog_protocol::binlog::events::format_desc::{self, checksum_alg_of};
use tibinlog_protocol::binlog::mariadb_stream::{self, GtidFlavour};
use tibinlog_protocol::binlog::{
    flags, read, ChecksumAlg, EventMeta, EventType, EventWriter, GtidSet, Heartbeat, LogPos,
    MariadbGtid, Rotate,
};

mod start;

use self::start::MARIA_SLAVE_CAPABILITY_GTID;
pub use self::start::{
    heartbeat_period, open_error, plan_start, DumpRequest, Settings, Start, Until,
};

/// Why the plan cannot go on (the dump ends; nothing is sent to the client).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("event shorter than its header")]
    ShortEvent,
    #[error("{file} does not start with a FORMAT_DESCRIPTION event")]
    NoFormatDescription { file: String },
    #[error("FORMAT_DESCRIPTION shorter than its header")]
    ShortFormatDescription,
    #[error("{0}")]
    Encode(#[from] tibinlog_protocol::binlog::BinlogError),
}

/// Which reader the shell goes on with after a file start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// The reader it already has (a start past the file's FORMAT_DESCRIPTION).
    Current,
    /// The one that read the file's FORMAT_DESCRIPTION, now right after it.
    AfterFormatDescription,
}

/// How events are rewritten for this client.
#[derive(Debug, Clone, Copy)]
struct StreamMode {
    /// Remove every event's CRC (client never announced a checksum, files have CRC32).
    strip: bool,
    /// The first fake ROTATE (before any FORMAT_DESCRIPTION) carries a CRC32.
    fake_rotate_crc: bool,
    /// Events go out with a CRC32 (the files have one and it is not stripped); heartbeats too.
    events_crc: bool,
    /// The client is a MariaDB replica or tool: QUERY events get MariaDB collation ids
    /// ([`mariadb_stream`]).
    mariadb: bool,
}

/// State of a MariaDB-flavoured session ([`mariadb_stream`]).
#[derive(Debug)]
struct MariaSession {
    flavour: GtidFlavour,
    /// The client's position (`0-<server_id>-<gno>`), announced with a fake GTID_LIST once the
    /// transactions up to it are skipped; `None` once announced.
    announce: Option<u64>,
    /// `START SLAVE UNTIL master_gtid_pos`: where to stop (`None`: no stop, or reached).
    until: Option<Until>,
    /// Where the event group being read is.
    group: Group,
    /// The group being read is past the UNTIL position: its events are not sent.
    skip_group: bool,
    /// The UNTIL position is reached: the dump ends after the group being read.
    stop_after_group: bool,
    /// The last GNO read (sent or skipped): the binlog state the UNTIL stop reports.
    last_gno: u64,
}

/// The event group being read, to find where it ends (MariaDB's group rule: a transaction ends
/// with XID or a COMMIT/ROLLBACK QUERY; a standalone statement is the one event after its GTID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Outside,
    AfterGtid,
    Transaction,
}

/// The sink of the events that go out, one complete event per call.
pub type Emit<'a> = &'a mut dyn FnMut(&[u8]);

/// One dump session's decisions (see the module docs).
///
/// Invariant: `pos` is the offset in `file` after the last event read (sent or skipped), the
/// position heartbeats and fake events report.
#[derive(Debug)]
pub struct DumpPlan {
    mode: StreamMode,
    have: Option<GtidSet>,
    /// File being sent and the offset after the last event sent or skipped.
    file: String,
    pos: u64,
    /// Inside a transaction whose GTID the client already has.
    skipping: bool,
    /// Skipped bytes since the last event sent: a heartbeat tells the client where we are.
    skipped_since_send: bool,
    server_id: u32,
    /// MariaDB GTID flavour: a MariaDB client that started with `@slave_connect_state`, or
    /// any GTID-aware MariaDB client (`@mariadb_slave_capability` ≥ 4), as a MariaDB master
    /// sends it.
    maria: Option<MariaSession>,
    /// The UNTIL position was reached and announced: the dump ends.
    until_reached: bool,
    /// The bytes of the last event made up here (heartbeat, fake ROTATE, relay event).
    scratch: Vec<u8>,
}

impl DumpPlan {
    pub fn new(settings: &Settings, start: Start) -> Self {
        let announced = settings.announced_checksum.as_deref();
        let strip = announced.is_none() && settings.files_crc;
        let mode = StreamMode {
            strip,
            fake_rotate_crc: announced.is_some_and(|a| a.eq_ignore_ascii_case("CRC32")),
            events_crc: settings.files_crc && !strip,
            mariadb: settings.mariadb_client && settings.mariadb_capability.is_some(),
        };
        let gtid_aware = settings
            .mariadb_capability
            .is_some_and(|c| c >= MARIA_SLAVE_CAPABILITY_GTID);
        let flavoured = start.mariadb_after.is_some() || (mode.mariadb && gtid_aware);
        let maria = flavoured.then(|| {
            let after = start.mariadb_after.unwrap_or(0);
            MariaSession {
                flavour: GtidFlavour::new(settings.server_id, settings.sid.0, mode.events_crc),
                announce: (after > 0).then_some(after),
                until: start.until,
                group: Group::Outside,
                skip_group: false,
                stop_after_group: false,
                last_gno: after,
            }
        });
        Self {
            mode,
            have: start.have,
            file: start.from.file,
            pos: start.from.pos,
            skipping: false,
            skipped_since_send: false,
            server_id: settings.server_id,
            maria,
            until_reached: false,
            scratch: Vec::with_capacity(64),
        }
    }

    /// The file being sent.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The offset after the last event read.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The UNTIL position was reached and announced: the shell ends the dump.
    pub fn until_reached(&self) -> bool {
        self.until_reached
    }

    /// [`Self::on_start`] needs the first event of the start file (its FORMAT_DESCRIPTION).
    pub fn start_needs_format_description(&self) -> bool {
        self.maria.is_some() || self.pos > 4
    }

    /// [`Self::on_next_file`] needs the first event of the next file.
    pub fn next_file_needs_format_description(&self) -> bool {
        self.maria.is_some()
    }

    /// The start of the stream: fake ROTATE to the start position, then for a start past
    /// offset 4 (every MariaDB-flavoured start) the file's FORMAT_DESCRIPTION. `fde`: the
    /// first event of the start file, when [`Self::start_needs_format_description`].
    pub fn on_start(&mut self, fde: Option<&[u8]>, emit: Emit<'_>) -> Result<ReadFrom, PlanError> {
        if self.maria.is_some() {
            // A GTID start reads its file from the start; a file/position start from there.
            let from = (self.pos > 4).then_some(self.pos);
            return self.start_mariadb_file(self.mode.fake_rotate_crc, from, fde, emit);
        }
        self.send_fake_rotate(self.mode.fake_rotate_crc, emit)?;
        if self.pos > 4 {
            self.send_start_fde(fde, emit)?;
        }
        Ok(ReadFrom::Current)
    }

    /// The session caught up with a closed file and goes on with `next` from its start. `fde`:
    /// the first event of `next`, when [`Self::next_file_needs_format_description`]. The shell
    /// reads on from offset 4, or from after the FORMAT_DESCRIPTION as the answer says.
    pub fn on_next_file(
        &mut self,
        next: &str,
        fde: Option<&[u8]>,
        emit: Emit<'_>,
    ) -> Result<ReadFrom, PlanError> {
        self.file = next.to_string();
        self.skipping = false;
        if self.maria.is_some() {
            // A FORMAT_DESCRIPTION was sent: the client reads this one with the stream's algorithm.
            return self.start_mariadb_file(self.mode.events_crc, None, fde, emit);
        }
        self.pos = 4;
        // A FORMAT_DESCRIPTION was sent: the client reads this one with the stream's algorithm.
        self.send_fake_rotate(self.mode.events_crc, emit)?;
        Ok(ReadFrom::Current)
    }

    /// One event read from the file, in file order, as stored; patched in place before it is
    /// emitted (or skipped).
    pub fn on_event(&mut self, ev: &mut [u8], emit: Emit<'_>) -> Result<(), PlanError> {
        let Some(&ty) = ev.get(4) else {
            return Err(PlanError::ShortEvent);
        };
        let ty = EventType(ty);
        self.pos += ev.len() as u64;
        if let Some(have) = &self.have {
            if ty == EventType::GTID {
                self.skipping =
                    read::gtid_of_event(ev).is_some_and(|(sid, gno)| have.contains(&sid, gno));
            } else if matches!(
                ty,
                EventType::ROTATE | EventType::FORMAT_DESCRIPTION | EventType::PREVIOUS_GTIDS
            ) {
                self.skipping = false;
            }
            if self.skipping {
                self.skipped_since_send = true;
                return Ok(());
            }
        }
        if self.maria.is_some() {
            return self.on_mariadb_event(ev, ty, emit);
        }
        let ev = if ty == EventType::FORMAT_DESCRIPTION {
            format_desc::patch_for_sending(ev, false, self.mode.strip);
            ev
        } else if self.mode.strip {
            strip_crc(ev)
        } else {
            ev
        };
        if self.mode.mariadb {
            mariadb_stream::patch_query_event(ev, self.mode.events_crc);
        }
        self.skipped_since_send = false;
        emit(ev);
        Ok(())
    }

    /// The session read everything there is and waits: if events were skipped since the last
    /// one sent, the client learns the position it is at (a MariaDB fake GTID_LIST while the
    /// client's position is not announced yet, else a HEARTBEAT). True if something was
    /// emitted.
    pub fn on_caught_up(&mut self, emit: Emit<'_>) -> Result<bool, PlanError> {
        if !self.skipped_since_send {
            return Ok(false);
        }
        if self.maria.as_ref().is_some_and(|m| m.announce.is_some()) {
            self.send_fake_gtid_list(self.pos, emit)?;
        } else {
            self.on_heartbeat(emit)?;
        }
        Ok(true)
    }

    /// A HEARTBEAT naming the file and the position after the last event read.
    pub fn on_heartbeat(&mut self, emit: Emit<'_>) -> Result<(), PlanError> {
        // The header's 32 bits wrap past 4 GiB, as the file's own events do.
        emit_made(
            (self.server_id, self.mode.events_crc),
            &mut self.scratch,
            self.pos as u32,
            0,
            &Heartbeat { file: &self.file },
            emit,
        )?;
        self.skipped_since_send = false;
        Ok(())
    }

    /// A relay event ([`super::relay`]) for a standby of an HA group, with the stream's
    /// checksum; it takes no room in the file (log_pos 0).
    pub fn on_relay(
        &mut self,
        relay: &super::relay::Relay,
        emit: Emit<'_>,
    ) -> Result<(), PlanError> {
        emit_made(
            (self.server_id, self.mode.events_crc),
            &mut self.scratch,
            0,
            flags::ARTIFICIAL | flags::IGNORABLE,
            relay,
            emit,
        )
    }

    /// One event of a MariaDB-flavoured session (after the GTID skipping).
    fn on_mariadb_event(
        &mut self,
        ev: &mut [u8],
        ty: EventType,
        emit: Emit<'_>,
    ) -> Result<(), PlanError> {
        if ty == EventType::FORMAT_DESCRIPTION {
            // Sent by `start_mariadb_file`; a file has one, at offset 4.
            return Ok(());
        }
        let stored_crc = self.mode.events_crc || self.mode.strip;
        let Some(m) = self.maria.as_mut() else {
            return Ok(());
        };
        // Group boundaries, the UNTIL position, and the GNO the UNTIL stop reports.
        let mut group_ends = false;
        match ty {
            EventType::GTID => {
                m.group = Group::AfterGtid;
                if let Some((_, gno)) = read::gtid_of_event(ev) {
                    m.last_gno = gno;
                    match m.until {
                        Some(Until::SkipAll) => m.skip_group = true,
                        Some(Until::At { server_id, seq_no })
                            if server_id == self.server_id && gno >= seq_no =>
                        {
                            m.until = None;
                            m.stop_after_group = true;
                            // A GTID past the UNTIL one: that one is not in our binlog, and
                            // this group is already beyond it.
                            m.skip_group = gno > seq_no;
                        }
                        _ => {}
                    }
                }
            }
            EventType::QUERY if m.group == Group::AfterGtid => {
                if mariadb_stream::query_text(ev, stored_crc) == Some(&b"BEGIN"[..]) {
                    m.group = Group::Transaction;
                } else {
                    group_ends = true;
                }
            }
            EventType::XID => group_ends = true,
            EventType::QUERY if m.group == Group::Transaction => {
                let text = mariadb_stream::query_text(ev, stored_crc);
                group_ends = matches!(text, Some(b"COMMIT") | Some(b"ROLLBACK"));
            }
            _ => {}
        }
        let skip = m.skip_group;
        if group_ends {
            m.group = Group::Outside;
            m.skip_group = false;
        }
        let stop = group_ends && m.stop_after_group;
        if skip {
            self.skipped_since_send = true;
        } else {
            if self.skipped_since_send && m.announce.is_some() {
                let before = self.pos - ev.len() as u64;
                self.send_fake_gtid_list(before, emit)?;
            }
            let ev = if self.mode.strip { strip_crc(ev) } else { ev };
            if let Some(m) = self.maria.as_mut() {
                m.flavour.feed(ev, |e| emit(e))?;
            }
            self.skipped_since_send = false;
        }
        if stop {
            self.send_until_reached(emit)?;
        }
        Ok(())
    }

    /// The fake GTID_LIST that tells a MariaDB replica its UNTIL position is reached (flag
    /// `FLAG_UNTIL_REACHED`, the binlog state up to the last group read), with log_pos = the
    /// offset after that group; the dump then ends.
    fn send_until_reached(&mut self, emit: Emit<'_>) -> Result<(), PlanError> {
        let Some(m) = self.maria.as_mut() else {
            return Ok(());
        };
        m.stop_after_group = false;
        let meta = EventMeta {
            timestamp: 0,
            // The 32-bit field wraps past 4 GiB, as in the events themselves.
            log_pos: LogPos::Fixed(self.pos as u32),
            flags: flags::ARTIFICIAL,
        };
        let list = [MariadbGtid {
            domain_id: mariadb_stream::DOMAIN,
            server_id: self.server_id,
            seq_no: m.last_gno,
        }];
        let ev = mariadb_stream::gtid_list_event(
            self.server_id,
            meta,
            &list,
            true,
            0,
            self.mode.events_crc,
        )?;
        emit(&ev);
        self.skipped_since_send = false;
        self.until_reached = true;
        Ok(())
    }

    /// Starts sending `self.file` to a MariaDB-flavoured session: fake ROTATE naming the offset
    /// where the events start, then MariaDB's FORMAT_DESCRIPTION with log_pos 0 (not counted by
    /// the replica), then the file's events from that offset ([`mariadb_stream`], position rule).
    /// `from`: a start past the file's own FORMAT_DESCRIPTION, where the session's reader
    /// already is; `None` starts right after it.
    fn start_mariadb_file(
        &mut self,
        rotate_crc: bool,
        from: Option<u64>,
        fde: Option<&[u8]>,
        emit: Emit<'_>,
    ) -> Result<ReadFrom, PlanError> {
        let fde = fde.filter(|e| e.get(4) == Some(&EventType::FORMAT_DESCRIPTION.0));
        let Some(fde) = fde else {
            return Err(PlanError::NoFormatDescription {
                file: self.file.clone(),
            });
        };
        let after_fde = 4 + fde.len() as u64;
        let read_from = match from {
            Some(at) if at > after_fde => {
                self.pos = at;
                ReadFrom::Current
            }
            _ => {
                self.pos = after_fde;
                ReadFrom::AfterFormatDescription
            }
        };
        self.send_fake_rotate(rotate_crc, emit)?;
        let alg = if self.mode.strip {
            Some(ChecksumAlg::Off)
        } else {
            checksum_alg_of(fde)
        };
        let ev = alg
            .and_then(|alg| mariadb_stream::format_description(fde, alg))
            .ok_or(PlanError::ShortFormatDescription)?;
        emit(&ev);
        if let Some(m) = self.maria.as_mut() {
            m.flavour.reset();
            m.group = Group::Outside;
        }
        Ok(read_from)
    }

    /// MariaDB's fake GTID_LIST after the skipped transactions: the client's position, with
    /// log_pos = the offset after them, so the replica's read position moves over the gap.
    fn send_fake_gtid_list(&mut self, log_pos: u64, emit: Emit<'_>) -> Result<(), PlanError> {
        let Some(after) = self.maria.as_mut().and_then(|m| m.announce.take()) else {
            return Ok(());
        };
        let meta = EventMeta {
            timestamp: 0,
            log_pos: LogPos::Fixed(log_pos as u32),
            flags: flags::ARTIFICIAL,
        };
        let list = [MariadbGtid {
            domain_id: mariadb_stream::DOMAIN,
            server_id: self.server_id,
            seq_no: after,
        }];
        let ev = mariadb_stream::gtid_list_event(
            self.server_id,
            meta,
            &list,
            false,
            0,
            self.mode.events_crc,
        )?;
        self.skipped_since_send = false;
        emit(&ev);
        Ok(())
    }

    fn send_fake_rotate(&mut self, crc: bool, emit: Emit<'_>) -> Result<(), PlanError> {
        emit_made(
            (self.server_id, crc),
            &mut self.scratch,
            0,
            flags::ARTIFICIAL,
            &Rotate {
                position: self.pos,
                next_file: &self.file,
            },
            emit,
        )
    }

    /// The file's FORMAT_DESCRIPTION for a start past offset 4: log_pos 0, create time 0.
    fn send_start_fde(&mut self, fde: Option<&[u8]>, emit: Emit<'_>) -> Result<(), PlanError> {
        let Some(fde) = fde.filter(|e| e.get(4) == Some(&EventType::FORMAT_DESCRIPTION.0)) else {
            return Err(PlanError::NoFormatDescription {
                file: self.file.clone(),
            });
        };
        let mut fde = fde.to_vec();
        format_desc::patch_for_sending(&mut fde, true, self.mode.strip);
        emit(&fde);
        Ok(())
    }
}

/// Writes an event the server makes up (HEARTBEAT, fake ROTATE, relay event) into `buf`,
/// reused from one to the next, and emits it: timestamp 0, `log_pos`, `flags`, a CRC32 if
/// `crc`.
fn emit_made(
    (server_id, crc): (u32, bool),
    buf: &mut Vec<u8>,
    log_pos: u32,
    flags: u16,
    body: &impl tibinlog_protocol::binlog::EventBody,
    emit: Emit<'_>,
) -> Result<(), PlanError> {
    buf.clear();
    EventWriter::new(server_id, crc).write_with(
        buf,
        EventMeta {
            timestamp: 0,
            log_pos: LogPos::Fixed(log_pos),
            flags,
        },
        body,
    )?;
    emit(buf);
    Ok(())
}

#[cfg(test)]
mod tests;

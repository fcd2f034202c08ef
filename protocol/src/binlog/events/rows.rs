//! WRITE / UPDATE / DELETE_ROWS_EVENT v2 (30 / 31 / 32) and v1 (23 / 24 / 25), split into events
//! of at most [`EventWriter::max_rows_event_size`] bytes.
//!
//! ```text
//! post-header: | table id 6 | flags 2 | extra-data length 2 (v2 only; 2 = none) |
//! body:        | n lenenc | present bitmap ceil(n/8) | [UPDATE: after-image bitmap] | rows ... |
//! row:         WRITE: after image; DELETE: before image; UPDATE: before image, after image
//! ```
//! Every column is present (`binlog_row_image=FULL`), so both bitmaps are all ones. The last
//! event of a statement carries STMT_END_F; readers (go-mysql, MySQL replicas) drop their table
//! maps there, so each statement needs its own TABLE_MAP.

use crate::binlog::codec::put_lenenc;
use crate::binlog::error::Result;
use crate::binlog::header::{EventType, HEADER_LEN};
use crate::binlog::table::TableDef;
use crate::binlog::value::encode_row_image;
use crate::binlog::writer::{EventMeta, EventWriter, LogPos};
use crate::value::Value;

/// Rows-event flags.
pub mod rows_flags {
    /// Last rows event of a statement.
    pub const STMT_END_F: u16 = 0x0001;
    /// `foreign_key_checks=0` for this statement.
    pub const NO_FOREIGN_KEY_CHECKS_F: u16 = 0x0002;
    /// `unique_checks=0` for this statement.
    pub const RELAXED_UNIQUE_CHECKS_F: u16 = 0x0004;
    /// All columns are present.
    pub const COMPLETE_ROWS_F: u16 = 0x0008;
}

/// Which rows event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowsKind {
    Write,
    Update,
    Delete,
}

/// Rows-event layout version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowsVersion {
    /// Types 23..25, 8-byte post-header (MariaDB's default).
    V1,
    /// Types 30..32, 10-byte post-header (MySQL 5.6+).
    #[default]
    V2,
}

impl RowsKind {
    /// The event type code for `version`.
    pub fn event_type(self, version: RowsVersion) -> EventType {
        match (self, version) {
            (Self::Write, RowsVersion::V2) => EventType::WRITE_ROWS,
            (Self::Update, RowsVersion::V2) => EventType::UPDATE_ROWS,
            (Self::Delete, RowsVersion::V2) => EventType::DELETE_ROWS,
            (Self::Write, RowsVersion::V1) => EventType::WRITE_ROWS_V1,
            (Self::Update, RowsVersion::V1) => EventType::UPDATE_ROWS_V1,
            (Self::Delete, RowsVersion::V1) => EventType::DELETE_ROWS_V1,
        }
    }
}

/// Streams the rows of one statement on one table into rows events.
///
/// Rows are encoded straight into the output buffer. When a row would push the open event past
/// the size limit, the events so far are closed (header, CRC) and the row moves to a new event.
/// [`RowsWriter::finish`] closes the last event with STMT_END_F and returns the file offset after
/// it. A row that fails to encode leaves no bytes behind and the writer stays usable.
#[derive(Debug)]
pub struct RowsWriter<'a> {
    writer: &'a mut EventWriter,
    buf: &'a mut Vec<u8>,
    table: &'a TableDef,
    kind: RowsKind,
    version: RowsVersion,
    timestamp: u32,
    /// Flags other than STMT_END_F, written on every event of the statement.
    flags: u16,
    /// File offset of the open event.
    pos: u64,
    /// Index in `buf` of the open event's header.
    event_start: usize,
    rows_in_event: usize,
}

impl EventWriter {
    /// Starts the rows events of one statement at file offset `pos`; `table` must be the table of
    /// the TABLE_MAP written just before.
    pub fn rows<'a>(
        &'a mut self,
        buf: &'a mut Vec<u8>,
        pos: u64,
        timestamp: u32,
        table: &'a TableDef,
        kind: RowsKind,
    ) -> RowsWriter<'a> {
        let event_start = buf.len();
        let mut w = RowsWriter {
            writer: self,
            buf,
            table,
            kind,
            version: RowsVersion::V2,
            timestamp,
            flags: 0,
            pos,
            event_start,
            rows_in_event: 0,
        };
        w.open_event();
        w
    }
}

impl RowsWriter<'_> {
    /// Switches the layout version; only before the first row.
    pub fn with_version(mut self, version: RowsVersion) -> Self {
        debug_assert_eq!(self.rows_in_event, 0);
        self.buf.truncate(self.event_start);
        self.version = version;
        self.open_event();
        self
    }

    /// Adds flags (e.g. [`rows_flags::NO_FOREIGN_KEY_CHECKS_F`]) to every event of the statement.
    pub fn with_flags(mut self, flags: u16) -> Self {
        self.flags = flags & !rows_flags::STMT_END_F;
        self
    }

    fn open_event(&mut self) {
        let buf = &mut *self.buf;
        self.event_start = buf.len();
        buf.resize(buf.len() + HEADER_LEN, 0);
        buf.extend_from_slice(&self.table.table_id.to_le_bytes()[..6]);
        buf.extend_from_slice(&[0, 0]); // flags, patched when the event is closed
        if self.version == RowsVersion::V2 {
            buf.extend_from_slice(&2u16.to_le_bytes());
        }
        let n = self.table.columns.len();
        put_lenenc(buf, n as u64);
        let images = if self.kind == RowsKind::Update { 2 } else { 1 };
        // MySQL sets whole bytes (`bitmap_set_all`), unused high bits included.
        buf.resize(buf.len() + images * n.div_ceil(8), 0xff);
        self.rows_in_event = 0;
    }

    fn close_event(&mut self, stmt_end: bool) -> Result<()> {
        let flags = self.flags | if stmt_end { rows_flags::STMT_END_F } else { 0 };
        let at = self.event_start + HEADER_LEN + 6;
        self.buf[at..at + 2].copy_from_slice(&flags.to_le_bytes());
        let meta = EventMeta {
            timestamp: self.timestamp,
            log_pos: LogPos::StartsAt(self.pos),
            flags: 0,
        };
        let crc = self.writer.checksum;
        let n = self.writer.finish_event(
            self.buf,
            self.event_start,
            self.kind.event_type(self.version),
            meta,
            0,
            crc,
        )?;
        self.pos += n as u64;
        Ok(())
    }

    /// Moves the row just encoded at `row_start` into a new event when the open one got too big.
    fn after_row(&mut self, row_start: usize) -> Result<()> {
        let len = self.buf.len() - self.event_start + self.writer.checksum_len();
        if len > self.writer.max_rows_event_size && self.rows_in_event > 0 {
            let mut scratch = std::mem::take(&mut self.writer.scratch);
            scratch.clear();
            scratch.extend_from_slice(&self.buf[row_start..]);
            self.buf.truncate(row_start);
            let closed = self.close_event(false);
            if closed.is_ok() {
                self.open_event();
                self.buf.extend_from_slice(&scratch);
            }
            self.writer.scratch = scratch;
            closed?;
        }
        self.rows_in_event += 1;
        Ok(())
    }

    /// Adds a row to a WRITE (after image) or DELETE (before image) statement.
    pub fn write_row(&mut self, row: &[Value]) -> Result<()> {
        debug_assert!(self.kind != RowsKind::Update, "UPDATE rows need update_row");
        let row_start = self.buf.len();
        encode_row_image(self.table, row, self.buf)?;
        self.after_row(row_start)
    }

    /// Adds a row change to an UPDATE statement.
    pub fn update_row(&mut self, before: &[Value], after: &[Value]) -> Result<()> {
        debug_assert!(
            self.kind == RowsKind::Update,
            "update_row on a WRITE/DELETE statement"
        );
        let row_start = self.buf.len();
        encode_row_image(self.table, before, self.buf)?;
        if let Err(e) = encode_row_image(self.table, after, self.buf) {
            self.buf.truncate(row_start);
            return Err(e);
        }
        self.after_row(row_start)
    }

    /// Closes the last event with STMT_END_F. Returns the file offset after it.
    pub fn finish(mut self) -> Result<u64> {
        self.close_event(true)?;
        Ok(self.pos)
    }
}

//! Writing a whole MySQL-flavour transaction as one contiguous append:
//!
//! ```text
//! GTID | QUERY "BEGIN" | (TABLE_MAP | rows events ... STMT_END_F)+ | XID        (row DML)
//! GTID | QUERY <ddl>                                                             (DDL)
//! ```
//! The GTID event's `transaction_length` counts the whole transaction including itself, so it is
//! known only at the end. [`Transaction`] reserves the GTID event with a guessed length width,
//! writes the other events after it, and at [`Transaction::commit`] writes the real GTID event; in
//! the rare case its size changed, the following events move and their `log_pos` and CRC are
//! rewritten.
//!
//! ```no_run
//! # use tibinlog_protocol::binlog::*;
//! # fn f(table: &TableDef, rows: &[Vec<tibinlog_protocol::value::Value>]) -> Result<()> {
//! let mut w = EventWriter::new(1, true);
//! let mut buf = Vec::new();
//! let gtid = GtidEvent::anonymous(1, 1_700_000_000_000_000, 80036);
//! let mut tx = Transaction::begin(&mut w, &mut buf, 157, 1_700_000_000, gtid);
//! tx.write(&QueryEvent::begin(7))?;
//! tx.write(&TableMap::new(table))?;
//! tx.rows(table, RowsKind::Write, |r| rows.iter().try_for_each(|row| r.write_row(row)))?;
//! let end = tx.commit(42)?; // appends XID 42; `end` is the next event's offset
//! # Ok(()) }
//! ```

use super::error::Result;
use super::events::gtid::GtidEvent;
use super::events::rows::{RowsKind, RowsWriter};
use super::events::Xid;
use super::table::TableDef;
use super::writer::{shift_log_pos, EventBody, EventWriter};

/// A transaction being appended to a buffer; see the module docs.
#[derive(Debug)]
pub struct Transaction<'a> {
    writer: &'a mut EventWriter,
    buf: &'a mut Vec<u8>,
    gtid: GtidEvent,
    timestamp: u32,
    /// Index of the GTID event in `buf`.
    start_idx: usize,
    /// File offset of the GTID event.
    start_pos: u64,
    /// Bytes reserved for the GTID event.
    gtid_len: usize,
    /// File offset after the last event written.
    pos: u64,
}

impl<'a> Transaction<'a> {
    /// Starts a transaction at file offset `pos`. `gtid.transaction_length` is computed here.
    pub fn begin(
        writer: &'a mut EventWriter,
        buf: &'a mut Vec<u8>,
        pos: u64,
        timestamp: u32,
        mut gtid: GtidEvent,
    ) -> Self {
        // Guess the 3-byte lenenc width (totals 251..65535): typical small transactions.
        gtid.transaction_length = 0xffff;
        let gtid_len = gtid.event_len(writer.checksum);
        let start_idx = buf.len();
        buf.resize(start_idx + gtid_len, 0);
        Self {
            writer,
            buf,
            gtid,
            timestamp,
            start_idx,
            start_pos: pos,
            gtid_len,
            pos: pos + gtid_len as u64,
        }
    }

    /// File offset after the events written so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Appends one event (QUERY, TABLE_MAP, ROWS_QUERY, ...).
    pub fn write(&mut self, ev: &impl EventBody) -> Result<()> {
        self.pos = self.writer.write(self.buf, self.pos, self.timestamp, ev)?;
        Ok(())
    }

    /// Appends the rows events of one statement, produced by `f`. On error the statement's
    /// bytes are removed (the transaction may go on or be aborted).
    pub fn rows(
        &mut self,
        table: &TableDef,
        kind: RowsKind,
        f: impl FnOnce(&mut RowsWriter<'_>) -> Result<()>,
    ) -> Result<()> {
        let mark = self.buf.len();
        let mut rw = self
            .writer
            .rows(self.buf, self.pos, self.timestamp, table, kind);
        let res = f(&mut rw).and_then(|()| rw.finish());
        match res {
            Ok(end) => {
                self.pos = end;
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(mark);
                Err(e)
            }
        }
    }

    /// Ends a row transaction with XID `xid`. Returns the offset after the transaction.
    pub fn commit(mut self, xid: u64) -> Result<u64> {
        self.write(&Xid(xid))?;
        self.finish()
    }

    /// Ends the transaction without an XID (DDL: the QUERY carries Q_DDL_LOGGED_WITH_XID).
    /// Returns the offset after the transaction.
    pub fn finish(mut self) -> Result<u64> {
        let crc = self.writer.checksum;
        let rest = self.pos - self.start_pos - self.gtid_len as u64;
        self.gtid.set_transaction_length(rest, crc);
        let mut ev = std::mem::take(&mut self.writer.scratch);
        ev.clear();
        let res = self
            .writer
            .write(&mut ev, self.start_pos, self.timestamp, &self.gtid);
        let new_len = ev.len();
        let out = res.and_then(|_| {
            self.buf.splice(
                self.start_idx..self.start_idx + self.gtid_len,
                ev.iter().copied(),
            );
            let delta = new_len as i64 - self.gtid_len as i64;
            if delta != 0 {
                shift_log_pos(&mut self.buf[self.start_idx + new_len..], delta, crc)?;
            }
            Ok(self.pos.wrapping_add_signed(delta))
        });
        self.writer.scratch = ev;
        out
    }

    /// Drops everything written for this transaction from the buffer.
    pub fn abort(self) {
        self.buf.truncate(self.start_idx);
    }

    /// The GTID event as it will be written (its `transaction_length` is final only after commit).
    pub fn gtid(&self) -> &GtidEvent {
        &self.gtid
    }
}

//! An HA standby's writes: a transaction of the owner's binlog taken byte for byte, after
//! checking that it is exactly what this store would write next.

use tibinlog_protocol::binlog::HEADER_LEN;

use super::{BinlogStore, Committed};
use crate::binlog_store::error::{Result, StoreError};
use crate::binlog_store::scan::{ScannedTxn, TxnScanner};
use crate::model::Ts;

impl BinlogStore {
    /// Appends a transaction another instance wrote (a standby following the owner's binlog):
    /// `events` are its events as they are in the owner's file (GTID … XID, or GTID + DDL
    /// QUERY, checksums included), `start_ts`/`commit_ts`/`part` what the owner's mapping says
    /// of it. The bytes are taken only if they are exactly what this store would write next:
    /// in order, at this position (every event's `log_pos`), with the next GNO and
    /// `sequence_number` of this server UUID, each event whole and its checksum right. Then
    /// everything after is as for a transaction written here: mapping, group commit, rotation
    /// after a full file (which the owner's ROTATE that follows must match).
    pub fn relay_txn(
        &mut self,
        events: &[u8],
        start_ts: Ts,
        commit_ts: Ts,
        part: u32,
    ) -> Result<Committed> {
        if self.txn.is_some() {
            return Err(StoreError::TxnState {
                call: "relay_txn",
                state: "inside a transaction",
            });
        }
        self.check_order(commit_ts, start_ts, part)?;
        let scanned = self.check_relayed(events)?;
        self.pending.extend_from_slice(events);
        self.pos += events.len() as u64;
        self.committed(
            (commit_ts, start_ts, part),
            scanned.gno,
            scanned.sequence_number,
            scanned.timestamp,
        )
    }

    /// The checks of [`Self::relay_txn`]; the transaction's GTID as scanned.
    fn check_relayed(&self, events: &[u8]) -> Result<ScannedTxn> {
        use tibinlog_protocol::binlog::checksum::verify_event;
        use tibinlog_protocol::binlog::EventHeader;
        let refuse = |at: usize, reason: String| StoreError::RelayMismatch {
            file: self.file_name(),
            offset: self.pos + at as u64,
            reason,
        };
        let mut scanner = TxnScanner::default();
        let mut at = 0usize;
        while at < events.len() {
            let h = EventHeader::parse(&events[at..])
                .map_err(|e| refuse(at, format!("bad event header: {e}")))?;
            let len = h.event_size as usize;
            let Some(ev) = events.get(at..at + len).filter(|_| len >= HEADER_LEN) else {
                return Err(refuse(at, format!("event of {len} bytes cut off")));
            };
            if h.server_id != self.cfg.server_id {
                return Err(refuse(
                    at,
                    format!("server_id {}, here {}", h.server_id, self.cfg.server_id),
                ));
            }
            let end = self.pos + (at + len) as u64;
            if u64::from(h.log_pos) != end & u64::from(u32::MAX) {
                return Err(refuse(
                    at,
                    format!("event ends at log_pos {}, here at {end}", h.log_pos),
                ));
            }
            if self.ew.checksum {
                verify_event(ev).map_err(|e| refuse(at, format!("checksum: {e}")))?;
            }
            match scanner.on_event(ev, end, self.ew.checksum) {
                Ok(Some(tx)) if at + len == events.len() => {
                    if tx.sid != self.cfg.server_uuid {
                        return Err(refuse(0, format!("GTID of server {}", tx.sid)));
                    }
                    if tx.gno != self.next_gno || tx.sequence_number != self.seq_in_file + 1 {
                        return Err(refuse(
                            0,
                            format!(
                                "GNO {} / sequence_number {}, here {} / {}",
                                tx.gno,
                                tx.sequence_number,
                                self.next_gno,
                                self.seq_in_file + 1
                            ),
                        ));
                    }
                    return Ok(tx);
                }
                Ok(Some(_)) => {
                    return Err(refuse(at + len, "bytes after the transaction's end".into()))
                }
                Ok(None) => {}
                Err(()) => {
                    return Err(refuse(
                        at,
                        format!("{:?} event out of a transaction's run", h.event_type),
                    ))
                }
            }
            at += len;
        }
        Err(refuse(
            at,
            "the transaction has no end (XID or DDL QUERY)".into(),
        ))
    }
}

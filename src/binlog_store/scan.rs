//! Reading events back from binlog files: one event at a time (never trusting a length before
//! the bytes are there), the file prologue, and the transaction-boundary state machine that
//! recovery runs over the tail of the last file.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use tibinlog_protocol::binlog::checksum::{verify_event, CHECKSUM_LEN};
use tibinlog_protocol::binlog::{
    ChecksumAlg, EventHeader, EventType, GtidEvent, GtidSet, Sid, BINLOG_MAGIC, HEADER_LEN,
};

use super::error::{Result, StoreError};

/// Result of reading one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    /// `buf` holds one whole event.
    Event,
    /// No byte left.
    Eof,
    /// Some bytes, but not a whole event (or a header that cannot be one).
    Torn,
}

/// Reads the next event into `buf` (cleared first).
pub(crate) fn read_event(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<ReadOutcome> {
    buf.clear();
    let got = r.by_ref().take(HEADER_LEN as u64).read_to_end(buf)?;
    if got == 0 {
        return Ok(ReadOutcome::Eof);
    }
    let Ok(h) = EventHeader::parse(buf) else {
        return Ok(ReadOutcome::Torn);
    };
    let rest = u64::from(h.event_size) - HEADER_LEN as u64;
    let got = r.by_ref().take(rest).read_to_end(buf)? as u64;
    Ok(if got == rest {
        ReadOutcome::Event
    } else {
        ReadOutcome::Torn
    })
}

/// What the first events of a file say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prologue {
    pub checksum: bool,
    pub previous_gtids: GtidSet,
    /// Offset after PREVIOUS_GTIDS: where the first transaction starts.
    pub end: u64,
    /// Header timestamp of the FORMAT_DESCRIPTION.
    pub timestamp: u32,
}

/// Reads magic, FORMAT_DESCRIPTION and PREVIOUS_GTIDS of `path`.
pub(crate) fn read_prologue(path: &Path, name: &str) -> Result<Prologue> {
    let corrupt = |offset: u64, reason: &'static str| StoreError::Corrupt {
        file: name.to_owned(),
        offset,
        reason,
    };
    let f = File::open(path).map_err(StoreError::io("open", path))?;
    let mut r = BufReader::new(f);
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic)
        .map_err(|_| corrupt(0, "file shorter than the magic"))?;
    if magic != BINLOG_MAGIC {
        return Err(corrupt(0, "bad magic"));
    }
    let mut buf = Vec::new();
    let read = |r: &mut BufReader<File>, buf: &mut Vec<u8>| {
        read_event(r, buf).map_err(StoreError::io("read", path))
    };
    if read(&mut r, &mut buf)? != ReadOutcome::Event {
        return Err(corrupt(4, "torn FORMAT_DESCRIPTION"));
    }
    let h = EventHeader::parse(&buf).map_err(|_| corrupt(4, "bad FORMAT_DESCRIPTION header"))?;
    if h.event_type != EventType::FORMAT_DESCRIPTION || verify_event(&buf).is_err() {
        return Err(corrupt(4, "bad FORMAT_DESCRIPTION"));
    }
    let alg = buf
        .len()
        .checked_sub(CHECKSUM_LEN + 1)
        .and_then(|i| ChecksumAlg::from_byte(buf[i]))
        .ok_or(corrupt(4, "unknown checksum algorithm"))?;
    let checksum = alg == ChecksumAlg::Crc32;
    let timestamp = h.timestamp;
    let pg_start = 4 + u64::from(h.event_size);
    if read(&mut r, &mut buf)? != ReadOutcome::Event {
        return Err(corrupt(pg_start, "torn PREVIOUS_GTIDS"));
    }
    let h = EventHeader::parse(&buf).map_err(|_| corrupt(pg_start, "bad header"))?;
    if h.event_type != EventType::PREVIOUS_GTIDS || (checksum && verify_event(&buf).is_err()) {
        return Err(corrupt(pg_start, "bad PREVIOUS_GTIDS"));
    }
    let body = buf
        .len()
        .checked_sub(if checksum { CHECKSUM_LEN } else { 0 })
        .and_then(|end| buf.get(HEADER_LEN..end))
        .ok_or(corrupt(pg_start, "PREVIOUS_GTIDS too short"))?;
    let previous_gtids =
        GtidSet::decode(body).map_err(|_| corrupt(pg_start, "bad PREVIOUS_GTIDS body"))?;
    Ok(Prologue {
        checksum,
        previous_gtids,
        end: pg_start + u64::from(h.event_size),
        timestamp,
    })
}

/// A transaction found complete by [`TxnScanner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScannedTxn {
    pub sid: Sid,
    pub gno: u64,
    pub sequence_number: i64,
    pub end: u64,
    /// Header timestamp of its GTID event.
    pub timestamp: u32,
}

/// Transaction boundaries of a MySQL-flavour event run:
///
/// ```text
/// Idle --GTID--> Started --QUERY BEGIN--> InTxn --TABLE_MAP/rows--> InTxn --XID--> Idle (complete)
///                   \--QUERY <ddl>--> Idle (complete)
/// ```
/// Anything else (including ROTATE) stops the scan: recovery cuts the file at the end of the
/// last complete transaction.
#[derive(Debug, Default)]
pub(crate) struct TxnScanner {
    open: Option<(ScannedTxn, bool)>,
}

impl TxnScanner {
    /// Feeds one whole, checksum-verified event ending at `end`. `Ok(Some)` when it completes a
    /// transaction, `Err(())` when it cannot continue the run.
    #[allow(clippy::result_unit_err)]
    pub(crate) fn on_event(
        &mut self,
        ev: &[u8],
        end: u64,
        checksum: bool,
    ) -> std::result::Result<Option<ScannedTxn>, ()> {
        let h = EventHeader::parse(ev).map_err(|_| ())?;
        let body_end = ev
            .len()
            .checked_sub(if checksum { CHECKSUM_LEN } else { 0 })
            .filter(|&e| e >= HEADER_LEN)
            .ok_or(())?;
        let body = &ev[HEADER_LEN..body_end];
        let t = h.event_type;
        match self.open.take() {
            None if t == EventType::GTID => {
                // A GTID event without logical clocks (shorter than 42 bytes) is not ours.
                if body.len() < 42 {
                    return Err(());
                }
                let g = GtidEvent::parse(body, false).map_err(|_| ())?;
                self.open = Some((
                    ScannedTxn {
                        sid: g.sid,
                        gno: g.gno,
                        sequence_number: g.sequence_number,
                        end: 0,
                        timestamp: h.timestamp,
                    },
                    false,
                ));
                Ok(None)
            }
            Some((tx, false)) if t == EventType::QUERY => {
                if query_text(body).ok_or(())? == b"BEGIN" {
                    self.open = Some((tx, true));
                    Ok(None)
                } else {
                    Ok(Some(ScannedTxn { end, ..tx }))
                }
            }
            Some((tx, true))
                if t == EventType::TABLE_MAP
                    || t == EventType::WRITE_ROWS
                    || t == EventType::UPDATE_ROWS
                    || t == EventType::DELETE_ROWS =>
            {
                self.open = Some((tx, true));
                Ok(None)
            }
            Some((tx, true)) if t == EventType::XID => Ok(Some(ScannedTxn { end, ..tx })),
            _ => Err(()),
        }
    }
}

/// The SQL text of a QUERY body (post-header + body, no CRC).
fn query_text(body: &[u8]) -> Option<&[u8]> {
    let db_len = usize::from(*body.get(8)?);
    let status_len = usize::from(u16::from_le_bytes([*body.get(11)?, *body.get(12)?]));
    body.get(13 + status_len + db_len + 1..)
}

/// Opens `path` positioned at `pos`.
pub(crate) fn open_at(path: &Path, pos: u64) -> io::Result<BufReader<File>> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(pos))?;
    Ok(BufReader::with_capacity(64 * 1024, f))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tibinlog_protocol::binlog::{EventWriter, QueryEvent, Rotate, Xid};

    /// Event script for the scanner: (event, expected outcome).
    enum Step {
        Pending,
        Complete(u64),
        Stop,
    }

    /// Appends one event to the buffer.
    type WriteEvent<'a> = &'a dyn Fn(&mut EventWriter, &mut Vec<u8>);

    fn gtid(gno: u64) -> GtidEvent {
        GtidEvent::new(Sid([3; 16]), gno, gno as i64, 1_000_000, 80036)
    }

    #[test]
    fn scanner_finds_transaction_boundaries() {
        use Step::*;
        let mut w = EventWriter::new(1, true);
        let mut buf = Vec::new();
        let ddl = QueryEvent::ddl(1, "db", "CREATE TABLE t (a INT)", &[], 9);
        let mut run = |script: Vec<(WriteEvent<'_>, Step)>| {
            let mut s = TxnScanner::default();
            for (i, (write, want)) in script.into_iter().enumerate() {
                buf.clear();
                write(&mut w, &mut buf);
                let got = s.on_event(&buf, 1000 + i as u64, true);
                match (want, got) {
                    (Pending, Ok(None)) | (Stop, Err(())) => {}
                    (Complete(gno), Ok(Some(tx))) => {
                        assert_eq!(
                            (tx.gno, tx.end, tx.sid),
                            (gno, 1000 + i as u64, Sid([3; 16]))
                        )
                    }
                    (_, got) => panic!("step {i}: {got:?}"),
                }
            }
        };
        let g = |n: u64| {
            move |w: &mut EventWriter, b: &mut Vec<u8>| {
                w.write(b, 4, 1, &gtid(n)).unwrap();
            }
        };
        let begin = |w: &mut EventWriter, b: &mut Vec<u8>| {
            w.write(b, 4, 1, &QueryEvent::begin(1)).unwrap();
        };
        let xid = |w: &mut EventWriter, b: &mut Vec<u8>| {
            w.write(b, 4, 1, &Xid(5)).unwrap();
        };
        let ddl_ev = |w: &mut EventWriter, b: &mut Vec<u8>| {
            w.write(b, 4, 1, &ddl).unwrap();
        };
        let rotate = |w: &mut EventWriter, b: &mut Vec<u8>| {
            w.write(
                b,
                4,
                1,
                &Rotate {
                    position: 4,
                    next_file: "binlog.000002",
                },
            )
            .unwrap();
        };
        let (g1, g2, g3) = (g(1), g(2), g(3));
        run(vec![
            (&g1, Pending),
            (&begin, Pending),
            (&xid, Complete(1)),
            (&g2, Pending),
            (&ddl_ev, Complete(2)),
            (&g3, Pending),
            (&begin, Pending),
            (&rotate, Stop),
        ]);
        // XID without BEGIN, BEGIN without GTID, ROTATE between transactions.
        run(vec![(&g1, Pending), (&xid, Stop)]);
        run(vec![(&begin, Stop)]);
        run(vec![(&rotate, Stop)]);
        run(vec![(&g1, Pending), (&g2, Stop)]);
    }

    #[test]
    fn events_too_short_for_their_checksum_are_rejected() {
        // A 20-byte "event" whose last 4 bytes happen to be its CRC: nothing panics.
        let mut ev = vec![0u8; 16];
        ev[4] = EventType::XID.0;
        ev[9..13].copy_from_slice(&20u32.to_le_bytes());
        let crc = crc32fast::hash(&ev);
        ev.extend_from_slice(&crc.to_le_bytes());
        ev.truncate(20);
        let mut s = TxnScanner::default();
        assert_eq!(s.on_event(&ev, 24, true), Err(()));
    }

    #[test]
    fn read_event_tells_whole_from_torn() {
        let mut w = EventWriter::new(1, true);
        let mut ev = Vec::new();
        w.write(&mut ev, 4, 1, &Xid(5)).unwrap();
        let mut buf = Vec::new();
        for cut in 0..=ev.len() {
            let want = match cut {
                0 => ReadOutcome::Eof,
                n if n == ev.len() => ReadOutcome::Event,
                _ => ReadOutcome::Torn,
            };
            assert_eq!(
                read_event(&mut &ev[..cut], &mut buf).unwrap(),
                want,
                "{cut}"
            );
        }
        // A header claiming less than a header is not an event.
        let mut bad = ev.clone();
        bad[9..13].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(
            read_event(&mut &bad[..], &mut buf).unwrap(),
            ReadOutcome::Torn
        );
    }
}

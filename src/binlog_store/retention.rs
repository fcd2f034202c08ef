//! Retention: `PURGE BINARY LOGS TO` / `BEFORE` and expiry.
//!
//! Crash-safe order: the index is rewritten first (a crash after it leaves files the index no
//! longer names, which the next open deletes), then the map is compacted (temp + rename; an
//! uncompacted map's records of purged files are skipped at open), then the files are deleted.
//! The open file is never purged, nor a file a reader is on or any later one: the purge stops
//! before it and says so, as MySQL's does (warning 1867). Readers cannot start on a file once a
//! purge has chosen it.

use super::error::{Result, StoreError};
use super::index::{file_name, parse_file_name, sync_dir, write_index_guarded};
use super::map::Record;
use super::writer::BinlogStore;

/// What a purge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Purged {
    /// Names of the files deleted, oldest first.
    pub files: Vec<String>,
    /// Set when the purge stopped before a file a reader is on.
    pub in_use: Option<PurgeInUse>,
}

/// A purge that stopped at a file being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeInUse {
    /// The file it stopped at.
    pub file: String,
    /// Readers on that file.
    pub readers: usize,
    /// Files the purge would have deleted.
    pub wanted: usize,
}

impl PurgeInUse {
    /// MySQL's warning 1867 text.
    pub fn message(&self, purged: usize) -> String {
        format!(
            "file {} was not purged because it was being read by {} thread(s), purged only {} \
             out of {} files.",
            self.file, self.readers, purged, self.wanted
        )
    }
}

impl BinlogStore {
    /// `PURGE BINARY LOGS TO 'file'`: deletes every file before `file`. Returns the names
    /// deleted. The open file is never deleted.
    pub fn purge_to(&mut self, file: &str) -> Result<Purged> {
        let unknown = || StoreError::UnknownFile {
            file: file.to_owned(),
        };
        let seq = parse_file_name(&self.cfg.basename, file).ok_or_else(unknown)?;
        let k = {
            let st = self.shared.read();
            st.files
                .iter()
                .position(|f| f.seq == seq)
                .ok_or_else(unknown)?
        };
        self.purge_first(k)
    }

    /// `PURGE BINARY LOGS BEFORE`: deletes the leading files whose last transaction is older
    /// than `unix_secs`.
    pub fn purge_before(&mut self, unix_secs: u64) -> Result<Purged> {
        let k = {
            let st = self.shared.read();
            st.files
                .iter()
                .take_while(|f| u64::from(f.last_secs) < unix_secs)
                .count()
        };
        self.purge_first(k)
    }

    /// Expiry: [`Self::purge_before`]`(now - expire_logs_seconds)`; nothing when expiry is off.
    pub fn purge_expired(&mut self, now_unix_secs: u64) -> Result<Purged> {
        if self.cfg.expire_logs_seconds == 0 {
            return Ok(Purged::default());
        }
        self.purge_before(now_unix_secs.saturating_sub(self.cfg.expire_logs_seconds))
    }

    /// Deletes the first `k` files (never the open one): index first, then the map is
    /// compacted, then the files go.
    fn purge_first(&mut self, k: usize) -> Result<Purged> {
        let (purged, keep, records, horizon, in_use) = {
            let st = self.shared.read();
            let wanted = k.min(st.files.len().saturating_sub(1));
            let mut k = wanted;
            let mut in_use = None;
            if k > 0 {
                // Stop before the first file a reader is on; from here on no reader may start
                // on a file this purge deletes.
                let mut readers = self.shared.in_use();
                if let Some((seq, n)) = readers.first_read() {
                    if seq < st.files[k].seq {
                        k = st.files.partition_point(|f| f.seq < seq);
                        in_use = Some(PurgeInUse {
                            file: file_name(&self.cfg.basename, seq),
                            readers: n,
                            wanted,
                        });
                    }
                }
                if k > 0 {
                    readers.raise_floor(st.files[k].seq);
                }
            }
            if k == 0 {
                return Ok(Purged {
                    files: Vec::new(),
                    in_use,
                });
            }
            let first_kept = st.files[k].seq;
            let purged: Vec<u32> = st.files[..k].iter().map(|f| f.seq).collect();
            let keep: Vec<u32> = st.files[k..].iter().map(|f| f.seq).collect();
            let cut = st.entries.partition_point(|e| e.file_seq < first_kept);
            let horizon = st.entries[..cut]
                .last()
                .map(|e| (e.commit_ts, e.gno))
                .or(st.purged_horizon);
            let mut records = Vec::with_capacity(st.entries.len() - cut + 3);
            if let Some((commit_ts, gno)) = horizon {
                records.push(Record::PurgedHorizon { commit_ts, gno });
            }
            records.extend(st.entries[cut..].iter().map(|e| Record::Txn(*e)));
            (purged, keep, records, horizon, in_use)
        };
        let mut records = records;
        records.extend(
            self.unsynced[..self.recorded]
                .iter()
                .map(|e| Record::Txn(*e)),
        );
        if let Some((checkpoint, requires)) = self.checkpoint {
            records.push(Record::Checkpoint {
                checkpoint,
                requires,
            });
        }
        records.push(Record::Synced(self.marker_written));
        write_index_guarded(&self.cfg.data_dir, &self.cfg.basename, &keep, &self.guard)?;
        self.map.rewrite(&records, &self.guard)?;
        let mut names = Vec::with_capacity(purged.len());
        for seq in &purged {
            let name = file_name(&self.cfg.basename, *seq);
            let path = self.cfg.data_dir.join(&name);
            self.guard.check()?;
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &path)(e)),
            }
            names.push(name);
        }
        sync_dir(&self.cfg.data_dir)?;
        tracing::info!(files = ?names, "binlog files purged");
        let mut st = self.shared.write();
        let first_kept = keep[0];
        st.files.retain(|f| f.seq >= first_kept);
        let cut = st.entries.partition_point(|e| e.file_seq < first_kept);
        st.entries.drain(..cut);
        st.purged_horizon = horizon;
        Ok(Purged {
            files: names,
            in_use,
        })
    }
}

//! Rotation: the current file closed with ROTATE (BINLOG_IN_USE cleared, fsynced) and the
//! next one created and named in the index.

use std::os::unix::fs::FileExt;

use tibinlog_protocol::binlog::Rotate;

use super::{BinlogStore, FDE_FLAGS_OFFSET};
use crate::binlog_store::error::{Result, StoreError};
use crate::binlog_store::files::FileInfo;
use crate::binlog_store::index::{file_name, write_index_guarded};
use crate::binlog_store::prologue::create_file;
use crate::binlog_store::StorePos;

impl BinlogStore {
    /// Closes the current file with ROTATE and opens the next one.
    pub(crate) fn rotate(&mut self) -> Result<()> {
        let next = self.file_seq + 1;
        let next_name = file_name(&self.cfg.basename, next);
        self.record_unsynced()?;
        self.pos = self.ew.write(
            &mut self.pending,
            self.pos,
            self.last_timestamp,
            &Rotate {
                position: 4,
                next_file: &next_name,
            },
        )?;
        self.write_out()?;
        self.guard.check()?;
        self.file
            .write_all_at(&[0, 0], FDE_FLAGS_OFFSET)
            .map_err(StoreError::io("write", &self.path))?;
        let started = std::time::Instant::now();
        self.file
            .sync_data()
            .map_err(StoreError::io("fsync", &self.path))?;
        self.cfg
            .metrics
            .fsync_seconds
            .observe(started.elapsed().as_secs_f64());

        self.ew.checksum = self.cfg.checksum;
        let (file, prologue_end) = create_file(
            &self.cfg,
            &mut self.ew,
            next,
            (&self.gtid_executed, self.last_timestamp),
            &self.guard,
        )?;
        let mut seqs: Vec<u32> = self.shared.read().files.iter().map(|f| f.seq).collect();
        seqs.push(next);
        write_index_guarded(&self.cfg.data_dir, &self.cfg.basename, &seqs, &self.guard)?;

        let info = FileInfo {
            seq: next,
            size: prologue_end,
            prologue_end,
            previous_gtids: self.gtid_executed.clone(),
            last_secs: self.last_timestamp,
        };
        let end = StorePos::new(next, prologue_end);
        tracing::debug!(file = %next_name, gno = self.next_gno, "binlog rotated");
        self.publish(end, Some(info));
        self.file = file;
        self.file_seq = next;
        self.path = self.cfg.data_dir.join(&next_name);
        self.pos = prologue_end;
        self.written = prologue_end;
        self.seq_in_file = 0;
        Ok(())
    }
}

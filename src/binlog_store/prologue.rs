//! A binlog file's first bytes: magic, FORMAT_DESCRIPTION (BINLOG_IN_USE set) and
//! PREVIOUS_GTIDS, as a new store and every rotation write them.

use std::fs::File;
use std::io::Write;

use tibinlog_protocol::binlog::{
    flags, ChecksumAlg, EventMeta, EventWriter, FormatDescription, GtidSet, LogPos, PreviousGtids,
    BINLOG_MAGIC,
};

use super::error::{Result, StoreError};
use super::index::{file_name, sync_dir, WriteGuard};
use super::StoreConfig;

/// Creates file `seq`: magic, FORMAT_DESCRIPTION (BINLOG_IN_USE set) and PREVIOUS_GTIDS, fsynced
/// with its directory entry. Returns the file (positioned at its end) and the prologue's end.
pub(crate) fn create_file(
    cfg: &StoreConfig,
    ew: &mut EventWriter,
    seq: u32,
    (previous, timestamp): (&GtidSet, u32),
    guard: &WriteGuard,
) -> Result<(File, u64)> {
    let (buf, end) = prologue(cfg, ew, previous, timestamp)?;
    let path = cfg.data_dir.join(file_name(&cfg.basename, seq));
    guard.check()?;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(StoreError::io("create", &path))?;
    guard.check()?;
    f.write_all(&buf).map_err(StoreError::io("write", &path))?;
    f.sync_all().map_err(StoreError::io("fsync", &path))?;
    sync_dir(&cfg.data_dir)?;
    Ok((f, end))
}

/// A file's first bytes: magic, FORMAT_DESCRIPTION (BINLOG_IN_USE set), PREVIOUS_GTIDS; and
/// the offset after them.
pub(crate) fn prologue(
    cfg: &StoreConfig,
    ew: &mut EventWriter,
    previous: &GtidSet,
    timestamp: u32,
) -> Result<(Vec<u8>, u64)> {
    let alg = if cfg.checksum {
        ChecksumAlg::Crc32
    } else {
        ChecksumAlg::Off
    };
    let mut buf = BINLOG_MAGIC.to_vec();
    let n = ew.write_with(
        &mut buf,
        EventMeta {
            timestamp,
            log_pos: LogPos::StartsAt(4),
            flags: flags::BINLOG_IN_USE,
        },
        &FormatDescription::mysql80(&cfg.server_version, 0, alg),
    )?;
    let end = ew.write(&mut buf, 4 + n as u64, timestamp, &PreviousGtids(previous))?;
    Ok((buf, end))
}

//! File names and the index file `<basename>.index`, which lists the binlog files one per line
//! as MySQL writes it (`./binlog.000001`). The index is replaced atomically: the new content goes
//! to `<basename>.index_crash_safe`, is fsynced, renamed over the index, and the directory is
//! fsynced (MySQL uses the same temporary name).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::error::{Result, StoreError};

/// `<basename>.NNNNNN`: six digits at least, as MySQL names files.
pub fn file_name(basename: &str, seq: u32) -> String {
    format!("{basename}.{seq:06}")
}

/// The sequence number of `name` if it is `<basename>.<digits>`.
pub fn parse_file_name(basename: &str, name: &str) -> Option<u32> {
    let digits = name.strip_prefix(basename)?.strip_prefix('.')?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Reads the index: the sequence numbers of the listed files, in order. `None` when the index
/// does not exist.
pub(crate) fn read_index(dir: &Path, basename: &str) -> Result<Option<Vec<u32>>> {
    let path = dir.join(format!("{basename}.index"));
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("read", &path)(e)),
    };
    let mut seqs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let name = Path::new(line)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        let seq = parse_file_name(basename, name).ok_or(StoreError::Corrupt {
            file: format!("{basename}.index"),
            offset: 0,
            reason: "index line is not a binlog file name",
        })?;
        if seqs.last().is_some_and(|&l| l >= seq) {
            return Err(StoreError::Corrupt {
                file: format!("{basename}.index"),
                offset: 0,
                reason: "index not in ascending order",
            });
        }
        seqs.push(seq);
    }
    Ok(Some(seqs))
}

/// Replaces the index with `seqs`.
pub(crate) fn write_index(dir: &Path, basename: &str, seqs: &[u32]) -> Result<()> {
    write_index_guarded(dir, basename, seqs, &WriteGuard::default())
}

/// [`write_index`], asking `guard` before each step that changes the directory.
pub(crate) fn write_index_guarded(
    dir: &Path,
    basename: &str,
    seqs: &[u32],
    guard: &WriteGuard,
) -> Result<()> {
    let mut text = String::new();
    for &s in seqs {
        text.push_str("./");
        text.push_str(&file_name(basename, s));
        text.push('\n');
    }
    write_atomically(
        &dir.join(format!("{basename}.index_crash_safe")),
        &dir.join(format!("{basename}.index")),
        text.as_bytes(),
        guard,
    )
}

/// Writes `bytes` to `tmp`, fsyncs, renames it to `dst` and fsyncs the directory; `guard` is
/// asked before each of the create, the write and the rename.
pub(crate) fn write_atomically(
    tmp: &Path,
    dst: &Path,
    bytes: &[u8],
    guard: &WriteGuard,
) -> Result<()> {
    guard.check()?;
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .map_err(StoreError::io("create", tmp))?;
    guard.check()?;
    f.write_all(bytes).map_err(StoreError::io("write", tmp))?;
    f.sync_all().map_err(StoreError::io("fsync", tmp))?;
    guard.check()?;
    fs::rename(tmp, dst).map_err(StoreError::io("rename", dst))?;
    sync_dir(dst.parent().unwrap_or(Path::new(".")))
}

/// Asked right before each system call that changes a writer's files (a write, a truncation, a
/// file's creation, rename or removal): an HA owner's says no once its ownership is lost. A
/// process paused in the middle of a group commit or a rotation therefore completes at most
/// the one call it had been cleared for before the pause, and nothing after it. The default
/// always allows.
#[derive(Clone, Default)]
pub struct WriteGuard(Option<Arc<dyn Fn() -> std::result::Result<(), String> + Send + Sync>>);

impl WriteGuard {
    /// A guard asking `may_write` (an error says why not).
    pub fn new(
        may_write: impl Fn() -> std::result::Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        WriteGuard(Some(Arc::new(may_write)))
    }

    /// `Err(Refused)` when the guard says no.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.0 {
            Some(f) => f().map_err(StoreError::Refused),
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for WriteGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "WriteGuard(set)"
        } else {
            "WriteGuard(none)"
        })
    }
}

/// Fsyncs a directory so that created, renamed and removed entries are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io("fsync dir", dir))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_and_index_round_trip() {
        assert_eq!(file_name("binlog", 7), "binlog.000007");
        assert_eq!(file_name("binlog", 1_234_567), "binlog.1234567");
        assert_eq!(parse_file_name("binlog", "binlog.000007"), Some(7));
        assert_eq!(parse_file_name("binlog", "binlog.1234567"), Some(1_234_567));
        assert_eq!(parse_file_name("binlog", "binlog.index"), None);
        assert_eq!(parse_file_name("binlog", "binlog.00001"), None);
        assert_eq!(parse_file_name("binlog", "other.000001"), None);

        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_index(dir.path(), "binlog").unwrap(), None);
        write_index(dir.path(), "binlog", &[3, 4, 5]).unwrap();
        let text = std::fs::read_to_string(dir.path().join("binlog.index")).unwrap();
        assert_eq!(text, "./binlog.000003\n./binlog.000004\n./binlog.000005\n");
        assert_eq!(
            read_index(dir.path(), "binlog").unwrap(),
            Some(vec![3, 4, 5])
        );
        assert!(!dir.path().join("binlog.index_crash_safe").exists());
        std::fs::write(
            dir.path().join("binlog.index"),
            "binlog.000002\nbinlog.000001\n",
        )
        .unwrap();
        assert!(read_index(dir.path(), "binlog").is_err());
    }
}

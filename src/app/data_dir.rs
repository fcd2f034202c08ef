//! What a data directory keeps about the instance that owns it: its instance id and the table
//! filter its binlog was written with.

use std::path::Path;

use anyhow::Context as _;

/// File in the data directory that keeps the generated instance id.
pub const INSTANCE_ID_FILE: &str = "instance-id";

/// `id` when it is a valid instance id: 1 to 64 letters, digits, `.`, `_` or `-` (it becomes
/// part of a PD service id and of etcd keys).
pub fn check_instance_id(id: &str) -> anyhow::Result<&str> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        anyhow::bail!("instance id {id:?}: use 1 to 64 letters, digits, '.', '_' or '-'");
    }
    Ok(id)
}

/// The instance id: the configured one, else the one kept in the data directory, else a new
/// random one written there (so it survives restarts and never depends on the host's name).
pub fn instance_id(configured: Option<&str>, data_dir: &Path) -> anyhow::Result<String> {
    if let Some(id) = configured {
        return Ok(check_instance_id(id)?.to_owned());
    }
    let path = data_dir.join(INSTANCE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            return check_instance_id(text.trim())
                .map(str::to_owned)
                .with_context(|| format!("in {}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    }
    let mut random = [0u8; 6];
    aws_lc_rs::rand::fill(&mut random).map_err(|_| anyhow::anyhow!("no random bytes"))?;
    let id = hex::encode(random);
    std::fs::create_dir_all(data_dir).with_context(|| format!("create {}", data_dir.display()))?;
    let tmp = data_dir.join(format!("{INSTANCE_ID_FILE}.tmp"));
    std::fs::write(&tmp, format!("{id}\n"))
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .with_context(|| format!("write {}", path.display()))?;
    Ok(id)
}

/// File in the data directory that records the table filter its binlog was written with.
pub const FILTER_RECORD: &str = "table-filter.json";

/// The table filter is fixed for the life of a data directory: a binlog whose filter changed
/// midway would start tables without their CREATE and rows, and stop others without a trace.
/// The first start records the rules; a later start with other rules is refused.
pub fn record_filter(data_dir: &Path, rules: &[String]) -> anyhow::Result<()> {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Record {
        rules: Vec<String>,
    }
    let path = data_dir.join(FILTER_RECORD);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let rec: Record = serde_json::from_slice(&bytes)
                .with_context(|| format!("read the recorded table filter {}", path.display()))?;
            if rec.rules != rules {
                let show = |r: &[String]| {
                    if r.is_empty() {
                        "every table".to_owned()
                    } else {
                        format!("{r:?}")
                    }
                };
                anyhow::bail!(
                    "the table filter is {} but the binlog in {} was written with {}: a filter \
                     cannot change for a binlog that exists (tables it adds would start without \
                     their earlier rows, tables it removes would stop without a trace); start \
                     with the recorded rules, or with a new data directory",
                    show(rules),
                    data_dir.display(),
                    show(&rec.rules)
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("create the data directory {}", data_dir.display()))?;
            let tmp = data_dir.join(format!("{FILTER_RECORD}.tmp"));
            let bytes = serde_json::to_vec(&Record {
                rules: rules.to_vec(),
            })?;
            let write = || -> std::io::Result<()> {
                use std::io::Write as _;
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&bytes)?;
                f.sync_all()?;
                std::fs::rename(&tmp, &path)?;
                std::fs::File::open(data_dir)?.sync_all()
            };
            write().with_context(|| format!("record the table filter in {}", path.display()))
        }
        Err(e) => {
            Err(e).with_context(|| format!("read the recorded table filter {}", path.display()))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::app::{gc_service_id, server_uuid_for_cluster};

    #[test]
    fn a_data_directory_keeps_the_filter_it_was_written_with() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let rules = vec!["shop.*".to_owned(), "!shop.tmp".to_owned()];
        record_filter(&data, &rules).unwrap();
        // The same rules start again; other rules, or none, are refused with both named.
        record_filter(&data, &rules).unwrap();
        let e = format!(
            "{:#}",
            record_filter(&data, &["shop.*".to_owned()]).unwrap_err()
        );
        assert!(
            e.contains("!shop.tmp") && e.contains("new data directory"),
            "{e}"
        );
        let e = format!("{:#}", record_filter(&data, &[]).unwrap_err());
        assert!(e.contains("every table"), "{e}");
        // A damaged record is an error, not a fresh start.
        std::fs::write(data.join(FILTER_RECORD), b"{").unwrap();
        assert!(record_filter(&data, &rules).is_err());
    }

    #[test]
    fn the_instance_id_is_made_once_and_kept_in_the_data_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let made = instance_id(None, dir.path()).expect("made");
        assert_eq!(made.len(), 12);
        assert_eq!(instance_id(None, dir.path()).expect("kept"), made);
        let other = tempfile::tempdir().expect("tempdir");
        assert_ne!(instance_id(None, other.path()).expect("made"), made);
        // A configured one wins (and is not written).
        assert_eq!(
            instance_id(Some("node-b.1"), dir.path()).expect("configured"),
            "node-b.1"
        );
        assert_eq!(instance_id(None, dir.path()).expect("kept"), made);
        for bad in ["", "a/b", "a b", &"x".repeat(65)] {
            assert!(instance_id(Some(bad), dir.path()).is_err(), "{bad:?}");
        }
        std::fs::write(dir.path().join(INSTANCE_ID_FILE), "bad id\n").expect("write");
        assert!(instance_id(None, dir.path()).is_err());
        assert_eq!(
            gc_service_id(&server_uuid_for_cluster(1), "n1"),
            format!("tibinlog-{}-n1", server_uuid_for_cluster(1))
        );
    }
}

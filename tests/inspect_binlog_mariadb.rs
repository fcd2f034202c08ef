//! `tibinlog inspect binlog` against binlog files written by a real MariaDB 10.11 server.
//!
//! The server writes a workload that touches every column type (limits, NULLs, fsp 0-6,
//! negative TIME with fractions, 64 KiB+ blobs, empty strings, UPDATE and DELETE images, a
//! rotation); our listing must then agree, value by value, with the server's own `mariadb-binlog
//! -vv`, an independent decoder.

mod common;

use std::path::Path;
use std::process::Command;

use common::mariadb::MariaDb;
use common::mariadb_binlog::row_values;

fn ours(file: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tibinlog"))
        .args(["inspect", "binlog"])
        .arg(file)
        .output()
        .expect("run tibinlog");
    assert!(
        out.status.success(),
        "tibinlog inspect binlog {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 listing")
}

fn theirs(file: &Path) -> String {
    let out = Command::new("mariadb-binlog")
        .args(["--no-defaults", "-vv", "--base64-output=decode-rows"])
        .arg(file)
        .output()
        .expect("run mariadb-binlog");
    assert!(out.status.success(), "mariadb-binlog failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn reads_real_mariadb_binlogs_like_mariadb_binlog() {
    let Some(db) = MariaDb::start(&["--log-bin=mbin", "--binlog-format=ROW"]) else {
        return;
    };
    db.sql(include_str!("data/mariadb_all_types.sql"));
    let files = db.binlog_files("mbin");
    assert_eq!(files.len(), 2, "the workload rotates once: {files:?}");

    let mut total_values = 0;
    for file in &files {
        let listing = ours(file);
        assert!(
            listing.contains("Start: binlog v 4, server v 10.11"),
            "{listing}"
        );
        let (a, b) = (row_values(&listing), row_values(&theirs(file)));
        assert_eq!(
            a.len(),
            b.len(),
            "value count differs in {}",
            file.display()
        );
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x, y, "value {i} of {} differs", file.display());
        }
        total_values += a.len();
    }
    // 3 inserts + 1 update (two images) + 1 delete of 38 columns, then 1 insert in the new file.
    assert_eq!(total_values, 38 * 7);

    let first = ours(&files[0]);
    for needle in [
        "### INSERT INTO `app`.`all_types`",
        "### UPDATE `app`.`all_types`",
        "### DELETE FROM `app`.`all_types`",
        "@22='-12:34:56.78'",
        "@13=12345678901234567890123456789012345.123456789012345678901234567890",
        "Rotate to mbin.000002  pos: 4",
        "CREATE TABLE app.all_types",
    ] {
        assert!(first.contains(needle), "missing {needle:?}");
    }
    damaged_copies_are_errors(&files);
}

/// Damaged copies of a real file: errors naming the problem, never a panic.
fn damaged_copies_are_errors(files: &[std::path::PathBuf]) {
    let bytes = std::fs::read(&files[0]).expect("read binlog");
    let dir = tempfile::tempdir().expect("temp dir");
    // Cut in the middle of the big rows event and inside a header; flip a byte for the checksum.
    for (name, cut) in [("mid", bytes.len() / 2), ("hdr", 4 + 10)] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes[..cut]).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_tibinlog"))
            .args(["inspect", "binlog"])
            .arg(&path)
            .output()
            .expect("run tibinlog");
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("truncated"), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    let mut flipped = bytes.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x40;
    let path = dir.path().join("flipped");
    std::fs::write(&path, &flipped).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_tibinlog"))
        .args(["inspect", "binlog"])
        .arg(&path)
        .output()
        .expect("run tibinlog");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum mismatch"));
}

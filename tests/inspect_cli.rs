//! `tibinlog inspect key` and `tibinlog inspect row` through the binary: output shape, MySQL
//! text forms, and clear errors (exit status 1, no panic) on bad input.

use std::process::{Command, Output};

use tibinlog::tidb::key::{record_key, Handle};
use tibinlog::tidb::rowcodec::RowCodec;
use tibinlog::tidb::schema::TableInfo;
use tibinlog_protocol::value::{Date, DateTime, Value};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tibinlog"))
        .arg("inspect")
        .args(args)
        .output()
        .expect("run tibinlog")
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn fails(args: &[&str], needle: &str) {
    let out = run(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

const TABLE_INFO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/table_info_orders.json"
);

#[test]
fn key_raw_encoded_and_meta() {
    // t{110}_r{1}, spelled out byte by byte: 't', 8-byte sign-flipped 110, "_r", sign-flipped 1.
    let raw = "74800000000000006e5f728000000000000001";
    let j = ok_json(&["key", raw]);
    assert_eq!(j["kind"], "record");
    assert_eq!(j["table_id"], 110);
    assert_eq!(j["handle"], 1);
    assert_eq!(j["raw_hex"], raw);
    // The same key as a region boundary (groups of 8 bytes + 0xFF - pad markers).
    let j = ok_json(&[
        "key",
        "--encoded",
        "7480000000000000ff6e5f728000000000ff0000010000000000fa",
    ]);
    assert_eq!(j["raw_hex"], raw);
    assert_eq!(j["handle"], 1);
    // Index key t{110}_i{2}{int 5}.
    let j = ok_json(&[
        "key",
        "74800000000000006e5f698000000000000002038000000000000005",
    ]);
    assert_eq!(j["kind"], "index");
    assert_eq!(j["index_id"], 2);
    assert_eq!(j["values"], serde_json::json!([5]));
    // Meta hash `DBs`, field `DB:2`, built with the key module (its layout has golden tests).
    let meta = tibinlog::tidb::key::meta_hash_key(b"DBs", b"DB:2");
    let j = ok_json(&["key", &hex::encode(meta)]);
    assert_eq!(j["kind"], "meta");
    assert_eq!(j["structure"], "DBs");
    assert_eq!(j["field"], "DB:2");
    assert_eq!(j["db_id"], 2);
    // Unknown bytes are not an error.
    let j = ok_json(&["key", "00ff"]);
    assert_eq!(j["kind"], "unknown");
    assert_eq!(j["raw_hex"], "00ff");
    fails(&["key", "abc"], "not hex");
    fails(&["key", "--encoded", "0102"], "region-encoded");
}

fn sample_row() -> Vec<u8> {
    let info = TableInfo::from_json(&std::fs::read(TABLE_INFO).expect("read")).expect("parse");
    let codec = RowCodec::new(&info);
    let values = vec![
        Value::Int(42), // the handle: not stored in the value
        Value::Decimal("-1.80".into()),
        Value::Bytes("caf\u{e9}".as_bytes().to_vec()),
        Value::DateTime(DateTime {
            date: Date {
                year: 2018,
                month: 1,
                day: 19,
            },
            hour: 3,
            minute: 14,
            second: 7,
            micros: 0,
        }),
        Value::UInt(u64::MAX),
        Value::Enum(2),
    ];
    let mut row = Vec::new();
    codec.encode_v2(&values, &mut row).expect("encode");
    row
}

#[test]
fn row_with_handle_from_key_or_flag() {
    let row = hex::encode(sample_row());
    let key = hex::encode(record_key(110, &Handle::Int(42)));
    let expected = serde_json::json!({
        "id": "42", "amount": "-1.80", "note": "café", "created": "2018-01-19 03:14:07",
        "qty": "18446744073709551615", "status": "paid"
    });
    assert_eq!(
        ok_json(&["row", "--table-info", TABLE_INFO, "--key", &key, &row]),
        expected
    );
    assert_eq!(
        ok_json(&["row", "--table-info", TABLE_INFO, "--handle", "42", &row]),
        expected
    );
    // Without the key, the handle column is unknown: null, the rest still decoded.
    let j = ok_json(&["row", "--table-info", TABLE_INFO, &row]);
    assert_eq!(j["id"], serde_json::Value::Null);
    assert_eq!(j["amount"], "-1.80");
    // Column order is the table's.
    let out = run(&["row", "--table-info", TABLE_INFO, "--handle", "42", &row]);
    let text = String::from_utf8_lossy(&out.stdout);
    let pos: Vec<usize> = [
        "\"id\"",
        "\"amount\"",
        "\"note\"",
        "\"created\"",
        "\"qty\"",
        "\"status\"",
    ]
    .iter()
    .map(|k| text.find(k).expect("column present"))
    .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{text}");
}

#[test]
fn row_errors_name_the_problem() {
    let row = sample_row();
    let cut = hex::encode(&row[..row.len() - 3]);
    fails(
        &["row", "--table-info", TABLE_INFO, "--handle", "1", &cut],
        "row value",
    );
    fails(
        &["row", "--table-info", TABLE_INFO, "--handle", "1", "0a1"],
        "not hex",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, b"{\"cols\": 7}").expect("write");
    fails(
        &[
            "row",
            "--table-info",
            bad.to_str().expect("utf-8 path"),
            "80",
        ],
        "table info",
    );
    fails(
        &["row", "--table-info", "/nonexistent/table.json", "80"],
        "cannot read",
    );
}

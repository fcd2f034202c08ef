//! Alibaba Canal 1.1.7 as a real peer: its jars (the runtime closure of
//! `tests/peers/canal/pom.xml`, resolved by `scripts/peer-jars.sh install canal`), the program
//! `tests/peers/canal/CanalTail.java` that runs an embedded Canal instance and prints what its
//! client API hands out as JSON lines, and the reading of those lines.
//!
//! Canal's values are MySQL's text for most types ([`canal_text`] says where they are not);
//! binary strings come out as `0x` + hex (the program's choice: Canal hands them out as the
//! ISO-8859-1 text of the bytes).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value as Json;

use super::maxwell::{bytes_text, family, plain_decimal, text_bytes, type_args, with_fraction};
use super::peer::{self, JavaPeer};
use super::peer_check::{self, PeerTxn, Types};

/// Upper bound of Canal's start and stop.
pub const WAIT: Duration = peer::PEER_WAIT;
/// What CanalTail prints on stderr once its client has subscribed.
const SUBSCRIBED: &str = "CanalTail: subscribed";

/// A JDK's `java` and the classpath of CanalTail (compiled here) with Canal's jars and the
/// files of `tests/peers/canal/classpath` (logging, the table-meta store's Spring and MyBatis
/// files).
pub struct Installation {
    pub java: PathBuf,
    pub classpath: String,
    _classes: tempfile::TempDir,
}

/// Canal's [`Installation`]; `None` (after saying why, or failing under CI) when the JDK or
/// the jars are missing.
pub fn installation() -> Option<Installation> {
    let (Some(javac), Some(java)) = (peer::find_tool("javac"), peer::find_tool("java")) else {
        peer::missing("a JDK (javac, java)");
        return None;
    };
    let dir = peer::maven_peer("canal")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/canal");
    let classes = tempfile::tempdir().expect("temp dir");
    let jars = format!("{}/libs/*", dir.display());
    let out = std::process::Command::new(javac)
        .arg("-d")
        .arg(classes.path())
        .arg("-cp")
        .arg(&jars)
        .arg(root.join("CanalTail.java"))
        .output()
        .expect("run javac");
    assert!(
        out.status.success(),
        "javac CanalTail.java: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let classpath = format!(
        "{}:{}:{jars}",
        root.join("classpath").display(),
        classes.path().display()
    );
    Some(Installation {
        java,
        classpath,
        _classes: classes,
    })
}

/// A running CanalTail: its JSON lines go to `out` (appended to), Canal's log to `err`.
/// [`JavaPeer::stop`] is SIGTERM, as a service is stopped: the shutdown hook finishes the
/// batch in hand, acks it and stops the embedded server, which stores the cursor;
/// [`JavaPeer::kill`] is SIGKILL: the batch in hand is neither finished nor acknowledged, and
/// the cursor is what Canal last stored.
pub type Canal = JavaPeer;

/// Starts CanalTail with `args` (`key=value`, see the program), in UTC, and waits until the
/// instance runs and its client has subscribed.
pub async fn start(install: &Installation, args: &[String], out: &Path, err: &Path) -> Canal {
    let mut cmd = tokio::process::Command::new(&install.java);
    cmd.arg("-Duser.timezone=UTC")
        .arg("-cp")
        .arg(&install.classpath)
        .arg("CanalTail")
        .args(args)
        .arg(format!("out={}", out.display()));
    let mut canal = JavaPeer::spawn("Canal", cmd, out, err, false, 60);
    canal.wait_for_log(SUBSCRIBED, "subscribe").await;
    canal
}

/// Every whole JSON line of each file of `paths` (a line still being written is left out).
pub fn read_runs(paths: &[&Path]) -> Vec<Vec<Json>> {
    paths
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .split_inclusive('\n')
                .filter_map(|l| l.strip_suffix('\n'))
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("CanalTail: {l}: {e}")))
                .collect()
        })
        .collect()
}

/// Transactions Canal handed out whole, each once (see [`transactions`]).
pub fn committed(runs: &[Vec<Json>]) -> usize {
    whole(runs).len()
}

/// The DDL statements Canal handed out.
pub fn ddl(runs: &[Vec<Json>]) -> Vec<&Json> {
    runs.iter()
        .flatten()
        .filter(|l| l["kind"] == "ddl")
        .collect()
}

/// A [`PeerTxn`] source over the lines of Canal's runs (one per start): each transaction is
/// its row entries up to the commit entry, whose transaction id is our XID. Where a run
/// stopped, Canal's next run hands out again what was not acknowledged whole, from the
/// transaction's start (it resumes at the stored cursor, or by GTID set, and steps back to the
/// transaction's begin); after a SIGTERM it hands out the end of the last acknowledged
/// transaction once more (the cursor is the position of its XID event, not past it), and after
/// a SIGKILL whatever it had handed out since it last stored the cursor; against a MySQL
/// source it does the same. So a transaction cut off at the end of a run is dropped, and so
/// are the first transactions of a run that repeat one of an earlier run (same XID, and the
/// same rows or none); anything else doubled stays, for `peer_check::verify` to find.
pub fn transactions(runs: &[Vec<Json>]) -> impl FnMut(&Types) -> Option<PeerTxn> + '_ {
    let mut it = whole(runs).into_iter();
    move |types: &Types| {
        let (xid, entries) = it.next()?;
        let mut rows: Vec<Json> = entries.iter().flat_map(|l| entry_rows(types, l)).collect();
        rows.sort_by_key(|r| r.to_string());
        Some(PeerTxn { xid, rows })
    }
}

/// The whole transactions of [`transactions`]: (XID, row entries).
fn whole(runs: &[Vec<Json>]) -> Vec<(String, Vec<&Json>)> {
    let mut whole: Vec<(String, Vec<&Json>)> = Vec::new();
    for run in runs {
        let earlier: std::collections::HashMap<String, Vec<&Json>> =
            whole.iter().cloned().collect();
        let mut open: Vec<&Json> = Vec::new();
        let mut resuming = true;
        for l in run {
            match l["kind"].as_str() {
                Some("begin") => assert!(open.is_empty(), "Canal: a begin inside a transaction"),
                Some("row") => open.push(l),
                Some("commit") => {
                    let xid = l["xid"].as_str().expect("xid").to_owned();
                    let rows = std::mem::take(&mut open);
                    let again = earlier
                        .get(&xid)
                        .is_some_and(|before| rows.is_empty() || same_rows(before, &rows));
                    resuming &= again;
                    if !resuming {
                        whole.push((xid, rows));
                    }
                }
                _ => {}
            }
        }
    }
    whole
}

/// True when two lists of row entries hand out the same rows (positions aside).
fn same_rows(a: &[&Json], b: &[&Json]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x["db"] == y["db"] && x["table"] == y["table"] && x["rows"] == y["rows"])
}

/// The rows of one row entry in the compared form (`peer_check::row`, values in [`canon`]).
fn entry_rows(types: &Types, l: &Json) -> Vec<Json> {
    let db = l["db"].as_str().expect("db");
    let t = l["table"].as_str().expect("table");
    let op = match l["type"].as_str().expect("type") {
        "INSERT" => "insert",
        "UPDATE" => "update",
        "DELETE" => "delete",
        other => panic!("Canal row entry of type {other}: {l}"),
    };
    let image = |i: &Json| -> Json {
        let Some(m) = i.as_object() else {
            return Json::Null;
        };
        Json::Object(
            m.iter()
                .map(|(c, v)| {
                    let ty = types.of(db, t, c);
                    let text = v.as_str().map(|v| canal_text(ty, v));
                    (c.clone(), serde_json::json!(canon(ty, text.as_deref())))
                })
                .collect(),
        )
    };
    l["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| peer_check::row(db, t, op, image(&r["before"]), image(&r["after"])))
        .collect()
}

/// The members of an `enum('a','b')` or `set(…)` type, in order (quotes doubled inside).
pub fn members(ty: &str) -> Vec<String> {
    let list = ty.split_once('(').map_or("", |(_, l)| l);
    let mut out = Vec::new();
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let mut m = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    m.push('\'');
                }
                '\'' => break,
                c => m.push(c),
            }
        }
        out.push(m);
    }
    out
}

/// A value as Canal prints it → MySQL's text for a column of type `ty`. Canal prints an ENUM
/// as its index (1-based), a SET as its bit mask and a BIT as its number, all in decimal.
pub fn canal_text(ty: &str, v: &str) -> String {
    let number = || -> u64 {
        v.parse()
            .unwrap_or_else(|_| panic!("{ty}: not a number: {v}"))
    };
    match family(ty).as_str() {
        "enum" => {
            let i = number() as usize;
            members(ty)
                .get(i.wrapping_sub(1))
                .cloned()
                .unwrap_or_else(|| panic!("{ty}: no member {i}"))
        }
        "set" => {
            let mask = number();
            members(ty)
                .into_iter()
                .enumerate()
                .filter(|(i, _)| mask >> i & 1 == 1)
                .map(|(_, m)| m)
                .collect::<Vec<_>>()
                .join(",")
        }
        "bit" => {
            let width = type_args(ty)
                .first()
                .map_or(1, |n| n.div_ceil(8).clamp(1, 8));
            format!(
                "0x{}",
                hex::encode_upper(&number().to_be_bytes()[8 - width as usize..])
            )
        }
        "datetime" | "timestamp" | "time" => {
            with_fraction(v, type_args(ty).first().copied().unwrap_or(0))
        }
        // Canal's decoder (its LogBuffer.getDecimal0) writes a last, partial group of fraction
        // digits that is zero as one `0`: DECIMAL(12,3) 1.000 comes out as `1.0`.
        "decimal" => plain_decimal(v, type_args(ty).get(1).copied().unwrap_or(0)),
        "binary" | "varbinary" | "blob" | "tinyblob" | "mediumblob" | "longblob" => {
            bytes_text(&text_bytes(v))
        }
        _ => v.to_owned(),
    }
}

/// One text per value, whoever printed it: FLOAT and DOUBLE by the value, JSON re-serialised,
/// BINARY(n) padded with 0x00 to n bytes (as MySQL stores it); everything else as MySQL
/// prints it.
pub fn canon(ty: &str, text: Option<&str>) -> Option<String> {
    let t = text?;
    Some(match family(ty).as_str() {
        "float" => t.parse::<f32>().expect("FLOAT").to_string(),
        "double" => t.parse::<f64>().expect("DOUBLE").to_string(),
        "json" => match serde_json::from_str::<Json>(t) {
            Ok(v) => v.to_string(),
            Err(e) => panic!("JSON {t:?}: {e}"),
        },
        "binary" => {
            let mut b = text_bytes(t);
            b.resize(b.len().max(type_args(ty)[0] as usize), 0);
            bytes_text(&b)
        }
        _ => t.to_owned(),
    })
}

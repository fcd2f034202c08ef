//! A real replication client, `mysql_async`'s binlog stream, reading a tibinlog server, and the
//! comparison of what a client saw with the simulator's truth log.
//!
//! Every cell is turned into MySQL's text form (the truth log's form, `tidb::text::render`) from
//! what mysql_common decoded plus the TABLE_MAP metadata (types, fsp, signedness, ENUM/SET member
//! names), so the comparison is exact for every column type:
//!
//! * integers, FLOAT, DOUBLE: mysql_common's `Int`/`UInt`/`Float`/`Double` (signedness from the
//!   SIGNEDNESS metadata), rendered as MySQL 8 prints them. mysql_common reads a signed
//!   MEDIUMINT without sign extension (`eat_i24_le` pads the three bytes with a zero byte), so
//!   -1 arrives as 16777215: for a MEDIUMINT column that SIGNEDNESS says is signed, values from
//!   2^23 up are mapped back by subtracting 2^24 (one-to-one on the 24-bit range);
//! * DECIMAL: the text mysql_common produces (with the column's scale digits);
//! * YEAR: mysql_common gives `1900 + byte`, so the zero year arrives as `1900` (not a valid YEAR
//!   otherwise) and is printed `0000`;
//! * DATE/DATETIME: its `Date`; TIMESTAMP: its `seconds[.micros]` text, printed in UTC;
//!   TIME: its `Time` (days folded into hours); fractional digits per the column's fsp;
//! * ENUM: its member index, named with the ENUM_STR_VALUE metadata; SET: its little-endian
//!   bitmask, named with SET_STR_VALUE; BIT: its big-endian bytes as `0x` + hex;
//! * strings and blobs: the bytes as UTF-8, else `0x` + upper-case hex;
//! * JSON: its binary JSON converted to a JSON tree and printed in MySQL's JSON text form.
//!
//! mysql_common 0.38 cannot decode a negative TIME(1..4) with a non-zero fraction (a `u32`
//! underflow in `my_time_packed_from_binary`, a panic in debug builds; python-mysql-replication
//! decodes the same bytes correctly). A rows event holding such a value is counted as
//! undecodable and its transaction is compared without its rows.

#![allow(dead_code)]

use std::net::SocketAddr;

use futures_util::StreamExt;
use mysql_async::binlog::events::{EventData, OptionalMetadataField, RowsEventData, TableMapEvent};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::consts::ColumnType;
use mysql_async::{BinlogStream, BinlogStreamRequest};
use serde_json::{json, Value as Json};
use tibinlog::tidb::schema::{mysql, FieldType};
use tibinlog::tidb::{json as tjson, text, time};
use tibinlog_protocol::value::{Time, Value};

use super::app::{opts, WAIT};

/// One transaction as a client saw it, rows in the truth log's shape.
#[derive(Debug, Clone, Default)]
pub struct SeenTxn {
    pub gno: u64,
    pub xid: Option<u64>,
    pub ddl: Option<String>,
    /// `{"db","table","op","before","after"}` with `{column: text|null}` images.
    pub rows: Vec<Json>,
    /// A rows event of it could not be decoded by the client library: rows not compared.
    pub undecodable: bool,
    /// Binlog file and position right after the transaction.
    pub file: String,
    pub pos: u64,
    /// Set by [`SeenTxn::digest_rows`]: `rows` were replaced by their digest.
    pub digest: Option<RowsDigest>,
}

/// What a long run keeps of a transaction's rows instead of the rows: a hash of them in the
/// order the comparison sorts them, and their counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowsDigest {
    pub hash: u64,
    pub rows: u64,
    /// Column values in the before and after images.
    pub cells: u64,
}

impl RowsDigest {
    pub fn of(rows: &[Json]) -> RowsDigest {
        use std::hash::{Hash, Hasher};
        let mut text: Vec<String> = rows.iter().map(Json::to_string).collect();
        text.sort();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        RowsDigest {
            hash: h.finish(),
            rows: rows.len() as u64,
            cells: cells(rows),
        }
    }

    fn to_json(self) -> Json {
        serde_json::json!({"hash": self.hash, "rows": self.rows, "cells": self.cells})
    }

    fn from_json(v: &Json) -> Option<RowsDigest> {
        Some(RowsDigest {
            hash: v["hash"].as_u64()?,
            rows: v["rows"].as_u64()?,
            cells: v["cells"].as_u64()?,
        })
    }
}

/// Column values in the before and after images of `rows`.
fn cells(rows: &[Json]) -> u64 {
    rows.iter()
        .flat_map(|r| [&r["before"], &r["after"]])
        .filter_map(Json::as_object)
        .map(|o| o.len() as u64)
        .sum()
}

impl SeenTxn {
    /// Keeps only a digest of the rows (a run of a million transactions cannot keep them all).
    pub fn digest_rows(&mut self) {
        if self.digest.is_none() && !self.undecodable {
            self.digest = Some(RowsDigest::of(&self.rows));
            self.rows = Vec::new();
        }
    }
}

/// A truth log line reduced to what [`assert_seen_equals_truth`] needs, its rows to a digest.
pub fn digest_truth(v: &mut Json) {
    if let Some(rows) = v.get("rows").and_then(Json::as_array) {
        let d = RowsDigest::of(rows);
        v["rows_digest"] = d.to_json();
        v["rows"] = Json::Array(Vec::new());
    }
}

/// What one dump session delivered.
#[derive(Debug, Default)]
pub struct Dump {
    pub txns: Vec<SeenTxn>,
    pub uuid: String,
    /// Real (non-artificial) ROTATE events seen.
    pub rotations: usize,
    /// Rows events the client could not decode.
    pub undecodable: usize,
    /// Whether the server ended the stream (EOF), rather than us stopping early.
    pub eof: bool,
}

/// A column of a TABLE_MAP, with what is needed to print its values.
#[derive(Debug, Clone)]
struct Col {
    name: String,
    tp: ColumnType,
    meta: Vec<u8>,
    /// From the SIGNEDNESS metadata (numeric columns only).
    unsigned: bool,
    members: Vec<String>,
}

fn columns(tme: &TableMapEvent<'_>) -> Vec<Col> {
    let n = tme.columns_count() as usize;
    let mut names = Vec::new();
    let mut enums: Vec<Vec<String>> = Vec::new();
    let mut sets: Vec<Vec<String>> = Vec::new();
    let mut signedness: Vec<bool> = Vec::new();
    for f in tme.iter_optional_meta() {
        match f.expect("optional metadata parses") {
            OptionalMetadataField::Signedness(bits) => {
                signedness = bits.iter().map(|b| *b).collect();
            }
            OptionalMetadataField::ColumnName(n) => {
                for name in n.iter_names() {
                    names.push(name.expect("column name").name().into_owned());
                }
            }
            OptionalMetadataField::EnumStrValue(v) => {
                for e in v.iter_values() {
                    let e = e.expect("ENUM values");
                    enums.push(e.values().iter().map(|m| m.value().into_owned()).collect());
                }
            }
            OptionalMetadataField::SetStrValue(v) => {
                for s in v.iter_values() {
                    let s = s.expect("SET values");
                    sets.push(s.values().iter().map(|m| m.value().into_owned()).collect());
                }
            }
            _ => {}
        }
    }
    let (mut enums, mut sets) = (enums.into_iter(), sets.into_iter());
    let mut signedness = signedness.into_iter();
    (0..n)
        .map(|i| {
            let tp = tme
                .get_column_type(i)
                .expect("known column type")
                .expect("column in range");
            let members = match tp {
                ColumnType::MYSQL_TYPE_ENUM => enums.next().expect("ENUM_STR_VALUE for an ENUM"),
                ColumnType::MYSQL_TYPE_SET => sets.next().expect("SET_STR_VALUE for a SET"),
                _ => Vec::new(),
            };
            let unsigned = tp.is_numeric_type() && signedness.next().unwrap_or(false);
            Col {
                name: names.get(i).cloned().expect("COLUMN_NAME metadata"),
                tp,
                meta: tme.get_column_metadata(i).unwrap_or(&[]).to_vec(),
                unsigned,
                members,
            }
        })
        .collect()
}

fn bytes_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => format!("0x{}", hex::encode_upper(b)),
    }
}

fn float_ft(tp: u8) -> FieldType {
    FieldType {
        decimal: -1,
        flen: -1,
        ..FieldType::new(tp)
    }
}

/// MySQL's text of one cell as mysql_common decoded it; `Ok(None)` for NULL.
fn cell_text(col: &Col, v: &BinlogValue<'_>) -> Result<Option<String>, String> {
    use mysql_async::Value as V;
    use ColumnType as T;
    let bad = || format!("column {}: {:?} for type {:?}", col.name, v, col.tp);
    let fsp = col.meta.first().copied().unwrap_or(0);
    let v = match v {
        BinlogValue::Value(V::NULL) => return Ok(None),
        BinlogValue::Jsonb(j) => {
            let tree = serde_json::Value::try_from(j.clone()).map_err(|e| format!("{e}"))?;
            return Ok(Some(tjson::to_text(&tjson::from_serde(&tree))));
        }
        BinlogValue::JsonDiff(_) => return Err(bad()),
        BinlogValue::Value(v) => v,
    };
    let s = match (col.tp, v) {
        // See the module doc: a signed MEDIUMINT arrives without sign extension.
        (T::MYSQL_TYPE_INT24, V::Int(i)) if !col.unsigned && *i >= 1 << 23 => {
            (i - (1 << 24)).to_string()
        }
        (
            T::MYSQL_TYPE_TINY
            | T::MYSQL_TYPE_SHORT
            | T::MYSQL_TYPE_INT24
            | T::MYSQL_TYPE_LONG
            | T::MYSQL_TYPE_LONGLONG,
            V::Int(i),
        ) => i.to_string(),
        (
            T::MYSQL_TYPE_TINY
            | T::MYSQL_TYPE_SHORT
            | T::MYSQL_TYPE_INT24
            | T::MYSQL_TYPE_LONG
            | T::MYSQL_TYPE_LONGLONG,
            V::UInt(u),
        ) => u.to_string(),
        (T::MYSQL_TYPE_FLOAT, V::Float(f)) => {
            text::render(&Value::Float(*f), &float_ft(mysql::TYPE_FLOAT)).ok_or_else(bad)?
        }
        (T::MYSQL_TYPE_DOUBLE, V::Double(f)) => {
            text::render(&Value::Double(*f), &float_ft(mysql::TYPE_DOUBLE)).ok_or_else(bad)?
        }
        (T::MYSQL_TYPE_NEWDECIMAL, V::Bytes(b)) => bytes_text(b),
        (T::MYSQL_TYPE_YEAR, V::Bytes(b)) => match b.as_slice() {
            b"1900" => "0000".to_owned(),
            _ => bytes_text(b),
        },
        (T::MYSQL_TYPE_DATE | T::MYSQL_TYPE_NEWDATE, V::Date(y, m, d, 0, 0, 0, 0)) => {
            format!("{y:04}-{m:02}-{d:02}")
        }
        (T::MYSQL_TYPE_DATETIME2, V::Date(y, mo, d, h, mi, s, us)) => {
            let dt = tibinlog_protocol::value::DateTime {
                date: tibinlog_protocol::value::Date {
                    year: *y,
                    month: *mo,
                    day: *d,
                },
                hour: *h,
                minute: *mi,
                second: *s,
                micros: *us,
            };
            time::format_datetime(&dt, fsp)
        }
        (T::MYSQL_TYPE_TIMESTAMP2, V::Bytes(b)) => {
            let t = std::str::from_utf8(b).map_err(|_| bad())?;
            let (secs, micros) = t.split_once('.').unwrap_or((t, "0"));
            let secs: u32 = secs.parse().map_err(|_| bad())?;
            let micros: u32 = micros.parse().map_err(|_| bad())?;
            time::format_datetime(&time::timestamp_to_datetime(secs, micros), fsp)
        }
        (T::MYSQL_TYPE_TIME2, V::Time(neg, days, h, m, s, us)) => {
            let t = Time {
                negative: *neg,
                hours: (*days * 24 + u32::from(*h)) as u16,
                minutes: *m,
                seconds: *s,
                micros: *us,
            };
            time::format_duration(&t, fsp)
        }
        (T::MYSQL_TYPE_ENUM, V::Int(i)) => match *i {
            0 => String::new(),
            i => col.members.get(i as usize - 1).cloned().ok_or_else(bad)?,
        },
        (T::MYSQL_TYPE_SET, V::Bytes(b)) => {
            let mut mask = 0u64;
            for (i, byte) in b.iter().enumerate().take(8) {
                mask |= u64::from(*byte) << (8 * i);
            }
            col.members
                .iter()
                .enumerate()
                .filter(|(i, _)| *i < 64 && mask & (1 << i) != 0)
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join(",")
        }
        (T::MYSQL_TYPE_BIT, V::Bytes(b)) => format!("0x{}", hex::encode_upper(b)),
        (
            T::MYSQL_TYPE_VARCHAR
            | T::MYSQL_TYPE_STRING
            | T::MYSQL_TYPE_BLOB
            | T::MYSQL_TYPE_TINY_BLOB
            | T::MYSQL_TYPE_MEDIUM_BLOB
            | T::MYSQL_TYPE_LONG_BLOB,
            V::Bytes(b),
        ) => bytes_text(b),
        _ => return Err(bad()),
    };
    Ok(Some(s))
}

fn image(row: Option<mysql_async::binlog::row::BinlogRow>, cols: &[Col]) -> Result<Json, String> {
    let Some(row) = row else {
        return Ok(Json::Null);
    };
    if row.len() != cols.len() {
        return Err(format!(
            "row has {} cells, TABLE_MAP {} columns",
            row.len(),
            cols.len()
        ));
    }
    let mut m = serde_json::Map::new();
    for (i, col) in cols.iter().enumerate() {
        let v = row
            .as_ref(i)
            .ok_or_else(|| format!("column {} missing", col.name))?;
        m.insert(
            col.name.clone(),
            cell_text(col, v)?.map_or(Json::Null, Json::String),
        );
    }
    Ok(Json::Object(m))
}

/// Keeps the panics of mysql_common's TIME decoder (see the module doc), which `read_binlog`
/// catches and counts, out of the test output; every other panic is reported as usual.
fn quiet_time_decoder_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_time_decoder = info.location().is_some_and(|l| {
                l.file().contains("mysql_common") && l.file().ends_with("binlog/misc.rs")
            });
            if !in_time_decoder {
                default(info);
            }
        }));
    });
}

/// The file name of a ROTATE as mysql_common hands it over. The artificial ROTATE that opens
/// a dump comes before any FORMAT_DESCRIPTION, so mysql_common reads it with checksums off, and
/// when the session negotiated CRC32 its name ends with the event's 4 CRC bytes — a MySQL 8
/// master sends that event the same way. Names of this server are `<base>.NNNNNN`: the 4
/// trailing bytes of an artificial ROTATE (log_pos 0) whose name is not of that form are cut.
fn rotate_name(b: &[u8], log_pos: u32) -> String {
    fn plausible(n: &[u8]) -> bool {
        n.len() > 7 && n[n.len() - 7] == b'.' && n[n.len() - 6..].iter().all(u8::is_ascii_digit)
    }
    let b = if log_pos == 0 && !plausible(b) && b.len() > 4 && plausible(&b[..b.len() - 4]) {
        &b[..b.len() - 4]
    } else {
        b
    };
    String::from_utf8_lossy(b).into_owned()
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn uuid_text(sid: &[u8; 16]) -> String {
    let h = hex::encode(sid);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Builds transactions from the events of one dump session, in the truth log's shape. A
/// transaction counts once its last event (XID, or the DDL's QUERY) arrived; a session that
/// ends inside one leaves it open ([`Assembler::in_txn`]), and the next session starts with a
/// new assembler, as a replica drops a partial transaction when its connection breaks.
#[derive(Debug, Default)]
pub struct Assembler {
    open: Option<SeenTxn>,
    /// Binlog file and position the stream is at.
    file: String,
    pos: u64,
    /// GTID source of the transactions seen (one source only).
    pub uuid: String,
    /// Real (non-artificial) ROTATE events seen.
    pub rotations: usize,
    /// Rows events the client could not decode.
    pub undecodable: usize,
}

impl Assembler {
    /// True between a GTID event and the end of its transaction.
    pub fn in_txn(&self) -> bool {
        self.open.is_some()
    }

    /// Takes the next event of `stream`; returns the transaction it completes, if any.
    pub fn on_event(
        &mut self,
        ev: &mysql_async::binlog::events::Event,
        stream: &BinlogStream,
    ) -> Option<SeenTxn> {
        if ev.header().log_pos() != 0 {
            self.pos = u64::from(ev.header().log_pos());
        }
        let data = ev.read_data().expect("event decodes");
        match data {
            Some(EventData::RotateEvent(r)) => {
                assert!(self.open.is_none(), "ROTATE inside a transaction");
                if ev.header().log_pos() != 0 {
                    self.rotations += 1;
                }
                self.file = rotate_name(r.name_raw(), ev.header().log_pos());
                self.pos = r.position();
            }
            Some(EventData::GtidEvent(g)) => {
                assert!(self.open.is_none(), "GTID inside a transaction");
                let uuid = uuid_text(&g.sid());
                if self.uuid.is_empty() {
                    self.uuid = uuid;
                } else {
                    assert_eq!(self.uuid, uuid, "one GTID source");
                }
                self.open = Some(SeenTxn {
                    gno: g.gno(),
                    ..SeenTxn::default()
                });
            }
            Some(EventData::QueryEvent(q)) => {
                let t = self.open.as_mut().expect("QUERY outside a transaction");
                let text = q.query().into_owned();
                if text != "BEGIN" {
                    t.ddl = Some(text);
                    return Some(self.close());
                }
            }
            Some(EventData::XidEvent(x)) => {
                let t = self.open.as_mut().expect("XID outside a transaction");
                t.xid = Some(x.xid);
                return Some(self.close());
            }
            Some(EventData::RowsEvent(r)) => {
                let t = self.open.as_mut().expect("rows outside a transaction");
                let tme = stream.get_tme(r.table_id()).expect("TABLE_MAP before rows");
                let cols = columns(tme);
                let op = match &r {
                    RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => {
                        "insert"
                    }
                    RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => {
                        "delete"
                    }
                    _ => "update",
                };
                // See the module doc: mysql_common panics on some negative TIME values.
                quiet_time_decoder_panics();
                let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    r.rows(tme).collect::<Result<Vec<_>, _>>()
                }));
                let Ok(rows) = decoded else {
                    t.undecodable = true;
                    self.undecodable += 1;
                    return None;
                };
                for (before, after) in rows.expect("rows decode") {
                    let before = image(before, &cols).unwrap_or_else(|e| panic!("{e}"));
                    let after = image(after, &cols).unwrap_or_else(|e| panic!("{e}"));
                    t.rows.push(json!({
                        "db": tme.database_name(), "table": tme.table_name(), "op": op,
                        "before": before, "after": after,
                    }));
                }
            }
            _ => {}
        }
        None
    }

    /// The open transaction, ended at the current position.
    fn close(&mut self) -> SeenTxn {
        let mut t = self.open.take().expect("an open transaction");
        (t.file, t.pos) = (self.file.clone(), self.pos);
        t
    }
}

/// Runs one non-blocking dump with `request` (its non-blocking flag is set here) until the
/// server's EOF, or until `stop_after` transactions; then drops the connection without a
/// goodbye, as a client that goes away mid-stream does.
pub async fn read_binlog(
    addr: SocketAddr,
    request: BinlogStreamRequest<'_>,
    stop_after: Option<usize>,
) -> Dump {
    read_binlog_with(addr, request, stop_after, false).await
}

/// [`read_binlog`], keeping only a digest of each transaction's rows if `digest`.
pub async fn read_binlog_with(
    addr: SocketAddr,
    request: BinlogStreamRequest<'_>,
    stop_after: Option<usize>,
    digest: bool,
) -> Dump {
    let conn = mysql_async::Conn::new(opts(addr, "root"))
        .await
        .expect("connect");
    let mut stream = conn
        .get_binlog_stream(request.with_non_blocking())
        .await
        .expect("binlog stream");
    let mut dump = Dump::default();
    let mut asm = Assembler::default();
    dump.eof = true;
    loop {
        if stop_after.is_some_and(|k| dump.txns.len() >= k) {
            dump.eof = false;
            break;
        }
        let next = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("dump makes progress");
        let Some(ev) = next else { break };
        let ev = ev.expect("event");
        if let Some(mut t) = asm.on_event(&ev, &stream) {
            if digest {
                t.digest_rows();
            }
            dump.txns.push(t);
        }
    }
    if dump.eof {
        assert!(!asm.in_txn(), "the dump ended inside a transaction");
    }
    drop(stream);
    dump.uuid = asm.uuid;
    dump.rotations = asm.rotations;
    dump.undecodable = asm.undecodable;
    dump
}

/// Sorted copy of a transaction's rows (the binlog groups rows by table, the truth log keeps
/// first-touch order; the order inside a transaction carries no meaning).
pub fn sorted_rows(rows: &[Json]) -> Vec<Json> {
    let mut v = rows.to_vec();
    v.sort_by_key(|r| r.to_string());
    v
}

fn first_row_difference(got: &[Json], want: &[Json]) -> String {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g == w {
            continue;
        }
        let mut cols = Vec::new();
        for image in ["before", "after"] {
            if let (Some(go), Some(wo)) = (g[image].as_object(), w[image].as_object()) {
                for (k, wv) in wo {
                    if go.get(k) != Some(wv) {
                        cols.push(format!("{image}.{k}: got {:?}, want {wv}", go.get(k)));
                    }
                }
                for k in go.keys().filter(|k| !wo.contains_key(*k)) {
                    cols.push(format!("{image}.{k}: not in the truth log"));
                }
            }
        }
        return format!("row {i}: {}\n got  {g}\n want {w}", cols.join("; "));
    }
    format!("{} rows, truth has {}", got.len(), want.len())
}

/// Asserts that `seen` is exactly `want` in order: `want[i]` is `(gno, truth line)`. Returns the
/// number of cell values compared.
pub fn assert_seen_equals_truth(who: &str, seen: &[SeenTxn], want: &[(u64, &Json)]) -> u64 {
    let got: Vec<u64> = seen.iter().map(|t| t.gno).collect();
    let exp: Vec<u64> = want.iter().map(|(g, _)| *g).collect();
    if got != exp {
        let at = got.iter().zip(&exp).position(|(a, b)| a != b);
        panic!(
            "{who}: GNOs differ: {} transactions seen, {} expected; first difference at index \
             {at:?} (seen {:?}, expected {:?})",
            got.len(),
            exp.len(),
            at.map(|i| got[i]),
            at.map(|i| exp[i])
        );
    }
    let mut compared = 0u64;
    for (t, (gno, truth)) in seen.iter().zip(want) {
        let ctx = format!("{who}: gno {gno} (truth {truth})");
        match truth["ddl"].as_str() {
            Some(q) => {
                assert_eq!(t.ddl.as_deref(), Some(q), "{ctx}: DDL");
                assert!(t.rows.is_empty(), "{ctx}: a DDL with rows");
            }
            None => {
                assert_eq!(t.ddl, None, "{ctx}: expected rows");
                assert_eq!(t.xid, truth["start_ts"].as_u64(), "{ctx}: XID = start_ts");
                if t.undecodable {
                    continue;
                }
                let truth_digest = RowsDigest::from_json(&truth["rows_digest"]);
                if t.digest.is_some() || truth_digest.is_some() {
                    let got = t.digest.unwrap_or_else(|| RowsDigest::of(&t.rows));
                    let want = truth_digest.unwrap_or_else(|| {
                        RowsDigest::of(truth["rows"].as_array().expect("truth rows"))
                    });
                    assert_eq!(got, want, "{ctx}: rows differ (digests of the sorted rows)");
                    compared += got.cells;
                    continue;
                }
                let want_rows = sorted_rows(truth["rows"].as_array().expect("truth rows"));
                let got_rows = sorted_rows(&t.rows);
                if got_rows != want_rows {
                    panic!("{ctx}: {}", first_row_difference(&got_rows, &want_rows));
                }
                compared += cells(&got_rows);
            }
        }
    }
    compared
}

/// `(gno, truth)` pairs for GNOs `gnos` (GNO g is `want[g - 1]`).
pub fn expected(want: &[Json], gnos: impl IntoIterator<Item = u64>) -> Vec<(u64, &Json)> {
    gnos.into_iter()
        .map(|g| (g, &want[g as usize - 1]))
        .collect()
}

//! Zendesk's Maxwell (the CDC daemon, `com.zendesk.maxwell.Maxwell`) as a real peer: its jars
//! (the runtime closure of `tests/peers/maxwell/pom.xml`, resolved by `scripts/peer-jars.sh
//! install maxwell`), a daemon process printing JSON rows on stdout (`--producer=stdout`), and
//! the reading of that output.
//!
//! Numbers in Maxwell's JSON are read as their exact text ([`parse_line`]): DECIMAL(20,6)
//! values have more significant digits than an f64 holds. Its values are turned into MySQL's
//! text as the simulator's truth log writes it ([`maxwell_text`]), and both sides into one
//! canonical text ([`canon`]) where Maxwell cannot print what MySQL holds: each
//! normalisation is documented there.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value as Json;

use super::peer::{self, JavaPeer};

/// Upper bound of Maxwell's start and stop.
pub const WAIT: Duration = peer::PEER_WAIT;
/// What Maxwell logs once its binlog client is connected (`BinlogConnectorLifecycleListener`).
const CONNECTED: &str = "Binlog connected.";
/// Marks a JSON string that stands for a number token (see [`parse_line`]).
pub const NUMBER_MARK: char = '\u{0}';

/// A JDK's `java` and Maxwell's classpath: its jars behind the stand-in class of
/// `tests/peers/maxwell/ScriptObjectMirror.java` (compiled here; Maxwell 1.22.6 needs it on
/// Java 15 and later, which have no Nashorn).
pub struct Installation {
    pub java: PathBuf,
    pub classpath: String,
    _stub: tempfile::TempDir,
}

/// Maxwell's [`Installation`]; `None` (after saying why, or failing under CI) when the JDK or
/// the jars are missing.
pub fn installation() -> Option<Installation> {
    let (Some(javac), Some(java)) = (peer::find_tool("javac"), peer::find_tool("java")) else {
        peer::missing("a JDK (javac, java)");
        return None;
    };
    let dir = peer::maven_peer("maxwell")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stub = tempfile::tempdir().expect("temp dir");
    let out = std::process::Command::new(javac)
        .arg("-d")
        .arg(stub.path())
        .arg(root.join("tests/peers/maxwell/ScriptObjectMirror.java"))
        .output()
        .expect("run javac");
    assert!(
        out.status.success(),
        "javac ScriptObjectMirror.java: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let classpath = format!("{}:{}/libs/*", stub.path().display(), dir.display());
    Some(Installation {
        java,
        classpath,
        _stub: stub,
    })
}

/// Maxwell's `config.properties` (an empty password can only be given this way: the command
/// line treats `--password=` as missing).
pub fn write_config(path: &Path, state_port: u16, replication_port: u16) {
    let text = format!(
        "host=127.0.0.1\nport={state_port}\nuser=root\npassword=\n\
         replication_host=127.0.0.1\nreplication_port={replication_port}\n\
         replication_user=root\nreplication_password=\n\
         producer=stdout\noutput_ddl=true\noutput_binlog_position=true\nlog_level=info\n"
    );
    std::fs::write(path, text).expect("write Maxwell's config");
}

/// A running Maxwell daemon: stdout (its JSON) and stderr (its log) go to files.
/// [`JavaPeer::stop`] stops it as its operators do (SIGTERM: it stores its position and exits).
pub type Maxwell = JavaPeer;

/// Starts Maxwell with `config`, in UTC (Maxwell prints TIMESTAMP values in the JVM's zone),
/// and waits until it has captured the schema and its binlog client is connected.
pub async fn start(java: &Path, classpath: &str, config: &Path, out: &Path, err: &Path) -> Maxwell {
    let mut cmd = tokio::process::Command::new(java);
    cmd.arg("-Duser.timezone=UTC")
        .arg("-cp")
        .arg(classpath)
        .arg("com.zendesk.maxwell.Maxwell")
        .arg(format!("--config={}", config.display()));
    let mut mx = JavaPeer::spawn("Maxwell", cmd, out, err, true, 40);
    mx.wait_for_log(CONNECTED, "connect its binlog client")
        .await;
    mx
}

/// A JSON line with every number token turned into a string of [`NUMBER_MARK`] + the token, so
/// that no digit is lost to an f64.
pub fn parse_line(line: &str) -> Option<Json> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    let mut out = String::with_capacity(line.len() + 16);
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '-' | '0'..='9' => {
                out.push_str("\"\\u0000");
                out.push(c);
                while let Some(&d) = chars.peek() {
                    if !(d.is_ascii_digit() || matches!(d, '.' | 'e' | 'E' | '+' | '-')) {
                        break;
                    }
                    out.push(d);
                    chars.next();
                }
                out.push('"');
            }
            _ => out.push(c),
        }
    }
    Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("Maxwell JSON {line}: {e}")))
}

/// The raw text of a number that [`parse_line`] marked, or `None` for any other value.
pub fn number(v: &Json) -> Option<&str> {
    v.as_str()?.strip_prefix(NUMBER_MARK)
}

/// A value of [`parse_line`] back to plain JSON (numbers as serde_json parses them).
pub fn unmark(v: &Json) -> Json {
    match v {
        Json::String(_) if number(v).is_some() => {
            serde_json::from_str(number(v).expect("number")).expect("number token")
        }
        Json::Array(a) => Json::Array(a.iter().map(unmark).collect()),
        Json::Object(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), unmark(v))).collect()),
        other => other.clone(),
    }
}

/// Every JSON line Maxwell printed to `path`, in order.
pub fn read_output(path: &Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(parse_line)
        .collect()
}

/// True for a row event (insert, update, delete), false for DDL.
pub fn is_row(v: &Json) -> bool {
    matches!(v["type"].as_str(), Some("insert" | "update" | "delete"))
}

/// Rows with `"commit": true` (one per transaction) in `items`.
pub fn committed(items: &[Json]) -> usize {
    items
        .iter()
        .filter(|v| is_row(v) && v["commit"] == Json::Bool(true))
        .count()
}

/// Standard base64 (with padding), as Maxwell writes binary strings.
pub fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap_or_else(|e| panic!("base64 {s:?}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Values: Maxwell's JSON → MySQL text → one canonical text

/// `decimal(20,6)` → `decimal`.
pub fn family(ty: &str) -> String {
    ty.split('(').next().unwrap_or(ty).to_ascii_lowercase()
}

/// The numbers in a type's parentheses: `decimal(20,6)` → [20, 6].
pub fn type_args(ty: &str) -> Vec<u32> {
    ty.split_once('(')
        .map(|(_, a)| {
            a.trim_end_matches(')')
                .split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Values: Maxwell's JSON → MySQL text → one canonical text

/// An exact decimal number (`-1.5`, `0E-6`, `1.25E+3`) as plain text with `scale` digits
/// after the point, as MySQL prints a DECIMAL(p, scale).
pub fn plain_decimal(tok: &str, scale: u32) -> String {
    let (neg, t) = match tok.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, tok.trim_start_matches('+')),
    };
    let (mant, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i64>().expect("exponent")),
        None => (t, 0),
    };
    let (ip, fp) = mant.split_once('.').unwrap_or((mant, ""));
    let digits = format!("{ip}{fp}");
    // value = digits × 10^(exp − len(fp)); we want digits × 10^(−scale).
    let shift = exp - fp.len() as i64 + i64::from(scale);
    let mut d = digits;
    if shift >= 0 {
        d.extend(std::iter::repeat_n('0', shift as usize));
    } else {
        let cut = (-shift) as usize;
        assert!(
            d.len() <= cut || d[d.len() - cut..].bytes().all(|b| b == b'0'),
            "{tok} has more than {scale} decimals"
        );
        d.truncate(d.len().saturating_sub(cut));
    }
    let d = d.trim_start_matches('0');
    let d = format!("{:0>w$}", d, w = scale as usize + 1);
    let (i, f) = d.split_at(d.len() - scale as usize);
    let zero = d.bytes().all(|b| b == b'0');
    let sign = if neg && !zero { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{i}")
    } else {
        format!("{sign}{i}.{f}")
    }
}

/// `2020-01-01 10:00:00.12` with `fsp` digits after the point (MySQL prints exactly `fsp`).
pub fn with_fraction(t: &str, fsp: u32) -> String {
    let (base, frac) = t.split_once('.').unwrap_or((t, ""));
    if fsp == 0 {
        assert!(frac.bytes().all(|b| b == b'0'), "fraction in {t}");
        return base.to_owned();
    }
    let mut f: String = frac.chars().take(fsp as usize).collect();
    f.extend(std::iter::repeat_n('0', fsp as usize - f.len()));
    format!("{base}.{f}")
}

/// `bytes` as the truth log writes them: the text if UTF-8, else `0x` and upper-case hex.
pub fn bytes_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => format!("0x{}", hex::encode_upper(b)),
    }
}

/// A value of Maxwell's JSON as MySQL's text for a column of type `ty` (`None` for NULL).
/// Maxwell writes integers, YEAR, FLOAT, DOUBLE and DECIMAL as JSON numbers, DECIMAL in Java's
/// `BigDecimal` notation (e.g. `0E-6`); binary strings (BINARY, VARBINARY, BLOB) in base64;
/// SET as an array of its members; BIT(1) as a boolean and wider BITs as a number; JSON as the
/// document itself; temporal types as strings.
pub fn maxwell_text(ty: &str, v: &Json) -> Option<String> {
    if v.is_null() {
        return None;
    }
    let fam = family(ty);
    let num = || number(v).unwrap_or_else(|| panic!("{ty}: not a number: {v}"));
    let text = || {
        v.as_str()
            .unwrap_or_else(|| panic!("{ty}: not a string: {v}"))
    };
    Some(match fam.as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" | "year" => num().to_owned(),
        "float" | "double" => num().to_owned(),
        "decimal" => plain_decimal(num(), type_args(ty).get(1).copied().unwrap_or(0)),
        "char" | "varchar" | "text" | "tinytext" | "mediumtext" | "longtext" | "enum" => {
            text().to_owned()
        }
        "binary" | "varbinary" | "blob" | "tinyblob" | "mediumblob" | "longblob" => {
            bytes_text(&base64_decode(text()))
        }
        "date" => text().to_owned(),
        "datetime" | "timestamp" | "time" => {
            with_fraction(text(), type_args(ty).first().copied().unwrap_or(0))
        }
        "set" => v
            .as_array()
            .unwrap_or_else(|| panic!("{ty}: not an array: {v}"))
            .iter()
            .map(|m| m.as_str().expect("SET member").to_owned())
            .collect::<Vec<_>>()
            .join(","),
        "bit" => {
            let bits: u64 = match v {
                Json::Bool(b) => u64::from(*b),
                _ => num().parse().unwrap_or_else(|_| panic!("{ty}: {v}")),
            };
            let width = type_args(ty)
                .first()
                .map_or(8, |n| n.div_ceil(8).clamp(1, 8));
            format!(
                "0x{}",
                hex::encode_upper(&bits.to_be_bytes()[8 - width as usize..])
            )
        }
        "json" => unmark(v).to_string(),
        other => panic!("a column type the test does not know: {other}"),
    })
}

/// A DATE, DATETIME or TIMESTAMP as Maxwell prints it. Its binlog library builds dates with a
/// lenient `java.util.Calendar` in UTC, which is Julian before 1582-10-15: the ten days
/// 1582-10-05 to 1582-10-14 do not exist in it and roll over ten days (a stored 1582-10-10
/// 00:06:51 is printed 1582-10-20 00:06:51); every other date reads back as stored.
pub fn julian_gap(t: &str) -> String {
    match t.get(..8) {
        Some("1582-10-") => {}
        _ => return t.to_owned(),
    }
    match t.get(8..10).and_then(|d| d.parse::<u32>().ok()) {
        Some(day @ 5..=14) => format!("1582-10-{}{}", day + 10, &t[10..]),
        _ => t.to_owned(),
    }
}

/// A TIME value (`-838:59:59.40`, fsp ≤ 2) as Maxwell 1.22.6 prints it. Its binlog library
/// (mysql-binlog-connector-java 0.20.0, `deserializeTimeV2`) reads the hours, minutes and
/// seconds straight out of the stored TIME2 bits, sign bit and offset included, adds the raw
/// fraction byte as hundredths of a second (carrying whole seconds), and Maxwell prints the
/// result as a time of day: values outside 00:00:00–23:59:59 come out changed (838:59:59 as
/// 22:59:59, -838:59:59 as 17:04:05, -00:00:01.88 as 16:04:03.68, as it prints them from a
/// MySQL 8.0.31 master too). This stores the value as MySQL does (`my_time_packed_to_binary`:
/// a negative value with a fraction has its integer part one lower and the fraction byte
/// 0x100 − hundredths) and decodes it as the library does; a time of day maps to itself.
pub fn maxwell_time(t: &str, fsp: u32) -> String {
    assert!(fsp <= 2, "TIME({fsp}): only fsp 0-2 are modelled");
    let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
    let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
    let p: Vec<i64> = hms
        .split(':')
        .map(|x| x.parse().expect("TIME part"))
        .collect();
    let frac: i64 = if fsp == 0 {
        0
    } else {
        // Hundredths: TIME(1) and TIME(2) store one byte.
        format!("{frac:0<2}")[..2].parse().expect("TIME fraction")
    };
    let packed = (p[0] << 12) | (p[1] << 6) | p[2];
    let (int_part, raw) = match (neg, frac) {
        (false, f) => (packed, f),
        (true, 0) => (-packed, 0),
        (true, f) => (-packed - 1, 0x100 - f),
    };
    let stored = 0x80_0000 + int_part;
    let (h, m, s) = ((stored >> 12) & 0x3ff, (stored >> 6) & 0x3f, stored & 0x3f);
    let micros = raw * 10_000;
    let secs = (h * 3600 + m * 60 + s + micros / 1_000_000) % 86_400;
    let hms = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if fsp == 0 {
        return hms;
    }
    let digits = micros % 1_000_000 / 10i64.pow(6 - fsp);
    format!("{hms}.{digits:0w$}", w = fsp as usize)
}

/// The bytes of a binary string as the truth log writes them (text, or `0x` + hex when not
/// UTF-8).
pub fn text_bytes(t: &str) -> Vec<u8> {
    t.strip_prefix("0x")
        .and_then(|h| hex::decode(h).ok())
        .unwrap_or_else(|| t.as_bytes().to_vec())
}

/// One text per value, whoever printed it: FLOAT and DOUBLE by the value (Rust's shortest
/// text of the f32/f64); JSON re-serialised (object keys sorted, numbers as serde_json
/// prints them), the document `null` as SQL NULL (Maxwell prints both as `null`); TIME as Maxwell can print it ([`maxwell_time`]); BINARY(n) padded with
/// 0x00 to n bytes, as MySQL stores it (the binlog of a MySQL master drops the padding, and
/// so does Maxwell's output of it); everything else as MySQL prints it.
pub fn canon(ty: &str, text: Option<&str>) -> Option<String> {
    let t = text?;
    Some(match family(ty).as_str() {
        "float" => t.parse::<f32>().expect("FLOAT").to_string(),
        "double" => t.parse::<f64>().expect("DOUBLE").to_string(),
        "json" => match serde_json::from_str::<Json>(t) {
            // Maxwell prints the JSON document `null` as `null`, which reads as SQL NULL.
            Ok(Json::Null) => return None,
            Ok(v) => v.to_string(),
            Err(e) => panic!("JSON {t:?}: {e}"),
        },
        "time" => maxwell_time(t, type_args(ty).first().copied().unwrap_or(0)),
        "date" | "datetime" | "timestamp" => julian_gap(t),
        "binary" => {
            let mut b = text_bytes(t);
            b.resize(b.len().max(type_args(ty)[0] as usize), 0);
            bytes_text(&b)
        }
        _ => t.to_owned(),
    })
}

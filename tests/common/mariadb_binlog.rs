//! Reading `mariadb-binlog -vv --base64-output=decode-rows --print-table-metadata` listings:
//! the decoded rows and statements, and whether a printed value is the value a truth-log text
//! stands for.
//!
//! How `mariadb-binlog` prints a value (`log_event_print_value` in MariaDB's
//! `sql/log_event_client.cc`), and how the truth log (`tibinlog::tidb::text::render`) writes it:
//!
//! | column | mariadb-binlog | truth log |
//! |---|---|---|
//! | integers | signed reading, `" (unsigned)"` appended when negative | MySQL text |
//! | FLOAT | `%-20g` (6 significant digits, padded) | shortest `f32` text |
//! | DOUBLE | `%.20g` | shortest `f64` text |
//! | DECIMAL | MySQL text | MySQL text |
//! | strings | `'…'`, bytes < 0x20 as `\xNN`, every other byte raw | UTF-8 text, else `0x` + hex |
//! | DATE | `'YYYY:MM:DD'` | `YYYY-MM-DD` |
//! | DATETIME, TIME | quoted MySQL text | MySQL text |
//! | TIMESTAMP | seconds since the epoch `[.frac]` | UTC `YYYY-MM-DD hh:mm:ss[.frac]` |
//! | ENUM | member number | member name |
//! | SET, BIT | `b'…'` bits | member names / `0x` + hex of ⌈n/8⌉ bytes |

#![allow(dead_code)]

/// The `@N=value` part of every `###   @N=value /* ... */` line, in order.
pub fn row_values(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| l.starts_with("###   @"))
        .map(|l| {
            let body = &l["###   ".len()..];
            let end = body.rfind(" /* ").unwrap_or(body.len());
            body[..end].trim_end().to_string()
        })
        .collect()
}

/// One column of a TABLE_MAP as `--print-table-metadata` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// The SQL type as listed, e.g. `VARCHAR(48) CHARSET utf8mb4 COLLATE utf8mb4_bin`.
    pub sql_type: String,
}

/// One printed value of a row image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// 0-based column index (`@N` − 1).
    pub index: usize,
    /// The value as printed (raw bytes: strings are printed unconverted).
    pub printed: Vec<u8>,
    /// From the trailing comment, e.g. `VARSTRING(192)`, `LONGINT`.
    pub print_type: String,
    pub is_null: bool,
}

/// One decoded row change.
#[derive(Debug, Clone)]
pub struct Row {
    pub db: String,
    pub table: String,
    /// `insert`, `update` or `delete` (the truth log's words).
    pub op: &'static str,
    pub columns: Vec<Column>,
    pub before: Option<Vec<Cell>>,
    pub after: Option<Vec<Cell>>,
}

/// A statement or a row transaction, in listing order.
#[derive(Debug, Clone)]
pub enum Item {
    /// A QUERY event other than `BEGIN` (DDL).
    Statement(String),
    /// `BEGIN` … `Xid = n`.
    Transaction { xid: u64, rows: Vec<Row> },
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// "`db`.`table`" → (db, table).
fn qualified(s: &str) -> (String, String) {
    let s = s.trim();
    let parts: Vec<&str> = s.split("`.`").collect();
    assert_eq!(parts.len(), 2, "not a qualified name: {s}");
    (
        parts[0].trim_start_matches('`').to_owned(),
        parts[1].trim_end_matches('`').to_owned(),
    )
}

/// A `# Columns(` entry: "`name` TYPE…".
fn column(entry: &str) -> Column {
    let entry = entry.trim();
    let rest = entry.strip_prefix('`').expect("column name quoted");
    let end = rest.find('`').expect("column name end");
    Column {
        name: rest[..end].to_owned(),
        sql_type: rest[end + 1..].trim().to_owned(),
    }
}

/// Parses a whole listing (the bytes `mariadb-binlog` wrote).
pub fn parse_listing(listing: &[u8]) -> Vec<Item> {
    let lines: Vec<&[u8]> = listing.split(|b| *b == b'\n').collect();
    let mut items = Vec::new();
    let mut open: Option<Vec<Row>> = None;
    // Latest column list per table.
    let mut tables: std::collections::HashMap<(String, String), Vec<Column>> =
        std::collections::HashMap::new();
    let mut i = 0;
    // Which image `@N=` lines go to.
    let mut into_before = false;
    while i < lines.len() {
        let line = lines[i];
        let s = text(line);
        i += 1;
        if s.starts_with('#') && s.contains("\tTable_map: ") {
            let name = s.split("\tTable_map: ").nth(1).expect("table map name");
            let name = name.split(" mapped to").next().expect("name");
            let (db, table) = qualified(name);
            // `# Columns(`a` T,` / `#         `b` T,` … `#         `z` T)`
            let mut cols = Vec::new();
            if i < lines.len() && text(lines[i]).starts_with("# Columns(") {
                loop {
                    let l = text(lines[i]);
                    i += 1;
                    let body = l
                        .strip_prefix("# Columns(")
                        .or_else(|| l.strip_prefix('#'))
                        .expect("column line");
                    let last = body.trim_end().ends_with(')');
                    let body = body.trim_end();
                    let body = if last {
                        &body[..body.len() - 1]
                    } else {
                        body.strip_suffix(',').unwrap_or(body)
                    };
                    cols.push(column(body));
                    if last {
                        break;
                    }
                }
            }
            tables.insert((db, table), cols);
            continue;
        }
        // A MariaDB GTID event that opens a transaction stands for its BEGIN (`GTID 0-1-5
        // trans`; a standalone statement's GTID has no `trans`).
        if s.starts_with('#') && s.contains("\tGTID ") {
            if s.trim_end().ends_with(" trans") {
                assert!(open.is_none(), "GTID trans inside a transaction");
                open = Some(Vec::new());
            }
            continue;
        }
        if s.starts_with('#') && s.contains("\tQuery\t") {
            // Statement lines until `/*!*/;`; session `SET`s and `use` end with `/*!*/;` too.
            let mut stmt: Vec<String> = Vec::new();
            while i < lines.len() {
                let l = text(lines[i]);
                i += 1;
                if l == "/*!*/;" {
                    break;
                }
                if l.ends_with("/*!*/;") || l.starts_with('#') {
                    continue;
                }
                stmt.push(l);
            }
            let stmt = stmt.join("\n");
            if stmt == "BEGIN" {
                assert!(open.is_none(), "BEGIN inside a transaction");
                open = Some(Vec::new());
            } else {
                assert!(open.is_none(), "statement inside a transaction: {stmt}");
                items.push(Item::Statement(stmt));
            }
            continue;
        }
        if s.starts_with('#') && s.contains("\tXid = ") {
            let xid = s
                .split("\tXid = ")
                .nth(1)
                .and_then(|x| x.trim().parse().ok())
                .expect("xid");
            let rows = open.take().expect("XID outside a transaction");
            items.push(Item::Transaction { xid, rows });
            continue;
        }
        let op_table = [
            ("### INSERT INTO ", "insert"),
            ("### UPDATE ", "update"),
            ("### DELETE FROM ", "delete"),
        ]
        .iter()
        .find_map(|(p, op)| s.strip_prefix(p).map(|rest| (*op, rest.to_owned())));
        if let Some((op, name)) = op_table {
            let (db, table) = qualified(&name);
            let columns = tables
                .get(&(db.clone(), table.clone()))
                .cloned()
                .unwrap_or_default();
            let rows = open.as_mut().expect("rows outside a transaction");
            rows.push(Row {
                db,
                table,
                op,
                columns,
                before: (op != "insert").then(Vec::new),
                after: (op != "delete").then(Vec::new),
            });
            into_before = op != "insert";
            continue;
        }
        if s == "### WHERE" {
            into_before = true;
            continue;
        }
        if s == "### SET" {
            into_before = false;
            continue;
        }
        if let Some(rest) = line.strip_prefix(b"###   @") {
            let eq = rest.iter().position(|b| *b == b'=').expect("@N=");
            let index: usize = text(&rest[..eq]).parse().expect("column number");
            let value = &rest[eq + 1..];
            // The comment is the last ` /* … */` of the line.
            let c = value
                .windows(4)
                .rposition(|w| w == b" /* ")
                .expect("type comment");
            let comment = text(&value[c + 4..]);
            let comment = comment.trim_end().trim_end_matches("*/").trim();
            let print_type = comment
                .split(" meta=")
                .next()
                .unwrap_or_default()
                .to_owned();
            let is_null = comment.contains("is_null=1");
            let mut printed = value[..c].to_vec();
            while printed.last() == Some(&b' ') {
                printed.pop();
            }
            let row = open
                .as_mut()
                .and_then(|r| r.last_mut())
                .expect("value outside a row");
            let image = if into_before {
                &mut row.before
            } else {
                &mut row.after
            };
            image.as_mut().expect("image for this op").push(Cell {
                index: index - 1,
                printed,
                print_type,
                is_null,
            });
        }
    }
    assert!(open.is_none(), "the listing ended inside a transaction");
    items
}

/// `'…'` as `mariadb-binlog` quotes bytes: bytes below 0x20 as `\xNN`, the rest raw.
pub fn quote(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![b'\''];
    for &b in bytes {
        if b > 0x1f {
            out.push(b);
        } else {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
    out.push(b'\'');
    out
}

/// C's `printf("%g")` with `precision` significant digits.
pub fn format_g(x: f64, precision: usize) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{:.*e}", precision - 1, x);
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent value");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if exp < -4 || exp >= precision as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim(&format!("{x:.decimals$}"))
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD hh:mm:ss[.frac]` (UTC) → (seconds since the epoch, fraction digits).
fn epoch_of(datetime: &str) -> Option<(i64, String)> {
    let (date, time) = datetime.split_once(' ')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, mo, dd) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, mi, s) = (t.next()??, t.next()??, t.next()??);
    Some((
        days_from_civil(y, mo, dd) * 86_400 + h * 3600 + mi * 60 + s,
        frac.to_owned(),
    ))
}

/// Members of `ENUM('a','b')` / `SET('a','b')`.
fn members(sql_type: &str) -> Vec<String> {
    let open = sql_type.find('(').map_or(0, |p| p + 1);
    let mut out = Vec::new();
    let b = sql_type.as_bytes();
    let mut i = open;
    while i < b.len() && b[i] == b'\'' {
        let mut m = Vec::new();
        i += 1;
        while i < b.len() {
            if b[i] == b'\'' && b.get(i + 1) == Some(&b'\'') {
                m.push(b'\'');
                i += 2;
            } else if b[i] == b'\'' {
                i += 1;
                break;
            } else {
                m.push(b[i]);
                i += 1;
            }
        }
        out.push(String::from_utf8_lossy(&m).into_owned());
        if b.get(i) == Some(&b',') {
            i += 1;
        }
    }
    out
}

/// The number in `b'0101'`.
fn bits(printed: &str) -> Option<u64> {
    let inner = printed.strip_prefix("b'")?.strip_suffix('\'')?;
    u64::from_str_radix(inner, 2).ok()
}

/// Whether `cell` (of column `col`) is the value the truth-log text `truth` stands for.
pub fn cell_matches(cell: &Cell, col: &Column, truth: Option<&str>) -> bool {
    let Some(truth) = truth else {
        return cell.is_null;
    };
    if cell.is_null {
        return false;
    }
    let printed = text(&cell.printed);
    let ty = col.sql_type.to_ascii_uppercase();
    let head = ty.split(['(', ' ']).next().unwrap_or_default().to_owned();
    match head.as_str() {
        "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "BIGINT" => {
            // "-1 (255)": the signed reading, then the unsigned one.
            let (signed, unsigned) = match printed.split_once(" (") {
                Some((s, u)) => (s.to_owned(), u.trim_end_matches(')').to_owned()),
                None => (printed.clone(), printed.clone()),
            };
            if ty.contains("UNSIGNED") {
                unsigned == truth
            } else {
                signed == truth
            }
        }
        "FLOAT" => truth
            .parse::<f32>()
            .is_ok_and(|f| format_g(f64::from(f), 6) == printed),
        "DOUBLE" => match (truth.parse::<f64>(), printed.parse::<f64>()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        "DECIMAL" | "YEAR" => printed == truth,
        "DATE" => printed == format!("'{}'", truth.replace('-', ":")),
        "DATETIME" | "TIME" => printed == format!("'{truth}'"),
        "TIMESTAMP" => {
            let Some((secs, frac)) = epoch_of(truth) else {
                return false;
            };
            let (p_secs, p_frac) = printed.split_once('.').unwrap_or((&printed, ""));
            p_secs.parse::<i64>().ok() == Some(secs) && p_frac == frac
        }
        "ENUM" => {
            let m = members(&col.sql_type);
            match printed.parse::<usize>() {
                Ok(0) => truth.is_empty(),
                Ok(n) => m.get(n - 1).is_some_and(|v| v == truth),
                Err(_) => false,
            }
        }
        "SET" => {
            let m = members(&col.sql_type);
            bits(&printed).is_some_and(|mask| {
                let names: Vec<&str> = m
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i < 64 && mask & (1 << i) != 0)
                    .map(|(_, n)| n.as_str())
                    .collect();
                names.join(",") == truth
            })
        }
        "BIT" => {
            let n: usize = ty
                .trim_start_matches("BIT(")
                .trim_end_matches(')')
                .parse()
                .unwrap_or(64);
            let width = n.div_ceil(8).clamp(1, 8);
            bits(&printed).is_some_and(|v| {
                let hex = hex::encode_upper(&v.to_be_bytes()[8 - width..]);
                format!("0x{hex}") == truth
            })
        }
        _ => {
            // Strings: the truth shows bytes that are not UTF-8 as 0x + hex.
            if quote(truth.as_bytes()) == cell.printed {
                return true;
            }
            let binary = truth
                .strip_prefix("0x")
                .and_then(|h| hex::decode(h).ok())
                .filter(|b| std::str::from_utf8(b).is_err());
            binary.is_some_and(|b| quote(&b) == cell.printed)
        }
    }
}

/// Whether an image equals a truth-log image (`{column: text|null}`), column by column;
/// `compared` counts the values compared.
pub fn image_matches(
    cells: &Option<Vec<Cell>>,
    columns: &[Column],
    truth: &serde_json::Value,
    compared: &mut u64,
) -> bool {
    match cells {
        None => truth.is_null(),
        Some(cells) => {
            let Some(obj) = truth.as_object() else {
                return false;
            };
            cells.len() == obj.len()
                && cells.iter().all(|c| {
                    let Some(col) = columns.get(c.index) else {
                        return false;
                    };
                    let ok = obj
                        .get(&col.name)
                        .is_some_and(|t| cell_matches(c, col, t.as_str()));
                    *compared += u64::from(ok);
                    ok
                })
        }
    }
}

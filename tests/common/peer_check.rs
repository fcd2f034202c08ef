//! The comparison that every row-level CDC peer (Maxwell, Canal) goes through: the truth log
//! from the peer's start position on, transaction by transaction against what the peer
//! printed, then every table's final state. A peer prints values in its own notation; each
//! peer module turns them back into MySQL's text and gives the canonical form both sides are
//! compared in (a `Canon` function: column type, text → canonical text).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value as Json};

use super::replica::{Model, TableRows};
use super::truth::{idents, TableId};

/// Column type, value text (`None` for NULL) → the canonical text both sides are compared in.
pub type Canon = fn(&str, Option<&str>) -> Option<String>;

/// Column types of the truth log's tables: (database, table) → [(column, type as declared,
/// e.g. `decimal(20,6)`, `enum('red','green')`)].
#[derive(Debug, Default)]
pub struct Types(pub BTreeMap<TableId, Vec<(String, String)>>);

/// The items of a parenthesised list whose `(` has just been passed: split at commas outside
/// parentheses, quotes and backquotes, up to the matching `)`.
fn list_items(s: &str) -> Vec<&str> {
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0);
    let mut out = Vec::new();
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') if depth == 0 => {
                out.push(s[start..i].trim());
                return out;
            }
            (None, ')') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// `` `name` type … `` → (name, type): the type is the first word, parentheses included.
fn column_def(item: &str) -> (String, String) {
    let rest = item.strip_prefix('`').expect("column name");
    let end = rest.find('`').expect("column name end");
    let after = rest[end + 1..].trim_start();
    let (mut depth, mut quoted) = (0, false);
    for (i, c) in after.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ' ' if !quoted && depth == 0 => {
                return (rest[..end].to_owned(), after[..i].to_owned());
            }
            _ => {}
        }
    }
    (rest[..end].to_owned(), after.to_owned())
}

impl Types {
    /// Follows one truth-log DDL statement.
    pub fn apply(&mut self, ddl: &str) {
        let ids = idents(ddl);
        let key = || (ids[0].clone(), ids[1].clone());
        if ddl.starts_with("CREATE TABLE ") {
            let list = &ddl[ddl.find(" (").expect("column list") + 2..];
            let cols = list_items(list)
                .into_iter()
                .filter(|i| i.starts_with('`'))
                .map(column_def)
                .collect();
            self.0.insert(key(), cols);
        } else if ddl.starts_with("DROP TABLE ") {
            self.0.remove(&key());
        } else if ddl.starts_with("RENAME TABLE ") {
            for c in ids.chunks(4) {
                let cols = self.0.remove(&(c[0].clone(), c[1].clone()));
                self.0
                    .insert((c[2].clone(), c[3].clone()), cols.expect("renamed table"));
            }
        } else if let Some(rest) = ddl.strip_prefix("ALTER TABLE ") {
            let action = rest.split_once("` ").expect("alter action").1;
            let cols = self.0.get_mut(&key()).expect("altered table");
            if let Some(def) = action.strip_prefix("ADD COLUMN ") {
                cols.push(column_def(def));
            } else if let Some(def) = action.strip_prefix("MODIFY COLUMN ") {
                let (name, ty) = column_def(def);
                let col = cols.iter_mut().find(|(n, _)| *n == name).expect("column");
                col.1 = ty;
            } else if action.starts_with("DROP COLUMN ") {
                cols.retain(|(n, _)| *n != ids[2]);
            }
        }
    }

    /// The declared type of a column.
    pub fn of(&self, db: &str, table: &str, column: &str) -> &str {
        let cols = self
            .0
            .get(&(db.to_owned(), table.to_owned()))
            .unwrap_or_else(|| panic!("no types for `{db}`.`{table}`"));
        cols.iter()
            .find(|(n, _)| n == column)
            .map(|(_, t)| t.as_str())
            .unwrap_or_else(|| panic!("no column `{db}`.`{table}`.`{column}`"))
    }

    /// The columns of a table in order.
    pub fn columns(&self, db: &str, table: &str) -> Vec<&str> {
        self.0
            .get(&(db.to_owned(), table.to_owned()))
            .map(|c| c.iter().map(|(n, _)| n.as_str()).collect())
            .unwrap_or_default()
    }
}

/// A row image (column → text) with every value in `canon` form; `null` stays `null`.
pub fn canon_image(
    types: &Types,
    canon: Canon,
    db: &str,
    table: &str,
    image: &serde_json::Map<String, Json>,
) -> Json {
    Json::Object(
        image
            .iter()
            .map(|(c, v)| {
                let ty = types.of(db, table, c);
                (c.clone(), json!(canon(ty, v.as_str())))
            })
            .collect(),
    )
}

/// A row in the form compared: `{db, table, op, before, after}` (images `null` when absent).
pub fn row(db: &str, table: &str, op: &str, before: Json, after: Json) -> Json {
    json!({"db": db, "table": table, "op": op, "before": before, "after": after})
}

/// The rows of a truth transaction in `canon` form, sorted.
pub fn canon_rows(types: &Types, canon: Canon, txn: &Json) -> Vec<Json> {
    let mut rows: Vec<Json> = txn["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let (db, t) = (
                r["db"].as_str().expect("db"),
                r["table"].as_str().expect("t"),
            );
            let image = |i: &Json| {
                i.as_object()
                    .map_or(Json::Null, |m| canon_image(types, canon, db, t, m))
            };
            row(
                db,
                t,
                r["op"].as_str().expect("op"),
                image(&r["before"]),
                image(&r["after"]),
            )
        })
        .collect();
    rows.sort_by_key(|r| r.to_string());
    rows
}

/// One transaction as a peer printed it: its transaction id and its rows in the compared form
/// (see [`row`]), sorted.
pub struct PeerTxn {
    pub xid: String,
    pub rows: Vec<Json>,
}

/// What [`verify`] compared.
#[derive(Debug, Default)]
pub struct Compared {
    pub txns: usize,
    pub rows: usize,
    pub ddl: usize,
    /// Truth DDL statements the peer did not report (`printed` said no).
    pub ddl_unprinted: Vec<String>,
    /// Every table's final rows (in `canon` form) and column types, as the truth log left them.
    pub tables: BTreeMap<TableId, TableRows>,
    pub types: Types,
}

/// Walks the truth log from transaction `start` (the peer's start position) along the peer's
/// transactions: each truth transaction with rows must be the peer's next one (its XID is our
/// start ts), row for row in `canon` form; then compares every table's final state, rebuilt
/// from the truth log up to `start` plus the peer's rows. `next` turns the peer's next
/// transaction into a [`PeerTxn`] with the column types of that moment (`None`: no more).
/// `printed` says whether the peer reported a DDL statement. `seed` and `tool` name the run.
pub fn verify(
    seed: u64,
    tool: &str,
    truth: &[Json],
    start: usize,
    canon: Canon,
    mut next: impl FnMut(&Types) -> Option<PeerTxn>,
    printed: impl Fn(&str) -> bool,
) -> Compared {
    let mut types = Types::default();
    let (mut want, mut got) = (Model::default(), Model::default());
    for t in &truth[..start] {
        if let Some(ddl) = t["ddl"].as_str() {
            types.apply(ddl);
            want.apply(t);
            got.apply(t);
            continue;
        }
        let rows = json!({"rows": canon_rows(&types, canon, t)});
        want.apply(&rows);
        got.apply(&rows);
    }
    let mut seen = Compared::default();
    for (i, t) in truth[start..].iter().enumerate() {
        let at = format!("seed {seed}: truth transaction {} (GNO)", start + i + 1);
        if let Some(ddl) = t["ddl"].as_str() {
            types.apply(ddl);
            want.apply(t);
            got.apply(t);
            seen.ddl += 1;
            if !printed(ddl) {
                seen.ddl_unprinted.push(ddl.to_owned());
            }
            continue;
        }
        let mine = next(&types).unwrap_or_else(|| panic!("{at}: {tool} printed no more rows"));
        assert_eq!(
            mine.xid,
            t["start_ts"].to_string(),
            "{at}: {tool}'s transaction is another one"
        );
        let w = canon_rows(&types, canon, t);
        assert!(
            mine.rows == w,
            "{at}: {tool}'s rows differ from the truth log's:\n{}",
            rows_diff(tool, &mine.rows, &w)
        );
        want.apply(&json!({"rows": w}));
        got.apply(&json!({"rows": mine.rows}));
        seen.txns += 1;
        seen.rows += w.len();
    }
    if let Some(extra) = next(&types) {
        panic!(
            "seed {seed}: {tool} printed transactions past the end of the truth log (doubled?): \
             XID {} with {} rows",
            extra.xid,
            extra.rows.len()
        );
    }
    assert_eq!(
        got.tables.keys().collect::<Vec<_>>(),
        want.tables.keys().collect::<Vec<_>>(),
        "seed {seed}: tables"
    );
    for (t, rows) in &want.tables {
        assert_eq!(&got.tables[t], rows, "seed {seed}: final rows of {t:?}");
    }
    seen.tables = want.tables;
    seen.types = types;
    seen
}

/// The differences of two sorted row lists, column by column (the peer's value, then the
/// truth log's).
pub fn rows_diff(tool: &str, got: &[Json], want: &[Json]) -> String {
    let mut out = format!(
        "{} rows from {tool}, {} in the truth log\n",
        got.len(),
        want.len()
    );
    for (g, w) in got.iter().zip(want) {
        for key in ["db", "table", "op"] {
            if g[key] != w[key] {
                out.push_str(&format!("  {key}: {} vs {}\n", g[key], w[key]));
            }
        }
        for image in ["before", "after"] {
            let (gi, wi) = (&g[image], &w[image]);
            let cols: BTreeSet<&String> = [gi, wi]
                .iter()
                .filter_map(|i| i.as_object())
                .flat_map(|m| m.keys())
                .collect();
            for c in cols {
                if gi.get(c) != wi.get(c) {
                    out.push_str(&format!(
                        "  `{}`.{image}.{c}: {:?} vs {:?}\n",
                        w["table"],
                        gi.get(c),
                        wi.get(c)
                    ));
                }
            }
        }
    }
    out
}

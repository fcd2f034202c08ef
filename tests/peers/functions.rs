//! The expression engine against MySQL 8.0 on the same rows: a table whose virtual generated
//! columns use the functions TiDB tables use for them (JSON paths, `->`/`->>`, DATE_FORMAT and
//! the date parts, string functions, the checksum functions sync-diff-inspector and
//! pt-table-checksum build their chunk queries from) is filled with random rows (fresh seed,
//! printed) on MySQL; the engine compiles each column from the expression text MySQL itself
//! stores (information_schema.COLUMNS, written with introducers as TiDB writes them) and
//! computes it from the same base values. Every cell must print as MySQL prints it.

use mysql_async::prelude::*;
use tibinlog::sim::ts::SimRng;
use tibinlog::sql::charset::UTF8MB4_0900_AI_CI;
use tibinlog::sql::func::json::parse_text;
use tibinlog::sql::generated::VirtualColumns;
use tibinlog::sql::text::to_text;
use tibinlog::sql::types::{SqlType, TypeKind};
use tibinlog_protocol::value::{Date, DateTime, Value};

use crate::common::demo::fresh_seed;
use crate::common::mysql8::Mysql8;

/// The generated columns: name, MySQL type, expression (MySQL's syntax).
const COLUMNS: &[(&str, &str, &str)] = &[
    ("g_name", "VARCHAR(100)", "doc->>'$.name'"),
    ("g_tag0", "JSON", "doc->'$.tags[0]'"),
    ("g_tags", "JSON", "json_extract(doc, '$.tags[*]', '$.n')"),
    ("g_deep", "JSON", "json_extract(doc, '$**.x')"),
    ("g_last", "JSON", "json_extract(doc, '$.tags[last]')"),
    ("g_born", "INT", "year(json_unquote(json_extract(doc, '$.born')))"),
    ("g_type", "VARCHAR(20)", "json_type(doc->'$.n')"),
    ("g_len", "INT", "json_length(doc)"),
    ("g_nick", "VARCHAR(100)", "ifnull(doc->>'$.nick', s)"),
    (
        "g_fmt",
        "VARCHAR(200)",
        "date_format(d, '%W %a %D %M %b %Y %y %c %e %H:%i:%s %p %r %T %h %l %k %j %w %f')",
    ),
    ("g_weeks", "VARCHAR(100)", "date_format(d, '%U %u %V %v %X %x')"),
    (
        "g_parts",
        "VARCHAR(100)",
        "concat_ws('/', year(d), month(d), day(d), dayofweek(d), weekday(d), dayofyear(d), quarter(d), to_days(d), hour(d), minute(d), second(d), microsecond(d))",
    ),
    ("g_date", "DATE", "date(d)"),
    ("g_case", "VARCHAR(200)", "concat(lower(s), '-', upper(s), '-', n)"),
    ("g_sub", "VARCHAR(100)", "substring(s, 2, 3)"),
    ("g_crc", "BIGINT UNSIGNED", "crc32(concat_ws('#', id, s, n, isnull(s)))"),
    ("g_md5", "VARCHAR(32)", "md5(s)"),
    ("g_sha1", "VARCHAR(40)", "sha1(s)"),
    ("g_sha2", "VARCHAR(128)", "sha2(s, 512)"),
    ("g_hex", "VARCHAR(200)", "hex(s)"),
    ("g_conv", "VARCHAR(40)", "lower(conv(crc32(s), 10, 16))"),
    ("g_arith", "BIGINT", "n * 3 + id"),
    // Row values, as keyset pagination compares them.
    ("g_row_gt", "INT", "(s, n) > ('bob', 0)"),
    ("g_row_le", "INT", "(n > 0, s, id) <= (1, 'annann', 50)"),
    ("g_row_eq", "INT", "(s, n % 3) = ('x yx y', 1)"),
    ("g_row_ne", "INT", "(s, n % 2) <> ('ann', 0)"),
    ("g_row_in", "INT", "(n % 3, s) in ((0, 'annBob'), (1, s), (2, NULL))"),
];

const WORDS: &[&str] = &[
    "ann", "Bob", "çé", "x y", "", "Zoë", "日本", "a\"q", "tab\t",
];

fn word(rng: &mut SimRng) -> &'static str {
    WORDS[(rng.next_u64() % WORDS.len() as u64) as usize]
}

/// One row's base values: JSON document text, string, datetime, number.
struct Row {
    id: i64,
    doc: String,
    s: Option<String>,
    d: DateTime,
    n: i64,
}

fn random_row(id: i64, rng: &mut SimRng) -> Row {
    let mut members = Vec::new();
    if rng.chance(0.8) {
        members.push(format!("\"name\": {}", serde_json::json!(word(rng))));
    }
    let tags: Vec<serde_json::Value> = (0..rng.next_u64() % 4)
        .map(|i| {
            if i % 2 == 0 {
                serde_json::json!(word(rng))
            } else {
                serde_json::json!(rng.next_u64() % 1000)
            }
        })
        .collect();
    members.push(format!("\"tags\": {}", serde_json::Value::Array(tags)));
    if rng.chance(0.7) {
        let y = 1901 + rng.next_u64() % 250;
        members.push(format!(
            "\"born\": \"{y}-0{}-1{}\"",
            1 + rng.next_u64() % 9,
            rng.next_u64() % 10
        ));
    }
    match rng.next_u64() % 4 {
        0 => members.push(format!("\"n\": {}", rng.next_u64() % 100_000)),
        1 => members.push("\"n\": 1.5".to_owned()),
        2 => members.push("\"n\": null".to_owned()),
        _ => members.push("\"n\": [true, {\"x\": 1}]".to_owned()),
    }
    if rng.chance(0.5) {
        members.push(format!(
            "\"nested\": {{\"x\": {}, \"y\": {{\"x\": \"deep\"}}}}",
            rng.next_u64() % 7
        ));
    }
    if rng.chance(0.3) {
        members.push(format!("\"nick\": {}", serde_json::json!(word(rng))));
    }
    let d = DateTime {
        date: Date {
            year: (1000 + rng.next_u64() % 9000) as u16,
            month: (1 + rng.next_u64() % 12) as u8,
            day: (1 + rng.next_u64() % 28) as u8,
        },
        hour: (rng.next_u64() % 24) as u8,
        minute: (rng.next_u64() % 60) as u8,
        second: (rng.next_u64() % 60) as u8,
        micros: (rng.next_u64() % 1_000_000) as u32,
    };
    Row {
        id,
        doc: format!("{{{}}}", members.join(", ")),
        s: rng
            .chance(0.9)
            .then(|| format!("{}{}", word(rng), word(rng))),
        d,
        n: rng.next_u64() as i64 % 1_000_000 - 500_000,
    }
}

/// The engine's type of a generated column declared as `mysql_type`.
fn sql_type(mysql_type: &str) -> SqlType {
    match mysql_type {
        "JSON" => SqlType::new(TypeKind::Json),
        "INT" => SqlType::int(),
        "BIGINT" => SqlType::bigint(),
        "BIGINT UNSIGNED" => SqlType::ubigint(),
        "DATE" => SqlType::new(TypeKind::Date),
        other => {
            let chars = other
                .trim_start_matches("VARCHAR(")
                .trim_end_matches(')')
                .parse()
                .expect("VARCHAR(n)");
            SqlType::varchar(chars, UTF8MB4_0900_AI_CI)
        }
    }
}

fn datetime_text(d: &DateTime) -> String {
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}",
        d.date.year, d.date.month, d.date.day, d.hour, d.minute, d.second, d.micros
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_column_functions_compute_what_mysql8_computes() {
    let Some(db) = Mysql8::start(1, &[]) else {
        return;
    };
    let seed = fresh_seed("generated_column_functions_compute_what_mysql8_computes");
    let mut rng = SimRng::new(seed);
    let mut conn = db.conn().await;
    let generated: Vec<String> = COLUMNS
        .iter()
        .map(|(name, ty, expr)| format!("{name} {ty} GENERATED ALWAYS AS ({expr}) VIRTUAL"))
        .collect();
    let create = format!(
        "CREATE TABLE test.f (id BIGINT PRIMARY KEY, doc JSON, s VARCHAR(40), d DATETIME(6), n BIGINT, {})",
        generated.join(", ")
    );
    conn.query_drop("CREATE DATABASE test")
        .await
        .expect("create database");
    conn.query_drop(&create)
        .await
        .unwrap_or_else(|e| panic!("{create}: {e}"));
    let rows: Vec<Row> = (1..=300).map(|id| random_row(id, &mut rng)).collect();
    for r in &rows {
        conn.exec_drop(
            "INSERT INTO test.f (id, doc, s, d, n) VALUES (?, ?, ?, ?, ?)",
            (r.id, &r.doc, &r.s, datetime_text(&r.d), r.n),
        )
        .await
        .unwrap_or_else(|e| panic!("insert {}: {e}", r.doc));
    }
    // The expressions as MySQL stores them (`_utf8mb4'…'` introducers, backquoted names).
    // MySQL 8.0 shows quotes in GENERATION_EXPRESSION escaped (`_utf8mb4\'$.a\'`), which the
    // stored expression and TiDB's GeneratedExprString are not.
    let stored: Vec<(String, String)> = conn
        .query(
            "SELECT COLUMN_NAME, GENERATION_EXPRESSION FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'f' AND GENERATION_EXPRESSION <> '' \
             ORDER BY ORDINAL_POSITION",
        )
        .await
        .expect("generation expressions");
    assert_eq!(stored.len(), COLUMNS.len());

    let mut names: Vec<String> = ["id", "doc", "s", "d", "n"].map(str::to_owned).to_vec();
    let mut types = vec![
        SqlType::bigint(),
        SqlType::new(TypeKind::Json),
        SqlType::varchar(40, UTF8MB4_0900_AI_CI),
        SqlType::datetime(6),
        SqlType::bigint(),
    ];
    for (name, ty, _) in COLUMNS {
        names.push((*name).to_owned());
        types.push(sql_type(ty));
    }
    let exprs = stored
        .iter()
        .enumerate()
        .map(|(i, (_, e))| (5 + i, e.replace("\\'", "'")))
        .collect::<Vec<_>>();
    let exprs: Vec<(usize, &str)> = exprs.iter().map(|(i, e)| (*i, e.as_str())).collect();
    let (engine, failed) = VirtualColumns::compile("f", &names, &types, &exprs);
    assert_eq!(failed, [], "every expression compiles");

    let select = format!(
        "SELECT {} FROM test.f ORDER BY id",
        COLUMNS.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
    );
    let theirs: Vec<mysql_async::Row> = conn.query(&select).await.expect("select");
    assert_eq!(theirs.len(), rows.len());
    let mut differences = Vec::new();
    // Cells MySQL computed as non-NULL, per column: none may be all NULL (a vacuous check).
    let mut valued = vec![0usize; COLUMNS.len()];
    for (r, their) in rows.iter().zip(&theirs) {
        let doc = parse_text(r.doc.as_bytes(), 1, "test").expect("our JSON parser reads it");
        let mut cells = vec![
            Value::Int(r.id),
            Value::Json(doc),
            r.s.as_ref()
                .map_or(Value::Null, |s| Value::Bytes(s.as_bytes().to_vec())),
            Value::DateTime(r.d),
            Value::Int(r.n),
        ];
        cells.resize(names.len(), Value::Null);
        if let Err(e) = engine.fill(&mut cells) {
            differences.push(format!("row {}: {} fails: {}", r.id, e.column, e.reason));
            continue;
        }
        for (i, (name, _, expr)) in COLUMNS.iter().enumerate() {
            let mysql: Option<Vec<u8>> = their.get(i).expect("a cell");
            let mysql = mysql.map(|b| String::from_utf8_lossy(&b).into_owned());
            valued[i] += usize::from(mysql.is_some());
            let ours = to_text(&cells[5 + i], &types[5 + i]);
            if ours != mysql {
                differences.push(format!(
                    "row {} {name} = {expr}\n  doc {}\n  s {:?} d {} n {}\n  MySQL {mysql:?}\n  ours  {ours:?}",
                    r.id,
                    r.doc,
                    r.s,
                    datetime_text(&r.d),
                    r.n
                ));
            }
        }
    }
    for ((name, ..), n) in COLUMNS.iter().zip(&valued) {
        assert!(*n > 0, "seed {seed}: MySQL computed no value of {name}");
    }
    assert!(
        differences.is_empty(),
        "seed {seed}: {} differences, the first:\n{}",
        differences.len(),
        differences[..differences.len().min(8)].join("\n")
    );
    let _ = conn.disconnect().await;
}

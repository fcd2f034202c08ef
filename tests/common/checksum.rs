//! The chunk checksum queries of the drift checkers users run (TiDB's sync-diff-inspector, in
//! its older CRC32 form and its MD5 form of today; Percona's pt-table-checksum), run against tibinlog and a replica of it: on the same rows
//! both must give the same count and checksum, so that a check of a replica against tibinlog
//! reports nothing when there is nothing to report.

#![allow(dead_code)]

use mysql_async::prelude::*;

/// The columns of `db`.`t` in order, with their types, as `information_schema` gives them.
pub async fn columns(conn: &mut mysql_async::Conn, db: &str, t: &str) -> Vec<(String, String)> {
    conn.exec(
        "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
        (db, t),
    )
    .await
    .expect("columns")
}

fn quoted(cols: &[&str]) -> (String, String) {
    let list = cols
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let nulls = cols
        .iter()
        .map(|c| format!("ISNULL(`{c}`)"))
        .collect::<Vec<_>>()
        .join(", ");
    (list, nulls)
}

/// sync-diff-inspector's chunk checksum over `cols` of the whole table.
pub fn sync_diff_query(db: &str, t: &str, cols: &[&str]) -> String {
    let (list, nulls) = quoted(cols);
    format!(
        "SELECT COUNT(*) as CNT, BIT_XOR(CAST(CRC32(CONCAT_WS(',', {list}, CONCAT({nulls})))AS UNSIGNED)) as CHECKSUM FROM `{db}`.`{t}` WHERE TRUE"
    )
}

/// sync-diff-inspector's chunk checksum of today (`GetCountAndMd5Checksum`): each row's MD5
/// read as two 64-bit halves XORed together, the rows' values XORed.
pub fn sync_diff_md5_query(db: &str, t: &str, cols: &[&str]) -> String {
    let (list, nulls) = quoted(cols);
    let row = format!("MD5(CONCAT_WS(',', {list}, CONCAT({nulls})))");
    format!(
        "SELECT COUNT(*) as CNT, BIT_XOR(CAST(CONV(SUBSTRING({row}, 1, 16), 16, 10) AS UNSIGNED) ^ CAST(CONV(SUBSTRING({row}, 17, 16), 16, 10) AS UNSIGNED)) as CHECKSUM FROM `{db}`.`{t}` WHERE TRUE"
    )
}

/// pt-table-checksum's chunk query over `cols` (its `#` separator, hexadecimal result).
pub fn pt_checksum_query(db: &str, t: &str, cols: &[&str]) -> String {
    let (list, nulls) = quoted(cols);
    format!(
        "SELECT COUNT(*) AS cnt, COALESCE(LOWER(CONV(BIT_XOR(CAST(CRC32(CONCAT_WS('#', {list}, CONCAT({nulls}))) AS UNSIGNED)), 10, 16)), 0) AS crc FROM `{db}`.`{t}` WHERE 1=1"
    )
}

/// `(count, checksum)` of a checksum query.
pub async fn run(conn: &mut mysql_async::Conn, sql: &str) -> (u64, String) {
    let row: mysql_async::Row = conn
        .query_first(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .expect("a row");
    let count: u64 = row.get(0).expect("count");
    let sum: Option<String> = row.get(1).expect("checksum");
    (count, sum.unwrap_or_default())
}

/// Runs both tools' queries for every table of `tables` on both servers; returns the tables
/// compared, and for each one that differs, the columns whose own checksums differ (with their
/// types) — every column is checked alone to name them.
pub async fn compare(
    ours: &mut mysql_async::Conn,
    theirs: &mut mysql_async::Conn,
    tables: &[(String, String)],
) -> (usize, Vec<String>) {
    let mut differences = Vec::new();
    for (db, t) in tables {
        let cols = columns(ours, db, t).await;
        let names: Vec<&str> = cols.iter().map(|(c, _)| c.as_str()).collect();
        for query in [
            sync_diff_query(db, t, &names),
            sync_diff_md5_query(db, t, &names),
            pt_checksum_query(db, t, &names),
        ] {
            let (a, b) = (run(ours, &query).await, run(theirs, &query).await);
            if a == b {
                continue;
            }
            let mut culprits = Vec::new();
            for (c, ty) in &cols {
                let q = sync_diff_query(db, t, &[c.as_str()]);
                if run(ours, &q).await != run(theirs, &q).await {
                    // The texts the checksum is taken of, side by side.
                    let q = format!(
                        "SELECT CONCAT_WS(',', `{c}`) FROM `{db}`.`{t}` ORDER BY 1 LIMIT 5"
                    );
                    let a: Vec<Option<String>> = ours.query(&q).await.unwrap_or_default();
                    let b: Vec<Option<String>> = theirs.query(&q).await.unwrap_or_default();
                    culprits.push(format!("{c} {ty}: tibinlog {a:?}, replica {b:?}"));
                }
            }
            differences.push(format!(
                "{db}.{t}: tibinlog {a:?}, replica {b:?}; columns that differ: {culprits:?}"
            ));
            break;
        }
    }
    (tables.len(), differences)
}

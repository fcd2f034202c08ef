//! The narrow table of the read benchmarks (BIGINT primary key, INT, VARCHAR(32)): its
//! definition in the simulated cluster, its rows, and the same rows in a throwaway MariaDB.

use std::time::Instant;

use tibinlog::sim::tidb::types as ty;
use tibinlog::sim::tidb::{ColumnDef, TableDef};
use tibinlog::tidb::schema::mysql::{TYPE_LONG, TYPE_LONGLONG};
use tibinlog_protocol::value::Value;

#[path = "../../tests/common/mariadb.rs"]
pub mod mariadb;

use super::util::free_port;

/// VARCHAR(32) value of every row.
pub const NAME: &str = "some narrow name";

pub fn narrow_table() -> TableDef {
    TableDef {
        name: "narrow".into(),
        columns: vec![
            ColumnDef::new("id", ty::int(TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("n", ty::int(TYPE_LONG, false)),
            ColumnDef::new("s", ty::varchar(32)),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// Row `id` (from 1) of the table.
pub fn narrow_row(id: u64) -> Vec<Value> {
    let id = id as i64;
    vec![
        Value::Int(id),
        Value::Int(id * 7),
        Value::Bytes(NAME.as_bytes().to_vec()),
    ]
}

/// A MariaDB (InnoDB, a buffer pool of `buffer_pool` bytes) with rows 1..=`rows` of the same
/// table, and its port; `None` when MariaDB is not installed.
pub fn mariadb_with(rows: i64, buffer_pool: u64) -> Option<(mariadb::MariaDb, u16)> {
    use std::io::Write;
    let port = free_port();
    let port_arg = format!("--port={port}");
    let pool_arg = format!("--innodb-buffer-pool-size={buffer_pool}");
    let db = mariadb::MariaDb::start(&[
        "--skip-networking=0",
        "--bind-address=127.0.0.1",
        &port_arg,
        "--skip-name-resolve",
        "--innodb-flush-log-at-trx-commit=0",
        &pool_arg,
    ])?;
    db.sql(
        "CREATE USER bench@'%'; GRANT ALL PRIVILEGES ON *.* TO bench@'%'; \
         CREATE DATABASE test; \
         CREATE TABLE test.narrow (id BIGINT NOT NULL PRIMARY KEY, n INT, s VARCHAR(32)) \
         DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    );
    let began = Instant::now();
    let mut child = db
        .client()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start mariadb client");
    {
        let stdin = child.stdin.as_mut().expect("client stdin");
        let mut w = std::io::BufWriter::with_capacity(1 << 20, stdin);
        let mut id = 0i64;
        while id < rows {
            write!(w, "INSERT INTO test.narrow VALUES ").expect("write");
            for i in 0..1000.min(rows - id) {
                let sep = if i == 0 { "" } else { "," };
                id += 1;
                write!(w, "{sep}({id},{},'{NAME}')", id * 7).expect("write");
            }
            writeln!(w, ";").expect("write");
        }
        w.flush().expect("flush");
    }
    let status = child.wait().expect("mariadb client");
    assert!(status.success(), "loading MariaDB failed");
    println!(
        "  MariaDB loaded {rows} rows in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    Some((db, port))
}

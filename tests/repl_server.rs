//! The MySQL-protocol server against real clients: mysql_async as SQL client and as a replica
//! (binlog stream), a raw packet client for protocol edges, and `mariadb-binlog` when installed.

#[path = "common/mariadb.rs"]
mod mariadb;
#[path = "common/repl.rs"]
mod repl;
#[path = "common/tls.rs"]
mod tls;

use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::binlog::events::EventData;
use mysql_async::binlog::EventType as MyEventType;
use mysql_async::prelude::*;
use mysql_async::{BinlogStreamRequest, GnoInterval, Sid as MySid};
use repl::{err_code, server_code, Fixture, RawClient, PASSWORD, SERVER_ID, UUID};
use tibinlog::server::BinlogSource;
use tibinlog_protocol::wire::auth::AuthMethod;

const WAIT: Duration = Duration::from_secs(20);

/// Three transactions in binlog.000001, a rotation, two more in binlog.000002.
fn fill(f: &Fixture) {
    f.source.append_insert(&[(1, "a")]);
    f.source.append_insert(&[(2, "b"), (3, "c")]);
    f.source.append_insert(&[(4, "d")]);
    f.source.rotate();
    f.source.append_insert(&[(5, "e")]);
    f.source.append_insert(&[(6, "f")]);
}

/// Column labels and the single row of a query.
async fn one_row(conn: &mut mysql_async::Conn, q: &str) -> (Vec<String>, Vec<Option<String>>) {
    let mut r = conn.query_iter(q).await.expect(q);
    let cols: Vec<String> = r
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let rows: Vec<mysql_async::Row> = r.collect().await.expect("rows");
    assert_eq!(rows.len(), 1, "{q}: one row");
    let row = rows[0].clone().unwrap();
    let vals = row
        .into_iter()
        .map(|v| match v {
            mysql_async::Value::NULL => None,
            mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            other => Some(other.as_sql(true)),
        })
        .collect();
    (cols, vals)
}

#[tokio::test]
async fn sql_surface_answers_like_mysql() {
    let f = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    fill(&f);
    let mut conn = f.conn().await;

    let (cols, vals) = one_row(
        &mut conn,
        "/* mysql-connector-j-9.1.0 */ SELECT @@session.auto_increment_increment AS auto_increment_increment, @@GLOBAL.SERVER_ID, @@server_uuid, @@gtid_mode, @@binlog_format, @@binlog_checksum, @@version",
    )
    .await;
    assert_eq!(
        cols,
        [
            "auto_increment_increment",
            "@@GLOBAL.SERVER_ID",
            "@@server_uuid",
            "@@gtid_mode",
            "@@binlog_format",
            "@@binlog_checksum",
            "@@version"
        ]
    );
    let version = format!("8.0.36-tibinlog-{}", env!("CARGO_PKG_VERSION"));
    let expect = [
        "1",
        &SERVER_ID.to_string(),
        UUID,
        "ON",
        "ROW",
        "CRC32",
        version.as_str(),
    ];
    assert_eq!(
        vals,
        expect
            .iter()
            .map(|s| Some(s.to_string()))
            .collect::<Vec<_>>()
    );

    // Variables are typed by the registry: booleans and sizes are integers, modes are strings;
    // @@max_binlog_size is the configured rotation size.
    {
        let mut r = conn
            .query_iter("SELECT @@autocommit, @@max_binlog_size, @@gtid_mode, @@tidb_snapshot")
            .await
            .expect("typed variables");
        let types: Vec<_> = r.columns_ref().iter().map(|c| c.column_type()).collect();
        let row: mysql_async::Row = r.next().await.expect("row").expect("a row");
        drop(r);
        use mysql_async::consts::ColumnType::*;
        assert_eq!(
            types,
            [
                MYSQL_TYPE_LONGLONG,
                MYSQL_TYPE_LONGLONG,
                MYSQL_TYPE_VAR_STRING,
                MYSQL_TYPE_VAR_STRING
            ]
        );
        let (autocommit, size, mode): (i64, u64, String) = (
            row.get(0).expect("0"),
            row.get(1).expect("1"),
            row.get(2).expect("2"),
        );
        assert_eq!((autocommit, size, mode.as_str()), (1, 1 << 29, "ON"));
    }
    conn.query_drop("SET autocommit = 0").await.expect("set");
    let shown: Option<(String, String)> = conn
        .query_first("SHOW SESSION VARIABLES LIKE 'autocommit'")
        .await
        .expect("show");
    assert_eq!(shown, Some(("autocommit".into(), "OFF".into())));
    let ac: Option<i64> = conn
        .query_first("SELECT @@autocommit")
        .await
        .expect("autocommit");
    assert_eq!(ac, Some(0));
    conn.query_drop("SET autocommit = 1").await.expect("set");
    let e = conn
        .query_drop("SET autocommit = 'maybe'")
        .await
        .expect_err("not a boolean");
    assert_eq!(server_code(&e), Some(1231));
    let e = conn
        .query_drop("SET net_write_timeout = 'soon'")
        .await
        .expect_err("not a number");
    assert_eq!(server_code(&e), Some(1232));
    let e = conn
        .query_drop("SET no_such_variable = 1")
        .await
        .expect_err("unknown");
    assert_eq!(server_code(&e), Some(1193));

    // Connector/J's session-variable query, answered column for column under its aliases.
    let cj = "/* mysql-connector-j-8.4.0 (Revision: 1c3f5c149e0bfe31c7fbeb24e2d260cd890972c4) */SELECT  @@session.auto_increment_increment AS auto_increment_increment, @@character_set_client AS character_set_client, @@character_set_connection AS character_set_connection, @@character_set_results AS character_set_results, @@character_set_server AS character_set_server, @@collation_server AS collation_server, @@collation_connection AS collation_connection, @@init_connect AS init_connect, @@interactive_timeout AS interactive_timeout, @@license AS license, @@lower_case_table_names AS lower_case_table_names, @@max_allowed_packet AS max_allowed_packet, @@net_write_timeout AS net_write_timeout, @@performance_schema AS performance_schema, @@sql_mode AS sql_mode, @@system_time_zone AS system_time_zone, @@time_zone AS time_zone, @@transaction_isolation AS transaction_isolation, @@wait_timeout AS wait_timeout";
    let (cols, vals) = one_row(&mut conn, cj).await;
    assert_eq!(cols.len(), 19);
    assert_eq!(cols[18], "wait_timeout");
    assert_eq!(vals[1].as_deref(), Some("utf8mb4"));
    assert_eq!(vals[16].as_deref(), Some("SYSTEM"));
    assert_eq!(vals[17].as_deref(), Some("REPEATABLE-READ"));

    let v: Option<String> = conn.query_first("SELECT VERSION()").await.expect("version");
    assert_eq!(v.as_deref(), Some(version.as_str()));
    let one: Option<i64> = conn.query_first("SELECT 1").await.expect("select 1");
    assert_eq!(one, Some(1));
    let ts: Option<u64> = conn
        .query_first("SELECT UNIX_TIMESTAMP()")
        .await
        .expect("unix_timestamp");
    assert!(ts.is_some_and(|t| t > 1_600_000_000));
    let db: Option<Option<String>> = conn.query_first("SELECT DATABASE()").await.expect("db");
    assert_eq!(db, Some(None));

    // SHOW VARIABLES with LIKE (case-insensitive, canonical lower-case names) and WHERE.
    let rows: Vec<(String, String)> = conn
        .query("SHOW GLOBAL VARIABLES LIKE 'BINLOG_ROW_%';")
        .await
        .expect("show variables like");
    assert!(rows.contains(&("binlog_row_image".into(), "FULL".into())));
    // `_` matches any one character: MySQL lists binlog_rows_query_log_events too.
    assert!(rows.iter().all(|(k, _)| k.starts_with("binlog_row")));
    assert!(rows
        .iter()
        .any(|(k, _)| k == "binlog_rows_query_log_events"));
    let rows: Vec<(String, String)> = conn
        .query("SHOW VARIABLES WHERE Variable_name IN ('server_id', 'log_bin')")
        .await
        .expect("show variables where");
    assert_eq!(
        rows,
        [
            ("log_bin".to_string(), "ON".to_string()),
            ("server_id".to_string(), SERVER_ID.to_string())
        ]
    );
    // WHERE takes any expression over both columns; the tables behind SHOW read directly.
    let rows: Vec<(String, String)> = conn
        .query(
            "SHOW SESSION VARIABLES WHERE Value = 'ON' AND (Variable_name LIKE 'log\\_bin' \
             OR LENGTH(Variable_name) > 100)",
        )
        .await
        .expect("show variables where an expression");
    assert_eq!(rows, [("log_bin".to_string(), "ON".to_string())]);
    conn.query_drop("SET SESSION net_read_timeout = 45")
        .await
        .expect("set");
    let both: Vec<(String, Option<String>, Option<String>)> = conn
        .query(
            "SELECT s.VARIABLE_NAME, s.VARIABLE_VALUE, g.VARIABLE_VALUE \
             FROM performance_schema.session_variables s \
             JOIN performance_schema.global_variables g ON g.VARIABLE_NAME = s.VARIABLE_NAME \
             WHERE s.VARIABLE_NAME = 'net_read_timeout'",
        )
        .await
        .expect("performance_schema");
    assert_eq!(
        both,
        [(
            "net_read_timeout".into(),
            Some("45".into()),
            Some("30".into())
        )]
    );
    let questions: Option<(String, u64)> = conn
        .query_first(
            "SELECT VARIABLE_NAME, VARIABLE_VALUE + 0 FROM performance_schema.global_status \
             WHERE VARIABLE_NAME = 'questions'",
        )
        .await
        .expect("global_status");
    assert!(
        questions
            .as_ref()
            .is_some_and(|(n, q)| n == "Questions" && *q > 0),
        "{questions:?}"
    );
    let rows: Vec<(String, String)> = conn
        .query("show global variables  like 'rds\\_%'")
        .await
        .expect("canal probe");
    assert!(rows.is_empty());

    // Status statements agree with the source.
    let end = f.source.end_position();
    for q in ["SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"] {
        let (cols, vals) = one_row(&mut conn, q).await;
        assert_eq!(
            cols,
            [
                "File",
                "Position",
                "Binlog_Do_DB",
                "Binlog_Ignore_DB",
                "Executed_Gtid_Set"
            ]
        );
        assert_eq!(vals[0].as_deref(), Some(end.file.as_str()));
        assert_eq!(vals[1], Some(end.pos.to_string()));
        assert_eq!(vals[4], Some(format!("{UUID}:1-5")));
    }
    let logs: Vec<(String, u64, String)> = conn.query("SHOW BINARY LOGS").await.expect("logs");
    assert_eq!(logs.len(), 2);
    assert_eq!(logs[0].0, "binlog.000001");
    assert_eq!(
        logs[0].1,
        f.source.file_bytes("binlog.000001").expect("file").len() as u64
    );

    // SHOW BINLOG EVENTS with IN / FROM / LIMIT.
    let evs: Vec<(String, u64, String, u32, u64, String)> = conn
        .query("SHOW BINLOG EVENTS IN 'binlog.000001' LIMIT 3")
        .await
        .expect("binlog events");
    let kinds: Vec<&str> = evs.iter().map(|e| e.2.as_str()).collect();
    assert_eq!(kinds, ["Format_desc", "Previous_gtids", "Gtid"]);
    assert_eq!(evs[0].1, 4);
    assert_eq!(
        evs[1].1, evs[0].4,
        "each event starts where the previous ended"
    );
    assert!(
        evs[0].5.contains("Server ver: 8.0.36-tibinlog"),
        "{}",
        evs[0].5
    );
    let from = evs[2].1;
    let evs: Vec<(String, u64, String, u32, u64, String)> = conn
        .query(format!(
            "SHOW BINLOG EVENTS IN 'binlog.000001' FROM {from} LIMIT 1, 1"
        ))
        .await
        .expect("binlog events from");
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].2, "Query");
    assert_eq!(evs[0].5, "BEGIN");

    // User variables are stored per session and read back; SET NAMES is accepted.
    conn.query_drop(
        "SET @master_heartbeat_period = 30000000000, @master_binlog_checksum = @@global.binlog_checksum",
    )
    .await
    .unwrap_or_else(|e| panic!("set: {e}"));
    let (cols, vals) = one_row(&mut conn, "SELECT @master_binlog_checksum, @nothing").await;
    assert_eq!(cols, ["@master_binlog_checksum", "@nothing"]);
    assert_eq!(vals, [Some("CRC32".to_string()), None]);
    // A right-hand side is any expression SELECT takes, evaluated the same way.
    conn.query_drop(
        "SET @sum = 1 + 2 * 3, @text = CONCAT(UPPER('crc'), 32, '-', @@session.wait_timeout DIV 60), \
         @gap = GTID_SUBTRACT(CONCAT(@@server_uuid, ':1-9'), CONCAT(@@server_uuid, ':1-4'))",
    )
    .await
    .expect("set expressions");
    let (_, vals) = one_row(
        &mut conn,
        "SELECT @sum, @text, @gap = CONCAT(@@server_uuid, ':5-9')",
    )
    .await;
    assert_eq!(
        vals,
        [
            Some("7".to_string()),
            Some("CRC32-480".to_string()),
            Some("1".to_string())
        ]
    );
    let err = conn
        .query_drop("SET @x = NO_SUCH_FUNCTION(1)")
        .await
        .expect_err("an unknown function");
    assert!(err.to_string().contains("NO_SUCH_FUNCTION"), "{err}");
    conn.query_drop("SET NAMES utf8mb4")
        .await
        .expect("set names");
    conn.query_drop("SET @@session.net_write_timeout = 600")
        .await
        .expect("set session var");
    let (_, vals) = one_row(
        &mut conn,
        "SELECT @@net_write_timeout, @@global.net_write_timeout",
    )
    .await;
    assert_eq!(vals, [Some("600".to_string()), Some("60".to_string())]);
    // Debezium's snapshot, before it locks: an error on the first one is fatal.
    conn.query_drop("SET SESSION lock_wait_timeout=10")
        .await
        .expect("set lock_wait_timeout");
    conn.query_drop("SET SESSION innodb_lock_wait_timeout=10")
        .await
        .expect("set innodb_lock_wait_timeout");
    let (_, vals) = one_row(
        &mut conn,
        "SELECT @@session.lock_wait_timeout, @@global.lock_wait_timeout",
    )
    .await;
    assert_eq!(vals, [Some("10".to_string()), Some("31536000".to_string())]);

    let grants: Vec<String> = conn
        .query("SHOW GRANTS FOR CURRENT_USER")
        .await
        .expect("grants");
    assert_eq!(grants, ["GRANT ALL PRIVILEGES ON *.* TO `root`@`%`"]);
    let (_, vals) = one_row(
        &mut conn,
        &format!("SELECT GTID_SUBTRACT('{UUID}:1-10', '{UUID}:1-4')"),
    )
    .await;
    assert_eq!(vals, [Some(format!("{UUID}:5-10"))]);
    // Debezium's snapshot reads every database's default charset and collation.
    let schemata: Vec<(String, String, String)> = conn
        .query(
            "SELECT schema_name, default_character_set_name, default_collation_name \
             FROM information_schema.schemata",
        )
        .await
        .expect("information_schema.schemata");
    // MySQL 8 lists information_schema itself in utf8mb3.
    assert_eq!(
        schemata,
        [(
            "information_schema".to_string(),
            "utf8mb3".to_string(),
            "utf8mb3_general_ci".to_string()
        )]
    );
    let err = conn
        .query_drop("SELECT no_such_column FROM information_schema.schemata")
        .await
        .expect_err("unknown column");
    assert_eq!(server_code(&err), Some(1054));
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .expect("snapshot");
    conn.query_drop("FLUSH TABLES WITH READ LOCK")
        .await
        .expect("ftwrl");

    // Errors clients act on.
    let unanswered_before = unanswered_count(&mut conn).await;
    let cases = [
        ("INSERT INTO t VALUES (1)", 1290),
        ("CREATE TABLE x (a INT)", 1290),
        ("SELEKT 1", 1064),
        ("SELECT @@no_such_variable", 1193),
        ("SET @@session.no_such_variable = 1", 1193),
        ("SHOW CREATE TABLE test.t", 1146),
        ("SHOW TABLES", 1046),
        ("KILL 999999", 1094),
    ];
    for (q, code) in cases {
        let e = conn.query_drop(q).await.expect_err(q);
        assert_eq!(server_code(&e), Some(code), "{q}: {e}");
    }
    let e = conn.query_drop("SELEKT 1").await.expect_err("syntax");
    assert!(
        e.to_string()
            .contains("You have an error in your SQL syntax; check the manual"),
        "{e}"
    );
    // What the server could not answer (1064, 1193 above; not the refusals MySQL gives too)
    // is counted, for operators to see what a tool sent that tibinlog lacks.
    assert_eq!(unanswered_count(&mut conn).await, unanswered_before + 4);
    // The connection survives errors.
    conn.ping().await.expect("ping");
    conn.disconnect().await.expect("disconnect");
    f.stop().await;
}

/// `Tibinlog_unanswered_statements` of `SHOW GLOBAL STATUS`.
async fn unanswered_count(conn: &mut mysql_async::Conn) -> u64 {
    let row: Option<(String, u64)> = conn
        .query_first("SHOW GLOBAL STATUS LIKE 'Tibinlog_unanswered_statements'")
        .await
        .expect("status");
    row.expect("Tibinlog_unanswered_statements").1
}

#[tokio::test]
async fn both_password_plugins_and_access_denied() {
    for plugin in [AuthMethod::CachingSha2Password, AuthMethod::NativePassword] {
        let f = Fixture::start(true, plugin).await;
        let mut c = f.conn().await;
        let v: Option<i64> = c.query_first("SELECT 1").await.expect("query");
        assert_eq!(v, Some(1));
        c.disconnect().await.expect("disconnect");
        // The empty password.
        let c = mysql_async::Conn::new(f.opts("repl", ""))
            .await
            .expect("empty password");
        c.disconnect().await.expect("disconnect");
        for (user, pass) in [("root", "wrong"), ("nobody", PASSWORD)] {
            let e = mysql_async::Conn::new(f.opts(user, pass))
                .await
                .expect_err("must be denied");
            assert_eq!(server_code(&e), Some(1045), "{plugin:?} {user}: {e}");
            assert!(
                e.to_string().contains(&format!(
                    "Access denied for user '{user}'@'127.0.0.1' (using password: YES)"
                )),
                "{e}"
            );
        }
        f.stop().await;
    }
}

#[tokio::test]
async fn raw_protocol_edges() {
    let f = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    // A client answering with a plugin we do not verify is switched to one we do.
    let mut c = RawClient::connect(f.addr).await;
    assert_eq!(c.plugin, "caching_sha2_password");
    let r = c.login("root", "sha256_password", b"\x01").await;
    assert_eq!(r[0], 0xFE, "auth switch request, got {r:?}");
    let nul = r[1..].iter().position(|b| *b == 0).expect("plugin NUL") + 1;
    let plugin = String::from_utf8_lossy(&r[1..nul]).into_owned();
    let nonce = &r[nul + 1..nul + 21];
    let answer = match plugin.as_str() {
        "caching_sha2_password" => {
            tibinlog_protocol::wire::auth::scramble_caching_sha2(nonce, PASSWORD.as_bytes())
        }
        _ => repl::native(nonce, PASSWORD),
    };
    c.write(&answer).await;
    let mut r = c.read().await;
    if r.as_slice().first() == Some(&0x01) {
        r = c.read().await; // fast-auth success, then OK
    }
    assert_eq!(r[0], 0, "OK after switch, got {r:?}");

    // Unknown command → 1047; malformed replication commands → ERR, connection lives on.
    assert_eq!(err_code(&c.command(&[0x99]).await), Some(1047));
    // COM_STMT_PREPARE of a statement that does not parse → 1064.
    assert_eq!(err_code(&c.command(&[0x16, b'S']).await), Some(1064));
    assert_eq!(err_code(&c.command(&[0x1d]).await), Some(1047));
    let e = err_code(&c.command(&[0x12, 1, 2]).await);
    assert!(e.is_some(), "truncated COM_BINLOG_DUMP gets an ERR");
    let e = err_code(&c.command(&[0x1e, 0, 0, 1]).await);
    assert!(e.is_some(), "truncated COM_BINLOG_DUMP_GTID gets an ERR");
    assert_eq!(c.command(&[0x0e]).await[0], 0, "ping still answered");
    assert_eq!(
        c.command(&[0x15, 1, 0, 0]).await[0],
        0xFF,
        "bad REGISTER_SLAVE"
    );
    f.stop().await;
}

/// Reads a whole non-blocking dump; returns (event type, log_pos, event) for every event.
async fn read_dump(
    conn: mysql_async::Conn,
    req: BinlogStreamRequest<'_>,
) -> Result<Vec<(u8, u32, Vec<u8>)>, mysql_async::Error> {
    let mut stream = conn.get_binlog_stream(req).await?;
    let mut out = Vec::new();
    loop {
        let next = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("stream makes progress");
        let Some(ev) = next else { break };
        let ev = ev?;
        // Every event must decode.
        let data = ev.read_data().expect("event decodes");
        if let Some(EventData::RowsEvent(_)) = data {
            // Rows need their table map; the stream resolves it when asked.
            assert!(
                stream.get_tme(row_table_id(&ev)).is_some(),
                "TABLE_MAP known"
            );
        }
        out.push((
            ev.header().event_type_raw(),
            ev.header().log_pos(),
            ev.data().to_vec(),
        ));
    }
    Ok(out)
}

fn row_table_id(ev: &mysql_async::binlog::events::Event) -> u64 {
    let d = ev.data();
    let mut id = [0u8; 8];
    id[..6].copy_from_slice(&d[..6]);
    u64::from_le_bytes(id)
}

fn gtid_gno(body: &[u8]) -> u64 {
    u64::from_le_bytes(body[17..25].try_into().expect("gno"))
}

const ROTATE: u8 = 4;
const FDE: u8 = 15;
const XID: u8 = 16;
const TABLE_MAP: u8 = 19;
const HEARTBEAT: u8 = 27;
const WRITE_ROWS: u8 = 30;
const GTID: u8 = 33;
const PREVIOUS_GTIDS: u8 = 35;

#[tokio::test]
async fn dump_from_file_and_position() {
    for checksum in [true, false] {
        let f = Fixture::start(checksum, AuthMethod::CachingSha2Password).await;
        fill(&f);
        let conn = f.conn().await;
        let evs = read_dump(
            conn,
            BinlogStreamRequest::new(0)
                .with_filename(b"binlog.000001")
                .with_pos(4),
        )
        .await
        .expect("dump");
        let types: Vec<u8> = evs.iter().map(|e| e.0).collect();
        assert_eq!(
            &types[..4],
            &[ROTATE, FDE, PREVIOUS_GTIDS, GTID],
            "{types:?}"
        );
        assert_eq!(evs[0].1, 0, "fake rotate has log_pos 0");
        assert_eq!(types.iter().filter(|t| **t == GTID).count(), 5);
        assert_eq!(types.iter().filter(|t| **t == XID).count(), 5);
        assert_eq!(types.iter().filter(|t| **t == TABLE_MAP).count(), 5);
        assert_eq!(types.iter().filter(|t| **t == WRITE_ROWS).count(), 5);
        // real ROTATE, fake ROTATE, FDE of the next file
        let r = types
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, t)| **t == ROTATE)
            .map(|(i, _)| i)
            .expect("real rotate");
        assert_eq!(&types[r..r + 4], &[ROTATE, ROTATE, FDE, PREVIOUS_GTIDS]);
        assert_ne!(evs[r].1, 0, "real rotate has its end offset");
        assert_eq!(evs[r + 1].1, 0, "fake rotate");
        // log_pos of file events are contiguous offsets from 4 (checksum included when on).
        let file1 = f.source.file_bytes("binlog.000001").expect("file");
        assert_eq!(evs[r].1 as usize, file1.len());

        // From the second transaction: fake ROTATE, FDE with log_pos 0, then its GTID event.
        let second = evs
            .iter()
            .filter(|e| e.0 == XID)
            .map(|e| e.1)
            .next()
            .expect("first xid");
        let conn = f.conn().await;
        let evs = read_dump(
            conn,
            BinlogStreamRequest::new(0)
                .with_filename(b"binlog.000001")
                .with_pos(u64::from(second)),
        )
        .await
        .expect("dump from position");
        assert_eq!(evs[0].0, ROTATE);
        assert_eq!(evs[1].0, FDE);
        assert_eq!(evs[1].1, 0, "FDE of a mid-file start has log_pos 0");
        assert_eq!(evs[2].0, GTID);
        assert_eq!(gtid_gno(&evs[2].2), 2);
        f.stop().await;
    }
}

#[tokio::test]
async fn dump_from_gtid_set_skips_what_the_client_has() {
    let f = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    fill(&f);
    let uuid = tibinlog_protocol::binlog::Sid::parse(UUID).expect("uuid").0;
    let sid = MySid::new(uuid).with_interval(GnoInterval::new(1, 3));
    let evs = read_dump(
        f.conn().await,
        BinlogStreamRequest::new(0)
            .with_gtid()
            .with_gtid_set(vec![sid]),
    )
    .await
    .expect("gtid dump");
    let gnos: Vec<u64> = evs
        .iter()
        .filter(|e| e.0 == GTID)
        .map(|e| gtid_gno(&e.2))
        .collect();
    assert_eq!(gnos, [3, 4, 5]);
    assert_eq!(evs[0].0, ROTATE);
    assert_eq!(evs[1].0, FDE);

    // Everything known: the stream ends without a transaction.
    let sid = MySid::new(uuid).with_interval(GnoInterval::new(1, 6));
    let evs = read_dump(
        f.conn().await,
        BinlogStreamRequest::new(0)
            .with_gtid()
            .with_gtid_set(vec![sid]),
    )
    .await
    .expect("gtid dump, nothing new");
    assert!(evs.iter().all(|e| e.0 != GTID), "no transaction sent");
    // After skipping, a heartbeat tells the replica where the stream is.
    let last = evs.last().expect("events");
    assert_eq!(last.0, HEARTBEAT);
    assert_eq!(last.1 as u64, f.source.end_position().pos);
    f.stop().await;
}

#[tokio::test]
async fn dump_errors_are_1236() {
    let f = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    fill(&f);
    let cases: [(&[u8], u64, &str); 4] = [
        (b"binlog.000009", 4, "Could not find first log file name"),
        (b"binlog.000001", 5, "impossible position"),
        (b"binlog.000001", 1 << 30, "position > file size"),
        (b"binlog.000001", 2, "position < 4"),
    ];
    for (file, pos, text) in cases {
        let e = read_dump(
            f.conn().await,
            BinlogStreamRequest::new(0)
                .with_filename(file)
                .with_pos(pos),
        )
        .await
        .expect_err("must fail");
        assert_eq!(server_code(&e), Some(1236), "{e}");
        assert!(e.to_string().contains(text), "{e}");
    }
    // Purge the first file: a client that has nothing needs purged GTIDs.
    let mut c = f.conn().await;
    c.query_drop("PURGE BINARY LOGS TO 'binlog.000002'")
        .await
        .expect("purge");
    let logs: Vec<(String, u64, String)> = c.query("SHOW BINARY LOGS").await.expect("logs");
    assert_eq!(logs.len(), 1);
    let (_, vals) = one_row(&mut c, "SELECT @@gtid_purged").await;
    assert_eq!(vals, [Some(format!("{UUID}:1-3"))]);
    let e = read_dump(c, BinlogStreamRequest::new(0).with_gtid())
        .await
        .expect_err("purged");
    assert_eq!(server_code(&e), Some(1236), "{e}");
    assert!(e.to_string().contains("purged binary logs"), "{e}");
    f.stop().await;
}

#[tokio::test]
async fn blocking_dump_gets_heartbeats_and_new_events() {
    let f = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    f.source.append_insert(&[(1, "a")]);
    let mut conn = f.conn().await;
    conn.query_drop("SET @master_heartbeat_period = 50000000")
        .await
        .expect("heartbeat period");
    let mut stream = conn
        .get_binlog_stream(
            BinlogStreamRequest::new(77)
                .with_filename(b"binlog.000001")
                .with_pos(4),
        )
        .await
        .expect("stream");
    let mut seen_xid = false;
    let mut heartbeat_pos = None;
    while heartbeat_pos.is_none() {
        let ev = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("event or heartbeat in time")
            .expect("stream open")
            .expect("event");
        match ev.header().event_type() {
            Ok(MyEventType::XID_EVENT) => seen_xid = true,
            Ok(MyEventType::HEARTBEAT_EVENT) => heartbeat_pos = Some(ev.header().log_pos()),
            _ => {}
        }
    }
    assert!(
        seen_xid,
        "the existing transaction came before the heartbeat"
    );
    let end = f.source.end_position();
    assert_eq!(
        heartbeat_pos,
        Some(end.pos as u32),
        "heartbeat carries the current offset"
    );
    assert_eq!(
        u32::try_from(end.pos).ok(),
        heartbeat_pos,
        "heartbeat log_pos is the end of the last event"
    );

    // A new transaction wakes the session.
    let (gno, _) = f.source.append_insert(&[(2, "b")]);
    loop {
        let ev = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("new event in time")
            .expect("stream open")
            .expect("event");
        if ev.header().event_type_raw() == GTID {
            assert_eq!(gtid_gno(ev.data()), gno);
            break;
        }
        assert_eq!(ev.header().event_type_raw(), HEARTBEAT);
    }
    // SHOW REPLICAS lists the registered dump client.
    let mut c = f.conn().await;
    let rows: Vec<(u32, String, u16, u32, String)> =
        c.query("SHOW REPLICAS").await.expect("replicas");
    assert!(rows.iter().any(|r| r.0 == 77), "{rows:?}");
    // A source that replicates from nothing: MySQL 8.0's empty set with its 60 columns, under
    // both spellings; and it says it is read-only, as it refuses every write.
    for (statement, seconds_behind) in [
        ("SHOW REPLICA STATUS", "Seconds_Behind_Source"),
        ("SHOW SLAVE STATUS", "Seconds_Behind_Master"),
    ] {
        let mut result = c.query_iter(statement).await.expect(statement);
        let columns = result.columns().expect("a result set");
        assert_eq!(columns.len(), 60, "{statement}");
        assert_eq!(columns[32].name_str(), seconds_behind);
        let rows: Vec<mysql_async::Row> = result.collect().await.expect("rows");
        assert!(rows.is_empty(), "{statement}");
    }
    let read_only: (u8, u8) = c
        .query_first("SELECT @@read_only, @@super_read_only")
        .await
        .expect("read_only")
        .expect("a row");
    assert_eq!(read_only, (1, 1));
    // Variables that are the session's state: the conditions of the statement before, the
    // connection id, the clock; and one only MySQL's own list knows, with MySQL's default.
    c.query_drop("SELECT no_such_column")
        .await
        .expect_err("unknown column");
    let counts: (u64, u64) = c
        .query_first("SELECT @@warning_count, @@error_count")
        .await
        .expect("counts")
        .expect("a row");
    assert_eq!(counts, (1, 1));
    let state: (i64, f64, u64) = c
        .query_first("SELECT @@pseudo_thread_id = CONNECTION_ID(), @@timestamp, @@innodb_flush_log_at_trx_commit")
        .await
        .expect("state")
        .expect("a row");
    assert_eq!((state.0, state.2), (1, 1));
    assert!(state.1 > 1.6e9, "{state:?}");
    drop(stream);
    f.stop().await;
}

/// A replica that stops reading is dropped once a write has waited its `net_write_timeout`, as
/// MySQL's dump thread drops it: it no longer holds its connection (nor, with retention, the
/// binlog file it is on).
#[tokio::test]
async fn a_dump_client_that_reads_nothing_is_dropped_after_net_write_timeout() {
    let f = Fixture::start(true, AuthMethod::NativePassword).await;
    // Far more than the socket buffers between the server and the client hold.
    let name = "x".repeat(120);
    let rows: Vec<(i64, &str)> = (0..100).map(|i| (i, name.as_str())).collect();
    for _ in 0..3_000 {
        f.source.append_insert(&rows);
    }
    let total = f.source.end_position().pos;
    assert!(total > 32 << 20, "{total} bytes");
    let mut conn = f.conn().await;
    conn.query_drop("SET net_write_timeout = 1")
        .await
        .expect("set");
    let mut stream = conn
        .get_binlog_stream(
            BinlogStreamRequest::new(91)
                .with_filename(b"binlog.000001")
                .with_pos(4),
        )
        .await
        .expect("stream");
    // The stream is not read: the session is listed until its write gives up.
    let mut admin = f.conn().await;
    let listed = |rows: &Vec<(u32, String, u16, u32, String)>| rows.iter().any(|r| r.0 == 91);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let rows: Vec<(u32, String, u16, u32, String)> =
            admin.query("SHOW REPLICAS").await.expect("replicas");
        if !listed(&rows) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled dump session is still there: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What the buffers held is read, then the stream ends before the binlog's end.
    let mut last_pos = 0u32;
    let ended = tokio::time::timeout(WAIT, async {
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => last_pos = last_pos.max(ev.header().log_pos()),
                Err(_) => break,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream ends");
    assert!(
        u64::from(last_pos) < total,
        "the client got {last_pos} of {total} bytes"
    );
    f.stop().await;
}

/// A new dump with the same replica server id ends the older one (MySQL's zombie-dump rule),
/// and `KILL` ends a session.
#[tokio::test]
async fn same_replica_id_replaces_older_dump_and_kill_works() {
    let f = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    f.source.append_insert(&[(1, "a")]);
    let req = || {
        BinlogStreamRequest::new(9)
            .with_filename(b"binlog.000001")
            .with_pos(4)
    };
    let mut first = f
        .conn()
        .await
        .get_binlog_stream(req())
        .await
        .expect("first");
    // Read the first event so the dump is surely running before the second one starts.
    let ev = tokio::time::timeout(WAIT, first.next())
        .await
        .expect("first event");
    assert!(matches!(ev, Some(Ok(_))));
    let mut second = f
        .conn()
        .await
        .get_binlog_stream(req())
        .await
        .expect("second");
    let ev = tokio::time::timeout(WAIT, second.next())
        .await
        .expect("second event");
    assert!(matches!(ev, Some(Ok(_))));
    // The first stream ends: it drains what was sent, then sees the close.
    while let Some(Ok(_)) = tokio::time::timeout(WAIT, first.next())
        .await
        .expect("first ends")
    {}

    let mut victim = f.conn().await;
    let id = victim.id();
    let mut killer = f.conn().await;
    killer
        .query_drop(format!("KILL CONNECTION {id}"))
        .await
        .expect("kill");
    let e = tokio::time::timeout(WAIT, victim.query_drop("SELECT 1"))
        .await
        .expect("killed session answers or closes");
    assert!(e.is_err(), "the killed connection is gone");
    drop(second);
    f.stop().await;
}

/// `mariadb-binlog --read-from-remote-server` reads the first file; skipped when MariaDB's
/// tools are not installed, except under CI.
#[tokio::test]
async fn mariadb_binlog_reads_remote_file() {
    let Some(bin) = mariadb::require_tool("mariadb-binlog") else {
        return;
    };
    let f = Fixture::start(true, AuthMethod::NativePassword).await;
    fill(&f);
    let port = f.addr.port().to_string();
    let out = tokio::process::Command::new(bin)
        .args([
            "--no-defaults",
            "--read-from-remote-server",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--user",
            "root",
            &format!("--password={PASSWORD}"),
            "binlog.000001",
        ])
        .output();
    let out = tokio::time::timeout(WAIT, out)
        .await
        .expect("mariadb-binlog finishes")
        .expect("run mariadb-binlog");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("Table_map: `test`.`t` mapped to number 100"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("Write_rows").count(), 3, "{stdout}");
    assert!(stdout.contains("Xid = 3"), "{stdout}");
    assert!(stdout.contains("Rotate to binlog.000002"), "{stdout}");
    f.stop().await;
}

/// TLS: CLIENT_SSL is offered only with a certificate; SSLRequest, handshake, then the login
/// (caching_sha2 fast path) and queries run inside the tunnel.
#[tokio::test]
async fn tls_upgrade_then_login() {
    let Some(openssl) = mariadb::find_tool("openssl") else {
        let ci = std::env::var("CI").map(|v| v == "true").unwrap_or(false);
        assert!(!ci, "openssl is needed to make a test certificate");
        eprintln!("skipped: openssl is not installed");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let p = |n: &str| dir.path().join(n);
    std::fs::write(
        p("ext.cnf"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .expect("ext file");
    // A CA, and a certificate for localhost signed by it.
    let path = |n: &str| p(n).to_string_lossy().into_owned();
    let (ca_key, ca_pem, key_pem, csr, ext, cert_pem) = (
        path("ca.key"),
        path("ca.pem"),
        path("key.pem"),
        path("leaf.csr"),
        path("ext.cnf"),
        path("cert.pem"),
    );
    let steps: [Vec<&str>; 3] = [
        vec![
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=tibinlog-test-ca",
            "-keyout",
            &ca_key,
            "-out",
            &ca_pem,
        ],
        vec![
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &key_pem,
            "-out",
            &csr,
        ],
        vec![
            "x509",
            "-req",
            "-days",
            "1",
            "-set_serial",
            "2",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-extfile",
            &ext,
            "-out",
            &cert_pem,
        ],
    ];
    for args in steps {
        let out = std::process::Command::new(&openssl)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (cert, key, ca) = (p("cert.pem"), p("key.pem"), p("ca.pem"));

    // Without TLS material the greeting does not offer SSL.
    let plain = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    let c = RawClient::connect(plain.addr).await;
    assert_eq!(c.caps & 0x800, 0, "no CLIENT_SSL without a certificate");
    let mut conn = plain.conn().await;
    let ssl: Option<String> = conn
        .query_first("SELECT @@have_ssl")
        .await
        .expect("have_ssl");
    assert_eq!(ssl.as_deref(), Some("DISABLED"));
    drop(conn);
    plain.stop().await;

    let files = tibinlog::server::TlsFiles {
        cert,
        key,
        ..Default::default()
    };
    let f = Fixture::start_with(true, AuthMethod::CachingSha2Password, Some(files)).await;
    let mut c = RawClient::connect(f.addr).await;
    assert_ne!(c.caps & 0x800, 0, "CLIENT_SSL offered");
    c.upgrade_tls(&ca).await;
    let auth = tibinlog_protocol::wire::auth::scramble_caching_sha2(&c.nonce, PASSWORD.as_bytes());
    let r = c.login("root", "caching_sha2_password", &auth).await;
    assert_eq!(r, [0x01, 0x03], "fast auth success");
    assert_eq!(c.read().await[0], 0, "OK");
    // @@have_ssl says YES once TLS material is configured; the row is the last packet before
    // the EOF.
    let r = c.query("SELECT @@have_ssl").await;
    assert_eq!(r[0].columns, 1, "one column");
    let row = &r[0].packets[r[0].packets.len() - 2];
    assert_eq!(row.as_slice(), b"\x03YES");
    f.stop().await;
}

/// `require_secure_transport` refuses a plain login with ERROR 3159; with a client CA and
/// `cert_allowed_cn`, a login needs a client certificate carrying a listed name (else 1045,
/// as MySQL answers a user's unmet REQUIRE); over TLS `Ssl_version` and `Ssl_cipher` name what
/// was negotiated and the variables say what is configured.
#[tokio::test]
async fn secure_transport_and_client_certificates() {
    use tibinlog::sim::pki::CertSpec;
    use tls::TestPki;
    let pki = TestPki::new();
    let ca = pki.file("ca.pem", pki.ca.ca_pem());
    let pair = |name: &str| {
        let c = pki.issue(&CertSpec::client(name));
        (
            pki.file(&format!("{name}.pem"), &c.cert_pem),
            pki.file(&format!("{name}-key.pem"), &c.key_pem),
        )
    };
    let (replica, stranger) = (pair("replica"), pair("stranger"));
    let files = tibinlog::server::TlsFiles {
        cert: pki.file("server.pem", &pki.server.cert_pem),
        key: pki.file("server-key.pem", &pki.server.key_pem),
        client_ca: Some(ca.clone()),
        allowed_cn: vec!["replica".into()],
        require_secure_transport: true,
    };
    let f = Fixture::start_with(true, AuthMethod::CachingSha2Password, Some(files)).await;
    async fn login(c: &mut RawClient) -> Vec<u8> {
        let auth =
            tibinlog_protocol::wire::auth::scramble_caching_sha2(&c.nonce, PASSWORD.as_bytes());
        c.login("root", "caching_sha2_password", &auth).await
    }

    let mut c = RawClient::connect(f.addr).await;
    let r = login(&mut c).await;
    assert_eq!(err_code(&r), Some(3159), "plain refused: {r:?}");
    assert!(
        String::from_utf8_lossy(&r).contains("require_secure_transport=ON"),
        "{r:?}"
    );

    for (who, client) in [
        ("no certificate", None),
        ("a name not allowed", Some((&stranger.0, &stranger.1))),
    ] {
        let mut c = RawClient::connect(f.addr).await;
        c.upgrade_tls_as(&ca, client.map(|(a, b)| (a.as_path(), b.as_path())))
            .await;
        let r = login(&mut c).await;
        assert_eq!(err_code(&r), Some(1045), "{who}: {r:?}");
    }

    let mut c = RawClient::connect(f.addr).await;
    c.upgrade_tls_as(&ca, Some((&replica.0, &replica.1))).await;
    let r = login(&mut c).await;
    assert_eq!(r, [0x01, 0x03], "fast auth success");
    assert_eq!(c.read().await[0], 0, "OK");
    let row = |r: &[repl::QueryReply]| r[0].packets[r[0].packets.len() - 2].clone();
    let version = row(&c.query("SHOW STATUS LIKE 'Ssl_version'").await);
    assert!(version.ends_with(b"\x07TLSv1.3"), "{version:?}");
    let cipher = row(&c.query("SHOW STATUS LIKE 'Ssl_cipher'").await);
    let cipher = String::from_utf8_lossy(&cipher).into_owned();
    assert!(
        cipher.contains("TLS_AES_") || cipher.contains("TLS_CHACHA20"),
        "{cipher}"
    );
    let v = row(&c.query("SELECT @@require_secure_transport").await);
    assert_eq!(v.as_slice(), b"\x011");
    let v = row(&c.query("SELECT @@ssl_ca").await);
    assert!(String::from_utf8_lossy(&v).ends_with("ca.pem"), "{v:?}");
    f.stop().await;

    // A real client over OpenSSL: MariaDB's logs in with the allowed certificate (verifying
    // ours), and the server's Ssl_version and Ssl_cipher are what the client negotiated.
    let Some(bin) = mariadb::find_tool("mariadb") else {
        let ci = std::env::var("CI").map(|v| v == "true").unwrap_or(false);
        assert!(!ci, "the mariadb client is needed");
        return;
    };
    let files = tibinlog::server::TlsFiles {
        cert: pki.file("server.pem", &pki.server.cert_pem),
        key: pki.file("server-key.pem", &pki.server.key_pem),
        client_ca: Some(ca.clone()),
        allowed_cn: vec!["replica".into()],
        require_secure_transport: true,
    };
    let f = Fixture::start_with(true, AuthMethod::NativePassword, Some(files)).await;
    let out = tokio::process::Command::new(bin)
        .arg("--protocol=TCP")
        .arg("--host=127.0.0.1")
        .arg(format!("--port={}", f.addr.port()))
        .arg("--user=root")
        .arg(format!("--password={PASSWORD}"))
        .arg(format!("--ssl-ca={}", ca.display()))
        .arg(format!("--ssl-cert={}", replica.0.display()))
        .arg(format!("--ssl-key={}", replica.1.display()))
        .arg("--ssl-verify-server-cert")
        .args(["--batch", "--skip-column-names"])
        .args([
            "-e",
            "SHOW STATUS LIKE 'Ssl_cipher'; SHOW STATUS LIKE 'Ssl_version'; \\s",
        ])
        .output()
        .await
        .expect("run mariadb");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}\t")))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .to_owned()
    };
    let (cipher, version) = (value("Ssl_cipher"), value("Ssl_version"));
    let client_view = text
        .lines()
        .find_map(|l| l.split("Cipher in use is ").nth(1))
        .unwrap_or_else(|| panic!("the client's cipher in {text}"))
        .trim();
    assert_eq!(cipher, client_view, "{text}");
    assert!(version.starts_with("TLSv1."), "{version}");
    f.stop().await;
}

/// A client that never announces `@master_binlog_checksum` gets events without CRC32 and a
/// FORMAT_DESCRIPTION that says NONE; the fake ROTATE has no CRC either.
#[tokio::test]
async fn dump_without_announced_checksum_strips_crcs() {
    let f = Fixture::start(true, AuthMethod::NativePassword).await;
    f.source.append_insert(&[(1, "a")]);
    let file = f.source.file_bytes("binlog.000001").expect("file");
    let mut c = RawClient::connect(f.addr).await;
    c.login_native().await;
    // COM_BINLOG_DUMP: pos 4, flags NON_BLOCK, server id 5, file name.
    let mut cmd = vec![0x12];
    cmd.extend_from_slice(&4u32.to_le_bytes());
    cmd.extend_from_slice(&1u16.to_le_bytes());
    cmd.extend_from_slice(&5u32.to_le_bytes());
    cmd.extend_from_slice(b"binlog.000001");
    let mut p = c.command(&cmd).await;
    let mut events = Vec::new();
    while p[0] == 0 {
        events.push(p[1..].to_vec());
        p = c.read().await;
    }
    assert_eq!(p[0], 0xFE, "EOF ends a non-blocking dump");
    let rotate = &events[0];
    assert_eq!(rotate[4], ROTATE);
    assert_eq!(
        rotate.len(),
        19 + 8 + "binlog.000001".len(),
        "fake ROTATE without CRC"
    );
    let fde = &events[1];
    assert_eq!(fde[4], FDE);
    assert_eq!(fde[fde.len() - 5], 0, "FDE says checksum NONE");
    assert!(
        tibinlog_protocol::binlog::checksum::verify_event(fde).is_ok(),
        "FDE CRC redone"
    );
    // Every other event is the stored one minus its 4 CRC bytes, with event_size adjusted.
    let mut at = 4 + fde.len();
    for ev in &events[2..] {
        let size = u32::from_le_bytes([ev[9], ev[10], ev[11], ev[12]]) as usize;
        assert_eq!(size, ev.len());
        let stored = &file[at..at + ev.len() + 4];
        assert_eq!(&stored[..4], &ev[..4]);
        assert_eq!(&stored[13..ev.len()], &ev[13..], "body unchanged");
        at += ev.len() + 4;
    }
    assert_eq!(at, file.len(), "the whole file was sent");
    f.stop().await;
}

/// The fake ROTATE of a file switch follows the stream's checksum (what the FORMAT_DESCRIPTION
/// just sent says), as MySQL's sender does; only the first one, sent before any
/// FORMAT_DESCRIPTION, follows `@master_binlog_checksum`. A client that announced NONE
/// (mysqlbinlog, mariadb-binlog, go-mysql) strips four bytes from every event after a CRC32
/// FORMAT_DESCRIPTION, fake ROTATEs included.
#[tokio::test]
async fn fake_rotate_at_a_file_switch_follows_the_stream_checksum() {
    let name = "binlog.000002";
    // (announced checksum, first fake ROTATE has a CRC, file-switch fake ROTATE has a CRC)
    for (announced, first_crc, switch_crc) in [
        (Some("NONE"), false, true),
        (Some("CRC32"), true, true),
        (None, false, false),
    ] {
        let f = Fixture::start(true, AuthMethod::NativePassword).await;
        fill(&f);
        let mut c = RawClient::connect(f.addr).await;
        c.login_native().await;
        if let Some(a) = announced {
            let mut q = vec![0x03];
            q.extend_from_slice(format!("SET @master_binlog_checksum='{a}'").as_bytes());
            assert_eq!(c.command(&q).await[0], 0, "SET answered OK");
        }
        // COM_BINLOG_DUMP: pos 4, flags NON_BLOCK, server id 0, file name.
        let mut cmd = vec![0x12];
        cmd.extend_from_slice(&4u32.to_le_bytes());
        cmd.extend_from_slice(&1u16.to_le_bytes());
        cmd.extend_from_slice(&0u32.to_le_bytes());
        cmd.extend_from_slice(b"binlog.000001");
        let mut p = c.command(&cmd).await;
        let mut fake_rotates = Vec::new();
        while p[0] == 0 {
            let ev = p[1..].to_vec();
            let log_pos = u32::from_le_bytes([ev[13], ev[14], ev[15], ev[16]]);
            if ev[4] == ROTATE && log_pos == 0 {
                fake_rotates.push(ev);
            }
            p = c.read().await;
        }
        assert_eq!(p[0], 0xFE, "EOF ends a non-blocking dump");
        assert_eq!(
            fake_rotates.len(),
            2,
            "{announced:?}: start and file switch"
        );
        let first = &fake_rotates[0];
        assert_eq!(
            first.len(),
            19 + 8 + "binlog.000001".len() + if first_crc { 4 } else { 0 },
            "{announced:?}: first fake ROTATE"
        );
        let switch = &fake_rotates[1];
        let crc = if switch_crc { 4 } else { 0 };
        assert_eq!(
            switch.len(),
            19 + 8 + name.len() + crc,
            "{announced:?}: file-switch fake ROTATE"
        );
        assert_eq!(&switch[27..switch.len() - crc], name.as_bytes());
        if switch_crc {
            assert!(
                tibinlog_protocol::binlog::checksum::verify_event(switch).is_ok(),
                "{announced:?}: its CRC"
            );
        }
        f.stop().await;
    }
}

// ---------------------------------------------------------------------------------------------
// MariaDB GTID flavour (`@slave_connect_state`)

/// A MariaDB GTID dump over the raw protocol: the events it sends, or the ERR packet.
async fn mariadb_gtid_dump(f: &Fixture, state: &str) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    mariadb_gtid_dump_until(f, state, None).await
}

/// [`mariadb_gtid_dump`] with `@slave_until_gtid` set when `until` is given.
async fn mariadb_gtid_dump_until(
    f: &Fixture,
    state: &str,
    until: Option<&str>,
) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut c = RawClient::connect(f.addr).await;
    c.login_native().await;
    let until = until.map(|u| format!("SET @slave_until_gtid='{u}'"));
    for sql in [
        "SET @master_binlog_checksum='CRC32'".to_string(),
        "SET @mariadb_slave_capability=4".to_string(),
        format!("SET @slave_connect_state='{state}'"),
        "SET @slave_gtid_strict_mode=1".to_string(),
        "SET @slave_gtid_ignore_duplicates=0".to_string(),
    ]
    .into_iter()
    .chain(until)
    {
        let mut q = vec![0x03];
        q.extend_from_slice(sql.as_bytes());
        let ok = c.command(&q).await;
        assert_eq!(ok[0], 0, "{sql}: {ok:?}");
    }
    // COM_BINLOG_DUMP: pos 4, flags NON_BLOCK, server id 5, no file name (GTID start).
    let mut cmd = vec![0x12];
    cmd.extend_from_slice(&4u32.to_le_bytes());
    cmd.extend_from_slice(&1u16.to_le_bytes());
    cmd.extend_from_slice(&5u32.to_le_bytes());
    let mut p = c.command(&cmd).await;
    if p[0] == 0xFF {
        return Err(p);
    }
    let mut events = Vec::new();
    while p[0] == 0 {
        events.push(p[1..].to_vec());
        p = c.read().await;
    }
    assert_eq!(p[0], 0xFE, "EOF ends a non-blocking dump");
    Ok(events)
}

fn u32_at(ev: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([ev[at], ev[at + 1], ev[at + 2], ev[at + 3]])
}

/// Checks the position rule of the MariaDB flavour on a dump (every event's log_pos is the
/// running position from the last ROTATE; the FDE and fake events do not count, a fake
/// GTID_LIST and a GTID event (a hole before it) move the position to their log_pos) and returns the sequence numbers of the GTID
/// events and the GTID lists (flags, seq numbers) in order.
fn check_mariadb_stream(f: &Fixture, events: &[Vec<u8>]) -> (Vec<u64>, Vec<(u16, Vec<u64>)>) {
    let mut at = 0u64;
    let mut file = String::new();
    let mut gtids = Vec::new();
    let mut lists = Vec::new();
    for ev in events {
        assert!(tibinlog_protocol::binlog::checksum::verify_event(ev).is_ok());
        assert_eq!(u32_at(ev, 9) as usize, ev.len(), "event_size");
        let ty = ev[4];
        let log_pos = u64::from(u32_at(ev, 13));
        let flags = u16::from_le_bytes([ev[17], ev[18]]);
        assert!(
            !matches!(ty, 33..=35),
            "no MySQL GTID / ANONYMOUS_GTID / PREVIOUS_GTIDS: {ty}"
        );
        match ty {
            ROTATE => {
                if log_pos != 0 {
                    assert_eq!(log_pos, at + ev.len() as u64, "real ROTATE");
                }
                at = u64::from_le_bytes(ev[19..27].try_into().expect("pos"));
                file = String::from_utf8(ev[27..ev.len() - 4].to_vec()).expect("name");
                if log_pos == 0 {
                    // The fake ROTATE names the offset after the file's own FDE.
                    let bytes = f.source.file_bytes(&file).expect("file");
                    assert_eq!(at, 4 + u64::from(u32_at(&bytes, 4 + 9)), "{file}");
                }
            }
            FDE => {
                assert_eq!(log_pos, 0, "MariaDB FDE is not counted");
                assert_eq!(ev.len(), 252);
                assert!(String::from_utf8_lossy(&ev[21..71]).starts_with("8.0."));
                assert_eq!(ev[76 + 161], 19, "post-header length of GTID (162)");
            }
            0xa3 if flags & 0x20 != 0 => {
                assert!(log_pos >= at, "a fake GTID_LIST moves forward");
                at = log_pos;
                lists.push((flags, gtid_list_seqs(ev)));
            }
            _ => {
                at += ev.len() as u64;
                if ty == 0xa2 {
                    // MariaDB's GTID event is shorter than the MySQL GTID (+ BEGIN) it stands
                    // for: a hole the peer moves over to its log_pos.
                    assert!(log_pos > at, "a GTID ends past the running position");
                    at = log_pos;
                }
                assert_eq!(
                    log_pos, at,
                    "type {ty} in {file}: log_pos is the file offset"
                );
                if ty == 0xa2 {
                    assert_eq!(u32_at(ev, 5), SERVER_ID);
                    assert_eq!(u32_at(ev, 19 + 8), 0, "domain 0");
                    assert_eq!(ev[19 + 12], 0x0c, "TRANSACTIONAL | ALLOW_PARALLEL");
                    gtids.push(u64::from_le_bytes(ev[19..27].try_into().expect("seq")));
                }
                if ty == 0xa3 {
                    lists.push((flags, gtid_list_seqs(ev)));
                }
                if ty == 2 {
                    let q = String::from_utf8_lossy(&ev[19..ev.len() - 4]);
                    assert!(!q.ends_with("BEGIN"), "no BEGIN");
                }
            }
        }
    }
    (gtids, lists)
}

/// The `seq_no`s of a GTID_LIST event (all domain 0, our server id).
fn gtid_list_seqs(ev: &[u8]) -> Vec<u64> {
    let n = u32_at(ev, 19) & 0x0fff_ffff;
    (0..n as usize)
        .map(|i| {
            let at = 23 + 16 * i;
            assert_eq!(u32_at(ev, at), 0, "domain 0");
            assert_eq!(u32_at(ev, at + 4), SERVER_ID);
            u64::from_le_bytes(ev[at + 8..at + 16].try_into().expect("seq"))
        })
        .collect()
}

/// A fixture with GTIDs 1–3 in the first file and 4–5 in the second.
async fn two_files() -> Fixture {
    let f = Fixture::start(true, AuthMethod::NativePassword).await;
    for i in 0..3 {
        f.source.append_insert(&[(i, "a")]);
    }
    f.source.rotate();
    f.source.append_insert(&[(3, "b")]);
    f.source.append_insert(&[(4, "c")]);
    f
}

/// `@slave_connect_state` starts a MariaDB-flavoured dump after the requested GTID, with the
/// files' positions; starts we cannot serve get 1236 with MariaDB's wording.
#[tokio::test]
async fn mariadb_gtid_start_streams_the_mariadb_flavour() {
    let f = two_files().await;

    // After 0-<id>-2: skips 1 and 2, says so with a fake GTID_LIST, then 3; file 2 starts with
    // its GTID_LIST (state 3), then 4 and 5.
    let events = mariadb_gtid_dump(&f, &format!("0-{SERVER_ID}-2"))
        .await
        .expect("dump");
    let (gtids, lists) = check_mariadb_stream(&f, &events);
    assert_eq!(gtids, vec![3, 4, 5]);
    assert_eq!(
        lists,
        vec![(0, vec![]), (0x20, vec![2]), (0, vec![3])],
        "file GTID_LIST, fake GTID_LIST after the skipped ones, next file's GTID_LIST"
    );
    // The empty state, and a state of another domain only: everything from the first file.
    for state in ["", "7-99-1000"] {
        let events = mariadb_gtid_dump(&f, state).await.expect("dump");
        let (gtids, lists) = check_mariadb_stream(&f, &events);
        assert_eq!(gtids, vec![1, 2, 3, 4, 5], "state '{state}'");
        assert_eq!(lists, vec![(0, vec![]), (0, vec![3])], "state '{state}'");
    }
    // The last GTID of the first file: the dump starts at the second file, nothing skipped.
    let events = mariadb_gtid_dump(&f, &format!("0-{SERVER_ID}-3"))
        .await
        .expect("dump");
    let (gtids, lists) = check_mariadb_stream(&f, &events);
    assert_eq!(gtids, vec![4, 5]);
    assert_eq!(lists, vec![(0, vec![3])]);
    // Up to date: only the fake GTID_LIST after the skipped transactions.
    let events = mariadb_gtid_dump(&f, &format!("0-{SERVER_ID}-5"))
        .await
        .expect("dump");
    let (gtids, lists) = check_mariadb_stream(&f, &events);
    assert_eq!(gtids, Vec::<u64>::new());
    assert_eq!(lists, vec![(0, vec![3]), (0x20, vec![5])]);

    let msg = |p: &[u8]| String::from_utf8_lossy(&p[9..]).into_owned();
    let e = mariadb_gtid_dump(&f, &format!("0-{SERVER_ID}-9"))
        .await
        .expect_err("beyond our binlog");
    assert_eq!(err_code(&e), Some(1236));
    assert_eq!(
        msg(&e),
        format!(
            "Error: connecting slave requested to start from GTID 0-{SERVER_ID}-9, which is \
             not in the master's binlog"
        )
    );
    let e = mariadb_gtid_dump(&f, "0-77-2")
        .await
        .expect_err("other server");
    assert_eq!(err_code(&e), Some(1236));
    assert!(
        msg(&e).ends_with("the slave has diverged due to executing extra erroneous transactions")
    );
    let e = mariadb_gtid_dump(&f, "0-1").await.expect_err("malformed");
    assert_eq!(err_code(&e), Some(1236));
    assert!(msg(&e).contains("malformed slave request"), "{}", msg(&e));
    f.source
        .purge_to("binlog.000002")
        .expect("purge the first file");
    let e = mariadb_gtid_dump(&f, &format!("0-{SERVER_ID}-1"))
        .await
        .expect_err("purged");
    assert_eq!(err_code(&e), Some(1236));
    assert!(
        msg(&e).contains("required binlog files have been purged"),
        "{}",
        msg(&e)
    );
    // After the purge, a start at the first file's last GTID still works.
    let events = mariadb_gtid_dump(&f, &format!("0-{SERVER_ID}-3"))
        .await
        .expect("dump");
    assert_eq!(check_mariadb_stream(&f, &events).0, vec![4, 5]);
    f.stop().await;
}

/// `@slave_until_gtid` (`START SLAVE UNTIL master_gtid_pos`): the dump ends after that GTID's
/// transaction with MariaDB's fake GTID_LIST flagged `FLAG_UNTIL_REACHED` (the state up to the
/// last GTID read, log_pos after it), then EOF; a GTID past the UNTIL one is not sent.
#[tokio::test]
async fn mariadb_until_gtid_ends_the_dump_after_that_transaction() {
    let f = two_files().await;
    const UNTIL_REACHED: u32 = 1 << 28;
    let until_flag = |ev: &[u8]| ev[4] == 0xa3 && u32_at(ev, 19) & UNTIL_REACHED != 0;
    let cases = [
        // (start, until, GTIDs sent, the until list's state)
        (
            String::new(),
            format!("0-{SERVER_ID}-2"),
            vec![1, 2],
            Some(2),
        ),
        (
            format!("0-{SERVER_ID}-2"),
            format!("0-{SERVER_ID}-4"),
            vec![3, 4],
            Some(4),
        ),
        // Before the first GTID: its transaction is already past the position.
        (String::new(), format!("0-{SERVER_ID}-0"), vec![], Some(1)),
        // Another server in domain 0 never matches: no stop; another domain only: domain 0
        // has nothing to send.
        (
            String::new(),
            "0-77-2".to_string(),
            vec![1, 2, 3, 4, 5],
            None,
        ),
        (String::new(), "7-99-3".to_string(), vec![], None),
    ];
    for (start, until, want, state) in cases {
        let ctx = format!("start '{start}', until {until}");
        let events = mariadb_gtid_dump_until(&f, &start, Some(&until))
            .await
            .expect("dump");
        let gtids: Vec<u64> = events
            .iter()
            .filter(|e| e[4] == 0xa2)
            .map(|e| u64::from_le_bytes(e[19..27].try_into().expect("seq")))
            .collect();
        assert_eq!(gtids, want, "{ctx}");
        let flagged: Vec<&Vec<u8>> = events.iter().filter(|e| until_flag(e)).collect();
        let Some(state) = state else {
            assert!(flagged.is_empty(), "{ctx}: no UNTIL stop");
            continue;
        };
        assert_eq!(flagged.len(), 1, "{ctx}: one UNTIL stop");
        let last = events.last().expect("events");
        assert!(until_flag(last), "{ctx}: the UNTIL list ends the dump");
        assert_eq!(gtid_list_seqs(last), vec![state], "{ctx}: binlog state");
        assert_eq!(
            u16::from_le_bytes([last[17], last[18]]),
            0x20,
            "{ctx}: ARTIFICIAL"
        );
        // Its log_pos is the end of the last transaction read, as in the files.
        let before = &events[events.len() - 2];
        if before[4] == 16 {
            assert_eq!(u32_at(last, 13), u32_at(before, 13), "{ctx}: after the XID");
        }
        check_mariadb_stream(&f, &events);
    }
    let e = mariadb_gtid_dump_until(&f, "", Some("0-1"))
        .await
        .expect_err("malformed");
    assert_eq!(err_code(&e), Some(1236));
    f.stop().await;
}

/// The SQL a MariaDB replica sends in GTID mode, and MariaDB's GTID variables.
#[tokio::test]
async fn mariadb_gtid_variables_and_binlog_gtid_pos() {
    let f = Fixture::start(true, AuthMethod::NativePassword).await;
    let mut conn = f.conn().await;
    let empty: Option<String> = conn
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .expect("select");
    assert_eq!(empty.as_deref(), Some(""));
    let (_, end1) = f.source.append_insert(&[(1, "a")]);
    let (_, end2) = f.source.append_insert(&[(2, "b")]);
    let want = format!("0-{SERVER_ID}-2");
    let row: Option<(String, String, u32)> = conn
        .query_first("SELECT @@gtid_binlog_pos, @@GLOBAL.gtid_current_pos, @@GLOBAL.gtid_domain_id")
        .await
        .expect("select");
    assert_eq!(row, Some((want.clone(), want.clone(), 0)));
    let state: Option<(String, String)> = conn
        .query_first("SHOW VARIABLES LIKE 'gtid_binlog_state'")
        .await
        .expect("show");
    assert_eq!(state, Some(("gtid_binlog_state".into(), want.clone())));
    for sql in [
        format!("SET @slave_connect_state='{want}'"),
        "SET @slave_gtid_strict_mode=1".into(),
        "SET @slave_gtid_ignore_duplicates=0".into(),
    ] {
        conn.query_drop(&sql).await.expect("set");
    }
    let pos = |file: &str, p: u64| format!("SELECT binlog_gtid_pos('{file}', {p})");
    let at: Option<Option<String>> = conn
        .query_first(pos("binlog.000001", end1.pos))
        .await
        .expect("at 1");
    assert_eq!(at, Some(Some(format!("0-{SERVER_ID}-1"))));
    let at: Option<Option<String>> = conn
        .query_first(pos("binlog.000001", end2.pos))
        .await
        .expect("at 2");
    assert_eq!(at, Some(Some(want.clone())));
    let at: Option<Option<String>> = conn
        .query_first(pos("binlog.000001", 4))
        .await
        .expect("at 4");
    assert_eq!(at, Some(Some(String::new())));
    let at: Option<Option<String>> = conn
        .query_first(pos("binlog.000001", end2.pos - 1))
        .await
        .expect("inside an event");
    assert_eq!(at, Some(None), "not an event boundary: NULL");
    let at: Option<Option<String>> = conn
        .query_first(pos("binlog.000009", 4))
        .await
        .expect("unknown");
    assert_eq!(at, Some(None), "unknown file: NULL");
    let _ = conn.disconnect().await;
    f.stop().await;
}

/// Statements built to exhaust the server: pathological LIKE patterns (exponential for a
/// backtracking matcher, stack-deep for a recursive one), huge patterns and expressions nested
/// or chained as deep as the statement is long. Each gets an answer, and the server keeps
/// serving other sessions.
#[tokio::test]
async fn hostile_statements_get_answers_and_the_server_stays_up() {
    let f = Fixture::start(true, AuthMethod::CachingSha2Password).await;
    let mut conn = f.conn().await;
    let names = |rows: Vec<(String, String)>| rows.into_iter().map(|r| r.0).collect::<Vec<_>>();

    // 25 × `%` then `x`: the same answer as `%x`.
    let want = names(
        conn.query("SHOW VARIABLES LIKE '%x'")
            .await
            .expect("LIKE '%x'"),
    );
    let got = names(
        conn.query(format!("SHOW VARIABLES LIKE '{}x'", "%".repeat(25)))
            .await
            .expect("LIKE '%…%x'"),
    );
    assert_eq!(got, want);
    // `%a%a…%b` over every name: each `%` a backtracking point for a naive matcher.
    let none: Vec<(String, String)> = conn
        .query(format!("SHOW VARIABLES LIKE '{}b'", "%_".repeat(30_000)))
        .await
        .expect("LIKE '%_%_…b'");
    assert!(none.is_empty());
    // 60,000 × `%` (under the length cap): every variable.
    let all = names(conn.query("SHOW VARIABLES").await.expect("SHOW VARIABLES"));
    let got = names(
        conn.query(format!("SHOW VARIABLES LIKE '{}'", "%".repeat(60_000)))
            .await
            .expect("LIKE '%…%'"),
    );
    assert_eq!(got, all);
    // Over the cap (300,000 × `%`, then a 1 MiB pattern): a clear error.
    for len in [300_000, 1 << 20] {
        let e = conn
            .query_drop(format!("SHOW VARIABLES LIKE '{}'", "%".repeat(len)))
            .await
            .expect_err("pattern over the cap");
        assert_eq!(server_code(&e), Some(1210), "{e}");
    }
    // A chain of ORs is as deep as it is long: 400 are evaluated, 100,000 refused unparsed.
    let chain = vec!["Variable_name = 'server_id'"; 400].join(" OR ");
    let rows: Vec<(String, String)> = conn
        .query(format!("SHOW VARIABLES WHERE {chain}"))
        .await
        .expect("an OR chain");
    assert_eq!(names(rows), ["server_id"]);
    let chain = vec!["Variable_name = 'server_id'"; 100_000].join(" OR ");
    let e = conn
        .query_drop(format!("SHOW VARIABLES WHERE {chain}"))
        .await
        .expect_err("too deep");
    assert_eq!(server_code(&e), Some(1436), "{e}");
    // A LIKE in a WHERE clause has the same cap.
    let e = conn
        .query_drop(format!(
            "SHOW VARIABLES WHERE Variable_name LIKE '{}'",
            "%".repeat(1 << 20)
        ))
        .await
        .expect_err("pattern over the cap");
    assert_eq!(server_code(&e), Some(1210), "{e}");
    // Deep nesting and long operator chains in a SELECT list.
    for sql in [
        format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("SELECT {}1", "-".repeat(100_000)),
        format!("SELECT 1{}", "+1".repeat(200_000)),
        format!("SELECT {}", vec!["@@server_id"; 100_000].join(" AND ")),
    ] {
        let e = conn.query_drop(&sql).await.expect_err("refused");
        assert!(
            server_code(&e).is_some(),
            "an ERR packet, not a dropped connection: {e}"
        );
    }
    // The session and the server still answer.
    let one: Option<u32> = conn
        .query_first("SELECT @@server_id")
        .await
        .expect("select");
    assert_eq!(one, Some(SERVER_ID));
    let mut other = f.conn().await;
    let v: Option<String> = other
        .query_first("SELECT @@version")
        .await
        .expect("a new session");
    assert!(v.is_some());
    drop((conn, other));
    f.stop().await;
}

/// The catalog and rows of the SQL front tests: `shop.customers` (BIGINT key), `shop.orders`
/// (INT UNSIGNED key) and `shop.events` (no key).
fn shop() -> tibinlog::server::testing::MemTables {
    use tibinlog::server::testing::{MemTable, MemTables};
    use tibinlog::sql::charset::UTF8MB4_BIN;
    use tibinlog::sql::types::{SqlType, TypeKind};
    use tibinlog_protocol::value::{Date, DateTime, Value};
    let s = |x: &str| Value::Bytes(x.as_bytes().to_vec());
    let dt = |d: u8| {
        Value::DateTime(DateTime {
            date: Date {
                year: 2024,
                month: 1,
                day: d,
            },
            hour: 12,
            minute: 0,
            second: 0,
            micros: 0,
        })
    };
    let varchar = |n| SqlType::varchar(n, UTF8MB4_BIN);
    MemTables::new(vec![
        MemTable {
            db: "shop".into(),
            name: "customers".into(),
            columns: vec![
                ("id".into(), SqlType::bigint().not_null(), "bigint".into()),
                ("name".into(), varchar(32), "varchar(32)".into()),
                ("city".into(), varchar(16), "varchar(16)".into()),
                (
                    "balance".into(),
                    SqlType::decimal(10, 2),
                    "decimal(10,2)".into(),
                ),
                ("created".into(), SqlType::datetime(0), "datetime".into()),
            ],
            pk: Some(0),
            rows: vec![
                vec![
                    Value::Int(3),
                    s("Carol"),
                    s("Oslo"),
                    Value::Decimal("7.5".into()),
                    dt(3),
                ],
                vec![
                    Value::Int(1),
                    s("Ann"),
                    s("Bergen"),
                    Value::Decimal("10".into()),
                    dt(1),
                ],
                vec![
                    Value::Int(2),
                    s("Bob"),
                    s("Oslo"),
                    Value::Decimal("-2.25".into()),
                    dt(2),
                ],
                vec![Value::Int(4), s("Dan"), Value::Null, Value::Null, dt(4)],
                vec![
                    Value::Int(5),
                    s("Eve"),
                    s("Bergen"),
                    Value::Decimal("0".into()),
                    dt(5),
                ],
            ],
        },
        MemTable {
            db: "shop".into(),
            name: "orders".into(),
            columns: vec![
                (
                    "id".into(),
                    SqlType::new(TypeKind::Int { bytes: 4 })
                        .unsigned()
                        .not_null(),
                    "int unsigned".into(),
                ),
                ("customer_id".into(), SqlType::bigint(), "bigint".into()),
                ("total".into(), SqlType::double(), "double".into()),
                (
                    "note".into(),
                    SqlType::new(TypeKind::Text { max_bytes: 65_535 }).with_collation(UTF8MB4_BIN),
                    "text".into(),
                ),
            ],
            pk: Some(0),
            rows: vec![
                vec![
                    Value::UInt(10),
                    Value::Int(1),
                    Value::Double(9.5),
                    s("first"),
                ],
                vec![
                    Value::UInt(11),
                    Value::Int(2),
                    Value::Double(0.1),
                    Value::Null,
                ],
                vec![
                    Value::UInt(12),
                    Value::Int(1),
                    Value::Double(100.0),
                    s("third"),
                ],
            ],
        },
        MemTable {
            db: "shop".into(),
            name: "events".into(),
            columns: vec![
                ("kind".into(), varchar(8), "varchar(8)".into()),
                ("n".into(), SqlType::int(), "int".into()),
            ],
            pk: None,
            rows: vec![vec![s("a"), Value::Int(1)], vec![s("b"), Value::Int(2)]],
        },
    ])
}

/// Text rows of a query (NULL as `None`).
async fn text_rows(conn: &mut mysql_async::Conn, q: &str) -> Vec<Vec<Option<String>>> {
    let rows: Vec<mysql_async::Row> = conn.query(q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
    rows.into_iter()
        .map(|r| {
            r.unwrap()
                .into_iter()
                .map(|v| match v {
                    mysql_async::Value::NULL => None,
                    mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                    other => Some(other.as_sql(true)),
                })
                .collect()
        })
        .collect()
}

fn strs(rows: &[&[&str]]) -> Vec<Vec<Option<String>>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|x| {
                    if *x == "NULL" {
                        None
                    } else {
                        Some((*x).to_owned())
                    }
                })
                .collect()
        })
        .collect()
}

/// Labels of a query's columns.
async fn labels(conn: &mut mysql_async::Conn, q: &str) -> Vec<String> {
    let mut r = conn
        .query_iter(q)
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"));
    let cols = r
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let _: Vec<mysql_async::Row> = r.collect().await.expect("rows");
    cols
}

#[tokio::test]
async fn sql_front_reads_tables_and_information_schema() {
    let f = Fixture::start_with_tables(shop()).await;
    let mut c = f.conn().await;

    // SHOW forms, as the tools send them.
    assert_eq!(
        text_rows(&mut c, "SHOW DATABASES").await,
        strs(&[&["information_schema"], &["shop"]])
    );
    assert_eq!(
        text_rows(
            &mut c,
            "SHOW FULL TABLES IN `shop` where Table_Type = 'BASE TABLE'"
        )
        .await,
        strs(&[
            &["customers", "BASE TABLE"],
            &["events", "BASE TABLE"],
            &["orders", "BASE TABLE"]
        ])
    );
    c.query_drop("USE `shop`").await.expect("use");
    assert_eq!(
        labels(&mut c, "SHOW TABLES LIKE 'c%'").await,
        ["Tables_in_shop (c%)"]
    );
    assert_eq!(
        text_rows(&mut c, "show tables like 'c%'").await,
        strs(&[&["customers"]])
    );
    let status = text_rows(&mut c, "SHOW TABLE STATUS LIKE 'customers';").await;
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].len(), 18);
    assert_eq!(status[0][0].as_deref(), Some("customers"));
    assert_eq!(status[0][1].as_deref(), Some("InnoDB"));
    assert_eq!(
        text_rows(&mut c, "DESC shop.customers").await[0],
        strs(&[&["id", "bigint", "NO", "PRI", "NULL", ""]])[0]
    );
    assert_eq!(
        labels(&mut c, "SHOW FULL COLUMNS FROM customers").await,
        [
            "Field",
            "Type",
            "Collation",
            "Null",
            "Key",
            "Default",
            "Extra",
            "Privileges",
            "Comment"
        ]
    );
    let index = text_rows(&mut c, "SHOW INDEX FROM `shop`.`orders`").await;
    assert_eq!(index.len(), 1);
    assert_eq!(index[0][2].as_deref(), Some("PRIMARY"));
    assert_eq!(index[0][4].as_deref(), Some("id"));
    assert_eq!(
        text_rows(&mut c, "SHOW CREATE DATABASE shop").await[0][1].as_deref(),
        Some("CREATE DATABASE `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin */ /*!80016 DEFAULT ENCRYPTION='N' */")
    );
    assert!(
        !text_rows(&mut c, "SHOW COLLATION WHERE Charset = 'utf8mb4'")
            .await
            .is_empty()
    );
    assert_eq!(
        text_rows(&mut c, "SHOW CHARACTER SET LIKE 'latin1'")
            .await
            .len(),
        1
    );
    assert_eq!(
        text_rows(&mut c, "SHOW ENGINES").await[0][0].as_deref(),
        Some("InnoDB")
    );
    assert!(text_rows(&mut c, "SHOW TRIGGERS LIKE 'customers'")
        .await
        .is_empty());

    // Table reads: every row, in key order, values as MySQL renders them.
    assert_eq!(
        text_rows(&mut c, "SELECT * FROM shop.customers").await,
        strs(&[
            &["1", "Ann", "Bergen", "10.00", "2024-01-01 12:00:00"],
            &["2", "Bob", "Oslo", "-2.25", "2024-01-02 12:00:00"],
            &["3", "Carol", "Oslo", "7.50", "2024-01-03 12:00:00"],
            &["4", "Dan", "NULL", "NULL", "2024-01-04 12:00:00"],
            &["5", "Eve", "Bergen", "0.00", "2024-01-05 12:00:00"],
        ])
    );
    let mut r = c
        .query_iter("SELECT id, name, balance FROM shop.customers LIMIT 1")
        .await
        .expect("query");
    let cols: Vec<_> = r.columns_ref().to_vec();
    let _: Vec<mysql_async::Row> = r.collect().await.expect("rows");
    use mysql_async::consts::{ColumnFlags, ColumnType};
    assert_eq!(cols[0].column_type(), ColumnType::MYSQL_TYPE_LONGLONG);
    assert!(cols[0]
        .flags()
        .contains(ColumnFlags::PRI_KEY_FLAG | ColumnFlags::NOT_NULL_FLAG));
    assert_eq!(cols[0].table_str(), "customers");
    assert_eq!(cols[0].schema_str(), "shop");
    assert_eq!(cols[1].column_type(), ColumnType::MYSQL_TYPE_VAR_STRING);
    assert_eq!(cols[2].column_type(), ColumnType::MYSQL_TYPE_NEWDECIMAL);
    assert_eq!(cols[2].decimals(), 2);

    // Flink CDC's splitter and chunk reads, Debezium's column list.
    assert_eq!(
        text_rows(
            &mut c,
            "SELECT MIN(`id`), MAX(`id`) FROM `shop`.`customers`"
        )
        .await,
        strs(&[&["1", "5"]])
    );
    assert_eq!(
        text_rows(
            &mut c,
            "SELECT MAX(`id`) FROM (SELECT `id` FROM `shop`.`customers` WHERE `id` >= 2 ORDER BY `id` ASC LIMIT 2) AS T"
        )
        .await,
        strs(&[&["3"]])
    );
    assert_eq!(
        text_rows(
            &mut c,
            "SELECT MIN(`id`) FROM `shop`.`customers` WHERE `id` > 3"
        )
        .await,
        strs(&[&["4"]])
    );
    assert_eq!(
        text_rows(
            &mut c,
            "SELECT * FROM `shop`.`customers` WHERE `id` >= 2 AND NOT (`id` = 3) AND `id` <= 4"
        )
        .await
        .iter()
        .map(|r| r[0].clone().unwrap_or_default())
        .collect::<Vec<_>>(),
        ["2", "4"]
    );
    assert_eq!(
        text_rows(&mut c, "SELECT `id`, `name` FROM `shop`.`customers` WHERE `id` IN (5, 1, 9) ORDER BY `id` DESC").await,
        strs(&[&["5", "Eve"], &["1", "Ann"]])
    );
    assert_eq!(
        text_rows(
            &mut c,
            "SELECT * FROM `shop`.`orders` WHERE `id` > 10 LIMIT 1"
        )
        .await,
        strs(&[&["11", "2", "0.1", "NULL"]])
    );
    assert_eq!(
        text_rows(&mut c, "SELECT city, COUNT(*) AS n, SUM(balance) FROM shop.customers GROUP BY city ORDER BY city").await,
        strs(&[&["NULL", "1", "NULL"], &["Bergen", "2", "10.00"], &["Oslo", "2", "5.25"]])
    );
    assert_eq!(
        text_rows(&mut c, "SELECT o.id, c.name FROM shop.orders AS o JOIN shop.customers c ON o.customer_id = c.id WHERE o.total > 1 ORDER BY o.id").await,
        strs(&[&["10", "Ann"], &["12", "Ann"]])
    );
    assert_eq!(
        text_rows(&mut c, "SELECT COUNT(*) FROM shop.events").await,
        strs(&[&["2"]])
    );

    // Maxwell's schema capture.
    assert_eq!(
        text_rows(
            &mut c,
            "SELECT TABLES.TABLE_NAME, CCSA.CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.TABLES LEFT JOIN information_schema.COLLATION_CHARACTER_SET_APPLICABILITY AS CCSA ON TABLES.TABLE_COLLATION = CCSA.COLLATION_NAME WHERE TABLES.TABLE_SCHEMA = 'shop' "
        )
        .await,
        strs(&[&["customers", "utf8mb4"], &["events", "utf8mb4"], &["orders", "utf8mb4"]])
    );
    let cols = text_rows(
        &mut c,
        "SELECT TABLE_NAME,COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME, ORDINAL_POSITION, COLUMN_TYPE, DATETIME_PRECISION, COLUMN_KEY FROM `information_schema`.`COLUMNS` WHERE TABLE_SCHEMA = 'shop' ORDER BY TABLE_NAME, ORDINAL_POSITION",
    )
    .await;
    assert_eq!(cols.len(), 11);
    assert_eq!(
        cols[0],
        strs(&[&[
            "customers",
            "id",
            "bigint",
            "NULL",
            "1",
            "bigint",
            "NULL",
            "PRI"
        ]])[0]
    );
    assert_eq!(
        text_rows(&mut c, "SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION FROM information_schema.KEY_COLUMN_USAGE WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA = 'shop' ORDER BY TABLE_NAME, ORDINAL_POSITION").await,
        strs(&[&["customers", "id", "1"], &["orders", "id", "1"]])
    );
    assert_eq!(
        labels(
            &mut c,
            "select table_name from information_schema.tables where table_schema = 'shop' limit 1"
        )
        .await,
        ["TABLE_NAME"]
    );
    assert_eq!(
        text_rows(&mut c, "SELECT schema_name, default_character_set_name, default_collation_name FROM information_schema.schemata").await.len(),
        2
    );

    // Canal's table-meta bootstrap: several statements in one COM_QUERY.
    let mut r = c
        .query_iter("show create table `shop`.`customers`;show create table `shop`.`orders`")
        .await
        .expect("multi-statement");
    let first: Vec<mysql_async::Row> = r.collect().await.expect("first result");
    let second: Vec<mysql_async::Row> = r.collect().await.expect("second result");
    assert_eq!((first.len(), second.len()), (1, 1));
    drop(r);

    // Errors name what is wrong, with MySQL's codes.
    for (q, code) in [
        ("SELECT * FROM nope.t", 1049),
        ("SELECT * FROM shop.nope", 1146),
        ("SELECT nope FROM shop.customers", 1054),
        (
            "SELECT id FROM shop.customers c JOIN shop.orders o ON c.id = o.customer_id",
            1052,
        ),
        ("SELECT * FROM shop.customers WHERE id = (SELECT 1)", 1105),
        ("SHOW COLUMNS FROM shop.nope", 1146),
        ("SHOW TABLES FROM nope", 1049),
        ("SELECT NO_SUCH_FN(1)", 1305),
        ("SELECT 9223372036854775807 + 1", 1690),
    ] {
        let e = c.query_drop(q).await.expect_err(q);
        assert_eq!(server_code(&e), Some(code), "{q}: {e}");
    }
    // The session goes on after errors.
    assert_eq!(text_rows(&mut c, "SELECT 1 + 1").await, strs(&[&["2"]]));

    // The binary protocol: prepared statements, typed values, parameters of every kind.
    let rows: Vec<(i64, String, Option<String>)> = c
        .exec(
            "SELECT id, name, city FROM shop.customers WHERE id >= ? AND id < ? ORDER BY id",
            (2, 4),
        )
        .await
        .expect("exec");
    assert_eq!(
        rows,
        vec![
            (2, "Bob".to_owned(), Some("Oslo".to_owned())),
            (3, "Carol".to_owned(), Some("Oslo".to_owned()))
        ]
    );
    let rows: Vec<mysql_async::Row> = c
        .exec(
            "SELECT created, balance, id FROM shop.customers WHERE name = ? OR city = ?",
            ("Ann", mysql_async::Value::NULL),
        )
        .await
        .expect("exec");
    assert_eq!(rows.len(), 1);
    let row = rows[0].clone().unwrap();
    assert_eq!(row[0], mysql_async::Value::Date(2024, 1, 1, 12, 0, 0, 0));
    assert_eq!(row[1], mysql_async::Value::Bytes(b"10.00".to_vec()));
    assert_eq!(row[2], mysql_async::Value::Int(1));
    let stmt = c
        .prep("SELECT total FROM shop.orders WHERE id = ?")
        .await
        .expect("prepare");
    assert_eq!(stmt.num_params(), 1);
    assert_eq!(stmt.columns().len(), 1);
    for (id, want) in [(10u32, Some(9.5f64)), (11, Some(0.1)), (99, None)] {
        let got: Option<f64> = c.exec_first(&stmt, (id,)).await.expect("exec");
        assert_eq!(got, want);
    }
    c.close(stmt).await.expect("close");
    let e = c
        .prep("SELECT * FROM shop.nope WHERE id = ?")
        .await
        .expect_err("unknown table");
    assert_eq!(server_code(&e), Some(1146));
    let n: Option<i64> = c
        .exec_first(
            "SELECT COUNT(*) FROM shop.customers WHERE created > ?",
            (mysql_async::Value::Date(2024, 1, 3, 0, 0, 0, 0),),
        )
        .await
        .expect("date parameter");
    assert_eq!(n, Some(3));
    drop(c);
    f.stop().await;
}

/// A seeded generator of SELECT statements over the SQL front's tables and information_schema:
/// operators, functions, casts, joins, grouping, ordering and limits, with literals at the edges
/// of their types and names that do not exist.
struct Grammar {
    state: u64,
}

impl Grammar {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn literal(&mut self) -> String {
        self.pick(&[
            "0",
            "1",
            "-1",
            "18446744073709551615",
            "-9223372036854775808",
            "9223372036854775807",
            "3.14159",
            "-0.5",
            "1e308",
            "2.5e-3",
            "NULL",
            "TRUE",
            "'abc'",
            "''",
            "'O''Reilly'",
            "'a\\\\b'",
            "'%_'",
            "'ünï 😀'",
            "'2024-01-03'",
            "'2024-01-03 12:00:00.5'",
            "'12:30:00'",
            "X'00ff'",
            "0x41",
            "b'101'",
            "DATE '2024-02-29'",
        ])
        .to_owned()
    }

    fn expr(&mut self, cols: &[&str], depth: u32) -> String {
        if depth == 0 || self.chance(30) {
            return if self.chance(55) {
                if self.chance(5) {
                    "no_such_column".to_owned()
                } else {
                    self.pick(cols).to_owned()
                }
            } else {
                self.literal()
            };
        }
        let d = depth - 1;
        match self.next() % 12 {
            0 | 1 => {
                let op = self.pick(&[
                    "+", "-", "*", "/", "DIV", "%", "=", "<>", "<", "<=", ">", ">=", "<=>", "AND",
                    "OR", "XOR", "&", "|", "^", "<<", ">>", "LIKE",
                ]);
                format!("({} {op} {})", self.expr(cols, d), self.expr(cols, d))
            }
            2 => format!("(NOT {})", self.expr(cols, d)),
            3 => {
                let f = self.pick(&[
                    "UPPER",
                    "LOWER",
                    "LENGTH",
                    "CHAR_LENGTH",
                    "ABS",
                    "ROUND",
                    "FLOOR",
                    "CEIL",
                    "HEX",
                    "TRIM",
                    "REVERSE",
                    "ISNULL",
                    "DATE",
                    "YEAR",
                    "NO_SUCH_FUNCTION",
                ]);
                format!("{f}({})", self.expr(cols, d))
            }
            4 => {
                let f = self.pick(&[
                    "CONCAT", "COALESCE", "IFNULL", "NULLIF", "LEAST", "GREATEST",
                ]);
                format!("{f}({}, {})", self.expr(cols, d), self.expr(cols, d))
            }
            5 => format!(
                "SUBSTRING({}, {}, {})",
                self.expr(cols, d),
                self.expr(cols, d),
                self.expr(cols, d)
            ),
            6 => {
                let t = self.pick(&[
                    "CHAR",
                    "SIGNED",
                    "UNSIGNED",
                    "DECIMAL(5,2)",
                    "DATE",
                    "DATETIME",
                    "BINARY",
                    "JSON",
                ]);
                format!("CAST({} AS {t})", self.expr(cols, d))
            }
            7 => format!(
                "({} IS {}NULL)",
                self.expr(cols, d),
                if self.chance(50) { "NOT " } else { "" }
            ),
            8 => format!(
                "({} IN ({}, {}))",
                self.expr(cols, d),
                self.literal(),
                self.literal()
            ),
            9 => format!(
                "({} BETWEEN {} AND {})",
                self.expr(cols, d),
                self.expr(cols, d),
                self.expr(cols, d)
            ),
            10 => format!(
                "CASE WHEN {} THEN {} ELSE {} END",
                self.expr(cols, d),
                self.expr(cols, d),
                self.expr(cols, d)
            ),
            _ => format!(
                "IF({}, {}, {})",
                self.expr(cols, d),
                self.expr(cols, d),
                self.expr(cols, d)
            ),
        }
    }

    fn statement(&mut self) -> String {
        const TABLES: &[(&str, &[&str])] = &[
            (
                "shop.customers",
                &["id", "name", "city", "balance", "created"],
            ),
            ("shop.orders", &["id", "customer_id", "total", "note"]),
            ("shop.events", &["kind", "n"]),
            (
                "information_schema.TABLES",
                &["TABLE_SCHEMA", "TABLE_NAME", "TABLE_ROWS", "CREATE_TIME"],
            ),
            (
                "information_schema.COLUMNS",
                &[
                    "TABLE_NAME",
                    "COLUMN_NAME",
                    "ORDINAL_POSITION",
                    "COLUMN_TYPE",
                ],
            ),
            ("shop.nope", &["id"]),
        ];
        let (table, cols) = TABLES[(self.next() % TABLES.len() as u64) as usize];
        let mut sql = String::from("SELECT ");
        if self.chance(15) {
            sql.push_str("DISTINCT ");
        }
        let grouped = self.chance(25);
        let n = 1 + self.next() % 3;
        for i in 0..n {
            if i > 0 {
                sql.push_str(", ");
            }
            if grouped && self.chance(60) {
                let agg = self.pick(&["COUNT", "MIN", "MAX", "SUM", "AVG", "GROUP_CONCAT"]);
                let arg = if agg == "COUNT" && self.chance(40) {
                    "*".to_owned()
                } else {
                    self.expr(cols, 2)
                };
                sql.push_str(&format!("{agg}({arg})"));
            } else if self.chance(10) {
                sql.push('*');
            } else {
                sql.push_str(&self.expr(cols, 3));
            }
        }
        sql.push_str(&format!(" FROM {table}"));
        let mut cols: Vec<&str> = cols.to_vec();
        if self.chance(15) {
            let (other, ocols) = TABLES[(self.next() % 3) as usize];
            let kind = self.pick(&["JOIN", "LEFT JOIN", "CROSS JOIN"]);
            sql.push_str(&format!(" AS a {kind} {other} AS b"));
            if kind != "CROSS JOIN" {
                let on = format!(" ON a.{} = b.{}", self.pick(&cols), self.pick(ocols));
                sql.push_str(&on);
            }
            cols.extend(ocols.iter().copied());
            // Bare names may now be ambiguous (1052): an answer, too.
        }
        if self.chance(60) {
            sql.push_str(&format!(" WHERE {}", self.expr(&cols, 4)));
        }
        if grouped && self.chance(70) {
            sql.push_str(&format!(" GROUP BY {}", self.pick(&cols)));
            if self.chance(30) {
                sql.push_str(&format!(" HAVING {}", self.expr(&cols, 2)));
            }
        }
        if self.chance(40) {
            let col = self.pick(&cols);
            let dir = self.pick(&["", " ASC", " DESC"]);
            sql.push_str(&format!(" ORDER BY {col}{dir}"));
        }
        if self.chance(30) {
            sql.push_str(&format!(" LIMIT {}", self.next() % 5));
            if self.chance(30) {
                sql.push_str(&format!(" OFFSET {}", self.next() % 3));
            }
        }
        sql
    }
}

/// Random statements from [`Grammar`] through the text and the binary protocol: every one gets
/// rows or a MySQL error (never a dropped connection, which is what a panic in the executor
/// would give), and the server still answers afterwards. `TIBINLOG_SQL_SEED` replays a run.
#[tokio::test]
async fn random_statements_get_rows_or_errors_and_never_break_the_server() {
    let seed: u64 = std::env::var("TIBINLOG_SQL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let f = Fixture::start_with_tables(shop()).await;
    let mut conn = f.conn().await;
    let mut g = Grammar { state: seed };
    let (mut answered, mut errors) = (0u32, 0u32);
    let mut codes = std::collections::BTreeMap::<u16, u32>::new();
    for i in 0..600 {
        let sql = g.statement();
        let r: Result<Vec<mysql_async::Row>, _> = if i % 4 == 3 {
            conn.exec(&sql, ()).await
        } else {
            conn.query(&sql).await
        };
        match r {
            Ok(_) => answered += 1,
            Err(mysql_async::Error::Server(e)) => {
                assert!(
                    !e.message.is_empty(),
                    "seed {seed}: {sql}: an empty message"
                );
                if std::env::var_os("TIBINLOG_SQL_SHOW").is_some() && matches!(e.code, 1105 | 1064)
                {
                    eprintln!("{}: {}", e.code, e.message);
                }
                *codes.entry(e.code).or_default() += 1;
                errors += 1;
            }
            Err(e) => panic!("seed {seed}: statement {i} broke the connection: {sql}\n{e}"),
        }
    }
    let one: Option<i64> = conn.query_first("SELECT 1").await.expect("still answers");
    assert_eq!(one, Some(1));
    drop(conn);
    let mut other = f.conn().await;
    let v: Option<String> = other
        .query_first("SELECT @@version")
        .await
        .expect("new session");
    assert!(v.is_some());
    assert!(
        answered > 100,
        "seed {seed}: only {answered} statements gave rows"
    );
    eprintln!("seed {seed}: {answered} answered, {errors} errors {codes:?}");
    drop(other);
    f.stop().await;
}

/// `KILL QUERY` stops a streaming SELECT with 1317 after the rows already sent and leaves the
/// connection usable; `KILL` ends a streaming connection. The rows are wide enough that the
/// result cannot sit in socket buffers when the kill arrives.
#[tokio::test]
async fn kill_query_stops_a_streaming_select_and_kill_ends_the_connection() {
    use tibinlog::server::testing::{MemTable, MemTables};
    use tibinlog::sql::charset::UTF8MB4_BIN;
    use tibinlog::sql::types::SqlType;
    use tibinlog_protocol::value::Value;
    const ROWS: i64 = 100_000;
    let pad = "p".repeat(400);
    let rows = (1..=ROWS)
        .map(|i| vec![Value::Int(i), Value::Bytes(pad.clone().into_bytes())])
        .collect();
    let tables = MemTables::new(vec![MemTable {
        db: "big".into(),
        name: "t".into(),
        columns: vec![
            ("id".into(), SqlType::bigint().not_null(), "bigint".into()),
            (
                "pad".into(),
                SqlType::varchar(400, UTF8MB4_BIN),
                "varchar(400)".into(),
            ),
        ],
        pk: Some(0),
        rows,
    }]);
    let f = Fixture::start_with_tables(tables).await;
    let mut a = f.conn().await;
    let mut b = f.conn().await;

    let a_id = a.id();
    let mut r = a.query_iter("SELECT * FROM big.t").await.expect("select");
    let first: mysql_async::Row = r.next().await.expect("first row").expect("a row");
    assert_eq!(first.get::<i64, _>(0), Some(1));
    b.query_drop(format!("KILL QUERY {a_id}"))
        .await
        .expect("kill query");
    let mut read = 1i64;
    let err = loop {
        match r.next().await {
            Ok(Some(_)) => read += 1,
            Ok(None) => panic!("the whole result arrived despite KILL QUERY"),
            Err(e) => break e,
        }
    };
    assert_eq!(server_code(&err), Some(1317), "{err}");
    assert!(read < ROWS, "{read} rows before the error");
    drop(r);
    let one: Option<i64> = a.query_first("SELECT 1").await.expect("still usable");
    assert_eq!(one, Some(1));

    // KILL ends the streaming connection; the killer's own connection goes on.
    let a_id = a.id();
    let mut r = a.query_iter("SELECT * FROM big.t").await.expect("select");
    let _: mysql_async::Row = r.next().await.expect("first row").expect("a row");
    b.query_drop(format!("KILL {a_id}")).await.expect("kill");
    let ended = loop {
        match r.next().await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the whole result arrived despite KILL"),
            Err(e) => break e,
        }
    };
    assert!(
        !matches!(ended, mysql_async::Error::Server(_)),
        "a closed connection, not an error packet: {ended}"
    );
    drop(r);
    let e = b
        .query_drop("KILL QUERY 999999")
        .await
        .expect_err("unknown id");
    assert_eq!(server_code(&e), Some(1094));
    let one: Option<i64> = b.query_first("SELECT 1").await.expect("b goes on");
    assert_eq!(one, Some(1));
    drop(b);
    f.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Connection limits

fn limits(max_connections: u32, connect_timeout: Duration) -> tibinlog::server::Limits {
    tibinlog::server::Limits {
        max_connections,
        connect_timeout,
        ..tibinlog::server::Limits::default()
    }
}

/// `max_connections` counts logged-in sessions: one more gets 1040 "Too many connections";
/// sockets still in the handshake do not count; a place freed by a session that quits is
/// taken again.
#[tokio::test]
async fn max_connections_refuses_with_1040_and_frees_places() {
    let f = Fixture::start_with_limits(limits(2, Duration::from_secs(30))).await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(
            tokio::net::TcpStream::connect(f.addr)
                .await
                .expect("idle socket"),
        );
    }
    let a = f.conn().await;
    let mut b = f.conn().await;
    let e = mysql_async::Conn::new(f.opts("root", PASSWORD))
        .await
        .expect_err("a third session");
    assert_eq!(server_code(&e), Some(1040), "{e}");
    let (_, v): (String, u32) = b
        .query_first("SHOW VARIABLES LIKE 'max_connections'")
        .await
        .expect("show")
        .expect("row");
    assert_eq!(v, 2);
    a.disconnect().await.expect("quit");
    // The server frees the place when it has read the quit: retry until it has.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let c = loop {
        match mysql_async::Conn::new(f.opts("root", PASSWORD)).await {
            Ok(c) => break c,
            Err(e) if server_code(&e) == Some(1040) => {
                assert!(std::time::Instant::now() < deadline, "place never freed");
                tokio::task::yield_now().await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    drop((b, c, idle));
    f.stop().await;
}

/// A socket that does not log in within `connect_timeout` is closed; one that announces a
/// packet larger than the limit before login gets 1153 and is closed.
#[tokio::test]
async fn connections_that_do_not_log_in_are_closed() {
    use tokio::io::AsyncReadExt;
    let f = Fixture::start_with_limits(limits(151, Duration::from_secs(1))).await;
    let mut s = tokio::net::TcpStream::connect(f.addr)
        .await
        .expect("connect");
    let mut buf = vec![0u8; 4096];
    let mut total = 0;
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => total += n,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the server closed the idle socket");
    assert!(total > 0, "the greeting came first");

    let mut c = RawClient::connect(f.addr).await;
    // A handshake response announcing 1 MiB.
    c.write_raw(&[0, 0, 0x10, 1]).await;
    let p = c.read().await;
    assert_eq!(err_code(&p), Some(1153), "{p:?}");
    // And the server still logs people in.
    f.conn().await.disconnect().await.expect("quit");
    f.stop().await;
}

/// A session idle longer than its `wait_timeout` gets 4031 and is closed.
#[tokio::test]
async fn a_session_idle_past_wait_timeout_gets_4031() {
    let f = Fixture::start(true, AuthMethod::NativePassword).await;
    let mut c = RawClient::connect(f.addr).await;
    c.login_native().await;
    let ok = c.command(b"\x03SET SESSION wait_timeout = 1").await;
    assert_eq!(ok[0], 0, "{ok:?}");
    let p = c.read().await;
    assert_eq!(err_code(&p), Some(4031), "{p:?}");
    assert!(
        String::from_utf8_lossy(&p).contains("because of inactivity"),
        "{p:?}"
    );
    f.stop().await;
}

/// 2,000 sockets that connected and said nothing (or a few bytes of a packet), and a replica
/// that stopped reading its dump, do not keep a real client from logging in and reading the
/// whole binlog; the process list shows them for what they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_and_a_slow_reader_do_not_lock_clients_out() {
    use tokio::io::AsyncWriteExt;
    // 2,000 sockets on each side, plus the rest.
    rlimit::increase_nofile_limit(8192).expect("raise the open file limit");
    let f = Fixture::start_with_limits(limits(151, Duration::from_secs(120))).await;
    // About 7 MiB of binlog: more than the socket buffers of a reader that reads nothing.
    let name = "x".repeat(120);
    let mut end = None;
    for t in 0..1000 {
        let rows: Vec<(i64, &str)> = (0..50).map(|i| (t * 50 + i, name.as_str())).collect();
        end = Some(f.source.append_insert(&rows));
    }
    let (last_gno, end) = end.expect("transactions");
    let mut idle = Vec::with_capacity(2000);
    for i in 0..2000 {
        let mut s = tokio::net::TcpStream::connect(f.addr)
            .await
            .expect("idle socket");
        if i % 10 == 0 {
            // Half a packet header, then nothing.
            s.write_all(&[0x20, 0]).await.expect("trickle");
        }
        idle.push(s);
    }
    // The slow reader: asks for everything and never reads.
    let mut slow = RawClient::connect(f.addr).await;
    slow.login_native().await;
    slow.seq = 0;
    slow.write(&repl::dump_command(b"binlog.000001", 4, 0, 31))
        .await;

    let started = std::time::Instant::now();
    let mut admin = f.conn().await;
    let evs = read_dump(
        f.conn().await,
        BinlogStreamRequest::new(0)
            .with_filename(b"binlog.000001")
            .with_pos(4),
    )
    .await
    .expect("the whole binlog");
    let gtids = evs
        .iter()
        .filter(|e| e.0 == MyEventType::GTID_EVENT as u8)
        .count();
    assert_eq!(gtids as u64, last_gno);
    assert_eq!(
        u64::from(evs.last().expect("events").1),
        end.pos,
        "read to the end"
    );
    eprintln!(
        "2,000 idle sockets and a stalled dump: login and a {} MiB dump took {:?}",
        end.pos >> 20,
        started.elapsed()
    );

    let rows: Vec<(u64, String, String, Option<String>)> = admin
        .query("SELECT ID, USER, COMMAND, STATE FROM information_schema.PROCESSLIST")
        .await
        .expect("processlist");
    let unauthenticated = rows
        .iter()
        .filter(|r| r.1 == "unauthenticated user" && r.2 == "Connect")
        .count();
    assert_eq!(unauthenticated, 2000, "idle sockets in the process list");
    let stalled = rows
        .iter()
        .find(|r| r.2 == "Binlog Dump")
        .unwrap_or_else(|| {
            let others: Vec<_> = rows.iter().filter(|r| r.2 != "Connect").collect();
            panic!("the stalled dump is not listed: {others:?}")
        });
    assert_eq!(
        stalled.3.as_deref(),
        Some("Sending binlog event to replica")
    );
    let (_, threads): (String, u64) = admin
        .query_first("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
        .await
        .expect("status")
        .expect("row");
    assert!(threads >= 2002, "{threads}");
    drop((idle, slow));
    admin.disconnect().await.expect("quit");
    f.stop().await;
}

/// Accounts from MySQL password hashes, caching_sha2 full authentication over RSA on a plain
/// connection (then its fast path from the cache), and privileges: what each account may run,
/// the errors MySQL gives for the rest, and SHOW GRANTS.
#[tokio::test]
async fn accounts_hashes_rsa_full_auth_and_privileges() {
    use tibinlog::server::rsa_key::ServerRsaKey;
    use tibinlog::server::users::{hash_password, Privileges, User, Users};
    use tibinlog_protocol::wire::auth::Credential;
    let hashed = |plugin, pw: &str| {
        Credential::from_mysql_hash(&hash_password(plugin, pw.as_bytes()).expect("hash"))
            .expect("parse")
    };
    let user = |name: &str, credential, privileges: &[&str]| User {
        name: name.into(),
        credential,
        privileges: Privileges::parse(privileges).expect("privileges"),
    };
    let users = Users::new([
        user(
            "admin",
            hashed(AuthMethod::NativePassword, "adminpw"),
            &["ALL"],
        ),
        user(
            "repl",
            hashed(AuthMethod::CachingSha2Password, "replpw"),
            &["REPLICATION SLAVE", "REPLICATION CLIENT"],
        ),
        user(
            "reader",
            hashed(AuthMethod::NativePassword, "readpw"),
            &["SELECT"],
        ),
        user("nobody", hashed(AuthMethod::CachingSha2Password, "x"), &[]),
    ]);
    let key = std::sync::Arc::new(ServerRsaKey::generate().expect("rsa key"));
    let pem = String::from_utf8(
        tibinlog_protocol::wire::auth_exchange::RsaKey::public_pem(key.as_ref()).to_vec(),
    )
    .expect("pem");
    let f = Fixture::start_with_users(users, Some(key), Some(shop())).await;
    f.source.append_insert(&[(1, "a")]);

    // A `$A$…` user on a plain connection: full authentication, the client retrieving the public
    // key and sending its password RSA-encrypted (mysql_async does all of it).
    let mut repl = mysql_async::Conn::new(f.opts("repl", "replpw"))
        .await
        .expect("repl logs in by RSA full authentication");
    // Now the fast path: a raw caching_sha2 scramble gets 0x01 0x03 (fast auth success), then OK.
    let mut raw = RawClient::connect(f.addr).await;
    let scramble = tibinlog_protocol::wire::auth::scramble_caching_sha2(&raw.nonce, b"replpw");
    let first = raw.login("repl", "caching_sha2_password", &scramble).await;
    assert_eq!(first, vec![0x01, 0x03], "the cache answers the fast path");
    let ok = raw.read().await;
    assert_eq!(<[u8]>::first(&ok).copied(), Some(0x00), "then OK");
    // A wrong password is refused either way.
    let e = mysql_async::Conn::new(f.opts("repl", "replpW"))
        .await
        .expect_err("wrong password");
    assert_eq!(server_code(&e), Some(1045), "{e}");
    let e = mysql_async::Conn::new(f.opts("ghost", "x"))
        .await
        .expect_err("unknown user");
    assert_eq!(server_code(&e), Some(1045), "{e}");

    // repl: the binlog views and dumps, nothing else.
    let status: Vec<mysql_async::Row> = repl.query("SHOW MASTER STATUS").await.expect("status");
    assert_eq!(status.len(), 1);
    let grants: Vec<String> = repl.query("SHOW GRANTS").await.expect("grants");
    assert_eq!(
        grants,
        vec!["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `repl`@`%`"]
    );
    let denied = |r: Result<Vec<mysql_async::Row>, mysql_async::Error>| match r {
        Ok(rows) => panic!("expected an error, got {} rows", rows.len()),
        Err(e) => match e {
            mysql_async::Error::Server(s) => (s.code, s.message),
            other => panic!("not a server error: {other}"),
        },
    };
    let (code, msg) = denied(repl.query("SELECT * FROM shop.customers").await);
    assert_eq!(code, 1142);
    assert_eq!(
        msg,
        "SELECT command denied to user 'repl'@'127.0.0.1' for table 'customers'"
    );
    let (code, _) = denied(repl.query("SHOW CREATE TABLE shop.customers").await);
    assert_eq!(code, 1142);
    let (code, _) = denied(repl.query("SHOW COLUMNS FROM shop.customers").await);
    assert_eq!(code, 1142);
    let dbs: Vec<String> = repl.query("SHOW DATABASES").await.expect("databases");
    assert!(
        !dbs.iter().any(|d| d == "shop"),
        "no table privilege, no shop: {dbs:?}"
    );
    let (code, msg) = denied(repl.query("PURGE BINARY LOGS TO 'binlog.000001'").await);
    assert_eq!(code, 1227);
    assert_eq!(
        msg,
        "Access denied; you need (at least one of) the SUPER or BINLOG_ADMIN privilege(s) for this operation"
    );
    let (code, msg) = denied(repl.query("FLUSH TABLES WITH READ LOCK").await);
    assert_eq!((code, msg.contains("RELOAD")), (1227, true), "{msg}");
    let mut events = 0;
    {
        let dumper = mysql_async::Conn::new(f.opts("repl", "replpw"))
            .await
            .expect("repl again, from the fast-path cache");
        let mut stream = dumper
            .get_binlog_stream(
                BinlogStreamRequest::new(7001)
                    .with_filename(b"binlog.000001")
                    .with_pos(4u64),
            )
            .await
            .expect("dump with REPLICATION SLAVE");
        while let Some(ev) = stream.next().await {
            let ev = ev.expect("event");
            events += 1;
            if ev.header().event_type() == Ok(MyEventType::XID_EVENT) {
                break;
            }
        }
    }
    assert!(events >= 3, "the transaction streamed");

    // reader: table reads, no binlog.
    let mut reader = mysql_async::Conn::new(f.opts("reader", "readpw"))
        .await
        .expect("a native hash logs in (switched to mysql_native_password)");
    let names: Vec<String> = reader
        .query("SELECT name FROM shop.customers ORDER BY id")
        .await
        .expect("select");
    assert!(!names.is_empty());
    let (code, msg) = denied(reader.query("SHOW MASTER STATUS").await);
    assert_eq!(code, 1227);
    assert_eq!(
        msg,
        "Access denied; you need (at least one of) the SUPER, REPLICATION CLIENT privilege(s) for this operation"
    );
    let (code, _) = denied(reader.query("SHOW BINLOG EVENTS").await);
    assert_eq!(code, 1227);
    let e = match reader
        .get_binlog_stream(BinlogStreamRequest::new(7002))
        .await
    {
        Ok(mut s) => s.next().await.expect("an answer").expect_err("no dump"),
        Err(e) => e,
    };
    assert_eq!(server_code(&e), Some(1227), "{e}");

    // nobody: sees only itself; may not kill others; may not name a database at login.
    let mut nobody = mysql_async::Conn::new(f.opts("nobody", "x"))
        .await
        .expect("nobody");
    let ids: Vec<(u32, String)> = nobody
        .query("SELECT ID, USER FROM information_schema.PROCESSLIST")
        .await
        .expect("processlist");
    assert!(ids.iter().all(|(_, u)| u == "nobody"), "{ids:?}");
    let grants: Vec<String> = nobody
        .query("SHOW GRANTS FOR CURRENT_USER()")
        .await
        .expect("g");
    assert_eq!(grants, vec!["GRANT USAGE ON *.* TO `nobody`@`%`"]);
    let (code, _) = denied(nobody.query("SHOW GRANTS FOR 'repl'@'%'").await);
    assert_eq!(code, 1044);
    let repl_id = repl.id();
    let (code, msg) = denied(nobody.query(format!("KILL {repl_id}")).await);
    assert_eq!(
        (code, msg),
        (1095, format!("You are not owner of thread {repl_id}"))
    );
    let (code, _) = denied(nobody.query("USE shop").await);
    assert_eq!(code, 1044);
    nobody
        .query_drop("USE information_schema")
        .await
        .expect("USE information_schema");
    let e = mysql_async::Conn::new(
        mysql_async::OptsBuilder::from_opts(f.opts("nobody", "x")).db_name(Some("shop")),
    )
    .await
    .expect_err("no privilege on shop");
    assert_eq!(server_code(&e), Some(1044), "{e}");

    // admin: everything, others' grants and sessions included.
    let mut admin = mysql_async::Conn::new(f.opts("admin", "adminpw"))
        .await
        .expect("admin");
    let all: Vec<(u32, String)> = admin
        .query("SELECT ID, USER FROM information_schema.PROCESSLIST")
        .await
        .expect("processlist");
    assert!(all.iter().any(|(_, u)| u == "repl") && all.iter().any(|(_, u)| u == "nobody"));
    let grants: Vec<String> = admin
        .query("SHOW GRANTS FOR 'reader'@'%'")
        .await
        .expect("g");
    assert_eq!(grants, vec!["GRANT SELECT ON *.* TO `reader`@`%`"]);
    let (code, _) = denied(admin.query("SHOW GRANTS FOR ghost").await);
    assert_eq!(code, 1141);
    let shown: Vec<(String, String)> = admin
        .query("SHOW STATUS LIKE 'Caching_sha2_password_rsa_public_key'")
        .await
        .expect("status");
    assert_eq!(
        shown,
        vec![("Caching_sha2_password_rsa_public_key".to_owned(), pem)]
    );
    let plugin: Option<String> = admin
        .query_first("SELECT @@default_authentication_plugin")
        .await
        .expect("variable");
    assert_eq!(plugin.as_deref(), Some("caching_sha2_password"));
    admin
        .query_drop(format!("KILL {repl_id}"))
        .await
        .expect("admin kills repl");
    assert!(repl.ping().await.is_err(), "repl's session is gone");
    drop(raw);
    f.stop().await;
}

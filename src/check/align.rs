//! Alignment: both sides are read at the same binlog position P. The source reads TiDB at the
//! timestamp P lines up with; a target that replicates from the source is run to P by its own
//! replication (`START SLAVE SQL_THREAD UNTIL …`) and held there while it is read, then let go
//! on; any other target must say which position it reflects (`--at`).
//!
//! The pure half reads `SHOW REPLICA STATUS` rows (MySQL 8.0's and MariaDB's column names) and
//! orders positions; the async half below it talks to the servers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable as _;

use super::CheckError;

/// A binlog position of the source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    pub file: String,
    pub pos: u64,
}

impl Position {
    /// `file:pos` (the file name may hold dots, not colons).
    pub fn parse(text: &str) -> Option<Position> {
        let (file, pos) = text.rsplit_once(':')?;
        let pos = pos.trim().parse().ok()?;
        (!file.is_empty() && !file.contains(':')).then(|| Position {
            file: file.trim().to_owned(),
            pos,
        })
    }

    /// Order of two positions of one binlog: by the file's sequence number, then offset.
    pub fn key(&self) -> (u64, &str, u64) {
        let seq = self
            .file
            .rsplit_once('.')
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0);
        (seq, &self.file, self.pos)
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.pos)
    }
}

/// One row of `SHOW REPLICA STATUS`, by column name.
pub type StatusRow = HashMap<String, String>;

fn field<'a>(row: &'a StatusRow, names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|n| row.get(*n)).map(String::as_str)
}

/// What a replica's status says about its replication from the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaState {
    /// The applier's position in the source's binlog.
    pub executed: Position,
    pub sql_running: bool,
    pub io_running: bool,
    pub last_sql_error: String,
    /// MariaDB's multi-source connection name ('' for the default one).
    pub connection: String,
}

/// Who the source is, as a replica's status can name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceId {
    pub uuid: String,
    pub server_id: u64,
    /// The address the check reaches it at.
    pub host: String,
    pub port: u16,
}

/// The replica channel of `rows` that replicates from `source`: by `Source_UUID` where the
/// server shows it (MySQL), else by the source's server id (MariaDB shows no UUID), which a
/// replica learns only once it has connected; before that, by the host and port it is told
/// to connect to. `None` when no channel replicates from the source.
pub fn replica_of(rows: &[StatusRow], source: &SourceId) -> Option<ReplicaState> {
    let row = rows.iter().find(|r| {
        if let Some(uuid) = field(r, &["Source_UUID", "Master_UUID"]).filter(|u| !u.is_empty()) {
            return uuid.eq_ignore_ascii_case(&source.uuid);
        }
        let id = field(r, &["Source_Server_Id", "Master_Server_Id"])
            .and_then(|id| id.parse::<u64>().ok())
            .unwrap_or(0);
        if id != 0 {
            return id == source.server_id;
        }
        let host = field(r, &["Source_Host", "Master_Host"]).unwrap_or_default();
        let port = field(r, &["Source_Port", "Master_Port"]).and_then(|p| p.parse::<u16>().ok());
        port == Some(source.port) && same_host(host, &source.host)
    })?;
    Some(state(row))
}

fn same_host(a: &str, b: &str) -> bool {
    let local = |h: &str| matches!(h, "127.0.0.1" | "localhost" | "::1");
    a.eq_ignore_ascii_case(b) || (local(a) && local(b))
}

/// The replica state of one status row.
pub fn state(row: &StatusRow) -> ReplicaState {
    let text = |names: &[&str]| field(row, names).unwrap_or_default().to_owned();
    ReplicaState {
        executed: Position {
            file: text(&["Relay_Source_Log_File", "Relay_Master_Log_File"]),
            pos: text(&["Exec_Source_Log_Pos", "Exec_Master_Log_Pos"])
                .parse()
                .unwrap_or(0),
        },
        sql_running: text(&["Replica_SQL_Running", "Slave_SQL_Running"]) == "Yes",
        io_running: text(&["Replica_IO_Running", "Slave_IO_Running"]) == "Yes",
        last_sql_error: text(&["Last_SQL_Error"]),
        connection: text(&["Connection_name"]),
    }
}

/// What `--at` names: a position of the source's binlog, a TiDB timestamp (`ts:N`), or the
/// GTID set the target has applied (`uuid:1-N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    Position(Position),
    Ts(u64),
    Gtids(String),
}

impl At {
    pub fn parse(text: &str) -> Result<At, String> {
        if let Some(ts) = text.strip_prefix("ts:") {
            return ts
                .trim()
                .parse()
                .map(At::Ts)
                .map_err(|_| format!("--at {text:?}: ts: takes a TiDB timestamp (a TSO number)"));
        }
        let uuid_like = |f: &str| {
            let f = f.trim();
            f.len() == 36 && f.bytes().filter(|&b| b == b'-').count() == 4
        };
        if text.split(':').next().is_some_and(uuid_like) {
            return Ok(At::Gtids(text.trim().to_owned()));
        }
        Position::parse(text).map(At::Position).ok_or_else(|| {
            format!(
                "--at {text:?}: expected FILE:POS of the source's binlog (binlog.000003:1234), \
                 a GTID set (uuid:1-N) or ts:TSO"
            )
        })
    }
}

/// The point both sides are read at.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Point {
    pub position: Position,
    /// The TiDB timestamp the source reads at.
    pub ts: u64,
    /// The source's `Executed_Gtid_Set` at the position, when known.
    pub gtids: Option<String>,
    /// How the target got there: "replica held by START SLAVE UNTIL" or "--at".
    pub how: String,
}

// ---------------------------------------------------------------------------------------------
// The async half.

/// How long a replica may take to reach P before the check gives up.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(100);

/// The status rows of the target (empty for a server that replicates from nothing, or that
/// does not answer the statement).
pub async fn status_rows(conn: &mut mysql_async::Conn) -> Result<Vec<StatusRow>, CheckError> {
    let rows: Vec<mysql_async::Row> = match conn.query("SHOW REPLICA STATUS").await {
        Ok(rows) => rows,
        Err(mysql_async::Error::Server(_)) => match conn.query("SHOW SLAVE STATUS").await {
            Ok(rows) => rows,
            Err(mysql_async::Error::Server(_)) => return Ok(Vec::new()),
            Err(e) => return Err(CheckError::target("SHOW SLAVE STATUS", e)),
        },
        Err(e) => return Err(CheckError::target("SHOW REPLICA STATUS", e)),
    };
    Ok(rows
        .into_iter()
        .map(|row| {
            let cols = row.columns();
            cols.iter()
                .enumerate()
                .map(|(i, c)| {
                    let v = match row.as_ref(i) {
                        Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into(),
                        Some(mysql_async::Value::NULL) | None => String::new(),
                        Some(v) => v.as_sql(true).trim_matches('\'').to_owned(),
                    };
                    (c.name_str().into_owned(), v)
                })
                .collect()
        })
        .collect())
}

/// A replica stopped by the check, to be let go on by [`release`].
#[derive(Debug)]
pub struct Hold {
    /// The applier ran before the check: it is started again.
    pub restart: bool,
    pub connection: String,
}

fn channel(connection: &str) -> String {
    if connection.is_empty() {
        String::new()
    } else {
        format!(" {}", super::sql::text_literal(connection))
    }
}

/// Stops the replica's applier; returns its state once stopped.
pub async fn stop_applier(
    conn: &mut mysql_async::Conn,
    replica: &ReplicaState,
    source: &SourceId,
) -> Result<(Hold, ReplicaState), CheckError> {
    let hold = Hold {
        restart: replica.sql_running,
        connection: replica.connection.clone(),
    };
    let sql = format!("STOP SLAVE{} SQL_THREAD", channel(&replica.connection));
    conn.query_drop(&sql)
        .await
        .map_err(|e| CheckError::target(&sql, e))?;
    let rows = status_rows(conn).await?;
    let state = replica_of(&rows, source).ok_or_else(|| {
        CheckError::Setup("the target stopped replicating from the source during the check".into())
    })?;
    Ok((hold, state))
}

/// Runs the stopped applier to `p` and waits until it stands there.
pub async fn run_to(
    conn: &mut mysql_async::Conn,
    hold: &Hold,
    p: &Position,
    source: &SourceId,
) -> Result<(), CheckError> {
    let sql = format!(
        "START SLAVE{} SQL_THREAD UNTIL MASTER_LOG_FILE = {}, MASTER_LOG_POS = {}",
        channel(&hold.connection),
        super::sql::text_literal(&p.file),
        p.pos
    );
    conn.query_drop(&sql)
        .await
        .map_err(|e| CheckError::target(&sql, e))?;
    let deadline = Instant::now() + REACH_TIMEOUT;
    loop {
        let rows = status_rows(conn).await?;
        let s = replica_of(&rows, source).ok_or_else(|| {
            CheckError::Setup("the target stopped replicating from the source".into())
        })?;
        if !s.sql_running {
            if s.executed == *p {
                return Ok(());
            }
            return Err(CheckError::Setup(format!(
                "the target's applier stopped at {} instead of {p}{}",
                s.executed,
                if s.last_sql_error.is_empty() {
                    String::new()
                } else {
                    format!(": {}", s.last_sql_error)
                }
            )));
        }
        if Instant::now() > deadline {
            return Err(CheckError::Setup(format!(
                "the target did not reach {p} within {REACH_TIMEOUT:?} (it is at {}; its I/O \
                 thread is {})",
                s.executed,
                if s.io_running { "running" } else { "stopped" }
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Lets a held replica go on as it did before the check: its applier stopped (also ending a
/// run to the position still under way, with its UNTIL condition), then started again if it
/// ran before.
pub async fn release(conn: &mut mysql_async::Conn, hold: &Hold) -> Result<(), CheckError> {
    let mut statements = vec![format!(
        "STOP SLAVE{} SQL_THREAD",
        channel(&hold.connection)
    )];
    if hold.restart {
        statements.push(format!(
            "START SLAVE{} SQL_THREAD",
            channel(&hold.connection)
        ));
    }
    for sql in statements {
        conn.query_drop(&sql)
            .await
            .map_err(|e| CheckError::target(&sql, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pairs: &[(&str, &str)]) -> StatusRow {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_mysql_replica_is_found_by_uuid_and_a_mariadb_one_by_server_id() {
        let mysql = row(&[
            ("Source_UUID", "3E11FA47-71CA-11E1-9E33-C80AA9429562"),
            ("Source_Server_Id", "1"),
            ("Relay_Source_Log_File", "binlog.000003"),
            ("Exec_Source_Log_Pos", "1234"),
            ("Replica_SQL_Running", "Yes"),
            ("Replica_IO_Running", "Yes"),
        ]);
        let uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let id = |uuid: &str, server_id| SourceId {
            uuid: uuid.into(),
            server_id,
            host: "127.0.0.1".into(),
            port: 4000,
        };
        let s = replica_of(std::slice::from_ref(&mysql), &id(uuid, 1)).expect("found");
        assert_eq!(
            s.executed,
            Position::parse("binlog.000003:1234").expect("parses")
        );
        assert!(s.sql_running && s.io_running);
        // Another source with the same server id but another UUID is not ours.
        assert_eq!(
            replica_of(&[mysql], &id("00000000-0000-0000-0000-000000000000", 1)),
            None
        );
        let mariadb = row(&[
            ("Connection_name", ""),
            ("Master_Server_Id", "7"),
            ("Relay_Master_Log_File", "binlog.000010"),
            ("Exec_Master_Log_Pos", "4"),
            ("Slave_SQL_Running", "No"),
            ("Last_SQL_Error", "boom"),
        ]);
        let s = replica_of(std::slice::from_ref(&mariadb), &id(uuid, 7)).expect("found");
        assert!(!s.sql_running);
        assert_eq!(s.last_sql_error, "boom");
        assert_eq!(
            replica_of(std::slice::from_ref(&mariadb), &id(uuid, 8)),
            None
        );
        // Not connected yet: no server id; the address it connects to names the source.
        let fresh = row(&[
            ("Master_Server_Id", "0"),
            ("Master_Host", "localhost"),
            ("Master_Port", "4000"),
        ]);
        assert!(replica_of(std::slice::from_ref(&fresh), &id(uuid, 7)).is_some());
        let mut other = id(uuid, 7);
        other.port = 4001;
        assert_eq!(replica_of(&[fresh], &other), None);
    }

    #[test]
    fn positions_order_by_file_sequence_then_offset() {
        let p = |s| Position::parse(s).expect("parses");
        assert!(p("binlog.000009:900").key() < p("binlog.000010:4").key());
        assert!(p("binlog.000010:4").key() < p("binlog.000010:5").key());
        assert_eq!(Position::parse("nocolon"), None);
        assert_eq!(Position::parse("a:b:1"), None);
        assert_eq!(At::parse("ts:42"), Ok(At::Ts(42)));
        assert!(At::parse("ts:x").is_err());
        assert_eq!(
            At::parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"),
            Ok(At::Gtids("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5".into()))
        );
        assert!(At::parse("binlog:x")
            .expect_err("refused")
            .contains("FILE:POS"));
        assert_eq!(
            At::parse("binlog.000002:77"),
            Ok(At::Position(p("binlog.000002:77")))
        );
    }
}

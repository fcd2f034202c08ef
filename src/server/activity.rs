//! What each connection is doing, as `SHOW PROCESSLIST`, `information_schema.PROCESSLIST`
//! and the status API show it: who, from where, which command for how long, in which state,
//! and for a dump session how far it has sent the binlog.
//!
//! A connection updates its own [`Activity`] when a command starts and ends (one short lock
//! each), and a dump session after each flush; readers take a [`ProcessRow`] copy.

use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tibinlog_protocol::wire::command::Command;

/// MySQL's state of a dump session that has sent everything (8.0.26+ wording).
pub const STATE_CAUGHT_UP: &str = "Source has sent all binlog to replica; waiting for more updates";
/// MySQL's state of a dump session sending events.
pub const STATE_SENDING: &str = "Sending binlog event to replica";

/// Where a dump session is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpProgress {
    /// The replica's server id (0 for tools such as `mysqlbinlog`).
    pub server_id: u32,
    /// The GTID protocol (`COM_BINLOG_DUMP_GTID`, or a MariaDB GTID start).
    pub gtid: bool,
    /// The file being sent and the end of the last event sent in it.
    pub file: String,
    pub pos: u64,
    /// Header timestamp of the last event sent (Unix seconds; 0 before the first).
    pub event_secs: u32,
    /// Everything the binlog holds has been sent.
    pub caught_up: bool,
    /// Bytes sent by this session.
    pub sent_bytes: u64,
}

/// One row of the process list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    pub id: u32,
    pub user: String,
    pub host: String,
    pub db: Option<String>,
    pub command: &'static str,
    /// Seconds in the current command (or idle).
    pub time: u64,
    pub state: String,
    pub info: Option<String>,
    pub dump: Option<DumpProgress>,
    /// Unix seconds of the connection's start.
    pub connected_at: u64,
}

#[derive(Debug)]
struct State {
    user: String,
    db: Option<String>,
    command: &'static str,
    since: Instant,
    info: Option<String>,
    dump: Option<DumpProgress>,
    /// The session's own status counters (`SHOW [SESSION] STATUS`).
    counters: SessionCounters,
}

/// What `SHOW SESSION STATUS` counts for one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Bytes written to and read from the client, as of the current command's start.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// COM_QUERY and COM_STMT_EXECUTE commands (`Questions`).
    pub questions: u64,
    /// Statements by MySQL's `Com_` name.
    pub statements: std::collections::BTreeMap<&'static str, u64>,
}

/// The live record of one connection.
#[derive(Debug)]
pub struct Activity {
    host: String,
    connected_at: u64,
    state: Mutex<State>,
}

/// The process-list name of a command (MySQL's `Command` column).
pub fn command_name(cmd: &Command) -> &'static str {
    match cmd {
        Command::Quit => "Quit",
        Command::InitDb(_) => "Init DB",
        Command::Query(_) => "Query",
        Command::Ping => "Ping",
        Command::FieldList { .. } => "Field List",
        Command::RegisterSlave(_) => "Register Replica",
        Command::BinlogDump(_) => "Binlog Dump",
        Command::BinlogDumpGtid(_) => "Binlog Dump GTID",
        Command::SetOption(_) => "Set option",
        Command::ResetConnection => "Reset Connection",
        Command::StmtPrepare(_) => "Prepare",
        Command::StmtExecute(_) => "Execute",
        Command::StmtFetch { .. } => "Fetch",
        Command::StmtClose(_) => "Close stmt",
        Command::StmtReset(_) => "Reset stmt",
        Command::StmtSendLongData { .. } => "Long Data",
        Command::Statistics => "Statistics",
        Command::Unknown(_) => "Error",
    }
}

/// MySQL's `Com_*` name (without the prefix) of a statement, from its first words;
/// `other` for what has no counter of its own.
pub fn com_name(sql: &str) -> &'static str {
    let mut words = Vec::with_capacity(4);
    let mut rest = sql;
    while words.len() < 4 {
        rest = rest.trim_start().trim_start_matches('(');
        if let Some(r) = rest.strip_prefix("/*") {
            // A comment (executable comments are read as plain ones: only their kind matters).
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
            continue;
        }
        if rest.starts_with("--") || rest.starts_with('#') {
            rest = rest.find('\n').map_or("", |i| &rest[i + 1..]);
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        words.push(rest[..end].to_ascii_uppercase());
        rest = &rest[end..];
    }
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["SELECT", ..] | ["WITH", ..] => "select",
        ["SET", "NAMES", ..] | ["SET", "CHARACTER", ..] | ["SET", "CHARSET", ..] => "set_option",
        ["SET", "PASSWORD", ..] => "set_password",
        ["SET", ..] => "set_option",
        ["SHOW", "FULL", "PROCESSLIST", ..] | ["SHOW", "PROCESSLIST", ..] => "show_processlist",
        ["SHOW", "BINARY", "LOGS", ..] | ["SHOW", "MASTER", "LOGS", ..] => "show_binlogs",
        ["SHOW", "MASTER", "STATUS", ..] | ["SHOW", "BINARY", "LOG", "STATUS"] => {
            "show_master_status"
        }
        ["SHOW", "BINLOG", "EVENTS", ..] => "show_binlog_events",
        ["SHOW", "SLAVE", "HOSTS", ..] | ["SHOW", "REPLICAS", ..] => "show_replicas",
        ["SHOW", "GLOBAL" | "SESSION", "VARIABLES", ..] | ["SHOW", "VARIABLES", ..] => {
            "show_variables"
        }
        ["SHOW", "GLOBAL" | "SESSION", "STATUS", ..] | ["SHOW", "STATUS", ..] => "show_status",
        ["SHOW", "GRANTS", ..] => "show_grants",
        ["SHOW", "DATABASES" | "SCHEMAS", ..] => "show_databases",
        ["SHOW", "FULL", "TABLES", ..] | ["SHOW", "TABLES", ..] => "show_tables",
        ["SHOW", "CREATE", "TABLE", ..] => "show_create_table",
        ["SHOW", "FULL", "COLUMNS" | "FIELDS", ..] | ["SHOW", "COLUMNS" | "FIELDS", ..] => {
            "show_fields"
        }
        ["SHOW", ..] => "show_other",
        ["DESC" | "DESCRIBE" | "EXPLAIN", ..] => "show_fields",
        ["USE", ..] => "change_db",
        ["KILL", ..] => "kill",
        ["FLUSH", ..] => "flush",
        ["LOCK", ..] => "lock_tables",
        ["UNLOCK", ..] => "unlock_tables",
        ["BEGIN", ..] | ["START", "TRANSACTION", ..] => "begin",
        ["COMMIT", ..] => "commit",
        ["ROLLBACK", ..] => "rollback",
        ["PURGE", ..] => "purge",
        ["PREPARE", ..] => "prepare_sql",
        ["EXECUTE", ..] => "execute_sql",
        _ => "other",
    }
}

/// The process list shows at most this much of a statement (MySQL shows 100 characters
/// without FULL; we keep what FULL would show, up to this bound).
const INFO_MAX: usize = 65_535;

impl Activity {
    /// A connection from `host` (`ip:port`) that has not logged in yet.
    pub fn new(host: String) -> Self {
        let connected_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            host,
            connected_at,
            state: Mutex::new(State {
                user: "unauthenticated user".into(),
                db: None,
                command: "Connect",
                since: Instant::now(),
                info: None,
                dump: None,
                counters: SessionCounters::default(),
            }),
        }
    }

    /// A command starts: the connection's byte totals so far, and the command (and its
    /// statement's `Com_` name) counted.
    pub fn count(&self, bytes: (u64, u64), command: &str, statement: Option<&'static str>) {
        self.with(|s| {
            let c = &mut s.counters;
            (c.bytes_sent, c.bytes_received) = bytes;
            if command == "COM_QUERY" || command == "COM_STMT_EXECUTE" {
                c.questions += 1;
            }
            if let Some(name) = statement {
                *c.statements.entry(name).or_default() += 1;
            }
        });
    }

    /// This session's status counters.
    pub fn counters(&self) -> SessionCounters {
        self.with(|s| s.counters.clone())
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// The client logged in as `user`, in schema `db`.
    pub fn logged_in(&self, user: &str, db: Option<&str>) {
        self.with(|s| {
            s.user = user.to_owned();
            s.db = db.map(str::to_owned);
            s.command = "Sleep";
            s.since = Instant::now();
        });
    }

    /// A command starts; `info` is its statement text, if it has one.
    pub fn begin(&self, command: &'static str, info: Option<&str>) {
        self.with(|s| {
            s.command = command;
            s.since = Instant::now();
            s.info = info.map(|t| {
                let mut end = t.len().min(INFO_MAX);
                while !t.is_char_boundary(end) {
                    end -= 1;
                }
                t[..end].to_owned()
            });
        });
    }

    /// The command ended; the connection waits for the next one in schema `db`.
    pub fn idle(&self, db: Option<&str>) {
        self.with(|s| {
            s.command = "Sleep";
            s.since = Instant::now();
            s.info = None;
            if s.db.as_deref() != db {
                s.db = db.map(str::to_owned);
            }
        });
    }

    /// A dump session starts for replica `server_id`.
    pub fn start_dump(&self, server_id: u32, gtid: bool) {
        self.with(|s| {
            s.info = None;
            s.dump = Some(DumpProgress {
                server_id,
                gtid,
                ..DumpProgress::default()
            });
        });
    }

    /// A dump session sent up to `pos` of `file`.
    pub fn dump_sent(&self, file: &str, pos: u64, event_secs: u32, caught_up: bool, bytes: u64) {
        self.with(|s| {
            if let Some(d) = &mut s.dump {
                if d.file != file {
                    file.clone_into(&mut d.file);
                }
                d.pos = pos;
                if event_secs != 0 {
                    d.event_secs = event_secs;
                }
                d.caught_up = caught_up;
                d.sent_bytes = bytes;
            }
        });
    }

    /// A copy for readers.
    pub fn row(&self, id: u32) -> ProcessRow {
        self.with(|s| ProcessRow {
            id,
            user: s.user.clone(),
            host: self.host.clone(),
            db: s.db.clone(),
            command: s.command,
            time: s.since.elapsed().as_secs(),
            state: match &s.dump {
                Some(d) if d.caught_up => STATE_CAUGHT_UP.into(),
                Some(_) => STATE_SENDING.into(),
                None if s.command == "Query" => "executing".into(),
                None if s.command == "Connect" => "login".into(),
                None => String::new(),
            },
            info: s.info.clone(),
            dump: s.dump.clone(),
            connected_at: self.connected_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_goes_from_login_to_query_to_dump() {
        let a = Activity::new("127.0.0.1:5000".into());
        let r = a.row(7);
        assert_eq!(
            (r.user.as_str(), r.command, r.state.as_str()),
            ("unauthenticated user", "Connect", "login")
        );
        a.logged_in("repl", Some("test"));
        a.begin("Query", Some("SELECT 1"));
        let r = a.row(7);
        assert_eq!((r.command, r.info.as_deref()), ("Query", Some("SELECT 1")));
        assert_eq!(r.db.as_deref(), Some("test"));
        a.idle(Some("test"));
        assert_eq!(a.row(7).command, "Sleep");
        assert_eq!(a.row(7).info, None);
        a.begin("Binlog Dump GTID", None);
        a.start_dump(42, true);
        assert_eq!(a.row(7).state, STATE_SENDING);
        a.dump_sent("binlog.000002", 1234, 1_700_000_000, true, 999);
        let r = a.row(7);
        assert_eq!(r.state, STATE_CAUGHT_UP);
        let d = r.dump.expect("dump");
        assert_eq!(
            (d.server_id, d.file.as_str(), d.pos, d.sent_bytes),
            (42, "binlog.000002", 1234, 999)
        );
    }

    #[test]
    fn statements_get_mysqls_counter_names() {
        for (sql, name) in [
            ("select 1", "select"),
            ("/* mysql-connector-j */ SELECT @@version", "select"),
            ("SET NAMES utf8mb4", "set_option"),
            ("set @master_binlog_checksum = 'CRC32'", "set_option"),
            ("SHOW BINARY LOGS", "show_binlogs"),
            ("show master status", "show_master_status"),
            ("SHOW BINARY LOG STATUS", "show_master_status"),
            ("SHOW FULL PROCESSLIST", "show_processlist"),
            ("SHOW GLOBAL VARIABLES LIKE 'binlog%'", "show_variables"),
            ("SHOW STATUS", "show_status"),
            ("-- hi\nKILL 3", "kill"),
            ("FLUSH TABLES WITH READ LOCK", "flush"),
            ("START TRANSACTION WITH CONSISTENT SNAPSHOT", "begin"),
            ("", "other"),
            ("(select 1) union (select 2)", "select"),
            ("?", "other"),
        ] {
            assert_eq!(com_name(sql), name, "{sql}");
        }
    }

    #[test]
    fn a_long_statement_is_cut_on_a_character_boundary() {
        let a = Activity::new("h:1".into());
        let text = "é".repeat(INFO_MAX);
        a.begin("Query", Some(&text));
        let info = a.row(1).info.expect("info");
        assert!(info.len() <= INFO_MAX && info.chars().all(|c| c == 'é'));
    }
}

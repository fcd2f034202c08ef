//! What the server knows of one connection: who it is ([`ConnInfo`], fixed at the handshake)
//! and the session state its statements change ([`Session`]: variables, database, read lock,
//! transaction).
//!
//! Every layer above the transport may read these; this module imports none of them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tibinlog_protocol::wire::CapabilityFlags;
use tokio_util::sync::CancellationToken;

use super::vars::Scope;

/// Per-connection facts the command handlers need.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub id: u32,
    pub user: String,
    pub host: String,
    /// The account's privileges ([`super::users`]).
    pub privileges: super::users::Privileges,
    /// Our capabilities ∩ the client's.
    pub capabilities: CapabilityFlags,
    /// The schema named in the handshake (CLIENT_CONNECT_WITH_DB).
    pub database: Option<String>,
    /// The client uses one of MariaDB's client libraries ([`super::conn::is_mariadb_client`]).
    pub mariadb_client: bool,
    /// Cancelled when the connection ends (KILL, shutdown): running statements stop.
    pub cancel: CancellationToken,
    /// Set by `KILL QUERY`; cleared when the next command starts.
    pub interrupt: Arc<std::sync::atomic::AtomicBool>,
    /// What TLS negotiated; `None` on a plain connection.
    pub tls: Option<super::transport::TlsSession>,
    /// What the connection is doing, for the process list.
    pub activity: Arc<super::activity::Activity>,
}

pub use super::transport::NET_WRITE_TIMEOUT;

/// One client's session state.
#[derive(Debug, Default, Clone)]
pub struct Session {
    /// Session variables the client changed (`SET x = …`), lower-case names.
    pub overrides: HashMap<String, Option<String>>,
    /// User variables (`SET @x = …`), lower-case names without `@`; `None` is SQL NULL.
    pub user_vars: HashMap<String, Option<String>>,
    /// `USE db` / COM_INIT_DB.
    pub database: Option<String>,
    /// Held from `FLUSH TABLES WITH READ LOCK` or `LOCK TABLES` to `UNLOCK TABLES`.
    pub read_lock: Option<ReadLock>,
    /// The open transaction, if any.
    pub transaction: Option<Transaction>,
    /// The conditions the last statement left (`SHOW WARNINGS`, `SHOW ERRORS`).
    pub diagnostics: Vec<Diagnostic>,
    /// What TLS negotiated (`Ssl_version`, `Ssl_cipher`); `None` on a plain connection.
    pub tls: Option<super::transport::TlsSession>,
}

/// One condition of `SHOW WARNINGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `Warning` or `Error`.
    pub level: &'static str,
    pub code: u16,
    pub message: String,
}

/// What a session sees while it holds a read lock. On MySQL the lock stops commits, so `SHOW
/// MASTER STATUS` and the table definitions read under it agree; the binlog here keeps growing
/// (the cluster does not stop), so the session keeps the end it locked at and the catalog of
/// that end instead.
#[derive(Clone)]
pub struct ReadLock {
    pub end: super::source::BinlogPosition,
    pub gtid_executed: tibinlog_protocol::binlog::GtidSet,
    pub schema: std::sync::Arc<dyn super::source::SchemaProvider>,
    /// The TiDB timestamp `end` lines up with, when known: reads under the lock use it.
    pub ts: Option<u64>,
}

/// A transaction's consistent snapshot: every read of the transaction sees the tables as of
/// `ts` with the catalog of the binlog position `end` (see [`super::source::SnapshotPoint`]).
#[derive(Clone)]
pub struct Snapshot {
    pub ts: Option<u64>,
    pub end: super::source::BinlogPosition,
    pub schema: std::sync::Arc<dyn super::source::SchemaProvider>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("ts", &self.ts)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

/// An open transaction (`BEGIN`, `START TRANSACTION`, or statements with `autocommit=0`).
#[derive(Debug, Clone, Default)]
pub struct Transaction {
    /// Taken at `START TRANSACTION WITH CONSISTENT SNAPSHOT`, else at the first read.
    pub snapshot: Option<Snapshot>,
    /// `SAVEPOINT` names, oldest first (lower case). Reads change nothing, so rolling back to
    /// one only forgets the later ones: the snapshot stays (mysqldump rolls back to a
    /// savepoint after every table of a `--single-transaction` dump).
    pub savepoints: Vec<String>,
}

impl std::fmt::Debug for ReadLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadLock")
            .field("end", &self.end)
            .field("gtid_executed", &self.gtid_executed.to_string())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// The value of `@@name` in `scope`, or `None` if the variable does not exist
    /// (`Some(None)` is a variable whose value is NULL).
    pub fn system_var(
        &self,
        globals: &BTreeMap<String, String>,
        name: &str,
        scope: Scope,
    ) -> Option<Option<String>> {
        let name = name.to_ascii_lowercase();
        if scope == Scope::Session {
            if let Some(v) = self.overrides.get(&name) {
                return Some(v.clone());
            }
        }
        globals
            .get(&name)
            .map(|v| Some(v.clone()))
            .or_else(|| super::vars::mysql_default(&name, scope).map(Some))
    }

    /// `@name`; unset user variables are NULL.
    pub fn user_var(&self, name: &str) -> Option<String> {
        self.user_vars
            .get(&name.to_ascii_lowercase())
            .cloned()
            .flatten()
    }

    /// The checksum the client announced with `@master_binlog_checksum` /
    /// `@source_binlog_checksum`: `None` if it never set either.
    pub fn announced_checksum(&self) -> Option<String> {
        ["source_binlog_checksum", "master_binlog_checksum"]
            .iter()
            .find_map(|k| self.user_vars.get(*k).cloned())
            .map(|v| v.unwrap_or_default())
    }

    /// `@master_heartbeat_period` / `@source_heartbeat_period` in nanoseconds (0 = none).
    pub fn heartbeat_period_ns(&self) -> Option<u64> {
        ["source_heartbeat_period", "master_heartbeat_period"]
            .iter()
            .find_map(|k| self.user_vars.get(*k).cloned().flatten())
            .and_then(|v| parse_number(&v))
    }

    /// `@@net_write_timeout` as the session set it, else the server's (`global`): how long a
    /// write waits for a client that reads nothing.
    pub fn net_write_timeout(&self, global: std::time::Duration) -> std::time::Duration {
        self.seconds("net_write_timeout", global)
    }

    /// `@@wait_timeout` as the session set it, else the server's (`global`): how long the
    /// session may idle between commands.
    pub fn wait_timeout(&self, global: std::time::Duration) -> std::time::Duration {
        self.seconds("wait_timeout", global)
    }

    /// A positive number of seconds the session set for `name`, else `global`.
    fn seconds(&self, name: &str, global: std::time::Duration) -> std::time::Duration {
        self.overrides
            .get(name)
            .cloned()
            .flatten()
            .and_then(|v| parse_number(&v))
            .filter(|s| *s > 0)
            .map_or(global, std::time::Duration::from_secs)
    }

    /// `@mariadb_slave_capability`, set by MariaDB replicas and tools.
    pub fn mariadb_capability(&self) -> Option<u64> {
        self.user_var("mariadb_slave_capability")
            .and_then(|v| parse_number(&v))
    }
}

/// Parses an integer that may have been stored as a decimal text (`30000000000.000`).
fn parse_number(v: &str) -> Option<u64> {
    let v = v.trim();
    let int = v.split('.').next().unwrap_or(v);
    int.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_period_accepts_decimal_text() {
        let mut s = Session::default();
        s.user_vars.insert(
            "master_heartbeat_period".into(),
            Some("30000000000.000".into()),
        );
        assert_eq!(s.heartbeat_period_ns(), Some(30_000_000_000));
        assert_eq!(s.announced_checksum(), None);
        s.user_vars
            .insert("master_binlog_checksum".into(), Some("CRC32".into()));
        assert_eq!(s.announced_checksum().as_deref(), Some("CRC32"));
    }

    #[test]
    fn net_write_timeout_follows_the_session_setting() {
        let mut s = Session::default();
        assert_eq!(s.net_write_timeout(NET_WRITE_TIMEOUT), NET_WRITE_TIMEOUT);
        s.overrides
            .insert("net_write_timeout".into(), Some("600".into()));
        assert_eq!(
            s.net_write_timeout(NET_WRITE_TIMEOUT),
            std::time::Duration::from_secs(600)
        );
        // Nonsense and zero keep the default.
        for v in ["soon", "0"] {
            s.overrides
                .insert("net_write_timeout".into(), Some(v.into()));
            assert_eq!(s.net_write_timeout(NET_WRITE_TIMEOUT), NET_WRITE_TIMEOUT);
        }
    }
}

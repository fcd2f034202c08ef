//! Configuration of `tibinlog server`: flags > environment (`TIBINLOG_…`) > TOML file
//! (`--config`) > defaults. Every setting is one [`Knob`]: its section and key in the file, its
//! flag and its environment variable all come from the table [`KNOBS`], which also drives
//! `--print-config` and docs/configuration.md's settings table (a test keeps the two in step).
//!
//! ```toml
//! [server]
//! listen = "0.0.0.0:3306"
//! data_dir = "/var/lib/tibinlog"
//! server_id = 1
//!
//! [capture]
//! pd = ["10.0.0.1:2379", "10.0.0.2:2379"]
//!
//! [binlog]
//! max_binlog_size = 1073741824
//! binlog_expire_logs_seconds = 604800
//!
//! [security]
//! user = "admin"
//! password_hash = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
//!
//! [[users]]
//! name = "repl"
//! password_hash = "$A$005$…"          # caching_sha2_password, as MySQL stores it
//! privileges = ["REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT"]
//!
//! [filter]
//! rules = ["shop.*", "!shop.tmp_*"]
//! ```
//!
//! Keys a section does not have are refused with the key named, so a misspelt setting never
//! silently keeps its default.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::AuthMethod;

use super::AppConfig;
use crate::model::Ts;
use crate::mounter::TableFilter;
use crate::server::TlsFiles;

/// Default MySQL listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3306";
/// Prefix of the environment overrides.
pub const ENV_PREFIX: &str = "TIBINLOG_";

/// How a flag's or an environment variable's text becomes a TOML value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Integer,
    /// Comma-separated in a flag or variable (a flag may also repeat), an array in the file.
    List,
    /// `true`/`false` (also `1`/`0`, `on`/`off`); a flag alone means true.
    Bool,
}

/// One setting.
#[derive(Debug)]
pub struct Knob {
    pub section: &'static str,
    pub key: &'static str,
    /// `--flag`; the environment variable is `TIBINLOG_` and the flag in upper case.
    pub flag: &'static str,
    pub kind: Kind,
    pub value_name: &'static str,
    pub help: &'static str,
}

impl Knob {
    /// The environment variable that sets it.
    pub fn env(&self) -> String {
        format!("{ENV_PREFIX}{}", self.flag.to_uppercase().replace('-', "_"))
    }

    /// `section.key`.
    pub fn path(&self) -> String {
        format!("{}.{}", self.section, self.key)
    }
}

const fn knob(
    section: &'static str,
    key: &'static str,
    flag: &'static str,
    kind: Kind,
    value_name: &'static str,
    help: &'static str,
) -> Knob {
    Knob {
        section,
        key,
        flag,
        kind,
        value_name,
        help,
    }
}

use Kind::{Bool, Integer, List, Text};

/// Every setting, in the order `--print-config` shows them.
pub const KNOBS: &[Knob] = &[
    knob("server", "listen", "listen", Text, "HOST:PORT",
        "MySQL protocol listen address [default: 127.0.0.1:3306]"),
    knob("server", "mariadb_listen", "mariadb-listen", Text, "HOST:PORT",
        "a second listen address that greets as MariaDB 10.11, for MariaDB replicas replicating by GTID [default: none]"),
    knob("server", "data_dir", "data-dir", Text, "DIR",
        "directory of the binlog files and the sorter cache (required)"),
    knob("server", "server_id", "server-id", Integer, "N",
        "@@server_id, in every event header; must differ from every replica's [default: 1]"),
    knob("server", "server_uuid", "server-uuid", Text, "UUID",
        "@@server_uuid, the GTID source [default: derived from the TiDB cluster id]"),
    knob("server", "instance_id", "instance-id", Text, "NAME",
        "this instance's name: in its PD service GC safe point (tibinlog-<server_uuid>-<instance_id>) and among the instances of an HA group; letters, digits, '.', '_', '-' [default: generated once into <data_dir>/instance-id]"),
    knob("server", "default_heartbeat_seconds", "default-heartbeat-seconds", Integer, "SECONDS",
        "heartbeat period of dump sessions whose client did not set one; 0 = none [default: 30]"),
    knob("server", "net_write_timeout_seconds", "net-write-timeout-seconds", Integer, "SECONDS",
        "@@net_write_timeout: a client that reads nothing for this long is dropped [default: 60]"),
    knob("server", "max_connections", "max-connections", Integer, "N",
        "@@max_connections: logged-in sessions at once; one more gets error 1040 (connections still logging in do not count) [default: 151]"),
    knob("server", "connect_timeout_seconds", "connect-timeout-seconds", Integer, "SECONDS",
        "@@connect_timeout: a connection that has not logged in by then is closed [default: 10]"),
    knob("server", "wait_timeout_seconds", "wait-timeout-seconds", Integer, "SECONDS",
        "@@wait_timeout: a session idle between commands this long is closed with error 4031 (dump sessions are never idle) [default: 28800]"),
    knob("server", "progress_interval_seconds", "progress-interval-seconds", Integer, "SECONDS",
        "how often the progress line is logged [default: 10]"),
    knob("server", "status_listen", "status-listen", Text, "HOST:PORT",
        "HTTP listen address of Prometheus /metrics, the /api/v1 JSON status and the status page; \"off\" = none [default: 127.0.0.1:8300]"),
    knob("capture", "pd", "pd", List, "HOST:PORT,…",
        "PD endpoints (required)"),
    knob("capture", "start_ts", "start-ts", Integer, "TSO",
        "where capture starts when the data directory has no checkpoint [default: PD's current TSO]"),
    knob("capture", "gc_ttl_seconds", "gc-ttl-seconds", Integer, "SECONDS",
        "TTL of the PD service GC safe point that holds the history capture still needs; the history is kept this long after tibinlog stops [default: 86400]"),
    knob("capture", "incremental_scan_limit", "incremental-scan-limit", Integer, "N",
        "regions scanned at once per TiKV store while their initial scan runs [default: 40]"),
    knob("capture", "pending_txn_bytes", "pending-txn-bytes", Integer, "BYTES",
        "memory one region may hold for prewrites waiting for their commit and commits cached during its scan; its prewrites beyond it spill to disk [default: 536870912]"),
    knob("capture", "prewrite_memory_bytes", "prewrite-memory-bytes", Integer, "BYTES",
        "memory for prewrites waiting for their commit, all regions together; beyond it whole transactions, the largest first, spill to the sorter's RocksDB [default: 134217728]"),
    knob("capture", "exit_on_capture_stop", "exit-on-capture-stop", Bool, "BOOL",
        "when capture stops for good (an error retrying cannot fix), exit non-zero instead of going on serving the binlog written so far [default: false]"),
    knob("sorter", "memory_quota_bytes", "sorter-memory-quota-bytes", Integer, "BYTES",
        "rows the sorter accepts before capture waits (back-pressure) [default: 67108864]"),
    knob("sorter", "block_cache_bytes", "sorter-block-cache-bytes", Integer, "BYTES",
        "the sorter's RocksDB block cache [default: 67108864]"),
    knob("sorter", "max_chunk_bytes", "sorter-max-chunk-bytes", Integer, "BYTES",
        "a transaction is handed to the binlog writer in pieces of about this size [default: 8388608]"),
    knob("binlog", "max_binlog_size", "max-binlog-size", Integer, "BYTES",
        "@@max_binlog_size: a file rotates once it passes this size (4096 bytes to 4 GiB) [default: 1073741824]"),
    knob("binlog", "binlog_expire_logs_seconds", "binlog-expire-logs-seconds", Integer, "SECONDS",
        "@@binlog_expire_logs_seconds: files older than this are purged, never one a dump session reads; 0 = never [default: 0]"),
    knob("binlog", "binlog_row_metadata", "binlog-row-metadata", Text, "FULL|MINIMAL|NONE",
        "@@binlog_row_metadata: the optional metadata of the TABLE_MAP events written from now on; MINIMAL and NONE (MySQL 5.7's, none at all) are for binlog readers that fail on FULL's, such as Maxwell 1.22's [default: FULL]"),
    knob("security", "user", "user", Text, "NAME",
        "the administrator account (every privilege); more accounts with their own privileges are [[users]] tables [default: root]"),
    knob("security", "password", "password", Text, "PASSWORD",
        "its password in clear; prefer password_hash [default: empty]"),
    knob("security", "password_hash", "password-hash", Text, "HASH",
        "its password as MySQL stores it: *<40 hex> (mysql_native_password) or $A$005$… / 0x… (caching_sha2_password); `tibinlog hash-password` makes one [default: none]"),
    knob("security", "default_authentication_plugin", "default-authentication-plugin", Text, "PLUGIN",
        "the plugin the greeting announces: caching_sha2_password or mysql_native_password (the MariaDB listener always announces the latter) [default: caching_sha2_password]"),
    knob("security", "rsa_private_key", "rsa-private-key", Text, "PEM",
        "RSA private key (PKCS#1 or #8) for caching_sha2_password full authentication without TLS; generated into the data directory when absent [default: <data_dir>/private_key.pem]"),
    knob("security", "tls_cert", "tls-cert", Text, "PEM",
        "TLS certificate chain; TLS is offered when it and tls_key are set"),
    knob("security", "tls_key", "tls-key", Text, "PEM",
        "TLS private key"),
    knob("security", "tls_ca", "tls-ca", Text, "PEM",
        "@@ssl_ca: CA of MySQL client certificates; clients are asked for one and one they present must verify [default: none]"),
    knob("security", "require_secure_transport", "require-secure-transport", Bool, "BOOL",
        "@@require_secure_transport: refuse MySQL connections without TLS (ERROR 3159) [default: false]"),
    knob("security", "cert_allowed_cn", "cert-allowed-cn", List, "CN,…",
        "MySQL clients must present a certificate (signed by tls_ca) whose common name is listed [default: no such check]"),
    knob("security", "ca_path", "ca", Text, "PEM",
        "CA of the TiDB cluster: PD and TiKV are reached over mutual TLS with cert_path and key_path [default: plain]"),
    knob("security", "cert_path", "cert", Text, "PEM",
        "client certificate presented to PD and TiKV"),
    knob("security", "key_path", "key", Text, "PEM",
        "its private key"),
    knob("filter", "rules", "filter", List, "RULE,…",
        "table filter rules (TiDB table-filter syntax); fixed for the life of a data directory [default: every table]"),
    knob("ha", "enabled", "ha", Bool, "BOOL",
        "join an HA group on etcd: capture only while this instance owns it, stand by otherwise [default: false]"),
    knob("ha", "etcd", "etcd", List, "URL,…",
        "etcd endpoints of the group [default: the PD endpoints, whose client URLs serve etcd]"),
    knob("ha", "prefix", "ha-prefix", Text, "KEY",
        "etcd key prefix of the group [default: /tibinlog/<server_uuid>]"),
    knob("ha", "lease_ttl_seconds", "ha-lease-ttl-seconds", Integer, "SECONDS",
        "TTL of the owner's lease: a dead owner is replaced after at most this long [default: 10]"),
    knob("ha", "advertise", "ha-advertise", Text, "HOST:PORT",
        "the MySQL address the group's other members reach this one at [default: the listen address]"),
    knob("ha", "user", "ha-user", Text, "NAME",
        "the account a standby follows the owner's binlog with (REPLICATION SLAVE on every member) [default: the [security] user]"),
    knob("ha", "password", "ha-password", Text, "PASSWORD",
        "its password in clear [default: the [security] password]"),
];

/// The whole configuration, typed, as the file spells it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSection,
    pub capture: CaptureSection,
    pub sorter: SorterSection,
    pub binlog: BinlogSection,
    pub security: SecuritySection,
    pub filter: FilterSection,
    pub ha: HaSection,
    /// More accounts (`[[users]]`), each with its password hash and privileges.
    pub users: Vec<UserSection>,
}

/// One `[[users]]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UserSection {
    pub name: String,
    /// As MySQL stores it (see the `password_hash` knob).
    pub password_hash: Option<String>,
    /// In clear (discouraged).
    pub password: Option<String>,
    /// Privilege names (`REPLICATION SLAVE`, `SELECT`, `ALL`, …).
    #[serde(deserialize_with = "one_or_many")]
    pub privileges: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    pub listen: String,
    pub mariadb_listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub server_id: u32,
    pub server_uuid: Option<String>,
    pub instance_id: Option<String>,
    pub default_heartbeat_seconds: u64,
    pub net_write_timeout_seconds: u64,
    pub max_connections: u32,
    pub connect_timeout_seconds: u64,
    pub wait_timeout_seconds: u64,
    pub progress_interval_seconds: u64,
    pub status_listen: String,
}

/// The status listener's default address (TiCDC's port).
pub const DEFAULT_STATUS_LISTEN: &str = "127.0.0.1:8300";

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: DEFAULT_LISTEN.to_owned(),
            mariadb_listen: None,
            data_dir: None,
            server_id: 1,
            server_uuid: None,
            instance_id: None,
            default_heartbeat_seconds: 30,
            net_write_timeout_seconds: crate::server::session::NET_WRITE_TIMEOUT.as_secs(),
            max_connections: crate::server::DEFAULT_MAX_CONNECTIONS,
            connect_timeout_seconds: crate::server::DEFAULT_CONNECT_TIMEOUT.as_secs(),
            wait_timeout_seconds: crate::server::DEFAULT_WAIT_TIMEOUT.as_secs(),
            progress_interval_seconds: 10,
            status_listen: DEFAULT_STATUS_LISTEN.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CaptureSection {
    #[serde(deserialize_with = "one_or_many")]
    pub pd: Vec<String>,
    pub start_ts: Option<u64>,
    pub gc_ttl_seconds: u64,
    pub incremental_scan_limit: usize,
    pub pending_txn_bytes: usize,
    pub prewrite_memory_bytes: usize,
    pub exit_on_capture_stop: bool,
}

impl Default for CaptureSection {
    fn default() -> Self {
        CaptureSection {
            pd: Vec::new(),
            start_ts: None,
            gc_ttl_seconds: crate::capture::gc_keeper::DEFAULT_GC_TTL.as_secs(),
            incremental_scan_limit: crate::capture::store_stream::DEFAULT_SCAN_LIMIT,
            pending_txn_bytes: crate::capture::matcher::DEFAULT_PENDING_BYTES_LIMIT,
            prewrite_memory_bytes: crate::capture::matcher::DEFAULT_PREWRITE_MEMORY_BYTES,
            exit_on_capture_stop: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SorterSection {
    pub memory_quota_bytes: usize,
    pub block_cache_bytes: usize,
    pub max_chunk_bytes: usize,
}

impl Default for SorterSection {
    fn default() -> Self {
        SorterSection {
            memory_quota_bytes: crate::sorter::DEFAULT_MEMORY_QUOTA_BYTES,
            block_cache_bytes: crate::sorter::DEFAULT_BLOCK_CACHE_BYTES,
            max_chunk_bytes: crate::sorter::DEFAULT_MAX_CHUNK_BYTES,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BinlogSection {
    pub max_binlog_size: u64,
    pub binlog_expire_logs_seconds: u64,
    pub binlog_row_metadata: String,
}

impl Default for BinlogSection {
    fn default() -> Self {
        BinlogSection {
            max_binlog_size: crate::binlog_store::DEFAULT_MAX_BINLOG_SIZE,
            binlog_expire_logs_seconds: 0,
            binlog_row_metadata: "FULL".to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecuritySection {
    pub user: String,
    pub password: String,
    pub password_hash: Option<String>,
    pub default_authentication_plugin: String,
    pub rsa_private_key: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub require_secure_transport: bool,
    #[serde(deserialize_with = "one_or_many")]
    pub cert_allowed_cn: Vec<String>,
    pub ca_path: Option<PathBuf>,
    pub cert_path: Option<PathBuf>,
    pub key_path: Option<PathBuf>,
}

impl Default for SecuritySection {
    fn default() -> Self {
        SecuritySection {
            user: "root".to_owned(),
            password: String::new(),
            password_hash: None,
            default_authentication_plugin: AuthMethod::CachingSha2Password.name().to_owned(),
            rsa_private_key: None,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            require_secure_transport: false,
            cert_allowed_cn: Vec::new(),
            ca_path: None,
            cert_path: None,
            key_path: None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterSection {
    #[serde(deserialize_with = "one_or_many")]
    pub rules: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HaSection {
    pub enabled: bool,
    #[serde(deserialize_with = "one_or_many")]
    pub etcd: Vec<String>,
    pub prefix: Option<String>,
    pub lease_ttl_seconds: u64,
    pub advertise: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
}

impl Default for HaSection {
    fn default() -> Self {
        HaSection {
            enabled: false,
            etcd: Vec::new(),
            prefix: None,
            lease_ttl_seconds: crate::ha::DEFAULT_LEASE_TTL.as_secs(),
            advertise: None,
            user: None,
            password: None,
        }
    }
}

/// A list given as an array or as one comma-separated string.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => split_list(&s),
        OneOrMany::Many(v) => v,
    })
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Arguments of `tibinlog server`: `--config`, `--print-config` and one flag per [`Knob`].
#[derive(Debug, Clone, Default)]
pub struct ServerArgs {
    /// The TOML file.
    pub config: Option<PathBuf>,
    /// Print the effective configuration and exit.
    pub print_config: bool,
    /// Flags given, as (knob, text).
    pub flags: Vec<(&'static Knob, String)>,
}

impl ServerArgs {
    /// With `--flag value` (a programming error if no knob has that flag).
    pub fn with(mut self, flag: &str, value: impl Into<String>) -> Self {
        let knob = KNOBS
            .iter()
            .find(|k| k.flag == flag)
            .unwrap_or_else(|| panic!("no setting has the flag --{flag}"));
        let value = value.into();
        match self.flags.iter_mut().find(|(k, _)| k.flag == flag) {
            // A list flag given again adds to it, as on the command line.
            Some((k, v)) if k.kind == List => {
                v.push(',');
                v.push_str(&value);
            }
            _ => self.flags.push((knob, value)),
        }
        self
    }
}

impl clap::FromArgMatches for ServerArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut args = ServerArgs {
            config: m.get_one::<PathBuf>("config").cloned(),
            print_config: m.get_flag("print_config"),
            flags: Vec::new(),
        };
        for k in KNOBS {
            if let Some(values) = m.get_many::<String>(k.flag) {
                let values: Vec<&str> = values.map(String::as_str).collect();
                args.flags.push((k, values.join(",")));
            }
        }
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for ServerArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        let cmd = cmd
            .arg(
                Arg::new("config")
                    .long("config")
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help(format!("TOML configuration file (also {ENV_PREFIX}CONFIG)")),
            )
            .arg(
                Arg::new("print_config")
                    .long("print-config")
                    .action(ArgAction::SetTrue)
                    .help("Print the effective configuration (file, environment and flags over the defaults) and exit"),
            );
        KNOBS.iter().fold(cmd, |cmd, k| {
            let mut arg = Arg::new(k.flag)
                .long(k.flag)
                .value_name(k.value_name)
                .help(format!(
                    "{} ({}, [{}] {})",
                    k.help,
                    k.env(),
                    k.section,
                    k.key
                ));
            if k.kind == List {
                arg = arg.action(ArgAction::Append).value_delimiter(',');
            }
            if k.kind == Integer {
                arg = arg.allow_negative_numbers(true);
            }
            if k.kind == Bool {
                arg = arg.num_args(0..=1).default_missing_value("true");
            }
            cmd.arg(arg)
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

pub fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// A flag's or variable's text as the TOML value of `knob`.
fn typed(knob: &Knob, text: &str, origin: &str) -> anyhow::Result<toml::Value> {
    Ok(match knob.kind {
        Text => toml::Value::String(text.to_owned()),
        List => toml::Value::Array(
            split_list(text)
                .into_iter()
                .map(toml::Value::String)
                .collect(),
        ),
        Bool => toml::Value::Boolean(match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "on" | "yes" => true,
            "false" | "0" | "off" | "no" => false,
            _ => anyhow::bail!("{origin}: {text:?} is not true or false"),
        }),
        Integer => toml::Value::Integer(
            text.trim()
                .replace('_', "")
                .parse::<i64>()
                .map_err(|_| anyhow::anyhow!("{origin}: {text:?} is not an integer"))?,
        ),
    })
}

/// Sets `section.key` in a configuration table.
fn set(table: &mut toml::Table, knob: &Knob, value: toml::Value) {
    let section = table
        .entry(knob.section)
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(s) = section {
        s.insert(knob.key.to_owned(), value);
    }
}

/// Checks that one value alone is valid for its key (type and range), naming where it came from.
fn check_one(knob: &Knob, value: &toml::Value, origin: &str) -> anyhow::Result<()> {
    let mut t = toml::Table::new();
    set(&mut t, knob, value.clone());
    Settings::deserialize(toml::Value::Table(t))
        .map(drop)
        .map_err(|e| anyhow::anyhow!("{origin}: {}", e.message().trim()))
}

/// Parses a configuration file's text (`name` is how errors call it).
pub fn parse_file(text: &str, name: &str) -> anyhow::Result<toml::Table> {
    let table: toml::Table = toml::from_str(text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    // A key of the flat layout of earlier versions: say which section it belongs in.
    for (key, value) in &table {
        if value.is_table() || (key == "users" && value.is_array()) {
            continue;
        }
        let hint = KNOBS
            .iter()
            .find(|k| k.key == key || k.flag.replace('-', "_") == *key)
            .map(|k| format!("; it belongs in section [{}] as `{}`", k.section, k.key))
            .unwrap_or_default();
        anyhow::bail!("{name}: `{key}` is outside every section{hint}");
    }
    // Typed from the text, the error points at the key's line.
    toml::from_str::<Settings>(text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(table)
}

/// The effective settings: defaults under the file under the environment under the flags.
pub fn settings(args: &ServerArgs, env: Env<'_>) -> anyhow::Result<Settings> {
    let config_path = args
        .config
        .clone()
        .or_else(|| env(&format!("{ENV_PREFIX}CONFIG")).map(PathBuf::from));
    let mut table = match &config_path {
        Some(p) => load_file(p)?,
        None => toml::Table::new(),
    };
    for k in KNOBS {
        let var = k.env();
        if let Some(text) = env(&var) {
            let v = typed(k, &text, &var)?;
            check_one(k, &v, &var)?;
            set(&mut table, k, v);
        }
    }
    for (k, text) in &args.flags {
        let origin = format!("--{}", k.flag);
        let v = typed(k, text, &origin)?;
        check_one(k, &v, &origin)?;
        set(&mut table, k, v);
    }
    Settings::deserialize(toml::Value::Table(table))
        .map_err(|e| anyhow::anyhow!("configuration: {}", e.message().trim()))
}

/// The accounts: the `[security]` administrator with every privilege, then `[[users]]` (a later
/// account of the same name replaces an earlier one). A `[security]` account without any
/// password is left out once `[[users]]` lists accounts, so that adding accounts never leaves a
/// passwordless administrator behind.
fn users_of(s: &Settings) -> anyhow::Result<crate::server::users::Users> {
    use crate::server::users::{Privileges, User, Users};
    use tibinlog_protocol::wire::auth::Credential;
    fn credential(
        who: &str,
        password: Option<&str>,
        hash: Option<&str>,
    ) -> anyhow::Result<Credential> {
        match (password, hash) {
            (Some(_), Some(_)) => {
                anyhow::bail!("{who}: give a password or a password_hash, not both")
            }
            (_, Some(h)) => Credential::from_mysql_hash(h.trim())
                .map_err(|e| anyhow::anyhow!("{who}: password_hash: {e}")),
            (Some(p), None) => Ok(Credential::Password(p.as_bytes().to_vec())),
            (None, None) => Ok(Credential::Password(Vec::new())),
        }
    }
    let sec = &s.security;
    if sec.user.is_empty() {
        anyhow::bail!("the user name must not be empty");
    }
    let mut list = Vec::new();
    let password = (!sec.password.is_empty()).then_some(sec.password.as_str());
    let admin_has_password = password.is_some() || sec.password_hash.is_some();
    if s.users.is_empty() || admin_has_password {
        list.push(User {
            name: sec.user.clone(),
            credential: credential("[security]", password, sec.password_hash.as_deref())?,
            privileges: Privileges::ALL,
        });
    }
    for (i, u) in s.users.iter().enumerate() {
        let who = format!("[[users]] #{} ({:?})", i + 1, u.name);
        if u.name.is_empty() {
            anyhow::bail!("{who}: the name must not be empty");
        }
        if u.name.len() > 32 {
            anyhow::bail!("{who}: MySQL user names have at most 32 characters");
        }
        list.push(User {
            name: u.name.clone(),
            credential: credential(&who, u.password.as_deref(), u.password_hash.as_deref())?,
            privileges: Privileges::parse(&u.privileges)
                .map_err(|e| anyhow::anyhow!("{who}: {e}"))?,
        });
    }
    Ok(Users::new(list))
}

fn load_file(path: &Path) -> anyhow::Result<toml::Table> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read config file {}", path.display()))?;
    parse_file(&text, &path.display().to_string())
}

/// The effective configuration as a TOML file, every setting with its help as a comment; the
/// password is not shown.
pub fn render(s: &Settings) -> String {
    let mut shown = s.clone();
    if !shown.security.password.is_empty() {
        shown.security.password = "(set, not shown)".to_owned();
    }
    if shown.ha.password.is_some() {
        shown.ha.password = Some("(set, not shown)".to_owned());
    }
    for u in &mut shown.users {
        if u.password.is_some() {
            u.password = Some("(set, not shown)".to_owned());
        }
    }
    let table = toml::Table::try_from(&shown).unwrap_or_default();
    let mut out = String::new();
    let mut section = "";
    for k in KNOBS {
        if k.section != section {
            if !section.is_empty() {
                out.push('\n');
            }
            section = k.section;
            let _ = writeln!(out, "[{section}]");
        }
        let _ = writeln!(out, "# {} (--{}, {})", k.help, k.flag, k.env());
        match table.get(k.section).and_then(|t| t.get(k.key)) {
            Some(v) => {
                let _ = writeln!(out, "{} = {v}", k.key);
            }
            None => {
                let _ = writeln!(out, "# {} is not set", k.key);
            }
        }
    }
    if let Some(toml::Value::Array(users)) = table.get("users") {
        for u in users {
            let _ = writeln!(out, "\n[[users]]");
            if let toml::Value::Table(t) = u {
                for (k, v) in t {
                    let _ = writeln!(out, "{k} = {v}");
                }
            }
        }
    }
    out
}

/// Resolves the configuration of a server.
pub fn resolve(args: ServerArgs, env: Env<'_>) -> anyhow::Result<AppConfig> {
    app_config(&settings(&args, env)?)
}

/// Checks the settings and turns them into the app's configuration.
pub fn app_config(s: &Settings) -> anyhow::Result<AppConfig> {
    let pd = s.capture.pd.clone();
    if pd.is_empty() {
        anyhow::bail!(
            "no PD endpoint: give --pd HOST:PORT (or {ENV_PREFIX}PD, or `pd` in [capture] of the config file)"
        );
    }
    let listen: SocketAddr = s
        .server
        .listen
        .parse()
        .with_context(|| format!("listen address {:?} is not HOST:PORT", s.server.listen))?;
    let data_dir = s.server.data_dir.clone().ok_or_else(|| {
        anyhow::anyhow!("no data directory: give --data-dir DIR (or {ENV_PREFIX}DATA_DIR, or `data_dir` in [server] of the config file)")
    })?;
    let mut cfg = AppConfig::new(pd, listen, data_dir);
    if let Some(text) = &s.server.mariadb_listen {
        let addr: SocketAddr = text
            .parse()
            .with_context(|| format!("MariaDB listen address {text:?} is not HOST:PORT"))?;
        cfg.mariadb_listen = Some(addr);
    }
    let status = s.server.status_listen.trim();
    if !(status.is_empty() || status.eq_ignore_ascii_case("off")) {
        let addr: SocketAddr = status.parse().with_context(|| {
            format!("status listen address {status:?} is not HOST:PORT (or \"off\")")
        })?;
        cfg.status_listen = Some(addr);
    }
    cfg.filter_rules = s.filter.rules.clone();
    cfg.filter = if s.filter.rules.is_empty() {
        TableFilter::all()
    } else {
        TableFilter::parse(&s.filter.rules).context("table filter")?
    };
    if s.server.server_id == 0 {
        anyhow::bail!("server id must not be 0 (MySQL refuses replication with server_id 0)");
    }
    cfg.server_id = s.server.server_id;
    if let Some(u) = &s.server.server_uuid {
        let sid = Sid::parse(u.trim()).map_err(|e| anyhow::anyhow!("server uuid {u:?}: {e}"))?;
        cfg.server_uuid = Some(sid);
    }
    if let Some(id) = &s.server.instance_id {
        cfg.instance_id = Some(super::check_instance_id(id.trim())?.to_owned());
    }
    cfg.start_ts = s.capture.start_ts.map(Ts);
    cfg.users = std::sync::Arc::new(users_of(s)?);
    cfg.rsa_private_key = s.security.rsa_private_key.clone();
    cfg.auth_plugin = match s.security.default_authentication_plugin.as_str() {
        p if p == AuthMethod::NativePassword.name() => AuthMethod::NativePassword,
        p if p == AuthMethod::CachingSha2Password.name() => AuthMethod::CachingSha2Password,
        other => anyhow::bail!(
            "default authentication plugin {other:?} is not mysql_native_password or caching_sha2_password"
        ),
    };
    let sec = &s.security;
    match (&sec.tls_cert, &sec.tls_key) {
        (Some(cert), Some(key)) => {
            cfg.tls = Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: sec.tls_ca.clone(),
                allowed_cn: sec.cert_allowed_cn.clone(),
                require_secure_transport: sec.require_secure_transport,
            })
        }
        (None, None) => {
            if sec.require_secure_transport
                || sec.tls_ca.is_some()
                || !sec.cert_allowed_cn.is_empty()
            {
                anyhow::bail!("require_secure_transport, tls_ca and cert_allowed_cn need TLS: give --tls-cert and --tls-key");
            }
        }
        _ => anyhow::bail!("TLS needs both a certificate (--tls-cert) and a key (--tls-key)"),
    }
    if !sec.cert_allowed_cn.is_empty() && sec.tls_ca.is_none() {
        anyhow::bail!(
            "cert_allowed_cn checks client certificates: give the CA that signs them with --tls-ca"
        );
    }
    cfg.cluster_tls = match (&sec.ca_path, &sec.cert_path, &sec.key_path) {
        (None, None, None) => None,
        (Some(ca), Some(cert), Some(key)) => Some(crate::security::ClusterTlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => anyhow::bail!("TLS to PD and TiKV needs all of --ca, --cert and --key"),
    };
    let size = s.binlog.max_binlog_size;
    if !(4096..=u64::from(u32::MAX)).contains(&size) {
        anyhow::bail!("max binlog size {size} must be between 4096 bytes and 4 GiB");
    }
    cfg.max_binlog_size = size;
    cfg.expire_logs_seconds = s.binlog.binlog_expire_logs_seconds;
    let meta = &s.binlog.binlog_row_metadata;
    cfg.row_metadata = tibinlog_protocol::binlog::RowMetadata::parse(meta).ok_or_else(|| {
        anyhow::anyhow!("binlog_row_metadata {meta:?} is not FULL, MINIMAL or NONE")
    })?;
    cfg.progress_interval = Duration::from_secs(s.server.progress_interval_seconds.max(1));
    cfg.default_heartbeat = match s.server.default_heartbeat_seconds {
        0 => None,
        n => Some(Duration::from_secs(n)),
    };
    if s.server.net_write_timeout_seconds == 0 {
        anyhow::bail!("net_write_timeout_seconds must be at least 1");
    }
    cfg.net_write_timeout = Duration::from_secs(s.server.net_write_timeout_seconds);
    for (key, v) in [
        ("max_connections", u64::from(s.server.max_connections)),
        ("connect_timeout_seconds", s.server.connect_timeout_seconds),
        ("wait_timeout_seconds", s.server.wait_timeout_seconds),
    ] {
        if v == 0 {
            anyhow::bail!("{key} must be at least 1");
        }
    }
    cfg.limits = crate::server::Limits {
        max_connections: s.server.max_connections,
        connect_timeout: Duration::from_secs(s.server.connect_timeout_seconds),
        wait_timeout: Duration::from_secs(s.server.wait_timeout_seconds),
    };
    if s.capture.gc_ttl_seconds == 0 {
        anyhow::bail!("gc_ttl_seconds must be at least 1");
    }
    cfg.gc_ttl = Duration::from_secs(s.capture.gc_ttl_seconds);
    if s.capture.incremental_scan_limit == 0 {
        anyhow::bail!("incremental_scan_limit must be at least 1");
    }
    cfg.incremental_scan_limit = s.capture.incremental_scan_limit;
    cfg.pending_txn_bytes = s.capture.pending_txn_bytes;
    cfg.prewrite_memory_bytes = s.capture.prewrite_memory_bytes;
    cfg.exit_on_capture_stop = s.capture.exit_on_capture_stop;
    if s.ha.enabled {
        if s.ha.lease_ttl_seconds == 0 {
            anyhow::bail!("[ha] lease_ttl_seconds must be at least 1");
        }
        if let Some(p) = &s.ha.prefix {
            if !p.starts_with('/') || p.ends_with('/') {
                anyhow::bail!("[ha] prefix {p:?}: give a key like /tibinlog/group-1 (leading '/', no trailing '/')");
            }
        }
        cfg.ha = Some(super::HaConfig {
            etcd: s.ha.etcd.clone(),
            prefix: s.ha.prefix.clone(),
            lease_ttl: Duration::from_secs(s.ha.lease_ttl_seconds),
            advertise: s.ha.advertise.clone(),
            user: s.ha.user.clone().unwrap_or_else(|| s.security.user.clone()),
            password: s
                .ha
                .password
                .clone()
                .unwrap_or_else(|| s.security.password.clone()),
        });
    }
    cfg.sorter_memory_quota_bytes = s.sorter.memory_quota_bytes;
    cfg.sorter_block_cache_bytes = s.sorter.block_cache_bytes;
    cfg.max_chunk_bytes = Some(s.sorter.max_chunk_bytes);
    // The sorter's own range checks, with its words, before anything starts.
    let mut sorter = crate::sorter::Config::new(cfg.data_dir.join("sorter"));
    sorter.memory_quota_bytes = cfg.sorter_memory_quota_bytes;
    sorter.block_cache_bytes = cfg.sorter_block_cache_bytes;
    sorter.max_chunk_bytes = s.sorter.max_chunk_bytes;
    sorter
        .validate()
        .map_err(|e| anyhow::anyhow!("[sorter]: {e}"))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn temp_file(name: &str, text: &str) -> (PathBuf, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("tibinlog-config-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("c.toml");
        std::fs::write(&file, text).expect("write");
        (dir, file)
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let (dir, file) = temp_file(
            "layers",
            "[server]\nlisten = \"127.0.0.1:4000\"\ndata_dir = \"/f\"\nserver_id = 3\n\n\
             [capture]\npd = \"f1:2379,f2:2379\"\n\n[security]\nuser = \"fu\"\n\n\
             [binlog]\nmax_binlog_size = 8192\nbinlog_expire_logs_seconds = 600\n",
        );
        let env = |k: &str| match k {
            "TIBINLOG_SERVER_ID" => Some("5".to_owned()),
            "TIBINLOG_DATA_DIR" => Some("/e".to_owned()),
            "TIBINLOG_MARIADB_LISTEN" => Some("127.0.0.1:3307".to_owned()),
            "TIBINLOG_SORTER_MEMORY_QUOTA_BYTES" => Some("1_048_576".to_owned()),
            _ => None,
        };
        let mut args = ServerArgs::default()
            .with("data-dir", "/c")
            .with("gc-ttl-seconds", "3600")
            .with("binlog-row-metadata", "minimal");
        args.config = Some(file);
        let cfg = resolve(args, &env).expect("resolve");
        assert_eq!(
            cfg.row_metadata,
            tibinlog_protocol::binlog::RowMetadata::Minimal
        );
        assert_eq!(cfg.pd_addrs, ["f1:2379", "f2:2379"]);
        assert_eq!(cfg.listen.port(), 4000);
        assert_eq!(cfg.mariadb_listen.map(|a| a.port()), Some(3307));
        assert_eq!(cfg.data_dir, PathBuf::from("/c"));
        assert_eq!(cfg.server_id, 5);
        assert_eq!(cfg.max_binlog_size, 8192);
        assert_eq!(cfg.expire_logs_seconds, 600);
        assert_eq!(cfg.gc_ttl, Duration::from_secs(3600));
        assert_eq!(cfg.sorter_memory_quota_bytes, 1 << 20);
        assert_eq!(cfg.users.names(), ["fu"]);
        assert_eq!(cfg.server_uuid, None);
        // Untouched settings keep their defaults.
        assert_eq!(cfg.net_write_timeout, Duration::from_secs(60));
        assert_eq!(cfg.default_heartbeat, Some(Duration::from_secs(30)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn users_come_with_hashes_and_privileges() {
        use crate::server::users::Privileges;
        use tibinlog_protocol::wire::auth::{verify_cleartext, Credential};
        let text = "[server]\ndata_dir = \"/d\"\n\n[capture]\npd = \"p:2379\"\n\n\
             [security]\nuser = \"admin\"\npassword_hash = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"\n\n\
             [[users]]\nname = \"repl\"\n\
             password_hash = '$A$005$abcdefghij0123456789jg.2i2CR4LF61xx5lqQ4TXEgnuGCxVdpZL7ZyxF6Bl/'\n\
             privileges = [\"REPLICATION SLAVE\", \"replication_client\"]\n\n\
             [[users]]\nname = \"reader\"\npassword = \"r\"\nprivileges = \"SELECT, SHOW DATABASES\"\n";
        let (dir, file) = temp_file("users", text);
        let settings = settings_of(&file);
        let cfg = app_config(&settings).expect("config");
        assert_eq!(cfg.users.names(), ["admin", "reader", "repl"]);
        let admin = cfg.users.get("admin").expect("admin");
        assert_eq!(admin.privileges, Privileges::ALL);
        assert!(verify_cleartext(&admin.credential, b"password"));
        let repl = cfg.users.get("repl").expect("repl");
        assert!(matches!(repl.credential, Credential::Sha2Crypt { .. }));
        assert_eq!(
            repl.privileges,
            Privileges::REPLICATION_SLAVE | Privileges::REPLICATION_CLIENT
        );
        assert_eq!(
            cfg.users.privileges("reader"),
            Privileges::SELECT | Privileges::SHOW_DATABASES
        );
        // The printed configuration lists the accounts without the cleartext password.
        let shown = render(&settings);
        assert!(
            shown.contains("[[users]]") && shown.contains("name = \"repl\""),
            "{shown}"
        );
        assert!(!shown.contains("password = \"r\""), "{shown}");

        // No implicit passwordless administrator beside listed accounts.
        let text = "[server]\ndata_dir = \"/d\"\n\n[capture]\npd = \"p:2379\"\n\n\
                    [[users]]\nname = \"repl\"\npassword = \"x\"\n";
        std::fs::write(&file, text).expect("write");
        let cfg = app_config(&settings_of(&file)).expect("config");
        assert_eq!(cfg.users.names(), ["repl"]);
        assert_eq!(cfg.users.privileges("repl"), Privileges::NONE);

        let bad = |users: &str| {
            let text = format!(
                "[server]\ndata_dir = \"/d\"\n[capture]\npd = \"p:2379\"\n[[users]]\n{users}"
            );
            std::fs::write(&file, text).expect("write");
            format!("{:#}", app_config(&settings_of(&file)).expect_err(users))
        };
        assert!(bad("name = \"a\"\nprivileges = [\"INSERT\"]\n")
            .contains("`INSERT` is not a privilege"));
        assert!(bad("name = \"a\"\npassword_hash = \"*00\"\n").contains("password_hash"));
        assert!(bad("name = \"a\"\npassword = \"x\"\npassword_hash = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"\n").contains("not both"));
        assert!(bad("name = \"\"\n").contains("name must not be empty"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn settings_of(file: &Path) -> Settings {
        let args = ServerArgs {
            config: Some(file.to_owned()),
            ..ServerArgs::default()
        };
        settings(&args, &no_env).expect("settings")
    }

    #[test]
    fn files_refuse_unknown_keys_and_misplaced_ones() {
        let err = |text: &str| format!("{:#}", parse_file(text, "c.toml").expect_err(text));
        let e = err("[server]\nlistne = \"x\"\n");
        assert!(e.contains("listne"), "{e}");
        let e = err("[nowhere]\nx = 1\n");
        assert!(e.contains("nowhere"), "{e}");
        // The flat layout of earlier versions names the section a key moved to.
        let e = err("pd = \"a:1\"\n");
        assert!(e.contains("[capture]"), "{e}");
        let e = err("filter = [\"a.*\"]\n");
        assert!(e.contains("[filter]") && e.contains("rules"), "{e}");
        // Wrong types and syntax errors name the key or the line.
        let e = err("[server]\nserver_id = \"one\"\n");
        assert!(e.contains("server_id") || e.contains("integer"), "{e}");
        let e = err("[server]\nserver_id = 99999999999\n");
        assert!(e.contains("99999999999") || e.contains("u32"), "{e}");
        let e = err("[server]\nlisten = \"x\n");
        assert!(e.contains("line 2"), "{e}");
        // Lists come as arrays or one comma-separated string.
        let t = parse_file("[capture]\npd = [\"a:1\", 'b:2']\n", "c").expect("array");
        let s = Settings::deserialize(toml::Value::Table(t)).expect("settings");
        assert_eq!(s.capture.pd, ["a:1", "b:2"]);
    }

    #[test]
    fn flags_and_variables_are_checked_where_they_come_from() {
        let env = |k: &str| (k == "TIBINLOG_SERVER_ID").then(|| "x".to_owned());
        let e = format!(
            "{:#}",
            settings(&ServerArgs::default(), &env).expect_err("env")
        );
        assert!(e.contains("TIBINLOG_SERVER_ID"), "{e}");
        let e = format!(
            "{:#}",
            settings(&ServerArgs::default().with("server-id", "-1"), &no_env).expect_err("flag")
        );
        assert!(e.contains("--server-id"), "{e}");
    }

    #[test]
    fn every_setting_is_one_knob_and_printed() {
        // The typed sections and the knob table name the same keys.
        let full = Settings {
            server: ServerSection {
                mariadb_listen: Some("a".into()),
                data_dir: Some("/d".into()),
                server_uuid: Some("u".into()),
                instance_id: Some("i".into()),
                ..ServerSection::default()
            },
            capture: CaptureSection {
                start_ts: Some(1),
                ..CaptureSection::default()
            },
            security: SecuritySection {
                tls_cert: Some("c".into()),
                tls_key: Some("k".into()),
                tls_ca: Some("a".into()),
                ca_path: Some("a".into()),
                cert_path: Some("c".into()),
                key_path: Some("k".into()),
                password_hash: Some("h".into()),
                rsa_private_key: Some("r".into()),
                ..SecuritySection::default()
            },
            ha: HaSection {
                prefix: Some("/p".into()),
                advertise: Some("a".into()),
                user: Some("repl".into()),
                password: Some("pw".into()),
                ..HaSection::default()
            },
            ..Settings::default()
        };
        let table = toml::Table::try_from(&full).expect("serialize");
        let mut keys: Vec<String> = table
            .iter()
            .filter(|(s, _)| *s != "users")
            .flat_map(|(s, t)| {
                t.as_table()
                    .expect("section")
                    .keys()
                    .map(move |k| format!("{s}.{k}"))
            })
            .collect();
        keys.sort();
        let mut knobs: Vec<String> = KNOBS.iter().map(Knob::path).collect();
        knobs.sort();
        assert_eq!(keys, knobs);
        let mut flags: Vec<&str> = KNOBS.iter().map(|k| k.flag).collect();
        flags.sort_unstable();
        flags.dedup();
        assert_eq!(flags.len(), KNOBS.len(), "flags are unique");
        // Every knob can be set through its flag, its variable, and the file.
        for k in KNOBS {
            let text = match k.kind {
                Integer => "7",
                Bool => "on",
                _ => "v",
            };
            let v = typed(k, text, "t").expect("typed");
            check_one(k, &v, "t").unwrap_or_else(|e| panic!("{}: {e:#}", k.path()));
        }
        // What --print-config prints is a file that reads back as the same settings.
        let mut s = full.clone();
        s.security.password = String::new();
        s.ha.password = None;
        let printed = render(&s);
        let back = Settings::deserialize(toml::Value::Table(
            parse_file(&printed, "printed").expect("parse printed"),
        ))
        .expect("settings");
        assert_eq!(back, s);
        for k in KNOBS {
            assert!(
                printed.contains(&k.env()),
                "{} in the printed help",
                k.env()
            );
        }
        s.security.password = "secret".into();
        s.ha.password = Some("also secret".into());
        assert!(!render(&s).contains("secret"));
    }

    /// The settings table of docs/configuration.md, one row per knob under its section's row.
    fn settings_table() -> String {
        let mut out = String::from("| key | flag | variable | meaning |\n|---|---|---|---|\n");
        let mut section = "";
        for k in KNOBS {
            if k.section != section {
                section = k.section;
                out.push_str(&format!("| **[{section}]** | | | |\n"));
            }
            out.push_str(&format!(
                "| `{}` | `--{}` | `{}` | {} |\n",
                k.key,
                k.flag,
                k.env(),
                k.help.replace('|', "\\|")
            ));
        }
        out
    }

    #[test]
    fn docs_configuration_lists_every_setting() {
        const BEGIN: &str = concat!(
            "<!-- settings table: generated from KNOBS in src/app/config.rs by the test ",
            "app::config::tests::docs_configuration_lists_every_setting; ",
            "run it with TIBINLOG_BLESS=1 to rewrite -->\n"
        );
        const END: &str = "<!-- end of the generated settings table -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
        let doc = std::fs::read_to_string(path).expect("docs/configuration.md");
        let start = doc
            .find(BEGIN)
            .expect("docs/configuration.md has the table's begin marker")
            + BEGIN.len();
        let end = start
            + doc[start..]
                .find(END)
                .expect("docs/configuration.md has the table's end marker");
        let table = settings_table();
        if std::env::var("TIBINLOG_BLESS").as_deref() == Ok("1") {
            if doc[start..end] != table {
                let blessed = format!("{}{table}{}", &doc[..start], &doc[end..]);
                std::fs::write(path, blessed).expect("rewrite docs/configuration.md");
            }
            return;
        }
        assert_eq!(
            doc[start..end],
            table,
            "docs/configuration.md's settings table is not what KNOBS gives; \
             rerun this test with TIBINLOG_BLESS=1 to rewrite it"
        );
    }

    #[test]
    fn bad_values_are_a_clear_error() {
        let base = || {
            ServerArgs::default()
                .with("pd", "p:1")
                .with("data-dir", "/d")
        };
        let err = |a: ServerArgs| format!("{:#}", resolve(a, &no_env).expect_err("must fail"));
        assert!(err(ServerArgs::default()).contains("PD"));
        assert!(err(base().with("mariadb-listen", "nope")).contains("MariaDB listen address"));
        assert!(err(base().with("listen", "nope")).contains("listen"));
        assert!(err(base().with("server-uuid", "x")).contains("uuid"));
        assert!(err(base().with("tls-cert", "c")).contains("TLS"));
        assert!(err(base().with("filter", "a.b.c")).contains("filter"));
        assert!(err(base().with("server-id", "0")).contains("server id"));
        assert!(err(base().with("default-authentication-plugin", "x")).contains("plugin"));
        assert!(err(base().with("sorter-memory-quota-bytes", "0")).contains("[sorter]"));
        assert!(err(base().with("binlog-row-metadata", "ALL")).contains("binlog_row_metadata"));
        let cfg = resolve(base(), &no_env).expect("defaults");
        assert_eq!(cfg.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(
            cfg.users.get("root").map(|u| u.credential.clone()),
            Some(tibinlog_protocol::wire::auth::Credential::Password(
                Vec::new()
            ))
        );
        assert_eq!(cfg.auth_plugin, AuthMethod::CachingSha2Password);
        let cfg = resolve(
            base()
                .with("filter", "a.*")
                .with("filter", "!a.tmp")
                .with("default-heartbeat-seconds", "0"),
            &no_env,
        )
        .expect("repeated list flag");
        assert_eq!(cfg.filter_rules, ["a.*", "!a.tmp"]);
        assert_eq!(cfg.default_heartbeat, None);
    }
}

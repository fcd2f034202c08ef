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
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tibinlog_protocol::wire::auth::AuthMethod;

use super::AppConfig;

/// Default MySQL listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3306";
/// Prefix of the environment overrides.
pub const ENV_PREFIX: &str = "TIBINLOG_";

mod convert;
mod knobs;

pub use convert::app_config;
pub use knobs::{Kind, Knob, KNOBS};
use Kind::{Bool, Integer, List, Text};

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

#[cfg(test)]
mod tests;

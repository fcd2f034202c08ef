//! Configuration of `tibinlog server`: command line > environment (`TIBINLOG_…`) > TOML file
//! (`--config`) > defaults. The file is flat TOML (top-level keys only; see [`parse_toml`]).
//!
//! ```toml
//! pd = ["10.0.0.1:2379", "10.0.0.2:2379"]
//! listen = "0.0.0.0:3306"
//! # mariadb_listen = "0.0.0.0:3307"  # greets as MariaDB 10.11, for MariaDB GTID replicas
//! data_dir = "/var/lib/tibinlog"
//! filter = ["shop.*", "!shop.tmp_*"]
//! server_id = 1
//! # server_uuid = "…"          # default: derived from the TiDB cluster id
//! # start_ts = 0               # only used when the data dir has no checkpoint
//! user = "repl"
//! password = "secret"
//! # tls_cert = "server.pem"
//! # tls_key = "server.key"
//! max_binlog_size = 1073741824
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;
use tibinlog_protocol::binlog::Sid;

use super::AppConfig;
use crate::model::Ts;
use crate::mounter::TableFilter;
use crate::server::TlsFiles;

/// Default MySQL listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3306";
/// Prefix of the environment overrides.
pub const ENV_PREFIX: &str = "TIBINLOG_";

/// Arguments of `tibinlog server`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServerArgs {
    /// PD endpoints, comma-separated (HOST:PORT[,HOST:PORT…]).
    #[arg(long, value_delimiter = ',')]
    pub pd: Vec<String>,
    /// MySQL protocol listen address [default: 127.0.0.1:3306].
    #[arg(long)]
    pub listen: Option<String>,
    /// A second listen address that greets as MariaDB 10.11: MariaDB replicas replicate by GTID
    /// (`MASTER_USE_GTID`) only from a master that claims version 10 or more [default: none].
    #[arg(long)]
    pub mariadb_listen: Option<String>,
    /// Directory of the binlog files and the sorter cache.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Table filter rules (TiDB table-filter syntax), comma-separated or repeated.
    #[arg(long, value_delimiter = ',')]
    pub filter: Vec<String>,
    /// `@@server_id` [default: 1].
    #[arg(long)]
    pub server_id: Option<u32>,
    /// `@@server_uuid` (GTID source) [default: derived from the TiDB cluster id].
    #[arg(long)]
    pub server_uuid: Option<String>,
    /// Capture start when the data dir has no checkpoint [default: PD's current TSO].
    #[arg(long)]
    pub start_ts: Option<u64>,
    /// User name replicas log in with [default: root].
    #[arg(long)]
    pub user: Option<String>,
    /// Its password [default: empty].
    #[arg(long)]
    pub password: Option<String>,
    /// TLS certificate chain (PEM); TLS is offered when set with --tls-key.
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// Rotate binlog files past this many bytes [default: 1 GiB].
    #[arg(long)]
    pub max_binlog_size: Option<u64>,
    /// TOML configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The TOML file; every key optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default, deserialize_with = "one_or_many")]
    pub pd: Vec<String>,
    pub listen: Option<String>,
    pub mariadb_listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub filter: Vec<String>,
    pub server_id: Option<u32>,
    pub server_uuid: Option<String>,
    pub start_ts: Option<u64>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub max_binlog_size: Option<u64>,
    pub expire_logs_seconds: Option<u64>,
    pub progress_interval_seconds: Option<u64>,
}

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

impl FileConfig {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> anyhow::Result<FileConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read config file {}", path.display()))?;
        let value = parse_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        serde_json::from_value(value).with_context(|| format!("config file {}", path.display()))
    }
}

/// Parses the flat TOML this file uses: `key = value` lines with strings (basic `"…"` with
/// escapes, literal `'…'`), integers, booleans and one-line arrays of those; `#` comments.
/// Tables and multi-line values are refused with the line number.
pub fn parse_toml(text: &str) -> Result<serde_json::Value, String> {
    let mut out = serde_json::Map::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let mut p = Parser {
            s: raw.as_bytes(),
            i: 0,
        };
        p.ws();
        if p.done() {
            continue;
        }
        if p.peek() == Some(b'[') {
            return Err(format!(
                "line {n}: tables are not supported (all keys are top-level)"
            ));
        }
        let key = p.key().map_err(|e| format!("line {n}: {e}"))?;
        p.ws();
        if p.peek() != Some(b'=') {
            return Err(format!("line {n}: expected `=` after `{key}`"));
        }
        p.i += 1;
        p.ws();
        let value = p.value().map_err(|e| format!("line {n}: {e}"))?;
        p.ws();
        if !p.done() {
            return Err(format!(
                "line {n}: unexpected text after the value of `{key}`"
            ));
        }
        if out.insert(key.clone(), value).is_some() {
            return Err(format!("line {n}: `{key}` is set twice"));
        }
    }
    Ok(serde_json::Value::Object(out))
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r')) {
            self.i += 1;
        }
    }
    /// At the end of the line or of a comment.
    fn done(&self) -> bool {
        matches!(self.peek(), None | Some(b'#'))
    }
    fn key(&mut self) -> Result<String, String> {
        let start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        {
            self.i += 1;
        }
        if start == self.i {
            return Err("expected a key".into());
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }
    fn value(&mut self) -> Result<serde_json::Value, String> {
        match self.peek() {
            Some(b'"') => self.basic_string().map(serde_json::Value::String),
            Some(b'\'') => self.literal_string().map(serde_json::Value::String),
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.i += 1;
                        return Ok(serde_json::Value::Array(items));
                    }
                    items.push(self.value()?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {}
                        _ => {
                            return Err(
                                "expected `,` or `]` in an array (arrays must be on one line)"
                                    .into(),
                            )
                        }
                    }
                }
            }
            Some(_) => {
                let start = self.i;
                while matches!(self.peek(), Some(c) if !matches!(c, b' ' | b'\t' | b',' | b']' | b'#' | b'\r'))
                {
                    self.i += 1;
                }
                let word = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "not UTF-8")?;
                match word {
                    "true" => Ok(serde_json::Value::Bool(true)),
                    "false" => Ok(serde_json::Value::Bool(false)),
                    w => w
                        .replace('_', "")
                        .parse::<i64>()
                        .map(serde_json::Value::from)
                        .map_err(|_| {
                            format!("`{w}` is not a string, integer or boolean (quote strings)")
                        }),
                }
            }
            None => Err("missing value".into()),
        }
    }
    fn basic_string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err("unterminated string".into());
            };
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|_| "string is not UTF-8".into()),
                b'\\' => {
                    let e = self.peek().ok_or("unterminated string")?;
                    self.i += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        other => return Err(format!("unsupported escape `\\{}`", other as char)),
                    }
                }
                other => out.push(other),
            }
        }
    }
    fn literal_string(&mut self) -> Result<String, String> {
        self.i += 1;
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == b'\'' {
                let s = String::from_utf8(self.s[start..self.i].to_vec())
                    .map_err(|_| "string is not UTF-8")?;
                self.i += 1;
                return Ok(s);
            }
            self.i += 1;
        }
        Err("unterminated string".into())
    }
}

/// Source of the environment (a function so tests need not touch the process environment).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment.
pub fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// Environment overrides as a [`FileConfig`] layer.
fn env_layer(env: Env<'_>) -> anyhow::Result<FileConfig> {
    let get = |k: &str| env(&format!("{ENV_PREFIX}{k}"));
    fn num<T: std::str::FromStr>(key: &str, v: Option<String>) -> anyhow::Result<Option<T>> {
        v.map(|s| {
            s.trim()
                .parse::<T>()
                .map_err(|_| anyhow::anyhow!("{ENV_PREFIX}{key}: not a number: {s:?}"))
        })
        .transpose()
    }
    Ok(FileConfig {
        pd: get("PD").map(|s| split_list(&s)).unwrap_or_default(),
        listen: get("LISTEN"),
        mariadb_listen: get("MARIADB_LISTEN"),
        data_dir: get("DATA_DIR").map(PathBuf::from),
        filter: get("FILTER").map(|s| split_list(&s)).unwrap_or_default(),
        server_id: num("SERVER_ID", get("SERVER_ID"))?,
        server_uuid: get("SERVER_UUID"),
        start_ts: num("START_TS", get("START_TS"))?,
        user: get("USER"),
        password: get("PASSWORD"),
        tls_cert: get("TLS_CERT").map(PathBuf::from),
        tls_key: get("TLS_KEY").map(PathBuf::from),
        max_binlog_size: num("MAX_BINLOG_SIZE", get("MAX_BINLOG_SIZE"))?,
        expire_logs_seconds: num("EXPIRE_LOGS_SECONDS", get("EXPIRE_LOGS_SECONDS"))?,
        progress_interval_seconds: num(
            "PROGRESS_INTERVAL_SECONDS",
            get("PROGRESS_INTERVAL_SECONDS"),
        )?,
    })
}

fn first<T>(layers: [Option<T>; 3]) -> Option<T> {
    layers.into_iter().flatten().next()
}

fn first_list(layers: [Vec<String>; 3]) -> Vec<String> {
    layers
        .into_iter()
        .find(|l| !l.is_empty())
        .unwrap_or_default()
}

/// Merges command line, environment and file (in that order of precedence) into an
/// [`AppConfig`].
pub fn resolve(args: ServerArgs, env: Env<'_>) -> anyhow::Result<AppConfig> {
    let env_cfg = env_layer(env)?;
    let config_path = args
        .config
        .clone()
        .or_else(|| env(&format!("{ENV_PREFIX}CONFIG")).map(PathBuf::from));
    let file = match &config_path {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    let cli = FileConfig {
        pd: args.pd.iter().flat_map(|s| split_list(s)).collect(),
        listen: args.listen,
        mariadb_listen: args.mariadb_listen,
        data_dir: args.data_dir,
        filter: args.filter,
        server_id: args.server_id,
        server_uuid: args.server_uuid,
        start_ts: args.start_ts,
        user: args.user,
        password: args.password,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        max_binlog_size: args.max_binlog_size,
        expire_logs_seconds: None,
        progress_interval_seconds: None,
    };
    let [c, e, f] = [cli, env_cfg, file];

    let pd = first_list([c.pd, e.pd, f.pd]);
    if pd.is_empty() {
        anyhow::bail!(
            "no PD endpoint: give --pd HOST:PORT (or {ENV_PREFIX}PD, or `pd` in the config file)"
        );
    }
    let listen_text =
        first([c.listen, e.listen, f.listen]).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let listen: SocketAddr = listen_text
        .parse()
        .with_context(|| format!("listen address {listen_text:?} is not HOST:PORT"))?;
    let data_dir = first([c.data_dir, e.data_dir, f.data_dir]).ok_or_else(|| {
        anyhow::anyhow!("no data directory: give --data-dir DIR (or {ENV_PREFIX}DATA_DIR, or `data_dir` in the config file)")
    })?;
    let rules = first_list([c.filter, e.filter, f.filter]);
    let filter = if rules.is_empty() {
        TableFilter::all()
    } else {
        TableFilter::parse(&rules).context("table filter")?
    };
    let mut cfg = AppConfig::new(pd, listen, data_dir);
    if let Some(text) = first([c.mariadb_listen, e.mariadb_listen, f.mariadb_listen]) {
        let addr: SocketAddr = text
            .parse()
            .with_context(|| format!("MariaDB listen address {text:?} is not HOST:PORT"))?;
        cfg.mariadb_listen = Some(addr);
    }
    cfg.filter = filter;
    if let Some(id) = first([c.server_id, e.server_id, f.server_id]) {
        if id == 0 {
            anyhow::bail!("server id must not be 0 (MySQL refuses replication with server_id 0)");
        }
        cfg.server_id = id;
    }
    if let Some(u) = first([c.server_uuid, e.server_uuid, f.server_uuid]) {
        let sid = Sid::parse(u.trim()).map_err(|e| anyhow::anyhow!("server uuid {u:?}: {e}"))?;
        cfg.server_uuid = Some(sid);
    }
    cfg.start_ts = first([c.start_ts, e.start_ts, f.start_ts]).map(Ts);
    let user = first([c.user, e.user, f.user]).unwrap_or_else(|| "root".to_owned());
    let password = first([c.password, e.password, f.password]).unwrap_or_default();
    if user.is_empty() {
        anyhow::bail!("the user name must not be empty");
    }
    cfg.users = HashMap::from([(user, password)]);
    match (
        first([c.tls_cert, e.tls_cert, f.tls_cert]),
        first([c.tls_key, e.tls_key, f.tls_key]),
    ) {
        (Some(cert), Some(key)) => cfg.tls = Some(TlsFiles { cert, key }),
        (None, None) => {}
        _ => anyhow::bail!("TLS needs both a certificate (--tls-cert) and a key (--tls-key)"),
    }
    if let Some(size) = first([c.max_binlog_size, e.max_binlog_size, f.max_binlog_size]) {
        if size < 4096 || size > u64::from(u32::MAX) {
            anyhow::bail!("max binlog size {size} must be between 4096 bytes and 4 GiB");
        }
        cfg.max_binlog_size = size;
    }
    if let Some(s) = first([None, e.expire_logs_seconds, f.expire_logs_seconds]) {
        cfg.expire_logs_seconds = s;
    }
    if let Some(s) = first([
        None,
        e.progress_interval_seconds,
        f.progress_interval_seconds,
    ]) {
        cfg.progress_interval = Duration::from_secs(s);
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn cli_beats_env_beats_file_beats_defaults() {
        let dir = std::env::temp_dir().join(format!("tibinlog-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "pd = \"f1:2379,f2:2379\"\nlisten = \"127.0.0.1:4000\"\ndata_dir = \"/f\"\nserver_id = 3\nuser = \"fu\"\nmax_binlog_size = 8192\n",
        )
        .expect("write");
        let env = |k: &str| match k {
            "TIBINLOG_SERVER_ID" => Some("5".to_owned()),
            "TIBINLOG_DATA_DIR" => Some("/e".to_owned()),
            "TIBINLOG_MARIADB_LISTEN" => Some("127.0.0.1:3307".to_owned()),
            _ => None,
        };
        let args = ServerArgs {
            data_dir: Some("/c".into()),
            config: Some(file.clone()),
            ..ServerArgs::default()
        };
        let cfg = resolve(args, &env).expect("resolve");
        assert_eq!(cfg.pd_addrs, ["f1:2379", "f2:2379"]);
        assert_eq!(cfg.listen.port(), 4000);
        assert_eq!(cfg.mariadb_listen.map(|a| a.port()), Some(3307));
        assert_eq!(cfg.data_dir, PathBuf::from("/c"));
        assert_eq!(cfg.server_id, 5);
        assert_eq!(cfg.max_binlog_size, 8192);
        assert!(cfg.users.contains_key("fu"));
        assert_eq!(cfg.server_uuid, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn toml_subset() {
        let v = parse_toml(
            "# c\npd = [\"a:1\", 'b:2'] # x\nserver_id = 1_000\nlisten = \"h:\\\"1\"\n\n",
        )
        .expect("parse");
        assert_eq!(
            v,
            serde_json::json!({"pd": ["a:1", "b:2"], "server_id": 1000, "listen": "h:\"1"})
        );
        assert!(parse_toml("[t]").expect_err("table").contains("line 1"));
        assert!(parse_toml("a = 1\nb = x")
            .expect_err("bare")
            .contains("line 2"));
        assert!(parse_toml("a = \"x").is_err());
        assert!(parse_toml("a = 1\na = 2")
            .expect_err("dup")
            .contains("twice"));
        let dir =
            std::env::temp_dir().join(format!("tibinlog-config-unknown-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("c.toml");
        std::fs::write(&f, "bogus = 1\n").expect("write");
        assert!(format!("{:#}", FileConfig::load(&f).expect_err("unknown key")).contains("bogus"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        let base = || ServerArgs {
            pd: vec!["p:1".into()],
            data_dir: Some("/d".into()),
            ..ServerArgs::default()
        };
        let err = |a: ServerArgs| format!("{:#}", resolve(a, &no_env).expect_err("must fail"));
        assert!(err(ServerArgs::default()).contains("PD"));
        assert!(err(ServerArgs {
            mariadb_listen: Some("nope".into()),
            ..base()
        })
        .contains("MariaDB listen address"));
        assert!(err(ServerArgs {
            listen: Some("nope".into()),
            ..base()
        })
        .contains("listen"));
        assert!(err(ServerArgs {
            server_uuid: Some("x".into()),
            ..base()
        })
        .contains("uuid"));
        assert!(err(ServerArgs {
            tls_cert: Some("c".into()),
            ..base()
        })
        .contains("TLS"));
        assert!(err(ServerArgs {
            filter: vec!["a.b.c".into()],
            ..base()
        })
        .contains("filter"));
        let cfg = resolve(base(), &no_env).expect("defaults");
        assert_eq!(cfg.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(cfg.users.get("root").map(String::as_str), Some(""));
    }
}

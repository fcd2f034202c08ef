//! The settings table: every setting's section, key, flag, kind and help, in the order
//! `--print-config` shows them (a data table: it may run long).

use super::ENV_PREFIX;

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

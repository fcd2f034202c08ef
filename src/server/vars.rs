//! System variables (the names and values of MySQL 8.0); the per-session values live in
//! [`super::session::Session`].
//!
//! Global values are computed on demand from the configuration and the binlog source, so
//! `@@gtid_executed` is always current. A session may override session-settable variables with
//! `SET`, and keeps its user variables (`@master_binlog_checksum`, `@slave_uuid`, …), which the
//! dump consults when it starts.

use std::collections::BTreeMap;

use super::source::BinlogSource;

/// The fixed part of the server's identity, shared by every session.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    /// `@@version`, also the greeting's version (behind `5.5.5-` when `mariadb`).
    pub version: String,
    /// The listener greets as MariaDB ([`super::ServerConfig::mariadb`]).
    pub mariadb: bool,
    pub server_id: u32,
    /// Canonical lower-case UUID text (the SID of our GTIDs).
    pub server_uuid: String,
    /// `@@max_binlog_size`: the size at which the binlog rotates.
    pub max_binlog_size: u64,
    /// `@@binlog_expire_logs_seconds`: files older than this are purged (0 = never).
    pub expire_logs_seconds: u64,
    /// `@@net_write_timeout` in seconds.
    pub net_write_timeout: u64,
    /// `@@max_connections`, `@@connect_timeout` and `@@wait_timeout`.
    pub limits: super::Limits,
    /// TLS is offered (`@@have_ssl` YES).
    pub tls: bool,
    /// `@@require_secure_transport`.
    pub require_secure_transport: bool,
    /// `@@ssl_ca`: the CA of client certificates, if one is configured.
    pub ssl_ca: Option<String>,
    /// `@@default_authentication_plugin`: the plugin the greeting announces.
    pub auth_plugin: &'static str,
}

pub use super::mysql_vars::VarType;

use VarType::{Bool, Int, Text, UInt};

/// Variables whose value never changes while the server runs, with their type.
const STATIC_VARS: &[(&str, VarType, &str)] = &[
    ("auto_increment_increment", UInt, "1"),
    ("auto_increment_offset", UInt, "1"),
    ("autocommit", Bool, "ON"),
    ("binlog_format", Text, "ROW"),
    ("binlog_row_image", Text, "FULL"),
    ("binlog_row_value_options", Text, ""),
    ("binlog_transaction_compression", Bool, "OFF"),
    ("character_set_client", Text, "utf8mb4"),
    ("character_set_connection", Text, "utf8mb4"),
    ("character_set_database", Text, "utf8mb4"),
    ("character_set_results", Text, "utf8mb4"),
    ("character_set_server", Text, "utf8mb4"),
    ("character_set_system", Text, "utf8mb3"),
    ("collation_connection", Text, "utf8mb4_0900_ai_ci"),
    ("collation_database", Text, "utf8mb4_0900_ai_ci"),
    ("collation_server", Text, "utf8mb4_0900_ai_ci"),
    ("enforce_gtid_consistency", Text, "ON"),
    ("explicit_defaults_for_timestamp", Bool, "ON"),
    ("foreign_key_checks", Bool, "ON"),
    ("group_concat_max_len", UInt, "1024"),
    ("gtid_mode", Text, "ON"),
    ("init_connect", Text, ""),
    ("innodb_lock_wait_timeout", UInt, "50"),
    ("interactive_timeout", UInt, "28800"),
    ("license", Text, "GPL"),
    // Debezium's snapshot sets it (`SET SESSION lock_wait_timeout=…`) and fails on an error.
    ("lock_wait_timeout", UInt, "31536000"),
    ("log_bin", Bool, "ON"),
    ("log_bin_basename", Text, "binlog"),
    ("log_replica_updates", Bool, "ON"),
    ("log_slave_updates", Bool, "ON"),
    ("lower_case_table_names", UInt, "0"),
    ("max_allowed_packet", UInt, "67108864"),
    ("max_execution_time", UInt, "0"),
    // MariaDB's statement timeout (seconds): mariadb-dump sets it on a server that greets as
    // MariaDB (`SET @@MAX_STATEMENT_TIME=0.000000`).
    ("max_statement_time", Text, "0.000000"),
    ("names", Text, "utf8mb4"),
    ("net_buffer_length", UInt, "16384"),
    ("net_read_timeout", UInt, "30"),
    ("performance_schema", Bool, "OFF"),
    ("query_cache_size", UInt, "0"),
    ("query_cache_type", Text, "OFF"),
    ("optimizer_switch", Text, OPTIMIZER_SWITCH),
    // Every write is refused: a read-only server, as MySQL says it of a replica.
    ("read_only", Bool, "ON"),
    ("session_track_schema", Bool, "ON"),
    ("session_track_state_change", Bool, "OFF"),
    (
        "session_track_system_variables",
        Text,
        "time_zone,autocommit,character_set_client,character_set_results,character_set_connection",
    ),
    ("session_track_transaction_info", Text, "OFF"),
    ("skip_replication", Bool, "OFF"),
    ("super_read_only", Bool, "ON"),
    ("sql_auto_is_null", Bool, "OFF"),
    ("sql_log_bin", Bool, "ON"),
    ("sql_mode", Text, "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"),
    ("sql_quote_show_create", Bool, "ON"),
    ("sql_safe_updates", Bool, "OFF"),
    ("sql_select_limit", UInt, "18446744073709551615"),
    ("system_time_zone", Text, "UTC"),
    ("time_zone", Text, "SYSTEM"),
    ("transaction_isolation", Text, "REPEATABLE-READ"),
    ("transaction_read_only", Bool, "OFF"),
    ("tx_isolation", Text, "REPEATABLE-READ"),
    ("tx_read_only", Bool, "OFF"),
    ("unique_checks", Bool, "ON"),
    ("version_comment", Text, "tibinlog: TiDB binlog master"),
    ("version_compile_machine", Text, "x86_64"),
    ("version_compile_os", Text, "Linux"),
];

/// Variables computed from the configuration and the binlog ([`global_variables`]).
const COMPUTED_VARS: &[(&str, VarType)] = &[
    ("binlog_checksum", Text),
    ("binlog_row_metadata", Text),
    ("binlog_expire_logs_seconds", UInt),
    ("connect_timeout", UInt),
    ("default_authentication_plugin", Text),
    ("gtid_binlog_pos", Text),
    ("gtid_binlog_state", Text),
    ("gtid_current_pos", Text),
    ("gtid_domain_id", UInt),
    ("gtid_executed", Text),
    ("gtid_purged", Text),
    ("gtid_slave_pos", Text),
    ("gtid_strict_mode", Bool),
    ("have_openssl", Text),
    ("have_ssl", Text),
    ("max_binlog_size", UInt),
    ("max_connections", UInt),
    ("net_write_timeout", UInt),
    ("require_secure_transport", Bool),
    ("server_id", UInt),
    ("ssl_ca", Text),
    ("server_uuid", Text),
    // The read timestamp of the session's snapshot (TiDB's name); empty when none is pinned.
    ("tidb_snapshot", Text),
    ("version", Text),
    ("wait_timeout", UInt),
];

/// The type of system variable `name` (lower case), or `None` if the server has no such
/// variable.
pub fn var_type(name: &str) -> Option<VarType> {
    STATIC_VARS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, t, _)| *t)
        .or_else(|| {
            COMPUTED_VARS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| *t)
        })
        .or_else(|| super::mysql_vars::lookup(name).map(|v| v.ty))
}

/// True when the registry itself defines `name` (not only MySQL's list).
fn own(name: &str) -> bool {
    STATIC_VARS.iter().any(|(n, _, _)| *n == name) || COMPUTED_VARS.iter().any(|(n, _)| *n == name)
}

/// The value of a variable only MySQL's list knows, as a fresh MySQL 8.0 has it (`scope`
/// decides whether a session-only one has a value to give).
pub fn mysql_default(name: &str, scope: Scope) -> Option<String> {
    if own(name) {
        return None;
    }
    let v = super::mysql_vars::lookup(name)?;
    let answers = match scope {
        Scope::Global => v.scope != super::mysql_vars::VarScope::Session,
        Scope::Session => true,
    };
    answers.then(|| v.default.clone())
}

/// Every variable only MySQL's list knows that has a global value, with its default (the rest
/// of `SHOW VARIABLES`).
pub fn mysql_defaults() -> impl Iterator<Item = (&'static str, String)> {
    super::mysql_vars::global_defaults()
        .filter(|(n, _)| !own(n))
        .map(|(n, v)| (n, v.default.clone()))
}

/// Why `SET [SESSION] name` is refused: a variable MySQL keeps only globally (1229).
pub fn session_refusal(name: &str) -> Option<String> {
    let v = super::mysql_vars::lookup(name)?;
    (v.scope == super::mysql_vars::VarScope::Global).then(|| {
        format!("Variable '{name}' is a GLOBAL variable and should be set with SET GLOBAL")
    })
}

/// A number clamped into MySQL's range for `name`, as MySQL stores an out-of-range SET.
fn clamp(name: &str, n: i128) -> i128 {
    match super::mysql_vars::lookup(name).and_then(|v| v.range) {
        Some((lo, hi)) => n.clamp(lo, hi),
        None => n,
    }
}

/// MySQL 8.0.31's default `@@optimizer_switch` (`mysqld --verbose --help`). tibinlog plans
/// nothing by it; mysqldump and mariadb-dump set `semijoin=off`.
const OPTIMIZER_SWITCH: &str = "index_merge=on,index_merge_union=on,index_merge_sort_union=on,\
index_merge_intersection=on,engine_condition_pushdown=on,index_condition_pushdown=on,mrr=on,\
mrr_cost_based=on,block_nested_loop=on,batched_key_access=off,materialization=on,semijoin=on,\
loosescan=on,firstmatch=on,duplicateweedout=on,subquery_materialization_cost_based=on,\
use_index_extensions=on,condition_fanout_filter=on,derived_merge=on,use_invisible_indexes=off,\
skip_scan=on,hash_join=on,subquery_to_derived=off,prefer_ordering_index=on,\
hypergraph_optimizer=off,derived_condition_pushdown=on";

/// `SET optimizer_switch = 'flag=on|off|default,…'` as MySQL stores it: every flag listed,
/// the named ones changed (`default` alone resets all). Flags are merged into the default
/// value, not the session's current one. `None` for an unknown flag or value.
fn optimizer_switch(assigned: &str) -> Option<String> {
    let mut flags: Vec<(&str, &str)> = OPTIMIZER_SWITCH
        .split(',')
        .filter_map(|f| f.split_once('='))
        .collect();
    for item in assigned.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        if item.eq_ignore_ascii_case("default") {
            continue;
        }
        let (name, value) = item.split_once('=')?;
        let (name, value) = (
            name.trim().to_ascii_lowercase(),
            value.trim().to_ascii_lowercase(),
        );
        let i = flags.iter().position(|(n, _)| *n == name)?;
        let default = OPTIMIZER_SWITCH
            .split(',')
            .find_map(|f| f.strip_prefix(flags[i].0)?.strip_prefix('='))?;
        flags[i].1 = match value.as_str() {
            "on" => "on",
            "off" => "off",
            "default" => default,
            _ => return None,
        };
    }
    Some(
        flags
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// A value assigned with `SET name = value`, checked against the variable's type and stored as
/// `SHOW VARIABLES` shows it (ON/OFF for booleans). Errors are MySQL's: 1231 for a value the
/// variable cannot take, 1232 for a value of the wrong type.
pub fn normalize(
    name: &str,
    value: Option<String>,
) -> Result<Option<String>, (tibinlog_protocol::wire::errors::ErrorCode, String)> {
    use tibinlog_protocol::wire::errors::{ER_WRONG_TYPE_FOR_VAR, ER_WRONG_VALUE_FOR_VAR};
    let wrong_value = |v: &str| {
        (
            ER_WRONG_VALUE_FOR_VAR,
            format!("Variable '{name}' can't be set to the value of '{v}'"),
        )
    };
    let Some(ty) = var_type(name) else {
        return Ok(value);
    };
    let Some(v) = value else {
        return match ty {
            Text => Ok(None),
            _ => Err(wrong_value("NULL")),
        };
    };
    let t = v.trim();
    match ty {
        Bool => match t.to_ascii_uppercase().as_str() {
            "1" | "ON" | "TRUE" => Ok(Some("ON".into())),
            "0" | "OFF" | "FALSE" => Ok(Some("OFF".into())),
            _ => Err(wrong_value(&v)),
        },
        Int => t
            .parse::<i64>()
            .map(|n| Some(clamp(name, i128::from(n)).to_string()))
            .map_err(|_| {
                (
                    ER_WRONG_TYPE_FOR_VAR,
                    format!("Incorrect argument type to variable '{name}'"),
                )
            }),
        UInt => match (t.parse::<u64>(), t.parse::<i64>()) {
            (Ok(n), _) => Ok(Some(clamp(name, i128::from(n)).to_string())),
            // MySQL clamps a negative value of an unsigned variable to its minimum.
            (Err(_), Ok(_)) => Ok(Some(clamp(name, 0).to_string())),
            _ => Err((
                ER_WRONG_TYPE_FOR_VAR,
                format!("Incorrect argument type to variable '{name}'"),
            )),
        },
        Text if name == "optimizer_switch" => {
            optimizer_switch(t).map(Some).ok_or_else(|| wrong_value(&v))
        }
        Text => Ok(Some(v)),
    }
}

/// Every global variable with its current value, sorted by name (the order of `SHOW VARIABLES`).
/// `executed` is `@@gtid_executed` as the session sees it (its read lock's, or the visible one).
pub fn global_variables(
    id: &ServerIdentity,
    source: &dyn BinlogSource,
    executed: &tibinlog_protocol::binlog::GtidSet,
) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = STATIC_VARS
        .iter()
        .map(|(k, _, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    m.insert("version".into(), id.version.clone());
    m.insert(
        "binlog_checksum".into(),
        source.checksum_alg().name().to_owned(),
    );
    m.insert(
        "binlog_row_metadata".into(),
        source.row_metadata().name().to_owned(),
    );
    m.insert("server_id".into(), id.server_id.to_string());
    m.insert("server_uuid".into(), id.server_uuid.clone());
    m.insert("max_binlog_size".into(), id.max_binlog_size.to_string());
    m.insert("net_write_timeout".into(), id.net_write_timeout.to_string());
    m.insert(
        "max_connections".into(),
        id.limits.max_connections.to_string(),
    );
    m.insert(
        "connect_timeout".into(),
        id.limits.connect_timeout.as_secs().to_string(),
    );
    m.insert(
        "wait_timeout".into(),
        id.limits.wait_timeout.as_secs().to_string(),
    );
    m.insert(
        "binlog_expire_logs_seconds".into(),
        id.expire_logs_seconds.to_string(),
    );
    let ssl = if id.tls { "YES" } else { "DISABLED" };
    m.insert("have_ssl".into(), ssl.into());
    m.insert("have_openssl".into(), ssl.into());
    let secure = if id.require_secure_transport {
        "ON"
    } else {
        "OFF"
    };
    m.insert("require_secure_transport".into(), secure.into());
    m.insert("ssl_ca".into(), id.ssl_ca.clone().unwrap_or_default());
    m.insert(
        "default_authentication_plugin".into(),
        id.auth_plugin.to_owned(),
    );
    m.insert("tidb_snapshot".into(), String::new());
    m.insert("gtid_executed".into(), executed.to_string());
    m.insert("gtid_purged".into(), source.gtid_purged().to_string());
    // MariaDB's GTID variables, which MariaDB peers read: our GTIDs as MariaDB names
    // them, `0-<server_id>-<last gno>` (domain 0), empty before the first transaction.
    let pos = mariadb_gtid_pos(id, executed);
    for k in ["gtid_binlog_pos", "gtid_binlog_state", "gtid_current_pos"] {
        m.insert(k.into(), pos.clone());
    }
    m.insert("gtid_domain_id".into(), "0".into());
    m.insert("gtid_slave_pos".into(), String::new());
    m.insert("gtid_strict_mode".into(), "OFF".into());
    debug_assert!(m.keys().all(|k| var_type(k).is_some()));
    m
}

/// `@@gtid_binlog_pos`: `0-<server_id>-<last gno of our SID>`, or empty.
pub fn mariadb_gtid_pos(
    id: &ServerIdentity,
    executed: &tibinlog_protocol::binlog::GtidSet,
) -> String {
    let sid = tibinlog_protocol::binlog::Sid::parse(&id.server_uuid)
        .unwrap_or(tibinlog_protocol::binlog::Sid::ZERO);
    match executed.last_gno(&sid) {
        0 => String::new(),
        n => format!("0-{}-{n}", id.server_id),
    }
}

/// Which value of a variable a reference asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `@@x` or `@@session.x`: the session's value if it set one.
    Session,
    /// `@@global.x`.
    Global,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_only_mysql_knows_answer_with_its_default_scope_and_range() {
        assert_eq!(var_type("innodb_flush_log_at_trx_commit"), Some(UInt));
        assert_eq!(
            mysql_default("innodb_flush_log_at_trx_commit", Scope::Global).as_deref(),
            Some("1")
        );
        // Session-only: no global value.
        assert_eq!(mysql_default("warning_count", Scope::Global), None);
        assert_eq!(
            mysql_default("warning_count", Scope::Session).as_deref(),
            Some("0")
        );
        // The registry's own answer wins.
        assert_eq!(mysql_default("read_only", Scope::Global), None);
        assert!(session_refusal("innodb_flush_log_at_trx_commit").is_some());
        assert!(session_refusal("max_execution_time").is_none());
        // SET clamps into MySQL's range.
        let set = |v: &str| normalize("max_allowed_packet", Some(v.into())).expect("ok");
        assert_eq!(set("1").as_deref(), Some("1024"));
        assert_eq!(set("99999999999").as_deref(), Some("1073741824"));
        assert!(var_type("no_such_variable").is_none());
    }

    #[test]
    fn optimizer_switch_merges_flags_into_the_default() {
        let v = normalize("optimizer_switch", Some("semijoin=off".into()))
            .expect("valid")
            .expect("value");
        assert!(v.starts_with("index_merge=on,"), "{v}");
        assert!(v.contains(",semijoin=off,loosescan=on,"), "{v}");
        assert_eq!(v.split(',').count(), OPTIMIZER_SWITCH.split(',').count());
        let back = normalize(
            "optimizer_switch",
            Some("SEMIJOIN = default,mrr=off".into()),
        )
        .expect("valid")
        .expect("value");
        assert!(
            back.contains(",semijoin=on,") && back.contains(",mrr=off,"),
            "{back}"
        );
        assert_eq!(
            normalize("optimizer_switch", Some("default".into()))
                .expect("valid")
                .as_deref(),
            Some(OPTIMIZER_SWITCH)
        );
        for bad in ["semijoin=maybe", "no_such_flag=on", "semijoin"] {
            let e = normalize("optimizer_switch", Some(bad.into())).expect_err(bad);
            assert_eq!(e.0.code, 1231, "{bad}");
        }
    }
}

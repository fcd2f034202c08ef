//! Every system variable of MySQL 8.0 as data (`mysql80_variables.tsv`, read from a real
//! 8.0.31 server by `scripts/mysql80-variables.py`): its scope, numeric range and default.
//! The server's own registry (`server/vars.rs`) answers for what tibinlog decides; a name only
//! this list knows still answers as MySQL 8.0 would by default, can be set in a session when
//! MySQL allows that, and is checked against its range, so that a tool reading or setting
//! any MySQL variable gets MySQL's answer instead of 1193.

use std::collections::HashMap;
use std::sync::LazyLock;

/// How a variable's value is typed. `SELECT @@x` gives an integer for `Bool` (1/0), `Int` and
/// `UInt`, a string for `Text`; `SHOW VARIABLES` shows a `Bool` as ON/OFF, as MySQL does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarType {
    Bool,
    Int,
    UInt,
    Text,
}

/// Where a variable lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarScope {
    Global,
    Session,
    Both,
}

/// One MySQL 8.0 system variable.
#[derive(Debug, Clone)]
pub struct MysqlVar {
    pub scope: VarScope,
    pub ty: VarType,
    /// Inclusive range of a numeric variable (`None` for the others).
    pub range: Option<(i128, i128)>,
    /// The value a fresh server has (empty where it depends on the machine).
    pub default: String,
}

const DATA: &str = include_str!("mysql80_variables.tsv");

/// Variables whose default is ON or OFF but that take other words too (enumerations): text,
/// not booleans.
const ENUMS_WITH_ON_OFF: &[&str] = &[
    "enforce_gtid_consistency",
    "event_scheduler",
    "gtid_mode",
    "myisam_recover_options",
    "replica_skip_errors",
    "session_track_gtids",
    "session_track_transaction_info",
    "slave_skip_errors",
    "ssl_fips_mode",
    "use_secondary_engine",
];

static VARS: LazyLock<HashMap<&'static str, MysqlVar>> = LazyLock::new(|| {
    DATA.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(parse_line)
        .collect()
});

fn parse_line(line: &'static str) -> Option<(&'static str, MysqlVar)> {
    let mut f = line.split('\t');
    let (name, scope, lo, hi) = (f.next()?, f.next()?, f.next()?, f.next()?);
    let default = f
        .next()
        .unwrap_or("")
        .replace("\\t", "\t")
        .replace("\\\\", "\\");
    let scope = match scope {
        "global" => VarScope::Global,
        "session" => VarScope::Session,
        _ => VarScope::Both,
    };
    let (lo, hi) = (lo.parse::<i128>().ok()?, hi.parse::<i128>().ok()?);
    let numeric = !(lo == 0 && hi == 0);
    let ty = if (default == "ON" || default == "OFF") && !ENUMS_WITH_ON_OFF.contains(&name) {
        VarType::Bool
    } else if numeric && lo < 0 {
        VarType::Int
    } else if numeric {
        VarType::UInt
    } else {
        VarType::Text
    };
    let range = numeric.then_some((lo, hi));
    Some((
        name,
        MysqlVar {
            scope,
            ty,
            range,
            default,
        },
    ))
}

/// The MySQL 8.0 variable `name` (lower case), if MySQL has one.
pub fn lookup(name: &str) -> Option<&'static MysqlVar> {
    VARS.get(name)
}

/// Every MySQL 8.0 variable with a global value, and that value by default.
pub fn global_defaults() -> impl Iterator<Item = (&'static str, &'static MysqlVar)> {
    VARS.iter()
        .filter(|(_, v)| v.scope != VarScope::Session)
        .map(|(k, v)| (*k, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_holds_mysqls_variables_with_their_scopes_and_ranges() {
        assert!(VARS.len() > 600, "{}", VARS.len());
        let v = lookup("max_allowed_packet").expect("known");
        assert_eq!(v.scope, VarScope::Both);
        assert_eq!(v.range, Some((1024, 1_073_741_824)));
        assert_eq!(v.default, "67108864");
        assert_eq!(
            lookup("innodb_flush_log_at_trx_commit").expect("known").ty,
            VarType::UInt
        );
        let v = lookup("gtid_mode").expect("known");
        assert_eq!((v.scope, v.ty), (VarScope::Global, VarType::Text));
        assert_eq!(
            lookup("warning_count").expect("known").scope,
            VarScope::Session
        );
        assert_eq!(lookup("autocommit").expect("known").ty, VarType::Bool);
        // Nothing of the machine the list was read on.
        assert!(VARS.values().all(|v| !v.default.contains('/')));
        assert!(lookup("no_such_variable").is_none());
    }
}

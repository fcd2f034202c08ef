//! MySQL server error codes with their SQL states, as a replica or SQL client expects them.
//!
//! Codes and states follow MySQL's `include/mysqld_error.h` / `sql/share/messages_to_clients.txt`
//! (cross-checked against the table in `datafuselabs/opensrv:mysql/src/errorcodes.rs`).
//! Clients match on the code (and Canal / connector-java also on message substrings, see the
//! message constants below), so these are part of the protocol.

/// A MySQL error: the numeric code and its five-character SQL state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode {
    /// The `ER_*` number sent in the ERR packet.
    pub code: u16,
    /// The SQLSTATE sent after the `#` marker.
    pub sql_state: [u8; 5],
}

impl ErrorCode {
    /// The SQL state as text (always ASCII).
    pub fn sql_state_str(&self) -> &str {
        std::str::from_utf8(&self.sql_state).unwrap_or("HY000")
    }
}

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $name:ident = $code:literal, $state:literal; )*) => {
        $(
            $(#[$doc])*
            pub const $name: ErrorCode = ErrorCode { code: $code, sql_state: *$state };
        )*
        /// Every code defined in this module (for tests and lookups).
        pub const ALL: &[(&str, ErrorCode)] = &[$((stringify!($name), $name)),*];
    };
}

error_codes! {
    /// Error reading file (a temporary file of a statement).
    ER_ERROR_ON_READ = 1024, b"HY000";
    /// Error writing file (a temporary file of a statement).
    ER_ERROR_ON_WRITE = 1026, b"HY000";
    /// Out of sort memory.
    ER_OUT_OF_SORTMEMORY = 1038, b"HY001";
    /// Too many connections.
    ER_CON_COUNT_ERROR = 1040, b"08004";
    /// Bad handshake (malformed connection-phase packet).
    ER_HANDSHAKE_ERROR = 1043, b"08S01";
    /// Access denied for user to database.
    ER_DBACCESS_DENIED_ERROR = 1044, b"42000";
    /// Access denied for user (wrong password, unknown user).
    ER_ACCESS_DENIED_ERROR = 1045, b"28000";
    /// No database selected.
    ER_NO_DB_ERROR = 1046, b"3D000";
    /// Unknown command: the answer to every command byte we do not implement.
    ER_UNKNOWN_COM_ERROR = 1047, b"08S01";
    /// Unknown database.
    ER_BAD_DB_ERROR = 1049, b"42000";
    /// Column is ambiguous.
    ER_NON_UNIQ_ERROR = 1052, b"23000";
    /// Server shutdown in progress.
    ER_SERVER_SHUTDOWN = 1053, b"08S01";
    /// Unknown column.
    ER_BAD_FIELD_ERROR = 1054, b"42S22";
    /// SQL syntax error: the answer to statements we do not understand.
    ER_PARSE_ERROR = 1064, b"42000";
    /// Unknown thread id (KILL of a session that does not exist).
    ER_NO_SUCH_THREAD = 1094, b"HY000";
    /// You are not owner of thread (KILL of another user's session without CONNECTION_ADMIN).
    ER_KILL_DENIED_ERROR = 1095, b"HY000";
    /// No tables used (`SELECT *` without FROM).
    ER_NO_TABLES_USED = 1096, b"HY000";
    /// Unknown error.
    ER_UNKNOWN_ERROR = 1105, b"HY000";
    /// Unknown table in a qualified wildcard or a multi-table statement.
    ER_UNKNOWN_TABLE = 1109, b"42S02";
    /// Unknown character set (a charset introducer such as `_latin9'x'`).
    ER_UNKNOWN_CHARACTER_SET = 1115, b"42000";
    /// There is no such grant defined for user (SHOW GRANTS FOR an unknown account).
    ER_NONEXISTING_GRANT = 1141, b"42000";
    /// Command denied to user for table (SELECT or SHOW without the SELECT privilege).
    ER_TABLEACCESS_DENIED_ERROR = 1142, b"42000";
    /// Table does not exist.
    ER_NO_SUCH_TABLE = 1146, b"42S02";
    /// Got a packet bigger than max_allowed_packet.
    ER_NET_PACKET_TOO_LARGE = 1153, b"08S01";
    /// Got packets out of order.
    ER_NET_PACKETS_OUT_OF_ORDER = 1156, b"08S01";
    /// Unknown system variable.
    ER_UNKNOWN_SYSTEM_VARIABLE = 1193, b"HY000";
    /// Incorrect arguments to a function or operator.
    ER_WRONG_ARGUMENTS = 1210, b"HY000";
    /// Error when executing command (e.g. SHOW BINLOG EVENTS on a bad file).
    ER_ERROR_WHEN_EXECUTING_COMMAND = 1220, b"HY000";
    /// Access denied; you need (at least one of) the X privilege(s).
    ER_SPECIFIC_ACCESS_DENIED_ERROR = 1227, b"42000";
    /// Variable can't be set to the value.
    ER_WRONG_VALUE_FOR_VAR = 1231, b"42000";
    /// Incorrect argument type to variable.
    ER_WRONG_TYPE_FOR_VAR = 1232, b"42000";
    /// This version of MySQL doesn't yet support the feature.
    ER_NOT_SUPPORTED_YET = 1235, b"42000";
    /// Fatal error reading the binlog: unknown file/position, purged GTIDs, checksum mismatch.
    ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236, b"HY000";
    /// Variable is a SESSION / GLOBAL variable and can't be used with the other scope.
    ER_INCORRECT_GLOBAL_LOCAL_VAR = 1238, b"HY000";
    /// A row value where one column is wanted, or rows of different widths compared.
    ER_OPERAND_COLUMNS = 1241, b"21000";
    /// Unknown prepared statement handler.
    ER_UNKNOWN_STMT_HANDLER = 1243, b"HY000";
    /// Client does not support the authentication protocol requested by the server.
    ER_NOT_SUPPORTED_AUTH_MODE = 1251, b"08004";
    /// The server is running with an option that prevents this statement (e.g. read-only).
    ER_OPTION_PREVENTS_STATEMENT = 1290, b"HY000";
    /// This command is not supported in the prepared statement protocol yet.
    ER_UNSUPPORTED_PS = 1295, b"HY000";
    /// FUNCTION does not exist.
    ER_SP_DOES_NOT_EXIST = 1305, b"42000";
    /// Query execution was interrupted (KILL QUERY, a timeout).
    ER_QUERY_INTERRUPTED = 1317, b"70100";
    /// 'db.t' is not VIEW (SHOW CREATE VIEW of a base table).
    ER_WRONG_OBJECT = 1347, b"HY000";
    /// Target log not found in binlog index (SHOW BINLOG EVENTS IN 'x').
    ER_UNKNOWN_TARGET_BINLOG = 1373, b"HY000";
    /// You are not using binary logging.
    ER_NO_BINARY_LOGGING = 1381, b"HY000";
    /// The statement has no open cursor (COM_STMT_FETCH without one).
    ER_STMT_HAS_NO_OPEN_CURSOR = 1421, b"HY000";
    /// Recursive view definition (a view that reads itself, or nesting past the limit).
    ER_VIEW_RECURSIVE = 1462, b"HY000";
    /// Thread stack overrun: what MySQL answers to an expression too deep to evaluate.
    ER_STACK_OVERRUN_NEED_MORE = 1436, b"HY000";
    /// Can't create more than max_prepared_stmt_count statements.
    ER_MAX_PREPARED_STMT_COUNT_REACHED = 1461, b"42000";
    /// Value is out of range (integer overflow in an expression).
    ER_DATA_OUT_OF_RANGE = 1690, b"22003";
    /// Malformed communication packet (a command payload that does not decode).
    ER_MALFORMED_PACKET = 1835, b"HY000";
    /// A purge stopped before a file being read (a warning: file … was not purged because it
    /// was being read by … thread(s)).
    ER_WARN_PURGE_LOG_IN_USE = 1867, b"HY000";
    /// A plain connection while `require_secure_transport` is ON.
    ER_SECURE_TRANSPORT_REQUIRED = 3159, b"HY000";
    /// The client was disconnected by the server because of inactivity (`wait_timeout`).
    ER_CLIENT_INTERACTION_TIMEOUT = 4031, b"HY000";
    /// `SET` of a variable MySQL keeps only globally, without GLOBAL.
    ER_GLOBAL_VARIABLE = 1229, b"HY000";
    /// A native function called with the wrong number of arguments.
    ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT = 1582, b"42000";
    /// A function argument that is not valid JSON text.
    ER_INVALID_JSON_TEXT_IN_PARAM = 3141, b"22032";
    /// A JSON path expression that does not parse.
    ER_INVALID_JSON_PATH = 3143, b"42000";
    /// A function argument of a type that cannot hold JSON.
    ER_INVALID_TYPE_FOR_JSON = 3146, b"22032";
}

// The texts of error 1236 ([`ER_MASTER_FATAL_ERROR_READING_BINLOG`]), MySQL's and MariaDB's:
// every refusal of a binlog dump takes its text from here.

/// Message for [`ER_MASTER_FATAL_ERROR_READING_BINLOG`] when the requested file is not in the
/// index (Canal matches the substring "not find first log file name").
pub const MSG_FIRST_LOG_NOT_FOUND: &str =
    "Could not find first log file name in binary log index file";

/// Message for [`ER_MASTER_FATAL_ERROR_READING_BINLOG`] when the requested GTIDs were purged
/// (Canal matches "purged binary logs").
pub const MSG_GTIDS_PURGED: &str = "The slave is connecting using CHANGE MASTER TO \
     MASTER_AUTO_POSITION = 1, but the master has purged binary logs containing GTIDs that the \
     slave requires.";

/// Message for [`ER_MASTER_FATAL_ERROR_READING_BINLOG`] when the start position is below 4.
pub const MSG_POS_BELOW_4: &str = "Client requested master to start replication from position < 4.";

/// Message for [`ER_MASTER_FATAL_ERROR_READING_BINLOG`] when the position is past the file end.
pub const MSG_POS_PAST_EOF: &str =
    "Client requested master to start replication from position > file size";

/// MySQL's text for a start position inside an event (the wording differs between MySQL versions).
pub const MSG_IMPOSSIBLE_POSITION: &str =
    "Client requested master to start replication from an impossible position";
/// MySQL's text when the replica has GTIDs of the server's UUID that it never wrote.
pub const MSG_MORE_GTIDS: &str = "Slave has more GTIDs than the master has, using the master's \
     SERVER_UUID. This may indicate that the end of the binary log was truncated or that the \
     last binary log file was lost, e.g., after a power or disk failure when sync_binlog != 1.";
/// MariaDB's text for a `@slave_connect_state` it cannot parse.
pub const MSG_MARIADB_MALFORMED_STATE: &str =
    "Out of memory or malformed slave request when obtaining start position from GTID state";
/// MariaDB's text for a `@slave_until_gtid` it cannot parse.
pub const MSG_MARIADB_MALFORMED_UNTIL: &str =
    "Out of memory or malformed slave request when obtaining UNTIL position sent from slave";
/// MariaDB's text when the GTIDs after the requested position are purged.
pub const MSG_MARIADB_PURGED: &str = "Could not find GTID state requested by slave in any binlog \
     files. Probably the slave state is too old and required binlog files have been purged.";
/// The server's text for a GTID connect from a client that did not announce GTID capability.
pub const MSG_MARIADB_CAPABILITY: &str = "A GTID start (@slave_connect_state) needs \
     @mariadb_slave_capability 4 (GTID-aware) or more";

/// MariaDB's text for a requested GTID (`domain-server-seq`) that is not in the binlog;
/// `diverged` when the binlog has a higher sequence number in that domain (MariaDB's ER_GTID_POSITION_NOT_FOUND_IN_BINLOG2).
pub fn msg_mariadb_gtid_not_in_binlog(g: &impl std::fmt::Display, diverged: bool) -> String {
    let mut m = format!(
        "Error: connecting slave requested to start from GTID {g}, which is not in the \
         master's binlog"
    );
    if diverged {
        m.push_str(
            ". Since the master's binlog contains GTIDs with higher sequence numbers, it \
             probably means that the slave has diverged due to executing extra erroneous \
             transactions",
        );
    }
    m
}

/// Message for [`ER_UNKNOWN_COM_ERROR`].
pub const MSG_UNKNOWN_COMMAND: &str = "Unknown command";

/// The text MySQL uses for [`ER_ACCESS_DENIED_ERROR`]:
/// `Access denied for user 'u'@'h' (using password: YES)`.
pub fn access_denied_message(user: &str, host: &str, using_password: bool) -> String {
    let yes_no = if using_password { "YES" } else { "NO" };
    format!("Access denied for user '{user}'@'{host}' (using password: {yes_no})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_states_are_ascii() {
        let mut seen = std::collections::HashSet::new();
        for (name, e) in ALL {
            assert!(seen.insert(e.code), "{name} duplicates code {}", e.code);
            assert!(e.sql_state.iter().all(u8::is_ascii_alphanumeric), "{name}");
            assert_eq!(e.sql_state_str().len(), 5);
        }
    }

    #[test]
    fn the_codes_replicas_depend_on() {
        assert_eq!(
            (
                ER_ACCESS_DENIED_ERROR.code,
                &ER_ACCESS_DENIED_ERROR.sql_state
            ),
            (1045, b"28000")
        );
        assert_eq!(
            (ER_UNKNOWN_COM_ERROR.code, &ER_UNKNOWN_COM_ERROR.sql_state),
            (1047, b"08S01")
        );
        assert_eq!(
            (ER_PARSE_ERROR.code, &ER_PARSE_ERROR.sql_state),
            (1064, b"42000")
        );
        assert_eq!(ER_MASTER_FATAL_ERROR_READING_BINLOG.code, 1236);
        assert_eq!(ER_OPTION_PREVENTS_STATEMENT.code, 1290);
        assert_eq!(ER_UNKNOWN_SYSTEM_VARIABLE.code, 1193);
        assert_eq!(ER_NO_SUCH_TABLE.code, 1146);
        assert_eq!(ER_BAD_DB_ERROR.code, 1049);
        assert_eq!(ER_SPECIFIC_ACCESS_DENIED_ERROR.code, 1227);
        assert_eq!(
            access_denied_message("repl", "10.0.0.1", true),
            "Access denied for user 'repl'@'10.0.0.1' (using password: YES)"
        );
    }
}

//! The columns of `SHOW REPLICA STATUS` and `SHOW SLAVE STATUS` as MySQL 8.0.31 sends them
//! (names, types, display lengths; every one NOT NULL). tibinlog is a source, never a
//! replica, so the answer is always an empty set, as MySQL answers on a server that replicates
//! from nothing; monitoring tools run the statement against every server and read the columns.

use tibinlog_protocol::wire::response::ColumnSpec;
use tibinlog_protocol::wire::{ColumnFlags, ColumnType};

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Long,
    LongLong,
}

use Kind::{Long, LongLong, Str};

/// `utf8mb3_general_ci`, the collation of the text columns.
const UTF8MB3_GENERAL_CI: u16 = 33;
/// `binary`, the collation of the numeric columns.
const BINARY: u16 = 63;

/// `(SHOW REPLICA STATUS name, SHOW SLAVE STATUS name, type, display length)`.
#[rustfmt::skip]
const COLUMNS: &[(&str, &str, Kind, u32)] = &[
    ("Replica_IO_State", "Slave_IO_State", Str, 42),
    ("Source_Host", "Master_Host", Str, 768),
    ("Source_User", "Master_User", Str, 291),
    ("Source_Port", "Master_Port", Long, 8),
    ("Connect_Retry", "Connect_Retry", Long, 11),
    ("Source_Log_File", "Master_Log_File", Str, 1536),
    ("Read_Source_Log_Pos", "Read_Master_Log_Pos", LongLong, 11),
    ("Relay_Log_File", "Relay_Log_File", Str, 1536),
    ("Relay_Log_Pos", "Relay_Log_Pos", LongLong, 11),
    ("Relay_Source_Log_File", "Relay_Master_Log_File", Str, 1536),
    ("Replica_IO_Running", "Slave_IO_Running", Str, 9),
    ("Replica_SQL_Running", "Slave_SQL_Running", Str, 9),
    ("Replicate_Do_DB", "Replicate_Do_DB", Str, 60),
    ("Replicate_Ignore_DB", "Replicate_Ignore_DB", Str, 60),
    ("Replicate_Do_Table", "Replicate_Do_Table", Str, 60),
    ("Replicate_Ignore_Table", "Replicate_Ignore_Table", Str, 69),
    ("Replicate_Wild_Do_Table", "Replicate_Wild_Do_Table", Str, 72),
    ("Replicate_Wild_Ignore_Table", "Replicate_Wild_Ignore_Table", Str, 84),
    ("Last_Errno", "Last_Errno", Long, 5),
    ("Last_Error", "Last_Error", Str, 60),
    ("Skip_Counter", "Skip_Counter", Long, 11),
    ("Exec_Source_Log_Pos", "Exec_Master_Log_Pos", LongLong, 11),
    ("Relay_Log_Space", "Relay_Log_Space", LongLong, 11),
    ("Until_Condition", "Until_Condition", Str, 18),
    ("Until_Log_File", "Until_Log_File", Str, 1536),
    ("Until_Log_Pos", "Until_Log_Pos", LongLong, 11),
    ("Source_SSL_Allowed", "Master_SSL_Allowed", Str, 21),
    ("Source_SSL_CA_File", "Master_SSL_CA_File", Str, 1536),
    ("Source_SSL_CA_Path", "Master_SSL_CA_Path", Str, 1536),
    ("Source_SSL_Cert", "Master_SSL_Cert", Str, 1536),
    ("Source_SSL_Cipher", "Master_SSL_Cipher", Str, 1536),
    ("Source_SSL_Key", "Master_SSL_Key", Str, 1536),
    ("Seconds_Behind_Source", "Seconds_Behind_Master", LongLong, 11),
    ("Source_SSL_Verify_Server_Cert", "Master_SSL_Verify_Server_Cert", Str, 9),
    ("Last_IO_Errno", "Last_IO_Errno", Long, 5),
    ("Last_IO_Error", "Last_IO_Error", Str, 60),
    ("Last_SQL_Errno", "Last_SQL_Errno", Long, 5),
    ("Last_SQL_Error", "Last_SQL_Error", Str, 60),
    ("Replicate_Ignore_Server_Ids", "Replicate_Ignore_Server_Ids", Str, 1536),
    ("Source_Server_Id", "Master_Server_Id", Long, 9),
    ("Source_UUID", "Master_UUID", Str, 108),
    ("Source_Info_File", "Master_Info_File", Str, 3072),
    ("SQL_Delay", "SQL_Delay", Long, 11),
    ("SQL_Remaining_Delay", "SQL_Remaining_Delay", Long, 9),
    ("Replica_SQL_Running_State", "Slave_SQL_Running_State", Str, 60),
    ("Source_Retry_Count", "Master_Retry_Count", LongLong, 11),
    ("Source_Bind", "Master_Bind", Str, 768),
    ("Last_IO_Error_Timestamp", "Last_IO_Error_Timestamp", Str, 60),
    ("Last_SQL_Error_Timestamp", "Last_SQL_Error_Timestamp", Str, 60),
    ("Source_SSL_Crl", "Master_SSL_Crl", Str, 1536),
    ("Source_SSL_Crlpath", "Master_SSL_Crlpath", Str, 1536),
    ("Retrieved_Gtid_Set", "Retrieved_Gtid_Set", Str, 0),
    ("Executed_Gtid_Set", "Executed_Gtid_Set", Str, 0),
    ("Auto_Position", "Auto_Position", Long, 9),
    ("Replicate_Rewrite_DB", "Replicate_Rewrite_DB", Str, 72),
    ("Channel_Name", "Channel_Name", Str, 576),
    ("Source_TLS_Version", "Master_TLS_Version", Str, 1536),
    ("Source_public_key_path", "Master_public_key_path", Str, 1536),
    ("Get_Source_public_key", "Get_master_public_key", Long, 9),
    ("Network_Namespace", "Network_Namespace", Str, 579),
];

/// The result columns; `slave` for `SHOW SLAVE STATUS`'s names.
pub(super) fn columns(slave: bool) -> Vec<ColumnSpec> {
    COLUMNS
        .iter()
        .map(|&(replica_name, slave_name, kind, length)| {
            let name = if slave { slave_name } else { replica_name };
            let mut c = match kind {
                Str => ColumnSpec::new(
                    name,
                    ColumnType::MYSQL_TYPE_VAR_STRING,
                    UTF8MB3_GENERAL_CI,
                    length,
                ),
                Long => ColumnSpec::new(name, ColumnType::MYSQL_TYPE_LONG, BINARY, length),
                LongLong => ColumnSpec::new(name, ColumnType::MYSQL_TYPE_LONGLONG, BINARY, length),
            };
            c.flags = ColumnFlags::NOT_NULL_FLAG;
            if !matches!(kind, Str) {
                c.flags |= ColumnFlags::NUM_FLAG;
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_have_mysqls_sixty_columns() {
        let (new, old) = (columns(false), columns(true));
        assert_eq!((new.len(), old.len()), (60, 60));
        assert_eq!(new[32].name, "Seconds_Behind_Source");
        assert_eq!(old[32].name, "Seconds_Behind_Master");
        assert_eq!(old[58].name, "Get_master_public_key");
        assert_eq!(new[6].column_type, ColumnType::MYSQL_TYPE_LONGLONG);
    }
}

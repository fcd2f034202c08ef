//! QUERY_EVENT (2): `BEGIN`, DDL, `COMMIT` of non-transactional work.
//!
//! ```text
//! post-header (13):
//! +-------------+------------+-----------+------------+------------------+
//! | thread id 4 | exec time 4| db len 1  | error 2    | status vars len 2|
//! +-------------+------------+-----------+------------+------------------+
//! body:
//! +-----------------------------+-----------+-----+------------------------+
//! | status variables (code+val) | db name   | NUL | SQL text (no NUL)      |
//! +-----------------------------+-----------+-----+------------------------+
//! ```
//! Status variables are written in the order `Query_log_event::write` uses, which is ascending
//! except that Q_CATALOG_NZ (6) precedes Q_AUTO_INCREMENT (3) and Q_CHARSET (4); a MySQL 8.0.22
//! file shows `00 01 06 04 05 0b 0c 0d 11 12`. Codes 2, 10, 14 and 15 are never written.

use crate::binlog::error::{BinlogError, Result};
use crate::binlog::header::EventType;
use crate::binlog::writer::EventBody;

/// Status variable codes.
#[allow(missing_docs)]
pub mod status {
    pub const FLAGS2: u8 = 0;
    pub const SQL_MODE: u8 = 1;
    pub const AUTO_INCREMENT: u8 = 3;
    pub const CHARSET: u8 = 4;
    pub const TIME_ZONE: u8 = 5;
    pub const CATALOG_NZ: u8 = 6;
    pub const LC_TIME_NAMES: u8 = 7;
    pub const CHARSET_DATABASE: u8 = 8;
    pub const TABLE_MAP_FOR_UPDATE: u8 = 9;
    pub const INVOKER: u8 = 11;
    pub const UPDATED_DB_NAMES: u8 = 12;
    pub const MICROSECONDS: u8 = 13;
    pub const EXPLICIT_DEFAULTS_FOR_TIMESTAMP: u8 = 16;
    pub const DDL_LOGGED_WITH_XID: u8 = 17;
    pub const DEFAULT_COLLATION_FOR_UTF8MB4: u8 = 18;
    pub const SQL_REQUIRE_PRIMARY_KEY: u8 = 19;
    pub const DEFAULT_TABLE_ENCRYPTION: u8 = 20;
}

/// MySQL 8.0's default `sql_mode`: ONLY_FULL_GROUP_BY (1<<5), STRICT_TRANS_TABLES (1<<21),
/// NO_ZERO_IN_DATE (1<<23), NO_ZERO_DATE (1<<24), ERROR_FOR_DIVISION_BY_ZERO (1<<26),
/// NO_ENGINE_SUBSTITUTION (1<<30).
pub const MYSQL80_DEFAULT_SQL_MODE: u64 = 0x45A0_0020;
/// `utf8mb4_0900_ai_ci`, MySQL 8.0's default collation.
pub const UTF8MB4_0900_AI_CI: u16 = 255;
/// More names than this in Q_UPDATED_DB_NAMES are written as the count 254 alone.
pub const MAX_DBS_IN_EVENT: usize = 16;
const OVER_MAX_DBS_IN_EVENT: u8 = 254;

/// The session state a QUERY event carries. `None` fields are not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryStatus<'a> {
    /// `OPTION_*` bits that the replica must apply (AUTO_IS_NULL, NOT_AUTOCOMMIT, NO_FOREIGN_KEY_CHECKS,
    /// RELAXED_UNIQUE_CHECKS).
    pub flags2: Option<u32>,
    pub sql_mode: Option<u64>,
    /// Q_CATALOG_NZ `std`.
    pub catalog: bool,
    /// (auto_increment_increment, auto_increment_offset); MySQL writes it only when not (1, 1).
    pub auto_increment: Option<(u16, u16)>,
    /// (character_set_client, collation_connection, collation_server).
    pub charset: Option<[u16; 3]>,
    /// Only when the session time zone is not SYSTEM.
    pub time_zone: Option<&'a str>,
    pub lc_time_names: Option<u16>,
    pub charset_database: Option<u16>,
    pub table_map_for_update: Option<u64>,
    /// DEFINER of a stored object: (user, host).
    pub invoker: Option<(&'a str, &'a str)>,
    /// Databases the statement changes (DDL); more than 16 are written as "too many".
    pub updated_db_names: Option<&'a [&'a str]>,
    /// Microsecond part of the statement start time.
    pub microseconds: Option<u32>,
    pub explicit_defaults_for_timestamp: Option<bool>,
    /// 8.0 DDL: the XID the DDL commits with (no XID event follows).
    pub ddl_logged_with_xid: Option<u64>,
    pub default_collation_for_utf8mb4: Option<u16>,
    pub sql_require_primary_key: Option<u8>,
    pub default_table_encryption: Option<u8>,
}

impl QueryStatus<'_> {
    /// What MySQL 8.0 writes for `BEGIN` with default session settings: FLAGS2, SQL_MODE,
    /// CATALOG_NZ, CHARSET and DEFAULT_COLLATION_FOR_UTF8MB4 (a 71-byte event with CRC).
    pub const MYSQL80_DEFAULT: QueryStatus<'static> = QueryStatus {
        flags2: Some(0),
        sql_mode: Some(MYSQL80_DEFAULT_SQL_MODE),
        catalog: true,
        auto_increment: None,
        charset: Some([UTF8MB4_0900_AI_CI; 3]),
        time_zone: None,
        lc_time_names: None,
        charset_database: None,
        table_map_for_update: None,
        invoker: None,
        updated_db_names: None,
        microseconds: None,
        explicit_defaults_for_timestamp: None,
        ddl_logged_with_xid: None,
        default_collation_for_utf8mb4: Some(UTF8MB4_0900_AI_CI),
        sql_require_primary_key: None,
        default_table_encryption: None,
    };

    /// Appends the status-variable block.
    pub fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        use status as s;
        let short = |x: &str| -> Result<u8> {
            u8::try_from(x.len()).map_err(|_| BinlogError::TableDef {
                reason: "query status string longer than 255 bytes",
            })
        };
        if let Some(v) = self.flags2 {
            buf.push(s::FLAGS2);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(v) = self.sql_mode {
            buf.push(s::SQL_MODE);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        if self.catalog {
            buf.extend_from_slice(&[s::CATALOG_NZ, 3, b's', b't', b'd']);
        }
        if let Some((inc, off)) = self.auto_increment {
            buf.push(s::AUTO_INCREMENT);
            buf.extend_from_slice(&inc.to_le_bytes());
            buf.extend_from_slice(&off.to_le_bytes());
        }
        if let Some(c) = self.charset {
            buf.push(s::CHARSET);
            for x in c {
                buf.extend_from_slice(&x.to_le_bytes());
            }
        }
        if let Some(tz) = self.time_zone {
            buf.push(s::TIME_ZONE);
            buf.push(short(tz)?);
            buf.extend_from_slice(tz.as_bytes());
        }
        if let Some(v) = self.lc_time_names {
            buf.push(s::LC_TIME_NAMES);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(v) = self.charset_database {
            buf.push(s::CHARSET_DATABASE);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(v) = self.table_map_for_update {
            buf.push(s::TABLE_MAP_FOR_UPDATE);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        if let Some((user, host)) = self.invoker {
            buf.push(s::INVOKER);
            buf.push(short(user)?);
            buf.extend_from_slice(user.as_bytes());
            buf.push(short(host)?);
            buf.extend_from_slice(host.as_bytes());
        }
        if let Some(names) = self.updated_db_names {
            buf.push(s::UPDATED_DB_NAMES);
            if names.len() > MAX_DBS_IN_EVENT {
                buf.push(OVER_MAX_DBS_IN_EVENT);
            } else {
                buf.push(names.len() as u8);
                for n in names {
                    if n.as_bytes().contains(&0) {
                        return Err(BinlogError::TableDef {
                            reason: "database name contains NUL",
                        });
                    }
                    buf.extend_from_slice(n.as_bytes());
                    buf.push(0);
                }
            }
        }
        if let Some(v) = self.microseconds {
            buf.push(s::MICROSECONDS);
            buf.extend_from_slice(&v.to_le_bytes()[..3]);
        }
        if let Some(v) = self.explicit_defaults_for_timestamp {
            buf.extend_from_slice(&[s::EXPLICIT_DEFAULTS_FOR_TIMESTAMP, u8::from(v)]);
        }
        if let Some(v) = self.ddl_logged_with_xid {
            buf.push(s::DDL_LOGGED_WITH_XID);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(v) = self.default_collation_for_utf8mb4 {
            buf.push(s::DEFAULT_COLLATION_FOR_UTF8MB4);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(v) = self.sql_require_primary_key {
            buf.extend_from_slice(&[s::SQL_REQUIRE_PRIMARY_KEY, v]);
        }
        if let Some(v) = self.default_table_encryption {
            buf.extend_from_slice(&[s::DEFAULT_TABLE_ENCRYPTION, v]);
        }
        Ok(())
    }
}

/// A QUERY event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryEvent<'a> {
    /// `pseudo_thread_id` of the session (used for temporary tables).
    pub thread_id: u32,
    /// Seconds the statement took.
    pub exec_time: u32,
    pub error_code: u16,
    /// Default database; "" for none.
    pub schema: &'a str,
    pub query: &'a str,
    pub status: QueryStatus<'a>,
}

impl<'a> QueryEvent<'a> {
    /// The `BEGIN` that opens a row transaction, exactly as MySQL 8.0 writes it.
    pub fn begin(thread_id: u32) -> QueryEvent<'static> {
        QueryEvent {
            thread_id,
            exec_time: 0,
            error_code: 0,
            schema: "",
            query: "BEGIN",
            status: QueryStatus::MYSQL80_DEFAULT,
        }
    }

    /// A DDL statement on `schema` committed with `xid` (no XID event follows it). `updated_dbs`
    /// are the databases it changes, usually `[schema]`.
    pub fn ddl(
        thread_id: u32,
        schema: &'a str,
        query: &'a str,
        updated_dbs: &'a [&'a str],
        xid: u64,
    ) -> Self {
        QueryEvent {
            thread_id,
            exec_time: 0,
            error_code: 0,
            schema,
            query,
            status: QueryStatus {
                updated_db_names: Some(updated_dbs),
                ddl_logged_with_xid: Some(xid),
                ..QueryStatus::MYSQL80_DEFAULT
            },
        }
    }
}

impl EventBody for QueryEvent<'_> {
    fn event_type(&self) -> EventType {
        EventType::QUERY
    }

    /// MySQL marks transaction keywords (`BEGIN`, `COMMIT`, `ROLLBACK`) with SUPPRESS_USE: the
    /// replica need not switch to their default database (seen on every BEGIN of MySQL 5.6-8.0
    /// files).
    fn header_flags(&self) -> u16 {
        let q = self.query.trim();
        if ["BEGIN", "COMMIT", "ROLLBACK"]
            .iter()
            .any(|k| q.eq_ignore_ascii_case(k))
        {
            crate::binlog::header::flags::SUPPRESS_USE
        } else {
            0
        }
    }

    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        let db_len = u8::try_from(self.schema.len()).map_err(|_| BinlogError::TableDef {
            reason: "database name longer than 255 bytes",
        })?;
        buf.extend_from_slice(&self.thread_id.to_le_bytes());
        buf.extend_from_slice(&self.exec_time.to_le_bytes());
        buf.push(db_len);
        buf.extend_from_slice(&self.error_code.to_le_bytes());
        let at = buf.len();
        buf.extend_from_slice(&[0, 0]);
        self.status.encode_into(buf)?;
        let n = u16::try_from(buf.len() - at - 2).map_err(|_| BinlogError::TableDef {
            reason: "status variables longer than 65535 bytes",
        })?;
        buf[at..at + 2].copy_from_slice(&n.to_le_bytes());
        buf.extend_from_slice(self.schema.as_bytes());
        buf.push(0);
        buf.extend_from_slice(self.query.as_bytes());
        Ok(())
    }
}

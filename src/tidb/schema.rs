//! TiDB schema metadata as stored in the meta keys and in DDL jobs (`pkg/meta/model`,
//! `pkg/parser/types/field_type.go`), deserialized with serde.
//!
//! Field names are exactly TiDB's JSON names: snake_case tags for most fields, capitalised Go
//! names where TiDB has no tag (`Tp`, `Flen`, `SchemaVersion`, `ShardRowIDBits`, ...), and
//! CIStr objects `{"O": ..., "L": ...}` for names. Every struct is `#[serde(default)]` so missing
//! keys become zero values, unknown keys are ignored, and Go's `null` slices become empty.

use serde::{Deserialize, Deserializer, Serialize};

use super::error::{Error, Result};

/// MySQL column type codes (`enum_field_types`) and column flags, as TiDB uses them.
pub mod mysql {
    pub const TYPE_DECIMAL: u8 = 0;
    pub const TYPE_TINY: u8 = 1;
    pub const TYPE_SHORT: u8 = 2;
    pub const TYPE_LONG: u8 = 3;
    pub const TYPE_FLOAT: u8 = 4;
    pub const TYPE_DOUBLE: u8 = 5;
    pub const TYPE_NULL: u8 = 6;
    pub const TYPE_TIMESTAMP: u8 = 7;
    pub const TYPE_LONGLONG: u8 = 8;
    pub const TYPE_INT24: u8 = 9;
    pub const TYPE_DATE: u8 = 10;
    /// TIME (TiDB's "Duration").
    pub const TYPE_DURATION: u8 = 11;
    pub const TYPE_DATETIME: u8 = 12;
    pub const TYPE_YEAR: u8 = 13;
    pub const TYPE_NEWDATE: u8 = 14;
    pub const TYPE_VARCHAR: u8 = 15;
    pub const TYPE_BIT: u8 = 16;
    /// TiDB's VECTOR(FLOAT32).
    pub const TYPE_TIDB_VECTOR_FLOAT32: u8 = 0xe1;
    pub const TYPE_JSON: u8 = 0xf5;
    pub const TYPE_NEWDECIMAL: u8 = 0xf6;
    pub const TYPE_ENUM: u8 = 0xf7;
    pub const TYPE_SET: u8 = 0xf8;
    pub const TYPE_TINY_BLOB: u8 = 0xf9;
    pub const TYPE_MEDIUM_BLOB: u8 = 0xfa;
    pub const TYPE_LONG_BLOB: u8 = 0xfb;
    pub const TYPE_BLOB: u8 = 0xfc;
    pub const TYPE_VAR_STRING: u8 = 0xfd;
    pub const TYPE_STRING: u8 = 0xfe;
    pub const TYPE_GEOMETRY: u8 = 0xff;

    pub const NOT_NULL_FLAG: u32 = 1;
    pub const PRI_KEY_FLAG: u32 = 1 << 1;
    pub const UNIQUE_KEY_FLAG: u32 = 1 << 2;
    pub const MULTIPLE_KEY_FLAG: u32 = 1 << 3;
    pub const BLOB_FLAG: u32 = 1 << 4;
    pub const UNSIGNED_FLAG: u32 = 1 << 5;
    pub const ZEROFILL_FLAG: u32 = 1 << 6;
    pub const BINARY_FLAG: u32 = 1 << 7;
    pub const ENUM_FLAG: u32 = 1 << 8;
    pub const AUTO_INCREMENT_FLAG: u32 = 1 << 9;
    pub const TIMESTAMP_FLAG: u32 = 1 << 10;
    pub const SET_FLAG: u32 = 1 << 11;
    pub const NO_DEFAULT_VALUE_FLAG: u32 = 1 << 12;
    pub const ON_UPDATE_NOW_FLAG: u32 = 1 << 13;
    pub const PART_KEY_FLAG: u32 = 1 << 14;
    pub const NUM_FLAG: u32 = 1 << 15;
    /// TiDB-internal flags.
    pub const UNIQUE_FLAG: u32 = 1 << 16;
    pub const BINCMP_FLAG: u32 = 1 << 17;
    pub const PARSE_TO_JSON_FLAG: u32 = 1 << 18;
    pub const IS_BOOLEAN_FLAG: u32 = 1 << 19;
    pub const PREVENT_NULL_INSERT_FLAG: u32 = 1 << 20;
    pub const ENUM_SET_AS_INT_FLAG: u32 = 1 << 21;
    pub const DROP_COLUMN_INDEX_FLAG: u32 = 1 << 22;
    pub const GENERATED_COLUMN_FLAG: u32 = 1 << 23;
    pub const UNDERSCORE_CHARSET_FLAG: u32 = 1 << 24;

    /// The charset (and collation) of binary strings.
    pub const BINARY_CHARSET: &str = "binary";
}

/// `SchemaState` values.
pub mod schema_state {
    pub const NONE: u8 = 0;
    pub const DELETE_ONLY: u8 = 1;
    pub const WRITE_ONLY: u8 = 2;
    pub const WRITE_REORGANIZATION: u8 = 3;
    pub const DELETE_REORGANIZATION: u8 = 4;
    pub const PUBLIC: u8 = 5;
    pub const REPLICA_ONLY: u8 = 6;
    pub const GLOBAL_TXN_ONLY: u8 = 7;
}

/// `JobState` values.
pub mod job_state {
    pub const NONE: u8 = 0;
    pub const RUNNING: u8 = 1;
    pub const ROLLINGBACK: u8 = 2;
    pub const ROLLBACK_DONE: u8 = 3;
    pub const DONE: u8 = 4;
    pub const CANCELLED: u8 = 5;
    pub const SYNCED: u8 = 6;
    pub const CANCELLING: u8 = 7;
    pub const QUEUEING: u8 = 8;
    pub const PAUSED: u8 = 9;
    pub const PAUSING: u8 = 10;
}

/// `ActionType` values of DDL jobs (the ones a binlog master must react to, and a few more).
pub mod action {
    pub const CREATE_SCHEMA: u8 = 1;
    pub const DROP_SCHEMA: u8 = 2;
    pub const CREATE_TABLE: u8 = 3;
    pub const DROP_TABLE: u8 = 4;
    pub const ADD_COLUMN: u8 = 5;
    pub const DROP_COLUMN: u8 = 6;
    pub const ADD_INDEX: u8 = 7;
    pub const DROP_INDEX: u8 = 8;
    pub const ADD_FOREIGN_KEY: u8 = 9;
    pub const DROP_FOREIGN_KEY: u8 = 10;
    pub const TRUNCATE_TABLE: u8 = 11;
    pub const MODIFY_COLUMN: u8 = 12;
    pub const REBASE_AUTO_ID: u8 = 13;
    pub const RENAME_TABLE: u8 = 14;
    pub const SET_DEFAULT_VALUE: u8 = 15;
    pub const SHARD_ROW_ID: u8 = 16;
    pub const MODIFY_TABLE_COMMENT: u8 = 17;
    pub const RENAME_INDEX: u8 = 18;
    pub const ADD_TABLE_PARTITION: u8 = 19;
    pub const DROP_TABLE_PARTITION: u8 = 20;
    pub const CREATE_VIEW: u8 = 21;
    pub const MODIFY_TABLE_CHARSET_AND_COLLATE: u8 = 22;
    pub const TRUNCATE_TABLE_PARTITION: u8 = 23;
    pub const DROP_VIEW: u8 = 24;
    pub const RECOVER_TABLE: u8 = 25;
    pub const MODIFY_SCHEMA_CHARSET_AND_COLLATE: u8 = 26;
    pub const ADD_PRIMARY_KEY: u8 = 32;
    pub const DROP_PRIMARY_KEY: u8 = 33;
    pub const CREATE_SEQUENCE: u8 = 34;
    pub const ALTER_SEQUENCE: u8 = 35;
    pub const DROP_SEQUENCE: u8 = 36;
    pub const ADD_COLUMNS: u8 = 37;
    pub const DROP_COLUMNS: u8 = 38;
    pub const ALTER_INDEX_VISIBILITY: u8 = 41;
    pub const EXCHANGE_TABLE_PARTITION: u8 = 42;
    pub const RENAME_TABLES: u8 = 47;
    pub const CREATE_TABLES: u8 = 60;
    pub const MULTI_SCHEMA_CHANGE: u8 = 61;
    pub const RECOVER_SCHEMA: u8 = 63;
    pub const REORGANIZE_PARTITION: u8 = 64;
    pub const ALTER_TABLE_PARTITIONING: u8 = 71;
    pub const REMOVE_PARTITIONING: u8 = 72;
}

/// Deserializes `null` as the type's default (Go writes nil slices and maps as `null`).
fn nullable<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// TiDB's case-insensitive name: original and lower-case forms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct CIStr {
    #[serde(rename = "O")]
    pub o: String,
    #[serde(rename = "L")]
    pub l: String,
}

impl CIStr {
    /// Builds both forms from the original name.
    pub fn new(name: &str) -> Self {
        CIStr {
            o: name.to_owned(),
            l: name.to_lowercase(),
        }
    }
}

/// A column's type (`types.FieldType`); keys are Go field names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FieldType {
    /// MySQL type code ([`mysql`] `TYPE_*`).
    #[serde(rename = "Tp")]
    pub tp: u8,
    /// Column flags ([`mysql`] `*_FLAG`).
    #[serde(rename = "Flag")]
    pub flag: u32,
    /// Display width / max length; -1 = unspecified.
    #[serde(rename = "Flen")]
    pub flen: i64,
    /// Scale for DECIMAL/FLOAT/DOUBLE, fsp for time types; -1 = unspecified.
    #[serde(rename = "Decimal")]
    pub decimal: i32,
    #[serde(rename = "Charset")]
    pub charset: String,
    #[serde(rename = "Collate")]
    pub collate: String,
    /// ENUM/SET member names, in definition order.
    #[serde(rename = "Elems", deserialize_with = "nullable")]
    pub elems: Vec<String>,
    #[serde(rename = "ElemsIsBinaryLit", deserialize_with = "nullable")]
    pub elems_is_binary_lit: Vec<bool>,
    /// Multi-valued index helper type.
    #[serde(rename = "Array")]
    pub array: bool,
}

impl FieldType {
    /// A field type with the given code and unspecified length/scale.
    pub fn new(tp: u8) -> Self {
        FieldType {
            tp,
            flen: -1,
            decimal: -1,
            ..FieldType::default()
        }
    }
    /// UNSIGNED numeric column.
    pub fn is_unsigned(&self) -> bool {
        self.flag & mysql::UNSIGNED_FLAG != 0
    }
    /// NOT NULL column.
    pub fn is_not_null(&self) -> bool {
        self.flag & mysql::NOT_NULL_FLAG != 0
    }
    /// Part of the primary key.
    pub fn is_pri_key(&self) -> bool {
        self.flag & mysql::PRI_KEY_FLAG != 0
    }
    /// String type with the `binary` charset (BINARY, VARBINARY, BLOB).
    pub fn is_binary_string(&self) -> bool {
        self.charset == mysql::BINARY_CHARSET
    }
    /// Fractional seconds precision of a time type (0..=6; unspecified = 0).
    pub fn fsp(&self) -> u8 {
        self.decimal.clamp(0, 6) as u8
    }
    /// Whether values of this type are strings stored as raw bytes.
    pub fn is_string_kind(&self) -> bool {
        matches!(
            self.tp,
            mysql::TYPE_VARCHAR
                | mysql::TYPE_VAR_STRING
                | mysql::TYPE_STRING
                | mysql::TYPE_TINY_BLOB
                | mysql::TYPE_MEDIUM_BLOB
                | mysql::TYPE_LONG_BLOB
                | mysql::TYPE_BLOB
                | mysql::TYPE_GEOMETRY
        )
    }
}

/// One column (`model.ColumnInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ColumnInfo {
    pub id: i64,
    pub name: CIStr,
    /// Position in the table's column list (definition order).
    pub offset: usize,
    /// Value for rows written before the column existed (text, number or null). This, not
    /// `default`, fills columns missing from a row.
    pub origin_default: serde_json::Value,
    /// BIT columns keep their origin default here (base64 of the big-endian bytes).
    pub origin_default_bit: Option<String>,
    /// Current default for new inserts.
    pub default: serde_json::Value,
    pub default_bit: Option<String>,
    pub default_is_expr: bool,
    pub generated_expr_string: String,
    pub generated_stored: bool,
    #[serde(rename = "type")]
    pub field_type: FieldType,
    /// [`schema_state`] value.
    pub state: u8,
    pub comment: String,
    pub hidden: bool,
    /// ColumnInfo version: >= 1 means TIMESTAMP defaults are in UTC.
    pub version: u64,
}

impl ColumnInfo {
    /// Visible to SQL (state public).
    pub fn is_public(&self) -> bool {
        self.state == schema_state::PUBLIC
    }
    /// A virtual generated column: never stored in row values.
    pub fn is_virtual_generated(&self) -> bool {
        !self.generated_expr_string.is_empty() && !self.generated_stored
    }
}

/// One column of an index (`model.IndexColumn`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IndexColumn {
    pub name: CIStr,
    /// Offset of the column in `TableInfo::columns`.
    pub offset: usize,
    /// Prefix length, -1 = whole column.
    pub length: i64,
}

/// An index (`model.IndexInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IndexInfo {
    pub id: i64,
    pub idx_name: CIStr,
    pub tbl_name: CIStr,
    #[serde(deserialize_with = "nullable")]
    pub idx_cols: Vec<IndexColumn>,
    pub state: u8,
    pub comment: String,
    pub index_type: i64,
    pub is_unique: bool,
    pub is_primary: bool,
    pub is_invisible: bool,
    pub is_global: bool,
    pub mv_index: bool,
}

/// One partition (`model.PartitionDefinition`); its `id` is the physical table id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PartitionDefinition {
    pub id: i64,
    pub name: CIStr,
    #[serde(deserialize_with = "nullable")]
    pub less_than: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub in_values: Vec<Vec<String>>,
    pub comment: String,
}

/// Partitioning of a table (`model.PartitionInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PartitionInfo {
    /// 1 RANGE, 2 HASH, 3 LIST, 4 KEY, 5 SYSTEM_TIME.
    #[serde(rename = "type")]
    pub partition_type: i64,
    pub expr: String,
    #[serde(deserialize_with = "nullable")]
    pub columns: Vec<CIStr>,
    pub enable: bool,
    #[serde(deserialize_with = "nullable")]
    pub definitions: Vec<PartitionDefinition>,
    #[serde(deserialize_with = "nullable")]
    pub adding_definitions: Vec<PartitionDefinition>,
    #[serde(deserialize_with = "nullable")]
    pub dropping_definitions: Vec<PartitionDefinition>,
    pub num: u64,
    pub new_table_id: i64,
}

/// A foreign key (`model.FKInfo`). `on_delete`/`on_update` are TiDB's `ReferOptionType`:
/// 0 none given, 1 RESTRICT, 2 CASCADE, 3 SET NULL, 4 NO ACTION, 5 SET DEFAULT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FkInfo {
    pub id: i64,
    pub fk_name: CIStr,
    pub ref_schema: CIStr,
    pub ref_table: CIStr,
    #[serde(deserialize_with = "nullable")]
    pub ref_cols: Vec<CIStr>,
    #[serde(deserialize_with = "nullable")]
    pub cols: Vec<CIStr>,
    pub on_delete: i64,
    pub on_update: i64,
    pub state: u8,
    pub version: i64,
}

impl FkInfo {
    /// The SQL words of a `ReferOptionType` (`None` for "none given").
    pub fn refer_option(code: i64) -> Option<&'static str> {
        Some(match code {
            1 => "RESTRICT",
            2 => "CASCADE",
            3 => "SET NULL",
            4 => "NO ACTION",
            5 => "SET DEFAULT",
            _ => return None,
        })
    }
}

/// A CHECK constraint (`model.ConstraintInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConstraintInfo {
    pub id: i64,
    pub constraint_name: CIStr,
    pub tbl_name: CIStr,
    #[serde(deserialize_with = "nullable")]
    pub constraint_cols: Vec<CIStr>,
    pub enforced: bool,
    /// Declared on a column rather than the table.
    pub in_column: bool,
    /// The expression as TiDB restores it (e.g. `` `a` > 0 ``).
    pub expr_string: String,
    pub state: u8,
}

/// A view's definer (`auth.UserIdentity`; keys are Go field names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserIdentity {
    #[serde(rename = "Username")]
    pub username: String,
    #[serde(rename = "Hostname")]
    pub hostname: String,
}

/// A view (`model.ViewInfo`). `view_algorithm`: 0 UNDEFINED, 1 MERGE, 2 TEMPTABLE;
/// `view_security`: 0 DEFINER, 1 INVOKER; `view_checkoption`: 0 LOCAL, 1 CASCADED.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ViewInfo {
    pub view_algorithm: i64,
    pub view_definer: Option<UserIdentity>,
    pub view_security: i64,
    /// The SELECT as TiDB restores it.
    pub view_select: String,
    pub view_checkoption: i64,
    #[serde(deserialize_with = "nullable")]
    pub view_cols: Vec<CIStr>,
}

impl ViewInfo {
    pub fn algorithm(&self) -> &'static str {
        match self.view_algorithm {
            1 => "MERGE",
            2 => "TEMPTABLE",
            _ => "UNDEFINED",
        }
    }
    pub fn security(&self) -> &'static str {
        if self.view_security == 1 {
            "INVOKER"
        } else {
            "DEFINER"
        }
    }
}

/// A table (`model.TableInfo`), the value of meta hash field `Table:{id}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TableInfo {
    pub id: i64,
    pub name: CIStr,
    pub charset: String,
    pub collate: String,
    /// Columns in definition order (including non-public ones during DDL).
    #[serde(rename = "cols", deserialize_with = "nullable")]
    pub columns: Vec<ColumnInfo>,
    #[serde(rename = "index_info", deserialize_with = "nullable")]
    pub indices: Vec<IndexInfo>,
    #[serde(rename = "constraint_info", deserialize_with = "nullable")]
    pub constraints: Vec<ConstraintInfo>,
    #[serde(rename = "fk_info", deserialize_with = "nullable")]
    pub foreign_keys: Vec<FkInfo>,
    pub state: u8,
    /// The single integer PK column is the row handle (not stored in row values).
    pub pk_is_handle: bool,
    /// Clustered non-integer PK: the handle is the encoded PK tuple.
    pub is_common_handle: bool,
    pub common_handle_version: u16,
    pub comment: String,
    pub auto_inc_id: i64,
    pub auto_id_cache: i64,
    pub auto_rand_id: i64,
    pub max_col_id: i64,
    pub max_idx_id: i64,
    /// TSO of the last schema change.
    pub update_timestamp: u64,
    pub partition: Option<PartitionInfo>,
    /// Non-null for views.
    pub view: Option<ViewInfo>,
    /// Non-null for sequences.
    pub sequence: Option<serde_json::Value>,
    pub version: u16,
    #[serde(rename = "ShardRowIDBits")]
    pub shard_row_id_bits: u64,
    pub auto_random_bits: u64,
    /// Bits of the AUTO_RANDOM key TiDB uses (0: the default, 64).
    pub auto_random_range_bits: u64,
}

impl TableInfo {
    /// Parses TableInfo JSON.
    pub fn from_json(b: &[u8]) -> Result<Self> {
        serde_json::from_slice(b).map_err(|e| Error::SchemaJson(e.to_string()))
    }
    /// The integer PK column that is the row handle, when `pk_is_handle`.
    pub fn pk_handle_column(&self) -> Option<&ColumnInfo> {
        if !self.pk_is_handle {
            return None;
        }
        self.columns.iter().find(|c| c.field_type.is_pri_key())
    }
    /// The primary key index, if there is one in `indices` (common handle tables have one).
    pub fn primary_index(&self) -> Option<&IndexInfo> {
        self.indices.iter().find(|i| i.is_primary)
    }
    /// Column by id.
    pub fn column_by_id(&self, id: i64) -> Option<&ColumnInfo> {
        self.columns.iter().find(|c| c.id == id)
    }
    /// Public columns in definition order: the columns a replica sees.
    pub fn public_columns(&self) -> Vec<&ColumnInfo> {
        let mut cols: Vec<&ColumnInfo> = self.columns.iter().filter(|c| c.is_public()).collect();
        cols.sort_by_key(|c| c.offset);
        cols
    }
    /// Physical table ids whose keys hold this table's rows (partitions, or the table itself).
    pub fn physical_ids(&self) -> Vec<i64> {
        match &self.partition {
            Some(p) if !p.definitions.is_empty() => p.definitions.iter().map(|d| d.id).collect(),
            _ => vec![self.id],
        }
    }
    /// A view or sequence rather than a base table.
    pub fn is_view_or_sequence(&self) -> bool {
        self.view.is_some() || self.sequence.is_some()
    }
}

/// A database (`model.DBInfo`), the value of meta hash `DBs` field `DB:{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DBInfo {
    pub id: i64,
    pub db_name: CIStr,
    pub charset: String,
    pub collate: String,
    pub state: u8,
}

impl DBInfo {
    /// Parses DBInfo JSON.
    pub fn from_json(b: &[u8]) -> Result<Self> {
        serde_json::from_slice(b).map_err(|e| Error::SchemaJson(e.to_string()))
    }
}

/// The `binlog` member of a job (`model.HistoryInfo`); it has no JSON tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryInfo {
    #[serde(rename = "SchemaVersion")]
    pub schema_version: i64,
    #[serde(rename = "DBInfo")]
    pub db_info: Option<DBInfo>,
    #[serde(rename = "TableInfo")]
    pub table_info: Option<TableInfo>,
    /// Not filled in the "done" record; use the commit ts of the job row.
    #[serde(rename = "FinishedTS")]
    pub finished_ts: u64,
    #[serde(rename = "MultipleTableInfos", deserialize_with = "nullable")]
    pub multiple_table_infos: Vec<TableInfo>,
}

/// A DDL job (`model.Job`), the `job_meta` column of `mysql.tidb_ddl_job`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Job {
    pub id: i64,
    /// [`action`] value.
    #[serde(rename = "type")]
    pub action: u8,
    pub schema_id: i64,
    /// TRUNCATE: the old table id.
    pub table_id: i64,
    pub schema_name: String,
    pub table_name: String,
    /// [`job_state`] value.
    pub state: u8,
    pub err: Option<serde_json::Value>,
    pub err_count: i64,
    pub row_count: i64,
    /// v1 jobs: positional array; v2 jobs: one typed object.
    pub raw_args: Option<serde_json::Value>,
    pub schema_state: u8,
    pub snapshot_ver: u64,
    pub real_start_ts: u64,
    pub start_ts: u64,
    pub dependency_id: i64,
    /// The original DDL statement.
    pub query: String,
    pub binlog: Option<HistoryInfo>,
    /// Job version 1 or 2.
    pub version: i64,
    pub priority: i64,
    pub seq_num: u64,
    pub charset: String,
    pub collate: String,
    pub multi_schema_info: Option<serde_json::Value>,
}

impl Job {
    /// Parses Job JSON.
    pub fn from_json(b: &[u8]) -> Result<Self> {
        serde_json::from_slice(b).map_err(|e| Error::SchemaJson(e.to_string()))
    }
    /// The job finished its schema change (what TiCDC applies).
    pub fn is_done(&self) -> bool {
        self.state == job_state::DONE
    }
    /// Synced (the history record).
    pub fn is_synced(&self) -> bool {
        self.state == job_state::SYNCED
    }
    /// Schema version the job produced (0 = nothing to apply).
    pub fn schema_version(&self) -> i64 {
        self.binlog.as_ref().map_or(0, |b| b.schema_version)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // Shape of TiDB's json.Marshal output for a TableInfo (keys as in pkg/meta/model/table.go,
    // column.go, index.go and pkg/parser/types/field_type.go), trimmed to the relevant members.
    const TABLE: &str = r#"{"id":104,"name":{"O":"T1","L":"t1"},"charset":"utf8mb4","collate":"utf8mb4_bin",
      "cols":[
        {"id":1,"name":{"O":"id","L":"id"},"offset":0,"origin_default":null,"origin_default_bit":null,
         "default":null,"default_bit":null,"default_is_expr":false,"generated_expr_string":"",
         "generated_stored":false,"dependences":null,
         "type":{"Tp":8,"Flag":515,"Flen":20,"Decimal":0,"Charset":"binary","Collate":"binary","Elems":null,"ElemsIsBinaryLit":null,"Array":false},
         "state":5,"comment":"","hidden":false,"change_state_info":null,"version":2},
        {"id":2,"name":{"O":"e","L":"e"},"offset":1,"origin_default":"b","type":{"Tp":247,"Flag":0,"Flen":1,"Decimal":0,
         "Charset":"utf8mb4","Collate":"utf8mb4_bin","Elems":["a","b"]},"state":5,"version":2,"some_future_key":[1,2]}
      ],
      "index_info":null,"fk_info":null,"state":5,"pk_is_handle":true,"is_common_handle":false,
      "common_handle_version":0,"comment":"","auto_inc_id":0,"auto_id_cache":0,"auto_rand_id":0,
      "max_col_id":2,"max_idx_id":0,"update_timestamp":449682245112463365,"ShardRowIDBits":0,
      "partition":null,"view":null,"sequence":null,"Lock":null,"version":5,"tiflash_replica":null}"#;

    #[test]
    fn table_info_json() {
        let t = TableInfo::from_json(TABLE.as_bytes()).unwrap();
        assert_eq!(t.id, 104);
        assert_eq!(t.name.o, "T1");
        assert!(t.pk_is_handle);
        assert_eq!(t.pk_handle_column().unwrap().id, 1);
        assert_eq!(t.columns[0].field_type.tp, mysql::TYPE_LONGLONG);
        assert!(t.columns[0].field_type.is_not_null());
        assert_eq!(t.columns[1].field_type.elems, vec!["a", "b"]);
        assert_eq!(t.columns[1].origin_default, serde_json::json!("b"));
        assert!(t.indices.is_empty());
        assert_eq!(t.physical_ids(), vec![104]);
        assert_eq!(t.public_columns().len(), 2);
        // Missing keys are tolerated.
        let empty = TableInfo::from_json(b"{}").unwrap();
        assert_eq!(empty.id, 0);
        assert!(TableInfo::from_json(b"[").is_err());
    }

    #[test]
    fn job_json() {
        let j = format!(
            r#"{{"id":110,"type":3,"schema_id":2,"table_id":104,"schema_name":"test","table_name":"t1",
            "state":4,"warning":null,"err":null,"err_count":0,"row_count":0,"raw_args":[{{"id":104}}],
            "schema_state":5,"snapshot_ver":0,"real_start_ts":0,"start_ts":449682245099618307,
            "dependency_id":0,"query":"create table t1 (id bigint primary key)",
            "binlog":{{"SchemaVersion":55,"DBInfo":null,"TableInfo":{TABLE},"FinishedTS":0}},
            "version":1,"reorg_meta":null,"multi_schema_info":null,"priority":0,"seq_num":3,
            "charset":"","collate":"","admin_operator":0,"trace_info":null,"sql_mode":1073741824}}"#
        );
        let job = Job::from_json(j.as_bytes()).unwrap();
        assert!(job.is_done());
        assert_eq!(job.action, action::CREATE_TABLE);
        assert_eq!(job.schema_version(), 55);
        assert_eq!(
            job.binlog.as_ref().unwrap().table_info.as_ref().unwrap().id,
            104
        );
        assert!(job.binlog.unwrap().multiple_table_infos.is_empty());
    }

    #[test]
    fn db_and_partition_json() {
        let db = DBInfo::from_json(
            br#"{"id":2,"db_name":{"O":"test","L":"test"},"charset":"utf8mb4","collate":"utf8mb4_bin","state":5,"policy_ref_info":null,"Deprecated":{}}"#,
        )
        .unwrap();
        assert_eq!(db.db_name.l, "test");
        let t = TableInfo::from_json(
            br#"{"id":10,"partition":{"type":1,"expr":"`a`","columns":null,"enable":true,
            "definitions":[{"id":11,"name":{"O":"p0","L":"p0"},"less_than":["10"],"in_values":null},
                           {"id":12,"name":{"O":"p1","L":"p1"},"less_than":["MAXVALUE"]}],"num":2}}"#,
        )
        .unwrap();
        assert_eq!(t.physical_ids(), vec![11, 12]);
    }
}

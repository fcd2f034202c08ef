//! The catalog SQL answers read: databases, tables, columns, indexes and constraints as they
//! are at one binlog position, in MySQL's terms (types as MySQL names them, collations by MySQL
//! name). The provider of the position builds it once per catalog version; `information_schema`
//! and the `SHOW` statements are views over it, and snapshot reads take a table's columns and
//! row layout from it.

use std::sync::Arc;

use super::types::SqlType;

/// The catalog at one position.
#[derive(Debug, Clone, Default)]
pub struct CatalogSnapshot {
    /// Databases, sorted by name.
    pub databases: Vec<DatabaseMeta>,
    /// Tables and views, sorted by (database, name).
    pub tables: Vec<Arc<TableMeta>>,
}

impl CatalogSnapshot {
    /// The database named `name` (names compare exactly, as `lower_case_table_names=0`).
    pub fn database(&self, name: &str) -> Option<&DatabaseMeta> {
        self.databases.iter().find(|d| d.name == name)
    }

    /// The table `db`.`name`.
    pub fn table(&self, db: &str, name: &str) -> Option<&Arc<TableMeta>> {
        self.tables.iter().find(|t| t.db == db && t.name == name)
    }

    /// Tables of `db`, in name order.
    pub fn tables_of<'a>(&'a self, db: &'a str) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
        self.tables.iter().filter(move |t| t.db == db)
    }

    /// Builds a snapshot from tables, deriving the database list (with `default_charset` /
    /// `default_collation` for databases no table says more about).
    pub fn from_tables(mut tables: Vec<Arc<TableMeta>>, mut databases: Vec<DatabaseMeta>) -> Self {
        tables.sort_by(|a, b| (&a.db, &a.name).cmp(&(&b.db, &b.name)));
        for t in &tables {
            if !databases.iter().any(|d| d.name == t.db) {
                databases.push(DatabaseMeta::new(&t.db));
            }
        }
        databases.sort_by(|a, b| a.name.cmp(&b.name));
        databases.dedup_by(|a, b| a.name == b.name);
        CatalogSnapshot { databases, tables }
    }
}

/// One database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseMeta {
    pub name: String,
    pub charset: String,
    pub collation: String,
}

impl DatabaseMeta {
    /// A database with TiDB's defaults (`utf8mb4`, `utf8mb4_bin`).
    pub fn new(name: &str) -> Self {
        DatabaseMeta {
            name: name.to_owned(),
            charset: "utf8mb4".into(),
            collation: "utf8mb4_bin".into(),
        }
    }
}

/// What a table is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableKind {
    BaseTable,
    View {
        definition: String,
        check_option: String,
        updatable: bool,
        definer: String,
        security: String,
    },
}

/// How a table's rows are keyed in TiKV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleKind {
    /// An integer primary key is the row handle: rows come in its order. The index is the
    /// column's position in [`TableMeta::columns`]; `unsigned` orders the handle as unsigned.
    IntPk { column: usize, unsigned: bool },
    /// A clustered primary key of other columns (TiDB's common handle).
    Common,
    /// A hidden `_tidb_rowid`.
    RowId,
}

/// One table or view.
#[derive(Debug, Clone)]
pub struct TableMeta {
    pub db: String,
    pub name: String,
    /// TiDB's logical table id.
    pub id: i64,
    pub kind: TableKind,
    /// Visible columns in ordinal order; row cells come in this order.
    pub columns: Vec<ColumnMeta>,
    pub indexes: Vec<IndexMeta>,
    pub foreign_keys: Vec<ForeignKeyMeta>,
    pub checks: Vec<CheckMeta>,
    pub partitions: Vec<PartitionMeta>,
    pub handle: HandleKind,
    pub charset: String,
    pub collation: String,
    pub comment: String,
    pub auto_increment: Option<u64>,
    /// `CREATE_TIME` in Unix seconds (`None`: unknown).
    pub create_time: Option<u64>,
    /// `CREATE_OPTIONS` of `information_schema.TABLES` (e.g. `partitioned`).
    pub create_options: String,
    /// `SHOW CREATE TABLE` text.
    pub create_sql: String,
    /// How this table version's stored rows decode (`None`: no rows to read, e.g. a view).
    pub rows: Option<Arc<dyn RowDecoder>>,
}

/// Size estimates of one physical table (a table or a partition), as storage reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableEstimate {
    /// Approximate rows (`TABLE_ROWS`).
    pub rows: u64,
    /// Approximate bytes of the rows (`DATA_LENGTH`).
    pub data_length: u64,
}

impl TableEstimate {
    /// The sum of two estimates (a partitioned table's over its partitions).
    pub fn plus(self, o: TableEstimate) -> TableEstimate {
        TableEstimate {
            rows: self.rows.saturating_add(o.rows),
            data_length: self.data_length.saturating_add(o.data_length),
        }
    }

    /// `AVG_ROW_LENGTH`: bytes per row, 0 without rows.
    pub fn avg_row_length(&self) -> u64 {
        self.data_length.checked_div(self.rows).unwrap_or(0)
    }
}

/// Where size estimates come from (`information_schema.TABLES`, `PARTITIONS`, `SHOW TABLE
/// STATUS`).
pub trait TableStats {
    /// Estimates of the physical tables `ids`; an id without one is left out.
    fn estimates(&self, ids: &[i64]) -> std::collections::HashMap<i64, TableEstimate>;
}

/// Decodes the stored rows of one table version into cells in [`TableMeta::columns`] order.
pub trait RowDecoder: Send + Sync + std::fmt::Debug {
    /// Physical table ids holding the rows (the partitions, or the table itself).
    fn physical_ids(&self) -> Vec<i64>;
    /// Decodes one record (raw key and value) into `out` (cleared first): the columns
    /// `wanted` marks (`None`: all), the others NULL.
    fn decode(
        &self,
        key: &[u8],
        value: &[u8],
        wanted: Option<&[bool]>,
        out: &mut Vec<tibinlog_protocol::value::Value>,
    ) -> Result<(), String>;
    /// Why no row of the table can be read (a column that cannot be computed), if so.
    fn refused(&self) -> Option<String> {
        None
    }
}

impl TableMeta {
    /// The column named `name` (case-insensitive, as MySQL column names are).
    pub fn column(&self, name: &str) -> Option<(usize, &ColumnMeta)> {
        self.columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.name.eq_ignore_ascii_case(name))
    }

    /// The primary key, if any.
    pub fn primary_key(&self) -> Option<&IndexMeta> {
        self.indexes.iter().find(|i| i.primary)
    }

    /// Positions of the primary key's columns in key order (`None`: no primary key, or one
    /// with a prefix part, whose keys do not order the whole column).
    pub fn primary_key_columns(&self) -> Option<Vec<usize>> {
        self.index_columns(self.primary_key()?)
    }

    /// Positions of `index`'s columns in key order (`None`: a prefix part, whose keys do not
    /// order the whole column, or an expression's hidden column).
    pub fn index_columns(&self, index: &IndexMeta) -> Option<Vec<usize>> {
        index
            .columns
            .iter()
            .map(|(name, prefix)| match prefix {
                None => self.column(name).map(|(i, _)| i),
                Some(_) => None,
            })
            .collect()
    }

    pub fn is_view(&self) -> bool {
        matches!(self.kind, TableKind::View { .. })
    }
}

/// One column.
#[derive(Debug, Clone)]
pub struct ColumnMeta {
    pub name: String,
    /// Type with nullability and key flags.
    pub ty: SqlType,
    /// `COLUMN_TYPE`, e.g. `bigint unsigned`, `varchar(64)`, `enum('a','b')`.
    pub column_type: String,
    /// `DATA_TYPE`, e.g. `bigint`, `varchar`.
    pub data_type: String,
    /// `COLUMN_DEFAULT` as text (`None`: no default or NULL).
    pub default: Option<String>,
    /// `EXTRA`: `auto_increment`, `DEFAULT_GENERATED`, `VIRTUAL GENERATED`, …
    pub extra: String,
    pub comment: String,
    /// `COLUMN_KEY`: `PRI`, `UNI`, `MUL` or empty.
    pub key: String,
    /// Character set and collation names of character columns.
    pub charset: Option<String>,
    pub collation: Option<String>,
    /// Generated columns: the expression text and whether it is stored.
    pub generated: Option<(String, bool)>,
    /// `CHARACTER_MAXIMUM_LENGTH` (characters) of character columns.
    pub char_max_len: Option<u64>,
    /// `CHARACTER_OCTET_LENGTH` (bytes) of character columns.
    pub char_octet_len: Option<u64>,
    /// `NUMERIC_PRECISION` / `NUMERIC_SCALE` of numeric columns.
    pub numeric_precision: Option<u64>,
    pub numeric_scale: Option<u64>,
    /// `DATETIME_PRECISION` of temporal columns.
    pub datetime_precision: Option<u64>,
}

/// One index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexMeta {
    pub name: String,
    /// The index's entries in TiKV (`None`: none of their own, as a primary key that is the
    /// row handle, or none this server reads, as a multi-valued index).
    pub stored: Option<StoredIndex>,
    pub primary: bool,
    pub unique: bool,
    /// Column names in key order, with a prefix length where one is set.
    pub columns: Vec<(String, Option<u64>)>,
    /// The expression of each key part that is one (an expression index: its column is the
    /// hidden column TiDB keys it on), in key order; empty when no part is.
    pub expressions: Vec<Option<String>>,
    pub comment: String,
    pub visible: bool,
}

/// Where an index's entries are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredIndex {
    /// TiDB's index id.
    pub id: i64,
    /// One index over every partition (its entries under the logical table id), not one per
    /// partition.
    pub global: bool,
}

/// One foreign key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKeyMeta {
    pub name: String,
    pub columns: Vec<String>,
    pub ref_db: String,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
    pub on_update: String,
    pub on_delete: String,
}

/// One CHECK constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckMeta {
    pub name: String,
    pub clause: String,
    pub enforced: bool,
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    pub name: String,
    /// TiDB's physical id of the partition.
    pub id: i64,
    /// `RANGE`, `LIST`, `HASH`, `KEY`, `RANGE COLUMNS`, …
    pub method: String,
    pub expression: String,
    /// `PARTITION_DESCRIPTION` (range bound or list values).
    pub description: Option<String>,
    pub comment: String,
}

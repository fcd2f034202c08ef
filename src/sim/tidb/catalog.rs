//! The in-memory schema of the simulated TiDB (what its info schema cache holds) and the
//! per-table plans DML uses: row order, handle kind, index columns, partition routing.
//!
//! The catalog is only changed after the DDL transaction that writes the same change to the
//! meta keys has committed, so it always equals the meta keys read at the newest ts.

use std::collections::BTreeMap;
use std::sync::Arc;

use tibinlog_protocol::value::Value;

use crate::mounter::coltype::column_def;
use crate::sql::generated::VirtualColumns;
use crate::sql::types::SqlType;
use crate::tidb::codec::Datum;
use crate::tidb::key::{meta_hash_key, meta_string_key, Handle};
use crate::tidb::rowcodec::RowCodec;
use crate::tidb::schema::{mysql, ColumnInfo, DBInfo, FieldType, TableInfo};
use crate::tidb::time;

use super::error::{Result, TidbError};
use super::kv::KvTxn;
pub use super::partition::PartitionPlan;

/// How rows of a table are addressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandleKind {
    /// `pk_is_handle`: the PK column at this row position is the int handle.
    Int(usize),
    /// Clustered common handle: the PK columns at these row positions, in key order.
    Common(Vec<usize>),
    /// `_tidb_rowid` handles allocated by TiDB; rows are found through the primary index
    /// (a non-clustered PK) if there is one.
    RowId,
}

/// An index that gets index keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPlan {
    pub id: i64,
    pub unique: bool,
    pub primary: bool,
    /// Row positions of the index columns.
    pub cols: Vec<usize>,
}

/// One table as DML sees it.
#[derive(Debug, Clone)]
pub struct TableMeta {
    pub db_id: i64,
    pub db_name: String,
    pub info: TableInfo,
    pub codec: RowCodec,
    /// Column names in row order.
    pub names: Vec<String>,
    /// Field types in row order.
    pub types: Vec<FieldType>,
    pub handle: HandleKind,
    /// Indexes with their own keys (not the clustered PK).
    pub indexes: Vec<IndexPlan>,
    pub partition: Option<PartitionPlan>,
    /// The hidden columns of expression indexes (`None`: the table has none).
    pub hidden: Option<Arc<HiddenColumns>>,
}

/// The hidden generated columns TiDB adds for expression indexes (`_V$_{index}_{n}`): never
/// stored in the row, computed when a row is written and keyed by the index. Index plans
/// address them after the row's columns, as if the row were extended by them.
#[derive(Debug)]
pub struct HiddenColumns {
    types: Vec<FieldType>,
    compute: VirtualColumns,
    /// The first column whose expression the evaluator cannot compute.
    uncomputable: Option<String>,
}

impl HiddenColumns {
    fn compile(info: &TableInfo, visible: &[&ColumnInfo], hidden: &[&ColumnInfo]) -> Option<Self> {
        if hidden.is_empty() {
            return None;
        }
        let table = &info.name.o;
        let all: Vec<&ColumnInfo> = visible.iter().chain(hidden).copied().collect();
        let names: Vec<String> = all.iter().map(|c| c.name.o.clone()).collect();
        let types: Result<Vec<SqlType>, _> = all
            .iter()
            .map(|c| column_def(table, c).map(|d| SqlType::from_column(&d)))
            .collect();
        let generated: Vec<(usize, &str)> = hidden
            .iter()
            .enumerate()
            .map(|(i, c)| (visible.len() + i, c.generated_expr_string.as_str()))
            .collect();
        let (compute, uncomputable) = match types {
            Ok(types) => {
                let (compute, failed) = VirtualColumns::compile(table, &names, &types, &generated);
                (compute, failed.into_iter().next().map(|f| f.column))
            }
            Err(_) => (VirtualColumns::default(), Some(hidden[0].name.o.clone())),
        };
        Some(HiddenColumns {
            types: hidden.iter().map(|c| c.field_type.clone()).collect(),
            compute,
            uncomputable,
        })
    }
}

impl TableMeta {
    /// Builds the plans of `info` (public columns, in offset order, are the row).
    pub fn new(db_id: i64, db_name: &str, info: TableInfo) -> Self {
        let codec = RowCodec::new(&info);
        let mut cols: Vec<_> = info
            .public_columns()
            .into_iter()
            .filter(|c| !c.hidden)
            .collect();
        cols.sort_by_key(|c| c.offset);
        let mut hidden_cols: Vec<_> = info
            .public_columns()
            .into_iter()
            .filter(|c| c.hidden)
            .collect();
        hidden_cols.sort_by_key(|c| c.offset);
        let pos_of_offset = |off: usize| {
            cols.iter().position(|c| c.offset == off).or_else(|| {
                hidden_cols
                    .iter()
                    .position(|c| c.offset == off)
                    .map(|p| cols.len() + p)
            })
        };
        let hidden = HiddenColumns::compile(&info, &cols, &hidden_cols).map(Arc::new);
        let names = cols.iter().map(|c| c.name.o.clone()).collect();
        let types = cols.iter().map(|c| c.field_type.clone()).collect();
        let handle = if let Some(pk) = info.pk_handle_column() {
            HandleKind::Int(cols.iter().position(|c| c.id == pk.id).unwrap_or(0))
        } else if info.is_common_handle {
            let pos = info.primary_index().map_or_else(Vec::new, |i| {
                i.idx_cols
                    .iter()
                    .filter_map(|c| pos_of_offset(c.offset))
                    .collect()
            });
            HandleKind::Common(pos)
        } else {
            HandleKind::RowId
        };
        let indexes = info
            .indices
            .iter()
            .filter(|i| !(i.is_primary && info.is_common_handle))
            .map(|i| IndexPlan {
                id: i.id,
                unique: i.is_unique,
                primary: i.is_primary,
                cols: i
                    .idx_cols
                    .iter()
                    .filter_map(|c| pos_of_offset(c.offset))
                    .collect(),
            })
            .collect();
        let partition = info
            .partition
            .as_ref()
            .and_then(|p| PartitionPlan::new(p, &cols));
        TableMeta {
            db_id,
            db_name: db_name.to_owned(),
            info,
            codec,
            names,
            types,
            handle,
            indexes,
            partition,
            hidden,
        }
    }

    /// The type of row position `p`, counting the hidden columns after the row's.
    pub fn key_type(&self, p: usize) -> &FieldType {
        match (self.types.get(p), &self.hidden) {
            (Some(ft), _) => ft,
            (None, Some(h)) => &h.types[p - self.types.len()],
            (None, None) => &self.types[p],
        }
    }

    /// `row` extended by the values of the hidden columns, as TiDB computes them for the
    /// expression indexes; `row` itself when the table has none.
    pub fn index_row<'a>(&self, row: &'a [Value]) -> Result<std::borrow::Cow<'a, [Value]>> {
        let Some(h) = &self.hidden else {
            return Ok(std::borrow::Cow::Borrowed(row));
        };
        let fail = |name: &str, problem| TidbError::Object {
            what: "expression index column",
            name: name.to_owned(),
            table: self.name().to_owned(),
            problem,
        };
        if let Some(c) = &h.uncomputable {
            return Err(fail(c, "the expression cannot be computed"));
        }
        let mut ext = row.to_vec();
        ext.resize(row.len() + h.types.len(), Value::Null);
        h.compute
            .fill(&mut ext)
            .map_err(|e| fail(&e.column, "the expression failed on the row"))?;
        Ok(std::borrow::Cow::Owned(ext))
    }

    /// Table name.
    pub fn name(&self) -> &str {
        &self.info.name.o
    }

    fn bad(&self, problem: &'static str) -> TidbError {
        TidbError::BadRow {
            table: self.info.name.o.clone(),
            problem,
        }
    }

    /// Physical table id of a row whose partitioning columns hold `values` (in
    /// [`partition_cols`](Self::partition_cols) order).
    pub fn route(&self, values: &[&Value]) -> Result<i64> {
        match &self.partition {
            None => Ok(self.info.id),
            Some(p) => p.route(values).map_err(|problem| self.bad(problem)),
        }
    }

    /// Physical table id of `row` (all columns, in row order).
    pub fn route_row(&self, row: &[Value]) -> Result<i64> {
        let values: Vec<&Value> = self
            .partition_cols()
            .iter()
            .map(|&c| row.get(c).unwrap_or(&Value::Null))
            .collect();
        self.route(&values)
    }

    /// Row positions of the primary key columns in key order (None: no primary key).
    pub fn key_positions(&self) -> Option<Vec<usize>> {
        match &self.handle {
            HandleKind::Int(p) => Some(vec![*p]),
            HandleKind::Common(pos) => Some(pos.clone()),
            HandleKind::RowId => self
                .indexes
                .iter()
                .find(|i| i.primary)
                .map(|i| i.cols.clone()),
        }
    }

    /// Row positions of the partitioning columns (empty: not partitioned).
    pub fn partition_cols(&self) -> Vec<usize> {
        self.partition
            .as_ref()
            .map_or_else(Vec::new, PartitionPlan::columns)
    }

    /// Every physical table id of the table: its partitions', or its own.
    pub fn physical_ids(&self) -> Vec<i64> {
        match &self.partition {
            Some(p) => p.ids(),
            None => vec![self.info.id],
        }
    }

    /// The handle of a row (None for `_tidb_rowid` tables).
    pub fn row_handle(&self, row: &[Value]) -> Result<Option<Handle>> {
        match &self.handle {
            HandleKind::RowId => Ok(None),
            HandleKind::Int(p) => Ok(Some(Handle::Int(
                int_handle(&row[*p])
                    .ok_or_else(|| self.bad("integer primary key must be a non-null integer"))?,
            ))),
            HandleKind::Common(pos) => {
                let mut d = Vec::with_capacity(pos.len());
                for &p in pos {
                    d.push(key_datum(&row[p], &self.types[p])?);
                }
                Ok(Some(Handle::common_from_datums(&d)?))
            }
        }
    }
}

/// The int handle of an integer PK value (UNSIGNED BIGINT bit-cast).
pub fn int_handle(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::UInt(u) => Some(*u as i64),
        _ => None,
    }
}

/// The key (memcomparable) datum of a value of type `ft`: collation sort keys for strings
/// (`utf8mb4_bin` is PAD SPACE: trailing spaces trimmed), packed times, durations in ns.
pub fn key_datum(v: &Value, ft: &FieldType) -> Result<Datum> {
    Ok(match v {
        Value::Null => Datum::Null,
        Value::Int(i) => Datum::Int(*i),
        Value::UInt(u) => Datum::Uint(*u),
        Value::Float(f) => Datum::Float(f64::from(*f)),
        Value::Double(f) => Datum::Float(*f),
        Value::Decimal(t) => Datum::Decimal {
            text: t.clone(),
            precision: ft.flen.clamp(0, 65) as u8,
            frac: ft.decimal.clamp(0, 30) as u8,
        },
        Value::Bytes(b) => {
            if ft.is_binary_string() {
                Datum::Bytes(b.clone())
            } else {
                let end = b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
                Datum::Bytes(b[..end].to_vec())
            }
        }
        Value::Date(d) => Datum::Uint(time::pack_date(d)),
        Value::DateTime(dt) => Datum::Uint(time::pack_datetime(dt)),
        Value::Timestamp { seconds, micros } => Datum::Uint(time::pack_datetime(
            &time::timestamp_to_datetime(*seconds, *micros),
        )),
        Value::Time(t) => Datum::Duration(time::duration_to_nanos(t)),
        Value::Year(y) => Datum::Int(i64::from(*y)),
        Value::Enum(i) => Datum::Uint(u64::from(*i)),
        Value::Set(s) | Value::Bit(s) => Datum::Uint(*s),
        Value::Json(_) => {
            return Err(TidbError::Object {
                what: "index column",
                name: String::new(),
                table: String::new(),
                problem: "JSON values cannot be keys",
            })
        }
    })
}

/// A database and its tables.
#[derive(Debug, Clone)]
pub struct DbEntry {
    pub info: DBInfo,
    pub tables: BTreeMap<i64, Arc<TableMeta>>,
}

/// Every database and table, the global id counter and the schema version.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub dbs: BTreeMap<i64, DbEntry>,
    pub next_global_id: i64,
    pub schema_version: i64,
    /// Lower-case names to ids, rebuilt by [`Catalog::reindex`] after each change. A hint
    /// only: lookups check what it points at and scan when it is stale.
    names: std::collections::HashMap<String, (i64, std::collections::HashMap<String, i64>)>,
}

impl Catalog {
    /// Every id that rows of some table are stored under: a table's own id, and its partitions'.
    pub fn physical_ids(&self) -> std::collections::BTreeSet<i64> {
        let mut ids = std::collections::BTreeSet::new();
        for t in self.dbs.values().flat_map(|d| d.tables.values()) {
            if t.info.view.is_some() {
                continue;
            }
            ids.insert(t.info.id);
            ids.extend(t.physical_ids());
        }
        ids
    }

    /// A catalog of `dbs`.
    pub fn new(dbs: BTreeMap<i64, DbEntry>, next_global_id: i64, schema_version: i64) -> Self {
        let mut c = Catalog {
            dbs,
            next_global_id,
            schema_version,
            names: Default::default(),
        };
        c.reindex();
        c
    }

    /// Rebuilds the name index (after databases or tables were added, dropped or renamed).
    pub fn reindex(&mut self) {
        self.names = self
            .dbs
            .iter()
            .map(|(db_id, d)| {
                let tables = d
                    .tables
                    .iter()
                    .map(|(id, t)| (t.info.name.l.clone(), *id))
                    .collect();
                (d.info.db_name.l.clone(), (*db_id, tables))
            })
            .collect();
    }

    /// Database by (case-insensitive) name.
    pub fn db(&self, name: &str) -> Option<&DbEntry> {
        let l = name.to_lowercase();
        self.db_lower(&l)
    }

    fn db_lower(&self, l: &str) -> Option<&DbEntry> {
        let hinted = self
            .names
            .get(l)
            .and_then(|(id, _)| self.dbs.get(id))
            .filter(|d| d.info.db_name.l == l);
        hinted.or_else(|| self.dbs.values().find(|d| d.info.db_name.l == l))
    }

    /// Database by name, or `ER_BAD_DB_ERROR`.
    pub fn db_or_err(&self, name: &str) -> Result<&DbEntry> {
        self.db(name).ok_or_else(|| TidbError::Database {
            name: name.to_owned(),
            problem: "does not exist",
        })
    }

    /// Table by names.
    pub fn table(&self, db: &str, table: &str) -> Option<&Arc<TableMeta>> {
        let db_l = db.to_lowercase();
        let l = table.to_lowercase();
        let entry = self.db_lower(&db_l)?;
        let hinted = self
            .names
            .get(&db_l)
            .and_then(|(_, tables)| tables.get(&l))
            .and_then(|id| entry.tables.get(id))
            .filter(|t| t.info.name.l == l);
        hinted.or_else(|| entry.tables.values().find(|t| t.info.name.l == l))
    }

    /// Table by names, or `ER_NO_SUCH_TABLE`.
    pub fn table_or_err(&self, db: &str, table: &str) -> Result<&Arc<TableMeta>> {
        self.table(db, table).ok_or_else(|| TidbError::Table {
            db: db.to_owned(),
            table: table.to_owned(),
            problem: "does not exist",
        })
    }
}

/// Meta hash key of the databases.
pub const DBS_KEY: &[u8] = b"DBs";

fn db_key(db_id: i64) -> Vec<u8> {
    format!("DB:{db_id}").into_bytes()
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // Serializing our own schema structs cannot fail (no maps with non-string keys).
    serde_json::to_vec(v).unwrap_or_default()
}

/// `DBs` field `DB:{id}` = DBInfo.
pub fn put_db(txn: &mut KvTxn, info: &DBInfo) {
    txn.put(meta_hash_key(DBS_KEY, &db_key(info.id)), json(info));
}

/// Removes a database: its `DBs` field and every field of its `DB:{id}` hash.
pub fn delete_db(txn: &mut KvTxn, db: &DbEntry) {
    txn.delete(meta_hash_key(DBS_KEY, &db_key(db.info.id)));
    for t in db.tables.values() {
        delete_table(txn, db.info.id, t.info.id);
        txn.delete(meta_hash_key(
            &db_key(db.info.id),
            format!("TID:{}", t.info.id).as_bytes(),
        ));
    }
}

/// `DB:{db_id}` field `Table:{id}` = TableInfo.
pub fn put_table(txn: &mut KvTxn, db_id: i64, info: &TableInfo) {
    txn.put(
        meta_hash_key(&db_key(db_id), format!("Table:{}", info.id).as_bytes()),
        json(info),
    );
}

/// Removes `Table:{id}` from `DB:{db_id}` (data keys stay until GC, as in TiDB).
pub fn delete_table(txn: &mut KvTxn, db_id: i64, table_id: i64) {
    txn.delete(meta_hash_key(
        &db_key(db_id),
        format!("Table:{table_id}").as_bytes(),
    ));
}

/// `DB:{db_id}` field `TID:{table_id}` = the row id allocator's end (decimal text).
pub fn row_id_key(db_id: i64, table_id: i64) -> Vec<u8> {
    meta_hash_key(&db_key(db_id), format!("TID:{table_id}").as_bytes())
}

/// A meta string (`NextGlobalID`, `SchemaVersionKey`, `Diff:{v}`, ...).
pub fn put_string(txn: &mut KvTxn, key: &str, value: Vec<u8>) {
    txn.put(meta_string_key(key.as_bytes()), value);
}

/// Whether a field type is an integer type (partition and int-handle columns).
pub fn is_int_type(ft: &FieldType) -> bool {
    matches!(
        ft.tp,
        mysql::TYPE_TINY
            | mysql::TYPE_SHORT
            | mysql::TYPE_INT24
            | mysql::TYPE_LONG
            | mysql::TYPE_LONGLONG
    )
}

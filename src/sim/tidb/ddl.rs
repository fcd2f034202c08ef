//! DDL statements run as TiDB 8.5 DDL jobs (submit → run to done → move to history; see the
//! [module doc](super)). Every check happens before the job is submitted, so a failing
//! statement writes nothing.

use std::sync::Arc;

use serde_json::json;
use tibinlog_protocol::value::Value;

use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::Ts;
use crate::tidb::key::{
    decode_record_key, record_key, record_span, table_prefix, table_span, Handle,
};
use crate::tidb::schema::{
    action, job_state, mysql, schema_state, CIStr, DBInfo, HistoryInfo, Job, TableInfo,
};
use crate::tidb::time;

use super::catalog::{self, DbEntry, TableMeta};
use super::dml::index_entry;
use super::error::{Result, TidbError};
use super::kv::{CommitMode, KvTxn};
use super::truth::TruthTxn;
use super::types::{self, quote, ColumnDef, IndexDef, TableDef};
use super::{db_info, Tidb, MYSQL_DB};

/// `txn_source` of index backfill writes: lossy DDL reorg (bit 8), dropped by TiKV's CDC.
pub const BACKFILL_TXN_SOURCE: u64 = 1 << 8;

/// A DDL statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Ddl {
    CreateDatabase {
        name: String,
    },
    DropDatabase {
        name: String,
    },
    CreateTable {
        db: String,
        table: TableDef,
    },
    /// Several tables in one job (`ActionCreateTables`: TiDB's batch create, which BR's
    /// restore uses): one commit ts for all of them, the statements `;`-separated in the job's
    /// query and the tables in `MultipleTableInfos`.
    CreateTables {
        db: String,
        tables: Vec<TableDef>,
    },
    DropTable {
        db: String,
        table: String,
    },
    TruncateTable {
        db: String,
        table: String,
    },
    RenameTable {
        db: String,
        table: String,
        new_db: String,
        new_table: String,
    },
    /// `RENAME TABLE a TO b, c TO d, …` (`ActionRenameTables`): one job, applied in order (a
    /// swap through a temporary name works), the new table infos in `MultipleTableInfos`, one
    /// per rename.
    RenameTables {
        renames: Vec<TableRename>,
    },
    /// `ALTER TABLE t TRUNCATE PARTITION p, …` (`ActionTruncateTablePartition`): the named
    /// partitions get new physical ids; their rows stay under the old ids until GC, and TiKV's
    /// change stream never shows them deleted.
    TruncatePartition {
        db: String,
        table: String,
        partitions: Vec<String>,
    },
    /// `ALTER TABLE pt EXCHANGE PARTITION p WITH TABLE nt` (`ActionExchangeTablePartition`,
    /// with validation as TiDB's default): the partition and the plain table swap physical ids,
    /// so no row is written. The job names the plain table; `binlog.TableInfo` is the
    /// partitioned table after the swap.
    ExchangePartition {
        db: String,
        table: String,
        partition: String,
        nt_db: String,
        nt_table: String,
    },
    /// `ADD COLUMN` (appended last).
    AddColumn {
        db: String,
        table: String,
        column: ColumnDef,
    },
    DropColumn {
        db: String,
        table: String,
        column: String,
    },
    /// `MODIFY COLUMN` without reorg (same type family, not narrower).
    ModifyColumn {
        db: String,
        table: String,
        column: ColumnDef,
    },
    AddIndex {
        db: String,
        table: String,
        index: IndexDef,
    },
    DropIndex {
        db: String,
        table: String,
        index: String,
    },
    /// `CREATE VIEW v (cols) AS select` (`ActionCreateView`): a TableInfo with `view` set and
    /// one untyped column per name (TiDB types view columns by planning the SELECT).
    CreateView {
        db: String,
        name: String,
        columns: Vec<String>,
        select: String,
    },
    /// `DROP VIEW` (`ActionDropView`).
    DropView {
        db: String,
        name: String,
    },
}

/// One `old TO new` of a [`Ddl::RenameTables`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRename {
    pub db: String,
    pub table: String,
    pub new_db: String,
    pub new_table: String,
}

impl Ddl {
    /// The statement text (what the job's `query` holds), with qualified names.
    pub fn sql(&self) -> String {
        let qt = |db: &str, t: &str| format!("{}.{}", quote(db), quote(t));
        match self {
            Ddl::CreateDatabase { name } => format!("CREATE DATABASE {}", quote(name)),
            Ddl::DropDatabase { name } => format!("DROP DATABASE {}", quote(name)),
            Ddl::CreateTable { db, table } => table.sql(db),
            Ddl::CreateTables { db, tables } => tables
                .iter()
                .map(|t| t.sql(db))
                .collect::<Vec<_>>()
                .join(";"),
            Ddl::DropTable { db, table } => format!("DROP TABLE {}", qt(db, table)),
            Ddl::TruncateTable { db, table } => format!("TRUNCATE TABLE {}", qt(db, table)),
            Ddl::RenameTable {
                db,
                table,
                new_db,
                new_table,
            } => {
                format!(
                    "RENAME TABLE {} TO {}",
                    qt(db, table),
                    qt(new_db, new_table)
                )
            }
            Ddl::RenameTables { renames } => format!(
                "RENAME TABLE {}",
                renames
                    .iter()
                    .map(|r| format!("{} TO {}", qt(&r.db, &r.table), qt(&r.new_db, &r.new_table)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Ddl::TruncatePartition {
                db,
                table,
                partitions,
            } => format!(
                "ALTER TABLE {} TRUNCATE PARTITION {}",
                qt(db, table),
                partitions
                    .iter()
                    .map(|p| quote(p))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Ddl::ExchangePartition {
                db,
                table,
                partition,
                nt_db,
                nt_table,
            } => format!(
                "ALTER TABLE {} EXCHANGE PARTITION {} WITH TABLE {}",
                qt(db, table),
                quote(partition),
                qt(nt_db, nt_table)
            ),
            Ddl::AddColumn { db, table, column } => {
                format!("ALTER TABLE {} ADD COLUMN {}", qt(db, table), column.sql())
            }
            Ddl::DropColumn { db, table, column } => {
                format!(
                    "ALTER TABLE {} DROP COLUMN {}",
                    qt(db, table),
                    quote(column)
                )
            }
            Ddl::ModifyColumn { db, table, column } => {
                format!(
                    "ALTER TABLE {} MODIFY COLUMN {}",
                    qt(db, table),
                    column.sql()
                )
            }
            Ddl::AddIndex { db, table, index } => {
                let cols: Vec<String> = index.columns.iter().map(|c| quote(c)).collect();
                format!(
                    "ALTER TABLE {} ADD {}INDEX {}({})",
                    qt(db, table),
                    if index.unique { "UNIQUE " } else { "" },
                    quote(&index.name),
                    cols.join(",")
                )
            }
            Ddl::DropIndex { db, table, index } => {
                format!("ALTER TABLE {} DROP INDEX {}", qt(db, table), quote(index))
            }
            Ddl::CreateView {
                db,
                name,
                columns,
                select,
            } => format!(
                "CREATE VIEW {} ({}) AS {select}",
                qt(db, name),
                columns
                    .iter()
                    .map(|c| quote(c))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Ddl::DropView { db, name } => format!("DROP VIEW {}", qt(db, name)),
        }
    }
}

/// What a finished DDL reports.
#[derive(Debug, Clone, PartialEq)]
pub struct DdlOutcome {
    pub job_id: i64,
    pub schema_version: i64,
    /// start_ts of the transaction that made the job done.
    pub start_ts: Ts,
    /// Its commit ts: the FinishedTS a CDC client assigns to the job.
    pub finished_ts: Ts,
    /// Everything the CDC endpoints emitted during the three (or four) transactions.
    pub outputs: Vec<StoreOutput>,
}

pub(super) enum Edit {
    PutDb(DBInfo),
    DropDb(i64),
    PutTable(i64, Box<TableInfo>),
    DropTable(i64, i64),
    /// Moves the `TID:` allocator field between databases (cross-database rename).
    MoveRowId {
        table: i64,
        from: i64,
        to: i64,
    },
    /// Exchange partition: both tables' allocators go to the larger end, the plain table's
    /// under its new id (`(db id, table id)` pairs).
    ExchangeRowIds {
        pt: (i64, i64),
        nt_old: (i64, i64),
        nt_new: (i64, i64),
    },
}

pub(super) struct Plan {
    action: u8,
    schema_id: i64,
    schema_name: String,
    table_id: i64,
    table_name: String,
    old_schema_id: i64,
    pub(super) edits: Vec<Edit>,
    db_info: Option<DBInfo>,
    pub(super) table_info: Option<TableInfo>,
    /// The tables of a batch create.
    multiple_table_infos: Vec<TableInfo>,
    pub(super) raw_args: serde_json::Value,
    reorg: bool,
    /// Index entries of existing rows for ADD INDEX.
    backfill: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Plan {
    pub(super) fn new(action: u8, schema_id: i64, schema_name: &str) -> Self {
        Plan {
            action,
            schema_id,
            schema_name: schema_name.to_owned(),
            table_id: 0,
            table_name: String::new(),
            old_schema_id: 0,
            edits: Vec::new(),
            db_info: None,
            table_info: None,
            multiple_table_infos: Vec::new(),
            raw_args: serde_json::Value::Null,
            reorg: false,
            backfill: Vec::new(),
        }
    }
    pub(super) fn table(mut self, t: &TableInfo) -> Self {
        self.table_id = t.id;
        self.table_name = t.name.o.clone();
        self
    }
}

pub(super) fn obj_err(
    what: &'static str,
    name: &str,
    table: &str,
    problem: &'static str,
) -> TidbError {
    TidbError::Object {
        what,
        name: name.to_owned(),
        table: table.to_owned(),
        problem,
    }
}

/// Recomputes PRI_KEY / UNIQUE_KEY / MULTIPLE_KEY flags from the PK and the indexes.
fn refresh_key_flags(t: &mut TableInfo) {
    let key_flags = mysql::PRI_KEY_FLAG | mysql::UNIQUE_KEY_FLAG | mysql::MULTIPLE_KEY_FLAG;
    for c in &mut t.columns {
        let was_pk = c.field_type.flag & mysql::PRI_KEY_FLAG != 0;
        c.field_type.flag &= !key_flags;
        if was_pk && t.pk_is_handle {
            c.field_type.flag |= mysql::PRI_KEY_FLAG;
        }
    }
    for idx in &t.indices {
        let Some(first) = idx.idx_cols.first() else {
            continue;
        };
        if idx.is_primary {
            for ic in &idx.idx_cols {
                if let Some(c) = t.columns.iter_mut().find(|c| c.offset == ic.offset) {
                    c.field_type.flag |= mysql::PRI_KEY_FLAG;
                }
            }
            continue;
        }
        if let Some(c) = t.columns.iter_mut().find(|c| c.offset == first.offset) {
            if idx.is_unique && idx.idx_cols.len() == 1 {
                c.field_type.flag |= mysql::UNIQUE_KEY_FLAG;
            } else if c.field_type.flag & (mysql::PRI_KEY_FLAG | mysql::UNIQUE_KEY_FLAG) == 0 {
                c.field_type.flag |= mysql::MULTIPLE_KEY_FLAG;
            }
        }
    }
}

/// Whether changing a column from `old` to `new` needs no reorg (TiDB's `needChangeColumnData`
/// is false): same family and signedness, not narrower, same charset.
fn lossless_change(
    old: &crate::tidb::schema::FieldType,
    new: &crate::tidb::schema::FieldType,
) -> bool {
    let int_rank = |tp| match tp {
        mysql::TYPE_TINY => Some(1),
        mysql::TYPE_SHORT => Some(2),
        mysql::TYPE_INT24 => Some(3),
        mysql::TYPE_LONG => Some(4),
        mysql::TYPE_LONGLONG => Some(5),
        _ => None,
    };
    if let (Some(a), Some(b)) = (int_rank(old.tp), int_rank(new.tp)) {
        return b >= a && old.is_unsigned() == new.is_unsigned();
    }
    let varlen = |tp| matches!(tp, mysql::TYPE_VARCHAR | mysql::TYPE_VAR_STRING);
    let same_family = old.tp == new.tp || (varlen(old.tp) && varlen(new.tp));
    same_family
        && old.charset == new.charset
        && new.flen >= old.flen
        && old.decimal == new.decimal
        && old.elems == new.elems
}

/// TiDB's checks before an exchange (`checkExchangePartition`, `checkTableDefCompatible`):
/// `pt` partitioned and `nt` not; the same handle kind, charset and collation; the same
/// columns in the same order (name, type, id); the same indexes by name (kind, columns, id).
pub fn exchange_compatible(
    pt: &TableInfo,
    nt: &TableInfo,
) -> std::result::Result<(), &'static str> {
    if pt.partition.is_none() {
        return Err("the table is not partitioned");
    }
    if nt.partition.is_some() {
        return Err("the table to exchange with is partitioned");
    }
    let different = "tables have different definitions";
    if pt.pk_is_handle != nt.pk_is_handle
        || pt.is_common_handle != nt.is_common_handle
        || pt.charset != nt.charset
        || pt.collate != nt.collate
        || pt.columns.len() != nt.columns.len()
        || pt.indices.len() != nt.indices.len()
    {
        return Err(different);
    }
    let flags = mysql::UNSIGNED_FLAG
        | mysql::AUTO_INCREMENT_FLAG
        | mysql::NOT_NULL_FLAG
        | mysql::ZEROFILL_FLAG
        | mysql::BINARY_FLAG
        | mysql::PRI_KEY_FLAG;
    let mut pc: Vec<_> = pt.columns.iter().collect();
    let mut nc: Vec<_> = nt.columns.iter().collect();
    pc.sort_by_key(|c| c.offset);
    nc.sort_by_key(|c| c.offset);
    for (a, b) in pc.iter().zip(&nc) {
        let (x, y) = (&a.field_type, &b.field_type);
        let same_type = x.tp == y.tp
            && x.flen == y.flen
            && x.decimal == y.decimal
            && x.charset == y.charset
            && x.collate == y.collate
            && x.elems == y.elems
            && x.flag & flags == y.flag & flags;
        if a.name.l != b.name.l || !same_type || a.state != b.state || a.hidden != b.hidden {
            return Err(different);
        }
        if a.id != b.id {
            return Err("a column's id differs (different history)");
        }
    }
    for a in &pt.indices {
        let b = nt
            .indices
            .iter()
            .find(|b| b.idx_name.l == a.idx_name.l)
            .ok_or(different)?;
        let cols = |i: &crate::tidb::schema::IndexInfo| -> Vec<(String, i64)> {
            i.idx_cols
                .iter()
                .map(|c| (c.name.l.clone(), c.length))
                .collect()
        };
        if a.index_type != b.index_type
            || a.is_unique != b.is_unique
            || a.is_primary != b.is_primary
            || cols(a) != cols(b)
        {
            return Err(different);
        }
        if a.id != b.id {
            return Err("an index's id differs (different history)");
        }
    }
    Ok(())
}

impl Tidb {
    pub(super) fn db_entry(&self, name: &str) -> Result<&DbEntry> {
        self.catalog.db_or_err(name)
    }

    fn ids_needed(&self, ddl: &Ddl) -> Result<usize> {
        Ok(match ddl {
            Ddl::CreateDatabase { .. } | Ddl::CreateView { .. } => 1,
            Ddl::CreateTable { table, .. } => 1 + table.partition_count(),
            Ddl::CreateTables { tables, .. } => {
                tables.iter().map(|t| 1 + t.partition_count()).sum()
            }
            Ddl::TruncateTable { db, table } => {
                let t = self.catalog.table_or_err(db, table)?;
                1 + t.info.partition.as_ref().map_or(0, |p| p.definitions.len())
            }
            Ddl::TruncatePartition { partitions, .. } => partitions.len(),
            _ => 0,
        })
    }

    fn plan(&self, core: &mut SimCore, ddl: &Ddl, ids: &[i64]) -> Result<Plan> {
        let cat = &self.catalog;
        let table_of = |db: &str, t: &str| cat.table_or_err(db, t).map(|m| (**m).clone());
        Ok(match ddl {
            Ddl::CreateDatabase { name } => {
                if cat.db(name).is_some() {
                    return Err(TidbError::Database {
                        name: name.clone(),
                        problem: "exists",
                    });
                }
                let info = db_info(ids[0], name);
                let mut p = Plan::new(action::CREATE_SCHEMA, ids[0], name);
                p.raw_args = json!({ "db_id": ids[0] });
                p.edits.push(Edit::PutDb(info.clone()));
                p.db_info = Some(info);
                p
            }
            Ddl::DropDatabase { name } => {
                let db = self.db_entry(name)?;
                if db.info.db_name.l == MYSQL_DB {
                    return Err(TidbError::Database {
                        name: name.clone(),
                        problem: "is a system database",
                    });
                }
                let mut info = db.info.clone();
                info.state = schema_state::NONE;
                let mut p = Plan::new(action::DROP_SCHEMA, db.info.id, name);
                p.raw_args = json!({ "fk_check": false });
                p.edits.push(Edit::DropDb(db.info.id));
                p.db_info = Some(info);
                p
            }
            Ddl::CreateTable { db, table } => {
                let d = self.db_entry(db)?;
                if cat.table(db, &table.name).is_some() {
                    return Err(TidbError::Table {
                        db: db.clone(),
                        table: table.name.clone(),
                        problem: "exists",
                    });
                }
                let info = table.build(db, ids[0], &ids[1..], 0)?;
                let mut p = Plan::new(action::CREATE_TABLE, d.info.id, db).table(&info);
                p.raw_args = json!({ "table_id": info.id, "fk_check": false });
                p.edits
                    .push(Edit::PutTable(d.info.id, Box::new(info.clone())));
                p.table_info = Some(info);
                p
            }
            Ddl::CreateTables { db, tables } => {
                let d = self.db_entry(db)?;
                let mut p = Plan::new(action::CREATE_TABLES, d.info.id, db);
                let mut ids = ids;
                let mut names = std::collections::HashSet::new();
                for table in tables {
                    if cat.table(db, &table.name).is_some()
                        || !names.insert(table.name.to_lowercase())
                    {
                        return Err(TidbError::Table {
                            db: db.clone(),
                            table: table.name.clone(),
                            problem: "exists",
                        });
                    }
                    let n = 1 + table.partition_count();
                    let info = table.build(db, ids[0], &ids[1..n], 0)?;
                    ids = &ids[n..];
                    p.edits
                        .push(Edit::PutTable(d.info.id, Box::new(info.clone())));
                    p.multiple_table_infos.push(info);
                }
                p.raw_args = json!({ "fk_check": false });
                p
            }
            Ddl::CreateView { .. } | Ddl::DropView { .. } => self.plan_view(ddl, ids)?,
            Ddl::DropTable { db, table } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                info.state = schema_state::NONE;
                let mut p = Plan::new(action::DROP_TABLE, t.db_id, db).table(&info);
                p.raw_args = json!({ "old_partition_ids": info.physical_ids() });
                p.edits.push(Edit::DropTable(t.db_id, info.id));
                p.table_info = Some(info);
                p
            }
            Ddl::TruncateTable { db, table } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                info.id = ids[0];
                if let Some(part) = info.partition.as_mut() {
                    for (d, &id) in part.definitions.iter_mut().zip(&ids[1..]) {
                        d.id = id;
                    }
                }
                let mut p = Plan::new(action::TRUNCATE_TABLE, t.db_id, db).table(&t.info);
                p.raw_args = json!({ "new_table_id": ids[0], "new_partition_ids": &ids[1..] });
                p.edits.push(Edit::DropTable(t.db_id, t.info.id));
                p.edits
                    .push(Edit::PutTable(t.db_id, Box::new(info.clone())));
                p.table_info = Some(info);
                p
            }
            Ddl::RenameTable {
                db,
                table,
                new_db,
                new_table,
            } => {
                let t = table_of(db, table)?;
                let nd = self.db_entry(new_db)?;
                if cat.table(new_db, new_table).is_some() {
                    return Err(TidbError::Table {
                        db: new_db.clone(),
                        table: new_table.clone(),
                        problem: "exists",
                    });
                }
                let mut info = t.info.clone();
                info.name = CIStr::new(new_table);
                for idx in &mut info.indices {
                    idx.tbl_name = CIStr::new(new_table);
                }
                let mut p = Plan::new(action::RENAME_TABLE, nd.info.id, new_db).table(&info);
                p.old_schema_id = t.db_id;
                p.raw_args =
                    json!({ "old_schema_id": t.db_id, "new_table_name": CIStr::new(new_table) });
                if nd.info.id != t.db_id {
                    p.edits.push(Edit::DropTable(t.db_id, info.id));
                    p.edits.push(Edit::MoveRowId {
                        table: info.id,
                        from: t.db_id,
                        to: nd.info.id,
                    });
                }
                p.edits
                    .push(Edit::PutTable(nd.info.id, Box::new(info.clone())));
                p.table_info = Some(info);
                p
            }
            Ddl::RenameTables { renames } => {
                let first = renames.first().ok_or(TidbError::Table {
                    db: String::new(),
                    table: String::new(),
                    problem: "RENAME TABLE without tables",
                })?;
                let first_db = self.db_entry(&first.new_db)?;
                let mut p = Plan::new(action::RENAME_TABLES, first_db.info.id, &first.new_db);
                // Tables as the renames so far left them: (db, lower-case name) → (db id, info).
                let mut moved: Vec<(String, String, i64, TableInfo)> = Vec::new();
                let mut gone: Vec<(String, String)> = Vec::new();
                let key = |db: &str, t: &str| (db.to_lowercase(), t.to_lowercase());
                let mut args = Vec::new();
                for r in renames {
                    let from = key(&r.db, &r.table);
                    let (db_id, mut info) = match moved
                        .iter()
                        .position(|m| (m.0.clone(), m.1.clone()) == from)
                    {
                        Some(i) => {
                            let m = moved.remove(i);
                            (m.2, m.3)
                        }
                        None if !gone.contains(&from) => {
                            let t = table_of(&r.db, &r.table)?;
                            (t.db_id, t.info.clone())
                        }
                        None => {
                            return Err(TidbError::Table {
                                db: r.db.clone(),
                                table: r.table.clone(),
                                problem: "does not exist",
                            })
                        }
                    };
                    gone.push(from);
                    let to = key(&r.new_db, &r.new_table);
                    let taken = moved.iter().any(|m| (m.0.clone(), m.1.clone()) == to)
                        || (!gone.contains(&to) && cat.table(&r.new_db, &r.new_table).is_some());
                    if taken {
                        return Err(TidbError::Table {
                            db: r.new_db.clone(),
                            table: r.new_table.clone(),
                            problem: "exists",
                        });
                    }
                    gone.retain(|g| *g != to);
                    let nd = self.db_entry(&r.new_db)?;
                    let old_name = info.name.clone();
                    info.name = CIStr::new(&r.new_table);
                    for idx in &mut info.indices {
                        idx.tbl_name = CIStr::new(&r.new_table);
                    }
                    args.push(json!({
                        "old_schema_id": db_id,
                        "old_schema_name": CIStr::new(&r.db),
                        "old_table_name": old_name,
                        "new_schema_id": nd.info.id,
                        "new_table_name": CIStr::new(&r.new_table),
                        "table_id": info.id,
                    }));
                    if nd.info.id != db_id {
                        p.edits.push(Edit::DropTable(db_id, info.id));
                        p.edits.push(Edit::MoveRowId {
                            table: info.id,
                            from: db_id,
                            to: nd.info.id,
                        });
                    }
                    p.edits
                        .push(Edit::PutTable(nd.info.id, Box::new(info.clone())));
                    p.multiple_table_infos.push(info.clone());
                    moved.push((to.0, to.1, nd.info.id, info));
                }
                p.raw_args = json!({ "rename_table_infos": args });
                p
            }
            Ddl::TruncatePartition {
                db,
                table,
                partitions,
            } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                let part = info.partition.as_mut().ok_or_else(|| {
                    obj_err("partitioning", "", table, "the table is not partitioned")
                })?;
                let (mut old_ids, mut new_ids) = (Vec::new(), Vec::new());
                for (name, &id) in partitions.iter().zip(ids) {
                    let d = part
                        .definitions
                        .iter_mut()
                        .find(|d| d.name.l == name.to_lowercase())
                        .ok_or_else(|| obj_err("partition", name, table, "unknown"))?;
                    if old_ids.contains(&d.id) || new_ids.contains(&d.id) {
                        return Err(obj_err("partition", name, table, "named twice"));
                    }
                    old_ids.push(d.id);
                    d.id = id;
                    new_ids.push(id);
                }
                self.alter(
                    t,
                    info,
                    action::TRUNCATE_TABLE_PARTITION,
                    db,
                    json!({ "old_partition_ids": old_ids, "new_partition_ids": new_ids }),
                )
            }
            Ddl::ExchangePartition {
                db,
                table,
                partition,
                nt_db,
                nt_table,
            } => {
                let pt = table_of(db, table)?;
                let nt = table_of(nt_db, nt_table)?;
                exchange_compatible(&pt.info, &nt.info)
                    .map_err(|problem| obj_err("table", nt_table, table, problem))?;
                let mut pt_info = pt.info.clone();
                let def = pt_info
                    .partition
                    .as_mut()
                    .and_then(|p| {
                        p.definitions
                            .iter_mut()
                            .find(|d| d.name.l == partition.to_lowercase())
                    })
                    .ok_or_else(|| obj_err("partition", partition, table, "unknown"))?;
                let part_id = def.id;
                def.id = nt.info.id;
                // WITH VALIDATION: every row of the plain table must belong to the partition.
                let ts = core.ts();
                let (start, end) = record_span(nt.info.id);
                let mut row = Vec::new();
                for pair in core.mvcc.scan(&start, &end, 0, ts, false, &[])? {
                    let r = pair.result?;
                    let (_, handle) = decode_record_key(&pair.key)?;
                    nt.codec.decode_into(&r.value, Some(&handle), &mut row)?;
                    if pt.route_row(&row)? != part_id {
                        return Err(obj_err(
                            "partition",
                            partition,
                            table,
                            "found a row that does not match the partition",
                        ));
                    }
                }
                let mut nt_info = nt.info.clone();
                nt_info.id = part_id;
                let mut p =
                    Plan::new(action::EXCHANGE_TABLE_PARTITION, nt.db_id, nt_db).table(&nt.info);
                p.raw_args = json!({
                    "partition_id": part_id,
                    "pt_schema_id": pt.db_id,
                    "pt_table_id": pt.info.id,
                    "partition_name": partition.to_lowercase(),
                    "with_validation": true,
                });
                p.edits.push(Edit::DropTable(nt.db_id, nt.info.id));
                p.edits.push(Edit::PutTable(nt.db_id, Box::new(nt_info)));
                p.edits
                    .push(Edit::PutTable(pt.db_id, Box::new(pt_info.clone())));
                p.edits.push(Edit::ExchangeRowIds {
                    pt: (pt.db_id, pt.info.id),
                    nt_old: (nt.db_id, nt.info.id),
                    nt_new: (nt.db_id, part_id),
                });
                p.table_info = Some(pt_info);
                p
            }
            Ddl::AddColumn { db, table, column } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                if info
                    .columns
                    .iter()
                    .any(|c| c.name.l == column.name.to_lowercase())
                {
                    return Err(obj_err("column", &column.name, table, "duplicate"));
                }
                info.max_col_id += 1;
                let col = column.build(info.max_col_id, info.columns.len(), true);
                info.columns.push(col);
                self.alter(
                    t,
                    info,
                    action::ADD_COLUMN,
                    db,
                    json!({ "column": column.name }),
                )
            }
            Ddl::DropColumn { db, table, column } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                let l = column.to_lowercase();
                let off = info
                    .columns
                    .iter()
                    .position(|c| c.name.l == l)
                    .ok_or_else(|| obj_err("column", column, table, "unknown"))?;
                let indexed = info
                    .indices
                    .iter()
                    .any(|i| i.idx_cols.iter().any(|c| c.offset == off))
                    || info.columns[off].field_type.is_pri_key()
                    || info
                        .partition
                        .as_ref()
                        .is_some_and(|p| p.expr.trim_matches('`').eq_ignore_ascii_case(column));
                if indexed || info.columns.len() == 1 {
                    return Err(obj_err(
                        "column",
                        column,
                        table,
                        "is indexed, partitioned on, or the last column",
                    ));
                }
                info.columns.remove(off);
                for c in &mut info.columns {
                    if c.offset > off {
                        c.offset -= 1;
                    }
                }
                for ic in info.indices.iter_mut().flat_map(|i| i.idx_cols.iter_mut()) {
                    if ic.offset > off {
                        ic.offset -= 1;
                    }
                }
                self.alter(
                    t,
                    info,
                    action::DROP_COLUMN,
                    db,
                    json!({ "column": column }),
                )
            }
            Ddl::ModifyColumn { db, table, column } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                let l = column.name.to_lowercase();
                let c = info
                    .columns
                    .iter_mut()
                    .find(|c| c.name.l == l)
                    .ok_or_else(|| obj_err("column", &column.name, table, "unknown"))?;
                let mut new = column.build(c.id, c.offset, false);
                if !lossless_change(&c.field_type, &new.field_type)
                    || (!c.field_type.is_not_null() && !column.nullable)
                {
                    return Err(obj_err(
                        "column",
                        &column.name,
                        table,
                        "change needs a reorg (not simulated)",
                    ));
                }
                new.origin_default = c.origin_default.clone();
                new.origin_default_bit = c.origin_default_bit.clone();
                new.field_type.flag |= c.field_type.flag & mysql::PRI_KEY_FLAG;
                new.name = c.name.clone();
                *c = new;
                refresh_key_flags(&mut info);
                self.alter(
                    t,
                    info,
                    action::MODIFY_COLUMN,
                    db,
                    json!({ "column": column.name }),
                )
            }
            Ddl::AddIndex { db, table, index } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                if info
                    .indices
                    .iter()
                    .any(|i| i.idx_name.l == index.name.to_lowercase())
                {
                    return Err(obj_err("index", &index.name, table, "duplicate"));
                }
                if index.expression.is_some() {
                    return Err(obj_err(
                        "index",
                        &index.name,
                        table,
                        "an expression index is only made by CREATE TABLE in the simulator",
                    ));
                }
                let mut cols = Vec::new();
                for name in &index.columns {
                    let c = info
                        .columns
                        .iter()
                        .find(|c| c.name.l == name.to_lowercase())
                        .ok_or_else(|| obj_err("column", name, table, "unknown"))?;
                    if c.field_type.tp == mysql::TYPE_JSON
                        || c.field_type.flag & mysql::BLOB_FLAG != 0
                    {
                        return Err(obj_err(
                            "index",
                            &index.name,
                            table,
                            "JSON/BLOB column needs a prefix",
                        ));
                    }
                    cols.push(c);
                }
                let mut idx = types::index_info(
                    info.max_idx_id + 1,
                    &index.name,
                    &info.name.o,
                    &cols,
                    index.unique,
                    false,
                );
                idx.is_invisible = index.invisible;
                info.max_idx_id += 1;
                info.indices.push(idx);
                refresh_key_flags(&mut info);
                let new_meta = TableMeta::new(t.db_id, &t.db_name, info.clone());
                let backfill = self.backfill(core, &new_meta, info.max_idx_id)?;
                let mut p = self.alter(
                    t,
                    info,
                    action::ADD_INDEX,
                    db,
                    json!({ "index_name": index.name, "unique": index.unique }),
                );
                p.reorg = true;
                p.backfill = backfill;
                p
            }
            Ddl::DropIndex { db, table, index } => {
                let t = table_of(db, table)?;
                let mut info = t.info.clone();
                let l = index.to_lowercase();
                let pos = info
                    .indices
                    .iter()
                    .position(|i| i.idx_name.l == l && !i.is_primary)
                    .ok_or_else(|| obj_err("index", index, table, "unknown"))?;
                info.indices.remove(pos);
                refresh_key_flags(&mut info);
                self.alter(
                    t,
                    info,
                    action::DROP_INDEX,
                    db,
                    json!({ "index_name": index }),
                )
            }
        })
    }

    fn alter(
        &self,
        t: TableMeta,
        info: TableInfo,
        act: u8,
        db: &str,
        args: serde_json::Value,
    ) -> Plan {
        let mut p = Plan::new(act, t.db_id, db).table(&info);
        p.raw_args = args;
        p.edits
            .push(Edit::PutTable(t.db_id, Box::new(info.clone())));
        p.table_info = Some(info);
        p
    }

    /// Index entries of every existing row for the index `index_id` of `t`.
    fn backfill(
        &self,
        core: &mut SimCore,
        t: &TableMeta,
        index_id: i64,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(idx) = t.indexes.iter().find(|i| i.id == index_id) else {
            return Ok(Vec::new());
        };
        let ts = core.ts();
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut row = Vec::new();
        for pid in t.info.physical_ids() {
            let (start, end) = record_span(pid);
            for pair in core.mvcc.scan(&start, &end, 0, ts, false, &[])? {
                let r = pair.result?;
                let (_, handle) = decode_record_key(&pair.key)?;
                t.codec.decode_into(&r.value, Some(&handle), &mut row)?;
                out.push(index_entry(t, idx, pid, &handle, &row)?);
            }
        }
        out.sort();
        if idx.unique && out.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(obj_err(
                "index",
                "",
                t.name(),
                "duplicate entry for the unique index",
            ));
        }
        Ok(out)
    }

    fn job_row(
        &self,
        job: &Job,
        reorg: bool,
        processing: bool,
        p: &Plan,
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        let row = [
            Value::Int(job.id),
            Value::Int(i64::from(reorg)),
            Value::Bytes(p.schema_id.to_string().into_bytes()),
            Value::Bytes(p.table_id.to_string().into_bytes()),
            Value::Bytes(serde_json::to_vec(job).unwrap_or_default()),
            Value::Int(i64::from(job.action)),
            Value::Int(i64::from(processing)),
        ];
        let mut v = Vec::new();
        self.job_table.codec.encode_v2(&row, &mut v)?;
        Ok((record_key(self.job_table.info.id, &Handle::Int(job.id)), v))
    }

    /// Runs `ddl` as a job; returns once it is done and in the history table.
    pub fn execute_ddl(&mut self, core: &mut SimCore, ddl: &Ddl) -> Result<DdlOutcome> {
        let n = self.ids_needed(ddl)?;
        let first = self.catalog.next_global_id + 1;
        let job_id = first;
        let ids: Vec<i64> = (first + 1..first + 1 + n as i64).collect();
        let mut plan = self.plan(core, ddl, &ids)?;
        let query = ddl.sql();
        let mut outputs = Vec::new();

        // 1. submit
        let mut txn = KvTxn::new(core.ts());
        self.seq_num += 1;
        let mut job = Job {
            id: job_id,
            action: plan.action,
            schema_id: plan.schema_id,
            table_id: plan.table_id,
            schema_name: plan.schema_name.clone(),
            table_name: plan.table_name.clone(),
            state: job_state::QUEUEING,
            raw_args: Some(plan.raw_args.clone()),
            schema_state: schema_state::NONE,
            start_ts: txn.start_ts().0,
            query: query.clone(),
            binlog: Some(HistoryInfo::default()),
            version: 2,
            seq_num: self.seq_num,
            ..Job::default()
        };
        self.catalog.next_global_id = first + n as i64;
        catalog::put_string(
            &mut txn,
            "NextGlobalID",
            self.catalog.next_global_id.to_string().into_bytes(),
        );
        let (k, v) = self.job_row(&job, plan.reorg, false, &plan)?;
        txn.insert(k, v);
        outputs.extend(txn.commit(core, CommitMode::TwoPc)?.outputs);

        // 1b. backfill (ADD INDEX), invisible to CDC
        if !plan.backfill.is_empty() {
            let mut txn = KvTxn::new(core.ts());
            txn.set_txn_source(BACKFILL_TXN_SOURCE);
            for (k, v) in std::mem::take(&mut plan.backfill) {
                txn.put(k, v);
            }
            outputs.extend(txn.commit(core, CommitMode::TwoPc)?.outputs);
        }

        // 2. run to done
        let mut txn = KvTxn::new(core.ts());
        let run_start = txn.start_ts();
        let version = self.catalog.schema_version + 1;
        for e in &mut plan.edits {
            match e {
                Edit::PutDb(info) => catalog::put_db(&mut txn, info),
                Edit::DropDb(id) => {
                    if let Some(db) = self.catalog.dbs.get(id) {
                        catalog::delete_db(&mut txn, db);
                    }
                }
                Edit::PutTable(db, info) => {
                    info.update_timestamp = run_start.0;
                    catalog::put_table(&mut txn, *db, info);
                }
                Edit::DropTable(db, id) => catalog::delete_table(&mut txn, *db, *id),
                Edit::MoveRowId { table, from, to } => {
                    let old = catalog::row_id_key(*from, *table);
                    if let Some(v) = txn.get(core, &old)? {
                        txn.delete(old);
                        txn.put(catalog::row_id_key(*to, *table), v);
                    }
                }
                Edit::ExchangeRowIds { pt, nt_old, nt_new } => {
                    let mut end = 0i64;
                    for (db, id) in [*pt, *nt_old] {
                        if let Some(v) = txn.get(core, &catalog::row_id_key(db, id))? {
                            let n = std::str::from_utf8(&v)
                                .ok()
                                .and_then(|s| s.parse::<i64>().ok())
                                .ok_or(TidbError::CorruptedMeta { what: "TID" })?;
                            end = end.max(n);
                        }
                    }
                    txn.delete(catalog::row_id_key(nt_old.0, nt_old.1));
                    if end > 0 {
                        for (db, id) in [*pt, *nt_new] {
                            txn.put(catalog::row_id_key(db, id), end.to_string().into_bytes());
                        }
                    }
                }
            }
        }
        for t in plan
            .table_info
            .iter_mut()
            .chain(plan.multiple_table_infos.iter_mut())
        {
            if t.state == schema_state::PUBLIC {
                t.update_timestamp = run_start.0;
            }
        }
        catalog::put_string(
            &mut txn,
            "SchemaVersionKey",
            version.to_string().into_bytes(),
        );
        let (diff_table, diff_old_table) = match &plan.edits[..] {
            [.., Edit::ExchangeRowIds { nt_old, nt_new, .. }] => (nt_new.1, nt_old.1),
            _ => (
                plan.table_info.as_ref().map_or(plan.table_id, |t| t.id),
                if plan.action == action::TRUNCATE_TABLE {
                    plan.table_id
                } else {
                    0
                },
            ),
        };
        let diff = json!({
            "version": version, "type": plan.action, "schema_id": plan.schema_id,
            "table_id": diff_table,
            "old_table_id": diff_old_table,
            "old_schema_id": plan.old_schema_id, "regenerate_schema_map": false,
            "affected_options": null,
        });
        catalog::put_string(
            &mut txn,
            &format!("Diff:{version}"),
            diff.to_string().into_bytes(),
        );
        job.state = job_state::DONE;
        job.schema_state = if matches!(
            plan.action,
            action::DROP_SCHEMA
                | action::DROP_TABLE
                | action::TRUNCATE_TABLE_PARTITION
                | action::EXCHANGE_TABLE_PARTITION
        ) {
            schema_state::NONE
        } else {
            schema_state::PUBLIC
        };
        job.snapshot_ver = run_start.0;
        job.real_start_ts = run_start.0;
        job.binlog = Some(HistoryInfo {
            schema_version: version,
            db_info: plan.db_info.clone(),
            table_info: plan.table_info.clone(),
            finished_ts: 0,
            multiple_table_infos: plan.multiple_table_infos.clone(),
        });
        let (k, v) = self.job_row(&job, plan.reorg, true, &plan)?;
        txn.put(k, v);
        let done = txn.commit(core, CommitMode::TwoPc)?;
        outputs.extend(done.outputs);
        let stored_before = self.catalog.physical_ids();
        self.apply(&plan, version);
        // The rows of every table or partition the job dropped (DROP, TRUNCATE, DROP DATABASE,
        // TRUNCATE PARTITION) go to the delete ranges that GC destroys past the job's ts.
        let stored_after = self.catalog.physical_ids();
        for id in stored_before.difference(&stored_after) {
            let (start, end) = table_span(*id);
            core.add_delete_range(done.commit_ts, start, end);
        }
        // TiDB's `split-table` (on by default): a new table or partition starts a region.
        for id in stored_after.difference(&stored_before) {
            outputs.extend(split_at_table(core, *id));
        }
        // A batch create is one binlog transaction per table, in statement order.
        let statements = match ddl {
            Ddl::CreateTables { db, tables } => tables.iter().map(|t| t.sql(db)).collect(),
            _ => vec![query],
        };
        for statement in statements {
            self.emit_truth(&TruthTxn {
                start_ts: run_start,
                commit_ts: done.commit_ts,
                rows: Vec::new(),
                ddl: Some(statement),
            })?;
        }

        // 3. move to history
        let mut txn = KvTxn::new(core.ts());
        job.state = job_state::SYNCED;
        if let Some(b) = job.binlog.as_mut() {
            b.finished_ts = txn.start_ts().0;
        }
        let (k, _) = self.job_row(&job, plan.reorg, true, &plan)?;
        txn.delete(k);
        let now = core.now_ms();
        let created = time::timestamp_to_datetime((now / 1000) as u32, 0);
        let row = [
            Value::Int(job.id),
            Value::Bytes(serde_json::to_vec(&job).unwrap_or_default()),
            Value::Bytes(plan.schema_name.clone().into_bytes()),
            Value::Bytes(plan.table_name.clone().into_bytes()),
            Value::Bytes(plan.schema_id.to_string().into_bytes()),
            Value::Bytes(plan.table_id.to_string().into_bytes()),
            Value::DateTime(created),
        ];
        let mut v = Vec::new();
        self.history_table.codec.encode_v2(&row, &mut v)?;
        txn.insert(
            record_key(self.history_table.info.id, &Handle::Int(job.id)),
            v,
        );
        outputs.extend(txn.commit(core, CommitMode::TwoPc)?.outputs);

        Ok(DdlOutcome {
            job_id,
            schema_version: version,
            start_ts: run_start,
            finished_ts: done.commit_ts,
            outputs,
        })
    }

    /// Applies a committed plan to the in-memory catalog.
    fn apply(&mut self, plan: &Plan, version: i64) {
        self.catalog.schema_version = version;
        for e in &plan.edits {
            match e {
                Edit::PutDb(info) => {
                    self.catalog.dbs.insert(
                        info.id,
                        DbEntry {
                            info: info.clone(),
                            tables: Default::default(),
                        },
                    );
                }
                Edit::DropDb(id) => {
                    if let Some(db) = self.catalog.dbs.remove(id) {
                        for t in db.tables.keys() {
                            self.row_ids.remove(t);
                        }
                    }
                }
                Edit::PutTable(db, info) => {
                    if let Some(d) = self.catalog.dbs.get_mut(db) {
                        let name = d.info.db_name.o.clone();
                        d.tables.insert(
                            info.id,
                            Arc::new(TableMeta::new(*db, &name, (**info).clone())),
                        );
                    }
                }
                Edit::DropTable(db, id) => {
                    if let Some(d) = self.catalog.dbs.get_mut(db) {
                        d.tables.remove(id);
                    }
                    if !matches!(plan.action, action::RENAME_TABLE | action::RENAME_TABLES) {
                        self.row_ids.remove(id);
                    }
                }
                Edit::MoveRowId { .. } => {}
                Edit::ExchangeRowIds { pt, nt_new, .. } => {
                    // Both allocators moved to the larger end: refill from the meta key.
                    self.row_ids.remove(&pt.1);
                    self.row_ids.remove(&nt_new.1);
                }
            }
        }
        self.catalog.reindex();
    }
}

/// Splits the region holding `t{id}` there, unless a region starts there already; a refused
/// split (no leader) leaves the region whole, as TiDB only logs a failed pre-split.
fn split_at_table(core: &mut SimCore, id: i64) -> Vec<StoreOutput> {
    let prefix = table_prefix(id);
    let encoded = crate::sim::region::encode_key(&prefix);
    let region = match core.cluster.region_by_key(&encoded) {
        Some(r) if r.region.start_key != encoded => r.id(),
        _ => return Vec::new(),
    };
    core.split_region(region, &prefix).unwrap_or_default()
}

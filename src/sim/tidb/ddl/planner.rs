//! Planning a DDL: the ids it allocates and the checks and edits of its kind, each kind
//! planned by its own function (in the sibling modules).

use crate::sim::core::SimCore;
use crate::sim::tidb::catalog::{DbEntry, TableMeta};
use crate::sim::tidb::error::Result;
use crate::sim::tidb::Tidb;

use super::plan::Plan;
use super::statement::Ddl;

impl Tidb {
    /// The database `name`, or the error naming it.
    pub(in crate::sim::tidb) fn db_entry(&self, name: &str) -> Result<&DbEntry> {
        self.catalog.db_or_err(name)
    }

    /// A copy of the table `db`.`t` as it stands, or the error naming it.
    pub(super) fn table_of(&self, db: &str, t: &str) -> Result<TableMeta> {
        self.catalog.table_or_err(db, t).map(|m| (**m).clone())
    }

    /// How many new object ids `ddl` takes from `NextGlobalID` (besides the job id).
    pub(super) fn ids_needed(&self, ddl: &Ddl) -> Result<usize> {
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

    /// Checks `ddl` against the catalog and plans its job, with `ids` as its new object ids.
    pub(super) fn plan(&self, core: &mut SimCore, ddl: &Ddl, ids: &[i64]) -> Result<Plan> {
        match ddl {
            Ddl::CreateDatabase { name } => self.plan_create_database(name, ids),
            Ddl::DropDatabase { name } => self.plan_drop_database(name),
            Ddl::CreateTable { db, table } => self.plan_create_table(db, table, ids),
            Ddl::CreateTables { db, tables } => self.plan_create_tables(db, tables, ids),
            Ddl::CreateView { .. } | Ddl::DropView { .. } => self.plan_view(ddl, ids),
            Ddl::DropTable { db, table } => self.plan_drop_table(db, table),
            Ddl::TruncateTable { db, table } => self.plan_truncate_table(db, table, ids),
            Ddl::RenameTable {
                db,
                table,
                new_db,
                new_table,
            } => self.plan_rename_table(db, table, new_db, new_table),
            Ddl::RenameTables { renames } => self.plan_rename_tables(renames),
            Ddl::TruncatePartition {
                db,
                table,
                partitions,
            } => self.plan_truncate_partition(db, table, partitions, ids),
            Ddl::ExchangePartition {
                db,
                table,
                partition,
                nt_db,
                nt_table,
            } => self.plan_exchange_partition(core, db, table, partition, nt_db, nt_table),
            Ddl::AddColumn { db, table, column } => self.plan_add_column(db, table, column),
            Ddl::DropColumn { db, table, column } => self.plan_drop_column(db, table, column),
            Ddl::ModifyColumn { db, table, column } => self.plan_modify_column(db, table, column),
            Ddl::AddIndex { db, table, index } => self.plan_add_index(core, db, table, index),
            Ddl::DropIndex { db, table, index } => self.plan_drop_index(db, table, index),
        }
    }
}

//! The DDL statements the simulated TiDB runs, and their SQL text (the job's `query`).

use crate::sim::tidb::types::{quote, ColumnDef, IndexDef, TableDef};

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

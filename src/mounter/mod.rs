//! The mounter: committed raw rows of TiKV → typed MySQL row changes, with the schema valid at
//! each row's commit ts; finished DDL jobs → schema changes and binlog DDL statements.
//!
//! In: [`RawRow`](crate::model::RawRow)s in `(commit_ts, start_ts)` order from the sorter,
//! including rows of the DDL spans (`mysql.tidb_ddl_job`, …), and a [`MetaReader`] for the
//! bootstrap snapshot. Out: [`RowChange`]s (a table version with its TABLE_MAP description
//! and before/after cells) and [`DdlEvent`]s (one MySQL-dialect QUERY each).
//!
//! Invariants:
//! * a row with commit ts C is decoded with the schema after every DDL job whose FinishedTS
//!   is below C, i.e. the schema at C − 1 (TiCDC's `cdc/entry/mounter.go`);
//! * TABLE_MAP `table_id` is the logical table id; partitions map to their parent;
//! * a delete without old value is an error, never an empty before image;
//! * system schemas never reach the binlog; neither do tables outside the [`TableFilter`].
//!
//! # Layout
//!
//! * [`schema_store`]: [`MetaReader`], bootstrap, DDL job application, versions by ts, GC.
//! * [`coltype`]: TiDB `FieldType` → binlog `ColumnDef`, collation ids, `TableDef`.
//! * [`mount`]: [`Mounter`], raw row → [`RowChange`].
//! * [`ddl`]: job rows of the DDL spans, which jobs become [`DdlEvent`]s.
//! * [`ddl_sql`]: DDL text without TiDB-only syntax.
//! * [`filter`]: [`TableFilter`] (TiDB table-filter rules).
//! * [`error`]: the error type.

pub mod coltype;
pub mod ddl;
pub mod ddl_sql;
pub mod error;
pub mod event;
pub mod filter;
pub mod mount;
pub mod schema_store;
pub mod sql_catalog;
#[cfg(test)]
mod store_tests;

pub use ddl::{Catalog, DdlEvent};
pub use error::{MounterError, Result};
pub use event::{ChangeEvent, TxnRows};
pub use filter::TableFilter;
pub use mount::{Mounted, Mounter, RowChange, RowOp};
pub use schema_store::{AppliedDdl, MetaReader, MountedTable, SchemaStore};

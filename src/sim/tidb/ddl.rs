//! DDL statements run as TiDB 8.5 DDL jobs (submit → run to done → move to history; see the
//! [module doc](super)). Every check happens before the job is submitted, so a failing
//! statement writes nothing.
//!
//! # Layout
//!
//! * `statement`: the statements and their SQL text.
//! * `plan`: the plan of a job (meta edits, job fields) and the outcome of a finished one.
//! * `checks`: pure checks of table definitions the plans share.
//! * `planner`: the ids a statement needs, and the dispatch to the plan of its kind.
//! * `create`, `rename`, `partition`, `alter`: the plans, one function per kind.
//! * `execute`: the job's transactions, and the catalog update once it is done.

mod alter;
mod checks;
mod create;
mod execute;
mod partition;
mod plan;
mod planner;
mod rename;
mod statement;

pub use checks::exchange_compatible;
pub use plan::{DdlOutcome, BACKFILL_TXN_SOURCE};
pub use statement::{Ddl, TableRename};

pub(super) use plan::{obj_err, Edit, Plan};

//! From a parsed `SELECT` to a tree of operators: FROM (information_schema views, TiDB tables
//! read at the statement's snapshot timestamp, derived tables, joins) → WHERE → GROUP BY and
//! aggregates → HAVING → projection → DISTINCT → ORDER BY → LIMIT.
//!
//! Push-down: equality on `TABLE_SCHEMA`/`TABLE_NAME` (and the other name columns) narrows what
//! an information_schema view generates; comparisons of a key's columns with constants narrow
//! a TiDB table's scan to key ranges, an `ORDER BY` a prefix of the clustered key or of an
//! index is served by the scan's order (partitions merged) instead of a sort (`keyrange.rs`),
//! and a LIMIT sizes the scan's pages. The full WHERE is evaluated on every row either way, so
//! push-down only ever saves work.
//!
//! - `context`: what a query is planned against and what planning returns.
//! - `select`: FROM and WHERE; `finish`: grouping, the select list, ORDER BY and LIMIT.
//! - `sources`: the FROM items (views, TiDB tables, derived tables, joins).
//! - `scope`: the columns expressions see; `clauses`: the clauses read from the tree.

mod clauses;
mod context;
mod finish;
mod scope;
mod select;
mod sources;

pub use clauses::source_text;
pub use context::{OutColumn, Planned, QueryCtx, SnapshotSource};
pub use select::plan_query;

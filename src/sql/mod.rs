//! The SQL front: statements parsed once, answered by one small relational engine over
//! information_schema views and TiDB tables read at a snapshot timestamp.
//!
//! - [`parse`]: statement text → sqlparser statements, with a bound on tree depth.
//! - [`types`], [`charset`], [`text`], [`value`]: MySQL types, collations, text rendering and
//!   comparison rules.
//! - [`expr`], [`agg`]: expressions and aggregates; [`generated`]: virtual generated columns.
//! - [`catalog`], [`infoschema`]: the catalog at a position and the views over it.
//! - [`plan`], [`exec`]: SELECT → operators; [`show`]: SHOW forms as queries.
//! - [`like`]: `LIKE` patterns, matched in linear time without recursion.
//! - [`views`]: a view's columns (typed by planning its SELECT) and rows (its SELECT run).

pub mod agg;
pub mod binary;
pub mod catalog;
pub mod charset;
pub mod error;
pub mod exec;
pub mod expr;
pub mod expr_row;
pub mod func;
pub mod generated;
pub mod infoschema;
pub mod keyrange;
pub mod like;
pub mod parse;
pub mod perfschema;
pub mod plan;
pub mod refs;
pub mod show;
pub mod spill;
pub mod statement;
pub mod text;
pub mod tokens;
pub mod types;
pub mod value;
pub mod views;

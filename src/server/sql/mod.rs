//! SQL semantics shared by the statements the server answers.
//!
//! - [`parse`]: statement text → sqlparser statements, with a bound on tree depth.
//! - [`like`]: `LIKE` patterns, matched in linear time without recursion.

pub mod like;
pub mod parse;

//! Expressions: sqlparser's AST compiled against a scope of columns into a typed tree, then
//! evaluated per row with MySQL's semantics (three-valued logic, the comparison type chosen from
//! the argument types, collations, integer overflow as error 1690, division by zero as NULL).
//!
//! Everything that does not depend on the row is resolved while compiling: variables
//! (`@@x`, `@x`), the functions that describe the session or the server (`VERSION()`,
//! `DATABASE()`, `NOW()` — MySQL also fixes `NOW()` at the start of the statement) come from the
//! [`Env`]. Chains of AND, OR and arithmetic are flat nodes and other nesting is bounded
//! ([`super::parse::MAX_OPERATORS`]), so compiling and evaluating them recursively is bounded.
//!
//! - `tree`: the compiled tree; `scope`: what names resolve against.
//! - `compile`, `operators`: sqlparser's AST to the tree; `literal`, `typing`: literals and
//!   result types.
//! - `eval`: the tree evaluated for a row.

mod compile;
mod eval;
mod literal;
mod operators;
mod scope;
mod tree;
mod typing;

#[cfg(test)]
mod tests;

pub use super::func::Func;
pub use compile::{Compiler, MAX_DEPTH};
pub(crate) use eval::out_of_range;
pub use eval::{compare_values, convert_to};
pub use literal::literal;
pub use scope::{Env, NoColumns, NoSession, Scope};
pub use tree::{literal_string_type, ArithOp, ArithStep, CmpOp, Expr, ExprKind};
pub(crate) use typing::display_chars;
pub use typing::{is_aggregate, union_type};

//! Pure, synchronous TiDB codecs: what the capture side needs to understand the bytes TiKV
//! hands out, and what the simulator needs to produce them.
//!
//! In: raw keys and values of TiKV change events, meta-key values (schema JSON).
//! Out: typed keys ([`key::ParsedKey`]), schema structs ([`schema`]), and row cells as
//! `tibinlog_protocol::value::Value` ([`rowcodec::RowCodec`]).
//!
//! Invariant: no function here panics on input bytes; malformed input is an [`Error`].
//!
//! # Layout
//!
//! * [`codec`]: memcomparable numbers/bytes, varints, compact bytes, flag-prefixed datums.
//! * [`key`]: record/index/meta keys, table spans (raw and region-encoded), key parsing.
//! * [`decimal`]: MySQL binary DECIMAL to and from text.
//! * [`time`]: packed times, CoreTime, durations, TIMESTAMP conversion, time text.
//! * [`json`]: TiDB binary JSON to and from `Json`, MySQL-style JSON text.
//! * [`rowcodec`]: row format v2 and v1, per-type interpretation, defaults, encoding.
//! * [`schema`]: DBInfo / TableInfo / Job JSON, MySQL type codes and flags.
//! * [`show_create`]: `SHOW CREATE TABLE`/`VIEW` text of a TableInfo in MySQL 8.0's words.
//! * [`text`]: a `Value` as MySQL's SELECT prints it.
//! * [`error`]: the module's error type.

pub mod codec;
pub mod decimal;
pub mod error;
pub mod gcvt;
pub mod index_value;
pub mod json;
pub mod key;
pub mod partition_sql;
pub mod rowcodec;
pub mod schema;
pub mod show_create;
pub mod text;
pub mod time;

pub use error::{Error, Result};

//! MySQL wire packets and the binlog event codec for tibinlog.
//!
//! Sync, no async runtime: everything here turns values into bytes and bytes into values.
//!
//! # Layout
//! - [`value`]: typed MySQL column values (the contract with the mounter).
//! - [`binlog`]: binlog events, row values, GTID sets, checksums.
//! - [`wire`]: client/server packets of the MySQL protocol that a binlog master answers.

pub mod binlog;
pub mod value;
pub mod wire;

//! Helpers shared by the integration tests.

pub mod mariadb;
pub mod mariadb_binlog;
pub mod pipeline;
pub mod sim;
pub mod truth;

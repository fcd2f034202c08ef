//! tibinlog: a TiDB cluster served as a MySQL binlog master.

pub mod app;
pub mod binlog_store;
pub mod budget;
pub mod capture;
pub mod changefeed;
pub mod check;
pub mod ha;
pub mod inspect;
pub mod metrics;
pub mod model;
pub mod mounter;
pub mod security;
pub mod server;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sorter;
pub mod sql;
pub mod tidb;

//! tibinlog: a TiDB cluster served as a MySQL binlog master.

pub mod inspect;
pub mod sim;
pub mod tidb;

//! tibinlog: a TiDB cluster served as a MySQL binlog master.

pub mod capture;
pub mod inspect;
pub mod model;
pub mod mounter;
pub mod server;
pub mod sim;
pub mod tidb;

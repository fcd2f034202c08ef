//! Helpers shared by the integration tests.

pub mod app;
pub mod canal;
pub mod check;
pub mod checksum;
pub mod cut;
pub mod debezium;
pub mod demo;
pub mod etcd;
pub mod http;
pub mod java;
pub mod mariadb;
pub mod mariadb_binlog;
pub mod maxwell;
pub mod mysql8;
pub mod mysql_binlog;
pub mod parent;
pub mod peer;
pub mod peer_check;
pub mod proc;
pub mod raw_binlog;
pub mod repl;
pub mod replica;
pub mod sim;
pub mod tls;
pub mod truth;

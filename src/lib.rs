//! tibinlog: a TiDB cluster served as a MySQL binlog master.
//!
//! Every committed row change is captured from TiKV's change streams, put in commit order,
//! mounted into typed MySQL rows at the schema of its commit, written into MySQL binlog files
//! with GTIDs, and served over the MySQL replication protocol.
//!
//! ```text
//!  PD / TiKV                                                             replicas, CDC tools
//!      │ EventFeed, snapshot scans                                                ▲
//!  [capture] ─ rows, resolved ts ─► [sorter] ─► [mounter] ─► [changefeed] ─► [binlog_store] ─► [server]
//!   region streams, matcher,        memory tier   DDL jobs →    transactions    files, index,   MySQL protocol,
//!   frontier, snapshot reads        over RocksDB  schema, rows  in order,       GTIDs, group    dumps, SQL
//!                                                 → MySQL       supervisor      commit, sink    ([sql] engine)
//!  [ha]: one owner writes, standbys relay its binlog byte for byte (etcd election and fence)
//!  [app]: only wires the stages together and runs them
//! ```
//!
//! | stage | module | holds |
//! |---|---|---|
//! | 1 capture | [`capture`] | PD client, one EventFeed stream per store, incremental scans, region errors, the matcher of prewrites and commits, the resolved-ts frontier, snapshot reads of tables |
//! | 2–3 order | [`sorter`] | rows in `(commit_ts, start_ts, table, key)` order, bounded memory over one RocksDB, the capture's prewrite spill |
//! | 4 mount | [`mounter`], [`tidb`] | schema history from TiDB's DDL jobs; TiDB's key and row codecs; rows into typed MySQL values |
//! | 2–4 together | [`changefeed`] | capture → sorter → mounter as one stream of transactions and DDLs; the supervisor that feeds the sink and restarts after errors |
//! | 5 binlog | [`binlog_store`] | binlog files and index, GTIDs, group commit, rotation, purge, crash recovery; the sink thread; the server's view of it |
//! | 6 serve | [`server`], [`sql`] | the MySQL protocol, replica registration, dumps, heartbeats; the SQL clients send, answered by the [`sql`] engine at a binlog position |
//! | 7 HA | [`ha`] | election and fence on etcd, the owner gate, the standby that follows the owner |
//! | 8 simulator | `sim` (cargo feature `sim`) | PD and TiKV speaking kvproto over gRPC, TiDB's layer, a workload and its truth, faults |
//! | wiring | [`app`] | configuration, start, join and stop of the stages; status HTTP |
//! | tools | [`check`], [`inspect`] | `tibinlog check` (a copy against TiDB at a position), offline decoders |
//! | shared | [`model`], [`budget`], [`metrics`], [`security`] | data crossing stages, queue budgets, metric handles, TLS |
//!
//! The bytes of every binlog event and MySQL packet are the `tibinlog-protocol` crate's
//! (`protocol/`); the kvproto messages are `tibinlog-proto`'s (`proto/`).
//!
//! The modules depend on each other without cycles, and nothing but [`app`] depends on
//! [`app`]. Two seams point the other way from the data: the server states what it needs of a
//! binlog (`server::source`) and the binlog store implements it, so a dump never reaches into
//! the store's internals; and [`sql`] is the one engine that the server's SQL, the snapshot
//! reads of [`capture`] and the catalogs of [`mounter`] share.

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

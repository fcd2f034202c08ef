//! What the changefeed yields and the binlog sink consumes: mounted row changes in pieces of
//! one transaction, DDLs, and resolved timestamps, in `(commit_ts, start_ts)` order. Defined
//! here, with the rows and DDLs they carry, so that the stages after the mounter share them
//! without depending on each other.

use crate::model::Ts;

use super::{DdlEvent, RowChange};

/// A piece of one transaction's row changes.
#[derive(Debug, Clone)]
pub struct TxnRows {
    pub start_ts: Ts,
    pub commit_ts: Ts,
    /// Grouped by table, deletes before puts within a table. May be empty in a `last` piece.
    pub rows: Vec<RowChange>,
    /// The first piece of the transaction.
    pub first: bool,
    /// The last piece of the transaction.
    pub last: bool,
}

/// What the changefeed yields, in `(commit_ts, start_ts)` order.
#[derive(Debug, Clone)]
pub enum ChangeEvent {
    Rows(TxnRows),
    Ddl(DdlEvent),
    /// Everything with `commit_ts <= ts` has been yielded.
    Resolved(Ts),
}

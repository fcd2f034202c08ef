//! The transaction gate of the binlog sink: where the sink stands between the changefeed's
//! events, and which of them cannot come where they came.
//!
//! The changefeed hands a transaction over as pieces (`first` … `last`, one piece may be both),
//! DDLs and resolved timestamps between transactions. A transaction the binlog already has (a
//! capture restart resends everything after the checkpoint) is skipped whole. Anything else —
//! a transaction starting inside another, a piece of another transaction, a piece without its
//! first, a DDL or a resolved ts inside a transaction — would corrupt the binlog if written: it
//! is a [`GateError`] and the sink stops.
//!
//! Pure: the sink asks the gate, then calls the store.

use crate::model::Ts;

/// A transaction: `(commit_ts, start_ts)`.
pub type TxnKey = (Ts, Ts);

/// Where the sink stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gate {
    /// Between transactions.
    #[default]
    Idle,
    /// A transaction is open in the store.
    Writing(TxnKey),
    /// A transaction the binlog already has: its pieces are dropped.
    Skipping(TxnKey),
}

/// What the sink does with a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// Write its rows; `commit`: it is the last, commit the transaction.
    Write { commit: bool },
    /// Drop it; `done`: it was the last of the skipped transaction.
    Skip { done: bool },
}

/// An event where it cannot come: the changefeed broke its order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("transaction {}@{} starts inside another one", .0.1.0, .0.0.0)]
    StartsInside(TxnKey),
    #[error("piece of transaction {}@{} inside another one", .0.1.0, .0.0.0)]
    PieceInside(TxnKey),
    #[error("piece of transaction {}@{} without its first piece", .0.1.0, .0.0.0)]
    WithoutFirst(TxnKey),
    #[error("DDL {}@{} inside a transaction", .0.1.0, .0.0.0)]
    DdlInside(TxnKey),
    #[error("resolved ts {} inside a transaction", .0.0)]
    ResolvedInside(Ts),
}

impl Gate {
    /// A transaction's first piece may come: the sink is between transactions.
    pub fn may_start(&self, key: TxnKey) -> Result<(), GateError> {
        match self {
            Gate::Idle => Ok(()),
            _ => Err(GateError::StartsInside(key)),
        }
    }

    /// The store opened `key`.
    pub fn begin(&mut self, key: TxnKey) {
        *self = Gate::Writing(key);
    }

    /// The binlog already has `key`.
    pub fn skip(&mut self, key: TxnKey) {
        *self = Gate::Skipping(key);
    }

    /// A piece of `key` (after [`Self::begin`] or [`Self::skip`] for its first); `last` ends
    /// the transaction.
    pub fn piece(&mut self, key: TxnKey, last: bool) -> Result<Piece, GateError> {
        let piece = match *self {
            Gate::Writing(k) if k == key => Piece::Write { commit: last },
            Gate::Skipping(k) if k == key => Piece::Skip { done: last },
            Gate::Writing(_) | Gate::Skipping(_) => return Err(GateError::PieceInside(key)),
            Gate::Idle => return Err(GateError::WithoutFirst(key)),
        };
        if last {
            *self = Gate::Idle;
        }
        Ok(piece)
    }

    /// A DDL may come: the sink is between transactions.
    pub fn may_ddl(&self, key: TxnKey) -> Result<(), GateError> {
        match self {
            Gate::Idle => Ok(()),
            _ => Err(GateError::DdlInside(key)),
        }
    }

    /// A resolved ts may be flushed: the sink is between transactions.
    pub fn may_resolve(&self, ts: Ts) -> Result<(), GateError> {
        match self {
            Gate::Idle => Ok(()),
            _ => Err(GateError::ResolvedInside(ts)),
        }
    }

    /// The changefeed restarts: back between transactions; `true` when a transaction was open
    /// in the store (the sink aborts it).
    pub fn reset(&mut self) -> bool {
        let open = self.writing();
        *self = Gate::Idle;
        open
    }

    /// A transaction is open in the store.
    pub fn writing(&self) -> bool {
        matches!(self, Gate::Writing(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(commit: u64, start: u64) -> TxnKey {
        (Ts(commit), Ts(start))
    }

    /// One step of a script: the event and what the gate answers.
    enum Step {
        Start(TxnKey, bool),
        Part(TxnKey, bool, Result<Piece, GateError>),
        Ddl(TxnKey, bool),
        Resolved(u64, bool),
        Reset(bool),
    }
    use Step::*;

    fn run(script: &[Step]) {
        let mut g = Gate::default();
        for (i, step) in script.iter().enumerate() {
            match step {
                Start(key, written) => {
                    assert_eq!(g.may_start(*key), Ok(()), "step {i}");
                    if *written {
                        g.skip(*key);
                    } else {
                        g.begin(*key);
                    }
                }
                Part(key, last, want) => assert_eq!(&g.piece(*key, *last), want, "step {i}"),
                Ddl(key, ok) => assert_eq!(g.may_ddl(*key).is_ok(), *ok, "step {i}"),
                Resolved(ts, ok) => assert_eq!(g.may_resolve(Ts(*ts)).is_ok(), *ok, "step {i}"),
                Reset(open) => assert_eq!(g.reset(), *open, "step {i}"),
            }
        }
    }

    #[test]
    fn transactions_written_and_skipped_whole() {
        run(&[
            Resolved(9, true),
            Start(k(10, 5), false),
            Part(k(10, 5), false, Ok(Piece::Write { commit: false })),
            Resolved(9, false),
            Ddl(k(11, 6), false),
            Part(k(10, 5), true, Ok(Piece::Write { commit: true })),
            Ddl(k(11, 6), true),
            // Resent after a restart: the binlog has it.
            Start(k(12, 7), true),
            Part(k(12, 7), false, Ok(Piece::Skip { done: false })),
            Part(k(12, 7), true, Ok(Piece::Skip { done: true })),
            Resolved(12, true),
            // One piece, first and last.
            Start(k(13, 8), false),
            Part(k(13, 8), true, Ok(Piece::Write { commit: true })),
        ]);
    }

    #[test]
    fn out_of_order_events_are_errors() {
        let mut g = Gate::default();
        assert_eq!(
            g.piece(k(10, 5), true),
            Err(GateError::WithoutFirst(k(10, 5)))
        );
        g.begin(k(10, 5));
        assert_eq!(
            g.may_start(k(11, 6)),
            Err(GateError::StartsInside(k(11, 6)))
        );
        assert_eq!(
            g.piece(k(11, 6), false),
            Err(GateError::PieceInside(k(11, 6)))
        );
        assert_eq!(
            g.may_resolve(Ts(10)).expect_err("inside").to_string(),
            "resolved ts 10 inside a transaction"
        );
        assert_eq!(
            GateError::StartsInside(k(11, 6)).to_string(),
            "transaction 6@11 starts inside another one"
        );
        // A skipped transaction is closed to others too.
        let mut g = Gate::default();
        g.skip(k(10, 5));
        assert_eq!(
            g.piece(k(11, 6), true),
            Err(GateError::PieceInside(k(11, 6)))
        );
        assert_eq!(g.may_ddl(k(11, 6)), Err(GateError::DdlInside(k(11, 6))));
    }

    #[test]
    fn a_reset_aborts_an_open_transaction_only() {
        run(&[
            Start(k(10, 5), false),
            Reset(true),
            Start(k(10, 5), true),
            Reset(false),
            Reset(false),
            Start(k(10, 5), false),
        ]);
    }
}

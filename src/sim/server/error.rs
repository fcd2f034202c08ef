//! Errors of the gRPC shell, classified by what the caller must do.

use std::net::SocketAddr;

use crate::sim::SimError;

/// Result alias of the shell.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

/// Everything a [`super::SimCluster`] call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A listener could not be bound (port taken): pick another port or retry.
    #[error("bind {addr}: {source}")]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The core refused the operation (unknown region, lock met, write conflict…).
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The PD member is not in the state the operation needs.
    #[error("PD member {member_id} is {state}")]
    PdMember {
        /// Member id.
        member_id: u64,
        /// What it is.
        state: &'static str,
    },
    /// The store is not in the state the operation needs (already stopped, not stopped…).
    #[error("store {store_id} is {state}")]
    StoreState {
        /// Store id.
        store_id: u64,
        /// What it is.
        state: &'static str,
    },
    /// The TLS certificates could not be used.
    #[error("TLS: {0}")]
    Tls(#[from] crate::security::TlsSetupError),
    /// The cluster was shut down: nothing more can be done with it.
    #[error("simulated cluster is shut down")]
    Shutdown,
}

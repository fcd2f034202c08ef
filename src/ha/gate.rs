//! An HA member's way to ownership ([`OwnerGate`]): connect to the group's etcd, hold the
//! history it would capture from while it stands by, campaign, and once it owns the group
//! publish its durable binlog end and resign when it stops cleanly.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tibinlog_protocol::binlog::Sid;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::follow;
use crate::binlog_store::catalog_history::SchemaHistory;
use crate::binlog_store::BinlogFiles;
use crate::capture::pd::PdClient;
use crate::model::Ts;
use crate::mounter::TableFilter;
use crate::server::status::CaptureStatus;

/// First wait before a failed campaign is tried again (doubles up to [`MAX_RETRY`]).
const FIRST_RETRY: Duration = Duration::from_millis(500);
/// Longest wait between two campaigns that failed.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How long a clean stop of an HA owner waits for the writer to close the store before it
/// resigns.
const STORE_CLOSE_WAIT: Duration = Duration::from_secs(30);

/// An instance's place in an HA group (see [`crate::ha`]).
#[derive(Debug, Clone)]
pub struct HaConfig {
    /// etcd endpoints; the PD endpoints when empty (PD embeds etcd).
    pub etcd: Vec<String>,
    /// Key prefix of the group; `/tibinlog/<server_uuid>` when absent.
    pub prefix: Option<String>,
    /// TTL of the owner's lease.
    pub lease_ttl: Duration,
    /// The MySQL address the other members and consumers reach this one at; the listen
    /// address when absent.
    pub advertise: Option<String>,
    /// The account a standby follows the owner's binlog with, and its password.
    pub user: String,
    pub password: String,
}

/// An HA member's way to ownership: the campaign, then the fence for the writer and the
/// published binlog end.
pub struct OwnerGate {
    pub candidate: crate::ha::Candidate,
    /// Holds this instance's service safe point at its own checkpoint while it stands by, so
    /// the history it would capture from on taking over stays.
    pd: PdClient,
    gc: crate::capture::gc_keeper::GcKeeperConfig,
    checkpoint: watch::Receiver<Ts>,
    /// Set by `App::kill`: the ownership is dropped without resigning, as in a crash.
    abrupt: Arc<AtomicBool>,
    /// Cancelled once the writer has closed the binlog store: a clean stop resigns after it
    /// (the close still writes, and a resigned owner's fence refuses every write).
    store_closed: CancellationToken,
    fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>>,
    pub history: Arc<SchemaHistory>,
    files: BinlogFiles,
    /// How this instance follows the owner while it stands by.
    pub follow: follow::FollowConfig,
}

impl OwnerGate {
    #[allow(clippy::too_many_arguments)]
    pub async fn connect(
        ha: &HaConfig,
        pd_addrs: &[String],
        (server_uuid, server_id): (Sid, u32),
        instance_id: &str,
        local_addr: SocketAddr,
        fence: Arc<std::sync::OnceLock<Arc<crate::ha::Fence>>>,
        history: Arc<SchemaHistory>,
        files: BinlogFiles,
        (abrupt, store_closed): (Arc<AtomicBool>, CancellationToken),
        (pd, gc, checkpoint): (
            PdClient,
            crate::capture::gc_keeper::GcKeeperConfig,
            watch::Receiver<Ts>,
        ),
        filter: TableFilter,
    ) -> anyhow::Result<OwnerGate> {
        let endpoints = if ha.etcd.is_empty() {
            pd_addrs.to_vec()
        } else {
            ha.etcd.clone()
        };
        let cfg = crate::ha::ElectionConfig {
            endpoints: endpoints.clone(),
            prefix: ha
                .prefix
                .clone()
                .unwrap_or_else(|| format!("/tibinlog/{server_uuid}")),
            member: crate::ha::MemberInfo {
                instance_id: instance_id.to_owned(),
                mysql: ha
                    .advertise
                    .clone()
                    .unwrap_or_else(|| local_addr.to_string()),
            },
            lease_ttl: ha.lease_ttl,
        };
        let candidate = crate::ha::Candidate::connect(cfg)
            .await
            .with_context(|| format!("connect to etcd at {}", endpoints.join(",")))?;
        let follow = follow::FollowConfig {
            user: ha.user.clone(),
            password: ha.password.clone(),
            replica_server_id: follow::replica_server_id(instance_id, server_id),
            advertise: candidate.member().mysql.clone(),
            pd: pd.clone(),
            filter,
        };
        Ok(OwnerGate {
            follow,
            candidate,
            pd,
            gc,
            checkpoint,
            abrupt,
            store_closed,
            fence,
            history,
            files,
        })
    }

    /// Campaigns until this instance owns the group (retrying etcd errors); `None` when the
    /// app stops first. Once won, the ownership's end publisher runs until the app stops.
    pub async fn campaign(
        &self,
        stop: &CancellationToken,
        status: &CaptureStatus,
    ) -> Option<Arc<crate::ha::Fence>> {
        status.standby();
        let keeper_stop = stop.child_token();
        let _keeper_guard = keeper_stop.clone().drop_guard();
        let keeper = crate::capture::gc_keeper::GcKeeper::spawn(
            self.pd.clone(),
            self.gc.clone(),
            self.checkpoint.clone(),
            keeper_stop,
        );
        tokio::spawn(async move {
            if let Err(e) = keeper.join().await {
                tracing::error!(
                    error = %e,
                    "this standby cannot hold the history it would take over from"
                );
            }
        });
        // A new member takes the owner's history first: winning with nothing would start a
        // binlog of its own. Only a group without an owner (its first start) has none to take.
        let me = self.candidate.member().instance_id.clone();
        while self.files.snapshot_point().is_none() && self.files.gtid_executed().is_empty() {
            match self.candidate.owner().await {
                Ok(None) => break,
                Ok(Some(m)) if m.instance_id == me => break,
                Ok(Some(_)) | Err(_) => {}
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
        let mut retry = FIRST_RETRY;
        let ownership = loop {
            info!(instance = %self.candidate.member().instance_id, "standing by: campaigning for the ownership");
            match self.candidate.campaign(stop).await {
                Ok(o) => break o,
                Err(crate::ha::ElectionError::Stopped) => return None,
                Err(e) => {
                    warn!(error = %e, retry_in = ?retry, "campaign failed");
                    tokio::select! {
                        () = stop.cancelled() => return None,
                        () = tokio::time::sleep(retry) => {}
                    }
                    retry = (retry * 2).min(MAX_RETRY);
                }
            }
        };
        let fence = ownership.fence();
        let _ = self.fence.set(fence.clone());
        let me = self.candidate.member();
        info!(
            instance = %me.instance_id,
            checkpoint = self.checkpoint.borrow().0,
            "owns the HA group: capture starts from the checkpoint"
        );
        status.ha_owner(Some((me.instance_id.clone(), me.mysql.clone())));
        tokio::spawn(publish_end(
            ownership,
            self.files.clone(),
            stop.clone(),
            (self.abrupt.clone(), self.store_closed.clone()),
        ));
        Some(fence)
    }
}

/// Publishes the durable binlog end under the group's prefix while this instance owns it
/// (conditional on the owner key, see [`crate::ha::Ownership::publish_end`]); resigns when the
/// app stops and the writer has closed the store, so a standby takes over at once.
async fn publish_end(
    ownership: crate::ha::Ownership,
    files: BinlogFiles,
    stop: CancellationToken,
    (abrupt, store_closed): (Arc<AtomicBool>, CancellationToken),
) {
    let fence = ownership.fence();
    let mut end = files.subscribe();
    loop {
        let text = {
            let (pos, gtids) = files.status();
            serde_json::json!({
                "file": files.file_name(pos.file_seq),
                "pos": pos.offset,
                "gtid_executed": gtids.to_string(),
            })
            .to_string()
        };
        if let Err(e) = ownership.publish_end(&text).await {
            debug!(error = %e, "publishing the binlog end");
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = fence.lost() => break,
            changed = end.changed() => {
                if changed.is_err() {
                    break;
                }
                // At most ten a second.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if !fence.is_lost() && !abrupt.load(Ordering::SeqCst) {
        // The lease is kept alive meanwhile; a writer that does not finish in time is not
        // waited for (its close is then refused, and the next start recovers the store).
        let _ = tokio::time::timeout(STORE_CLOSE_WAIT, store_closed.cancelled()).await;
        if let Err(e) = ownership.resign().await {
            warn!(error = %e, "resigning the ownership");
        } else {
            info!("resigned the ownership");
        }
    }
}

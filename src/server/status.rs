//! What capture is doing, as the app reports it: `SHOW STATUS` shows it
//! (`Tibinlog_capture_state`, `…_error`, `…_restarts`; in an HA group `Tibinlog_ha_role`,
//! `…_owner`, `…_instance_id`, `…_following`, `…_follow_error`) and the progress log repeats it.

use std::sync::Mutex;

/// The state of capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CaptureState {
    /// Capturing (or starting to).
    #[default]
    Running,
    /// Failed with an error that may pass; capture restarts from the checkpoint.
    Retrying,
    /// Failed with an error that retrying cannot fix: capture stopped for good, the server
    /// keeps serving the binlog written so far.
    Stopped,
    /// A member of an HA group that does not own it: no capture; it serves the binlog it has
    /// and takes over when the owner goes.
    Standby,
}

impl CaptureState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Retrying => "retrying",
            Self::Stopped => "stopped",
            Self::Standby => "standby",
        }
    }
}

/// One reading of [`CaptureStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureReport {
    pub state: CaptureState,
    /// The last error, kept after a restart succeeds (empty until one happens).
    pub last_error: String,
    /// Restarts of capture after errors.
    pub restarts: u64,
    /// The last [`RECENT_ERRORS`] errors with their Unix time, oldest first.
    pub recent_errors: std::collections::VecDeque<(u64, String)>,
    /// A member of an HA group: who owns it, as this member knows.
    pub ha: Option<HaReport>,
}

/// An HA member's view of its group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HaReport {
    /// This member's instance id.
    pub instance_id: String,
    /// The owner's instance id and MySQL address, as last learned from etcd (`None` while
    /// no member owns the group or etcd cannot be reached).
    pub owner: Option<(String, String)>,
    /// A standby: it is reading the owner's binlog now.
    pub following: bool,
    /// A standby: why following the owner failed last (empty until it does).
    pub follow_error: String,
}

impl HaReport {
    /// `owner` or `standby`.
    pub fn role(&self) -> &'static str {
        match &self.owner {
            Some((id, _)) if *id == self.instance_id => "owner",
            _ => "standby",
        }
    }

    /// `<instance id> (<MySQL address>)`, or empty.
    pub fn owner_text(&self) -> String {
        self.owner
            .as_ref()
            .map(|(id, addr)| format!("{id} ({addr})"))
            .unwrap_or_default()
    }
}

/// Errors [`CaptureReport::recent_errors`] keeps.
pub const RECENT_ERRORS: usize = 20;

impl CaptureReport {
    fn remember(&mut self, error: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if self.recent_errors.len() == RECENT_ERRORS {
            self.recent_errors.pop_front();
        }
        self.recent_errors.push_back((now, error.to_owned()));
    }
}

/// Shared between the app (writer of the state) and the server (reader).
#[derive(Debug, Default)]
pub struct CaptureStatus(Mutex<CaptureReport>);

impl CaptureStatus {
    fn with<R>(&self, f: impl FnOnce(&mut CaptureReport) -> R) -> R {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// An HA standby: waiting for the ownership.
    pub fn standby(&self) {
        self.with(|r| r.state = CaptureState::Standby);
    }

    /// Capture runs again.
    pub fn running(&self) {
        self.with(|r| r.state = CaptureState::Running);
    }

    /// Capture failed with `error` and will restart.
    pub fn retrying(&self, error: String) {
        self.with(|r| {
            r.state = CaptureState::Retrying;
            r.remember(&error);
            r.last_error = error;
            r.restarts += 1;
        });
    }

    /// Capture stopped for good with `error`.
    pub fn stopped(&self, error: String) {
        self.with(|r| {
            r.state = CaptureState::Stopped;
            r.remember(&error);
            r.last_error = error;
        });
    }

    /// This instance is a member of an HA group.
    pub fn ha_member(&self, instance_id: &str) {
        self.with(|r| {
            r.ha = Some(HaReport {
                instance_id: instance_id.to_owned(),
                ..HaReport::default()
            })
        });
    }

    /// The group's owner as last learned (`None`: none known).
    pub fn ha_owner(&self, owner: Option<(String, String)>) {
        self.with(|r| {
            if let Some(h) = &mut r.ha {
                h.owner = owner;
            }
        });
    }

    /// A standby started (`None`) or failed (`Some(error)`) following the owner, or stopped
    /// following it (`Some("")`).
    pub fn ha_following(&self, outcome: Option<String>) {
        self.with(|r| {
            if let Some(h) = &mut r.ha {
                h.following = outcome.is_none();
                if let Some(e) = outcome.filter(|e| !e.is_empty()) {
                    h.follow_error = e;
                }
            }
        });
    }

    pub fn report(&self) -> CaptureReport {
        self.with(|r| r.clone())
    }

    /// `SHOW STATUS` rows.
    pub fn status_vars(&self) -> Vec<(&'static str, String)> {
        let r = self.report();
        let mut vars = vec![
            ("Tibinlog_capture_state", r.state.name().to_owned()),
            ("Tibinlog_capture_last_error", r.last_error),
            ("Tibinlog_capture_restarts", r.restarts.to_string()),
        ];
        if let Some(h) = r.ha {
            vars.extend([
                ("Tibinlog_ha_follow_error", h.follow_error.clone()),
                (
                    "Tibinlog_ha_following",
                    if h.following { "ON" } else { "OFF" }.to_owned(),
                ),
                ("Tibinlog_ha_instance_id", h.instance_id.clone()),
                ("Tibinlog_ha_owner", h.owner_text()),
                ("Tibinlog_ha_role", h.role().to_owned()),
            ]);
        }
        vars
    }

    /// The owner as `SHOW MASTER STATUS` names it in an HA group (`None` outside one).
    pub fn ha_owner_text(&self) -> Option<String> {
        self.with(|r| r.ha.as_ref().map(HaReport::owner_text))
    }
}

//! What capture is doing, as the app reports it: `SHOW STATUS` shows it
//! (`Tibinlog_capture_state`, `…_error`, `…_restarts`) and the progress log repeats it.

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

    pub fn report(&self) -> CaptureReport {
        self.with(|r| r.clone())
    }

    /// `SHOW STATUS` rows.
    pub fn status_vars(&self) -> [(&'static str, String); 3] {
        let r = self.report();
        [
            ("Tibinlog_capture_state", r.state.name().to_owned()),
            ("Tibinlog_capture_last_error", r.last_error),
            ("Tibinlog_capture_restarts", r.restarts.to_string()),
        ]
    }
}

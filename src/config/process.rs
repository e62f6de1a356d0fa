//! Which process of `trident serve` this is: the supervisor, the serving process it started, or
//! a server alone (the process model: `crate::supervisor`).

use std::path::PathBuf;
use std::time::Duration;

/// How many abnormal ends of the serving process are restarted, by default, within
/// [`DEFAULT_RESTART_WINDOW_SECS`].
pub const DEFAULT_MAX_RESTARTS: u32 = 5;
/// The window [`DEFAULT_MAX_RESTARTS`] counts in.
pub const DEFAULT_RESTART_WINDOW_SECS: u64 = 600;

/// The role of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessRole {
    /// `trident serve` as a container runs it: no Triton here; it owns the listener and signals
    /// and runs the serving process, restarting it when it dies abnormally.
    Supervisor(RestartLimit),
    /// The serving process a supervisor started.
    Supervised(Supervision),
    /// Serving in this process, with no supervisor (`--supervise false`, embedding, tests).
    Alone,
}

/// How many restarts a supervisor allows before it gives up (a crash loop): more than `max`
/// abnormal ends within `window` end the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartLimit {
    /// Abnormal ends restarted within `window` (`--max-restarts`, default 5).
    pub max: u32,
    /// The window `max` counts in (`--restart-window-secs`, default 600 seconds).
    pub window: Duration,
}

impl Default for RestartLimit {
    fn default() -> RestartLimit {
        RestartLimit {
            max: DEFAULT_MAX_RESTARTS,
            window: Duration::from_secs(DEFAULT_RESTART_WINDOW_SECS),
        }
    }
}

/// The variable that tells a serving process its supervisor's pid ([`Supervision::supervisor`]).
pub const SUPERVISOR_PID_ENV: &str = "TRIDENT_SUPERVISOR_PID";
/// The variable that tells a serving process the supervisor's state folder.
pub const STATE_DIR_ENV: &str = "TRIDENT_STATE_DIR";
/// The variable that tells a serving process how many were restarted before it.
pub const RESTARTS_ENV: &str = "TRIDENT_RESTARTS";

/// What a supervisor tells the serving process it starts, through its environment: written by
/// [`Supervision::environment`], read back by `trident serve`'s flags (`args`), which name the
/// same variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supervision {
    /// The supervisor's pid: the serving process ends when its parent is no longer this.
    pub supervisor: u32,
    /// A folder of the supervisor's that outlives each serving process: what a restarted one
    /// needs (the multi-model endpoint's loaded models).
    pub state_dir: PathBuf,
    /// How many serving processes before this one ended abnormally and were restarted.
    pub restarts: u32,
}

impl Supervision {
    /// The variables the serving process reads this from.
    pub fn environment(&self) -> [(&'static str, std::ffi::OsString); 3] {
        [
            (SUPERVISOR_PID_ENV, self.supervisor.to_string().into()),
            (STATE_DIR_ENV, self.state_dir.clone().into_os_string()),
            (RESTARTS_ENV, self.restarts.to_string().into()),
        ]
    }

    /// The start of the name of every shared memory region this serving process's python
    /// stubs get (the python backend's `shm-region-prefix-name`): the backend's own prefix,
    /// the supervisor's state folder (unique to the supervisor) and the restart count, so the
    /// supervisor removes exactly this process's regions when it dies, whatever their age, and
    /// never another server's.
    pub fn shm_region_prefix(&self) -> String {
        let folder = self
            .state_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The folder is `trident-<pid>-<nanos>`; the word itself is left out, so a stub's
        // command line never reads as trident's.
        let plain: String = folder
            .trim_start_matches("trident-")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        format!(
            "{}s{plain}-{}-",
            crate::engine::processes::SHM_REGION_PREFIX,
            self.restarts
        )
    }
}

//! How the engine's core is configured beyond its models: its own logging and settings for its
//! backends. Plain data, so configuration can name them without knowing about Triton.

/// Triton's own logging, which goes to its standard error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreLogging {
    /// Log info-level messages (`TRITONSERVER_ServerOptionsSetLogInfo`); on by default.
    pub info: bool,
    /// Log warnings (`TRITONSERVER_ServerOptionsSetLogWarn`); on by default.
    pub warn: bool,
    /// Log errors (`TRITONSERVER_ServerOptionsSetLogError`); on by default.
    pub error: bool,
    /// 0 is off; higher is more verbose.
    pub verbose: i32,
}

impl Default for CoreLogging {
    fn default() -> Self {
        CoreLogging {
            info: true,
            warn: true,
            error: true,
            verbose: 0,
        }
    }
}

/// One `--backend-config=<backend>,<setting>=<value>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSetting {
    /// The backend the setting is for, e.g. `python`.
    pub backend: String,
    /// The setting's name, e.g. `shm-default-byte-size`.
    pub setting: String,
    /// The value, as text; the backend parses it.
    pub value: String,
}

impl BackendSetting {
    /// A setting for `backend`, with `value` turned into text.
    pub fn new(backend: &str, setting: &str, value: impl ToString) -> BackendSetting {
        BackendSetting {
            backend: backend.into(),
            setting: setting.into(),
            value: value.to_string(),
        }
    }
}

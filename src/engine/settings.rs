//! How the engine's core is configured beyond its models: its own logging and settings for its
//! backends. Plain data, so configuration can name them without knowing about Triton.

/// Triton's own logging, which goes to its standard error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreLogging {
    pub info: bool,
    pub warn: bool,
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
    pub backend: String,
    pub setting: String,
    pub value: String,
}

impl BackendSetting {
    pub fn new(backend: &str, setting: &str, value: impl ToString) -> BackendSetting {
        BackendSetting {
            backend: backend.into(),
            setting: setting.into(),
            value: value.to_string(),
        }
    }
}

//! The core section: what trident tells the Triton core it starts (logging, backend settings,
//! threads, GPU memory, namespacing), where the core is found, and how long a model load may
//! take.

use std::path::PathBuf;
use std::time::Duration;

use super::ConfigError;
use crate::engine::{BackendSetting, CoreLogging};

/// Default for `--model-load-timeout-secs`.
pub const DEFAULT_MODEL_LOAD_TIMEOUT_SECS: u64 = 600;

/// How the Triton core runs.
#[derive(Debug, Clone)]
pub struct CoreSettings {
    /// The core's log levels.
    pub logging: CoreLogging,
    /// Backend settings passed to the core: the Python backend's shared memory sizes, the
    /// TensorFlow version and the additional args' `--backend-config`s.
    pub backend_config: Vec<BackendSetting>,
    /// The core's buffer manager threads; `None` leaves Triton's default.
    pub buffer_manager_threads: Option<u32>,
    /// Fraction (0 to 1) of each GPU's memory a model load may leave in use, applied to every
    /// GPU found; `None` sets no limit.
    pub model_load_gpu_limit: Option<f64>,
    /// Whether the core namespaces models by repository (Triton's `--model-namespacing`).
    pub model_namespacing: bool,
    /// A Triton installation or the library itself; `None` looks in the usual places.
    pub triton_home: Option<PathBuf>,
    /// How long a multi-model load may take before it is answered 504.
    pub model_load_timeout: Duration,
}

impl Default for CoreSettings {
    fn default() -> CoreSettings {
        CoreSettings {
            logging: CoreLogging::default(),
            backend_config: Vec::new(),
            buffer_manager_threads: None,
            model_load_gpu_limit: None,
            model_namespacing: true,
            triton_home: None,
            model_load_timeout: Duration::from_secs(DEFAULT_MODEL_LOAD_TIMEOUT_SECS),
        }
    }
}

/// Applies the Triton flags trident understands from `SAGEMAKER_TRITON_ADDITIONAL_ARGS`.
pub(super) fn apply_additional_args(
    args: &str,
    backend_config: &mut Vec<BackendSetting>,
    logging: &mut CoreLogging,
) -> Result<(), ConfigError> {
    for arg in args.split_whitespace() {
        if let Some(setting) = arg.strip_prefix("--backend-config=") {
            let parsed = setting
                .split_once(',')
                .and_then(|(backend, kv)| kv.split_once('=').map(|(k, v)| (backend, k, v)));
            let Some((backend, key, value)) = parsed else {
                return Err(ConfigError(format!(
                    "ERROR: malformed {arg} in SAGEMAKER_TRITON_ADDITIONAL_ARGS (expected --backend-config=<backend>,<setting>=<value>)"
                )));
            };
            backend_config.retain(|s| !(s.backend == backend && s.setting == key));
            backend_config.push(BackendSetting::new(backend, key, value));
        } else if let Some(level) = arg.strip_prefix("--log-verbose=") {
            logging.verbose = level.parse().map_err(|_| {
                ConfigError(format!(
                    "ERROR: malformed {arg} in SAGEMAKER_TRITON_ADDITIONAL_ARGS"
                ))
            })?;
        } else {
            return Err(ConfigError(format!(
                "ERROR: {arg} in SAGEMAKER_TRITON_ADDITIONAL_ARGS is not supported by trident \
                 (supported: --backend-config=..., --log-verbose=N)"
            )));
        }
    }
    Ok(())
}

//! `trident serve` configuration: SageMaker's environment variables and equivalent flags
//! (`args`), resolved once (`resolve`) into one typed [`Config`] in sections (`http`, `core`,
//! plugins, sessions, `process`, `artifacts`), with the start-up checks of Triton's SageMaker entry script
//! (same conditions and messages; the binary exits 1 on any of them).

pub mod args;
mod artifacts;
pub mod core;
pub mod http;
pub mod ports;
pub mod process;
mod resolve;
pub mod restrictions;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use self::args::ServeArgs;
pub use self::core::CoreSettings;
pub use self::http::{ClientLimits, DEFAULT_MAX_BODY_BYTES, DEFAULT_METRICS_PATH, HttpSettings};
use crate::artifacts::ArtifactPolicy;
use crate::sessions::SessionSettings;
use process::ProcessRole;

/// Where SageMaker puts multi-model endpoint models.
pub const DEFAULT_MODELS_ROOT: &str = "/opt/ml/models";

/// What `/invocations` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferenceType {
    /// A KServe v2 inference request to the default model (`infer`).
    Infer,
    /// Triton's generate extension, answered once unless a request adapter asks to stream
    /// (`generate`).
    Generate,
    /// Triton's generate extension, streamed unless a request adapter decides otherwise
    /// (`generate_stream`).
    GenerateStream,
}

/// What `/ping` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingMode {
    /// The engine runs with every model ready (`ready`).
    Ready,
    /// The engine runs, with or without ready models (`live`).
    Live,
}

/// Batch transform settings (`GET /execution-parameters`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSettings {
    /// Requests the batch transform may send at once (`MaxConcurrentTransforms`).
    pub max_concurrent_transforms: usize,
    /// `MULTI_RECORD` or `SINGLE_RECORD`, as given (`BatchStrategy`).
    pub batch_strategy: String,
    /// Largest payload, in MiB (`MaxPayloadInMB`); the default body limit in batch mode.
    pub max_payload_in_mb: usize,
}

/// Single- or multi-model endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// One repository, its default model loaded at start.
    SingleModel {
        /// The model repository (`--model-repository`, default `/opt/ml/model`).
        repository: PathBuf,
        /// The model `/invocations` serves: `SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`, else the
        /// repository's only folder.
        default_model: String,
    },
    /// A multi-model endpoint: models are loaded and unloaded through `/models`.
    MultiModel {
        /// The empty repository the core starts with (`--multi-model-repository`, default
        /// `/tmp/sagemaker`).
        repository: PathBuf,
        /// The folder every model's url must be under (`--models-root`, default
        /// `/opt/ml/models`).
        models_root: PathBuf,
    },
}

/// The resolved configuration: what the endpoint is (its mode, `/ping`, `/invocations`, batch
/// transform), then a section per part of trident.
#[derive(Debug, Clone)]
pub struct Config {
    /// Single- or multi-model endpoint.
    pub mode: Mode,
    /// What `/ping` checks.
    pub ping_mode: PingMode,
    /// What `/invocations` runs.
    pub inference_type: InferenceType,
    /// The batch transform settings; `None` outside a batch transform job.
    pub batch: Option<BatchSettings>,
    /// How trident speaks HTTP.
    pub http: HttpSettings,
    /// How the Triton core runs.
    pub core: CoreSettings,
    /// The plugin manifest, if any.
    pub plugins: Option<PathBuf>,
    /// Stateful sessions' bounds; `None` when sessions are off.
    pub sessions: Option<SessionSettings>,
    /// Supervisor, supervised serving process, or alone.
    pub process: ProcessRole,
    /// What model artifacts may bring: Secure Mode and the native-code boundary.
    pub artifacts: ArtifactPolicy,
}

impl Config {
    /// A configuration for `mode` with every other setting at its default, listening on
    /// 127.0.0.1 on any free port (for embedding and tests; `trident serve` resolves flags).
    pub fn new(mode: Mode) -> Config {
        Config {
            mode,
            ping_mode: PingMode::Ready,
            inference_type: InferenceType::Infer,
            batch: None,
            http: HttpSettings::default(),
            core: CoreSettings::default(),
            plugins: None,
            sessions: None,
            process: ProcessRole::Alone,
            artifacts: ArtifactPolicy::default(),
        }
    }

    /// Makes every path setting absolute, against the working folder the process started in:
    /// the serving process then works in an empty folder of its own
    /// ([`crate::confine::work_in`]), and a relative setting must mean what it meant.
    pub fn absolute_paths(&mut self) -> Result<(), ConfigError> {
        let absolute = |path: &mut PathBuf| -> Result<(), ConfigError> {
            if path.as_os_str().is_empty() || path.is_absolute() {
                return Ok(());
            }
            *path = std::path::absolute(&*path).map_err(|e| {
                ConfigError(format!("ERROR: cannot resolve {}: {e}", path.display()))
            })?;
            Ok(())
        };
        match &mut self.mode {
            Mode::SingleModel { repository, .. } => absolute(repository)?,
            Mode::MultiModel {
                repository,
                models_root,
            } => {
                absolute(repository)?;
                absolute(models_root)?;
            }
        }
        for path in [&mut self.plugins, &mut self.core.triton_home]
            .into_iter()
            .flatten()
        {
            absolute(path)?;
        }
        if let ProcessRole::Supervised(supervision) = &mut self.process {
            absolute(&mut supervision.state_dir)?;
        }
        absolute(&mut self.artifacts.staging_dir)?;
        for channel in self
            .artifacts
            .secure_mode
            .iter_mut()
            .flat_map(|secure| secure.untrusted_channels.iter_mut())
        {
            absolute(channel)?;
        }
        Ok(())
    }

    /// The folders the serving process writes ([`crate::confine::serving`]): what it makes
    /// things in, and the models' folders its private trees link files from.
    pub fn serving_needs(&self) -> crate::confine::serving::Needs {
        // The staging folder's own area, not the folder it is in (by default the temporary
        // folder): made, and the areas of ended processes swept, before the box.
        let mut writable = vec![
            crate::artifacts::staging::StagingArea::folder_under(&self.artifacts.staging_dir),
            crate::confine::stub::scratch_root(),
        ];
        let mut models = Vec::new();
        match &self.mode {
            Mode::SingleModel { repository, .. } => models.push(repository.clone()),
            Mode::MultiModel {
                repository,
                models_root,
            } => {
                writable.push(repository.clone());
                models.push(models_root.clone());
            }
        }
        if let ProcessRole::Supervised(supervision) = &self.process {
            writable.push(supervision.state_dir.clone());
        }
        // The plugins' compile cache: the start manifest's, else the default (a manifest
        // reloaded later with a cache elsewhere compiles without it, unless that folder is
        // writable). Under Secure Mode no cache is used.
        let plugins_possible =
            self.plugins.is_some() || matches!(self.mode, Mode::MultiModel { .. });
        if self.artifacts.secure_mode.is_none() && plugins_possible {
            let cache = self
                .plugins
                .as_deref()
                .and_then(|path| crate::plugins::platform::manifest::Manifest::load(path).ok())
                .and_then(|manifest| manifest.compile_cache)
                .or_else(crate::plugins::runtime::compile_cache::default_dir);
            writable.extend(cache.filter(|dir| !dir.as_os_str().is_empty()));
        }
        writable.extend(self.artifacts.serving_writable.iter().cloned());
        crate::confine::serving::Needs { writable, models }
    }

    /// Refuses a metrics path one of trident's own routes takes; `is_reserved` is the router's
    /// answer (`http::routes`, which the configuration does not see).
    pub fn check_routes(&self, is_reserved: impl Fn(&str) -> bool) -> Result<(), ConfigError> {
        if is_reserved(&self.http.metrics_path) {
            return Err(ConfigError(format!(
                "ERROR: TRIDENT_METRICS_PATH '{}' is one of trident's own routes",
                self.http.metrics_path
            )));
        }
        Ok(())
    }
}

/// A start-up check that failed; the message is what the entry script prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Whether a SageMaker flag's value is on (`true`, any case, or `1`).
fn flag(value: &str) -> bool {
    value.eq_ignore_ascii_case("true") || value == "1"
}

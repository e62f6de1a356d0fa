//! Server options: the plain [`ServerConfig`] trident resolves, applied to a
//! `TRITONSERVER_ServerOptions` that is deleted once the server is created.

use std::path::PathBuf;
use std::time::Duration;

use super::error::{check, to_cstring};
use super::ffi;
use super::handle::Owned;
use super::library::Triton;
use crate::engine::EngineError;
use crate::engine::settings::{BackendSetting, CoreLogging};

/// How Triton decides which models are loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelControl {
    /// Only the models named here at start, then load and unload calls (trident's mode).
    /// `"*"` loads every model of the repositories.
    Explicit {
        /// The models to load at start (`TRITONSERVER_ServerOptionsSetStartupModel`).
        startup_models: Vec<String>,
    },
    /// Every model of the repositories, fixed for the server's lifetime.
    LoadAll,
}

/// Everything the Triton core is started with.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The model repositories served from the start; more can be registered at run time.
    pub model_repositories: Vec<PathBuf>,
    /// Which models are loaded, and whether load and unload calls are allowed.
    pub model_control: ModelControl,
    /// Where backends live; by default `<triton home>/backends`.
    pub backend_directory: Option<PathBuf>,
    /// Where repository agents live; by default `<triton home>/repoagents`.
    pub repo_agent_directory: Option<PathBuf>,
    /// Ready only when every loaded model is ready (Triton's `--strict-readiness`).
    pub strict_readiness: bool,
    /// Require a complete `config.pbtxt` (no auto-completion by the backend).
    pub strict_model_config: bool,
    /// Stop the core when a startup model fails to load. trident keeps serving by default, so
    /// `/ping` can report the failure.
    pub exit_on_error: bool,
    /// How long stopping waits for in-flight inferences.
    pub exit_timeout: Duration,
    /// The core's own logging.
    pub logging: CoreLogging,
    /// Settings passed to backends (`--backend-config`).
    pub backend_config: Vec<BackendSetting>,
    /// Lets models of the same name live in different repositories.
    pub model_namespacing: bool,
    /// Threads of the core's buffer manager; `None` keeps the core's default.
    pub buffer_manager_threads: Option<u32>,
    /// Threads that load models concurrently; `None` keeps the core's default.
    pub model_load_threads: Option<u32>,
    /// How often a failed model load is tried again. The core's own default retries for tens of
    /// seconds, which a SageMaker load call should not wait on; trident's default is 0.
    pub model_load_retries: u32,
    /// Per GPU device id, the fraction of its memory a model load may leave in use.
    pub model_load_gpu_limits: Vec<(i32, f64)>,
    /// Size of the pinned host memory pool in bytes; `None` keeps the core's default.
    pub pinned_memory_pool_bytes: Option<u64>,
    /// The lowest CUDA compute capability of a GPU the core will use; `None` keeps its default.
    pub min_compute_capability: Option<f64>,
    /// Triton's own metrics collection (trident reports its own metrics; off by default).
    pub core_metrics: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            model_repositories: Vec::new(),
            model_control: ModelControl::Explicit {
                startup_models: Vec::new(),
            },
            backend_directory: None,
            repo_agent_directory: None,
            strict_readiness: true,
            strict_model_config: false,
            exit_on_error: false,
            exit_timeout: Duration::from_secs(30),
            logging: CoreLogging::default(),
            backend_config: Vec::new(),
            model_namespacing: false,
            buffer_manager_threads: None,
            model_load_threads: None,
            model_load_retries: 0,
            model_load_gpu_limits: Vec::new(),
            pinned_memory_pool_bytes: None,
            min_compute_capability: None,
            core_metrics: false,
        }
    }
}

/// An owned `TRITONSERVER_ServerOptions`, deleted on drop (once the server is created).
pub(super) type ServerOptions = Owned<ffi::TRITONSERVER_ServerOptions>;

impl ServerOptions {
    /// Builds Triton's options from `config`.
    pub(super) fn from_config(
        triton: &'static Triton,
        config: &ServerConfig,
    ) -> Result<ServerOptions, EngineError> {
        // SAFETY: `ServerOptionsNew` writes a new options object the caller owns.
        let options =
            unsafe { Owned::create(triton, |raw| triton.api.TRITONSERVER_ServerOptionsNew(raw)) }?;
        let api = &triton.api;
        options.set_text(
            api.TRITONSERVER_ServerOptionsSetServerId,
            "server id",
            "trident",
        )?;
        options.set_models(config)?;
        options.set_directories(config)?;
        options.set(
            api.TRITONSERVER_ServerOptionsSetStrictReadiness,
            config.strict_readiness,
        )?;
        options.set(
            api.TRITONSERVER_ServerOptionsSetStrictModelConfig,
            config.strict_model_config,
        )?;
        options.set(
            api.TRITONSERVER_ServerOptionsSetExitOnError,
            config.exit_on_error,
        )?;
        let exit_timeout = u32::try_from(config.exit_timeout.as_secs()).unwrap_or(u32::MAX);
        options.set(api.TRITONSERVER_ServerOptionsSetExitTimeout, exit_timeout)?;
        options.set_logging(&config.logging)?;
        options.set_backend_config(&config.backend_config)?;
        options.set_resources(config)?;
        for setter in [
            api.TRITONSERVER_ServerOptionsSetMetrics,
            api.TRITONSERVER_ServerOptionsSetGpuMetrics,
            api.TRITONSERVER_ServerOptionsSetCpuMetrics,
        ] {
            options.set(setter, config.core_metrics)?;
        }
        Ok(options)
    }

    /// Repositories, model control and the startup models.
    fn set_models(&self, config: &ServerConfig) -> Result<(), EngineError> {
        let api = &self.triton().api;
        for repository in &config.model_repositories {
            self.set_text(
                api.TRITONSERVER_ServerOptionsSetModelRepositoryPath,
                "a path",
                &repository.to_string_lossy(),
            )?;
        }
        match &config.model_control {
            ModelControl::Explicit { startup_models } => {
                self.set(
                    api.TRITONSERVER_ServerOptionsSetModelControlMode,
                    ffi::TRITONSERVER_MODEL_CONTROL_EXPLICIT,
                )?;
                for model in startup_models {
                    self.set_text(
                        api.TRITONSERVER_ServerOptionsSetStartupModel,
                        "model name",
                        model,
                    )?;
                }
                Ok(())
            }
            ModelControl::LoadAll => self.set(
                api.TRITONSERVER_ServerOptionsSetModelControlMode,
                ffi::TRITONSERVER_MODEL_CONTROL_NONE,
            ),
        }
    }

    /// Where backends and repository agents live; by default beside the core library.
    fn set_directories(&self, config: &ServerConfig) -> Result<(), EngineError> {
        let api = &self.triton().api;
        let home = self.triton().home();
        let folders = [
            (
                api.TRITONSERVER_ServerOptionsSetBackendDirectory,
                &config.backend_directory,
                "backends",
            ),
            (
                api.TRITONSERVER_ServerOptionsSetRepoAgentDirectory,
                &config.repo_agent_directory,
                "repoagents",
            ),
        ];
        for (setter, chosen, default) in folders {
            let folder = chosen.clone().or_else(|| home.map(|h| h.join(default)));
            if let Some(folder) = folder {
                self.set_text(setter, "a path", &folder.to_string_lossy())?;
            }
        }
        Ok(())
    }

    fn set_logging(&self, log: &CoreLogging) -> Result<(), EngineError> {
        let api = &self.triton().api;
        self.set(api.TRITONSERVER_ServerOptionsSetLogInfo, log.info)?;
        self.set(api.TRITONSERVER_ServerOptionsSetLogWarn, log.warn)?;
        self.set(api.TRITONSERVER_ServerOptionsSetLogError, log.error)?;
        self.set(api.TRITONSERVER_ServerOptionsSetLogVerbose, log.verbose)
    }

    fn set_backend_config(&self, settings: &[BackendSetting]) -> Result<(), EngineError> {
        let api = &self.triton().api;
        for s in settings {
            let backend = to_cstring("backend name", &s.backend)?;
            let setting = to_cstring("backend setting", &s.setting)?;
            let value = to_cstring("backend setting value", &s.value)?;
            // SAFETY: the options object is live while `self` is; the three strings are
            // NUL-terminated locals that outlive the call, and Triton copies them.
            check(api, unsafe {
                api.TRITONSERVER_ServerOptionsSetBackendConfig(
                    self.as_ptr(),
                    backend.as_ptr(),
                    setting.as_ptr(),
                    value.as_ptr(),
                )
            })?;
        }
        Ok(())
    }

    /// Threads, memory and device limits.
    fn set_resources(&self, config: &ServerConfig) -> Result<(), EngineError> {
        let api = &self.triton().api;
        self.set(
            api.TRITONSERVER_ServerOptionsSetModelNamespacing,
            config.model_namespacing,
        )?;
        if let Some(n) = config.buffer_manager_threads {
            self.set(api.TRITONSERVER_ServerOptionsSetBufferManagerThreadCount, n)?;
        }
        if let Some(n) = config.model_load_threads {
            self.set(api.TRITONSERVER_ServerOptionsSetModelLoadThreadCount, n)?;
        }
        self.set(
            api.TRITONSERVER_ServerOptionsSetModelLoadRetryCount,
            config.model_load_retries,
        )?;
        for &(device, fraction) in &config.model_load_gpu_limits {
            // SAFETY: the options object is live while `self` is; the other arguments are
            // plain values.
            check(api, unsafe {
                api.TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(
                    self.as_ptr(),
                    ffi::TRITONSERVER_INSTANCEGROUPKIND_GPU,
                    device,
                    fraction,
                )
            })?;
        }
        if let Some(bytes) = config.pinned_memory_pool_bytes {
            self.set(
                api.TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize,
                bytes,
            )?;
        }
        if let Some(cc) = config.min_compute_capability {
            self.set(
                api.TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability,
                cc,
            )?;
        }
        Ok(())
    }
}

//! Server options: the plain [`ServerConfig`] trident resolves, applied to a
//! `TRITONSERVER_ServerOptions` that is deleted once the server is created.

use std::path::PathBuf;
use std::ptr::NonNull;
use std::time::Duration;

use super::error::{check, to_cstring};
use super::ffi;
use super::library::Triton;
use crate::engine::settings::{BackendSetting, CoreLogging};
use crate::engine::{EngineError, ErrorCode};

/// How Triton decides which models are loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelControl {
    /// Only the models named here at start, then load and unload calls (trident's mode).
    /// `"*"` loads every model of the repositories.
    Explicit { startup_models: Vec<String> },
    /// Every model of the repositories, fixed for the server's lifetime.
    LoadAll,
}

/// Everything the Triton core is started with.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub model_repositories: Vec<PathBuf>,
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
    pub logging: CoreLogging,
    pub backend_config: Vec<BackendSetting>,
    /// Lets models of the same name live in different repositories.
    pub model_namespacing: bool,
    pub buffer_manager_threads: Option<u32>,
    pub model_load_threads: Option<u32>,
    /// How often a failed model load is tried again. The core's own default retries for tens of
    /// seconds, which a SageMaker load call should not wait on; trident's default is 0.
    pub model_load_retries: u32,
    /// Per GPU device id, the fraction of its memory a model load may leave in use.
    pub model_load_gpu_limits: Vec<(i32, f64)>,
    pub pinned_memory_pool_bytes: Option<u64>,
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

/// An owned `TRITONSERVER_ServerOptions`, deleted on drop.
pub(super) struct ServerOptions {
    triton: &'static Triton,
    ptr: NonNull<ffi::TRITONSERVER_ServerOptions>,
}

impl ServerOptions {
    pub(super) fn as_ptr(&self) -> *mut ffi::TRITONSERVER_ServerOptions {
        self.ptr.as_ptr()
    }

    /// Builds Triton's options from `config`.
    pub(super) fn from_config(
        triton: &'static Triton,
        config: &ServerConfig,
    ) -> Result<ServerOptions, EngineError> {
        let api = &triton.api;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is valid for a write.
        check(api, unsafe { api.TRITONSERVER_ServerOptionsNew(&mut raw) })?;
        let options = NonNull::new(raw)
            .map(|ptr| ServerOptions { triton, ptr })
            .ok_or_else(|| EngineError::new(ErrorCode::Internal, "null server options"))?;
        let o = options.as_ptr();
        let path = |p: &PathBuf| to_cstring("a path", &p.to_string_lossy());

        // SAFETY (every call below): `o` is the live options object owned by `options`; each
        // C string is a local that outlives the call, and Triton copies what it keeps.
        unsafe {
            let id = to_cstring("server id", "trident")?;
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetServerId(o, id.as_ptr()),
            )?;
            for repo in &config.model_repositories {
                let repo = path(repo)?;
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, repo.as_ptr()),
                )?;
            }
            match &config.model_control {
                ModelControl::Explicit { startup_models } => {
                    check(
                        api,
                        api.TRITONSERVER_ServerOptionsSetModelControlMode(
                            o,
                            ffi::TRITONSERVER_MODEL_CONTROL_EXPLICIT,
                        ),
                    )?;
                    for model in startup_models {
                        let model = to_cstring("model name", model)?;
                        check(
                            api,
                            api.TRITONSERVER_ServerOptionsSetStartupModel(o, model.as_ptr()),
                        )?;
                    }
                }
                ModelControl::LoadAll => check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetModelControlMode(
                        o,
                        ffi::TRITONSERVER_MODEL_CONTROL_NONE,
                    ),
                )?,
            }
            let home = triton.home();
            if let Some(dir) = config
                .backend_directory
                .clone()
                .or_else(|| home.map(|h| h.join("backends")))
            {
                let dir = path(&dir)?;
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetBackendDirectory(o, dir.as_ptr()),
                )?;
            }
            if let Some(dir) = config
                .repo_agent_directory
                .clone()
                .or_else(|| home.map(|h| h.join("repoagents")))
            {
                let dir = path(&dir)?;
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetRepoAgentDirectory(o, dir.as_ptr()),
                )?;
            }
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetStrictReadiness(o, config.strict_readiness),
            )?;
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetStrictModelConfig(o, config.strict_model_config),
            )?;
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetExitOnError(o, config.exit_on_error),
            )?;
            let exit_timeout = u32::try_from(config.exit_timeout.as_secs()).unwrap_or(u32::MAX);
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetExitTimeout(o, exit_timeout),
            )?;
            let log = &config.logging;
            check(api, api.TRITONSERVER_ServerOptionsSetLogInfo(o, log.info))?;
            check(api, api.TRITONSERVER_ServerOptionsSetLogWarn(o, log.warn))?;
            check(api, api.TRITONSERVER_ServerOptionsSetLogError(o, log.error))?;
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetLogVerbose(o, log.verbose),
            )?;
            for s in &config.backend_config {
                let backend = to_cstring("backend name", &s.backend)?;
                let setting = to_cstring("backend setting", &s.setting)?;
                let value = to_cstring("backend setting value", &s.value)?;
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetBackendConfig(
                        o,
                        backend.as_ptr(),
                        setting.as_ptr(),
                        value.as_ptr(),
                    ),
                )?;
            }
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetModelNamespacing(o, config.model_namespacing),
            )?;
            if let Some(n) = config.buffer_manager_threads {
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetBufferManagerThreadCount(o, n),
                )?;
            }
            if let Some(n) = config.model_load_threads {
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetModelLoadThreadCount(o, n),
                )?;
            }
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetModelLoadRetryCount(o, config.model_load_retries),
            )?;
            for &(device, fraction) in &config.model_load_gpu_limits {
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(
                        o,
                        ffi::TRITONSERVER_INSTANCEGROUPKIND_GPU,
                        device,
                        fraction,
                    ),
                )?;
            }
            if let Some(bytes) = config.pinned_memory_pool_bytes {
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(o, bytes),
                )?;
            }
            if let Some(cc) = config.min_compute_capability {
                check(
                    api,
                    api.TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(o, cc),
                )?;
            }
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetMetrics(o, config.core_metrics),
            )?;
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetGpuMetrics(o, config.core_metrics),
            )?;
            check(
                api,
                api.TRITONSERVER_ServerOptionsSetCpuMetrics(o, config.core_metrics),
            )?;
        }
        Ok(options)
    }
}

impl Drop for ServerOptions {
    fn drop(&mut self) {
        // SAFETY: the options object is owned by `self` and deleted exactly once, here.
        let status = unsafe {
            self.triton
                .api
                .TRITONSERVER_ServerOptionsDelete(self.ptr.as_ptr())
        };
        if let Err(e) = check(&self.triton.api, status) {
            tracing::warn!(error = %e, "deleting Triton server options failed");
        }
    }
}

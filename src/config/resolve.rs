//! [`ServeArgs::resolve`]: the flags turned into a [`Config`], section by section, with the
//! start-up checks of Triton's SageMaker entry script (same conditions and messages).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::args::ServeArgs;
use super::core::{CoreSettings, apply_additional_args};
use super::http::{ClientLimits, DEFAULT_MAX_BODY_BYTES, HttpSettings, check_metrics_path};
use super::process::{ProcessRole, RestartLimit, Supervision};
use super::restrictions::parse_restrictions;
use super::{BatchSettings, Config, ConfigError, InferenceType, Mode, PingMode, flag, ports};
use crate::engine::{BackendSetting, CoreLogging};
use crate::sessions::SessionSettings;

impl ServeArgs {
    /// Resolves and checks the configuration.
    pub fn resolve(self) -> Result<Config, ConfigError> {
        let multi_model = flag(&self.multi_model);
        let batch = flag(&self.batch).then(|| BatchSettings {
            max_concurrent_transforms: self.max_concurrent_transforms,
            batch_strategy: self.batch_strategy.clone(),
            max_payload_in_mb: self.max_payload_in_mb,
        });
        let sessions = self.session_settings()?;
        let mut artifacts = self.artifact_policy(multi_model)?;
        artifacts.idle_limit = sessions
            .as_ref()
            .map(|s| s.expiration + crate::sessions::idle::MARGIN);
        Ok(Config {
            mode: self.mode(multi_model)?,
            ping_mode: self.ping_mode(multi_model)?,
            inference_type: self.inference_type()?,
            http: self.http_settings(batch.as_ref())?,
            core: self.core_settings()?,
            batch,
            plugins: self.plugins.clone().filter(|p| !p.as_os_str().is_empty()),
            sessions,
            process: self.process_role()?,
            artifacts,
        })
    }

    /// The HTTP section; in a batch transform, the body limit is its payload limit unless
    /// given.
    fn http_settings(&self, batch: Option<&BatchSettings>) -> Result<HttpSettings, ConfigError> {
        let restrictions = parse_restrictions(self.restricted_api.iter().map(String::as_str))
            .map_err(ConfigError)?;
        let max_body_bytes = self.max_body_bytes.unwrap_or(match batch {
            Some(batch) => batch.max_payload_in_mb.saturating_mul(1024 * 1024),
            None => DEFAULT_MAX_BODY_BYTES,
        });
        let metrics_port = ports::choose_port(
            self.metrics_port,
            self.safe_port_range.as_deref(),
            self.port,
        )
        .map_err(ConfigError)?;
        Ok(HttpSettings {
            listen: SocketAddr::new(self.bind, self.port),
            restrictions,
            max_body_bytes,
            list_page_size: self.list_page_size.max(1),
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
            client_limits: ClientLimits {
                max_connections: self.max_connections.max(1),
                header_read_timeout: Duration::from_secs(self.header_read_timeout_secs.max(1)),
                body_read_timeout: Duration::from_secs(self.body_read_timeout_secs.max(1)),
            },
            metrics_port,
            metrics_path: check_metrics_path(&self.metrics_path)?,
            bidi_messages_per_second: self.bidi_messages_per_second.max(1),
            worker_threads: self.thread_count.filter(|&n| n > 0),
        })
    }

    /// Stateful sessions' bounds when they are on, each checked: a setting out of range stops the
    /// start naming it (a session's `Expires` is a date, so the expiration has a ceiling).
    fn session_settings(&self) -> Result<Option<SessionSettings>, ConfigError> {
        use crate::sessions::table::MAX_EXPIRATION_SECS;
        if !flag(&self.stateful_sessions) {
            return Ok(None);
        }
        if !(1..=MAX_EXPIRATION_SECS).contains(&self.sessions_expiration) {
            return Err(ConfigError(format!(
                "ERROR: SAGEMAKER_SESSIONS_EXPIRATION must be 1 to {MAX_EXPIRATION_SECS} seconds \
                 (30 days), got {}",
                self.sessions_expiration
            )));
        }
        if self.max_sessions == 0 {
            return Err(ConfigError(
                "ERROR: TRIDENT_MAX_SESSIONS must be at least 1 when sessions are on".into(),
            ));
        }
        if self.session_reclaim_idle_secs == 0 {
            return Err(ConfigError(
                "ERROR: TRIDENT_SESSION_RECLAIM_IDLE_SECS must be at least 1 (a session idle \
                 that long may lose its slot to a new one; set it to the expiration or more \
                 to keep sessions until they expire)"
                    .into(),
            ));
        }
        Ok(Some(SessionSettings {
            expiration: Duration::from_secs(self.sessions_expiration),
            max_sessions: self.max_sessions,
            store_bytes: self.session_store_bytes,
            reclaim_idle: Duration::from_secs(self.session_reclaim_idle_secs),
        }))
    }

    /// The supervisor unless told otherwise; the serving process when a supervisor started it.
    fn process_role(&self) -> Result<ProcessRole, ConfigError> {
        match (self.supervisor_pid, &self.state_dir) {
            (Some(supervisor), Some(state_dir)) => Ok(ProcessRole::Supervised(Supervision {
                supervisor,
                state_dir: state_dir.clone(),
                restarts: self.restarts,
            })),
            (Some(_), None) | (None, Some(_)) => Err(ConfigError(
                "ERROR: TRIDENT_SUPERVISOR_PID and TRIDENT_STATE_DIR are set by trident's supervisor, together"
                    .into(),
            )),
            (None, None) if flag(&self.supervise) => Ok(ProcessRole::Supervisor(RestartLimit {
                max: self.max_restarts,
                window: Duration::from_secs(self.restart_window_secs.max(1)),
            })),
            (None, None) => Ok(ProcessRole::Alone),
        }
    }

    /// Single-model (with its default model, checked like the entry script) or multi-model.
    fn mode(&self, multi_model: bool) -> Result<Mode, ConfigError> {
        if multi_model {
            return Ok(Mode::MultiModel {
                repository: self.multi_model_repository.clone(),
                models_root: self.models_root.clone(),
            });
        }
        let default_model =
            single_model_default(&self.model_repository, self.default_model.as_deref())?;
        Ok(Mode::SingleModel {
            repository: self.model_repository.clone(),
            default_model,
        })
    }

    fn inference_type(&self) -> Result<InferenceType, ConfigError> {
        match self.inference_type.as_str() {
            "infer" => Ok(InferenceType::Infer),
            "generate" => Ok(InferenceType::Generate),
            "generate_stream" => Ok(InferenceType::GenerateStream),
            other => Err(ConfigError(format!(
                "ERROR: Invalid SAGEMAKER_TRITON_INFERENCE_TYPE '{other}'\n       Must be one of: infer, generate, generate_stream"
            ))),
        }
    }

    /// The override wins; a multi-model endpoint defaults to `live`, a single model to `ready`.
    fn ping_mode(&self, multi_model: bool) -> Result<PingMode, ConfigError> {
        let ping = |name: &str, value: &str| match value {
            "ready" => Ok(PingMode::Ready),
            "live" => Ok(PingMode::Live),
            other => Err(ConfigError(format!(
                "ERROR: Invalid {name} '{other}'. Must be one of: ready, live"
            ))),
        };
        let ping_mode = match (&self.override_ping_mode, multi_model, &self.ping_mode) {
            (Some(mode), _, _) => ping("SAGEMAKER_TRITON_OVERRIDE_PING_MODE", mode)?,
            (None, true, _) => PingMode::Live,
            (None, false, Some(mode)) => ping("SAGEMAKER_TRITON_PING_MODE", mode)?,
            (None, false, None) => PingMode::Ready,
        };
        if multi_model {
            tracing::info!(
                "Triton is running in SageMaker MME mode. Using Triton ping mode: \"{}\"",
                if ping_mode == PingMode::Live {
                    "live"
                } else {
                    "ready"
                }
            );
        }
        Ok(ping_mode)
    }

    /// The core section, with `SAGEMAKER_TRITON_ADDITIONAL_ARGS` applied.
    fn core_settings(&self) -> Result<CoreSettings, ConfigError> {
        if let Some(limit) = self.model_load_gpu_limit
            && !(limit > 0.0 && limit <= 1.0)
        {
            return Err(ConfigError(format!(
                "ERROR: SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT must be in (0, 1], got {limit}"
            )));
        }
        let mut logging = CoreLogging {
            info: flag(&self.log_info),
            warn: flag(&self.log_warning),
            error: flag(&self.log_error),
            verbose: i32::from(flag(&self.log_verbose)),
        };
        let mut backend_config = vec![
            BackendSetting::new(
                "python",
                "shm-default-byte-size",
                self.shm_default_byte_size,
            ),
            BackendSetting::new("python", "shm-growth-byte-size", self.shm_growth_byte_size),
        ];
        if let Some(version) = &self.tensorflow_version {
            backend_config.push(BackendSetting::new("tensorflow", "version", version));
        }
        if let Some(args) = &self.additional_args {
            apply_additional_args(args, &mut backend_config, &mut logging)?;
        }
        Ok(CoreSettings {
            logging,
            backend_config,
            buffer_manager_threads: self.buffer_manager_thread_count,
            model_load_gpu_limit: self.model_load_gpu_limit,
            model_namespacing: flag(&self.disable_model_namespacing),
            triton_home: self.triton_home.clone(),
            model_load_timeout: Duration::from_secs(self.model_load_timeout_secs.max(1)),
        })
    }
}

/// The entry script's checks of a single-model repository, and the default model they yield.
fn single_model_default(
    repository: &Path,
    default_model: Option<&str>,
) -> Result<String, ConfigError> {
    if repository.join("config.pbtxt").exists() {
        return Err(ConfigError(
            "ERROR: Incorrect directory structure.\n       Model directory needs to contain the top level folder".into(),
        ));
    }
    if let Some(name) = default_model.filter(|n| !n.is_empty()) {
        if repository.join(name).is_dir() {
            return Ok(name.to_owned());
        }
        return Err(ConfigError(format!(
            "ERROR: Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME {name} does not exist"
        )));
    }
    let mut folders: Vec<String> = std::fs::read_dir(repository)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    folders.sort();
    match folders.as_slice() {
        [] => Err(ConfigError(
            "ERROR: No model found in model repository".into(),
        )),
        [only] => {
            tracing::warn!(
                "No SAGEMAKER_TRITON_DEFAULT_MODEL_NAME provided. Starting with the only existing model directory {only}"
            );
            Ok(only.clone())
        }
        several => Err(ConfigError(format!(
            "ERROR: More than 1 model directory found in model repository.\n       Either provide a single directory or set SAGEMAKER_TRITON_DEFAULT_MODEL_NAME to run the ensemble backend.\n       Directories found in model repository: {}",
            several.join(" ")
        ))),
    }
}

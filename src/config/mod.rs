//! `trident serve` configuration: SageMaker's environment variables and equivalent flags,
//! resolved once into one typed [`Config`], with the start-up checks of Triton's SageMaker entry
//! script (same conditions and messages; the binary exits 1 on any of them).

pub mod ports;
pub mod process;
pub mod restrictions;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::engine::{BackendSetting, CoreLogging};
use crate::sessions::SessionSettings;
use process::{ProcessRole, RestartLimit, Supervision};
use restrictions::{Restriction, parse_restrictions};

/// SageMaker's real-time payload limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 6 * 1024 * 1024;

/// Where SageMaker puts multi-model endpoint models.
pub const DEFAULT_MODELS_ROOT: &str = "/opt/ml/models";

/// The flags of `trident serve`; each falls back to its SageMaker environment variable.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Port to listen on.
    #[arg(long, env = "SAGEMAKER_BIND_TO_PORT", default_value_t = 8080)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub bind: IpAddr,
    /// `true` runs a multi-model endpoint.
    #[arg(long, env = "SAGEMAKER_MULTI_MODEL", default_value = "false")]
    pub multi_model: String,
    /// The single-model repository.
    #[arg(long, default_value = "/opt/ml/model")]
    pub model_repository: PathBuf,
    /// The (empty) repository Triton starts with in multi-model mode.
    #[arg(long, default_value = "/tmp/sagemaker")]
    pub multi_model_repository: PathBuf,
    /// Where multi-model endpoint urls must point.
    #[arg(long, default_value = DEFAULT_MODELS_ROOT)]
    pub models_root: PathBuf,
    /// The model `/invocations` serves.
    #[arg(long, env = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME")]
    pub default_model: Option<String>,
    /// `ready` or `live`.
    #[arg(long, env = "SAGEMAKER_TRITON_PING_MODE")]
    pub ping_mode: Option<String>,
    /// Overrides the ping mode, whatever the endpoint kind.
    #[arg(long, env = "SAGEMAKER_TRITON_OVERRIDE_PING_MODE")]
    pub override_ping_mode: Option<String>,
    /// `infer`, `generate` or `generate_stream`.
    #[arg(long, env = "SAGEMAKER_TRITON_INFERENCE_TYPE", default_value = "infer")]
    pub inference_type: String,
    /// `true` or `1` turns the core's verbose logging on, at level 1 (`--log-verbose=N` in
    /// `--additional-args` sets another level).
    #[arg(long, env = "SAGEMAKER_TRITON_LOG_VERBOSE", default_value = "true")]
    pub log_verbose: String,
    /// `true` or `1` turns the core's info logging on.
    #[arg(long, env = "SAGEMAKER_TRITON_LOG_INFO", default_value = "true")]
    pub log_info: String,
    /// `true` or `1` turns the core's warning logging on.
    #[arg(long, env = "SAGEMAKER_TRITON_LOG_WARNING", default_value = "true")]
    pub log_warning: String,
    /// `true` or `1` turns the core's error logging on.
    #[arg(long, env = "SAGEMAKER_TRITON_LOG_ERROR", default_value = "true")]
    pub log_error: String,
    /// Python backend shared memory at start, per model instance.
    #[arg(long, env = "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE", default_value_t = 16 * 1024 * 1024)]
    pub shm_default_byte_size: u64,
    /// Python backend shared memory growth step.
    #[arg(long, env = "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE", default_value_t = 1024 * 1024)]
    pub shm_growth_byte_size: u64,
    /// HTTP worker threads (Triton's `--http-thread-count`); default: one per core.
    #[arg(long, env = "SAGEMAKER_TRITON_THREAD_COUNT")]
    pub thread_count: Option<usize>,
    /// The core's buffer manager threads (Triton's `--buffer-manager-thread-count`); default:
    /// Triton's.
    #[arg(long, env = "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT")]
    pub buffer_manager_thread_count: Option<u32>,
    /// Fraction of each GPU's memory a model load may leave in use (0 to 1).
    #[arg(long, env = "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT")]
    pub model_load_gpu_limit: Option<f64>,
    /// Passed to Triton's `--model-namespacing` as it is, like Triton's entry script does: despite
    /// the name, `false` turns namespacing off. Namespacing is on by default.
    #[arg(
        long,
        env = "SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING",
        default_value = "true"
    )]
    pub disable_model_namespacing: String,
    /// TensorFlow backend version (`--backend-config=tensorflow,version=N`).
    #[arg(long, env = "SAGEMAKER_TRITON_TENSORFLOW_VERSION")]
    pub tensorflow_version: Option<String>,
    /// Extra Triton flags; `--backend-config=...` and `--log-verbose=N` are applied, others are
    /// refused at start.
    #[arg(
        long,
        env = "SAGEMAKER_TRITON_ADDITIONAL_ARGS",
        allow_hyphen_values = true
    )]
    pub additional_args: Option<String>,
    /// `<category>:<header>=<value>`, categories `model-repository`, `inference`, `health`.
    #[arg(
        long = "http-restricted-api",
        env = "SAGEMAKER_TRITON_HTTP_RESTRICTED_API",
        value_delimiter = ';'
    )]
    pub restricted_api: Vec<String>,
    /// Largest request body, in bytes (413 above it).
    #[arg(long, env = "TRIDENT_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Page size of the multi-model list.
    #[arg(long, default_value_t = 1000)]
    pub list_page_size: usize,
    /// `true` in a batch transform job: `/execution-parameters` reports the three flags that
    /// follow, and `--max-payload-in-mb` sets the body limit unless `--max-body-bytes` is given.
    #[arg(long, env = "SAGEMAKER_BATCH", default_value = "false")]
    pub batch: String,
    /// Largest batch transform payload, in MiB (`MaxPayloadInMB`); used only with `--batch`.
    #[arg(long, env = "SAGEMAKER_MAX_PAYLOAD_IN_MB", default_value_t = 6)]
    pub max_payload_in_mb: usize,
    /// `MULTI_RECORD` or `SINGLE_RECORD` (`BatchStrategy`); reported as it is, with `--batch`.
    #[arg(long, env = "SAGEMAKER_BATCH_STRATEGY", default_value = "MULTI_RECORD")]
    pub batch_strategy: String,
    /// Requests a batch transform may send at once (`MaxConcurrentTransforms`); used only with
    /// `--batch`.
    #[arg(long, env = "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", default_value_t = 1)]
    pub max_concurrent_transforms: usize,
    /// Port of the Prometheus metrics listener (default: the first free port of
    /// `SAGEMAKER_SAFE_PORT_RANGE`; no metrics listener when neither is given).
    #[arg(long, env = "TRIDENT_METRICS_PORT")]
    pub metrics_port: Option<u16>,
    /// Messages a second one `/invocations-bidirectional-stream` session may send (a burst of
    /// as many is allowed); one more closes it with 1008.
    #[arg(long, env = "TRIDENT_BIDI_MESSAGES_PER_SECOND", default_value_t = DEFAULT_BIDI_MESSAGES_PER_SECOND)]
    pub bidi_messages_per_second: u32,
    /// `true` or `1` turns SageMaker's stateful sessions on (`X-Amzn-SageMaker-Session-Id`).
    #[arg(
        long,
        env = "SAGEMAKER_ENABLE_STATEFUL_SESSIONS",
        default_value = "false"
    )]
    pub stateful_sessions: String,
    /// Seconds a session may stay idle before it expires.
    #[arg(long, env = "SAGEMAKER_SESSIONS_EXPIRATION", default_value_t = crate::sessions::table::DEFAULT_EXPIRATION_SECS)]
    pub sessions_expiration: u64,
    /// Sessions open at once; one more is refused (429).
    #[arg(long, env = "TRIDENT_MAX_SESSIONS", default_value_t = crate::sessions::table::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Bytes of keys and values one session's plugin store may hold.
    #[arg(long, env = "TRIDENT_SESSION_STORE_BYTES", default_value_t = crate::sessions::store::DEFAULT_STORE_BYTES)]
    pub session_store_bytes: usize,
    /// Path Prometheus metrics are served at, on the main port (under the `health` restriction)
    /// and on the metrics listener: SageMaker scrapes `/metrics` unless the endpoint's
    /// configuration names another path.
    #[arg(long, env = "TRIDENT_METRICS_PATH", default_value = DEFAULT_METRICS_PATH)]
    pub metrics_path: String,
    /// `lo-hi`: ports other listeners may use.
    #[arg(long, env = "SAGEMAKER_SAFE_PORT_RANGE")]
    pub safe_port_range: Option<String>,
    /// The plugin manifest (TOML) to load WebAssembly plugins from.
    #[arg(long, env = "SAGEMAKER_TRITON_PLUGINS")]
    pub plugins: Option<PathBuf>,
    /// Seconds to finish in-flight requests after SIGTERM (SageMaker kills after 30).
    #[arg(long, default_value_t = 25)]
    pub shutdown_grace_secs: u64,
    /// Open connections served at once; one more is answered 503 and closed at once.
    #[arg(long, env = "TRIDENT_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds a client may take to send a request's headers before its connection is closed.
    #[arg(long, env = "TRIDENT_HEADER_READ_TIMEOUT_SECS", default_value_t = DEFAULT_HEADER_READ_TIMEOUT_SECS)]
    pub header_read_timeout_secs: u64,
    /// Seconds a client may take to send a request's body (408 after).
    #[arg(long, env = "TRIDENT_BODY_READ_TIMEOUT_SECS", default_value_t = DEFAULT_BODY_READ_TIMEOUT_SECS)]
    pub body_read_timeout_secs: u64,
    /// Seconds a multi-model load may take before it is answered 504 (the load is then undone
    /// in the background when the core finishes it).
    #[arg(long, env = "TRIDENT_MODEL_LOAD_TIMEOUT_SECS", default_value_t = DEFAULT_MODEL_LOAD_TIMEOUT_SECS)]
    pub model_load_timeout_secs: u64,
    /// A Triton installation (folder with lib/libtritonserver.so) or the library itself.
    #[arg(long, env = "TRITON_HOME")]
    pub triton_home: Option<PathBuf>,
    /// `false` serves in this process, with no supervisor to restart it when the core crashes.
    #[arg(long, env = "TRIDENT_SUPERVISE", default_value = "true")]
    pub supervise: String,
    /// Abnormal ends of the serving process restarted within `--restart-window-secs`; one more
    /// ends trident (exit 1), so SageMaker replaces the instance.
    #[arg(long, env = "TRIDENT_MAX_RESTARTS", default_value_t = process::DEFAULT_MAX_RESTARTS)]
    pub max_restarts: u32,
    /// The window `--max-restarts` counts in, in seconds.
    #[arg(long, env = "TRIDENT_RESTART_WINDOW_SECS", default_value_t = process::DEFAULT_RESTART_WINDOW_SECS)]
    pub restart_window_secs: u64,
    /// Set by the supervisor for the serving process it starts: the supervisor's pid.
    #[arg(long, env = "TRIDENT_SUPERVISOR_PID", hide = true)]
    pub supervisor_pid: Option<u32>,
    /// Set by the supervisor: its folder for what a restarted serving process needs.
    #[arg(long, env = "TRIDENT_STATE_DIR", hide = true)]
    pub state_dir: Option<PathBuf>,
    /// Set by the supervisor: how many serving processes it restarted before this one.
    #[arg(long, env = "TRIDENT_RESTARTS", hide = true, default_value_t = 0)]
    pub restarts: u32,
}

/// Default for `--max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default for `--header-read-timeout-secs`.
pub const DEFAULT_HEADER_READ_TIMEOUT_SECS: u64 = 30;
/// Default for `--body-read-timeout-secs`.
pub const DEFAULT_BODY_READ_TIMEOUT_SECS: u64 = 60;
/// Default for `--model-load-timeout-secs`.
pub const DEFAULT_MODEL_LOAD_TIMEOUT_SECS: u64 = 600;

/// How much of the server one client can hold, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// Open connections at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Time to send a request's headers; the connection is closed after it.
    pub header_read_timeout: Duration,
    /// Time to send a request's body; 408 after it.
    pub body_read_timeout: Duration,
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        ClientLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: Duration::from_secs(DEFAULT_HEADER_READ_TIMEOUT_SECS),
            body_read_timeout: Duration::from_secs(DEFAULT_BODY_READ_TIMEOUT_SECS),
        }
    }
}

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

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address and port of the main listener (`--bind`, `--port`).
    pub listen: SocketAddr,
    /// Single- or multi-model endpoint.
    pub mode: Mode,
    /// What `/ping` checks.
    pub ping_mode: PingMode,
    /// What `/invocations` runs.
    pub inference_type: InferenceType,
    /// The restricted API categories and the header each needs; empty when none is restricted.
    pub restrictions: Vec<Restriction>,
    /// Largest request body, and bidirectional stream message, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Models per page of the multi-model list, at least 1.
    pub list_page_size: usize,
    /// The batch transform settings; `None` outside a batch transform job.
    pub batch: Option<BatchSettings>,
    /// How long in-flight requests may take to finish after SIGTERM.
    pub shutdown_grace: Duration,
    /// Open connections, and how long a client may take to send a request.
    pub client_limits: ClientLimits,
    /// How long a multi-model load may take before it is answered 504.
    pub model_load_timeout: Duration,
    /// The port of the separate metrics listener, if any.
    pub metrics_port: Option<u16>,
    /// The path metrics are served at (main port and metrics listener).
    pub metrics_path: String,
    /// Messages a second a bidirectional stream may send.
    pub bidi_messages_per_second: u32,
    /// The plugin manifest, if any.
    pub plugins: Option<PathBuf>,
    /// Stateful sessions' bounds; `None` when sessions are off.
    pub sessions: Option<SessionSettings>,
    /// HTTP worker threads, one single-threaded runtime each (`http::workers`); default: one
    /// per core.
    pub worker_threads: Option<usize>,
    /// The core's log levels.
    pub core_logging: CoreLogging,
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
    /// Supervisor, supervised serving process, or alone.
    pub process: ProcessRole,
}

impl Config {
    /// Refuses a metrics path one of trident's own routes takes; `is_reserved` is the router's
    /// answer (`http::routes`, which the configuration does not see).
    pub fn check_routes(&self, is_reserved: impl Fn(&str) -> bool) -> Result<(), ConfigError> {
        if is_reserved(&self.metrics_path) {
            return Err(ConfigError(format!(
                "ERROR: TRIDENT_METRICS_PATH '{}' is one of trident's own routes",
                self.metrics_path
            )));
        }
        Ok(())
    }

    /// A configuration for `mode` with every other setting at its default, listening on
    /// 127.0.0.1 on any free port (for embedding and tests; `trident serve` resolves flags).
    pub fn new(mode: Mode) -> Config {
        Config {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            mode,
            ping_mode: PingMode::Ready,
            inference_type: InferenceType::Infer,
            restrictions: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            list_page_size: 1000,
            batch: None,
            shutdown_grace: Duration::from_secs(25),
            client_limits: ClientLimits::default(),
            model_load_timeout: Duration::from_secs(DEFAULT_MODEL_LOAD_TIMEOUT_SECS),
            metrics_port: None,
            metrics_path: DEFAULT_METRICS_PATH.to_owned(),
            bidi_messages_per_second: DEFAULT_BIDI_MESSAGES_PER_SECOND,
            plugins: None,
            sessions: None,
            worker_threads: None,
            core_logging: CoreLogging::default(),
            backend_config: Vec::new(),
            buffer_manager_threads: None,
            model_load_gpu_limit: None,
            model_namespacing: true,
            triton_home: None,
            process: ProcessRole::Alone,
        }
    }
}

/// Messages a second a bidirectional stream may send by default.
pub const DEFAULT_BIDI_MESSAGES_PER_SECOND: u32 = 100;

/// Where SageMaker scrapes metrics unless told otherwise.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

/// The metrics path if it is one: absolute, of visible ASCII without a query, fragment or dot
/// segment. (That it is not one of trident's own routes is checked by `cli`, against the
/// router's table: [`Config::check_routes`].)
fn check_metrics_path(path: &str) -> Result<String, ConfigError> {
    let fail = |why: &str| {
        Err(ConfigError(format!(
            "ERROR: TRIDENT_METRICS_PATH '{path}' {why}"
        )))
    };
    if !path.starts_with('/') || path.len() < 2 || path.len() > 256 {
        return fail("must start with '/' and have 2 to 256 characters");
    }
    if !path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b))
    {
        return fail("may hold only letters, digits, '/', '-', '.', '_' and '~'");
    }
    if path
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        return fail("may not have '.' or '..' segments");
    }
    Ok(path.to_owned())
}

/// A start-up check that failed; the message is what the entry script prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn flag(value: &str) -> bool {
    value.eq_ignore_ascii_case("true") || value == "1"
}

impl ServeArgs {
    /// Resolves and checks the configuration.
    pub fn resolve(self) -> Result<Config, ConfigError> {
        let multi_model = flag(&self.multi_model);
        let mode = self.mode(multi_model)?;
        let inference_type = self.inference_type()?;
        let ping_mode = self.ping_mode(multi_model)?;
        let restrictions = parse_restrictions(self.restricted_api.iter().map(String::as_str))
            .map_err(ConfigError)?;
        let batch = flag(&self.batch).then(|| BatchSettings {
            max_concurrent_transforms: self.max_concurrent_transforms,
            batch_strategy: self.batch_strategy.clone(),
            max_payload_in_mb: self.max_payload_in_mb,
        });
        let max_body_bytes = self.max_body_bytes.unwrap_or(match &batch {
            Some(batch) => batch.max_payload_in_mb.saturating_mul(1024 * 1024),
            None => DEFAULT_MAX_BODY_BYTES,
        });
        if let Some(limit) = self.model_load_gpu_limit
            && !(limit > 0.0 && limit <= 1.0)
        {
            return Err(ConfigError(format!(
                "ERROR: SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT must be in (0, 1], got {limit}"
            )));
        }
        let (core_logging, backend_config) = self.core_settings()?;
        let metrics_port = ports::choose_port(
            self.metrics_port,
            self.safe_port_range.as_deref(),
            self.port,
        )
        .map_err(ConfigError)?;
        let metrics_path = check_metrics_path(&self.metrics_path)?;
        let process = self.process_role()?;
        Ok(Config {
            process,
            listen: SocketAddr::new(self.bind, self.port),
            metrics_port,
            metrics_path,
            bidi_messages_per_second: self.bidi_messages_per_second.max(1),
            plugins: self.plugins.clone().filter(|p| !p.as_os_str().is_empty()),
            sessions: self.session_settings()?,
            mode,
            ping_mode,
            inference_type,
            restrictions,
            max_body_bytes,
            list_page_size: self.list_page_size.max(1),
            batch,
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
            client_limits: ClientLimits {
                max_connections: self.max_connections.max(1),
                header_read_timeout: Duration::from_secs(self.header_read_timeout_secs.max(1)),
                body_read_timeout: Duration::from_secs(self.body_read_timeout_secs.max(1)),
            },
            model_load_timeout: Duration::from_secs(self.model_load_timeout_secs.max(1)),
            worker_threads: self.thread_count.filter(|&n| n > 0),
            core_logging,
            backend_config,
            buffer_manager_threads: self.buffer_manager_thread_count,
            model_load_gpu_limit: self.model_load_gpu_limit,
            model_namespacing: flag(&self.disable_model_namespacing),
            triton_home: self.triton_home,
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
        Ok(Some(SessionSettings {
            expiration: Duration::from_secs(self.sessions_expiration),
            max_sessions: self.max_sessions,
            store_bytes: self.session_store_bytes,
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

    /// The core's logging and backend settings, with `SAGEMAKER_TRITON_ADDITIONAL_ARGS` applied.
    fn core_settings(&self) -> Result<(CoreLogging, Vec<BackendSetting>), ConfigError> {
        let mut core_logging = CoreLogging {
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
            apply_additional_args(args, &mut backend_config, &mut core_logging)?;
        }
        Ok((core_logging, backend_config))
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

/// Applies the Triton flags trident understands from `SAGEMAKER_TRITON_ADDITIONAL_ARGS`.
fn apply_additional_args(
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ServeArgs,
    }

    #[test]
    fn metrics_paths_are_checked() {
        for good in ["/metrics", "/prom/metrics", "/a-b_c.d~e", "/models-metrics"] {
            assert_eq!(check_metrics_path(good).unwrap(), good);
        }
        for bad in [
            "",
            "/",
            "metrics",
            "/metrics?x=1",
            "/met rics",
            "/metrics#a",
            "/../ping",
            "/a/./b",
            "/métrique",
        ] {
            let error = check_metrics_path(bad).unwrap_err().0;
            assert!(error.contains("TRIDENT_METRICS_PATH"), "{bad}: {error}");
        }
        assert!(check_metrics_path(&format!("/{}", "a".repeat(300))).is_err());
    }

    fn args(repository: &Path, extra: &[&str]) -> ServeArgs {
        let mut argv = vec![
            "trident".to_string(),
            "--model-repository".into(),
            repository.display().to_string(),
        ];
        argv.extend(extra.iter().map(|s| s.to_string()));
        Wrapper::try_parse_from(argv).unwrap().args
    }

    fn repo(folders: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for folder in folders {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        dir
    }

    #[test]
    fn the_only_folder_is_the_default_model() {
        let dir = repo(&["only"]);
        let config = args(dir.path(), &[]).resolve().unwrap();
        assert!(
            matches!(config.mode, Mode::SingleModel { ref default_model, .. } if default_model == "only")
        );
        assert_eq!(config.ping_mode, PingMode::Ready);
        assert_eq!(config.inference_type, InferenceType::Infer);
        assert_eq!(config.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
    }

    #[test]
    fn start_up_errors_have_the_entry_script_messages() {
        let cases: Vec<(tempfile::TempDir, Vec<&str>, &str)> = vec![
            (repo(&[]), vec![], "No model found in model repository"),
            (
                repo(&["a", "b"]),
                vec![],
                "More than 1 model directory found",
            ),
            (
                repo(&["a"]),
                vec!["--default-model", "zzz"],
                "Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME zzz does not exist",
            ),
            (
                repo(&["a"]),
                vec!["--inference-type", "predict"],
                "Invalid SAGEMAKER_TRITON_INFERENCE_TYPE",
            ),
            (
                repo(&["a"]),
                vec!["--http-restricted-api", "bogus:h=v"],
                "restricted",
            ),
            (
                repo(&["a"]),
                vec!["--additional-args", "--grpc-port=1"],
                "not supported",
            ),
        ];
        for (dir, extra, expected) in cases {
            let error = args(dir.path(), &extra).resolve().unwrap_err();
            assert!(error.0.contains(expected), "{extra:?}: {error}");
        }
        let dir = repo(&["a"]);
        std::fs::write(dir.path().join("config.pbtxt"), "").unwrap();
        let error = args(dir.path(), &[]).resolve().unwrap_err();
        assert!(
            error
                .0
                .contains("Model directory needs to contain the top level folder")
        );
    }

    #[test]
    fn multi_model_pings_live_unless_overridden() {
        let dir = repo(&[]);
        let config = args(dir.path(), &["--multi-model", "true"])
            .resolve()
            .unwrap();
        assert!(matches!(config.mode, Mode::MultiModel { .. }));
        assert_eq!(config.ping_mode, PingMode::Live);
        let config = args(
            dir.path(),
            &["--multi-model", "true", "--override-ping-mode", "ready"],
        )
        .resolve()
        .unwrap();
        assert_eq!(config.ping_mode, PingMode::Ready);
    }

    #[test]
    fn batch_transform_sets_the_body_limit() {
        let dir = repo(&["a"]);
        let config = args(
            dir.path(),
            &["--batch", "true", "--max-payload-in-mb", "20"],
        )
        .resolve()
        .unwrap();
        assert_eq!(config.max_body_bytes, 20 * 1024 * 1024);
        assert_eq!(config.batch.unwrap().max_payload_in_mb, 20);
    }

    #[test]
    fn additional_backend_config_overrides() {
        let dir = repo(&["a"]);
        let config = args(
            dir.path(),
            &[
                "--additional-args",
                "--backend-config=python,shm-default-byte-size=1 --log-verbose=2",
            ],
        )
        .resolve()
        .unwrap();
        assert!(config.backend_config.contains(&BackendSetting::new(
            "python",
            "shm-default-byte-size",
            1
        )));
        assert_eq!(config.backend_config.len(), 2);
        assert_eq!(config.core_logging.verbose, 2);
    }

    #[test]
    fn session_settings_out_of_range_stop_the_start() {
        let dir = repo(&["a"]);
        let on = |extra: &[&str]| {
            let mut all = vec!["--stateful-sessions", "true"];
            all.extend_from_slice(extra);
            args(dir.path(), &all).resolve()
        };
        let settings = on(&[]).unwrap().sessions.unwrap();
        assert_eq!(settings.expiration, Duration::from_secs(1200));
        let longest = crate::sessions::table::MAX_EXPIRATION_SECS.to_string();
        assert!(on(&["--sessions-expiration", &longest]).is_ok());
        for (flag, value, named) in [
            (
                "--sessions-expiration",
                "0",
                "SAGEMAKER_SESSIONS_EXPIRATION",
            ),
            (
                "--sessions-expiration",
                "18446744073709551615",
                "SAGEMAKER_SESSIONS_EXPIRATION",
            ),
            (
                "--sessions-expiration",
                "2592001",
                "SAGEMAKER_SESSIONS_EXPIRATION",
            ),
            ("--max-sessions", "0", "TRIDENT_MAX_SESSIONS"),
        ] {
            let error = on(&[flag, value]).unwrap_err().0;
            assert!(error.contains(named), "{flag} {value}: {error}");
        }
        // Off, the settings are not read.
        assert!(
            args(dir.path(), &["--sessions-expiration", "0"])
                .resolve()
                .unwrap()
                .sessions
                .is_none()
        );
    }
}

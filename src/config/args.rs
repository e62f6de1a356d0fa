//! The flags of `trident serve`, each falling back to its SageMaker (or trident) environment
//! variable. Each default is a constant of the section that uses it, so a configuration built
//! without flags ([`super::Config::new`]) has the same ones. [`ServeArgs::resolve`]
//! (`resolve`) turns them into a [`super::Config`].

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use clap::Args;

use super::DEFAULT_MODELS_ROOT;
use super::core::DEFAULT_MODEL_LOAD_TIMEOUT_SECS;
use super::http::{
    DEFAULT_BIDI_MESSAGES_PER_SECOND, DEFAULT_BODY_READ_TIMEOUT_SECS,
    DEFAULT_HEADER_READ_TIMEOUT_SECS, DEFAULT_LIST_PAGE_SIZE, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_METRICS_PATH, DEFAULT_PORT, DEFAULT_SHUTDOWN_GRACE_SECS,
};
use super::process::{
    DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_WINDOW_SECS, RESTARTS_ENV, STATE_DIR_ENV,
    SUPERVISOR_PID_ENV,
};
use crate::artifacts::controls::{
    NATIVE_CODE_ENV, PLUGIN_KEYS_ENV, PLUGIN_REQUIRE_CASES_ENV, SECURE_MODE_ENV,
    SECURITY_CONTROLS_ENV, UNTRUSTED_CHANNELS_ENV,
};
use crate::sessions::store::DEFAULT_STORE_BYTES;
use crate::sessions::table::{
    DEFAULT_EXPIRATION_SECS, DEFAULT_MAX_SESSIONS, DEFAULT_RECLAIM_IDLE_SECS,
};

/// The flags of `trident serve`; each falls back to its SageMaker environment variable.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Port to listen on.
    #[arg(long, env = "SAGEMAKER_BIND_TO_PORT", default_value_t = DEFAULT_PORT)]
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
    #[arg(long, default_value_t = DEFAULT_LIST_PAGE_SIZE)]
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
    #[arg(long, env = "SAGEMAKER_SESSIONS_EXPIRATION", default_value_t = DEFAULT_EXPIRATION_SECS)]
    pub sessions_expiration: u64,
    /// Sessions open at once; one more is refused (429).
    #[arg(long, env = "TRIDENT_MAX_SESSIONS", default_value_t = DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Bytes one session's plugin store may hold: keys, values and 96 bytes an entry.
    #[arg(long, env = "TRIDENT_SESSION_STORE_BYTES", default_value_t = DEFAULT_STORE_BYTES)]
    pub session_store_bytes: usize,
    /// Seconds a session must have been idle before its slot may go to a new session when none
    /// is free (the least recently used such session is ended for it).
    #[arg(long, env = "TRIDENT_SESSION_RECLAIM_IDLE_SECS", default_value_t = DEFAULT_RECLAIM_IDLE_SECS)]
    pub session_reclaim_idle_secs: u64,
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
    #[arg(long, default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
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
    #[arg(long, env = "TRIDENT_MAX_RESTARTS", default_value_t = DEFAULT_MAX_RESTARTS)]
    pub max_restarts: u32,
    /// The window `--max-restarts` counts in, in seconds.
    #[arg(long, env = "TRIDENT_RESTART_WINDOW_SECS", default_value_t = DEFAULT_RESTART_WINDOW_SECS)]
    pub restart_window_secs: u64,
    /// `true` turns SageMaker Secure Mode on: model artifacts are held to the controls of
    /// `--security-controls`, and plugins must be signed with `--plugin-trusted-keys`.
    #[arg(long, env = SECURE_MODE_ENV, default_value = "false")]
    pub secure_mode: String,
    /// Secure Mode's controls, comma-separated (required under Secure Mode).
    #[arg(long, env = SECURITY_CONTROLS_ENV)]
    pub security_controls: Option<String>,
    /// The folders whose files are untrusted, comma-separated (required under Secure Mode).
    #[arg(long, env = UNTRUSTED_CHANNELS_ENV)]
    pub untrusted_channels: Option<String>,
    /// `allow` or `refuse`: whether model artifacts may bring native code into the serving
    /// process (backend libraries, backends the image lacks, custom operation libraries).
    /// Default: `refuse` on a multi-model endpoint, `allow` on a single-model one.
    #[arg(long, env = NATIVE_CODE_ENV)]
    pub artifact_native_code: Option<String>,
    /// How python models' processes are confined by the kernel: `required` (confined, or
    /// refused where the kernel has no Landlock), `best-effort` (confined as far as the kernel
    /// allows) or `off`. Default: `required` under Secure Mode and on a multi-model endpoint,
    /// `best-effort` otherwise.
    #[arg(long, env = crate::confine::ISOLATION_ENV)]
    pub python_isolation: Option<String>,
    /// How the serving process (and everything it starts) is kept to writing only where it
    /// must, by the kernel: `required` (confined, or no start where the kernel has no
    /// Landlock), `best-effort` (the default: confined as far as the kernel allows) or `off`.
    #[arg(long, env = crate::confine::serving::SERVING_ISOLATION_ENV)]
    pub serving_isolation: Option<String>,
    /// More folders the serving process may write (`:`-separated, absolute, existing): a
    /// backend's cache, a manifest's compile cache elsewhere.
    #[arg(long, env = crate::confine::serving::SERVING_WRITABLE_ENV)]
    pub serving_writable: Option<String>,
    /// Where the private trees the core loads artifacts from are made (by default the
    /// temporary folder). On the models' own file system, files are hard-linked instead of
    /// copied.
    #[arg(long, env = crate::artifacts::staging::STAGING_DIR_ENV)]
    pub artifact_staging_dir: Option<PathBuf>,
    /// The platform's ed25519 public keys (hex, comma-separated): under Secure Mode, every
    /// plugin must be signed with one of them.
    #[arg(long, env = PLUGIN_KEYS_ENV)]
    pub plugin_trusted_keys: Option<String>,
    /// Under Secure Mode, `true` refuses every plugin that carries no golden cases.
    #[arg(long, env = PLUGIN_REQUIRE_CASES_ENV, default_value = "false")]
    pub plugin_require_cases: String,
    /// Set by the supervisor for the serving process it starts: the supervisor's pid.
    #[arg(long, env = SUPERVISOR_PID_ENV, hide = true)]
    pub supervisor_pid: Option<u32>,
    /// Set by the supervisor: its folder for what a restarted serving process needs.
    #[arg(long, env = STATE_DIR_ENV, hide = true)]
    pub state_dir: Option<PathBuf>,
    /// Set by the supervisor: how many serving processes it restarted before this one.
    #[arg(long, env = RESTARTS_ENV, hide = true, default_value_t = 0)]
    pub restarts: u32,
}

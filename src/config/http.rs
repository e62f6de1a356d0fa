//! The HTTP section: where trident listens, what one client may send and hold, the metrics
//! path and port, the restricted APIs, the serving threads.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::ConfigError;
use super::restrictions::Restriction;

/// Default for `--port` (`SAGEMAKER_BIND_TO_PORT`): SageMaker's.
pub const DEFAULT_PORT: u16 = 8080;
/// SageMaker's real-time payload limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 6 * 1024 * 1024;
/// Default for `--list-page-size`.
pub const DEFAULT_LIST_PAGE_SIZE: usize = 1000;
/// Default for `--shutdown-grace-secs`: SageMaker kills 30 s after SIGTERM, and after the
/// drain a stop may still take the supervisor's margin (`supervisor::STOP_MARGIN`, 10 s: the
/// sessions' ENDs and the core's stop, with 2 s to spare), so 19 + 10 s end before it.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 19;
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

/// Messages a second a bidirectional stream may send by default.
pub const DEFAULT_BIDI_MESSAGES_PER_SECOND: u32 = 100;

/// Where SageMaker scrapes metrics unless told otherwise.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

/// How trident speaks HTTP.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// The address and port of the main listener (`--bind`, `--port`).
    pub listen: SocketAddr,
    /// The restricted API categories and the header each needs; empty when none is restricted.
    pub restrictions: Vec<Restriction>,
    /// Largest request body, and bidirectional stream message, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Models per page of the multi-model list, at least 1.
    pub list_page_size: usize,
    /// How long in-flight requests may take to finish after SIGTERM.
    pub shutdown_grace: Duration,
    /// Open connections, and how long a client may take to send a request.
    pub client_limits: ClientLimits,
    /// The port of the separate metrics listener, if any.
    pub metrics_port: Option<u16>,
    /// The path metrics are served at (main port and metrics listener).
    pub metrics_path: String,
    /// Messages a second a bidirectional stream may send.
    pub bidi_messages_per_second: u32,
    /// HTTP worker threads, one single-threaded runtime each (`http::workers`); default: one
    /// per core.
    pub worker_threads: Option<usize>,
}

impl Default for HttpSettings {
    /// Every default, listening on 127.0.0.1 on any free port (for embedding and tests).
    fn default() -> HttpSettings {
        HttpSettings {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            restrictions: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            list_page_size: DEFAULT_LIST_PAGE_SIZE,
            shutdown_grace: Duration::from_secs(DEFAULT_SHUTDOWN_GRACE_SECS),
            client_limits: ClientLimits::default(),
            metrics_port: None,
            metrics_path: DEFAULT_METRICS_PATH.to_owned(),
            bidi_messages_per_second: DEFAULT_BIDI_MESSAGES_PER_SECOND,
            worker_threads: None,
        }
    }
}

/// The metrics path if it is one: absolute, of visible ASCII without a query, fragment or dot
/// segment. (That it is not one of trident's own routes is checked by `cli`, against the
/// router's table: [`Config::check_routes`].)
pub(super) fn check_metrics_path(path: &str) -> Result<String, ConfigError> {
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

//! The HTTP server SageMaker talks to: the router here (dispatching by the table in
//! [`crate::routes`]), the listener (`listener`: accept loop, connection limit, graceful stop)
//! and a module per route family (`ping`, `invocations`, `models`, `bidi_stream`), beside the
//! serving threads (`workers`), the limits on a request's head and body (`head_size`, `body`)
//! and what plugins may answer (`plugin_reply`). No Triton types here: handlers talk to an
//! [`Engine`].

pub mod bidi_stream;
pub mod body;
pub mod error;
pub mod head_size;
pub mod invocations;
mod listener;
pub mod models;
pub mod ping;
pub mod plugin_reply;
pub mod redact;
pub mod restricted;
pub mod sessions;
pub mod state;
pub mod workers;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, header};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tracing::Instrument;

use self::body::{ResponseBody, read_body};
use self::error::ApiError;
use self::listener::Serves;
use self::restricted::{Category, missing_header};
pub use self::state::AppState;
use crate::engine::Engine;
use crate::invocation::Invocation;
use crate::metrics::PluginRow;
use crate::routes::{Handler, Route, SessionHeader};

/// The 403 of a restricted API.
fn restricted_error(header: &str) -> ApiError {
    ApiError::new(
        http::StatusCode::FORBIDDEN,
        format!("This API is restricted, expecting header '{header}'"),
    )
}

fn require<E>(
    state: &AppState<E>,
    category: Category,
    headers: &http::HeaderMap,
) -> Result<(), ApiError> {
    match missing_header(&state.config.restrictions, category, headers) {
        Some(header) => Err(restricted_error(header)),
        None => Ok(()),
    }
}

/// Answers one request.
pub async fn handle<E: Engine>(
    state: &Arc<AppState<E>>,
    request: Request<Incoming>,
) -> Response<ResponseBody> {
    let started = std::time::Instant::now();
    let route = Route::parse(request.uri().path());
    let label = if request.uri().path() == state.config.metrics_path {
        "metrics"
    } else {
        route.map_or("unknown", |r| r.label(request.method()))
    };
    // The model label names only models the endpoint has (loaded before or after the
    // request): a client inventing names in urls adds no series.
    let default_model = matches!(route, Some(Route::Invocations));
    let url_model = match route {
        Some(Route::Model(name) | Route::Invoke(name)) => Some(name.to_owned()),
        _ => None,
    };
    let loaded_before = url_model
        .as_deref()
        .is_some_and(|name| state.registry.contains(name));
    // Every line logged while the request is handled names SageMaker's id for it.
    let span = match crate::invocation::log_id(request.headers()) {
        Some(id) => tracing::info_span!("request", inference_id = %id),
        None => tracing::Span::none(),
    };
    let response = async {
        dispatch(state, request)
            .await
            .unwrap_or_else(|error| error.redacted(&state.redactor).into_response())
    }
    .instrument(span)
    .await;
    let model = if default_model {
        state.default_model.clone()
    } else {
        url_model
            .filter(|name| loaded_before || state.registry.contains(name))
            .unwrap_or_default()
    };
    state
        .metrics
        .observe(label, &model, response.status().as_u16(), started.elapsed());
    response
}

async fn dispatch<E: Engine>(
    state: &Arc<AppState<E>>,
    request: Request<Incoming>,
) -> Result<Response<ResponseBody>, ApiError> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    let headers = &parts.headers;
    if path == state.config.metrics_path {
        if parts.method != Method::GET {
            return Err(ApiError::method_not_allowed("GET"));
        }
        // What SageMaker's observability scrapes on the main port, restricted like `/ping`.
        require(state, Category::Health, headers)?;
        return Ok(metrics_text(state));
    }
    let route =
        Route::parse(path).ok_or_else(|| ApiError::not_found(format!("no route for {path}")))?;
    let endpoint = route
        .endpoint(&parts.method)
        .ok_or_else(|| ApiError::method_not_allowed(route.allow()))?;
    if let Some(category) = endpoint.category {
        require(state, category, headers)?;
    }
    let body = if endpoint.reads_body {
        let limit = state.config.max_body_bytes;
        let timeout = state.config.client_limits.body_read_timeout;
        read_body(body, headers, limit, timeout).await?
    } else {
        Bytes::new()
    };
    let invocation = || Invocation::from_headers(headers);
    if endpoint.sessions == SessionHeader::Refuses {
        sessions::refuse_elsewhere(state, headers)?;
    }
    match (endpoint.handler, route) {
        (Handler::Ping, _) => ping::ping(state),
        (Handler::Invoke, _) => {
            invocations::invoke_default(state, &invocation(), headers, body).await
        }
        (Handler::BidiStream, _) => {
            let mut parts = parts;
            bidi_stream::upgrade(state, &mut parts)
        }
        (Handler::ExecutionParameters, _) => Ok(execution_parameters(state)),
        (Handler::ModelList, _) => models::list(state, parts.uri.query()),
        (Handler::ModelLoad, _) => models::load(state, &invocation(), body).await,
        (Handler::ModelGet, Route::Model(name)) => models::get(state, name),
        (Handler::ModelUnload, Route::Model(name)) => {
            models::unload(state, name, &invocation()).await
        }
        (Handler::ModelInvoke, Route::Invoke(name)) => {
            models::invoke(state, name, &invocation(), headers, body).await
        }
        (Handler::OpenAiChat, Route::OpenAiChat(path)) => {
            invocations::openai_chat(state, path, &invocation(), headers, body).await
        }
        (Handler::PluginReload, _) => {
            let count = state
                .reload_plugins()
                .await
                .map_err(ApiError::bad_request)?;
            let body = serde_json::json!({ "plugins": count }).to_string();
            let mut response = Response::new(ResponseBody::full(body));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Ok(response)
        }
        (handler, route) => Err(ApiError::new(
            http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("the route table sends {route:?} to {handler:?}"),
        )),
    }
}

/// `GET /execution-parameters`: the batch transform settings SageMaker asks for.
fn execution_parameters<E>(state: &AppState<E>) -> Response<ResponseBody> {
    let (concurrent, strategy, payload) = match &state.config.batch {
        Some(batch) => (
            batch.max_concurrent_transforms,
            batch.batch_strategy.as_str(),
            batch.max_payload_in_mb,
        ),
        None => (1, "MULTI_RECORD", 6),
    };
    let json = serde_json::json!({
        "MaxConcurrentTransforms": concurrent,
        "BatchStrategy": strategy,
        "MaxPayloadInMB": payload,
    });
    let mut response = Response::new(ResponseBody::full(json.to_string()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Serves SageMaker's routes on `listener` until `shutdown` completes, then stops accepting
/// and lets in-flight requests finish for up to `grace`. Idle sessions expire meanwhile.
pub async fn serve<E: Engine>(
    listener: TcpListener,
    state: Arc<AppState<E>>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    if let Some(sessions) = &state.sessions {
        tokio::spawn(crate::sessions::Sessions::expire_idle(Arc::downgrade(
            sessions,
        )));
    }
    let answer = |state: Arc<AppState<E>>, request| async move { handle(&state, request).await };
    listener::run(Serves::Routes, listener, state, answer, shutdown, grace).await;
}

/// Serves `GET /metrics` (Prometheus text) on its own listener until the process ends, with the
/// same connection limits and timeouts as the main listener.
pub async fn serve_metrics<E: Engine>(listener: TcpListener, state: Arc<AppState<E>>) {
    let never = std::future::pending::<()>();
    let answer =
        |state: Arc<AppState<E>>, request| async move { metrics_response(&state, &request) };
    listener::run(
        Serves::Metrics,
        listener,
        state,
        answer,
        never,
        Duration::ZERO,
    )
    .await;
}

/// The metrics listener's answer: the Prometheus text at `GET` of the metrics path, else 404.
fn metrics_response<E: Engine, B>(
    state: &AppState<E>,
    request: &Request<B>,
) -> Response<ResponseBody> {
    let path = &state.config.metrics_path;
    if request.uri().path() != path || request.method() != Method::GET {
        return ApiError::not_found(format!("metrics are served at GET {path}")).into_response();
    }
    metrics_text(state)
}

/// The Prometheus text of every metric.
fn metrics_text<E: Engine>(state: &AppState<E>) -> Response<ResponseBody> {
    let plugins: Vec<PluginRow> = state
        .plugins
        .load_full()
        .map(|host| {
            host.plugins()
                .map(|p| PluginRow {
                    plugin: p.name.to_string(),
                    output_dropped_bytes: p.counters().output_dropped_bytes(),
                    reply_headers_dropped: p.counters().reply_headers_dropped(),
                    stream_calls: p.counters().stream_calls(),
                    stream_failures: p.counters().stream_failures(),
                })
                .collect()
        })
        .unwrap_or_default();
    let text = state.metrics.render_with(
        state.engine.in_flight(),
        &plugins,
        state.sessions.as_ref().map(|s| s.counts()),
    );
    let mut response = Response::new(ResponseBody::full(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

//! The HTTP server SageMaker talks to: the listener, the router, and a module per route family
//! (`ping`, `invocations`, `models`, `bidi_stream`), beside the serving threads (`workers`), the
//! limits on a request's head and body (`head_size`, `body`) and what plugins may answer
//! (`plugin_reply`). No Triton types here: handlers talk to an [`Engine`].

pub mod bidi_stream;
pub mod body;
pub mod error;
pub mod head_size;
pub mod invocations;
pub mod models;
pub mod ping;
pub mod plugin_reply;
pub mod redact;
pub mod restricted;
pub mod state;
pub mod workers;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Method, Request, Response, header};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tracing::Instrument;

use self::body::{ResponseBody, read_body};
use self::error::ApiError;
use self::restricted::{Category, missing_header};
pub use self::state::AppState;
use self::workers::Workers;
use crate::engine::Engine;
use crate::invocation::Invocation;
use crate::metrics::PluginRow;

/// The routes trident answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /ping`: SageMaker's health check.
    Ping,
    /// `POST /invocations`: an inference, generate or generate stream on the default model.
    Invocations,
    /// `GET /execution-parameters`: the batch transform settings.
    ExecutionParameters,
    /// `/models`: `GET` lists a multi-model endpoint's loaded models, `POST` loads one.
    Models,
    /// `/models/{name}`: `GET` describes a loaded model, `DELETE` unloads it.
    Model(&'a str),
    /// `POST /models/{name}/invoke`: an inference on a model loaded through `/models`.
    Invoke(&'a str),
    /// `POST /plugins/reload`: reload the plugin manifest (restricted like the model repository).
    PluginReload,
    /// `GET /invocations-bidirectional-stream`: a WebSocket of invocations.
    BidiStream,
}

impl<'a> Route<'a> {
    /// The route for a path (query excluded), or `None` (404).
    pub fn parse(path: &'a str) -> Option<Route<'a>> {
        match path {
            "/ping" => Some(Route::Ping),
            "/invocations" => Some(Route::Invocations),
            bidi_stream::PATH => Some(Route::BidiStream),
            "/execution-parameters" => Some(Route::ExecutionParameters),
            "/models" | "/models/" => Some(Route::Models),
            "/plugins/reload" => Some(Route::PluginReload),
            _ => {
                let rest = path.strip_prefix("/models/")?;
                match rest.split_once('/') {
                    None if !rest.is_empty() => Some(Route::Model(rest)),
                    Some((name, "invoke")) if !name.is_empty() => Some(Route::Invoke(name)),
                    _ => None,
                }
            }
        }
    }

    /// The methods the route answers (the `Allow` header of a 405).
    pub fn allow(self) -> &'static str {
        match self {
            Route::Ping | Route::ExecutionParameters | Route::BidiStream => "GET",
            Route::Invocations | Route::Invoke(_) | Route::PluginReload => "POST",
            Route::Models => "GET, POST",
            Route::Model(_) => "GET, DELETE",
        }
    }

    /// The route's name in metrics, for a request with `method`.
    pub fn label(self, method: &Method) -> &'static str {
        match (self, method) {
            (Route::Ping, _) => "ping",
            (Route::Invocations, _) => "invocations",
            (Route::ExecutionParameters, _) => "execution_parameters",
            (Route::Models, &Method::POST) => "model_load",
            (Route::Models, _) => "model_list",
            (Route::Model(_), &Method::DELETE) => "model_unload",
            (Route::Model(_), _) => "model_get",
            (Route::Invoke(_), _) => "model_invoke",
            (Route::PluginReload, _) => "plugin_reload",
            (Route::BidiStream, _) => "bidirectional_stream",
        }
    }
}

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
    let model = match route {
        Some(Route::Invocations) => state.default_model.clone(),
        Some(Route::Model(name) | Route::Invoke(name)) => name.to_owned(),
        _ => String::new(),
    };
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
    let limit = state.config.max_body_bytes;
    let timeout = state.config.client_limits.body_read_timeout;
    match (route, &parts.method) {
        (Route::Ping, &Method::GET) => {
            require(state, Category::Health, headers)?;
            ping::ping(state)
        }
        (Route::Invocations, &Method::POST) => {
            require(state, Category::Inference, headers)?;
            let invocation = Invocation::from_headers(headers);
            let body = read_body(body, headers, limit, timeout).await?;
            invocations::invoke_default(state, &invocation, headers, body).await
        }
        (Route::BidiStream, &Method::GET) => {
            require(state, Category::Inference, headers)?;
            let mut parts = parts;
            bidi_stream::upgrade(state, &mut parts)
        }
        (Route::ExecutionParameters, &Method::GET) => Ok(execution_parameters(state)),
        (Route::Models, &Method::GET) => {
            require(state, Category::ModelRepository, headers)?;
            models::list(state, parts.uri.query())
        }
        (Route::Models, &Method::POST) => {
            require(state, Category::ModelRepository, headers)?;
            let invocation = Invocation::from_headers(headers);
            let body = read_body(body, headers, limit, timeout).await?;
            models::load(state, &invocation, body).await
        }
        (Route::Model(name), &Method::GET) => {
            require(state, Category::ModelRepository, headers)?;
            models::get(state, name)
        }
        (Route::Model(name), &Method::DELETE) => {
            require(state, Category::ModelRepository, headers)?;
            models::unload(state, name).await
        }
        (Route::Invoke(name), &Method::POST) => {
            require(state, Category::Inference, headers)?;
            let invocation = Invocation::from_headers(headers);
            let body = read_body(body, headers, limit, timeout).await?;
            models::invoke(state, name, &invocation, headers, body).await
        }
        (Route::PluginReload, &Method::POST) => {
            require(state, Category::ModelRepository, headers)?;
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
        (route, _) => Err(ApiError::method_not_allowed(route.allow())),
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

/// What a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Serves {
    /// SageMaker's routes.
    Routes,
    /// `GET /metrics` only.
    Metrics,
}

/// Serves SageMaker's routes on `listener` until `shutdown` completes, then stops accepting
/// and lets in-flight requests finish for up to `grace`.
pub async fn serve<E: Engine>(
    listener: TcpListener,
    state: Arc<AppState<E>>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    accept(Serves::Routes, listener, state, shutdown, grace).await;
}

/// Serves `GET /metrics` (Prometheus text) on its own listener until the process ends, with the
/// same connection limits and timeouts as the main listener.
pub async fn serve_metrics<E: Engine>(listener: TcpListener, state: Arc<AppState<E>>) {
    let never = std::future::pending::<()>();
    accept(Serves::Metrics, listener, state, never, Duration::ZERO).await;
}

/// The one accept loop of every listener: HTTP/1.1 with the header timeout and size limit, at
/// most `max_connections` at once (one more is answered 503 at once), until `shutdown`.
/// SageMaker's routes are served on [`Workers`] (one single-threaded runtime per core, each
/// connection on one of them); the metrics listener's few connections stay on this runtime.
async fn accept<E: Engine>(
    serves: Serves,
    listener: TcpListener,
    state: Arc<AppState<E>>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    // Every connection holds a receiver until it ends; `true` asks them to finish gracefully.
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let limits = state.config.client_limits;
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let workers = match serves {
        Serves::Routes => start_workers(state.config.worker_threads),
        Serves::Metrics => None,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(head_size::READ_BUFFER_BYTES)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of descriptors and the like: back off instead of spinning.
                        tracing::warn!(%error, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    state.metrics.connection_refused();
                    tokio::spawn(refuse_busy(stream, limits.max_connections));
                    continue;
                };
                let state = Arc::clone(&state);
                let service = service_fn(move |request| {
                    let state = Arc::clone(&state);
                    async move {
                        let response = match (head_size::refuse_oversized(&request), serves) {
                            (Some(refusal), _) => refusal,
                            (None, Serves::Routes) => handle(&state, request).await,
                            (None, Serves::Metrics) => metrics_response(&state, &request),
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
                let (stop, builder) = (stop.clone(), builder.clone());
                let serve = move |stream: tokio::net::TcpStream| async move {
                    serve_connection(&builder, stream, service, stop, serves).await;
                    drop(slot);
                };
                match &workers {
                    Some(workers) => hand_over(workers, stream, serve),
                    None => drop(tokio::spawn(serve(stream))),
                }
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    tokio::select! {
        () = async {
            drop(stop);
            let _ = stopping.send(true);
            state.shutting_down.send_replace(true);
            stopping.closed().await;
            // Upgraded connections left the count above: wait for every session's permit.
            let sessions = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
            drop(state.bidi_sessions.acquire_many(sessions).await);
        } => tracing::info!("all connections closed"),
        () = tokio::time::sleep(grace) => tracing::warn!(?grace, "grace period over with requests still in flight"),
    }
    if let Some(workers) = workers {
        let _ = tokio::task::spawn_blocking(move || workers.stop()).await;
    }
}

/// Serves one connection until it ends, or until `stop` turns `true`: then it finishes the
/// request in flight and closes. With upgrades: a bidirectional stream's handshake hands its
/// connection on.
async fn serve_connection<S>(
    builder: &hyper::server::conn::http1::Builder,
    stream: tokio::net::TcpStream,
    service: S,
    mut stop: tokio::sync::watch::Receiver<bool>,
    serves: Serves,
) where
    S: hyper::service::HttpService<Incoming, ResBody = ResponseBody>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        () = async { drop(stop.wait_for(|stopping| *stopping).await) } => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = ended {
        tracing::debug!(%error, ?serves, "connection ended with an error");
    }
}

/// The serving threads of the main listener, or `None` (serve on this runtime) if they cannot
/// be started.
fn start_workers(configured: Option<usize>) -> Option<Workers> {
    let threads = workers::default_count(configured);
    match Workers::start(threads) {
        Ok(workers) => {
            tracing::debug!(threads, "HTTP worker threads started");
            Some(workers)
        }
        Err(error) => {
            tracing::error!(%error, "could not start the HTTP worker threads; serving on the main runtime");
            None
        }
    }
}

/// Moves an accepted connection to the least loaded worker thread, where it is registered with
/// that thread's runtime and served.
fn hand_over<F, S>(workers: &Workers, stream: tokio::net::TcpStream, serve: S)
where
    S: FnOnce(tokio::net::TcpStream) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let stream = match stream.into_std() {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(%error, "could not hand a connection to a worker thread");
            return;
        }
    };
    workers.assign(move |assignment| async move {
        match tokio::net::TcpStream::from_std(stream) {
            Ok(stream) => serve(stream).await,
            Err(error) => tracing::warn!(%error, "a worker thread could not take a connection"),
        }
        drop(assignment);
    });
}

/// Answers a connection over the limit with a 503 and closes it (within a second) without
/// parsing the request: the client learns at once and can retry elsewhere.
async fn refuse_busy(mut stream: tokio::net::TcpStream, limit: usize) {
    use tokio::io::AsyncWriteExt;
    let body = format!(
        "{{\"error\":\"the server is at its limit of {limit} open connections; retry shortly\"}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client sent before closing, so the close is not a reset that could
        // destroy the 503 before the client reads it.
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < 64 * 1024 {
            match tokio::io::AsyncReadExt::read(&mut stream, &mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<_, std::io::Error>(())
    };
    if tokio::time::timeout(Duration::from_secs(1), write)
        .await
        .is_err()
    {
        tracing::debug!("a refused connection did not take its 503 within 1 s");
    }
    tracing::debug!(limit, "connection refused: at the connection limit");
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
    let text = state
        .metrics
        .render_with(state.engine.in_flight(), &plugins);
    let mut response = Response::new(ResponseBody::full(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(Route::parse("/ping"), Some(Route::Ping));
        assert_eq!(Route::parse("/models/"), Some(Route::Models));
        assert_eq!(Route::parse("/models/abc"), Some(Route::Model("abc")));
        assert_eq!(
            Route::parse("/models/abc/invoke"),
            Some(Route::Invoke("abc"))
        );
        for unknown in [
            "/",
            "/ping/",
            "/invocations/",
            "/modelsfoo",
            "/models/a/b",
            "/models//invoke",
            "/models/a/invoke/x",
        ] {
            assert_eq!(Route::parse(unknown), None, "{unknown}");
        }
    }
}

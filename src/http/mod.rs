//! The HTTP server SageMaker talks to: the router (`routes`: one table of every endpoint, whose
//! rules `handle` carries out here; what its handlers get and give, `call`, apart from it so
//! that no handler imports the router back), every error status (`status`; `error` frames the answer),
//! the listener (`listener`: accept loop, connection limit, graceful stop) and a module per
//! route family (`ping`, `invocations`, `models`, `bidi_stream`, `execution_parameters`,
//! `plugin_reload`, `metrics`), beside the serving threads (`workers`), the limits on a
//! request's head and body (`head_size`, `body`) and what plugins may answer (`plugin_reply`).
//! No Triton types here: handlers talk to an [`Engine`].

pub mod bidi_stream;
pub mod body;
pub mod call;
pub mod error;
pub mod execution_parameters;
pub mod head_size;
pub mod invocations;
mod listener;
pub mod metrics;
pub mod models;
pub mod ping;
pub mod plugin_reload;
pub mod plugin_reply;
pub mod redact;
pub mod restricted;
pub mod routes;
pub mod sessions;
pub mod state;
pub mod status;
pub mod workers;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tracing::Instrument;

use self::body::{ResponseBody, read_body};
use self::call::Call;
use self::error::ApiError;
use self::listener::Serves;
use self::restricted::missing_header;
use self::routes::{Found, ModelOf, Router, SessionRule};
use self::sessions::Step;
pub use self::state::AppState;
use crate::engine::Engine;

/// Answers one request: finds its row, carries out the row's rules, runs its handler, and
/// counts it in metrics under the row's label and model.
pub async fn handle<E: Engine>(
    state: &Arc<AppState<E>>,
    request: Request<Incoming>,
) -> Response<ResponseBody> {
    let started = std::time::Instant::now();
    let (parts, body) = request.into_parts();
    let found = Router::<E>::find(
        &state.config.http.metrics_path,
        &parts.method,
        parts.uri.path(),
    );
    let (label, model_of, name) = match &found {
        Found::Endpoint(endpoint, name) => (endpoint.label, endpoint.model, name.clone()),
        Found::WrongMethod(endpoint, _) => (endpoint.label, ModelOf::None, String::new()),
        Found::Nothing => ("unknown", ModelOf::None, String::new()),
    };
    // The model label names only models the endpoint has once the request is answered: a
    // client inventing names in urls adds no series, and an unload's own request adds none
    // for the model it unloaded (whose series went with it).
    let named = matches!(model_of, ModelOf::Named | ModelOf::Loaded);
    // Every line logged while the request is handled names SageMaker's id for it.
    let span = match crate::invocation::log_id(&parts.headers) {
        Some(id) => tracing::info_span!("request", inference_id = %id),
        None => tracing::Span::none(),
    };
    let response = async {
        dispatch(state, found, parts, body)
            .await
            .unwrap_or_else(|error| error.redacted(&state.redactor).into_response())
    }
    .instrument(span)
    .await;
    let model = match model_of {
        ModelOf::Default => state.default_model.clone(),
        _ if named && state.registry.contains(&name) => name,
        _ => String::new(),
    };
    state
        .metrics
        .observe(label, &model, response.status().as_u16(), started.elapsed());
    response
}

/// Carries out the rules of the request's row, in order: its restriction, its body, its
/// session rule and model, then its handler.
async fn dispatch<E: Engine>(
    state: &Arc<AppState<E>>,
    found: Found<E>,
    parts: http::request::Parts,
    body: Incoming,
) -> Result<Response<ResponseBody>, ApiError> {
    let (endpoint, name) = match found {
        Found::Endpoint(endpoint, name) => (endpoint, name),
        Found::WrongMethod(_, allow) => return Err(ApiError::method_not_allowed(allow)),
        Found::Nothing => return Err(ApiError::no_route(parts.uri.path())),
    };
    let headers = &parts.headers;
    if endpoint.model == ModelOf::Default
        && let Some(refusal) = &state.refused
    {
        return Err(ApiError::artifact_refused(refusal));
    }
    if let Some(category) = endpoint.category
        && let Some(header) = missing_header(&state.config.http.restrictions, category, headers)
    {
        return Err(ApiError::restricted(header));
    }
    let body = if endpoint.reads_body {
        let limit = state.config.http.max_body_bytes;
        let timeout = state.config.http.client_limits.body_read_timeout;
        read_body(body, headers, limit, timeout).await?
    } else {
        Bytes::new()
    };
    let model = match endpoint.model {
        ModelOf::Loaded => Some(models::loaded(state, &name, headers)?),
        _ => None,
    };
    let session = match endpoint.sessions {
        SessionRule::Ignores => None,
        SessionRule::Refuses => {
            sessions::refuse_elsewhere(state, headers)?;
            None
        }
        SessionRule::Serves => {
            let engine_model = match &model {
                Some(model) => &model.target,
                None => &state.default_model,
            };
            match sessions::step(state, engine_model, headers, &body).await? {
                Step::Answered(response) => return Ok(response),
                Step::Run(session) => session,
            }
        }
    };
    let call = Call {
        state,
        parts,
        body,
        name,
        model,
        session,
    };
    (endpoint.handler)(call).await
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
    let answer = |state: Arc<AppState<E>>, request| async move {
        metrics::on_metrics_port(&state, &request)
    };
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

//! The metrics path (`GET /metrics` unless configured otherwise): Prometheus text, on the main
//! port (a row of the router) and on the metrics port when one is configured.

use http::{HeaderValue, Method, Request, Response, header};

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use crate::engine::Engine;
use crate::metrics::PluginRow;

/// The metrics listener's answer: the Prometheus text at `GET` of the metrics path, else 404.
pub fn on_metrics_port<E: Engine, B>(
    state: &AppState<E>,
    request: &Request<B>,
) -> Response<ResponseBody> {
    let path = &state.config.http.metrics_path;
    if request.uri().path() != path || request.method() != Method::GET {
        return ApiError::route_not_served(format!("metrics are served at GET {path}"))
            .into_response();
    }
    text(state)
}

/// The Prometheus text of every metric.
pub fn text<E: Engine>(state: &AppState<E>) -> Response<ResponseBody> {
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

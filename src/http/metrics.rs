//! The metrics path (`GET /metrics` unless configured otherwise): Prometheus text, on the main
//! port (a row of the router) and on the metrics port when one is configured.

use http::{HeaderValue, Method, Request, Response, header};

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use crate::engine::Engine;
use crate::metrics::PluginRow;
use crate::metrics::plugin_accounts::PluginAccountRow;
use crate::metrics::shadows::ShadowRow;
use crate::plugins::LoadedPlugin;
use crate::plugins::platform::accounting::Hook;
use crate::plugins::platform::shadow::{Shadow, ShadowHook};

/// A shadow's rows, one per candidate and model whose requests it shadowed (a model entry's
/// own from its load): labelled by `model` for a model artifact's shadow.
fn shadow_rows(model: Option<&str>, shadow: &Shadow) -> Vec<ShadowRow> {
    [ShadowHook::Request, ShadowHook::Response]
        .into_iter()
        .filter_map(|hook| Some((hook, shadow.candidate(hook)?)))
        .flat_map(|(hook, candidate)| {
            shadow
                .snapshot(hook)
                .into_iter()
                .map(move |(served, verdicts, latency)| ShadowRow {
                    model: model.map_or(served, str::to_owned),
                    candidate: candidate.name.to_string(),
                    hook: hook.name(),
                    verdicts,
                    latency,
                })
        })
        .collect()
}

/// `plugin`'s account, for `/metrics`; `model` names the model whose artifact brought it
/// (empty for the container's).
fn account_row(model: &str, plugin: &LoadedPlugin) -> PluginAccountRow {
    PluginAccountRow {
        plugin: plugin.name.to_string(),
        model: model.to_owned(),
        sha256: plugin.sha256.clone(),
        signer: plugin.signer.clone().unwrap_or_default(),
        versions: plugin.versions(),
        hooks: Hook::ALL
            .into_iter()
            .filter(|hook| plugin.exports(*hook))
            .map(|hook| (hook, plugin.account.load().snapshot(hook)))
            .collect(),
        calls_models: plugin.calls_models(),
    }
}

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
    let mut text = state.metrics.render_with(
        state.engine.in_flight(),
        &plugins,
        state.sessions.as_ref().map(|s| s.counts()),
    );
    let container = state.plugins.load_full().map(|host| (String::new(), host));
    let hosts = container.into_iter().chain(state.registry.plugin_hosts());
    let accounts: Vec<PluginAccountRow> = hosts
        .flat_map(|(model, host)| {
            host.plugins()
                .map(|plugin| account_row(&model, plugin))
                .collect::<Vec<_>>()
        })
        .collect();
    crate::metrics::plugin_accounts::render(&mut text, &accounts);
    let container = state.plugins.load_full().map(|host| (None, host));
    let models = state
        .registry
        .plugin_hosts()
        .into_iter()
        .map(|(model, host)| (Some(model), host));
    let shadows: Vec<ShadowRow> = container
        .into_iter()
        .chain(models)
        .flat_map(|(model, host)| {
            host.shadows()
                .flat_map(|shadow| shadow_rows(model.as_deref(), shadow))
                .collect::<Vec<_>>()
        })
        .collect();
    crate::metrics::shadows::render(&mut text, &shadows);
    let mut response = Response::new(ResponseBody::full(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

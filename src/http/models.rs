//! The multi-model endpoint routes: `POST /models` (load), `GET /models` (list),
//! `GET /models/{name}`, `DELETE /models/{name}` (unload) and `POST /models/{name}/invoke`.

use std::sync::Arc;

use http::Response;

use super::AppState;
use super::body::{ResponseBody, json_response};
use super::call::Call;
use super::error::ApiError;
use super::invocations::{InferRoute, infer};
use super::status::load_failed;
use crate::engine::Engine;
use crate::invocation::Invocation;
use crate::metrics::Outcome;
use crate::mme;
use crate::mme::journal::Entry;
use crate::mme::load::{ContainerPlugins, LoadPlan, OnTimeout};
use crate::mme::load_request::{LoadRequest, parse_load_request};
use crate::mme::registry::{LoadedModel, not_loaded};
use crate::pipeline::Request;
use crate::plugins::host::model_plugins::ModelPluginPolicy;
use crate::protocol::tensor_data::write_json_string;

/// `POST /models`: `{"model_name": "<name>", "url": "<path>"}`. The load itself is
/// [`crate::mme::load`]; here: the body, the count, the status.
pub async fn load<E: Engine>(call: Call<'_, E>) -> Result<Response<ResponseBody>, ApiError> {
    let (state, invocation) = (call.state, call.invocation());
    let LoadRequest {
        model_name: name,
        url,
    } = parse_load_request(&call.body).map_err(ApiError::bad_request)?;
    let plan = LoadPlan {
        name: name.clone(),
        url,
        target: invocation.target_model.clone(),
    };
    let loaded = mme::load::load(
        &state.registry,
        &state.engine,
        state.sessions.as_ref(),
        plan,
        &container_plugins(state),
        state.config.core.model_load_timeout,
        OnTimeout::Undo,
    )
    .await;
    state.metrics.model_loaded(outcome(&loaded));
    match loaded {
        Ok(()) => Ok(Response::new(ResponseBody::empty())),
        Err(failure) => {
            let answer = load_failed(state, failure).await;
            forget_metrics(state, &name);
            Err(answer)
        }
    }
}

/// Drops the metric series of `name` when no model of that name is loaded, loading or
/// unloading any more, and those of plugins no loaded model or the container has: `/metrics`
/// holds series only for what exists (10,000 names loaded and unloaded grew it to 3 MB).
fn forget_metrics<E: Engine>(state: &AppState<E>, name: &str) {
    if state.registry.contains(name) {
        return;
    }
    let mut plugins = state.registry.plugin_names();
    if let Some(host) = state.plugins.load_full() {
        plugins.extend(host.plugins().map(|plugin| plugin.name.to_string()));
    }
    state
        .metrics
        .forget_model(name, |plugin| plugins.contains(plugin));
}

/// The container's plugins as a load meets them: what its manifest lets a model artifact's
/// own plugins do (the defaults when there is none; under Secure Mode held to the platform's
/// policy), and its adapters, which serve and check a model whose artifact brings none.
fn container_plugins<E: Engine>(state: &AppState<E>) -> ContainerPlugins {
    let host = state.plugins.load_full();
    let mut policy: ModelPluginPolicy = host
        .as_ref()
        .map(|host| host.model_policy().clone())
        .unwrap_or_default();
    if let Some(secure) = &state.config.artifacts.secure_mode {
        crate::plugins::host::secure_mode::hold_model_policy(&mut policy, secure);
    }
    ContainerPlugins { policy, host }
}

/// Loads again, before the endpoint serves, the models a serving process that ended abnormally
/// had loaded (its journal, [`crate::mme::journal`]), all at once, each with its plugins and
/// under its target name, as its load call asked. A model that cannot be loaded now is logged
/// and left out; the others serve. A load still running after the load time-out goes on (it
/// serves once it finishes) while the endpoint starts serving the others.
pub async fn restore<E: Engine>(state: &Arc<AppState<E>>, models: Vec<Entry>) {
    let started = std::time::Instant::now();
    let count = models.len();
    let loads: Vec<_> = models
        .into_iter()
        .map(|entry| {
            let state = Arc::clone(state);
            tokio::spawn(async move {
                let plan = LoadPlan {
                    name: entry.name.clone(),
                    url: entry.url,
                    target: Some(entry.target),
                };
                let loaded = mme::load::load(
                    &state.registry,
                    &state.engine,
                    state.sessions.as_ref(),
                    plan,
                    &container_plugins(&state),
                    state.config.core.model_load_timeout,
                    OnTimeout::KeepLoading,
                )
                .await;
                let Err(why) = loaded else {
                    return true;
                };
                tracing::error!(
                    model = entry.name,
                    why = %why,
                    "a model loaded before the restart is not loaded again (yet)"
                );
                false
            })
        })
        .collect();
    let mut restored = 0;
    for load in loads {
        restored += usize::from(load.await.unwrap_or(false));
    }
    tracing::info!(
        restored,
        of = count,
        seconds = started.elapsed().as_secs_f64(),
        "loaded again the models the previous serving process had"
    );
}

/// `GET /models[?next_page_token=...]`: the ready models, a page at a time.
pub fn list<E: Engine>(
    state: &AppState<E>,
    query: Option<&str>,
) -> Result<Response<ResponseBody>, ApiError> {
    let token = query.and_then(|q| {
        q.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == "next_page_token")
            .map(|(_, value)| value)
    });
    let (models, next) = state.registry.list(token, state.config.http.list_page_size);
    let mut json = Vec::with_capacity(64 + models.len() * 96);
    json.extend_from_slice(b"{\"models\":[");
    for (index, model) in models.iter().enumerate() {
        if index > 0 {
            json.push(b',');
        }
        write_model(&mut json, model);
    }
    json.push(b']');
    if let Some(next) = next {
        json.extend_from_slice(b",\"nextPageToken\":");
        write_json_string(&mut json, &next);
    }
    json.push(b'}');
    Ok(json_response(json))
}

/// `GET /models/{name}`.
pub fn get<E: Engine>(state: &AppState<E>, name: &str) -> Result<Response<ResponseBody>, ApiError> {
    let model = state
        .registry
        .get(name)
        .ok_or_else(|| ApiError::from(not_loaded(name)))?;
    let mut json = Vec::with_capacity(128);
    write_model(&mut json, &model);
    Ok(json_response(json))
}

/// The model loaded under the url's `name` (404 when none is), refused (400) when
/// `X-Amzn-SageMaker-Target-Model` names another model than the one loaded under the name, as
/// Triton's newest frontend does; without the header, the model loaded under the name is meant.
pub fn loaded<E>(
    state: &AppState<E>,
    name: &str,
    headers: &http::HeaderMap,
) -> Result<LoadedModel, ApiError> {
    let model = state
        .registry
        .get(name)
        .ok_or_else(|| ApiError::from(not_loaded(name)))?;
    check_target(&model, &Invocation::from_headers(headers))?;
    Ok(model)
}

fn check_target(model: &LoadedModel, invocation: &Invocation) -> Result<(), ApiError> {
    match &invocation.target_model {
        Some(target) if *target != model.target => Err(ApiError::wrong_target(target, &model.name)),
        _ => Ok(()),
    }
}

/// `DELETE /models/{name}`.
pub async fn unload<E: Engine>(call: Call<'_, E>) -> Result<Response<ResponseBody>, ApiError> {
    let (state, name) = (call.state, call.name.as_str());
    if let Some(model) = &state.registry.get(name) {
        check_target(model, &call.invocation())?;
    }
    let unloaded = mme::load::unload(
        &state.registry,
        &state.engine,
        state.sessions.as_ref(),
        name,
    )
    .await;
    state.metrics.model_unloaded(outcome(&unloaded));
    unloaded?;
    forget_metrics(state, name);
    Ok(Response::new(ResponseBody::empty()))
}

/// `POST /models/{name}/invoke`: inference on a model loaded through `/models` (the router
/// found it, and its session's turn when it has one).
pub async fn invoke<E: Engine>(call: Call<'_, E>) -> Result<Response<ResponseBody>, ApiError> {
    let invocation = call.invocation();
    let model = call
        .model
        .expect("the router finds the loaded model of an invoke");
    // A model that brought plugins uses them; the others use the container's.
    let plugins = model.plugins.or_else(|| call.state.plugins.load_full());
    let request = Request {
        route: InferRoute::Invoke.path(),
        model: &model.target,
        invocation: &invocation,
        headers: &call.parts.headers,
        body: call.body,
        session: call.session,
    };
    infer(call.state, InferRoute::Invoke, plugins, request).await
}

fn outcome<T, E>(result: &Result<T, E>) -> Outcome {
    if result.is_ok() {
        Outcome::Success
    } else {
        Outcome::Failure
    }
}

fn write_model(out: &mut Vec<u8>, model: &LoadedModel) {
    out.extend_from_slice(b"{\"modelName\":");
    write_json_string(out, &model.name);
    out.extend_from_slice(b",\"modelUrl\":");
    write_json_string(out, &model.repository.to_string_lossy());
    out.push(b'}');
}

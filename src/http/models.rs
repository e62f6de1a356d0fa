//! The multi-model endpoint routes: `POST /models` (load), `GET /models` (list),
//! `GET /models/{name}`, `DELETE /models/{name}` (unload) and `POST /models/{name}/invoke`.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, header};

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use super::invocations::{InferRoute, infer};
use crate::engine::Engine;
use crate::engine::ErrorCode;
use crate::invocation::Invocation;
use crate::metrics::Outcome;
use crate::mme::journal::Entry;
use crate::mme::load_request::{LoadRequest, parse_load_request};
use crate::mme::registry::{LoadedModel, MmeError, not_loaded};
use crate::plugins::PluginHost;
use crate::protocol::tensor_data::write_json_string;

/// `POST /models`: `{"model_name": "<name>", "url": "<path>"}`.
pub async fn load<E: Engine>(
    state: &AppState<E>,
    invocation: &Invocation,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let LoadRequest {
        model_name: name,
        url,
    } = parse_load_request(&body).map_err(ApiError::bad_request)?;
    let plugins = model_plugins(state, &url).await?;
    // The load runs to the end even if the client goes away: a half-done load would leave the
    // name reserved and the repository registered.
    let (registry, engine) = (Arc::clone(&state.registry), state.engine.clone());
    let target = invocation.target_model.clone();
    let mut loading = {
        let name = name.clone();
        tokio::spawn(async move {
            registry
                .load(&engine, &name, &url, target.as_deref(), plugins)
                .await
        })
    };
    let timeout = state.config.model_load_timeout;
    let loaded = match tokio::time::timeout(timeout, &mut loading).await {
        Ok(joined) => {
            joined.unwrap_or_else(|e| Err(MmeError::Internal(format!("the load task failed: {e}"))))
        }
        Err(_) => {
            // The core cannot abandon a load, so the client is told now and the load is
            // undone when the core finishes it; until then the name stays reserved (409).
            undo_when_loaded(state, name.clone(), loading);
            state.metrics.model_loaded(Outcome::Failure);
            return Err(ApiError::new(
                http::StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "model {name} did not load within {} s; the load is abandoned and undone \
                     when the core finishes it",
                    timeout.as_secs()
                ),
            ));
        }
    };
    state.metrics.model_loaded(outcome(&loaded));
    match loaded {
        Ok(()) => Ok(Response::new(ResponseBody::empty())),
        Err(MmeError::Engine(error)) if error.code == ErrorCode::AlreadyExists => {
            Err(ApiError::new(http::StatusCode::CONFLICT, error.message))
        }
        Err(MmeError::Engine(error)) => {
            let oom = state.is_out_of_memory(&error.message).await;
            Err(ApiError::bad_request_or_oom(error.message, oom))
        }
        Err(other) => Err(other.into()),
    }
}

/// Loads again, before the endpoint serves, the models a serving process that ended abnormally
/// had loaded (its journal, [`crate::mme::journal`]), all at once, each with its plugins and
/// under its target name, as its load call asked. A model that cannot be loaded now is logged
/// and left out; the others serve.
pub async fn restore<E: Engine>(state: &Arc<AppState<E>>, models: Vec<Entry>) {
    let started = std::time::Instant::now();
    let count = models.len();
    let loads: Vec<_> = models
        .into_iter()
        .map(|entry| {
            let state = Arc::clone(state);
            tokio::spawn(async move {
                let why = match restore_one(&state, &entry).await {
                    Ok(()) => return true,
                    Err(why) => why,
                };
                tracing::error!(
                    model = entry.name,
                    why,
                    "a model loaded before the restart is not loaded again"
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

/// Loads one model of [`restore`]. A load still running after the load timeout goes on (it
/// serves once it finishes) while the endpoint starts serving the others.
async fn restore_one<E: Engine>(state: &AppState<E>, entry: &Entry) -> Result<(), String> {
    let plugins = model_plugins(state, &entry.url)
        .await
        .map_err(|e| e.message)?;
    let (registry, engine, entry) = (
        Arc::clone(&state.registry),
        state.engine.clone(),
        entry.clone(),
    );
    let mut loading = tokio::spawn(async move {
        registry
            .load(
                &engine,
                &entry.name,
                &entry.url,
                Some(&entry.target),
                plugins,
            )
            .await
    });
    match tokio::time::timeout(state.config.model_load_timeout, &mut loading).await {
        Ok(Ok(loaded)) => loaded.map_err(|e| ApiError::from(e).message),
        Ok(Err(error)) => Err(format!("the load task failed: {error}")),
        Err(_) => Err("still loading after the load timeout; it serves once loaded".into()),
    }
}

/// The plugins the artifact at `url` brings, loaded under the container manifest's policy
/// (the defaults when there is none): a 400 naming the plugin when one cannot be used, before
/// anything reaches the engine.
async fn model_plugins<E: Engine>(
    state: &AppState<E>,
    url: &str,
) -> Result<Option<Arc<PluginHost>>, ApiError> {
    // The artifact's folder is looked at off the serving threads (a hung file system costs
    // this load an error, not the endpoint).
    let (registry, owned_url) = (Arc::clone(&state.registry), url.to_owned());
    let folder = crate::files::off_thread(std::path::Path::new(url), move || {
        registry.model_folder(&owned_url)
    })
    .await
    .map_err(|e| ApiError::bad_request(e.to_string()))??;
    let policy = state
        .plugins
        .load_full()
        .map(|host| host.model_policy().clone())
        .unwrap_or_default();
    let host = crate::plugins::model_plugins::load(&folder, &policy)
        .await
        .map_err(ApiError::bad_request)?;
    Ok(host.map(Arc::new))
}

/// After a load timed out: waits for the load task and unloads the model if the load succeeded
/// after all, so the endpoint ends as the client was told (not loaded).
fn undo_when_loaded<E: Engine>(
    state: &AppState<E>,
    name: String,
    loading: tokio::task::JoinHandle<Result<(), MmeError>>,
) {
    let (registry, engine) = (Arc::clone(&state.registry), state.engine.clone());
    tokio::spawn(async move {
        if let Ok(Ok(())) = loading.await {
            match registry.unload(&engine, &name).await {
                Ok(()) => {
                    tracing::warn!(model = name, "undid a load that finished after its timeout")
                }
                Err(error) => {
                    tracing::error!(model = name, %error, "undoing a timed-out load failed")
                }
            }
        }
    });
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
    let (models, next) = state.registry.list(token, state.config.list_page_size);
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

/// `DELETE /models/{name}`.
pub async fn unload<E: Engine>(
    state: &AppState<E>,
    name: &str,
) -> Result<Response<ResponseBody>, ApiError> {
    // As for loads: the unload finishes even if the client goes away.
    let (registry, engine, name) = (
        Arc::clone(&state.registry),
        state.engine.clone(),
        name.to_owned(),
    );
    let unloaded = tokio::spawn(async move { registry.unload(&engine, &name).await })
        .await
        .unwrap_or_else(|e| Err(MmeError::Internal(format!("the unload task failed: {e}"))));
    state.metrics.model_unloaded(outcome(&unloaded));
    unloaded?;
    Ok(Response::new(ResponseBody::empty()))
}

/// `POST /models/{name}/invoke`: inference on a model loaded through `/models`.
pub async fn invoke<E: Engine>(
    state: &AppState<E>,
    name: &str,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let model = state
        .registry
        .get(name)
        .ok_or_else(|| ApiError::from(not_loaded(name)))?;
    let route = InferRoute::Invoke;
    // A model that brought plugins uses them; the others use the container's.
    let plugins = model.plugins.or_else(|| state.plugins.load_full());
    infer(
        state,
        route,
        &model.target,
        plugins,
        invocation,
        headers,
        body,
    )
    .await
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

fn json_response(json: Vec<u8>) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::full(json));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

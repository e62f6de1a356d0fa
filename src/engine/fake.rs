//! A scripted [`Engine`] for millisecond unit tests of the layers above it (`pipeline`, `mme`):
//! models with the metadata and answers a test gives them, loads that take the time and end the
//! way it says, and a record of the calls made. It models what those layers rely on in Triton
//! (an unknown model is `NotFound`, a repository registered twice for one model is
//! `AlreadyExists`, an unload leaves the model `unloaded` in the index) and nothing else; the
//! integration tests run the same layers against the real core.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_core::Stream;
use futures_util::StreamExt;

use super::{
    Engine, EngineError, ErrorCode, HealthCheck, InFlight, InferRequest, InferResponse, ModelState,
};

/// What a fake model answers a request with: its responses, in order (an error ends them).
pub type Answer =
    Arc<dyn Fn(&InferRequest) -> Vec<Result<InferResponse, EngineError>> + Send + Sync>;

/// A model the fake engine serves.
#[derive(Clone)]
pub struct FakeModel {
    /// Its metadata, as Triton's `ModelMetadata` writes it (generate reads the inputs).
    pub metadata: serde_json::Value,
    /// Whether it may send any number of responses per request.
    pub decoupled: bool,
    /// Its answer to each request.
    pub answer: Answer,
    /// How long it waits before each response.
    pub delay: Duration,
    /// Whether it has sequence batching.
    pub stateful: bool,
    /// Its configuration as the core would give it; `None`: one made of its metadata (every
    /// input required) and `stateful` (Triton's default idle limit).
    pub config: Option<serde_json::Value>,
}

impl FakeModel {
    /// A model with `metadata` answering with `answer`, at once and not decoupled.
    pub fn new(
        metadata: serde_json::Value,
        answer: impl Fn(&InferRequest) -> Vec<Result<InferResponse, EngineError>>
        + Send
        + Sync
        + 'static,
    ) -> FakeModel {
        FakeModel {
            metadata,
            decoupled: false,
            answer: Arc::new(answer),
            delay: Duration::ZERO,
            stateful: false,
            config: None,
        }
    }

    /// The same model, decoupled.
    pub fn decoupled(mut self) -> FakeModel {
        self.decoupled = true;
        self
    }
}

/// How a load of one model goes.
#[derive(Debug, Clone, Default)]
pub struct LoadScript {
    /// When set, the load waits until this is notified (so a test can act while it loads).
    pub gate: Option<Arc<tokio::sync::Notify>>,
    /// Its failure, if it fails.
    pub error: Option<EngineError>,
    /// Whether an unload leaves the model in the index as `Unloading` for good (a model whose
    /// unload never finishes).
    pub never_unloads: bool,
}

#[derive(Default)]
struct State {
    models: HashMap<String, FakeModel>,
    loads: HashMap<String, LoadScript>,
    states: HashMap<String, ModelState>,
    repositories: HashMap<PathBuf, String>,
    calls: Vec<String>,
}

/// The scripted engine; clones share one state.
#[derive(Clone, Default)]
pub struct FakeEngine {
    state: Arc<Mutex<State>>,
}

impl FakeEngine {
    /// An engine with no models.
    pub fn new() -> FakeEngine {
        FakeEngine::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves `model` as `name`, ready (as a single-model endpoint's default model is).
    pub fn with_model(self, name: &str, model: FakeModel) -> FakeEngine {
        {
            let mut state = self.state();
            state.models.insert(name.to_owned(), model);
            state.states.insert(name.to_owned(), ModelState::Ready);
        }
        self
    }

    /// Loads of `name` go as `script` says; a successful one serves `model` under that name.
    pub fn on_load(self, name: &str, script: LoadScript, model: Option<FakeModel>) -> FakeEngine {
        {
            let mut state = self.state();
            state.loads.insert(name.to_owned(), script);
            if let Some(model) = model {
                state.models.insert(name.to_owned(), model);
            }
        }
        self
    }

    /// The calls made so far that change the engine (`register <model>`, `load <model>`,
    /// `unload <model>`, `unregister <model>`), in order.
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }

    fn model(&self, name: &str) -> Result<FakeModel, EngineError> {
        let state = self.state();
        let ready = matches!(state.states.get(name), Some(ModelState::Ready));
        state
            .models
            .get(name)
            .filter(|_| ready)
            .cloned()
            .ok_or_else(|| {
                EngineError::new(
                    ErrorCode::NotFound,
                    format!("Request for unknown model: '{name}' is not found"),
                )
            })
    }
}

impl Engine for FakeEngine {
    type Responses = Pin<Box<dyn Stream<Item = Result<InferResponse, EngineError>> + Send>>;

    fn health(&self, _check: HealthCheck) -> Result<(), String> {
        Ok(())
    }

    fn is_decoupled(&self, model: &str) -> Result<bool, EngineError> {
        Ok(self.model(model)?.decoupled)
    }

    fn max_batch_size(&self, model: &str) -> Result<u64, EngineError> {
        Ok(self.model_config(model)?["max_batch_size"]
            .as_u64()
            .unwrap_or(0))
    }

    fn model_metadata(&self, model: &str) -> Result<serde_json::Value, EngineError> {
        Ok(self.model(model)?.metadata)
    }

    fn model_config(&self, model: &str) -> Result<serde_json::Value, EngineError> {
        let model = self.model(model)?;
        if let Some(config) = model.config {
            return Ok(config);
        }
        let inputs: Vec<serde_json::Value> = model.metadata["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|input| serde_json::json!({"name": input["name"], "optional": false}))
            .collect();
        let mut config = serde_json::json!({ "input": inputs });
        if model.stateful {
            // The direct strategy over 256 batch rows: 256 sequences at once.
            config["sequence_batching"] = serde_json::json!({});
            config["max_batch_size"] = serde_json::json!(256);
        }
        Ok(config)
    }

    fn model_state(&self, model: &str) -> Result<Option<ModelState>, EngineError> {
        Ok(self.state().states.get(model).cloned())
    }

    fn in_flight(&self) -> InFlight {
        InFlight::default()
    }

    fn infer(&self, request: InferRequest) -> Result<Self::Responses, EngineError> {
        let model = self.model(&request.model_name)?;
        request.check_inputs()?;
        let mut responses = (model.answer)(&request);
        if let Some(end) = responses.iter().position(Result::is_err) {
            responses.truncate(end + 1);
        }
        let delay = model.delay;
        Ok(Box::pin(futures_util::stream::iter(responses).then(
            move |response| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                response
            },
        )))
    }

    async fn load_model(&self, model: &str) -> Result<(), EngineError> {
        let script = {
            let mut state = self.state();
            state.calls.push(format!("load {model}"));
            state.states.insert(model.to_owned(), ModelState::Loading);
            state.loads.get(model).cloned().unwrap_or_default()
        };
        if let Some(gate) = &script.gate {
            gate.notified().await;
        }
        let outcome = match script.error {
            Some(error) => Err(error),
            None => Ok(()),
        };
        let now = match &outcome {
            Ok(()) => ModelState::Ready,
            Err(error) => ModelState::Unavailable(error.message.clone()),
        };
        self.state().states.insert(model.to_owned(), now);
        outcome
    }

    async fn reload_with_config(&self, model: &str, config: String) -> Result<(), EngineError> {
        let config: serde_json::Value = serde_json::from_str(&config)
            .map_err(|e| EngineError::new(ErrorCode::InvalidArg, e.to_string()))?;
        let mut state = self.state();
        state.calls.push(format!("reload {model}"));
        let served = state.models.get_mut(model).ok_or_else(|| {
            EngineError::new(
                ErrorCode::NotFound,
                format!("model '{model}' is not loaded"),
            )
        })?;
        served.config = Some(config);
        Ok(())
    }

    async fn unload_model(&self, model: &str) -> Result<(), EngineError> {
        let mut state = self.state();
        state.calls.push(format!("unload {model}"));
        let never = state.loads.get(model).is_some_and(|s| s.never_unloads);
        let now = if never {
            ModelState::Unloading
        } else {
            ModelState::Unavailable("unloaded".into())
        };
        state.states.insert(model.to_owned(), now);
        Ok(())
    }

    async fn register_repository(
        &self,
        repository: &Path,
        mapping: &[(String, String)],
    ) -> Result<(), EngineError> {
        let model = mapping.first().map_or("", |(_, name)| name.as_str());
        let mut state = self.state();
        state.calls.push(format!("register {model}"));
        if state.repositories.values().any(|m| m == model) {
            return Err(EngineError::new(
                ErrorCode::AlreadyExists,
                format!("model '{model}' is already registered"),
            ));
        }
        state
            .repositories
            .insert(repository.to_path_buf(), model.to_owned());
        Ok(())
    }

    async fn unregister_repository(&self, repository: &Path) -> Result<(), EngineError> {
        let mut state = self.state();
        let model = state.repositories.remove(repository).unwrap_or_default();
        state.calls.push(format!("unregister {model}"));
        Ok(())
    }
}

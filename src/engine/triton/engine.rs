//! [`TritonEngine`]: the [`Engine`] trait over a running Triton [`Server`]. Blocking calls go to
//! tokio's blocking pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use super::inference::ResponseStream;
use super::recovery::Recovery;
use super::server::{Server, TransactionPolicy};
use crate::engine::service::{Engine, HealthCheck, ModelState};
use crate::engine::{EngineError, ErrorCode, InferRequest, InferResponse};

/// What requests need to know of a loaded model.
#[derive(Debug, Clone, Copy)]
struct ModelFacts {
    /// Its transaction policy is decoupled (any number of responses a request).
    decoupled: bool,
    /// How many inputs its configuration declares.
    inputs: usize,
    /// How many outputs its configuration declares.
    outputs: usize,
    /// Its first dimension is the batch (`max_batch_size` above 0).
    batched: bool,
    /// Its `max_batch_size` (0: it does not batch).
    max_batch_size: u64,
}

/// The Triton core behind the engine interface. Cheap to clone.
#[derive(Clone)]
pub struct TritonEngine {
    server: Arc<Server>,
    /// What requests need to know of each loaded model, asked of the core once per load
    /// instead of once per request; loads and unloads through this engine forget the model's
    /// entry.
    facts: Arc<RwLock<HashMap<String, ModelFacts>>>,
    /// Models whose python backend process died ([`super::recovery`]).
    recovery: Arc<Recovery>,
}

impl TritonEngine {
    /// The engine over a started core; starts the recovery of models whose process dies.
    pub fn new(server: Server) -> TritonEngine {
        let server = Arc::new(server);
        TritonEngine {
            recovery: Recovery::start(&server),
            server,
            facts: Arc::default(),
        }
    }

    /// Counts a recovery of a model whose process died as failed when it has not finished
    /// within `deadline` (default 600 s).
    pub fn with_reload_deadline(self, deadline: std::time::Duration) -> TritonEngine {
        self.recovery.set_deadline(deadline);
        self
    }

    /// Why a model whose process died cannot be brought back in this process, if one cannot
    /// (every reload failed, or one has not finished within the deadline).
    pub fn cannot_recover(&self) -> Option<String> {
        self.recovery.cannot_recover()
    }

    fn forget(&self, model: &str) {
        self.facts
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(model);
    }

    /// What requests need to know of `model`, from the cache or (once per load) the core.
    /// Why the core is not `what` (live or ready), naming each loaded model that is not ready
    /// and its state, e.g. one whose process died while the core has not yet said so to
    /// trident's recovery (the core counts every loaded model in its readiness).
    fn not_healthy_why(&self, what: &str) -> String {
        let waiting: Vec<String> = self
            .server
            .model_index(false)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|entry| {
                let state = entry.state.as_deref().unwrap_or_default();
                let reason = entry.reason.as_deref().unwrap_or_default();
                // An unloaded model is not counted by the core.
                if state == "READY" || state.is_empty() || reason == "unloaded" {
                    return None;
                }
                let reason = if reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({reason})")
                };
                Some(format!("model {} is {state}{reason}", entry.name))
            })
            .collect();
        if waiting.is_empty() {
            format!("server is not {what}")
        } else {
            format!("server is not {what}: {}", waiting.join("; "))
        }
    }

    fn facts(&self, model: &str) -> Result<ModelFacts, EngineError> {
        let known = self
            .facts
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(model)
            .copied();
        if let Some(facts) = known {
            return Ok(facts);
        }
        let unknown = |error| self.unknown_is_not_found(model, error);
        let policy = self
            .server
            .model_transaction_policy(model, None)
            .map_err(unknown)?;
        let config = self.server.model_config(model, None).map_err(unknown)?;
        // A configuration without a list declares nothing the check could hold a request to.
        let count = |key: &str| config[key].as_array().map_or(usize::MAX, Vec::len);
        let facts = ModelFacts {
            decoupled: policy == TransactionPolicy::Decoupled,
            inputs: count("input"),
            outputs: count("output"),
            batched: config["max_batch_size"].as_u64().unwrap_or(0) > 0,
            max_batch_size: config["max_batch_size"].as_u64().unwrap_or(0),
        };
        self.facts
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(model.to_owned(), facts);
        Ok(facts)
    }

    /// `error`, from asking the core about `model`, as a client should read it: the 2.51 core
    /// calls an unknown model an invalid argument, and SageMaker clients expect Triton's HTTP
    /// answer for it, 404.
    fn unknown_is_not_found(&self, model: &str, error: EngineError) -> EngineError {
        if error.code != ErrorCode::NotFound
            && !self.server.model_is_ready(model, None).unwrap_or(false)
        {
            return EngineError::new(ErrorCode::NotFound, error.message);
        }
        error
    }

    /// Refuses a request naming more inputs or outputs than its model declares (`facts`),
    /// before Triton builds an object for each: a 6 MB body can name 100,000 one-element inputs
    /// (or outputs), which cost the core seconds and about 1.5 KB each before it refuses them
    /// itself.
    fn check_counts(request: &InferRequest, facts: ModelFacts) -> Result<(), EngineError> {
        for (what, named, declared) in [
            ("inputs", request.inputs.len(), facts.inputs),
            ("outputs", request.requested_outputs.len(), facts.outputs),
        ] {
            if named > declared {
                return Err(EngineError::new(
                    ErrorCode::InvalidArg,
                    format!(
                        "the request names {named} {what}, but model '{}' declares {declared}",
                        request.model_name
                    ),
                ));
            }
        }
        Ok(())
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Server) -> Result<T, EngineError> + Send + 'static,
    ) -> Result<T, EngineError> {
        let server = Arc::clone(&self.server);
        tokio::task::spawn_blocking(move || work(&server))
            .await
            .unwrap_or_else(|e| {
                Err(EngineError::new(
                    ErrorCode::Internal,
                    format!("engine task failed: {e}"),
                ))
            })
    }
}

impl Engine for TritonEngine {
    type Responses = TritonResponses;

    fn in_flight(&self) -> crate::engine::service::InFlight {
        super::counters::in_flight()
    }

    fn health(&self, check: HealthCheck) -> Result<(), String> {
        self.recovery.health()?;
        let (healthy, what) = match check {
            HealthCheck::Live => (self.server.is_live(), "live"),
            HealthCheck::Ready => (self.server.is_ready(), "ready"),
        };
        match healthy {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.not_healthy_why(what)),
            Err(error) => Err(error.message),
        }
    }

    fn is_decoupled(&self, model: &str) -> Result<bool, EngineError> {
        self.facts(model).map(|facts| facts.decoupled)
    }

    fn max_batch_size(&self, model: &str) -> Result<u64, EngineError> {
        self.facts(model).map(|facts| facts.max_batch_size)
    }

    fn model_metadata(&self, model: &str) -> Result<serde_json::Value, EngineError> {
        self.server.model_metadata(model, None)
    }

    fn model_config(&self, model: &str) -> Result<serde_json::Value, EngineError> {
        // Read for a session's NEW_SESSION among others: an unknown model is 404 there too, as
        // the plain request is (issue 43, case 13).
        self.server
            .model_config(model, None)
            .map_err(|error| self.unknown_is_not_found(model, error))
    }

    fn model_state(&self, model: &str) -> Result<Option<ModelState>, EngineError> {
        Ok(self
            .server
            .model_index(false)?
            .into_iter()
            .find(|entry| entry.name == model)
            .map(|entry| {
                ModelState::from_index(
                    entry.state.as_deref().unwrap_or_default(),
                    entry.reason.as_deref().unwrap_or_default(),
                )
            }))
    }

    fn infer(&self, request: InferRequest) -> Result<TritonResponses, EngineError> {
        // Whatever produced the request (a codec, a plugin), its inputs pass one rule here.
        request.check_inputs()?;
        // A model the core cannot describe is left to the core, which words that error.
        let facts = self.facts(&request.model_name).ok();
        if let Some(facts) = facts {
            Self::check_counts(&request, facts)?;
        }
        let model = request.model_name.clone();
        let batched = facts.is_some_and(|facts| facts.batched);
        let stream = self.server.infer(request, batched)?;
        Ok(TritonResponses {
            stream,
            model,
            recovery: Arc::clone(&self.recovery),
        })
    }

    async fn load_model(&self, model: &str) -> Result<(), EngineError> {
        self.forget(model);
        let (model, recovery) = (model.to_owned(), Arc::clone(&self.recovery));
        self.blocking(move |s| {
            // Not while a recovery of the same model runs.
            let model_lock = recovery.model_lock(&model);
            let _held = model_lock.lock().unwrap_or_else(|p| p.into_inner());
            recovery.loaded_on_purpose(&model);
            let loaded = s.load_model(&model);
            recovery.learn_processes(s);
            loaded
        })
        .await
    }

    fn end_abandoned_load(&self, model: &str) -> usize {
        let mut ended = 0;
        for stub in crate::engine::processes::live_stubs() {
            if !stub.serves(model) {
                continue;
            }
            let Some(pid) = rustix::process::Pid::from_raw(stub.pid.cast_signed()) else {
                continue;
            };
            match rustix::process::kill_process(pid, rustix::process::Signal::KILL) {
                Ok(()) => ended += 1,
                Err(error) => {
                    tracing::warn!(model, pid = stub.pid, %error, "cannot end a hung load's process");
                }
            }
        }
        ended
    }

    async fn reload_with_config(&self, model: &str, config: String) -> Result<(), EngineError> {
        self.forget(model);
        let (model, recovery) = (model.to_owned(), Arc::clone(&self.recovery));
        self.blocking(move |s| {
            // Not while a recovery of the same model runs; the new instances are wanted.
            let model_lock = recovery.model_lock(&model);
            let _held = model_lock.lock().unwrap_or_else(|p| p.into_inner());
            recovery.reloading_on_purpose(&model);
            let reloaded = s.reload_model_with_config(&model, &config);
            recovery.reloaded_on_purpose(&model, s);
            reloaded
        })
        .await
    }

    async fn unload_model(&self, model: &str) -> Result<(), EngineError> {
        self.forget(model);
        // Marked first, so a recovery that holds the lock now stops before loading it again.
        self.recovery.unloaded_on_purpose(model);
        let (model, recovery) = (model.to_owned(), Arc::clone(&self.recovery));
        self.blocking(move |s| {
            let model_lock = recovery.model_lock(&model);
            let held = model_lock.lock().unwrap_or_else(|p| p.into_inner());
            recovery.unloaded_on_purpose(&model);
            let unloaded = s.unload_model(&model, true);
            drop(held);
            drop(model_lock);
            recovery.forget_lock(&model);
            unloaded
        })
        .await
    }

    async fn register_repository(
        &self,
        repository: &Path,
        mapping: &[(String, String)],
    ) -> Result<(), EngineError> {
        let (repository, mapping) = (repository.to_path_buf(), mapping.to_vec());
        self.blocking(move |s| {
            let pairs: Vec<(&str, &str)> = mapping
                .iter()
                .map(|(folder, name)| (folder.as_str(), name.as_str()))
                .collect();
            s.register_model_repository(&repository, &pairs)
        })
        .await
    }

    async fn unregister_repository(&self, repository: &Path) -> Result<(), EngineError> {
        let repository: PathBuf = repository.to_path_buf();
        self.blocking(move |s| s.unregister_model_repository(&repository))
            .await
    }
}

/// The responses of one Triton inference. An error saying the model's process died starts its
/// recovery.
pub struct TritonResponses {
    stream: ResponseStream,
    model: String,
    recovery: Arc<Recovery>,
}

impl futures_core::Stream for TritonResponses {
    type Item = Result<InferResponse, EngineError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let poll = Pin::new(&mut self.stream).poll_next(cx);
        if let Poll::Ready(Some(Err(error))) = &poll {
            self.recovery
                .on_inference_error(&self.model, &error.message);
        }
        poll
    }
}

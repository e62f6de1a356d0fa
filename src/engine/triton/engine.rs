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

/// The Triton core behind the engine interface. Cheap to clone.
#[derive(Clone)]
pub struct TritonEngine {
    server: Arc<Server>,
    /// Transaction policy per loaded model, asked once per load instead of once per request;
    /// loads and unloads through this engine forget the model's entry.
    decoupled: Arc<RwLock<HashMap<String, bool>>>,
    /// How many inputs and outputs each loaded model declares, read off its metadata once per
    /// load: a request naming more is refused before Triton builds an object for each;
    /// forgotten with `decoupled`.
    declared: Arc<RwLock<HashMap<String, (usize, usize)>>>,
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
            decoupled: Arc::default(),
            declared: Arc::default(),
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
        self.decoupled
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(model);
        self.declared
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(model);
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

    /// Refuses a request naming more inputs or outputs than its model declares, before Triton
    /// builds an object for each: a 6 MB body can name 100,000 one-element inputs (or outputs),
    /// which cost the core seconds and about 1.5 KB each before it refuses them itself. A model
    /// whose metadata cannot be read is left to the core, which words that error.
    fn check_counts(&self, request: &InferRequest) -> Result<(), EngineError> {
        let model = &request.model_name;
        let known = self
            .declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(model)
            .copied();
        let declared = match known {
            Some(declared) => declared,
            None => {
                let Ok(metadata) = self.server.model_metadata(model, None) else {
                    return Ok(());
                };
                let count = |key: &str| metadata[key].as_array().map(Vec::len);
                let (Some(inputs), Some(outputs)) = (count("inputs"), count("outputs")) else {
                    return Ok(());
                };
                self.declared
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(model.clone(), (inputs, outputs));
                (inputs, outputs)
            }
        };
        for (what, named, declared) in [
            ("inputs", request.inputs.len(), declared.0),
            ("outputs", request.requested_outputs.len(), declared.1),
        ] {
            if named > declared {
                return Err(EngineError::new(
                    ErrorCode::InvalidArg,
                    format!(
                        "the request names {named} {what}, but model '{model}' declares {declared}"
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
            Ok(false) => Err(format!("server is not {what}")),
            Err(error) => Err(error.message),
        }
    }

    fn is_decoupled(&self, model: &str) -> Result<bool, EngineError> {
        let known = self
            .decoupled
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(model)
            .copied();
        if let Some(decoupled) = known {
            return Ok(decoupled);
        }
        match self.server.model_transaction_policy(model, None) {
            Ok(policy) => {
                let decoupled = policy == TransactionPolicy::Decoupled;
                self.decoupled
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(model.to_owned(), decoupled);
                Ok(decoupled)
            }
            Err(error) => Err(self.unknown_is_not_found(model, error)),
        }
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
        self.check_counts(&request)?;
        let model = request.model_name.clone();
        let stream = self.server.infer(request)?;
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
        folder: &str,
        model: &str,
    ) -> Result<(), EngineError> {
        let (repository, folder, model) = (
            repository.to_path_buf(),
            folder.to_owned(),
            model.to_owned(),
        );
        self.blocking(move |s| s.register_model_repository(&repository, &[(&folder, &model)]))
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

//! [`TritonEngine`]: the [`Engine`] trait over a running Triton [`Server`]. Blocking calls go to
//! tokio's blocking pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use super::inference::ResponseStream;
use super::server::{Server, TransactionPolicy};
use crate::engine::service::{Engine, ModelState};
use crate::engine::{EngineError, ErrorCode, InferRequest, InferResponse};

/// The Triton core behind the engine interface. Cheap to clone.
#[derive(Clone)]
pub struct TritonEngine {
    server: Arc<Server>,
    /// Transaction policy per loaded model, asked once per load instead of once per request;
    /// loads and unloads through this engine forget the model's entry.
    decoupled: Arc<RwLock<HashMap<String, bool>>>,
}

impl TritonEngine {
    pub fn new(server: Server) -> TritonEngine {
        TritonEngine {
            server: Arc::new(server),
            decoupled: Arc::default(),
        }
    }

    fn forget(&self, model: &str) {
        self.decoupled
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(model);
    }

    /// The server underneath, for calls outside the engine interface.
    pub fn server(&self) -> &Server {
        &self.server
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

    fn is_live(&self) -> Result<bool, EngineError> {
        self.server.is_live()
    }

    fn is_ready(&self) -> Result<bool, EngineError> {
        self.server.is_ready()
    }

    fn model_is_ready(&self, model: &str) -> Result<bool, EngineError> {
        self.server.model_is_ready(model, None)
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
            // The 2.51 core calls an unknown model an invalid argument; SageMaker clients expect
            // Triton's HTTP answer for it, 404.
            Err(error) if !self.server.model_is_ready(model, None).unwrap_or(false) => {
                Err(EngineError::new(ErrorCode::NotFound, error.message))
            }
            Err(error) => Err(error),
        }
    }

    fn model_metadata(&self, model: &str) -> Result<serde_json::Value, EngineError> {
        self.server.model_metadata(model, None)
    }

    fn model_config(&self, model: &str) -> Result<serde_json::Value, EngineError> {
        self.server.model_config(model, None)
    }

    fn model_state(&self, model: &str) -> Result<Option<ModelState>, EngineError> {
        Ok(self
            .server
            .model_index(false)?
            .into_iter()
            .find(|entry| entry.name == model)
            .map(|entry| ModelState {
                state: entry.state.unwrap_or_default(),
                reason: entry.reason.unwrap_or_default(),
            }))
    }

    fn infer(&self, request: InferRequest) -> Result<TritonResponses, EngineError> {
        // Whatever produced the request (a codec, a plugin), its inputs pass one rule here.
        request.check_inputs()?;
        self.server.infer(request).map(TritonResponses)
    }

    async fn load_model(&self, model: &str) -> Result<(), EngineError> {
        self.forget(model);
        let model = model.to_owned();
        self.blocking(move |s| s.load_model(&model)).await
    }

    async fn unload_model(&self, model: &str) -> Result<(), EngineError> {
        self.forget(model);
        let model = model.to_owned();
        self.blocking(move |s| s.unload_model(&model, true)).await
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

/// The responses of one Triton inference.
pub struct TritonResponses(ResponseStream);

impl futures_core::Stream for TritonResponses {
    type Item = Result<InferResponse, EngineError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.0).poll_next(cx)
    }
}

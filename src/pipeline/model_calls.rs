//! The engine as a plugin's model calls reach it ([`ModelCaller`]): each call one request of
//! the named model, its one response; a decoupled model is refused as `/invocations` refuses it.
//! Dropping a call's future cancels its request in the core.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;

use super::DECOUPLED_REFUSED;
use crate::engine::{Engine, EngineError, ErrorCode, InferRequest, InferResponse};
use crate::plugins::runtime::model_calls::ModelCaller;

/// The engine, answering model calls.
pub struct EngineModels<E> {
    /// The engine the endpoint's models run on.
    pub engine: E,
}

impl<E: Engine> ModelCaller for EngineModels<E> {
    fn infer(
        &self,
        request: InferRequest,
    ) -> BoxFuture<'static, Result<InferResponse, EngineError>> {
        let engine = self.engine.clone();
        Box::pin(async move {
            if engine.is_decoupled(&request.model_name)? {
                return Err(EngineError::new(ErrorCode::Unsupported, DECOUPLED_REFUSED));
            }
            let mut responses = engine.infer(request)?;
            match responses.next().await {
                Some(answer) => answer,
                None => Err(EngineError::new(
                    ErrorCode::Internal,
                    "the model gave no response",
                )),
            }
        })
    }
}

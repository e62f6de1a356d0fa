//! trident's own types at the plugin boundary. The types `wit-bindgen` generates from `wit/`
//! stay inside `plugins`: the hooks ([`crate::plugins::PluginHost`]) take and give these, and the
//! conversions both ways live here, so the pipeline and the HTTP layer never see an interface
//! type and a change to the WIT files stops at this module.

use std::sync::Arc;

use super::model_calls::ModelCaller;
use super::store::CallFailure;
use crate::engine::InputTensor;
use crate::invocation::Invocation;
use crate::plugins::wit::bindings::types::{
    Header, Invocation as WitInvocation, PluginError, Reply,
};
use crate::sessions::SessionStore;

/// What a hook call gives: the plugin's value or its refusal, or how the call failed.
pub type HookResult<T> = Result<Result<T, Refusal>, CallFailure>;

/// A plugin's refusal of a request on purpose; each kind has its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400, with the plugin's message.
    BadRequest(String),
    /// 415, with the plugin's message.
    UnsupportedMediaType(String),
    /// 500, with the plugin's message (shown with the plugin's name).
    Internal(String),
}

/// A response adapter's reply: status, content type, headers and body, as the plugin wrote
/// them (the HTTP layer frames them and drops what trident owns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginReply {
    /// The HTTP status the plugin chose.
    pub status: u16,
    /// The body's content type.
    pub content_type: String,
    /// Headers, as name and value, in the plugin's order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// What a request adapter made of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum AdaptedRequest {
    /// Typed tensors, handed to the engine as they are, and the outputs to ask for (empty:
    /// all).
    Tensors {
        /// The model's inputs.
        inputs: Vec<InputTensor>,
        /// The outputs to return.
        outputs: Vec<String>,
    },
    /// A KServe v2 JSON body, decoded by trident.
    V2Json(Vec<u8>),
}

/// What a generate request adapter made of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptedGenerate {
    /// The request's inputs.
    pub inputs: GenerateInputs,
    /// `Some(true)`: stream; `Some(false)`: one answer; `None`: as the endpoint's inference
    /// type says.
    pub stream: Option<bool>,
}

/// A generate request's inputs, as a generate request adapter gives them.
#[derive(Debug, Clone, PartialEq)]
pub enum GenerateInputs {
    /// A generate body (a flat JSON object), decoded by the model's metadata.
    Json(Vec<u8>),
    /// Typed tensors, handed to the engine as they are.
    Tensors(Vec<InputTensor>),
}

/// Where an event is in its stream, as the stream adapter is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPosition {
    /// The same for every call of one stream, and unique to it.
    pub stream_id: String,
    /// When the stream started, in Unix seconds.
    pub created: u64,
    /// How many events came before this one (at the end: how many there were).
    pub index: u64,
}

/// The request as one plugin sees it (SageMaker's headers, the request headers its manifest
/// lets it see, the body), built once per plugin and request and shared by its calls, with the
/// store of the request's stateful session, if it has one.
#[derive(Clone)]
pub struct PluginInvocation {
    pub(in crate::plugins) wit: Arc<WitInvocation>,
    pub(in crate::plugins) session: Option<Arc<SessionStore>>,
    /// The most rows a request may carry for the target model, when it batches (its
    /// `max_batch_size`, times the requests the pipeline splits a batch into): the host's
    /// image and text primitives refuse a body of more before decoding it.
    pub(in crate::plugins) max_batch: Option<usize>,
    /// Who answers the plugin's model calls for this request (`trident:models/models`);
    /// `None` refuses them.
    pub(in crate::plugins) models: Option<Arc<dyn ModelCaller>>,
}

impl PluginInvocation {
    /// The request to `model` on `route` with `invocation`'s SageMaker headers, the request
    /// `headers` and `body`, as a plugin that may see `visible_headers` (lower-case names; a
    /// plugin's own list is [`crate::plugins::LoadedPlugin::headers`]) sees it; `session` is the
    /// store of its session (`trident:session/store`).
    pub fn new(
        route: &str,
        model: &str,
        invocation: &Invocation,
        headers: &http::HeaderMap,
        visible_headers: &[String],
        body: &[u8],
        session: Option<Arc<SessionStore>>,
    ) -> PluginInvocation {
        PluginInvocation {
            wit: Arc::new(crate::plugins::wit::convert::invocation_to_wit(
                route,
                model,
                invocation,
                headers,
                visible_headers,
                body,
            )),
            session,
            max_batch: None,
            models: None,
        }
    }

    /// The invocation, for a model given at most `max_batch` rows a request (from its
    /// `max_batch_size`; `None`: it does not batch, or it is not known).
    pub fn with_max_batch(mut self, max_batch: Option<usize>) -> PluginInvocation {
        self.max_batch = max_batch;
        self
    }

    /// The invocation, its plugin's model calls answered by `models`.
    pub fn with_models(mut self, models: Arc<dyn ModelCaller>) -> PluginInvocation {
        self.models = Some(models);
        self
    }
}

impl From<PluginError> for Refusal {
    fn from(error: PluginError) -> Refusal {
        match error {
            PluginError::BadRequest(m) => Refusal::BadRequest(m),
            PluginError::UnsupportedMediaType(m) => Refusal::UnsupportedMediaType(m),
            PluginError::Internal(m) => Refusal::Internal(m),
        }
    }
}

impl From<Reply> for PluginReply {
    fn from(reply: Reply) -> PluginReply {
        PluginReply {
            status: reply.status,
            content_type: reply.content_type,
            headers: reply
                .headers
                .into_iter()
                .map(|Header { name, value }| (name, value))
                .collect(),
            body: reply.body,
        }
    }
}

/// A hook's result in trident's types: the value converted with `value`, a refusal as a
/// [`Refusal`].
pub(in crate::plugins) fn converted<W, T>(
    result: Result<Result<W, PluginError>, CallFailure>,
    value: impl FnOnce(W) -> T,
) -> HookResult<T> {
    result.map(|outcome| outcome.map(value).map_err(Refusal::from))
}

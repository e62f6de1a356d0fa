//! What every handler gets and gives: a [`Call`] (a request that passed its route's rules) and
//! its [`Answer`]. Apart from the router (`routes.rs`), which imports the handlers, so that the
//! handlers never import the router back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use http::request::Parts;

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use crate::invocation::Invocation;
use crate::mme::registry::LoadedModel;
use crate::sessions::SessionTurn;

/// What a handler's future resolves to.
pub type Answer = Result<Response<ResponseBody>, ApiError>;

/// A handler's answer, to come.
pub type Reply<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// A request that passed its row's rules, as its handler gets it.
pub struct Call<'a, E> {
    /// The server.
    pub state: &'a Arc<AppState<E>>,
    /// The request's method, url, headers and extensions.
    pub parts: Parts,
    /// The body, read when the row reads one (else empty).
    pub body: Bytes,
    /// The url's `{name}` segment (empty when the pattern has none).
    pub name: String,
    /// The model loaded under `name`, on rows about a [`super::routes::ModelOf::Loaded`] model.
    pub model: Option<LoadedModel>,
    /// The session whose turn this request is, on rows that serve sessions.
    pub session: Option<SessionTurn>,
}

impl<E> Call<'_, E> {
    /// What SageMaker's headers say of the request.
    pub fn invocation(&self) -> Invocation {
        Invocation::from_headers(&self.parts.headers)
    }
}

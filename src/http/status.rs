//! Every error status trident answers, decided here from the domain errors and the refusals of
//! the routes: a handler says what went wrong (a constructor named for it, or a domain error),
//! and this file says which status that is. The listener's own limits (a head too large, 431,
//! in `head_size`; connections over the limit, in `listener`) are answered before a request
//! reaches the router. `error` frames the answer (`{"error": …}`, `Allow`, redaction).

use http::StatusCode;

use super::AppState;
use super::body::BodyError;
use super::error::ApiError;
use crate::engine::{Engine, EngineError, ErrorCode};
use crate::mme::load::LoadFailure;
use crate::mme::registry::MmeError;
use crate::pipeline::Failure;
use crate::plugins::{CallFailure, Refusal};
use crate::protocol::ProtocolError;
use crate::sessions::SessionError;

impl ApiError {
    /// 400 with `message`: the request is wrong, as `message` says.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404 with `message`: what the request names is not here.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 500 with `message`: trident (or a plugin) failed, not the request.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 404: no route has `path`.
    pub fn no_route(path: &str) -> ApiError {
        ApiError::not_found(format!("no route for {path}"))
    }

    /// 404: the route exists but is not served here, as `message` says (what to configure, or
    /// why this endpoint cannot serve it).
    pub fn route_not_served(message: String) -> ApiError {
        ApiError::not_found(message)
    }

    /// 405, with the `Allow` header listing the methods the path answers.
    pub fn method_not_allowed(allow: String) -> ApiError {
        ApiError {
            allow: Some(allow),
            ..ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        }
    }

    /// 403: a restricted API's request without its `header` (or with another value).
    pub fn restricted(header: &str) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            format!("This API is restricted, expecting header '{header}'"),
        )
    }

    /// 400: `/ping` while the engine cannot serve, with why (SageMaker's health check reads
    /// any non-200 as unhealthy; Triton's frontend answers 400).
    pub fn unhealthy(why: String) -> ApiError {
        ApiError::bad_request(why)
    }

    /// 503: the endpoint's model is not served because its artifact was refused at start
    /// (Triton's answer for a model that is not ready is 503 too).
    pub fn artifact_refused(refusal: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the model is not served: {refusal}"),
        )
    }

    /// 415: a body of a media type the route's plugin does not take.
    pub fn unsupported_media_type(message: String) -> ApiError {
        ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message)
    }

    /// 400: a plugin manifest that does not load; the old plugin set serves on.
    pub fn plugin_reload(why: String) -> ApiError {
        ApiError::bad_request(why)
    }

    /// 400: `X-Amzn-SageMaker-Target-Model` names `target`, not the model loaded as `name`.
    pub fn wrong_target(target: &str, name: &str) -> ApiError {
        ApiError::bad_request(format!(
            "X-Amzn-SageMaker-Target-Model '{}' is not the model loaded as '{name}'",
            target.escape_debug()
        ))
    }

    /// 426: the bidirectional stream's handshake is not a WebSocket one, as `message` says.
    pub fn upgrade_required(message: String) -> ApiError {
        ApiError::new(StatusCode::UPGRADE_REQUIRED, message)
    }

    /// 503: as many bidirectional streams are open as `max` allows.
    pub fn too_many_streams(max: usize) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the server is at its limit of {max} bidirectional streams; retry shortly"),
        )
    }

    /// Triton's HTTP mapping of engine error codes.
    pub fn from_engine(error: EngineError) -> ApiError {
        let status = match error.code {
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unsupported => StatusCode::NOT_IMPLEMENTED,
            ErrorCode::Unknown
            | ErrorCode::InvalidArg
            | ErrorCode::AlreadyExists
            | ErrorCode::Cancelled => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, error.message)
    }

    /// 400, or 507 when the message was judged out-of-memory (SageMaker's MME convention).
    pub fn bad_request_or_oom(message: String, out_of_memory: bool) -> ApiError {
        if out_of_memory {
            ApiError::new(StatusCode::INSUFFICIENT_STORAGE, message)
        } else {
            ApiError::bad_request(message)
        }
    }

    /// A plugin's own refusal: 400, 415 or 500 (the last naming the plugin).
    pub fn from_plugin(plugin: &str, error: Refusal) -> ApiError {
        match error {
            Refusal::BadRequest(m) => ApiError::bad_request(m),
            Refusal::UnsupportedMediaType(m) => ApiError::unsupported_media_type(m),
            Refusal::Internal(m) => ApiError::plugin_fault(plugin, &m),
        }
    }

    /// 500 naming `plugin` and what it did wrong.
    pub fn plugin_fault(plugin: &str, what: &str) -> ApiError {
        ApiError::internal(format!("plugin '{plugin}': {what}"))
    }

    /// A plugin that ran out of time (504), trapped or ran out of memory (500).
    pub fn from_call_failure(failure: CallFailure) -> ApiError {
        let status = match failure {
            CallFailure::Deadline { .. } => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, failure.to_string())
    }

    /// The status of a plugin's reply: its own when HTTP has it (200 to 999), else 500 naming
    /// the plugin.
    pub fn reply_status(plugin: &str, status: u16) -> Result<StatusCode, ApiError> {
        StatusCode::from_u16(status)
            .ok()
            .filter(|s| s.as_u16() >= 200)
            .ok_or_else(|| {
                ApiError::plugin_fault(plugin, &format!("replied with an invalid status {status}"))
            })
    }
}

impl From<BodyError> for ApiError {
    fn from(error: BodyError) -> ApiError {
        let status = match error {
            BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::TooSlow { .. } => StatusCode::REQUEST_TIMEOUT,
            BodyError::TooManyChunks | BodyError::Broken(_) => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, error.to_string())
    }
}

impl From<ProtocolError> for ApiError {
    fn from(error: ProtocolError) -> ApiError {
        match error {
            ProtocolError::BadRequest(message) => ApiError::bad_request(message),
            ProtocolError::Internal(message) => ApiError::internal(message),
        }
    }
}

/// The registry's own refusals. An engine's failure to load is [`load_failed`]'s to map (it
/// may be out-of-memory); one that reaches here is 400, its `ALREADY_EXISTS` 409.
impl From<MmeError> for ApiError {
    fn from(error: MmeError) -> ApiError {
        let status = match &error {
            MmeError::BadRequest(_) => StatusCode::BAD_REQUEST,
            MmeError::NotFound(_) => StatusCode::NOT_FOUND,
            MmeError::Conflict(_) => StatusCode::CONFLICT,
            MmeError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            MmeError::Engine(e) if e.code == ErrorCode::AlreadyExists => StatusCode::CONFLICT,
            MmeError::Engine(_) => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, error.to_string())
    }
}

impl From<SessionError> for ApiError {
    fn from(error: SessionError) -> ApiError {
        let status = match &error {
            SessionError::Full { .. } | SessionError::NoSequenceSlot { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            SessionError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            SessionError::Model(engine) => return ApiError::from_engine(engine.clone()),
            SessionError::Invalid(_)
            | SessionError::Unknown(_)
            | SessionError::WrongModel(_)
            | SessionError::Lost(_) => StatusCode::BAD_REQUEST,
        };
        let mut answer = ApiError::new(status, error.message());
        answer.retry_after = error.retry_after().map(|after| after.as_secs().max(1));
        answer
    }
}

/// The status of a failed `POST /models`: the registry's refusals as `From<MmeError>` maps
/// them, an engine failure 507 when it looks like out-of-memory (the OOM plugin, else the
/// built-in list) and else 400, a time-out 504.
pub async fn load_failed<E: Engine>(state: &AppState<E>, failure: LoadFailure) -> ApiError {
    match failure {
        LoadFailure::TimedOut { .. } => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("{failure}; the load is abandoned and undone when the core finishes it"),
        ),
        LoadFailure::Refused(MmeError::Engine(error)) if error.code != ErrorCode::AlreadyExists => {
            let oom = state.is_out_of_memory(&error.message).await;
            ApiError::bad_request_or_oom(error.message, oom)
        }
        LoadFailure::Refused(error) => error.into(),
    }
}

/// The routes that run a KServe v2 inference; they answer failures differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferRoute {
    /// `/invocations`: Triton's HTTP mapping of error codes (a failing model: 400, or 507).
    Invocations,
    /// `/models/{name}/invoke`: every failure 400, or 507 when it looks like out-of-memory.
    Invoke,
}

/// Which mapping of failures to statuses a request follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statuses {
    /// A KServe v2 inference on `route`.
    Infer(InferRoute),
    /// Generate (on `/invocations`): Triton's mapping of error codes throughout.
    Generate,
}

/// A request that failed, as every transport answers it: its status and message (not yet
/// redacted), and whether it is a stream that failed on its first response, which HTTP answers
/// with that status and one error event (as Triton's frontend does).
pub struct Refused {
    /// The status and message (not yet redacted).
    pub error: ApiError,
    /// Whether HTTP answers with the status and one server-sent error event instead of a JSON
    /// error body: the stream failed on its first response.
    pub as_event: bool,
}

/// How an inference's failure is answered, for every route and transport. The out-of-memory
/// verdict (the OOM plugin, else the built-in list) is asked at most once, and only where
/// SageMaker expects a 507.
pub async fn refused<E: Engine>(
    state: &AppState<E>,
    statuses: Statuses,
    failure: Failure,
) -> Refused {
    use InferRoute::Invocations;
    let error = match (statuses, failure) {
        (_, Failure::FirstResponse(error)) => {
            return Refused {
                error: ApiError::from_engine(error),
                as_event: true,
            };
        }
        (_, Failure::PluginRefused { plugin, error }) => ApiError::from_plugin(&plugin, error),
        (_, Failure::PluginFailed(failure)) => ApiError::from_call_failure(failure),
        (_, Failure::SessionEnded(error)) => ApiError::from(error),
        (_, failure @ Failure::NoResponse) => ApiError::internal(failure.message()),
        (
            Statuses::Generate | Statuses::Infer(Invocations),
            Failure::Decode(e) | Failure::Encode(e),
        ) => ApiError::from(e),
        (Statuses::Generate | Statuses::Infer(Invocations), Failure::Refused(e)) => {
            ApiError::from_engine(e)
        }
        (Statuses::Generate, Failure::Model(e)) => ApiError::from_engine(e),
        // An inference's model failed (either route), or anything failed on a multi-model
        // endpoint.
        (Statuses::Infer(_), failure) => {
            let message = failure.message();
            let oom = state.is_out_of_memory(&message).await;
            ApiError::bad_request_or_oom(message, oom)
        }
    };
    Refused {
        error,
        as_event: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(error: impl Into<ApiError>) -> u16 {
        error.into().status.as_u16()
    }

    #[test]
    fn engine_codes_map_as_tritons_frontend_maps_them() {
        let cases = [
            (ErrorCode::Internal, 500),
            (ErrorCode::NotFound, 404),
            (ErrorCode::Unavailable, 503),
            (ErrorCode::Unsupported, 501),
            (ErrorCode::Unknown, 400),
            (ErrorCode::InvalidArg, 400),
            (ErrorCode::AlreadyExists, 400),
            (ErrorCode::Cancelled, 400),
        ];
        for (code, expected) in cases {
            let error = ApiError::from_engine(EngineError::new(code, "m"));
            assert_eq!(error.status.as_u16(), expected, "{code:?}");
        }
    }

    #[test]
    fn domain_errors_map_to_their_statuses() {
        let engine = |code| EngineError::new(code, "m");
        assert_eq!(status(MmeError::BadRequest("m".into())), 400);
        assert_eq!(status(MmeError::NotFound("m".into())), 404);
        assert_eq!(status(MmeError::Conflict("m".into())), 409);
        assert_eq!(status(MmeError::Internal("m".into())), 500);
        assert_eq!(
            status(MmeError::Engine(engine(ErrorCode::AlreadyExists))),
            409
        );
        assert_eq!(status(MmeError::Engine(engine(ErrorCode::InvalidArg))), 400);
        assert_eq!(
            status(SessionError::Full {
                limit: 1,
                retry_after: std::time::Duration::from_secs(3)
            }),
            429
        );
        assert_eq!(status(SessionError::Internal("m".into())), 500);
        assert_eq!(
            status(SessionError::Model(engine(ErrorCode::Unavailable))),
            503
        );
        for invalid in [
            SessionError::Invalid("m".into()),
            SessionError::Unknown("m".into()),
            SessionError::WrongModel("m".into()),
            SessionError::Lost("m".into()),
        ] {
            assert_eq!(status(invalid), 400);
        }
        assert_eq!(status(BodyError::TooLarge { limit: 1 }), 413);
        assert_eq!(status(BodyError::TooSlow { seconds: 1.0 }), 408);
        assert_eq!(status(BodyError::TooManyChunks), 400);
        assert_eq!(status(BodyError::Broken("m".into())), 400);
        assert_eq!(status(ProtocolError::BadRequest("m".into())), 400);
        assert_eq!(status(ProtocolError::Internal("m".into())), 500);
    }

    #[test]
    fn plugin_failures_map_to_their_statuses_and_name_the_plugin() {
        let refused = |refusal| ApiError::from_plugin("p", refusal);
        assert_eq!(refused(Refusal::BadRequest("m".into())).status, 400);
        assert_eq!(
            refused(Refusal::UnsupportedMediaType("m".into())).status,
            415
        );
        let internal = refused(Refusal::Internal("m".into()));
        assert_eq!(
            (internal.status.as_u16(), internal.message),
            (500, "plugin 'p': m".into())
        );
        let deadline = CallFailure::Deadline {
            plugin: "p".into(),
            limit_ms: 1,
        };
        assert_eq!(ApiError::from_call_failure(deadline).status, 504);
        let memory = CallFailure::Memory {
            plugin: "p".into(),
            limit_mb: 1,
        };
        assert_eq!(ApiError::from_call_failure(memory).status, 500);
        assert_eq!(ApiError::reply_status("p", 418).unwrap().as_u16(), 418);
        for bad in [0, 99, 199, 1000] {
            let error = ApiError::reply_status("p", bad).unwrap_err();
            assert_eq!(error.status, 500, "{bad}");
            assert!(
                error.message.starts_with("plugin 'p': "),
                "{}",
                error.message
            );
        }
        assert_eq!(ApiError::bad_request_or_oom("m".into(), true).status, 507);
        assert_eq!(ApiError::bad_request_or_oom("m".into(), false).status, 400);
    }
}

//! One error type for every route, and the one place that turns errors into HTTP statuses and
//! SageMaker's `{"error": "<message>"}` JSON body.

use http::{HeaderValue, Response, StatusCode, header};

use super::body::ResponseBody;
use crate::engine::{EngineError, ErrorCode};
use crate::mme::registry::MmeError;
use crate::protocol::ProtocolError;

impl From<super::body::BodyError> for ApiError {
    fn from(error: super::body::BodyError) -> ApiError {
        ApiError::new(error.status(), error.to_string())
    }
}

/// An error answer: status, message, and for 405 the methods the route allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The response's status.
    pub status: StatusCode,
    /// The message, sent as `{"error": "<message>"}`.
    pub message: String,
    /// The `Allow` header of a 405: the methods the route answers.
    pub allow: Option<&'static str>,
}

impl ApiError {
    /// An error with `status` and `message`, without an `Allow` header.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            allow: None,
        }
    }

    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 405 with the `Allow` header.
    pub fn method_not_allowed(allow: &'static str) -> ApiError {
        ApiError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            message: "Method Not Allowed".into(),
            allow: Some(allow),
        }
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

    /// A plugin's own error: 400, 415 or 500.
    pub fn from_plugin(plugin: &str, error: crate::plugins::Refusal) -> ApiError {
        use crate::plugins::Refusal;
        match error {
            Refusal::BadRequest(m) => ApiError::bad_request(m),
            Refusal::UnsupportedMediaType(m) => {
                ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, m)
            }
            Refusal::Internal(m) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("plugin '{plugin}': {m}"),
            ),
        }
    }

    /// A plugin that trapped, ran out of time (504) or memory.
    pub fn from_call_failure(failure: crate::plugins::CallFailure) -> ApiError {
        let status = match failure {
            crate::plugins::CallFailure::Deadline { .. } => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, failure.to_string())
    }

    /// The error with the server's own folders hidden from its message (logged in full).
    pub fn redacted(mut self, redactor: &super::redact::Redactor) -> ApiError {
        if let std::borrow::Cow::Owned(message) = redactor.redact(&self.message) {
            tracing::debug!(error = %self.message, "error message redacted for the client");
            self.message = message;
        }
        self
    }

    /// The error as a response.
    pub fn into_response(self) -> Response<ResponseBody> {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), error = %self.message, "request failed");
        } else {
            tracing::debug!(status = self.status.as_u16(), error = %self.message, "request refused");
        }
        let mut body = Vec::with_capacity(self.message.len() + 12);
        body.extend_from_slice(b"{\"error\":");
        crate::protocol::tensor_data::write_json_string(&mut body, &self.message);
        body.push(b'}');
        let mut response = Response::new(ResponseBody::full(body));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(allow) = self.allow {
            headers.insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

impl From<ProtocolError> for ApiError {
    fn from(error: ProtocolError) -> ApiError {
        match error {
            ProtocolError::BadRequest(message) => ApiError::bad_request(message),
            ProtocolError::Internal(message) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
            }
        }
    }
}

impl From<MmeError> for ApiError {
    fn from(error: MmeError) -> ApiError {
        let status = match &error {
            MmeError::BadRequest(_) => StatusCode::BAD_REQUEST,
            MmeError::NotFound(_) => StatusCode::NOT_FOUND,
            MmeError::Conflict(_) => StatusCode::CONFLICT,
            MmeError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            MmeError::Engine(e) if e.code == crate::engine::ErrorCode::AlreadyExists => {
                StatusCode::CONFLICT
            }
            // 507 when it looks like out-of-memory: `http::models` asks, where it can.
            MmeError::Engine(_) => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, error.to_string())
    }
}

//! One error type for every route, and its answer: SageMaker's `{"error": "<message>"}` JSON
//! body, the `Allow` header of a 405, the server's folders hidden. Which status an error is,
//! is decided in `status`.

use http::{HeaderValue, Response, StatusCode, header};

use super::body::ResponseBody;

/// An error answer: status, message, and for 405 the methods the route allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The response's status.
    pub status: StatusCode,
    /// The message, sent as `{"error": "<message>"}`.
    pub message: String,
    /// The `Allow` header of a 405: the methods the route answers.
    pub allow: Option<String>,
    /// Seconds after which a client refused for want of room may retry: the `Retry-After`
    /// header, and `retry_after` in the body (SageMaker passes a container's error body to the
    /// client, not its headers).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with `status` and `message`, without an `Allow` header.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            allow: None,
            retry_after: None,
        }
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
        let mut body = Vec::with_capacity(self.message.len() + 40);
        body.extend_from_slice(b"{\"error\":");
        crate::protocol::tensor_data::write_json_string(&mut body, &self.message);
        if let Some(seconds) = self.retry_after {
            body.extend_from_slice(format!(",\"retry_after\":{seconds}").as_bytes());
        }
        body.push(b'}');
        let mut response = Response::new(ResponseBody::full(body));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(allow) = self.allow
            && let Ok(allow) = HeaderValue::from_str(&allow)
        {
            headers.insert(header::ALLOW, allow);
        }
        response
    }
}

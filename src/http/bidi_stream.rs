//! `/invocations-bidirectional-stream`: SageMaker's bidirectional streaming
//! (`InvokeEndpointWithBidirectionalStream`) as a WebSocket on the main port.
//!
//! Decided:
//! - Each text or binary message is one request to the default model, answered as `/invocations`
//!   would answer it (the inference type, the plugins, the errors are the same). Its content
//!   type is the handshake's `Content-Type`, else `application/json` for a text message and
//!   `application/octet-stream` for a binary one; `Accept` and SageMaker's headers are the
//!   handshake's too.
//! - An answer goes back as one message, text when it is JSON or text in UTF-8, else binary;
//!   with `generate_stream`, one text message per event (its payload: the response's JSON, or
//!   what a stream adapter wrote), so a decoupled model streams its responses back as messages.
//!   The pipeline's answers are framed here directly (`invocations::run_default`), never read
//!   back from an HTTP response.
//! - Messages are answered one at a time, in order; a ping is answered with a pong.
//! - A request that fails ends the stream with close code 4000 + its HTTP status (4400 for a
//!   bad payload, 4500 for a plugin trap, 4504 for a plugin time-out) and its error as the
//!   reason, cut to the 123 bytes a close frame carries. A message larger than the body limit
//!   is closed with 1009, more than the message rate with 1008, a stream that fails midway
//!   with 1011 (one that fails on its first response is a failed request, 4000 + its status),
//!   a text message that is not UTF-8 with 1007, a frame that breaks the protocol with 1002.
//!   When the server shuts down, each stream finishes the request in flight and closes with
//!   1001; the shutdown's grace period waits for them.
//! - A plugin's reply is framed without an HTTP response: its status closes the stream when it
//!   is an error (4000 + the status, the body's `error` the reason), its content type decides
//!   text or binary, its headers have no place in a message.
//! - Streams are counted apart from connections (an upgraded connection leaves the HTTP
//!   connection limit): at most as many as `max_connections`; one more is answered 503.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tracing::Instrument;

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use crate::engine::Engine;
use crate::invocation::{Invocation, QUERY_STRING_HEADER};
use crate::pipeline::{Answer, StreamEvent};

/// The route's path.
pub const PATH: &str = "/invocations-bidirectional-stream";

/// Bytes a close frame's reason may hold.
const MAX_CLOSE_REASON: usize = 123;

/// How long a closed stream waits for the client's close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Answers the handshake (`GET` with `Upgrade: websocket`, already past the `inference`
/// restriction): 101 and the stream started on the upgraded connection, or why not.
pub fn upgrade<E: Engine>(
    state: &Arc<AppState<E>>,
    parts: &mut Parts,
) -> Result<Response<ResponseBody>, ApiError> {
    let accept = accept_key(&parts.headers)?;
    let on_upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ApiError::internal("this connection cannot be upgraded"))?;
    let permit = Arc::clone(&state.bidi_streams)
        .try_acquire_owned()
        .map_err(|_| ApiError::too_many_streams(state.config.http.client_limits.max_connections))?;
    let context = Context {
        invocation: Invocation::from_headers(&parts.headers),
        headers: forwarded_headers(&parts.headers, parts.uri.query()),
    };
    let state = Arc::clone(state);
    let span = tracing::Span::current();
    tokio::spawn(
        async move {
            match on_upgrade.await {
                Ok(upgraded) => {
                    let config = WebSocketConfig::default()
                        .max_message_size(Some(state.config.http.max_body_bytes))
                        .max_frame_size(Some(state.config.http.max_body_bytes));
                    let socket = WebSocketStream::from_raw_socket(
                        TokioIo::new(upgraded),
                        Role::Server,
                        Some(config),
                    )
                    .await;
                    serve_stream(&state, socket, &context).await;
                }
                Err(error) => tracing::debug!(%error, "a bidirectional stream's upgrade failed"),
            }
            drop(permit);
        }
        .instrument(span),
    );
    let mut response = Response::new(ResponseBody::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    Ok(response)
}

/// The `Sec-WebSocket-Accept` for a well-formed handshake (RFC 6455 §4.2.1), else the 4xx that
/// says what is missing.
fn accept_key(headers: &HeaderMap) -> Result<HeaderValue, ApiError> {
    let has_token = |name: HeaderName, token: &str| {
        headers.get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|value| {
                value
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    if !has_token(header::UPGRADE, "websocket") || !has_token(header::CONNECTION, "upgrade") {
        return Err(ApiError::upgrade_required(format!(
            "{PATH} is a WebSocket: send GET with 'Upgrade: websocket' and 'Connection: Upgrade'"
        )));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return Err(ApiError::upgrade_required(
            "only WebSocket version 13 is supported (Sec-WebSocket-Version: 13)".into(),
        ));
    }
    // The key is 16 random bytes in base64: 24 characters ending in "==".
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .map(HeaderValue::as_bytes)
        .filter(|key| {
            key.len() == 24
                && key.ends_with(b"==")
                && key[..22]
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
        })
        .ok_or_else(|| ApiError::bad_request("Sec-WebSocket-Key must be 16 bytes in base64"))?;
    HeaderValue::from_str(&derive_accept_key(key)).map_err(|_| ApiError::internal("accept key"))
}

/// The handshake's headers every message's request carries, with its `query` as SageMaker's
/// query-string header when that is absent.
fn forwarded_headers(handshake: &HeaderMap, query: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in handshake {
        let keep = name == header::CONTENT_TYPE
            || name == header::ACCEPT
            || name.as_str().starts_with("x-amzn-sagemaker-")
            || name.as_str().starts_with("inference-header-");
        if keep {
            headers.append(name, value.clone());
        }
    }
    if let Some(query) = query.filter(|q| !q.is_empty())
        && !headers.contains_key(QUERY_STRING_HEADER)
        && let Ok(value) = HeaderValue::from_str(query)
    {
        headers.insert(QUERY_STRING_HEADER, value);
    }
    headers
}

/// What every request of a stream shares.
struct Context {
    invocation: Invocation,
    headers: HeaderMap,
}

/// Serves one stream until the client closes it or a request fails.
async fn serve_stream<E: Engine, S>(
    state: &AppState<E>,
    mut socket: WebSocketStream<S>,
    context: &Context,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut rate = Rate::new(state.config.http.bidi_messages_per_second);
    let mut shutting_down = state.shutting_down.subscribe();
    loop {
        let message = tokio::select! {
            message = socket.next() => message,
            () = async { drop(shutting_down.wait_for(|yes| *yes).await) } => {
                return close(socket, CloseCode::Away, "the server is shutting down").await;
            }
        };
        let Some(message) = message else {
            return;
        };
        let (body, binary) = match message {
            Ok(Message::Text(text)) => (Bytes::from(text), false),
            Ok(Message::Binary(bytes)) => (bytes, true),
            // Pongs to pings are queued by the socket and sent with its next write or read.
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
            // The socket answers the client's close frame; the stream then ends.
            Ok(Message::Close(_)) => continue,
            Err(WsError::Capacity(error)) => {
                let reason = format!(
                    "a message is larger than the limit of {} bytes ({error})",
                    state.config.http.max_body_bytes
                );
                return close(socket, CloseCode::Size, &reason).await;
            }
            // RFC 6455: a text message that is not UTF-8 fails the connection with 1007 and a
            // broken frame (reserved bits, a fragmented control frame, an unmasked client
            // frame...) with 1002; the client is told why before the connection ends.
            Err(WsError::Utf8(error)) => {
                let reason = format!("a text message is not valid UTF-8: {error}");
                return close(socket, CloseCode::Invalid, &reason).await;
            }
            Err(WsError::Protocol(error)) => {
                let reason = format!("WebSocket protocol error: {error}");
                return close(socket, CloseCode::Protocol, &reason).await;
            }
            Err(error) => {
                tracing::debug!(%error, "a bidirectional stream ended with an error");
                return;
            }
        };
        if !rate.admit(Instant::now()) {
            let reason = format!(
                "more than {} messages a second",
                state.config.http.bidi_messages_per_second
            );
            return close(socket, CloseCode::Policy, &reason).await;
        }
        if let Err((code, reason)) = answer(state, &mut socket, context, body, binary).await {
            return close(socket, code, &reason).await;
        }
    }
}

/// Runs one message's request and sends its answer: the close code and reason when it failed.
async fn answer<E: Engine, S>(
    state: &AppState<E>,
    socket: &mut WebSocketStream<S>,
    context: &Context,
    body: Bytes,
    binary: bool,
) -> Result<(), (CloseCode, String)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut headers = context.headers.clone();
    let mut invocation = context.invocation.clone();
    if !headers.contains_key(header::CONTENT_TYPE) {
        let default = if binary {
            "application/octet-stream"
        } else {
            "application/json"
        };
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(default));
        invocation.content_type = Some(default.to_owned());
    }
    let invoked =
        match super::invocations::run_default(state, &invocation, &headers, body, None).await {
            Ok(invoked) => invoked,
            Err(refused) => {
                let error = refused.error.redacted(&state.redactor);
                return Err((status_code(error.status), error.message));
            }
        };
    match invoked.answer {
        Answer::V2(encoded) => {
            let bytes = Bytes::from(encoded.parts.concat());
            let binary = !is_textual(&encoded.content_type) || std::str::from_utf8(&bytes).is_err();
            send(socket, bytes, binary).await
        }
        Answer::Json(json) => send(socket, Bytes::from(json), false).await,
        Answer::Events(mut events) => {
            // One message per event; a failure midway closes the stream with 1011.
            while let Some(event) = events.recv().await {
                match event {
                    StreamEvent::Data(payload) => send(socket, payload, false).await?,
                    StreamEvent::Failed(message) => {
                        let message = state.redactor.redact(&message).into_owned();
                        return Err((CloseCode::Error, message));
                    }
                }
            }
            Ok(())
        }
        Answer::Reply { plugin, reply } => {
            // A plugin's reply is HTTP-shaped: its status decides whether the stream goes on
            // (an error status closes it, its `error` the reason), its content type whether
            // the message is text; its headers have no place in a message.
            let status = ApiError::reply_status(&plugin.name, reply.status)
                .map_err(|error| (status_code(error.status), error.message))?;
            if status.as_u16() >= 400 {
                let message = error_message(&reply.body);
                let message = state.redactor.redact(&message).into_owned();
                return Err((status_code(status), message));
            }
            let bytes = Bytes::from(reply.body);
            let binary = !is_textual(&reply.content_type) || std::str::from_utf8(&bytes).is_err();
            send(socket, bytes, binary).await
        }
    }
}

/// Whether an answer of `content_type` goes back as a text message (when it is UTF-8).
fn is_textual(content_type: &str) -> bool {
    content_type.starts_with("application/json") || content_type.starts_with("text/")
}

async fn send<S>(
    socket: &mut WebSocketStream<S>,
    bytes: Bytes,
    binary: bool,
) -> Result<(), (CloseCode, String)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let message = if binary {
        Message::Binary(bytes)
    } else {
        match bytes.try_into() {
            Ok(text) => Message::Text(text),
            Err(_) => return Err((CloseCode::Error, "an answer is not UTF-8".into())),
        }
    };
    socket
        .send(message)
        .await
        .map_err(|e| (CloseCode::Error, format!("sending the answer failed: {e}")))
}

/// The close code of a request that failed with `status`: 4000 + the status.
fn status_code(status: StatusCode) -> CloseCode {
    CloseCode::from(4000 + status.as_u16())
}

/// The `error` of a JSON error body (a plugin's reply), else the body as text.
fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|json| json.get("error")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

/// Sends a close frame with `code` and `reason` (cut at a character boundary to what a close
/// frame holds), then waits briefly for the client's.
async fn close<S>(mut socket: WebSocketStream<S>, code: CloseCode, reason: &str)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut end = reason.len().min(MAX_CLOSE_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    tracing::debug!(
        code = u16::from(code),
        reason,
        "closing a bidirectional stream"
    );
    let frame = CloseFrame {
        code,
        reason: reason[..end].to_owned().into(),
    };
    if socket.close(Some(frame)).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(Ok(_)) = socket.next().await {}
    })
    .await;
}

/// A token bucket: `per_second` messages a second on average, as many in a burst.
struct Rate {
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Rate {
    fn new(per_second: u32) -> Rate {
        let per_second = f64::from(per_second.max(1));
        Rate {
            per_second,
            tokens: per_second,
            at: Instant::now(),
        }
    }

    /// Whether one more message at `now` is within the rate.
    fn admit(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.per_second);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_admits_a_burst_then_the_average() {
        let start = Instant::now();
        let mut rate = Rate::new(10);
        assert!((0..10).all(|_| rate.admit(start)));
        assert!(!rate.admit(start));
        assert!(rate.admit(start + Duration::from_millis(100)));
        assert!(!rate.admit(start + Duration::from_millis(100)));
        assert!((0..10).all(|_| rate.admit(start + Duration::from_secs(60))));
    }

    #[test]
    fn handshakes_are_checked() {
        let mut headers = HeaderMap::new();
        assert_eq!(accept_key(&headers).unwrap_err().status, 426);
        headers.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert_eq!(accept_key(&headers).unwrap_err().status, 426);
        headers.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        assert_eq!(accept_key(&headers).unwrap_err().status, 400);
        headers.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("short=="),
        );
        assert_eq!(accept_key(&headers).unwrap_err().status, 400);
        // RFC 6455's example.
        headers.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        assert_eq!(
            accept_key(&headers).unwrap(),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn messages_carry_the_handshakes_sagemaker_headers_and_query() {
        let mut handshake = HeaderMap::new();
        handshake.insert(header::ACCEPT, HeaderValue::from_static("text/plain"));
        handshake.insert(
            "x-amzn-sagemaker-model-invocation-path",
            HeaderValue::from_static("/v2/x"),
        );
        handshake.insert("x-secret", HeaderValue::from_static("hunter2"));
        let headers = forwarded_headers(&handshake, Some("lang=en&n=2"));
        assert_eq!(headers[QUERY_STRING_HEADER], "lang=en&n=2");
        assert_eq!(headers["x-amzn-sagemaker-model-invocation-path"], "/v2/x");
        assert_eq!(headers[header::ACCEPT], "text/plain");
        assert!(!headers.contains_key("x-secret"));
        // SageMaker's own header wins over the handshake's query string.
        handshake.insert(
            QUERY_STRING_HEADER,
            HeaderValue::from_static("from=sagemaker"),
        );
        let headers = forwarded_headers(&handshake, Some("lang=en"));
        assert_eq!(headers[QUERY_STRING_HEADER], "from=sagemaker");
        assert!(!forwarded_headers(&HeaderMap::new(), Some("")).contains_key(QUERY_STRING_HEADER));
    }

    #[test]
    fn close_codes_and_reasons() {
        assert_eq!(u16::from(status_code(StatusCode::BAD_REQUEST)), 4400);
        assert_eq!(u16::from(status_code(StatusCode::GATEWAY_TIMEOUT)), 4504);
        assert_eq!(error_message(br#"{"error":"bad input"}"#), "bad input");
        assert_eq!(error_message(b"plain"), "plain");
    }
}

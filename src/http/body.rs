//! Bodies: the request body read whole within a size limit, and response bodies that are either
//! a list of buffers sent as they are (no concatenation) or a generate stream framed as
//! server-sent events.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::redact::Redactor;
use crate::pipeline::{Events, StreamEvent};
use crate::protocol::sse;

/// A response body.
pub enum ResponseBody {
    /// Known parts, sent in order; the length is known up front.
    Parts(VecDeque<Bytes>),
    /// A generate stream's events framed as server-sent events as they come (a failure's
    /// message redacted); sent chunked.
    Events {
        /// The stream's events, in the order the model produced them.
        events: Events,
        /// Hides the server's folders in a failure's message.
        redactor: Redactor,
    },
}

/// A 200 with `json` as its `application/json` body.
pub fn json_response(json: Vec<u8>) -> http::Response<ResponseBody> {
    let mut response = http::Response::new(ResponseBody::full(json));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

impl ResponseBody {
    /// A body of no bytes (`Content-Length: 0`).
    pub fn empty() -> ResponseBody {
        ResponseBody::Parts(VecDeque::new())
    }

    /// A body of one buffer.
    pub fn full(body: impl Into<Bytes>) -> ResponseBody {
        ResponseBody::Parts(VecDeque::from([body.into()]))
    }

    /// A body of `parts`, sent in order without joining them; empty parts are left out.
    pub fn parts(parts: Vec<Bytes>) -> ResponseBody {
        ResponseBody::Parts(parts.into_iter().filter(|p| !p.is_empty()).collect())
    }

    /// `events` as server-sent events, a failure's message passed through `redactor`.
    pub fn events(events: Events, redactor: Redactor) -> ResponseBody {
        ResponseBody::Events { events, redactor }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            ResponseBody::Parts(parts) => {
                Poll::Ready(parts.pop_front().map(|p| Ok(Frame::data(p))))
            }
            ResponseBody::Events { events, redactor } => events.poll_recv(cx).map(|item| {
                item.map(|item| {
                    Ok(Frame::data(match item {
                        StreamEvent::Data(payload) => sse::event(&payload),
                        StreamEvent::Failed(message) => {
                            sse::error_event(&redactor.redact(&message))
                        }
                    }))
                })
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ResponseBody::Parts(parts) if parts.is_empty())
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Parts(parts) => {
                SizeHint::with_exact(parts.iter().map(|p| p.len() as u64).sum())
            }
            ResponseBody::Events { .. } => SizeHint::default(),
        }
    }
}

/// The most non-empty chunks a chunked request body may arrive in; beyond it the request is 400.
/// Each chunk costs a frame's work however small it is: six million 1-byte chunks cost seconds
/// of CPU where the same bytes in one chunk cost milliseconds. Triton's own frontend has the
/// same bound and message.
pub const MAX_BODY_CHUNKS: usize = 65_536;

/// Why a request body could not be read; each kind knows its status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BodyError {
    /// More than the limit (413).
    #[error("request body is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// Not all there in time (408).
    #[error("the request body did not arrive within {seconds} s")]
    TooSlow {
        /// The time the body had to arrive, in seconds.
        seconds: f64,
    },
    /// A chunked body in too many chunks (400, Triton's message).
    #[error(
        "Chunked request body exceeds maximum of {MAX_BODY_CHUNKS} non-empty chunks. Send fewer \
         or larger HTTP chunks."
    )]
    TooManyChunks,
    /// The connection failed while reading (400).
    #[error("failed to read the request body: {0}")]
    Broken(String),
}

/// Reads a request body whole; more than `limit` bytes is 413, refused from `Content-Length`
/// before anything is read when the client declares it; a body that has not arrived within
/// `timeout` is 408; a chunked body in more than [`MAX_BODY_CHUNKS`] non-empty chunks is 400.
pub async fn read_body<B>(
    body: B,
    headers: &http::HeaderMap,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    // hyper hands a chunked body over chunk by chunk (a large chunk possibly in several
    // pieces), so counting pieces bounds the chunks. A body with a length arrives in pieces as
    // large as the connection delivers them and is not counted.
    let chunked = headers
        .get(http::header::TRANSFER_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"chunked"));
    let max_pieces = if chunked { MAX_BODY_CHUNKS } else { usize::MAX };
    tokio::time::timeout(timeout, collect(body, limit, max_pieces))
        .await
        .map_err(|_| BodyError::TooSlow {
            seconds: timeout.as_secs_f64(),
        })?
}

/// The body's data, at most `limit` bytes in at most `max_pieces` non-empty pieces; one piece
/// is returned as it is, several are joined once.
async fn collect<B>(body: B, limit: usize, max_pieces: usize) -> Result<Bytes, BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut body = std::pin::pin!(body);
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Broken(e.into().to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if data.is_empty() {
            continue;
        }
        total = total.saturating_add(data.len());
        if total > limit {
            return Err(BodyError::TooLarge { limit });
        }
        if pieces.len() == max_pieces {
            return Err(BodyError::TooManyChunks);
        }
        pieces.push(data);
    }
    Ok(match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().expect("one piece"),
        _ => {
            let mut joined = bytes::BytesMut::with_capacity(total);
            for piece in pieces {
                joined.extend_from_slice(&piece);
            }
            joined.freeze()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream's events are framed as server-sent events, and a failure's message is redacted
    /// where the body frames it.
    #[tokio::test]
    async fn events_are_framed_and_failures_redacted() {
        let (sender, events) = tokio::sync::mpsc::channel(4);
        let mut redactor = Redactor::default();
        redactor.hide(
            std::path::Path::new("/srv/models/private"),
            "<model repository>",
        );
        sender
            .send(StreamEvent::Data(Bytes::from_static(b"{\"TEXT\":\"a\"}")))
            .await
            .unwrap();
        sender
            .send(StreamEvent::Failed(
                "failed in /srv/models/private/m/1/model.py".into(),
            ))
            .await
            .unwrap();
        drop(sender);
        let body = ResponseBody::events(events, redactor);
        assert!(!body.is_end_stream());
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(
            &bytes[..],
            b"data: {\"TEXT\":\"a\"}\n\ndata: {\"error\":\"failed in <model repository>/m/1/model.py\"}\n\n"
        );
    }
}

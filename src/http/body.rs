//! Bodies: the request body read whole within a size limit, and response bodies that are either
//! a list of buffers sent as they are (no concatenation) or a stream of chunks.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::error::ApiError;

/// A response body.
pub enum ResponseBody {
    /// Known parts, sent in order; the length is known up front.
    Parts(VecDeque<Bytes>),
    /// Chunks as they become ready (server-sent events); sent chunked.
    Stream(mpsc::Receiver<Bytes>),
}

impl ResponseBody {
    pub fn empty() -> ResponseBody {
        ResponseBody::Parts(VecDeque::new())
    }

    pub fn full(body: impl Into<Bytes>) -> ResponseBody {
        ResponseBody::Parts(VecDeque::from([body.into()]))
    }

    pub fn parts(parts: Vec<Bytes>) -> ResponseBody {
        ResponseBody::Parts(parts.into_iter().filter(|p| !p.is_empty()).collect())
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
            ResponseBody::Stream(receiver) => receiver
                .poll_recv(cx)
                .map(|chunk| chunk.map(|c| Ok(Frame::data(c)))),
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
            ResponseBody::Stream(_) => SizeHint::default(),
        }
    }
}

/// Reads a request body whole; more than `limit` bytes is 413, refused from `Content-Length`
/// before anything is read when the client declares it; a body that has not arrived within
/// `timeout` is 408.
pub async fn read_body<B>(
    body: B,
    headers: &http::HeaderMap,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    };
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large());
    }
    let collect = http_body_util::Limited::new(body, limit).collect();
    let collected = tokio::time::timeout(timeout, collect)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    timeout.as_secs_f64()
                ),
            )
        })?
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                too_large()
            } else {
                ApiError::bad_request(format!("failed to read the request body: {e}"))
            }
        })?;
    Ok(collected.to_bytes())
}

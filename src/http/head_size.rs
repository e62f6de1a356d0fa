//! The limit on a request's head (request line and headers), enforced at exactly the documented
//! size. hyper only bounds its read buffer, and a read may carry it past that bound before it
//! checks, so heads of up to ~100 KB got through a 64 KiB buffer; hyper's own 431 now stands
//! only for heads far over the limit (twice it), and every head hyper parses is measured here.

use http::header::{CONNECTION, HeaderValue};
use http::{Request, Response, StatusCode};

use super::body::ResponseBody;
use super::error::ApiError;

/// Bytes of request line and headers a request may have, counted as sent in the canonical form
/// (`METHOD target HTTP/1.1\r\n`, then `Name: value\r\n` per header, then the blank line).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// hyper's read buffer: a head longer than this is refused by hyper (431) before it is parsed.
pub const READ_BUFFER_BYTES: usize = 2 * MAX_HEAD_BYTES;

/// The head's size, counted canonically (a client that omits the space after a colon sends one
/// byte less per header than is counted).
pub fn head_bytes<B>(request: &Request<B>) -> usize {
    let target = request
        .uri()
        .path_and_query()
        .map_or(1, |target| target.as_str().len());
    let request_line = request.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + ": ".len() + value.len() + "\r\n".len())
        .sum();
    request_line + headers + "\r\n".len()
}

/// A 431 for a request whose head is over [`MAX_HEAD_BYTES`], or `None`. The connection is
/// closed after it, as hyper does with its own: what follows such a head is not worth reading.
pub fn refuse_oversized<B>(request: &Request<B>) -> Option<Response<ResponseBody>> {
    let bytes = head_bytes(request);
    (bytes > MAX_HEAD_BYTES).then(|| {
        let mut response = ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request line and headers are {bytes} bytes; the limit is {MAX_HEAD_BYTES}"
            ),
        )
        .into_response();
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        response
    })
}

#[cfg(test)]
mod tests {
    use super::{MAX_HEAD_BYTES, head_bytes, refuse_oversized};

    fn request(value_len: usize) -> http::Request<()> {
        http::Request::post("/invocations?x=1")
            .header("host", "a")
            .header("x-big", "v".repeat(value_len))
            .body(())
            .unwrap()
    }

    #[test]
    fn the_head_is_counted_as_sent() {
        let wire = "POST /invocations?x=1 HTTP/1.1\r\nhost: a\r\nx-big: vvv\r\n\r\n";
        assert_eq!(head_bytes(&request(3)), wire.len());
    }

    #[test]
    fn the_limit_is_exact() {
        let overhead = head_bytes(&request(0));
        let at_limit = request(MAX_HEAD_BYTES - overhead);
        assert_eq!(head_bytes(&at_limit), MAX_HEAD_BYTES);
        assert!(refuse_oversized(&at_limit).is_none());
        let over = request(MAX_HEAD_BYTES - overhead + 1);
        let refusal = refuse_oversized(&over).expect("one byte over is refused");
        assert_eq!(refusal.status().as_u16(), 431);
        assert_eq!(refusal.headers()["connection"], "close");
    }
}

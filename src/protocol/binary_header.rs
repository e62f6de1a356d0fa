//! The SageMaker binary tensor mime type: `application/vnd.sagemaker-triton.binary+json;
//! json-header-size=<N>` says the first N bytes of the body are the JSON header and the rest is
//! binary tensor data. SageMaker does not pass Triton's `Inference-Header-Content-Length`; this
//! content type replaces it.

use super::ProtocolError;

/// The mime type of binary tensor bodies, requests and responses.
pub const BINARY_MIME: &str = "application/vnd.sagemaker-triton.binary+json";

const HEADER_SIZE_PARAMETER: &str = "json-header-size";

/// Where the JSON header of a request body ends.
///
/// Returns `Ok(None)` when the whole body is JSON: no content type, another content type, or the
/// binary mime type without a header size. Anything malformed is an error (400), never a guess:
/// a prefix before the mime type, a size that is not a plain decimal number, one beyond 32 bits
/// (SageMaker's limit, which 2.51 silently truncated), or one larger than the body.
pub fn json_header_size(
    content_type: Option<&[u8]>,
    body_len: usize,
) -> Result<Option<usize>, ProtocolError> {
    let Some(raw) = content_type else {
        return Ok(None);
    };
    let Ok(text) = std::str::from_utf8(raw) else {
        return Err(bad("the Content-Type header is not valid UTF-8"));
    };
    let lowered = text.to_ascii_lowercase();
    let Some(position) = lowered.find(BINARY_MIME) else {
        return Ok(None);
    };
    if !lowered[..position].trim().is_empty() {
        return Err(bad(format!(
            "malformed Content-Type '{text}': expected it to start with {BINARY_MIME}"
        )));
    }
    let mut parameters = lowered[position + BINARY_MIME.len()..].split(';');
    if !parameters.next().is_some_and(|rest| rest.trim().is_empty()) {
        return Err(bad(format!("malformed Content-Type '{text}'")));
    }
    let mut size = None;
    for parameter in parameters {
        let Some((key, value)) = parameter.split_once('=') else {
            if parameter.trim().is_empty() {
                continue;
            }
            return Err(bad(format!(
                "malformed Content-Type parameter '{}'",
                parameter.trim()
            )));
        };
        if key.trim() != HEADER_SIZE_PARAMETER {
            continue; // Other parameters (e.g. charset) do not concern the layout.
        }
        let value = value.trim();
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(format!(
                "{HEADER_SIZE_PARAMETER} must be a non-negative decimal integer, got '{value}'"
            )));
        }
        let parsed: u32 = value.parse().map_err(|_| {
            bad(format!(
                "{HEADER_SIZE_PARAMETER} {value} is beyond the 32-bit range"
            ))
        })?;
        size = Some(parsed as usize);
    }
    match size {
        Some(size) if size > body_len => Err(bad(format!(
            "{HEADER_SIZE_PARAMETER} {size} is larger than the request body ({body_len} bytes)"
        ))),
        other => Ok(other),
    }
}

/// The content type of a binary response whose JSON header is `json_len` bytes.
pub fn binary_content_type(json_len: usize) -> String {
    format!("{BINARY_MIME};{HEADER_SIZE_PARAMETER}={json_len}")
}

fn bad(message: impl Into<String>) -> ProtocolError {
    ProtocolError::BadRequest(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(content_type: &str, body_len: usize) -> Result<Option<usize>, ProtocolError> {
        json_header_size(Some(content_type.as_bytes()), body_len)
    }

    #[test]
    fn plain_json_has_no_header_size() {
        assert_eq!(json_header_size(None, 10), Ok(None));
        assert_eq!(size("application/json", 10), Ok(None));
        assert_eq!(size("text/csv", 10), Ok(None));
        assert_eq!(size(BINARY_MIME, 10), Ok(None));
    }

    #[test]
    fn header_size_is_read() {
        let ct = format!("{BINARY_MIME};json-header-size=7");
        assert_eq!(size(&ct, 10), Ok(Some(7)));
        assert_eq!(size(&ct, 7), Ok(Some(7)));
        let spaced = format!("{BINARY_MIME}; json-header-size = 0 ");
        assert_eq!(size(&spaced, 0), Ok(Some(0)));
        let upper = "Application/VND.sagemaker-triton.binary+json;JSON-HEADER-SIZE=3";
        assert_eq!(size(upper, 3), Ok(Some(3)));
        let extra = format!("{BINARY_MIME};charset=utf-8;json-header-size=2");
        assert_eq!(size(&extra, 3), Ok(Some(2)));
    }

    #[test]
    fn malformed_header_sizes_are_refused() {
        for ct in [
            format!("x{BINARY_MIME};json-header-size=1"),
            format!("text/plain, {BINARY_MIME};json-header-size=1"),
            format!("{BINARY_MIME};json-header-size=abc"),
            format!("{BINARY_MIME};json-header-size=-1"),
            format!("{BINARY_MIME};json-header-size=+1"),
            format!("{BINARY_MIME};json-header-size=1.5"),
            format!("{BINARY_MIME};json-header-size="),
            format!("{BINARY_MIME};json-header-size=4294967296"),
            format!("{BINARY_MIME};json-header-size=99999999999999999999999"),
            format!("{BINARY_MIME};json-header-size=11"),
            format!("{BINARY_MIME}x;json-header-size=1"),
            format!("{BINARY_MIME};garbage"),
        ] {
            assert!(
                matches!(size(&ct, 10), Err(ProtocolError::BadRequest(_))),
                "accepted {ct}"
            );
        }
    }

    #[test]
    fn largest_32_bit_size_is_accepted_when_the_body_has_it() {
        let ct = format!("{BINARY_MIME};json-header-size=4294967295");
        assert!(size(&ct, 10).is_err());
        assert_eq!(size(&ct, 4_294_967_295), Ok(Some(4_294_967_295)));
    }

    #[test]
    fn response_content_type_round_trips() {
        let ct = binary_content_type(42);
        assert_eq!(size(&ct, 100), Ok(Some(42)));
    }
}

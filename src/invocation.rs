//! What SageMaker says about an invocation in its headers, gathered once per request and carried
//! to the inference path, where payload plugins read it. Plain data, below `http` and `plugins`
//! alike.

use http::HeaderMap;

/// `X-Amzn-SageMaker-Model-Query-String`: the query string a client set for its invocation.
pub const QUERY_STRING_HEADER: &str = "x-amzn-sagemaker-model-query-string";
/// `X-Amzn-SageMaker-Model-Invocation-Path`: the invocation path a client set.
pub const INVOCATION_PATH_HEADER: &str = "x-amzn-sagemaker-model-invocation-path";

/// SageMaker's per-invocation headers. Unknown headers are ignored, as SageMaker expects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// `X-Amzn-SageMaker-Custom-Attributes`: opaque, for the container's own use.
    pub custom_attributes: Option<String>,
    /// `X-Amzn-SageMaker-Inference-Id`.
    pub inference_id: Option<String>,
    /// `X-Amzn-SageMaker-Target-Variant`.
    pub target_variant: Option<String>,
    /// `X-Amzn-SageMaker-Target-Model` (multi-model endpoints).
    pub target_model: Option<String>,
    /// `Content-Type`: the media type of the request body.
    pub content_type: Option<String>,
    /// `Accept`: the media types the client takes in the response.
    pub accept: Option<String>,
}

fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .filter(|v| !v.is_empty())
}

/// Characters of an inference id kept in log lines; a longer one is cut and marked with `…`.
const LOG_ID_CHARS: usize = 128;

/// `X-Amzn-SageMaker-Inference-Id` as every log line of its request carries it: visible ASCII
/// kept, every other byte (spaces, controls, non-ASCII) written `?`, at most `LOG_ID_CHARS` (128)
/// characters. A client cannot forge log structure or flood a line with it.
pub fn log_id(headers: &HeaderMap) -> Option<String> {
    let bytes = headers.get("x-amzn-sagemaker-inference-id")?.as_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut id: String = bytes
        .iter()
        .take(LOG_ID_CHARS)
        .map(|&b| {
            if b.is_ascii_graphic() && b != b'"' && b != b'\\' {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    if bytes.len() > LOG_ID_CHARS {
        id.push('…');
    }
    Some(id)
}

impl Invocation {
    /// Reads the headers of a request; one that is empty or not ASCII text is taken as absent.
    pub fn from_headers(headers: &HeaderMap) -> Invocation {
        Invocation {
            custom_attributes: text(headers, "x-amzn-sagemaker-custom-attributes"),
            inference_id: text(headers, "x-amzn-sagemaker-inference-id"),
            target_variant: text(headers, "x-amzn-sagemaker-target-variant"),
            target_model: text(headers, "x-amzn-sagemaker-target-model"),
            content_type: text(headers, "content-type"),
            accept: text(headers, "accept"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ids_are_visible_ascii_and_short() {
        let id = |value: &[u8]| {
            let mut headers = HeaderMap::new();
            headers.insert(
                "x-amzn-sagemaker-inference-id",
                http::HeaderValue::from_bytes(value).unwrap(),
            );
            log_id(&headers)
        };
        assert_eq!(id(b"req-1/abc:2").as_deref(), Some("req-1/abc:2"));
        assert_eq!(id(b"a b\t\"c\\\xc3\xa9").as_deref(), Some("a?b??c???"));
        assert_eq!(id(b""), None);
        let long = id(&[b'x'; 300]).unwrap();
        assert_eq!(long, format!("{}…", "x".repeat(LOG_ID_CHARS)));
        assert_eq!(log_id(&HeaderMap::new()), None);
    }

    #[test]
    fn reads_sagemaker_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "X-Amzn-SageMaker-Custom-Attributes",
            "trace=1".parse().unwrap(),
        );
        headers.insert("X-Amzn-SageMaker-Target-Model", "m.tar.gz".parse().unwrap());
        headers.insert("x-amzn-sagemaker-inference-id", "".parse().unwrap());
        let invocation = Invocation::from_headers(&headers);
        assert_eq!(invocation.custom_attributes.as_deref(), Some("trace=1"));
        assert_eq!(invocation.target_model.as_deref(), Some("m.tar.gz"));
        assert_eq!(invocation.inference_id, None);
    }
}

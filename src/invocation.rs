//! What SageMaker says about an invocation in its headers, gathered once per request and carried
//! to the inference path, where payload plugins read it. Plain data, below `http` and `plugins`
//! alike.

use http::HeaderMap;

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
    pub content_type: Option<String>,
    pub accept: Option<String>,
}

fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .filter(|v| !v.is_empty())
}

impl Invocation {
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

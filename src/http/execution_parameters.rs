//! `GET /execution-parameters`: the batch transform settings SageMaker asks for.

use http::{HeaderValue, Response, header};

use super::AppState;
use super::body::ResponseBody;

/// The settings as JSON: the configured batch transform's, else SageMaker's defaults.
pub fn answer<E>(state: &AppState<E>) -> Response<ResponseBody> {
    let (concurrent, strategy, payload) = match &state.config.batch {
        Some(batch) => (
            batch.max_concurrent_transforms,
            batch.batch_strategy.as_str(),
            batch.max_payload_in_mb,
        ),
        None => (1, "MULTI_RECORD", 6),
    };
    let json = serde_json::json!({
        "MaxConcurrentTransforms": concurrent,
        "BatchStrategy": strategy,
        "MaxPayloadInMB": payload,
    });
    let mut response = Response::new(ResponseBody::full(json.to_string()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

//! `POST /plugins/reload`: the plugin manifest loaded again and swapped in whole; requests in
//! flight keep the set they started with, and on any error the old set stays.

use http::{HeaderValue, Response, header};

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use crate::engine::Engine;

/// `{"plugins": <count>}` once the new set serves, else why not (the old set serving still).
pub async fn reload<E: Engine>(state: &AppState<E>) -> Result<Response<ResponseBody>, ApiError> {
    let count = state
        .reload_plugins()
        .await
        .map_err(ApiError::plugin_reload)?;
    let body = serde_json::json!({ "plugins": count }).to_string();
    let mut response = Response::new(ResponseBody::full(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

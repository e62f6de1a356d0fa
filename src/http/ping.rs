//! `GET /ping`: SageMaker's health check.

use http::{HeaderMap, Response, StatusCode};

use super::body::ResponseBody;
use super::error::ApiError;
use super::restricted::{Category, missing_header};
use super::{AppState, restricted_error};
use crate::config::PingMode;
use crate::engine::Engine;

/// 200 with an empty body when the server is ready (or live, in `live` mode), else 400.
pub fn ping<E: Engine>(
    state: &AppState<E>,
    headers: &HeaderMap,
) -> Result<Response<ResponseBody>, ApiError> {
    if let Some(header) = missing_header(&state.config.restrictions, Category::Health, headers) {
        return Err(restricted_error(header));
    }
    let (healthy, what) = match state.config.ping_mode {
        PingMode::Ready => (state.engine.is_ready(), "ready"),
        PingMode::Live => (state.engine.is_live(), "live"),
    };
    if let Some((model, why)) = state.recovery.unhealthy() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("model {model} lost its process and could not be reloaded: {why}"),
        ));
    }
    if healthy.map_err(ApiError::from_engine)? {
        Ok(Response::new(ResponseBody::empty()))
    } else {
        Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("server is not {what}"),
        ))
    }
}

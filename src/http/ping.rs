//! `GET /ping`: SageMaker's health check.

use http::{HeaderMap, Response, StatusCode};

use super::body::ResponseBody;
use super::error::ApiError;
use super::restricted::{Category, missing_header};
use super::{AppState, restricted_error};
use crate::config::PingMode;
use crate::engine::{Engine, HealthCheck};

/// 200 with an empty body when the engine is healthy: ready (or live, in `live` mode), with no
/// model that lost its process; else 400 with why.
pub fn ping<E: Engine>(
    state: &AppState<E>,
    headers: &HeaderMap,
) -> Result<Response<ResponseBody>, ApiError> {
    if let Some(header) = missing_header(&state.config.restrictions, Category::Health, headers) {
        return Err(restricted_error(header));
    }
    let check = match state.config.ping_mode {
        PingMode::Ready => HealthCheck::Ready,
        PingMode::Live => HealthCheck::Live,
    };
    match state.engine.health(check) {
        Ok(()) => Ok(Response::new(ResponseBody::empty())),
        Err(why) => Err(ApiError::new(StatusCode::BAD_REQUEST, why)),
    }
}

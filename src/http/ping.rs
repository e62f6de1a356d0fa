//! `GET /ping`: SageMaker's health check.

use http::Response;

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use crate::config::PingMode;
use crate::engine::{Engine, HealthCheck};

/// 200 with an empty body when the engine is healthy: ready (or live, in `live` mode), with no
/// model that lost its process, the single-model endpoint's artifact not refused, and a
/// multi-model endpoint able to load (not every load slot held by a load past its time-out);
/// else 400 with why. (Its restriction is checked by the router,
/// as every route's.)
pub fn ping<E: Engine>(state: &AppState<E>) -> Result<Response<ResponseBody>, ApiError> {
    if let Some(refusal) = &state.refused {
        return Err(ApiError::unhealthy(refusal.clone()));
    }
    if let Some(why) = state.registry.cannot_load() {
        return Err(ApiError::unhealthy(why));
    }
    let check = match state.config.ping_mode {
        PingMode::Ready => HealthCheck::Ready,
        PingMode::Live => HealthCheck::Live,
    };
    match state.engine.health(check) {
        Ok(()) => Ok(Response::new(ResponseBody::empty())),
        Err(why) => Err(ApiError::unhealthy(why)),
    }
}

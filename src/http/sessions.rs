//! Stateful sessions on the inference routes (`/invocations`, `/models/{name}/invoke`): a
//! `NEW_SESSION` or `CLOSE` request is answered here; any other request in a session waits for
//! its turn and runs as a request of the session's sequence. With sessions off, nothing here
//! runs and the session header is ignored.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use super::AppState;
use super::body::{ResponseBody, json_response};
use super::error::ApiError;
use crate::engine::Engine;
use crate::sessions::{
    CLOSED_SESSION_HEADER, NEW_SESSION_HEADER, SESSION_HEADER, SessionControl, SessionError,
    SessionTurn, classify, end_sequence, format_utc,
};

/// What an inference request does next, sessions considered.
pub enum Step {
    /// It was a session's `NEW_SESSION` or `CLOSE`: this is the answer.
    Answered(Response<ResponseBody>),
    /// It runs, in the session whose turn this is, or outside any.
    Run(Option<SessionTurn>),
}

impl From<SessionError> for ApiError {
    fn from(error: SessionError) -> ApiError {
        let status = match error {
            SessionError::Full(_) => StatusCode::TOO_MANY_REQUESTS,
            SessionError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            SessionError::Invalid(_) | SessionError::Unknown(_) | SessionError::WrongModel(_) => {
                StatusCode::BAD_REQUEST
            }
        };
        ApiError::new(status, error.message())
    }
}

/// The session step of a request to `model` (the engine's name for it).
pub async fn step<E: Engine>(
    state: &AppState<E>,
    model: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Step, ApiError> {
    let Some(sessions) = &state.sessions else {
        return Ok(Step::Run(None));
    };
    match classify(headers, body)? {
        SessionControl::None => Ok(Step::Run(None)),
        SessionControl::Use(id) => Ok(Step::Run(Some(sessions.turn(id, model).await?))),
        SessionControl::Create => {
            let stateful = state
                .engine
                .has_sequence_batching(model)
                .map_err(ApiError::from_engine)?;
            let (session, expires) = sessions.create(model, stateful)?;
            tracing::info!(model, stateful, "session opened");
            let expires = format_utc(expires);
            let value = format!("{}; Expires={expires}", session.id);
            let body = serde_json::json!({ "session_id": session.id, "expires": expires });
            Ok(Step::Answered(answer(NEW_SESSION_HEADER, &value, body)))
        }
        SessionControl::Close(id) => {
            // As for unloads: the close, and the END it sends the model, finish even if the
            // client goes away meanwhile (the session has left the table by then).
            let (sessions, engine) = (Arc::clone(sessions), state.engine.clone());
            let (owned_id, owned_model) = (id.to_owned(), model.to_owned());
            let closing = tokio::spawn(async move {
                let ended = sessions.close(&owned_id, &owned_model).await?;
                if ended.needs_end() {
                    end_sequence(&engine, &ended.session).await;
                }
                Ok::<_, SessionError>(())
            });
            closing.await.map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the session's close failed: {e}"),
                )
            })??;
            tracing::info!(model, "session closed");
            let body = serde_json::json!({ "closed_session_id": id });
            Ok(Step::Answered(answer(CLOSED_SESSION_HEADER, id, body)))
        }
    }
}

/// Expires idle sessions until the server's state is dropped: every second (or twice per
/// expiration when that is shorter), with or without traffic. A stateful model is sent the end
/// of each expired session's sequence.
pub async fn expire_idle<E: Engine>(state: Weak<AppState<E>>) {
    let Some(period) = state.upgrade().and_then(|state| {
        let settings = state.sessions.as_ref()?.settings();
        Some((settings.expiration / 2).clamp(Duration::from_millis(50), Duration::from_secs(1)))
    }) else {
        return;
    };
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(state) = state.upgrade() else { return };
        let Some(sessions) = &state.sessions else {
            return;
        };
        for ended in sessions.expire_idle(Instant::now()) {
            tracing::info!(model = %ended.session.model, "session expired");
            if ended.needs_end() {
                let engine = state.engine.clone();
                tokio::spawn(async move { end_sequence(&engine, &ended.session).await });
            }
        }
    }
}

/// Refuses a session's request on a route that does not serve sessions.
pub fn refuse_elsewhere<E>(state: &AppState<E>, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.sessions.is_some() && headers.contains_key(SESSION_HEADER) {
        return Err(ApiError::bad_request(
            "sessions (X-Amzn-SageMaker-Session-Id) are served on /invocations and \
             /models/{name}/invoke only",
        ));
    }
    Ok(())
}

fn answer(name: &'static str, value: &str, body: serde_json::Value) -> Response<ResponseBody> {
    let mut response = json_response(body.to_string().into_bytes());
    // Session ids are visible ASCII (checked, or trident's own hex), and so is the timestamp.
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
    response
}

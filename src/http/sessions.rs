//! Stateful sessions on the inference routes (`/invocations`, `/models/{name}/invoke`), framed
//! for HTTP: a `NEW_SESSION` or `CLOSE` request is answered here; any other request in a session
//! waits for its turn and runs as a request of the session's sequence. What a session does lives
//! in [`crate::sessions`]. With sessions off, nothing here runs and the session header is
//! ignored.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response};

use super::AppState;
use super::body::{ResponseBody, json_response};
use super::error::ApiError;
use crate::engine::Engine;
use crate::sessions::{
    CLOSED_SESSION_HEADER, NEW_SESSION_HEADER, SESSION_HEADER, SessionControl, SessionError,
    SessionTurn, classify, format_utc,
};

/// What an inference request does next, sessions considered.
pub enum Step {
    /// It was a session's `NEW_SESSION` or `CLOSE`: this is the answer.
    Answered(Response<ResponseBody>),
    /// It runs, in the session whose turn this is, or outside any.
    Run(Option<SessionTurn>),
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
            let (session, expires) = sessions.open(model)?;
            let expires = format_utc(expires);
            let value = format!("{}; Expires={expires}", session.id);
            let body = serde_json::json!({ "session_id": session.id, "expires": expires });
            Ok(Step::Answered(answer(NEW_SESSION_HEADER, &value, body)))
        }
        SessionControl::Close(id) => {
            sessions.close(id, model).await?;
            let body = serde_json::json!({ "closed_session_id": id });
            Ok(Step::Answered(answer(CLOSED_SESSION_HEADER, id, body)))
        }
    }
}

/// Refuses a session's request on a route that does not serve sessions.
pub fn refuse_elsewhere<E>(state: &AppState<E>, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.sessions.is_some() && headers.contains_key(SESSION_HEADER) {
        return Err(ApiError::from(SessionError::Invalid(
            "sessions (X-Amzn-SageMaker-Session-Id) are served on /invocations and \
             /models/{name}/invoke only"
                .into(),
        )));
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

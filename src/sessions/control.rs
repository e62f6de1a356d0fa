//! What a request's `X-Amzn-SageMaker-Session-Id` header and body ask of the session table.
//!
//! The convention (AWS's model-hosting container standards, as vLLM and LMI implement it):
//! `NEW_SESSION` in the header with the body `{"requestType": "NEW_SESSION"}` opens a session;
//! a session's id in the header runs the request in it, or closes it when the body is
//! `{"requestType": "CLOSE"}`. A body is a control body only when it is a JSON object with the
//! one key `requestType`, so a model's payload is never mistaken for one.

use http::HeaderMap;
use serde::Deserialize;

use super::SessionError;

/// `X-Amzn-SageMaker-Session-Id`.
pub const SESSION_HEADER: &str = "x-amzn-sagemaker-session-id";

/// The header value that asks for a new session.
const NEW_SESSION: &str = "NEW_SESSION";
/// The `requestType` that closes a session.
const CLOSE: &str = "CLOSE";

/// Longest session id taken from a client; trident's own are 32 characters.
const MAX_ID_BYTES: usize = 256;
/// Bodies longer than this are never control bodies (and are not parsed for one).
const MAX_CONTROL_BODY_BYTES: usize = 256;

/// What a request asks of the session table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionControl<'a> {
    /// No session: the request runs as it would without sessions.
    None,
    /// Open a session.
    Create,
    /// Run the request in the session with this id.
    Use(&'a str),
    /// Close the session with this id.
    Close(&'a str),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ControlBody<'a> {
    #[serde(rename = "requestType", borrow)]
    request_type: std::borrow::Cow<'a, str>,
}

/// The `requestType` of a control body, or `None` for any other body.
fn control_request(body: &[u8]) -> Option<String> {
    if body.len() > MAX_CONTROL_BODY_BYTES || body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice::<ControlBody>(body)
        .ok()
        .map(|control| control.request_type.into_owned())
}

/// What the request with `headers` and `body` asks (sessions being enabled).
pub fn classify<'h>(
    headers: &'h HeaderMap,
    body: &[u8],
) -> Result<SessionControl<'h>, SessionError> {
    let request_type = control_request(body);
    let Some(value) = headers.get(SESSION_HEADER) else {
        // Without the header only the convention's own bodies are claimed: a model's payload
        // that happens to be `{"requestType": "<other>"}` runs as it is.
        return match request_type.filter(|kind| kind == NEW_SESSION || kind == CLOSE) {
            Some(kind) => Err(SessionError::Invalid(format!(
                "a {kind} request needs the X-Amzn-SageMaker-Session-Id header ({})",
                if kind == NEW_SESSION {
                    "NEW_SESSION"
                } else {
                    "the session's id"
                }
            ))),
            None => Ok(SessionControl::None),
        };
    };
    let id = session_id(value.as_bytes())?;
    if let Some(kind) = request_type.as_deref()
        && kind != NEW_SESSION
        && kind != CLOSE
    {
        return Err(SessionError::Invalid(format!(
            "unknown requestType '{}': a session's request types are NEW_SESSION and CLOSE",
            kind.escape_debug()
        )));
    }
    match (id, request_type.as_deref()) {
        (NEW_SESSION, Some(NEW_SESSION)) => Ok(SessionControl::Create),
        (NEW_SESSION, None) if body.trim_ascii().is_empty() => Ok(SessionControl::Create),
        (NEW_SESSION, _) => Err(SessionError::Invalid(
            "a NEW_SESSION request's body is {\"requestType\": \"NEW_SESSION\"}".into(),
        )),
        (_, Some(NEW_SESSION)) => Err(SessionError::Invalid(
            "a NEW_SESSION request carries X-Amzn-SageMaker-Session-Id: NEW_SESSION, not a \
             session's id"
                .into(),
        )),
        (id, Some(_)) => Ok(SessionControl::Close(id)),
        (id, None) => Ok(SessionControl::Use(id)),
    }
}

/// The header's value as a session id: 1 to 256 bytes of visible ASCII.
fn session_id(value: &[u8]) -> Result<&str, SessionError> {
    let visible = value.iter().all(|b| b.is_ascii_graphic());
    if value.is_empty() || value.len() > MAX_ID_BYTES || !visible {
        return Err(SessionError::Invalid(format!(
            "X-Amzn-SageMaker-Session-Id must be 1 to {MAX_ID_BYTES} visible ASCII characters"
        )));
    }
    // Visible ASCII is UTF-8.
    std::str::from_utf8(value).map_err(|_| SessionError::Invalid("not ASCII".into()))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn ask(header: Option<&[u8]>, body: &str) -> Result<SessionControl<'static>, SessionError> {
        let mut headers = HeaderMap::new();
        if let Some(value) = header {
            headers.insert(SESSION_HEADER, HeaderValue::from_bytes(value).unwrap());
        }
        let headers: &'static HeaderMap = Box::leak(Box::new(headers));
        classify(headers, body.as_bytes())
    }

    #[test]
    fn reads_the_convention() {
        let new = br#"{"requestType": "NEW_SESSION"}"#;
        let new = std::str::from_utf8(new).unwrap();
        assert_eq!(ask(None, "{}"), Ok(SessionControl::None));
        assert_eq!(
            ask(None, r#"{"requestType":"x","inputs":[]}"#),
            Ok(SessionControl::None)
        );
        assert_eq!(
            ask(None, r#"{"requestType":"x"}"#),
            Ok(SessionControl::None)
        );
        assert_eq!(ask(Some(b"NEW_SESSION"), new), Ok(SessionControl::Create));
        assert_eq!(ask(Some(b"NEW_SESSION"), " "), Ok(SessionControl::Create));
        assert_eq!(
            ask(Some(b"abc"), r#" {"requestType":"CLOSE"}"#),
            Ok(SessionControl::Close("abc"))
        );
        assert_eq!(
            ask(Some(b"abc"), r#"{"inputs":[]}"#),
            Ok(SessionControl::Use("abc"))
        );
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let invalid = |header: Option<&[u8]>, body: &str| {
            let Err(SessionError::Invalid(message)) = ask(header, body) else {
                panic!("{header:?} {body} was taken");
            };
            message
        };
        assert!(invalid(None, r#"{"requestType":"CLOSE"}"#).contains("session's id"));
        assert!(invalid(None, r#"{"requestType":"NEW_SESSION"}"#).contains("NEW_SESSION"));
        assert!(invalid(Some(b"abc"), r#"{"requestType":"NEW_SESSION"}"#).contains("not a"));
        assert!(invalid(Some(b"NEW_SESSION"), r#"{"inputs":[]}"#).contains("body is"));
        assert!(invalid(Some(b"NEW_SESSION"), r#"{"requestType":"CLOSE"}"#).contains("body is"));
        assert!(invalid(Some(b"abc"), r#"{"requestType":"OPEN"}"#).contains("OPEN"));
        for bad in [&b"a b"[..], b"\xc3\xa9", b"a\tb", &[b'x'; 257]] {
            assert!(
                invalid(Some(bad), "{}").contains("visible ASCII"),
                "{bad:?}"
            );
        }
    }
}

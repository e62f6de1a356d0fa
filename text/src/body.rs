//! Which texts a request body holds.
//!
//! - `text/plain` (UTF-8, the default charset; any other charset is 415), or no Content-Type:
//!   the body is one text;
//! - `application/json`: a string, or a list of strings; or an object whose field holds one of
//!   those: the configured field, else the first of `inputs` (Hugging Face, as SageMaker's
//!   Hugging Face containers take it), `text`, `instances` (TensorFlow Serving) the object has.
//!
//! Anything else is 415. A body holds at most `max_texts` texts; their lengths are checked by
//! [`crate::encode`] before they are tokenized.

use serde_json::Value;

use crate::{Error, Limits};

/// The media types a body may have, for errors.
pub const TAKES: &str = "text/plain (UTF-8) or application/json with texts";

/// The fields of a JSON object tried for texts, in order, when none is configured.
pub const FIELDS: [&str; 3] = ["inputs", "text", "instances"];

/// The essence of a Content-Type (`text/plain; charset=utf-8` → `text/plain`), lower-cased, and
/// its charset, if it names one.
fn media_type(content_type: &str) -> (String, Option<String>) {
    let mut parts = content_type.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let charset = parts.find_map(|parameter| {
        let (name, value) = parameter.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_ascii_lowercase())
    });
    (essence, charset)
}

/// The texts `body` holds; `field`: the JSON field that holds them (`None`: [`FIELDS`]).
pub fn texts(
    content_type: Option<&str>,
    body: &[u8],
    field: Option<&str>,
    limits: &Limits,
) -> Result<Vec<String>, Error> {
    let (essence, charset) = content_type.map_or(("text/plain".to_owned(), None), media_type);
    let texts = match essence.as_str() {
        "text/plain" => {
            if let Some(charset) = charset.filter(|c| c != "utf-8" && c != "utf8") {
                return Err(Error::Unsupported(format!(
                    "this endpoint takes text in UTF-8, not charset={charset}"
                )));
            }
            vec![utf8(body)?]
        }
        "application/json" => from_json(body, field)?,
        other => {
            return Err(Error::Unsupported(format!(
                "this endpoint takes {TAKES}, not {other}"
            )));
        }
    };
    if texts.is_empty() {
        return Err(Error::BadRequest("the body holds no text".into()));
    }
    if texts.len() > limits.max_texts {
        return Err(Error::BadRequest(format!(
            "the body holds {} texts; this endpoint takes at most {} per request",
            texts.len(),
            limits.max_texts
        )));
    }
    Ok(texts)
}

/// `body` as text, or a 400 naming the first byte that is not UTF-8.
fn utf8(body: &[u8]) -> Result<String, Error> {
    let body = body.strip_prefix(b"\xef\xbb\xbf").unwrap_or(body);
    String::from_utf8(body.to_vec()).map_err(|error| {
        Error::BadRequest(format!(
            "the body is not UTF-8: byte {} is not part of a character",
            error.utf8_error().valid_up_to()
        ))
    })
}

/// The texts of a JSON body.
fn from_json(body: &[u8], field: Option<&str>) -> Result<Vec<String>, Error> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| Error::BadRequest(format!("the body is not JSON: {error}")))?;
    let texts = match (&value, field) {
        (Value::Object(object), Some(field)) => object
            .get(field)
            .ok_or_else(|| Error::BadRequest(format!("the JSON object has no field '{field}'")))?,
        (Value::Object(object), None) => FIELDS
            .iter()
            .find_map(|field| object.get(*field))
            .ok_or_else(|| {
                Error::BadRequest(format!(
                    "the JSON object has none of the fields {}",
                    FIELDS.join(", ")
                ))
            })?,
        (other, _) => other,
    };
    match texts {
        Value::String(text) => Ok(vec![text.clone()]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(text.clone()),
                _ => Err(Error::BadRequest(format!(
                    "text {} of the list is not a string",
                    index + 1
                ))),
            })
            .collect(),
        _ => Err(Error::BadRequest(
            "the texts must be a string or a list of strings".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(content_type: Option<&str>, body: &str) -> Result<Vec<String>, Error> {
        texts(content_type, body.as_bytes(), None, &Limits::default())
    }

    #[test]
    fn every_shape_of_body_gives_its_texts() {
        let one = vec!["a b".to_owned()];
        assert_eq!(of(None, "a b").unwrap(), one);
        assert_eq!(of(Some("text/plain; charset=UTF-8"), "a b").unwrap(), one);
        assert_eq!(of(Some("application/json"), r#""a b""#).unwrap(), one);
        assert_eq!(
            of(Some("application/json"), r#"{"inputs":"a b"}"#).unwrap(),
            one
        );
        assert_eq!(
            of(Some("application/json"), r#"{"instances":["x","y"]}"#).unwrap(),
            vec!["x".to_owned(), "y".to_owned()]
        );
        let named = texts(
            Some("application/json"),
            br#"{"inputs":"no","q":["a b"]}"#,
            Some("q"),
            &Limits::default(),
        );
        assert_eq!(named.unwrap(), one);
    }

    #[test]
    fn bodies_without_usable_text_are_refused_with_what_is_wrong() {
        let error = texts(None, b"ok \xff\xfe", None, &Limits::default()).unwrap_err();
        assert_eq!(
            error,
            Error::BadRequest("the body is not UTF-8: byte 3 is not part of a character".into())
        );
        assert!(matches!(
            of(Some("text/plain; charset=latin-1"), "x"),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            of(Some("image/png"), "x"),
            Err(Error::Unsupported(_))
        ));
        for body in [r#"{"inputs":[1]}"#, r#"{"other":"x"}"#, "[]", "{", "7"] {
            assert!(
                matches!(
                    of(Some("application/json"), body),
                    Err(Error::BadRequest(_))
                ),
                "{body}"
            );
        }
        let limits = Limits {
            max_texts: 2,
            ..Limits::default()
        };
        let error = texts(Some("application/json"), br#"["a","b","c"]"#, None, &limits);
        assert!(matches!(error, Err(Error::BadRequest(m)) if m.contains("at most 2")));
    }
}

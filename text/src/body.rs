//! Which texts a request body holds.
//!
//! - `text/plain` (UTF-8, the default charset; any other charset is 415), or no Content-Type:
//!   the body is one text;
//! - `application/json`: a string, or a list of strings; or an object whose field holds one of
//!   those: the configured field, else the first of `inputs` (Hugging Face, as SageMaker's
//!   Hugging Face containers take it), `text`, `instances` (TensorFlow Serving) the object has.
//!   Texts may come in pairs, as Hugging Face's text-classification clients send them: an object
//!   `{"text": ..., "text_pair": ...}` in place of a string (`{"inputs": {"text": ...,
//!   "text_pair": ...}}`, a list of them, or the body itself), and the object's `parameters`
//!   (`truncation`, `max_length`: [`crate::request::Parameters`]) are the request's own.
//!
//! Anything else is 415. A body holds at most `max_texts` rows (a pair is one); their lengths
//! are checked by [`crate::encode`] before they are tokenized.

use serde_json::Value;

use crate::request::{Input, Parameters};
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

/// The texts of one request, each alone or with its pair, and its own parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// One per row, in order.
    pub inputs: Vec<Input>,
    /// The body's `parameters`; none for a text body.
    pub parameters: Parameters,
}

impl Request {
    /// Whether it holds texts alone and sets no parameters: the settings decide everything.
    pub fn is_plain(&self) -> bool {
        self.parameters.is_empty() && self.inputs.iter().all(|input| input.pair.is_none())
    }
}

/// The texts `body` holds; `field`: the JSON field that holds them (`None`: [`FIELDS`]).
pub fn request(
    content_type: Option<&str>,
    body: &[u8],
    field: Option<&str>,
    limits: &Limits,
) -> Result<Request, Error> {
    let (essence, charset) = content_type.map_or(("text/plain".to_owned(), None), media_type);
    let texts = match essence.as_str() {
        "text/plain" => {
            if let Some(charset) = charset.filter(|c| c != "utf-8" && c != "utf8") {
                return Err(Error::Unsupported(format!(
                    "this endpoint takes text in UTF-8, not charset={charset}"
                )));
            }
            Request {
                inputs: vec![Input::single(utf8(body)?)],
                parameters: Parameters::default(),
            }
        }
        "application/json" => from_json(body, field)?,
        other => {
            return Err(Error::Unsupported(format!(
                "this endpoint takes {TAKES}, not {other}"
            )));
        }
    };
    if texts.inputs.is_empty() {
        return Err(Error::BadRequest("the body holds no text".into()));
    }
    if texts.inputs.len() > limits.max_texts {
        return Err(Error::BadRequest(format!(
            "the body holds {} texts; this endpoint takes at most {} per request",
            texts.inputs.len(),
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

/// The texts of a JSON body, and its parameters.
fn from_json(body: &[u8], field: Option<&str>) -> Result<Request, Error> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| Error::BadRequest(format!("the body is not JSON: {error}")))?;
    let (texts, parameters) = match (&value, field) {
        (Value::Object(object), Some(field)) => (
            object.get(field).ok_or_else(|| {
                Error::BadRequest(format!("the JSON object has no field '{field}'"))
            })?,
            object.get("parameters"),
        ),
        // The body is itself one pair.
        (Value::Object(object), None)
            if object.contains_key("text_pair") && !object.contains_key("inputs") =>
        {
            (&value, object.get("parameters"))
        }
        (Value::Object(object), None) => (
            FIELDS
                .iter()
                .find_map(|field| object.get(*field))
                .ok_or_else(|| {
                    Error::BadRequest(format!(
                        "the JSON object has none of the fields {}",
                        FIELDS.join(", ")
                    ))
                })?,
            object.get("parameters"),
        ),
        (other, _) => (other, None),
    };
    let inputs = match texts {
        Value::String(text) => vec![Input::single(text.clone())],
        Value::Object(_) => vec![pair(texts, "the text", std::ptr::eq(texts, &value))?],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(Input::single(text.clone())),
                Value::Object(_) => pair(item, &format!("text {} of the list", index + 1), false),
                _ => Err(Error::BadRequest(format!(
                    "text {} of the list is not a string or a {{\"text\", \"text_pair\"}} object",
                    index + 1
                ))),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(Error::BadRequest(
                "the texts must be a string, a {\"text\", \"text_pair\"} object or a list of them"
                    .into(),
            ));
        }
    };
    let parameters = match parameters {
        None | Some(Value::Null) => Parameters::default(),
        Some(parameters) => Parameters::from_json(parameters)?,
    };
    Ok(Request { inputs, parameters })
}

/// A `{"text": ..., "text_pair": ...}` object (`text_pair` may be left out or null); `what`
/// names it in errors; `body`: the object is the whole body, so it may hold `parameters` too.
/// Other keys are refused, naming them (a misspelt `text_pair` would otherwise tokenize the
/// text alone).
fn pair(object: &Value, what: &str, body: bool) -> Result<Input, Error> {
    let Value::Object(object) = object else {
        return Err(Error::BadRequest(format!("{what} is not an object")));
    };
    if let Some(key) = object.keys().find(|key| {
        !(key.as_str() == "text"
            || key.as_str() == "text_pair"
            || body && key.as_str() == "parameters")
    }) {
        return Err(Error::BadRequest(format!(
            "{what} has a field '{key}'; a text pair is {{\"text\": ..., \"text_pair\": ...}}"
        )));
    }
    let text = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(Error::BadRequest(format!("{what}'s {key} is not a string"))),
    };
    Ok(Input {
        text: text("text")?.ok_or_else(|| Error::BadRequest(format!("{what} has no \"text\"")))?,
        pair: text("text_pair")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts of a body without pairs.
    fn of(content_type: Option<&str>, body: &str) -> Result<Vec<String>, Error> {
        let request = request(content_type, body.as_bytes(), None, &Limits::default())?;
        Ok(request
            .inputs
            .into_iter()
            .map(|input| {
                assert_eq!(input.pair, None);
                input.text
            })
            .collect())
    }

    fn pairs(body: &str) -> Result<Request, Error> {
        request(
            Some("application/json"),
            body.as_bytes(),
            None,
            &Limits::default(),
        )
    }

    #[test]
    fn pairs_and_parameters_are_read_as_hugging_face_clients_send_them() {
        let both = |text: &str, pair: &str| Input {
            text: text.to_owned(),
            pair: Some(pair.to_owned()),
        };
        let one = pairs(r#"{"inputs":{"text":"q","text_pair":"p"},"parameters":{"truncation":"only_second","max_length":9}}"#).unwrap();
        assert_eq!(one.inputs, vec![both("q", "p")]);
        assert_eq!(
            one.parameters.truncation,
            Some(crate::request::Truncation::OnlySecond)
        );
        assert_eq!(one.parameters.max_length, Some(9));
        let list = pairs(r#"{"inputs":[{"text":"a","text_pair":"b"},"c",{"text":"d"},{"text":"e","text_pair":null}]}"#).unwrap();
        assert_eq!(
            list.inputs,
            vec![
                both("a", "b"),
                Input::single("c".into()),
                Input::single("d".into()),
                Input::single("e".into())
            ]
        );
        let body =
            pairs(r#"{"text":"a","text_pair":"b","parameters":{"truncation":false}}"#).unwrap();
        assert_eq!(body.inputs, vec![both("a", "b")]);
        assert_eq!(
            body.parameters.truncation,
            Some(crate::request::Truncation::Refuse)
        );
        for (bad, says) in [
            (
                r#"{"inputs":{"text":"a","text_pairs":"b"}}"#,
                "field 'text_pairs'",
            ),
            (r#"{"inputs":{"text_pair":"b"}}"#, "no \"text\""),
            (
                r#"{"inputs":[{"text":"a","text_pair":7}]}"#,
                "text 1 of the list's text_pair is not a string",
            ),
            (
                r#"{"inputs":{"text":"a","parameters":{}}}"#,
                "field 'parameters'",
            ),
            (
                r#"{"inputs":"a","parameters":{"max_length":"x"}}"#,
                "parameters.max_length",
            ),
            (r#"{"inputs":"a","parameters":7}"#, "parameters must be"),
            (r#"{"text":"a","text_pair":"b","extra":1}"#, "field 'extra'"),
        ] {
            let error = pairs(bad).unwrap_err();
            assert!(
                matches!(&error, Error::BadRequest(m) if m.contains(says)),
                "{bad}: {error}"
            );
        }
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
        let named = request(
            Some("application/json"),
            br#"{"inputs":"no","q":["a b"]}"#,
            Some("q"),
            &Limits::default(),
        );
        assert_eq!(named.unwrap().inputs, vec![Input::single("a b".into())]);
    }

    #[test]
    fn bodies_without_usable_text_are_refused_with_what_is_wrong() {
        let error = request(None, b"ok \xff\xfe", None, &Limits::default()).unwrap_err();
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
        let error = request(Some("application/json"), br#"["a","b","c"]"#, None, &limits);
        assert!(matches!(error, Err(Error::BadRequest(m)) if m.contains("at most 2")));
    }
}

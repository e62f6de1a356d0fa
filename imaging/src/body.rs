//! Which images a request body holds.
//!
//! - `image/jpeg`, `image/png`, `image/webp`, `image/bmp`, `image/gif`, `image/tiff`,
//!   `application/x-image` (SageMaker's image algorithms' type), `application/octet-stream`, or
//!   no Content-Type: the body is one image, its format told by its first bytes;
//! - `application/json`: base64 images in one of the shapes clients send:
//!   a string, or a list of strings; `{"instances": [...]}` (TensorFlow Serving, SageMaker's
//!   TensorFlow container), each a string or `{"b64": "..."}`; `{"inputs": ...}` (Hugging
//!   Face); `{"image": ...}` or `{"images": [...]}`. A string may be a `data:` URL.
//!
//! Anything else is 415. A body holds at most `max_images` images, each at most
//! `max_image_bytes` once decoded from base64.

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::Value;

use crate::{Error, Limits};

/// The media types a body may have, for errors.
pub const TAKES: &str = "image/jpeg, image/png, image/webp, image/bmp, image/gif, image/tiff, \
     application/x-image, application/octet-stream (an image's bytes), or application/json with \
     base64 images";

/// The essence of a Content-Type (`image/jpeg; q=1` → `image/jpeg`), lower-cased.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The encoded images `body` holds.
pub fn images<'a>(
    content_type: Option<&str>,
    body: &'a [u8],
    limits: &Limits,
) -> Result<Vec<Cow<'a, [u8]>>, Error> {
    let kind = content_type.map(essence);
    let images = match kind.as_deref() {
        // Raw bytes, told apart by their first bytes when decoded. `application/octet-stream`
        // is what SageMaker's runtime sends when the client names no type.
        None
        | Some(
            "image/jpeg"
            | "image/jpg"
            | "image/png"
            | "image/webp"
            | "image/bmp"
            | "image/x-ms-bmp"
            | "image/gif"
            | "image/tiff"
            | "application/x-image"
            | "application/octet-stream",
        ) => {
            vec![Cow::Borrowed(body)]
        }
        Some("application/json") => from_json(body, limits)?,
        Some(other) => {
            return Err(Error::Unsupported(format!(
                "this endpoint takes {TAKES}, not {other}"
            )));
        }
    };
    if images.is_empty() {
        return Err(Error::BadRequest("the body holds no image".into()));
    }
    if images.len() > limits.max_images {
        return Err(Error::BadRequest(format!(
            "the body holds {} images; this endpoint takes at most {} per request",
            images.len(),
            limits.max_images
        )));
    }
    for (index, image) in images.iter().enumerate() {
        if image.len() as u64 > limits.max_image_bytes {
            return Err(Error::BadRequest(format!(
                "image {index} is {} bytes; this endpoint takes images of at most {}",
                image.len(),
                limits.max_image_bytes
            )));
        }
    }
    Ok(images)
}

fn from_json<'a>(body: &[u8], limits: &Limits) -> Result<Vec<Cow<'a, [u8]>>, Error> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("the JSON body does not parse: {e}")))?;
    let found = match value {
        Value::Object(mut object) => ["instances", "inputs", "images", "image"]
            .iter()
            .find_map(|key| object.remove(*key))
            .ok_or_else(|| {
                Error::BadRequest(
                    "the JSON body has none of instances, inputs, images, image".into(),
                )
            })?,
        other => other,
    };
    let strings: Vec<Value> = match found {
        Value::Array(items) => items,
        other => vec![other],
    };
    if strings.len() > limits.max_images {
        return Err(Error::BadRequest(format!(
            "the body holds {} images; this endpoint takes at most {} per request",
            strings.len(),
            limits.max_images
        )));
    }
    strings
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let text = match item {
                Value::String(text) => text,
                Value::Object(mut object) => match object.remove("b64") {
                    Some(Value::String(text)) => text,
                    _ => return Err(not_an_image(index)),
                },
                _ => return Err(not_an_image(index)),
            };
            decode_base64(&text)
                .map(Cow::Owned)
                .map_err(|why| Error::BadRequest(format!("image {index}: {why}")))
        })
        .collect()
}

fn not_an_image(index: usize) -> Error {
    Error::BadRequest(format!(
        "image {index} is not a base64 string or {{\"b64\": \"...\"}}"
    ))
}

/// A base64 image (standard or URL-safe alphabet, padded or not), after any `data:...;base64,`
/// prefix.
fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    let text = match text.strip_prefix("data:") {
        Some(url) => url
            .split_once(";base64,")
            .map(|(_, data)| data)
            .ok_or("a data: URL without ;base64,")?,
        None => text,
    };
    let text = text.trim();
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or_else(|| "is not valid base64".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn raw_bodies_and_json_shapes() {
        let raw = images(Some("image/jpeg"), b"\xff\xd8", &limits()).unwrap();
        assert_eq!(raw, vec![Cow::Borrowed(&b"\xff\xd8"[..])]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(b"png!");
        for body in [
            format!("\"{b64}\""),
            format!("[\"{b64}\", \"{b64}\"]"),
            format!("{{\"instances\": [{{\"b64\": \"{b64}\"}}]}}"),
            format!("{{\"inputs\": \"data:image/png;base64,{b64}\"}}"),
            format!("{{\"image\": \"{}\"}}", b64.trim_end_matches('=')),
        ] {
            let found = images(Some("application/json"), body.as_bytes(), &limits()).unwrap();
            assert!(found.iter().all(|i| &**i == b"png!"), "{body}");
        }
    }

    #[test]
    fn hostile_bodies_are_refused_with_their_reason() {
        let refuse = |ct: &str, body: &[u8], says: &str| {
            let error = images(Some(ct), body, &limits()).unwrap_err();
            assert!(error.to_string().contains(says), "{ct}: {error}");
            error
        };
        assert!(matches!(
            refuse("text/csv", b"1,2", "not text/csv"),
            Error::Unsupported(_)
        ));
        refuse("application/json", b"{", "does not parse");
        refuse("application/json", b"{\"x\": 1}", "none of instances");
        refuse("application/json", b"[1]", "image 0 is not a base64 string");
        refuse(
            "application/json",
            b"[\"***\"]",
            "image 0: is not valid base64",
        );
        refuse("application/json", b"[]", "holds no image");
        let many = format!("[{}]", vec!["\"AA==\""; 33].join(","));
        refuse(
            "application/json",
            many.as_bytes(),
            "at most 32 per request",
        );
        let small = Limits {
            max_image_bytes: 3,
            ..limits()
        };
        let error = images(Some("image/png"), b"1234", &small).unwrap_err();
        assert!(error.to_string().contains("4 bytes"), "{error}");
    }
}

//! Whether a JSON body is a KServe v2 inference request, read no further than it takes to tell.
//!
//! A request adapter that takes `application/json` (base64 images, texts, rows) would otherwise
//! also take the bodies of v2 clients, which then cannot reach the model behind it. A v2
//! request's `inputs` is a list of tensor objects, each with a `datatype` and a `shape`; no
//! adapter's format that trident ships looks so (base64 images are strings or `{"b64": …}`,
//! texts strings, rows lists of numbers). The reading stops at the first input's `datatype` and
//! `shape`, or at the first sign it is not one (a key v2 does not have, as `instances`): v2's
//! other keys before `inputs`, and an input's `data` before its `shape`, are skipped without
//! being kept, so a body costs one scan at most, and a v2 client's or an adapter's body usually
//! a few bytes.

use std::fmt;

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What the first error carries when the reading stops early: the verdict.
const IS_V2: &str = "the body is a KServe v2 inference request";

/// Whether `body` is a KServe v2 inference request: a JSON object whose `inputs` is a list of
/// objects, the first with a `datatype` and a `shape`. A body that is not JSON is not one.
pub fn is_v2_inference(body: &[u8]) -> bool {
    let mut reader = serde_json::Deserializer::from_slice(body);
    match reader.deserialize_map(Body) {
        Ok(verdict) => verdict,
        Err(error) => error.to_string().starts_with(IS_V2),
    }
}

/// A visitor's answer to a scalar (a string, a number, a boolean, null): not what it looks for.
macro_rules! not_this {
    () => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
    };
}

/// The body: an object, read until its `inputs`.
struct Body;

impl<'de> Visitor<'de> for Body {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "inputs" => {
                    return match map.next_value_seed(Inputs)? {
                        true => Err(de::Error::custom(IS_V2)),
                        // Any error other than the verdict reads as not v2.
                        false => Err(de::Error::custom("not v2")),
                    };
                }
                // The other keys of a v2 request, skipped to its inputs.
                "id" | "parameters" | "outputs" => map.next_value::<IgnoredAny>()?,
                // A key v2 does not have (`instances`, `image`): not v2, known at once.
                _ => return Ok(false),
            };
        }
        Ok(false)
    }
}

/// `inputs`: a list whose first element is a tensor object.
struct Inputs;

impl<'de> DeserializeSeed<'de> for Inputs {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Inputs {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the inputs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        Ok(seq.next_element_seed(Tensor)?.unwrap_or(false))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<bool, A::Error> {
        Ok(false)
    }

    not_this!();
}

/// One input: an object with a `datatype` and a `shape` is a v2 tensor.
struct Tensor;

impl<'de> DeserializeSeed<'de> for Tensor {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tensor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an input")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (mut datatype, mut shape) = (false, false);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "datatype" => datatype = true,
                "shape" => shape = true,
                _ => {}
            }
            if datatype && shape {
                return Err(de::Error::custom(IS_V2));
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(false)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<bool, A::Error> {
        Ok(false)
    }

    not_this!();
}

#[cfg(test)]
mod tests {
    use super::is_v2_inference;

    #[test]
    fn v2_requests_are_told_from_adapters_formats() {
        for v2 in [
            r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1,2]}]}"#,
            r#"{"id":"x","parameters":{"a":1},"inputs":[{"data":[1,2],"shape":[2],"datatype":"FP32","name":"I"}],"outputs":[]}"#,
            r#" { "inputs" : [ { "shape" : [1], "datatype" : "BYTES" "#,
        ] {
            assert!(is_v2_inference(v2.as_bytes()), "{v2}");
        }
        for other in [
            r#"{"inputs":"aGVsbG8="}"#,
            r#"{"inputs":["aGVsbG8=","aGVsbG8="]}"#,
            r#"{"inputs":[{"b64":"aGVsbG8="}]}"#,
            r#"{"inputs":{"text":"a","text_pair":"b"}}"#,
            r#"{"inputs":[]}"#,
            r#"{"inputs":[[1,2],[3,4]]}"#,
            r#"{"inputs":[{"datatype":"FP32"}]}"#,
            r#"{"instances":[{"b64":"aGVsbG8="}]}"#,
            r#"{"instances":[{"datatype":"FP32","shape":[1]}]}"#,
            r#"["aGVsbG8="]"#,
            r#""aGVsbG8=""#,
            "{",
            "",
            "not json",
            r#"{"image":"x","inputs":7}"#,
        ] {
            assert!(!is_v2_inference(other.as_bytes()), "{other}");
        }
    }

    #[test]
    fn the_reading_stops_at_the_verdict() {
        // A v2 body whose rest is not even JSON is told by its first input.
        let mut body = br#"{"inputs":[{"name":"I","datatype":"FP32","shape":[1]"#.to_vec();
        body.extend(std::iter::repeat_n(b'!', 1 << 20));
        assert!(is_v2_inference(&body));
        // Deep nesting before `inputs` is refused by the reader's depth limit, not a crash.
        let deep = format!("{{\"id\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(!is_v2_inference(deep.as_bytes()));
        // An adapter's body is told by its first key, whatever follows.
        let mut images = br#"{"instances": [{"b64": ""#.to_vec();
        images.extend(std::iter::repeat_n(b'A', 1 << 20));
        assert!(!is_v2_inference(&images));
    }
}

//! The body of `POST /models`: `{"model_name": "<name>", "url": "<path>"}`.

use serde_json::Value;

use crate::protocol::json_syntax::{rapidjson_message, refusal};

/// A parsed load request; both fields are non-empty strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadRequest {
    /// `model_name`: the name SageMaker invokes the model by.
    pub model_name: String,
    /// `url`: the folder SageMaker unpacked the model artifact into, checked later against the
    /// models root.
    pub url: String,
}

/// Parses a load request body; the error is the message for a 400. Other keys are ignored, as
/// Triton's frontend ignores them.
pub fn parse_load_request(body: &[u8]) -> Result<LoadRequest, String> {
    // Numbers serde takes and RapidJSON refuses (`0e400`) are refused as Triton refuses them.
    if let Some(message) = rapidjson_message(body) {
        return Err(message);
    }
    let json: Value = serde_json::from_slice(body)
        .map_err(|e| refusal(body, &e, "failed to parse the request JSON buffer"))?;
    if !json.is_object() {
        return Err("the load request must be a JSON object".into());
    }
    let field = |key: &str| -> Result<String, String> {
        match json.get(key) {
            Some(Value::String(value)) if !value.is_empty() => Ok(value.clone()),
            Some(Value::String(_)) | None => {
                Err(format!("'{key}' is required and must not be empty"))
            }
            Some(_) => Err(format!(
                "'{key}' must be a string: attempt to access JSON non-string as string"
            )),
        }
    };
    let model_name = field("model_name")?;
    check_addressable(&model_name)?;
    Ok(LoadRequest {
        model_name,
        url: field("url")?,
    })
}

/// Refuses a model name that `/models/{name}` and `/models/{name}/invoke` cannot address
/// ([`crate::protocol::model_name::is_addressable`]). A name with `/`, a space or a non-ASCII
/// letter loaded, was journalled, and could never be invoked or unloaded.
pub fn check_addressable(name: &str) -> Result<(), String> {
    if crate::protocol::model_name::is_addressable(name) {
        return Ok(());
    }
    Err(format!(
        "'model_name' {:?} cannot be invoked or unloaded at /models/<name>: a name is made of \
         letters, digits and -._~!$&'()*+,;=:@ (what a URL path segment carries as it is), and \
         is not '.' or '..'",
        name.escape_debug().to_string()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_routes_cannot_address_are_refused() {
        for good in [
            "m",
            "resnet-50_v1.2",
            "a~b!$&'()*+,;=:@",
            "...",
            "model.tar.gz",
        ] {
            assert_eq!(check_addressable(good), Ok(()), "{good}");
        }
        for bad in [
            "a/b",
            "a b",
            ".",
            "..",
            "caf\u{e9}",
            "a%2Fb",
            "a?b",
            "a#b",
            "a\tb",
            "a\\b",
        ] {
            let body = serde_json::json!({"model_name": bad, "url": "/u"}).to_string();
            let refused = parse_load_request(body.as_bytes()).unwrap_err();
            assert!(refused.contains("cannot be invoked"), "{bad}: {refused}");
        }
    }

    #[test]
    fn fields_must_be_non_empty_strings() {
        let ok = parse_load_request(br#"{"model_name":"m","url":"/u","x":1}"#).unwrap();
        assert_eq!((ok.model_name.as_str(), ok.url.as_str()), ("m", "/u"));
        for (body, expected) in [
            (&br#"{"model_name":"m""#[..], "failed to parse"),
            (br#"[1]"#, "must be a JSON object"),
            (br#"{"url":"/u"}"#, "'model_name' is required"),
            (
                br#"{"model_name":"","url":"/u"}"#,
                "'model_name' is required",
            ),
            (
                br#"{"model_name":7,"url":"/u"}"#,
                "'model_name' must be a string",
            ),
            (
                br#"{"model_name":"m","url":null}"#,
                "'url' must be a string",
            ),
        ] {
            let error = parse_load_request(body).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }
}

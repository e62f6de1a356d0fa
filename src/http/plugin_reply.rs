//! A response adapter's reply as an HTTP response. The status, content type, headers and body
//! are the plugin's; the framing of the HTTP message is trident's.
//!
//! - Headers that frame or route the message (`content-length`, `transfer-encoding`,
//!   `connection`, `keep-alive`, `upgrade`, `te`, `trailer`, `proxy-*`), those trident sets
//!   itself (`content-type`, from the reply's own field; `date`; `x-trident-*`, such as the A/B
//!   variant header) are dropped from the reply: counted per plugin in
//!   `trident_plugin_reply_headers_dropped_total` and logged once per plugin. A plugin cannot
//!   promise a length the body does not have, hold a connection open, or say which variant
//!   served a request.
//! - The header block is bounded: at most [`MAX_HEADERS`] headers and [`MAX_HEADER_BYTES`] of
//!   names and values together; a larger one is a 500 naming the plugin.
//! - `X-Amzn-SageMaker-Custom-Attributes` passes to the client (it is how a container answers
//!   custom attributes) when it is at most 1024 visible ASCII characters (spaces and tabs
//!   allowed), else 500.

use http::{HeaderName, HeaderValue, Response, header};

use super::body::ResponseBody;
use super::error::ApiError;
use crate::plugins::LoadedPlugin;
use crate::plugins::PluginReply;

/// The most headers a reply may carry.
pub const MAX_HEADERS: usize = 64;
/// The most bytes of header names and values a reply may carry.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// SageMaker's bound on the custom attributes header.
const MAX_CUSTOM_ATTRIBUTES: usize = 1024;

const CUSTOM_ATTRIBUTES: &str = "x-amzn-sagemaker-custom-attributes";

/// Headers of the reply that trident drops (lower-case names; `proxy-` and `x-trident-` are
/// prefixes).
const TRIDENT_OWNS: [&str; 9] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "content-type",
    "date",
];
const TRIDENT_OWNS_PREFIXES: [&str; 2] = ["proxy-", "x-trident-"];

/// Whether trident keeps `name` (lower case) for itself.
fn owned_by_trident(name: &str) -> bool {
    TRIDENT_OWNS.contains(&name) || TRIDENT_OWNS_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Visible ASCII, spaces and tabs: what SageMaker allows in custom attributes.
fn is_custom_attributes_value(value: &str) -> bool {
    value.len() <= MAX_CUSTOM_ATTRIBUTES
        && value
            .bytes()
            .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
}

/// The reply as an HTTP response; what HTTP cannot carry, or what exceeds the bounds above, is a
/// plugin fault (500 naming the plugin).
pub fn reply_response(
    plugin: &LoadedPlugin,
    reply: PluginReply,
) -> Result<Response<ResponseBody>, ApiError> {
    let name = &*plugin.name;
    let fault = |what: String| ApiError::plugin_fault(name, &what);
    let status = ApiError::reply_status(name, reply.status)?;
    if reply.headers.len() > MAX_HEADERS {
        return Err(fault(format!(
            "replied with {} headers (at most {MAX_HEADERS})",
            reply.headers.len()
        )));
    }
    let header_bytes: usize = reply
        .headers
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Err(fault(format!(
            "replied with {header_bytes} bytes of headers (at most {MAX_HEADER_BYTES})"
        )));
    }
    let content_type = HeaderValue::from_str(&reply.content_type)
        .map_err(|_| fault("replied with an invalid content type".into()))?;

    let mut headers = http::HeaderMap::with_capacity(reply.headers.len() + 1);
    headers.insert(header::CONTENT_TYPE, content_type);
    let mut dropped: Vec<HeaderName> = Vec::new();
    for (name_text, value_text) in reply.headers {
        let header_name = HeaderName::from_bytes(name_text.as_bytes())
            .map_err(|_| fault(format!("replied with an invalid header name '{name_text}'")))?;
        if owned_by_trident(header_name.as_str()) {
            dropped.push(header_name);
            continue;
        }
        if header_name == CUSTOM_ATTRIBUTES && !is_custom_attributes_value(&value_text) {
            return Err(fault(format!(
                "replied with a {CUSTOM_ATTRIBUTES} header that is not at most \
                 {MAX_CUSTOM_ATTRIBUTES} visible ASCII characters"
            )));
        }
        let value = HeaderValue::from_str(&value_text).map_err(|_| {
            fault(format!(
                "replied with an invalid value for header '{name_text}'"
            ))
        })?;
        headers.append(header_name, value);
    }
    if !dropped.is_empty()
        && plugin
            .counters()
            .add_reply_headers_dropped(dropped.len() as u64)
    {
        let names: Vec<&str> = dropped.iter().map(HeaderName::as_str).collect();
        tracing::warn!(
            plugin = name,
            headers = ?names,
            "dropped reply headers that trident sets itself (logged once per plugin; counted in \
             trident_plugin_reply_headers_dropped_total)"
        );
    }
    let mut response = Response::new(ResponseBody::full(reply.body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_routing_and_trident_headers_belong_to_trident() {
        for name in [
            "content-length",
            "transfer-encoding",
            "connection",
            "keep-alive",
            "upgrade",
            "te",
            "trailer",
            "proxy-authenticate",
            "proxy-connection",
            "x-trident-variant",
            "content-type",
        ] {
            assert!(owned_by_trident(name), "{name}");
        }
        for name in [
            "x-amzn-sagemaker-custom-attributes",
            "cache-control",
            "x-model-latency",
            "tea",
        ] {
            assert!(!owned_by_trident(name), "{name}");
        }
    }

    #[test]
    fn custom_attributes_are_visible_ascii_up_to_1024() {
        assert!(is_custom_attributes_value("trace_id=abc, score=0.9"));
        assert!(is_custom_attributes_value(&"a".repeat(1024)));
        assert!(!is_custom_attributes_value(&"a".repeat(1025)));
        assert!(!is_custom_attributes_value("caf\u{e9}"));
        assert!(!is_custom_attributes_value("a\u{7f}b"));
    }
}

//! Server-sent events framing for `generate_stream`: one `data: <json>\n\n` event per response.

use bytes::Bytes;

/// The content type of an event stream, as Triton's frontend answers it.
pub const EVENT_STREAM: &str = "text/event-stream; charset=utf-8";

/// Frames one JSON document as an event. JSON written by trident has no raw newlines, so the
/// document fits one `data:` line.
pub fn event(json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// An error event, sent when a stream fails after it began.
pub fn error_event(message: &str) -> Bytes {
    let mut json = Vec::with_capacity(message.len() + 12);
    json.extend_from_slice(b"{\"error\":");
    super::tensor_data::write_json_string(&mut json, message);
    json.push(b'}');
    event(&json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_data_lines() {
        assert_eq!(&event(b"{\"a\":1}")[..], b"data: {\"a\":1}\n\n");
        assert_eq!(
            &error_event("bad \"x\"\nline")[..],
            b"data: {\"error\":\"bad \\\"x\\\"\\nline\"}\n\n"
        );
    }
}

//! A stream adapter (`trident:plugin@0.2.0`) that passes events through and ends the stream
//! with `[END n]`, or misbehaves on the second event in the way the request's prompt says
//! (the body's `PROMPT`): `trap` panics, `loop` spins forever, `hog` allocates 1 GiB,
//! `newline` returns a payload with a line break, `refuse` returns a plugin error; `end-trap`
//! passes every event and panics at the end.

wit_bindgen::generate!({ world: "stream-adapter-plugin", path: "../../../wit/0.2" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::stream_adapter::{Guest, StreamPosition};
use trident::plugin::types::{Invocation, PluginError};

struct Plugin;

/// The mode: the body's `"PROMPT"` value (the body is a small generate JSON object).
fn mode(invocation: &Invocation) -> String {
    let body = String::from_utf8_lossy(&invocation.body);
    body.split("\"PROMPT\"")
        .nth(1)
        .and_then(|rest| rest.split('"').nth(1))
        .unwrap_or("")
        .to_owned()
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        Ok(())
    }
}

impl Guest for Plugin {
    fn adapt_event(
        invocation: Invocation,
        position: StreamPosition,
        event: Vec<u8>,
    ) -> Result<Vec<String>, PluginError> {
        let event = String::from_utf8(event).map_err(|_| PluginError::Internal("not UTF-8".into()))?;
        if position.index == 1 {
            match mode(&invocation).as_str() {
                "trap" => panic!("the hostile stream adapter traps"),
                "loop" => loop {
                    std::hint::black_box(0u64);
                },
                "hog" => {
                    let hog = vec![1u8; 1 << 30];
                    return Ok(vec![format!("{}", hog.len())]);
                }
                "newline" => return Ok(vec!["one\ntwo".into()]),
                "refuse" => return Err(PluginError::BadRequest("this event is refused".into())),
                _ => {}
            }
        }
        Ok(vec![event])
    }

    fn end_stream(
        invocation: Invocation,
        position: StreamPosition,
    ) -> Result<Vec<String>, PluginError> {
        if mode(&invocation) == "end-trap" {
            panic!("the hostile stream adapter traps at the end");
        }
        Ok(vec![format!("[END {}]", position.index)])
    }
}

export!(Plugin);

//! A stream adapter (`trident:plugin@0.2.0`) that passes events through and ends the stream
//! with `[END n]`, or misbehaves on the second event in the way the request's prompt says
//! (the body's `PROMPT`): `trap` panics, `loop` spins forever, `hog` allocates 1 GiB,
//! `newline` returns a payload with a line break, `refuse` returns a plugin error; `end-trap`
//! passes every event and panics at the end. It keeps what its stream saw in the stream's state
//! (`trident:stream-state`): each event passed is tagged `#n`, its number in the stream as the
//! state counts it, and the end says `[END n seen m]`; `state-hog` tries to keep 64 KiB and one
//! byte, and returns the refusal. Each payload also ends with ` @k`: the calls its instance has
//! served, this one included (1 in a fresh instance), which shows when a stream's calls share
//! one; `leak` leaves 12 MiB behind at every event.

use std::sync::atomic::{AtomicU64, Ordering};

wit_bindgen::generate!({ world: "stream-adapter-plugin", path: "../../../wit/stream-state", generate_all });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::stream_adapter::{Guest, StreamPosition};
use trident::plugin::types::{Invocation, PluginError};
use trident::stream_state::state;

struct Plugin;

/// Calls this instance has served.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Counts this call; how many this instance has served.
fn calls() -> u64 {
    CALLS.fetch_add(1, Ordering::Relaxed) + 1
}

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
        let event =
            String::from_utf8(event).map_err(|_| PluginError::Internal("not UTF-8".into()))?;
        let calls = calls();
        if mode(&invocation) == "leak" {
            std::mem::forget(std::hint::black_box(vec![1u8; 12 << 20]));
        }
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
                "state-hog" => {
                    state::set(&vec![7u8; (64 << 10) + 1]).map_err(PluginError::Internal)?;
                }
                _ => {}
            }
        }
        let seen = seen() + 1;
        state::set(&seen.to_le_bytes()).map_err(PluginError::Internal)?;
        Ok(vec![format!("{event} #{seen} @{calls}")])
    }

    fn end_stream(
        invocation: Invocation,
        position: StreamPosition,
    ) -> Result<Vec<String>, PluginError> {
        let calls = calls();
        if mode(&invocation) == "end-trap" {
            panic!("the hostile stream adapter traps at the end");
        }
        Ok(vec![format!(
            "[END {} seen {} @{calls}]",
            position.index,
            seen()
        )])
    }
}

/// How many events of this stream the state has counted.
fn seen() -> u64 {
    state::get()
        .and_then(|bytes| bytes.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

export!(Plugin);

//! `trident:stream-state/state` (`wit/stream-state`): what a stream adapter keeps from one event of a
//! generate stream to the next, while each call still runs in a fresh instance. One value per
//! stream, held by the stream's pipeline ([`crate::pipeline`]) and lent to each of its calls; it
//! goes with the stream.

use std::sync::Mutex;

use super::store::PluginState;

/// The most bytes a stream's state may hold.
pub const STREAM_STATE_BYTES: usize = 64 << 10;

/// The state of one stream.
#[derive(Debug, Default)]
pub struct StreamState {
    value: Mutex<Option<Vec<u8>>>,
}

impl StreamState {
    /// The state of a stream before its first event: empty.
    pub fn new() -> StreamState {
        StreamState::default()
    }

    fn value(&self) -> std::sync::MutexGuard<'_, Option<Vec<u8>>> {
        // A call that panicked while holding it left a whole value or none: either is usable.
        self.value
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `trident:stream-state/state`: the call's stream's state; outside a stream adapter's call, empty
/// and refusing writes.
impl super::bindings::stream_state::Host for PluginState {
    fn get(&mut self) -> Option<Vec<u8>> {
        self.stream.as_ref()?.value().clone()
    }

    fn set(&mut self, value: Vec<u8>) -> Result<(), String> {
        let Some(stream) = &self.stream else {
            return Err("the call is not a stream adapter's: nothing can be kept".into());
        };
        if value.len() > STREAM_STATE_BYTES {
            return Err(format!(
                "a stream's state holds at most {STREAM_STATE_BYTES} bytes, and this value is {}",
                value.len()
            ));
        }
        *stream.value() = Some(value);
        Ok(())
    }
}

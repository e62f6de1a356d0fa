//! `trident:stream-state/state` (`wit/stream-state`): what a stream adapter keeps from one event of a
//! generate stream to the next, while each call still runs in a fresh instance. One value per
//! stream, held by the stream's pipeline ([`crate::pipeline`]) and lent to each of its calls; it
//! goes with the stream.

use std::sync::Mutex;

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

    /// What the stream's calls kept, if anything.
    pub(in crate::plugins) fn get(&self) -> Option<Vec<u8>> {
        self.value().clone()
    }

    /// Keeps `value`, replacing what was kept; refused past [`STREAM_STATE_BYTES`].
    pub(in crate::plugins) fn set(&self, value: Vec<u8>) -> Result<(), String> {
        if value.len() > STREAM_STATE_BYTES {
            return Err(format!(
                "a stream's state holds at most {STREAM_STATE_BYTES} bytes, and this value is {}",
                value.len()
            ));
        }
        *self.value() = Some(value);
        Ok(())
    }
}

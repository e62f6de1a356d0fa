//! The instance one stream's calls share. A stream adapter is called once per event; a fresh
//! instance for each (taken from the ready set, its memory slot reset after) cost a
//! detokenizing plugin about 70 µs an event, more than its own work. So a stream keeps the
//! instance its first call ran in, for its later calls, while its engine's
//! [`KeepBudget`](super::threads::KeepBudget) allows:
//!
//! - no other stream or request ever gets it: it is dropped (its slot reset in the
//!   background) when the stream ends, fails or its client leaves;
//! - a call that fails (a trap, a time or memory limit) drops it, and the next call takes a
//!   fresh one; so does a call after which its memory has grown past half its limit
//!   ([`CallStore::may_serve_again`]), so that memory calls leave behind cannot pile up;
//! - past the budget, calls take fresh instances as before. A plugin cannot tell which it got
//!   and must not rely on its memory between calls: what it carries from one event to the next
//!   goes in the stream's state (`trident:stream-state`).

use std::any::Any;
use std::sync::{Mutex, MutexGuard};

use super::store::CallStore;
use super::threads::KeepPermit;

/// The instance kept between one stream's calls, when there is one.
#[derive(Default)]
pub struct KeptInstance {
    slot: Mutex<Option<Held>>,
}

/// A kept instance: its store (memory, limits, captured output), the instance of whichever
/// world its plugin exports, and its share of the engine's budget.
struct Held {
    call: CallStore,
    instance: Box<dyn Any + Send>,
    permit: KeepPermit,
}

impl KeptInstance {
    /// None kept yet: the stream's first call takes a fresh instance.
    pub fn new() -> KeptInstance {
        KeptInstance::default()
    }

    fn lock(&self) -> MutexGuard<'_, Option<Held>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept instance, for a call, if there is one of the world `I`; its time limit
    /// restarts now.
    pub(in crate::plugins) fn take<I: Send + 'static>(&self) -> Option<(CallStore, I, KeepPermit)> {
        let held = self.lock().take()?;
        match held.instance.downcast::<I>() {
            Ok(instance) => {
                let mut call = held.call;
                call.arm();
                Some((call, *instance, held.permit))
            }
            // Not the world asked for: callers only keep a stream adapter's, so this does not
            // happen; were it to, the call takes a fresh instance.
            Err(_) => {
                held.call.discard();
                None
            }
        }
    }

    /// Keeps `instance` in `call` for the stream's next call.
    pub(in crate::plugins) fn put<I: Send + 'static>(
        &self,
        call: CallStore,
        instance: I,
        permit: KeepPermit,
    ) {
        let previous = self.lock().replace(Held {
            call,
            instance: Box::new(instance),
            permit,
        });
        if let Some(previous) = previous {
            previous.call.discard();
        }
    }
}

impl Drop for KeptInstance {
    fn drop(&mut self) {
        if let Some(held) = self.lock().take() {
            held.call.discard();
        }
    }
}

//! Stops a run whose every client has gone: one thread per instance watches the requests of the
//! run in progress (every 10 ms) and sets ONNX Runtime's terminate flag once all of them are
//! cancelled, so a model that computes for minutes (a `Loop` with a huge trip count, a client's
//! enormous input) gives its instance back when nobody waits for the answer. Idle, the thread
//! sleeps on a condition variable: no wake-ups.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ort::session::RunOptions;

use crate::ffi;

/// How often a run in progress has its requests checked.
const POLL: Duration = Duration::from_millis(10);

/// A request pointer the watcher may query.
struct Watched(*mut ffi::TRITONBACKEND_Request);

// SAFETY: Triton lets any thread ask whether a request is cancelled; the pointer is only used
// while the run that owns the request holds it in the slot (see `Watch::during`).
unsafe impl Send for Watched {}

/// The run in progress: its requests and its options' terminate flag.
struct Running {
    requests: Vec<Watched>,
    options: Arc<RunOptions>,
}

/// What the instance and its watcher share.
struct Shared {
    slot: Mutex<Option<Running>>,
    wake: Condvar,
    stop: AtomicBool,
}

/// One instance's watcher thread.
pub struct Watch {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    /// Starts the watcher of the instance named `name`.
    pub fn start(name: &str) -> std::io::Result<Watch> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(None),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!(
                "ort-watch-{}",
                name.chars().take(4).collect::<String>()
            ))
            .spawn(move || watch(&theirs))?;
        Ok(Watch {
            shared,
            thread: Some(thread),
        })
    }

    /// Runs `run` with `requests` watched: should all be cancelled, `options` is terminated.
    pub fn during<T>(
        &self,
        requests: &[*mut ffi::TRITONBACKEND_Request],
        options: &Arc<RunOptions>,
        run: impl FnOnce() -> T,
    ) -> T {
        *lock(&self.shared.slot) = Some(Running {
            requests: requests.iter().map(|r| Watched(*r)).collect(),
            options: Arc::clone(options),
        });
        self.shared.wake.notify_one();
        // Cleared whatever `run` does (a panic included), before the requests can be released:
        // the watcher queries them only under the lock, while they are in the slot.
        struct Clear<'a>(&'a Mutex<Option<Running>>);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                *lock(self.0) = None;
            }
        }
        let _clear = Clear(&self.shared.slot);
        run()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The watcher's loop.
fn watch(shared: &Shared) {
    let mut slot = lock(&shared.slot);
    while !shared.stop.load(Ordering::Acquire) {
        let running = match slot.as_ref() {
            None => false,
            Some(running) => {
                let all_gone =
                    !running.requests.is_empty() && running.requests.iter().all(|r| cancelled(r.0));
                if all_gone {
                    let _ = running.options.terminate();
                }
                true
            }
        };
        slot = if running {
            shared
                .wake
                .wait_timeout(slot, POLL)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0)
        } else {
            shared.wake.wait(slot).unwrap_or_else(|p| p.into_inner())
        };
    }
}

/// Whether Triton says the request is cancelled.
fn cancelled(request: *mut ffi::TRITONBACKEND_Request) -> bool {
    let mut cancelled = false;
    // SAFETY: the request is live: it is in the slot, which its run clears (under this lock)
    // before the request is released; the out-pointer is writable.
    let status = unsafe { ffi::TRITONBACKEND_RequestIsCancelled(request, &mut cancelled) };
    if !status.is_null() {
        // SAFETY: a non-null status is an error Triton handed over, ours to delete once.
        unsafe { ffi::TRITONSERVER_ErrorDelete(status) };
        return false;
    }
    cancelled
}

/// Locks, taking over a lock a panic poisoned (the slot is plain data).
fn lock(mutex: &Mutex<Option<Running>>) -> std::sync::MutexGuard<'_, Option<Running>> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

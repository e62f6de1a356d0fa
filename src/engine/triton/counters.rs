//! Process-wide counts of what Triton holds on trident's behalf: requests submitted and not yet
//! released, and output buffers allocated and not yet released. Both return to zero when nothing
//! is in flight, which is how tests prove that cancelled and abandoned requests leak nothing.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::engine::InFlight;

static REQUESTS: AtomicI64 = AtomicI64::new(0);
static OUTPUT_BUFFERS: AtomicI64 = AtomicI64::new(0);

/// A request now belongs to Triton (`InferAsync` succeeded).
pub(super) fn request_submitted() {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// Triton released a request for good.
pub(super) fn request_released() {
    REQUESTS.fetch_sub(1, Ordering::Relaxed);
}

/// The allocator handed Triton an output buffer.
pub(super) fn buffer_allocated() {
    OUTPUT_BUFFERS.fetch_add(1, Ordering::Relaxed);
}

/// Triton released an output buffer.
pub(super) fn buffer_released() {
    OUTPUT_BUFFERS.fetch_sub(1, Ordering::Relaxed);
}

/// The current counts (across every server in the process). A request is counted once
/// `InferAsync` has returned, so a very fast one may be released before it is counted; the
/// reading is clamped at zero and settles as soon as the submitting thread goes on.
pub fn in_flight() -> InFlight {
    InFlight {
        requests: REQUESTS.load(Ordering::Relaxed).max(0).unsigned_abs(),
        output_buffers: OUTPUT_BUFFERS.load(Ordering::Relaxed).max(0).unsigned_abs(),
    }
}

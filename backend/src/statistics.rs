//! The statistics an execute reports to Triton (its per-model inference and batch counters),
//! for both kinds of model the library serves. A failed report is dropped: it changes no answer.

use crate::error::check;
use crate::ffi;

/// Reports one request: whether it succeeded and when its execute and compute ran.
///
/// # Safety
/// `instance` is the live instance of this execute and `request` one of its requests, not yet
/// released.
pub unsafe fn request(
    instance: *mut ffi::TRITONBACKEND_ModelInstance,
    request: *mut ffi::TRITONBACKEND_Request,
    ok: bool,
    exec_start: u64,
    compute_start: u64,
    compute_end: u64,
) {
    // SAFETY: the instance and the request are live (caller's contract).
    let _ = unsafe {
        check(
            ffi::TRITONBACKEND_ModelInstanceReportStatistics(
                instance,
                request,
                ok,
                exec_start,
                compute_start,
                compute_end,
                compute_end,
            ),
            "TRITONBACKEND_ModelInstanceReportStatistics",
        )
    };
}

/// Reports one batch of `rows` rows run by the instance.
///
/// # Safety
/// `instance` is the live instance of this execute.
pub unsafe fn batch(
    instance: *mut ffi::TRITONBACKEND_ModelInstance,
    rows: u64,
    exec_start: u64,
    compute_start: u64,
    compute_end: u64,
) {
    // SAFETY: the instance is live (caller's contract).
    let _ = unsafe {
        check(
            ffi::TRITONBACKEND_ModelInstanceReportBatchStatistics(
                instance,
                rows,
                exec_start,
                compute_start,
                compute_end,
                compute_end,
            ),
            "TRITONBACKEND_ModelInstanceReportBatchStatistics",
        )
    };
}

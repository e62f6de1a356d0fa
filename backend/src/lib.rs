//! trident's own Triton backend: small, exact native models that run inside the Triton core's
//! process, as ONNX, TensorRT and PyTorch models do, so trident's tests and benchmarks exercise
//! the path SageMaker users run (in-process execution, outputs through the response allocator,
//! dynamic and sequence batching) and measure what the frontend itself costs.
//!
//! Triton loads it for models whose configuration says `backend: "trident"`, from
//! `<backends>/trident/libtriton_trident.so` (scripts/build-backend puts it there). Which model a
//! configuration gets, and the failures it can be asked to show, are in [`settings`].
//!
//! This file holds the entry points Triton calls. Each catches panics (none crosses into C) and
//! turns errors into Triton's; everything below them is one owned Rust value per Triton object.

// No function over 80 lines (clippy.toml), as in trident itself; test crates are exempt.
#![warn(clippy::too_many_lines)]

mod clock;
mod dtype;
mod error;
mod execute;
mod ffi;
mod model;
pub mod models;
mod onnxruntime;
mod request;
mod response;
pub mod settings;
mod statistics;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use error::{BackendError, check};
use model::{AnyInstance, AnyModel};

/// Runs `body`, turning its error or its panic into an error Triton takes ownership of.
fn guard(
    entry: &str,
    body: impl FnOnce() -> Result<(), BackendError>,
) -> *mut ffi::TRITONSERVER_Error {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(error)) => error.into_raw(),
        Err(_) => {
            BackendError::internal(format!("the trident backend panicked in {entry}")).into_raw()
        }
    }
}

/// Checks that the core speaks the backend API this backend was written for.
///
/// # Safety
/// Called by Triton once, when it loads the backend.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_Initialize(
    _backend: *mut ffi::TRITONBACKEND_Backend,
) -> *mut ffi::TRITONSERVER_Error {
    guard("TRITONBACKEND_Initialize", || {
        let (mut major, mut minor) = (0u32, 0u32);
        // SAFETY: both out-pointers are writable u32s.
        unsafe {
            check(
                ffi::TRITONBACKEND_ApiVersion(&mut major, &mut minor),
                "TRITONBACKEND_ApiVersion",
            )?
        };
        if major != ffi::TRITONBACKEND_API_VERSION_MAJOR
            || minor < ffi::TRITONBACKEND_API_VERSION_MINOR
        {
            return Err(BackendError::new(
                error::Code::Unsupported,
                format!(
                    "the trident backend needs backend API {}.{} or a later 1.x; this Triton has {major}.{minor}",
                    ffi::TRITONBACKEND_API_VERSION_MAJOR,
                    ffi::TRITONBACKEND_API_VERSION_MINOR
                ),
            ));
        }
        Ok(())
    })
}

/// How Triton stores a backend's pointer on one of its objects (`TRITONBACKEND_ModelSetState`,
/// `TRITONBACKEND_ModelInstanceSetState`).
type SetState<H> =
    unsafe extern "C" fn(*mut H, *mut std::ffi::c_void) -> *mut ffi::TRITONSERVER_Error;
/// How Triton hands that pointer back (`TRITONBACKEND_ModelState`,
/// `TRITONBACKEND_ModelInstanceState`).
type GetState<H> =
    unsafe extern "C" fn(*mut H, *mut *mut std::ffi::c_void) -> *mut ffi::TRITONSERVER_Error;

/// Gives `state` to Triton to keep on `handle` until [`detach`] frees it; frees it at once
/// where Triton refuses it.
///
/// # Safety
/// `handle` is live, `set` is the setter for its kind, and nothing is stored on it yet.
unsafe fn attach<H, T>(
    handle: *mut H,
    state: T,
    set: SetState<H>,
    call: &str,
) -> Result<(), BackendError> {
    let state = Box::into_raw(Box::new(state));
    // SAFETY: `handle` is live (caller's contract); Triton keeps the pointer until `detach`.
    let stored = unsafe { check(set(handle, state.cast()), call) };
    if stored.is_err() {
        // SAFETY: the pointer came from Box::into_raw above and Triton did not keep it.
        drop(unsafe { Box::from_raw(state) });
    }
    stored
}

/// Frees the `T` [`attach`] gave Triton on `handle`, if any.
///
/// # Safety
/// `handle` is live, `get` is the getter for its kind, whatever is stored on it was attached as a
/// `T`, and this runs once, at its finalize.
unsafe fn detach<H, T>(handle: *mut H, get: GetState<H>, call: &str) -> Result<(), BackendError> {
    let mut state = ptr::null_mut();
    // SAFETY: `handle` is live; the out-pointer is writable.
    unsafe { check(get(handle, &mut state), call)? };
    if !state.is_null() {
        // SAFETY: a non-null state is the Box<T> `attach` leaked (caller's contract); finalize
        // runs once, so it is freed once.
        drop(unsafe { Box::from_raw(state.cast::<T>()) });
    }
    Ok(())
}

/// Reads a model's configuration and keeps its settings as the model's state; a configuration
/// the backend cannot serve fails the load with a message that says why.
///
/// # Safety
/// Called by Triton with a live model, once per load.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInitialize(
    model: *mut ffi::TRITONBACKEND_Model,
) -> *mut ffi::TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelInitialize", || {
        // SAFETY: `model` is the live model Triton passed in, with no state yet.
        unsafe {
            let state = AnyModel::load(model)?;
            attach(
                model,
                state,
                ffi::TRITONBACKEND_ModelSetState,
                "TRITONBACKEND_ModelSetState",
            )
        }
    })
}

/// Frees a model's state.
///
/// # Safety
/// Called by Triton once per model, after every instance is finalized.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelFinalize(
    model: *mut ffi::TRITONBACKEND_Model,
) -> *mut ffi::TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelFinalize", || {
        // SAFETY: `model` is live; its state is the ModelState ModelInitialize attached.
        unsafe {
            detach::<_, AnyModel>(
                model,
                ffi::TRITONBACKEND_ModelState,
                "TRITONBACKEND_ModelState",
            )
        }
    })
}

/// Gives a model instance its own state (the model's settings and its sequence sums).
///
/// # Safety
/// Called by Triton with a live instance of a model ModelInitialize accepted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceInitialize(
    instance: *mut ffi::TRITONBACKEND_ModelInstance,
) -> *mut ffi::TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelInstanceInitialize", || {
        let mut model = ptr::null_mut();
        let mut model_state = ptr::null_mut();
        // SAFETY: `instance` is live; its model is live for the instance's lifetime, and its
        // state is the ModelState ModelInitialize set (finalized only after its instances).
        let state = unsafe {
            check(
                ffi::TRITONBACKEND_ModelInstanceModel(instance, &mut model),
                "TRITONBACKEND_ModelInstanceModel",
            )?;
            check(
                ffi::TRITONBACKEND_ModelState(model, &mut model_state),
                "TRITONBACKEND_ModelState",
            )?;
            if model_state.is_null() {
                return Err(BackendError::internal("the model has no state"));
            }
            (*model_state.cast::<AnyModel>()).instance(instance)?
        };
        // SAFETY: `instance` is live, with no state yet.
        unsafe {
            attach(
                instance,
                state,
                ffi::TRITONBACKEND_ModelInstanceSetState,
                "TRITONBACKEND_ModelInstanceSetState",
            )
        }
    })
}

/// Frees a model instance's state.
///
/// # Safety
/// Called by Triton once per instance, after its last execute.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceFinalize(
    instance: *mut ffi::TRITONBACKEND_ModelInstance,
) -> *mut ffi::TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelInstanceFinalize", || {
        // SAFETY: `instance` is live; its state is the InstanceState InstanceInitialize attached.
        unsafe {
            detach::<_, AnyInstance>(
                instance,
                ffi::TRITONBACKEND_ModelInstanceState,
                "TRITONBACKEND_ModelInstanceState",
            )
        }
    })
}

/// Serves a batch of requests. Once the instance's state is found, every request is owned here
/// and answered and released before returning, so the call reports success; only when the
/// state is missing does it return an error, leaving the requests to Triton untouched.
///
/// # Safety
/// Called by Triton with a live instance and `request_count` live requests at `requests`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceExecute(
    instance: *mut ffi::TRITONBACKEND_ModelInstance,
    requests: *mut *mut ffi::TRITONBACKEND_Request,
    request_count: u32,
) -> *mut ffi::TRITONSERVER_Error {
    let mut state = ptr::null_mut();
    // SAFETY: `instance` is live; the out-pointer is writable.
    let found = unsafe {
        check(
            ffi::TRITONBACKEND_ModelInstanceState(instance, &mut state),
            "TRITONBACKEND_ModelInstanceState",
        )
    };
    if let Err(error) = found {
        return error.into_raw();
    }
    if state.is_null() {
        return BackendError::internal("the model instance has no state").into_raw();
    }
    // SAFETY: the state is the InstanceState InstanceInitialize set, freed only at finalize,
    // which Triton never runs during an execute.
    let state = unsafe { &*state.cast::<AnyInstance>() };
    let requests = if request_count == 0 || requests.is_null() {
        &[][..]
    } else {
        // SAFETY: Triton passes `request_count` request pointers at `requests`, valid for the call.
        unsafe { std::slice::from_raw_parts(requests, request_count as usize) }
    };
    // A panic here has already answered and released what it could by unwinding the owned
    // requests; the requests are ours either way, so success is reported.
    // SAFETY: `instance`, `state` and `requests` are this execute's, as `run` requires.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
        match state {
            AnyInstance::Native(state) => execute::run(instance, state, requests),
            AnyInstance::Onnx(state) => onnxruntime::execute::run(instance, state, requests),
        }
    }));
    ptr::null_mut()
}

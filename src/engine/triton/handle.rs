//! Owning Triton's objects, and the three shapes every Triton call takes.
//!
//! - [`Owned`]: one handle type for every object trident creates and deletes (server, options,
//!   message, parameter, unsubmitted request). Its delete function comes with the object's type
//!   ([`TritonObject`]), so there is one `Drop` for all of them.
//! - [`Owned::create`]: call a constructor that writes the new object through an out-pointer,
//!   check its status, take ownership (a null object is an error, not a handle).
//! - [`Owned::set`] and [`Owned::set_text`]: call a setter that takes the object and one value.
//! - `error::out_value` (for plain results such as a flag or a count) and `error::check` (for a
//!   bare status) cover the rest.

use std::os::raw::c_char;
use std::ptr::NonNull;

use super::error::{check, to_cstring};
use super::ffi;
use super::library::Triton;
use crate::engine::{EngineError, ErrorCode};

/// A Triton status: null for success, else an error object the caller owns.
pub(super) type Status = *mut ffi::TRITONSERVER_Error;

/// A Triton object type trident owns, with the function that deletes it.
pub(super) trait TritonObject {
    /// The object's name in messages ("server options").
    const WHAT: &'static str;

    /// Deletes the object.
    ///
    /// # Safety
    /// `ptr` must be a live object of this type that the caller owns and never uses again.
    unsafe fn delete(api: &ffi::TritonServerApi, ptr: *mut Self) -> Status;
}

/// A value a setter takes by copy: no pointer Triton could keep.
pub(super) trait PlainValue: Copy {}
impl PlainValue for bool {}
impl PlainValue for i32 {}
impl PlainValue for u32 {}
impl PlainValue for u64 {}
impl PlainValue for f64 {}

/// One of Triton's setters that takes an object and a plain value (`..._SetExitTimeout`).
pub(super) type Setter<T, V> = unsafe extern "C" fn(*mut T, V) -> Status;

/// One of Triton's setters that takes an object and a C string it copies (`..._SetServerId`).
pub(super) type TextSetter<T> = unsafe extern "C" fn(*mut T, *const c_char) -> Status;

/// An owned Triton object, deleted on drop.
pub(super) struct Owned<T: TritonObject> {
    triton: &'static Triton,
    ptr: NonNull<T>,
}

impl<T: TritonObject> Owned<T> {
    /// Takes ownership of an object a Triton call returned; a null pointer is an internal error.
    ///
    /// # Safety
    /// `ptr` must be null or a live object of type `T` whose ownership passes to the handle.
    pub(super) unsafe fn from_raw(
        triton: &'static Triton,
        ptr: *mut T,
    ) -> Result<Self, EngineError> {
        NonNull::new(ptr)
            .map(|ptr| Owned { triton, ptr })
            .ok_or_else(|| {
                EngineError::new(
                    ErrorCode::Internal,
                    format!("Triton returned a null {}", T::WHAT),
                )
            })
    }

    /// Calls a constructor that writes a new object through its out-pointer, checks the status,
    /// and owns the object.
    ///
    /// # Safety
    /// `construct` must call a Triton function that, when it returns success, has written to the
    /// out-pointer either null or a new object of type `T` owned by the caller.
    pub(super) unsafe fn create(
        triton: &'static Triton,
        construct: impl FnOnce(&mut *mut T) -> Status,
    ) -> Result<Self, EngineError> {
        let mut raw = std::ptr::null_mut();
        check(&triton.api, construct(&mut raw))?;
        // SAFETY: guaranteed by the caller.
        unsafe { Self::from_raw(triton, raw) }
    }

    /// The object, for a Triton call; it stays owned by the handle.
    pub(super) fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// The core the object belongs to.
    pub(super) fn triton(&self) -> &'static Triton {
        self.triton
    }

    /// Gives up ownership, for an object Triton has accepted (a submitted request).
    pub(super) fn into_raw(self) -> NonNull<T> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }

    /// Calls `setter` (one of the object's Triton setters) with `value`.
    pub(super) fn set<V: PlainValue>(
        &self,
        setter: Setter<T, V>,
        value: V,
    ) -> Result<(), EngineError> {
        // SAFETY: the object is live while `self` is; the setters this module is handed are the
        // `TritonServerApi` fields for this object type, which read the value by copy.
        check(&self.triton.api, unsafe { setter(self.as_ptr(), value) })
    }

    /// Calls `setter` with `text` as a C string; `what` names the text when it holds a NUL.
    pub(super) fn set_text(
        &self,
        setter: TextSetter<T>,
        what: &str,
        text: &str,
    ) -> Result<(), EngineError> {
        let text = to_cstring(what, text)?;
        // SAFETY: as in `set`; the string is NUL-terminated and outlives the call, and Triton
        // copies what it keeps.
        check(&self.triton.api, unsafe {
            setter(self.as_ptr(), text.as_ptr())
        })
    }
}

impl<T: TritonObject> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: the object is owned by the handle (`into_raw` forgets the handle) and deleted
        // exactly once, here.
        let status = unsafe { T::delete(&self.triton.api, self.ptr.as_ptr()) };
        if let Err(e) = check(&self.triton.api, status) {
            tracing::warn!(error = %e, "deleting the Triton {} failed", T::WHAT);
        }
    }
}

macro_rules! triton_object {
    ($type:ident, $what:literal, $delete:ident) => {
        impl TritonObject for ffi::$type {
            const WHAT: &'static str = $what;

            unsafe fn delete(api: &ffi::TritonServerApi, ptr: *mut Self) -> Status {
                // SAFETY: guaranteed by the caller (see the trait).
                unsafe { api.$delete(ptr) }
            }
        }
    };
}

triton_object!(TRITONSERVER_Server, "server", TRITONSERVER_ServerDelete);
triton_object!(
    TRITONSERVER_ServerOptions,
    "server options",
    TRITONSERVER_ServerOptionsDelete
);
triton_object!(TRITONSERVER_Message, "message", TRITONSERVER_MessageDelete);
triton_object!(
    TRITONSERVER_InferenceRequest,
    "request",
    TRITONSERVER_InferenceRequestDelete
);

impl TritonObject for ffi::TRITONSERVER_Parameter {
    const WHAT: &'static str = "parameter";

    unsafe fn delete(api: &ffi::TritonServerApi, ptr: *mut Self) -> Status {
        // SAFETY: guaranteed by the caller; this delete cannot fail.
        unsafe { api.TRITONSERVER_ParameterDelete(ptr) };
        std::ptr::null_mut()
    }
}

//! Opens the ONNX Runtime library the backend runs on: `libonnxruntime.so.1` in the backend's
//! own folder (`<backends>/onnxruntime/`, where scripts/install-onnxruntime puts the library of
//! the pinned PyPI wheel), never one found on the loader's search path. Opened once per process
//! and never closed; its API table is handed to `ort`.

use std::ffi::{CStr, CString, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{BackendError, Code};

/// The library's file name in the backend's folder (its soname).
pub const LIBRARY: &str = "libonnxruntime.so.1";

/// ONNX Runtime, opened: its version and the one environment every session is built in.
pub struct Runtime {
    /// The library's version (`1.31.1`).
    pub version: String,
    /// ONNX Runtime's process-wide environment.
    pub environment: ort::environment::Environment,
}

/// The outcome of the one attempt to open the library, shared by every model.
static OPENED: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// Opens ONNX Runtime on first use. Every later call returns the first call's outcome: a
/// library that failed to open is not retried (the folder does not change while the core runs).
pub fn open() -> Result<&'static Runtime, BackendError> {
    OPENED
        .get_or_init(|| {
            let folder = own_folder()?;
            // SAFETY: called once (OnceLock), before any other `ort` call of this process.
            let version = unsafe { open_in(&folder.join(LIBRARY))? };
            let environment = ort::init()
                .with_name("trident-onnxruntime")
                .with_telemetry(false)
                .build()
                .map_err(|e| format!("ONNX Runtime {version} would not start: {e}"))?;
            Ok(Runtime {
                version,
                environment,
            })
        })
        .as_ref()
        .map_err(|message| BackendError::new(Code::Unavailable, message.clone()))
}

/// The folder this backend's own library was loaded from.
fn own_folder() -> Result<PathBuf, String> {
    // SAFETY: `Dl_info` is plain data, valid zeroed; dladdr only writes it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let address = open as *const c_void;
    // SAFETY: `address` is a function of this library; `info` is writable.
    let found = unsafe { libc::dladdr(address, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return Err("the onnxruntime backend cannot find the folder it was loaded from".into());
    }
    // SAFETY: dladdr filled `dli_fname` with a NUL-terminated path the loader owns.
    let file = unsafe { CStr::from_ptr(info.dli_fname) };
    let file = Path::new(std::ffi::OsStr::from_bytes(file.to_bytes()));
    let folder = file.parent().filter(|p| p.is_absolute()).ok_or_else(|| {
        format!(
            "the onnxruntime backend was loaded from {}, not an absolute path",
            file.display()
        )
    })?;
    Ok(folder.to_path_buf())
}

/// Opens `path` and hands its API table to `ort`; returns the library's version.
///
/// # Safety
/// No other `ort` call has run in this process yet, and this runs once.
unsafe fn open_in(path: &Path) -> Result<String, String> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))?;
    // SAFETY: a NUL-terminated path; the handle is kept for the life of the process.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!(
            "the onnxruntime backend cannot open ONNX Runtime at {}: {} (run scripts/install-onnxruntime)",
            path.display(),
            loader_error()
        ));
    }
    // SAFETY: `handle` is a live library handle; the name is NUL-terminated.
    let symbol = unsafe { libc::dlsym(handle, c"OrtGetApiBase".as_ptr()) };
    if symbol.is_null() {
        return Err(format!(
            "{} is not ONNX Runtime: it has no OrtGetApiBase",
            path.display()
        ));
    }
    type GetApiBase = unsafe extern "C" fn() -> *const ort::sys::OrtApiBase;
    // SAFETY: ONNX Runtime's C API declares `const OrtApiBase* OrtGetApiBase(void)`.
    let get_base: GetApiBase = unsafe { std::mem::transmute::<*mut c_void, GetApiBase>(symbol) };
    // SAFETY: OrtGetApiBase takes nothing and returns a pointer to a static table.
    let base = unsafe { get_base() };
    if base.is_null() {
        return Err(format!(
            "{}: OrtGetApiBase returned nothing",
            path.display()
        ));
    }
    // SAFETY: `base` points at the library's static OrtApiBase; GetVersionString returns a
    // static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(((*base).GetVersionString)()) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: GetApi takes a version number and returns a static table or null.
    let api = unsafe { ((*base).GetApi)(ort::sys::ORT_API_VERSION) };
    if api.is_null() {
        return Err(format!(
            "ONNX Runtime {version} at {} does not offer API version {} (this backend needs 1.{} or later)",
            path.display(),
            ort::sys::ORT_API_VERSION,
            ort::sys::ORT_API_VERSION
        ));
    }
    // SAFETY: `api` points at the library's static OrtApi table, which lives as long as the
    // library (never closed); a C struct of function pointers, copied bit for bit.
    ort::set_api(unsafe { std::ptr::read(api) });
    Ok(version)
}

/// The dynamic loader's last error, as text.
fn loader_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl* call.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-null, NUL-terminated (above); copied at once.
    unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned()
}

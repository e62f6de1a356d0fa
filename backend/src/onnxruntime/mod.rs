//! The `onnxruntime` backend: ONNX models served by ONNX Runtime, read and batched as Triton's
//! own onnxruntime backend does (docs/CONTRACT.md, "The onnxruntime backend"), for the cpu image,
//! whose PyPI Triton has no backend for them.
//!
//! It is this library under a second name: scripts/install-onnxruntime installs it as
//! `<backends>/onnxruntime/libtriton_onnxruntime.so` beside `libonnxruntime.so.1` from the
//! pinned `onnxruntime` wheel, and a model whose backend is `onnxruntime` (`platform:
//! "onnxruntime_onnx"`, or a `model.onnx` in its version folder) is served here. Each model
//! instance owns one session; a model's load opens one more only to auto-complete its
//! configuration.

mod autocomplete;
mod config;
pub mod execute;
mod library;
mod session;
mod tensors;
mod types;
mod validate;
mod watch;

use std::ffi::CStr;
use std::path::PathBuf;
use std::ptr;
use std::sync::{Arc, Mutex};

use ort::session::Session;

use crate::error::{BackendError, Code, check};
use crate::ffi;
use crate::model::{config_json, model_name};

use config::OnnxConfig;
use tensors::ModelTensors;

/// The name Triton gives this backend when it loads the library for ONNX models.
pub const BACKEND_NAME: &str = "onnxruntime";

/// A loaded ONNX model: its configuration and its file.
pub struct OnnxModel {
    /// The model's name, for messages.
    name: String,
    /// The configuration, completed where it was left open.
    config: Arc<OnnxConfig>,
    /// The `.onnx` file each instance opens.
    path: PathBuf,
}

/// One instance of an ONNX model: its own session.
pub struct OnnxInstance {
    /// The model's name, for messages.
    pub model: String,
    /// The model's configuration.
    pub config: Arc<OnnxConfig>,
    /// The session. Only the instance's execute thread runs it; the lock makes that a checked
    /// fact (ONNX Runtime's run takes the session mutably).
    pub session: Mutex<Session>,
    /// Stops a run once every one of its clients has gone.
    pub watch: watch::Watch,
}

impl OnnxModel {
    /// Reads the configuration, completes it from the model where Triton allows, and finds the
    /// model's file.
    ///
    /// # Safety
    /// `model` is the model Triton passed to `TRITONBACKEND_ModelInitialize`.
    pub unsafe fn load(model: *mut ffi::TRITONBACKEND_Model) -> Result<OnnxModel, BackendError> {
        // SAFETY: `model` is live for the call (caller's contract).
        let name = unsafe { model_name(model)? };
        let named =
            |e: BackendError| BackendError::new(e.code, format!("model {name}: {}", e.message));
        // SAFETY: as above.
        unsafe { Self::load_named(model, &name) }.map_err(named)
    }

    /// [`OnnxModel::load`] once the name is known.
    ///
    /// # Safety
    /// As [`OnnxModel::load`].
    unsafe fn load_named(
        model: *mut ffi::TRITONBACKEND_Model,
        name: &str,
    ) -> Result<OnnxModel, BackendError> {
        library::open()?;
        // SAFETY: `model` is live (caller's contract).
        let mut json = parse(&unsafe { config_json(model)? })?;
        let first = OnnxConfig::from_json(&json)?;
        // SAFETY: as above.
        let path = session::model_path(&unsafe { version_folder(model)? }, &first.model_file)?;
        // SAFETY: as above.
        if unsafe { auto_complete_allowed(model)? } && autocomplete::needed(&json) {
            let mut probe_options = first.session.clone();
            probe_options.intra_op_threads = 1;
            let probe = session::open(&path, &probe_options)?;
            autocomplete::complete(name, &mut json, &ModelTensors::of(&probe)?)?;
            // SAFETY: as above.
            unsafe { set_config(model, &json)? };
            // The core normalises what it was given; serve what it now holds.
            // SAFETY: as above.
            json = parse(&unsafe { config_json(model)? })?;
        }
        Ok(OnnxModel {
            name: name.to_string(),
            config: Arc::new(OnnxConfig::from_json(&json)?),
            path,
        })
    }

    /// Opens an instance's session and checks the configuration against the model.
    ///
    /// # Safety
    /// `instance` is a live instance of this model.
    pub unsafe fn instance(
        &self,
        instance: *mut ffi::TRITONBACKEND_ModelInstance,
    ) -> Result<OnnxInstance, BackendError> {
        let mut kind = ffi::TRITONSERVER_INSTANCEGROUPKIND_CPU;
        // SAFETY: `instance` is live (caller's contract); the out-pointer is writable.
        unsafe {
            check(
                ffi::TRITONBACKEND_ModelInstanceKind(instance, &mut kind),
                "TRITONBACKEND_ModelInstanceKind",
            )?
        };
        let named = |e: BackendError| {
            BackendError::new(e.code, format!("model {}: {}", self.name, e.message))
        };
        if kind == ffi::TRITONSERVER_INSTANCEGROUPKIND_GPU {
            return Err(named(BackendError::new(
                Code::Unsupported,
                "instance_group kind KIND_GPU: trident's onnxruntime backend (the cpu image's) \
                 runs on the CPU only; use KIND_CPU, or the nvidia image",
            )));
        }
        let session = session::open(&self.path, &self.config.session).map_err(named)?;
        validate::check(
            &self.name,
            &self.config,
            &ModelTensors::of(&session).map_err(named)?,
        )?;
        let watch = watch::Watch::start(&self.name).map_err(|e| {
            named(BackendError::internal(format!(
                "cannot start the instance's watcher thread: {e}"
            )))
        })?;
        Ok(OnnxInstance {
            model: self.name.clone(),
            config: Arc::clone(&self.config),
            session: Mutex::new(session),
            watch,
        })
    }
}

/// The configuration's JSON as a value.
fn parse(json: &[u8]) -> Result<serde_json::Value, BackendError> {
    serde_json::from_slice(json).map_err(|e| {
        BackendError::internal(format!("Triton's model configuration is not JSON: {e}"))
    })
}

/// `<repository>/<model>/<version>`, where the model's files are.
///
/// # Safety
/// `model` is a live model.
unsafe fn version_folder(model: *mut ffi::TRITONBACKEND_Model) -> Result<PathBuf, BackendError> {
    let mut kind = ffi::TRITONBACKEND_ARTIFACT_FILESYSTEM;
    let mut location = ptr::null();
    let mut version = 0u64;
    // SAFETY: `model` is live; the out-pointers are writable; the location is a NUL-terminated
    // string Triton owns for the model's life, copied at once.
    let location = unsafe {
        check(
            ffi::TRITONBACKEND_ModelRepository(model, &mut kind, &mut location),
            "TRITONBACKEND_ModelRepository",
        )?;
        check(
            ffi::TRITONBACKEND_ModelVersion(model, &mut version),
            "TRITONBACKEND_ModelVersion",
        )?;
        CStr::from_ptr(location).to_string_lossy().into_owned()
    };
    Ok(PathBuf::from(location).join(version.to_string()))
}

/// Whether the core lets the backend complete the configuration (not `--strict-model-config`).
///
/// # Safety
/// `model` is a live model.
unsafe fn auto_complete_allowed(
    model: *mut ffi::TRITONBACKEND_Model,
) -> Result<bool, BackendError> {
    let mut allowed = false;
    // SAFETY: `model` is live; the out-pointer is writable.
    unsafe {
        check(
            ffi::TRITONBACKEND_ModelAutoCompleteConfig(model, &mut allowed),
            "TRITONBACKEND_ModelAutoCompleteConfig",
        )?
    };
    Ok(allowed)
}

/// Hands the completed configuration to the core.
///
/// # Safety
/// `model` is a live model in its `TRITONBACKEND_ModelInitialize`.
unsafe fn set_config(
    model: *mut ffi::TRITONBACKEND_Model,
    json: &serde_json::Value,
) -> Result<(), BackendError> {
    let text = json.to_string();
    let mut message = ptr::null_mut();
    // SAFETY: the text is valid for the call and copied by the core; the message is ours to
    // delete, and is deleted once whatever the core says.
    unsafe {
        check(
            ffi::TRITONSERVER_MessageNewFromSerializedJson(
                &mut message,
                text.as_ptr().cast(),
                text.len(),
            ),
            "TRITONSERVER_MessageNewFromSerializedJson",
        )?;
        let set = check(
            ffi::TRITONBACKEND_ModelSetConfig(model, 1, message),
            "TRITONBACKEND_ModelSetConfig",
        );
        let _ = check(
            ffi::TRITONSERVER_MessageDelete(message),
            "TRITONSERVER_MessageDelete",
        );
        set
    }
}

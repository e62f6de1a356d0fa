//! The state Triton keeps for the backend: one [`ModelState`] per loaded model, one
//! [`InstanceState`] per model instance, each a Box whose pointer Triton holds between the
//! initialize and finalize calls.

use std::ffi::CStr;
use std::ptr;
use std::sync::Mutex;

use crate::error::{BackendError, check};
use crate::ffi;
use crate::models::sequence_sum::Sums;
use crate::settings::ModelSettings;

/// A model loaded by either backend this library is: `trident`'s native models or
/// `onnxruntime`'s ONNX models (Triton loads the library once under each name).
pub enum AnyModel {
    /// A native model (`backend: "trident"`).
    Native(ModelState),
    /// An ONNX model (`backend: "onnxruntime"`).
    Onnx(crate::onnxruntime::OnnxModel),
}

/// An instance of an [`AnyModel`].
pub enum AnyInstance {
    /// An instance of a native model.
    Native(InstanceState),
    /// An instance of an ONNX model: its session.
    Onnx(crate::onnxruntime::OnnxInstance),
}

impl AnyModel {
    /// Loads `model` as the backend Triton loaded this library as.
    ///
    /// # Safety
    /// `model` is the model Triton passed to `TRITONBACKEND_ModelInitialize`.
    pub unsafe fn load(model: *mut ffi::TRITONBACKEND_Model) -> Result<AnyModel, BackendError> {
        // SAFETY: `model` is live (caller's contract).
        unsafe {
            if backend_name(model)? == crate::onnxruntime::BACKEND_NAME {
                Ok(AnyModel::Onnx(crate::onnxruntime::OnnxModel::load(model)?))
            } else {
                Ok(AnyModel::Native(ModelState::read(model)?))
            }
        }
    }

    /// The state of a new instance of this model.
    ///
    /// # Safety
    /// `instance` is a live instance of this model.
    pub unsafe fn instance(
        &self,
        instance: *mut ffi::TRITONBACKEND_ModelInstance,
    ) -> Result<AnyInstance, BackendError> {
        match self {
            AnyModel::Native(model) => Ok(AnyInstance::Native(model.instance())),
            // SAFETY: `instance` is live (caller's contract).
            AnyModel::Onnx(model) => Ok(AnyInstance::Onnx(unsafe { model.instance(instance)? })),
        }
    }
}

/// The name Triton loaded this library under for `model` (`trident`, `onnxruntime`).
///
/// # Safety
/// `model` is a live model.
unsafe fn backend_name(model: *mut ffi::TRITONBACKEND_Model) -> Result<String, BackendError> {
    let mut backend = ptr::null_mut();
    let mut name = ptr::null();
    // SAFETY: `model` is live, so is its backend; the name is a NUL-terminated string Triton
    // owns, copied at once.
    unsafe {
        check(
            ffi::TRITONBACKEND_ModelBackend(model, &mut backend),
            "TRITONBACKEND_ModelBackend",
        )?;
        check(
            ffi::TRITONBACKEND_BackendName(backend, &mut name),
            "TRITONBACKEND_BackendName",
        )?;
        Ok(CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

/// A loaded native model: its name and the settings its configuration chose.
pub struct ModelState {
    /// The model's name, for messages.
    pub name: String,
    /// What the configuration asked for.
    pub settings: ModelSettings,
}

/// One instance of a model: the model's settings and the instance's own sequence sums.
pub struct InstanceState {
    /// The model's name, for messages.
    pub model: String,
    /// The model's settings.
    pub settings: ModelSettings,
    /// The sums of the sequences this instance serves (sequence_sum only). Only the instance's
    /// execute thread touches them; the lock makes that a checked fact rather than an assumption.
    pub sums: Mutex<Sums>,
}

/// The model configuration Triton hands over, as an owned message freed on drop.
struct ConfigMessage {
    raw: *mut ffi::TRITONSERVER_Message,
}

impl ConfigMessage {
    fn json(&self) -> Result<&[u8], BackendError> {
        let mut base = ptr::null();
        let mut size = 0usize;
        // SAFETY: the message is live (owned by self); the JSON buffer it exposes lives as long
        // as the message, which the returned slice borrows.
        unsafe {
            check(
                ffi::TRITONSERVER_MessageSerializeToJson(self.raw, &mut base, &mut size),
                "TRITONSERVER_MessageSerializeToJson",
            )?;
            Ok(std::slice::from_raw_parts(base.cast::<u8>(), size))
        }
    }
}

impl Drop for ConfigMessage {
    fn drop(&mut self) {
        // SAFETY: the message is live and owned by self; this is its only delete.
        let _ = unsafe {
            check(
                ffi::TRITONSERVER_MessageDelete(self.raw),
                "TRITONSERVER_MessageDelete",
            )
        };
    }
}

/// A model's name, as Triton knows it.
///
/// # Safety
/// `model` is a live model Triton passed in.
pub unsafe fn model_name(model: *mut ffi::TRITONBACKEND_Model) -> Result<String, BackendError> {
    let mut name = ptr::null();
    // SAFETY: `model` is live (caller's contract); the name is a NUL-terminated string Triton
    // owns, copied at once.
    unsafe {
        check(
            ffi::TRITONBACKEND_ModelName(model, &mut name),
            "TRITONBACKEND_ModelName",
        )?;
        Ok(CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

/// A model's configuration as Triton's JSON (version 1 of the message).
///
/// # Safety
/// `model` is a live model Triton passed in.
pub unsafe fn config_json(model: *mut ffi::TRITONBACKEND_Model) -> Result<Vec<u8>, BackendError> {
    let mut raw = ptr::null_mut();
    // SAFETY: `model` is live (caller's contract); the message becomes ours, freed on drop.
    unsafe {
        check(
            ffi::TRITONBACKEND_ModelConfig(model, 1, &mut raw),
            "TRITONBACKEND_ModelConfig",
        )?
    };
    let config = ConfigMessage { raw };
    Ok(config.json()?.to_vec())
}

impl ModelState {
    /// Reads the model's name and configuration.
    ///
    /// # Safety
    /// `model` is the model Triton passed to `TRITONBACKEND_ModelInitialize`.
    pub unsafe fn read(model: *mut ffi::TRITONBACKEND_Model) -> Result<ModelState, BackendError> {
        // SAFETY: `model` is live (caller's contract).
        let (name, config) = unsafe { (model_name(model)?, config_json(model)?) };
        let settings = ModelSettings::from_config_json(&config)
            .map_err(|e| BackendError::new(e.code, format!("model {name}: {}", e.message)))?;
        Ok(ModelState { name, settings })
    }

    /// The state an instance of this model starts with.
    pub fn instance(&self) -> InstanceState {
        InstanceState {
            model: self.name.clone(),
            settings: self.settings.clone(),
            sums: Mutex::new(Sums::default()),
        }
    }
}

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

/// A loaded model: its name and the settings its configuration chose.
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

impl ModelState {
    /// Reads the model's name and configuration.
    ///
    /// # Safety
    /// `model` is the model Triton passed to `TRITONBACKEND_ModelInitialize`.
    pub unsafe fn read(model: *mut ffi::TRITONBACKEND_Model) -> Result<ModelState, BackendError> {
        let mut name = ptr::null();
        let mut raw = ptr::null_mut();
        // SAFETY: `model` is live for the call (caller's contract); the name is a NUL-terminated
        // string Triton owns, copied at once; the configuration message becomes ours.
        let name = unsafe {
            check(
                ffi::TRITONBACKEND_ModelName(model, &mut name),
                "TRITONBACKEND_ModelName",
            )?;
            let name = CStr::from_ptr(name).to_string_lossy().into_owned();
            check(
                ffi::TRITONBACKEND_ModelConfig(model, 1, &mut raw),
                "TRITONBACKEND_ModelConfig",
            )?;
            name
        };
        let config = ConfigMessage { raw };
        let settings = ModelSettings::from_config_json(config.json()?)
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

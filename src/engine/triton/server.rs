//! `TRITONSERVER_Server`: the running core, its health, model repository and model management.
//!
//! These calls block (a load runs the model's initialisation); async callers run them on
//! `tokio::task::spawn_blocking`. Inference is asynchronous and lives in `inference`.

use std::ffi::CString;
use std::path::Path;
use std::ptr::NonNull;

use serde::Deserialize;

use super::error::{check, to_cstring};
use super::ffi;
use super::library::Triton;
use super::message::Message;
use super::options::{ServerConfig, ServerOptions};
use crate::engine::{EngineError, ErrorCode};

/// A running Triton core. Stopped and deleted on drop, which waits for in-flight inferences up
/// to the configured exit timeout.
pub struct Server {
    pub(super) triton: &'static Triton,
    pub(super) ptr: NonNull<ffi::TRITONSERVER_Server>,
}

// SAFETY: Triton's server object is documented as safe to use from any thread concurrently;
// trident never mutates it except through Triton's own thread-safe API.
unsafe impl Send for Server {}
// SAFETY: as above.
unsafe impl Sync for Server {}

/// One row of the model index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ModelIndexEntry {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// How many responses a model sends per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionPolicy {
    OneToOne,
    Decoupled,
}

impl Server {
    /// Starts the core with `config`; in explicit mode this loads the startup models first.
    /// Descriptors this process holds are marked close-on-exec first, so the processes the
    /// core's backends start inherit only standard input, output and error.
    pub fn start(triton: &'static Triton, config: &ServerConfig) -> Result<Server, EngineError> {
        let options = ServerOptions::from_config(triton, config)?;
        // Backends fork from here on (python stubs): they get stdin, stdout and stderr only.
        super::descriptors::keep_from_child_processes();
        let mut raw = std::ptr::null_mut();
        // SAFETY: `options` is a complete options object that outlives the call (Triton copies
        // it); `raw` is valid for a write.
        let status = unsafe {
            triton
                .api
                .TRITONSERVER_ServerNew(&mut raw, options.as_ptr())
        };
        check(&triton.api, status)?;
        let ptr = NonNull::new(raw).ok_or_else(|| {
            EngineError::new(ErrorCode::Internal, "Triton returned a null server")
        })?;
        Ok(Server { triton, ptr })
    }

    /// The loaded core this server runs on.
    pub fn triton(&self) -> &'static Triton {
        self.triton
    }

    fn api(&self) -> &ffi::TritonServerApi {
        &self.triton.api
    }

    fn raw(&self) -> *mut ffi::TRITONSERVER_Server {
        self.ptr.as_ptr()
    }

    /// Whether the core is live (running, possibly without ready models).
    pub fn is_live(&self) -> Result<bool, EngineError> {
        let mut live = false;
        // SAFETY: the server is valid while `self` lives; `live` is valid for a write.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerIsLive(self.raw(), &mut live)
        })?;
        Ok(live)
    }

    /// Whether the core is ready (with strict readiness: every loaded model is ready).
    pub fn is_ready(&self) -> Result<bool, EngineError> {
        let mut ready = false;
        // SAFETY: as in `is_live`.
        check(self.api(), unsafe {
            self.api()
                .TRITONSERVER_ServerIsReady(self.raw(), &mut ready)
        })?;
        Ok(ready)
    }

    /// Whether a model (a version, or the latest with `None`) is ready for inference.
    pub fn model_is_ready(&self, name: &str, version: Option<i64>) -> Result<bool, EngineError> {
        let name = to_cstring("model name", name)?;
        let mut ready = false;
        // SAFETY: valid server, NUL-terminated name that outlives the call, valid out-pointer.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerModelIsReady(
                self.raw(),
                name.as_ptr(),
                version.unwrap_or(-1),
                &mut ready,
            )
        })?;
        Ok(ready)
    }

    /// The server metadata document (`name`, `version`, `extensions`).
    pub fn metadata(&self) -> Result<serde_json::Value, EngineError> {
        let mut message = std::ptr::null_mut();
        // SAFETY: valid server and out-pointer; the message returned is owned by us.
        check(self.api(), unsafe {
            self.api()
                .TRITONSERVER_ServerMetadata(self.raw(), &mut message)
        })?;
        Message::from_raw(self.triton, message)?.to_json()
    }

    /// A model's metadata document (inputs and outputs with datatypes and shapes).
    pub fn model_metadata(
        &self,
        name: &str,
        version: Option<i64>,
    ) -> Result<serde_json::Value, EngineError> {
        let name = to_cstring("model name", name)?;
        let mut message = std::ptr::null_mut();
        // SAFETY: as in `metadata`; the name outlives the call.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerModelMetadata(
                self.raw(),
                name.as_ptr(),
                version.unwrap_or(-1),
                &mut message,
            )
        })?;
        Message::from_raw(self.triton, message)?.to_json()
    }

    /// A model's configuration as JSON (config format version 1).
    pub fn model_config(
        &self,
        name: &str,
        version: Option<i64>,
    ) -> Result<serde_json::Value, EngineError> {
        let name = to_cstring("model name", name)?;
        let mut message = std::ptr::null_mut();
        // SAFETY: as in `model_metadata`.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerModelConfig(
                self.raw(),
                name.as_ptr(),
                version.unwrap_or(-1),
                1,
                &mut message,
            )
        })?;
        Message::from_raw(self.triton, message)?.to_json()
    }

    /// Whether a loaded model answers each request once or is decoupled.
    pub fn model_transaction_policy(
        &self,
        name: &str,
        version: Option<i64>,
    ) -> Result<TransactionPolicy, EngineError> {
        let name = to_cstring("model name", name)?;
        let mut flags = 0u32;
        let mut unused = std::ptr::null_mut();
        // SAFETY: valid server, name and out-pointers for the duration of the call.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerModelTransactionProperties(
                self.raw(),
                name.as_ptr(),
                version.unwrap_or(-1),
                &mut flags,
                &mut unused,
            )
        })?;
        Ok(if flags & ffi::TRITONSERVER_TXN_DECOUPLED != 0 {
            TransactionPolicy::Decoupled
        } else {
            TransactionPolicy::OneToOne
        })
    }

    /// Every model the repositories hold (or only the ready ones), with state and reason.
    pub fn model_index(&self, ready_only: bool) -> Result<Vec<ModelIndexEntry>, EngineError> {
        let flags = if ready_only {
            ffi::TRITONSERVER_INDEX_FLAG_READY
        } else {
            0
        };
        let mut message = std::ptr::null_mut();
        // SAFETY: valid server and out-pointer; the message returned is owned by us.
        check(self.api(), unsafe {
            self.api()
                .TRITONSERVER_ServerModelIndex(self.raw(), flags, &mut message)
        })?;
        let json = Message::from_raw(self.triton, message)?.to_json()?;
        serde_json::from_value(json).map_err(|e| {
            EngineError::new(ErrorCode::Internal, format!("unexpected model index: {e}"))
        })
    }

    /// Loads (or reloads) a model by name; blocks until it is loaded or has failed.
    pub fn load_model(&self, name: &str) -> Result<(), EngineError> {
        let name = to_cstring("model name", name)?;
        // SAFETY: valid server; the name outlives the call.
        check(self.api(), unsafe {
            self.api()
                .TRITONSERVER_ServerLoadModel(self.raw(), name.as_ptr())
        })
    }

    /// Loads `name` again with `config` (Triton's JSON form of its configuration) as an
    /// override. The core counts an override as a change, so this makes new instances (and
    /// new backend processes) even when nothing on disk changed, where a plain load of a
    /// loaded model does nothing. Blocks until the new instances are loaded or have failed.
    pub fn reload_model_with_config(&self, name: &str, config: &str) -> Result<(), EngineError> {
        let cname = to_cstring("model name", name)?;
        let parameter = Parameter::string(self.triton, "config", config)?;
        let mut parameters = [parameter.ptr.as_ptr().cast_const()];
        // SAFETY: valid server; the name and the parameter outlive the call (Triton copies what
        // it keeps); the array holds exactly `parameters.len()` valid parameter pointers.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerLoadModelWithParameters(
                self.raw(),
                cname.as_ptr(),
                parameters.as_mut_ptr(),
                parameters.len() as u64,
            )
        })
    }

    /// Starts unloading a model; with `dependents`, also the models that depend on it (the
    /// composing models of an ensemble). Returns before the unload has finished: poll
    /// [`Server::model_index`] for `UNAVAILABLE`.
    pub fn unload_model(&self, name: &str, dependents: bool) -> Result<(), EngineError> {
        let name = to_cstring("model name", name)?;
        // SAFETY: valid server; the name outlives the call.
        check(self.api(), unsafe {
            if dependents {
                self.api()
                    .TRITONSERVER_ServerUnloadModelAndDependents(self.raw(), name.as_ptr())
            } else {
                self.api()
                    .TRITONSERVER_ServerUnloadModel(self.raw(), name.as_ptr())
            }
        })
    }

    /// Adds a model repository at run time. Each `(folder, model name)` pair serves the model in
    /// `<repository>/<folder>` under `model name`.
    pub fn register_model_repository(
        &self,
        repository: &Path,
        name_mapping: &[(&str, &str)],
    ) -> Result<(), EngineError> {
        let path = to_cstring("repository path", &repository.to_string_lossy())?;
        let mappings = name_mapping
            .iter()
            .map(|(folder, name)| Parameter::string(self.triton, folder, name))
            .collect::<Result<Vec<_>, _>>()?;
        let mut pointers: Vec<*const ffi::TRITONSERVER_Parameter> = mappings
            .iter()
            .map(|p| p.ptr.as_ptr().cast_const())
            .collect();
        let count = u32::try_from(pointers.len())
            .map_err(|_| EngineError::new(ErrorCode::InvalidArg, "too many name mappings"))?;
        // SAFETY: valid server; `path` and every parameter in `pointers` outlive the call
        // (`mappings` owns them); Triton copies the mapping.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerRegisterModelRepository(
                self.raw(),
                path.as_ptr(),
                pointers.as_mut_ptr(),
                count,
            )
        })
    }

    /// Removes a repository added with [`Server::register_model_repository`].
    pub fn unregister_model_repository(&self, repository: &Path) -> Result<(), EngineError> {
        let path = to_cstring("repository path", &repository.to_string_lossy())?;
        // SAFETY: valid server; the path outlives the call.
        check(self.api(), unsafe {
            self.api()
                .TRITONSERVER_ServerUnregisterModelRepository(self.raw(), path.as_ptr())
        })
    }

    /// Stops the core: no new requests; in-flight ones get up to the exit timeout.
    pub fn stop(&self) -> Result<(), EngineError> {
        // SAFETY: valid server; stopping twice is allowed by Triton.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerStop(self.raw())
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: the server is owned by `self` and deleted exactly once, here. Deleting stops it
        // first if needed. Callbacks of requests still in flight use only the process-wide
        // allocator and their own boxed state, never this object.
        let status = unsafe { self.api().TRITONSERVER_ServerDelete(self.raw()) };
        if let Err(e) = check(self.api(), status) {
            tracing::warn!(error = %e, "deleting the Triton server failed");
        }
    }
}

/// An owned `TRITONSERVER_Parameter`, deleted on drop.
struct Parameter {
    triton: &'static Triton,
    ptr: NonNull<ffi::TRITONSERVER_Parameter>,
}

impl Parameter {
    fn string(triton: &'static Triton, key: &str, value: &str) -> Result<Parameter, EngineError> {
        let key: CString = to_cstring("parameter name", key)?;
        let value: CString = to_cstring("parameter value", value)?;
        // SAFETY: both strings are NUL-terminated and outlive the call; Triton copies them.
        let raw = unsafe {
            triton.api.TRITONSERVER_ParameterNew(
                key.as_ptr(),
                ffi::TRITONSERVER_PARAMETER_STRING,
                value.as_ptr().cast(),
            )
        };
        NonNull::new(raw)
            .map(|ptr| Parameter { triton, ptr })
            .ok_or_else(|| EngineError::new(ErrorCode::Internal, "Triton refused a parameter"))
    }
}

impl Drop for Parameter {
    fn drop(&mut self) {
        // SAFETY: the parameter is owned by `self` and deleted exactly once, here.
        unsafe {
            self.triton
                .api
                .TRITONSERVER_ParameterDelete(self.ptr.as_ptr())
        }
    }
}

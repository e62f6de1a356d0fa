//! `TRITONSERVER_Server`: the running core, its health, model repository and model management.
//!
//! These calls block (a load runs the model's initialisation); async callers run them on
//! `tokio::task::spawn_blocking`. Inference is asynchronous and lives in `inference`.

use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::Deserialize;

use super::error::out_value;
use super::error::{check, to_cstring};
use super::ffi;
use super::handle::Owned;
use super::library::Triton;
use super::message::Message;
use super::options::{ServerConfig, ServerOptions};
use crate::engine::{EngineError, ErrorCode};

/// A running Triton core. Stopped and deleted on drop (deleting stops it first), which waits for
/// in-flight inferences up to the configured exit timeout. Callbacks of requests still in flight
/// use only the process-wide allocator and their own boxed state, never this object.
pub struct Server {
    handle: Owned<ffi::TRITONSERVER_Server>,
    /// Held shared around `TRITONSERVER_ServerModelIndex` and exclusively around registering
    /// and unregistering a model repository. The core's `RepositoryIndex` (Triton 2.51, and
    /// its main branch) walks its set of repository paths with no lock, while
    /// `UnregisterModelRepository` erases from that set under the core's own mutex: an index
    /// read racing an unregister printed freed memory (`failed to stat file <unprintable>`) or
    /// another model's path, and can crash. Loads and unloads take the core's mutex themselves
    /// and need not wait here.
    repositories: RwLock<()>,
}

// SAFETY: Triton's server object is documented as safe to use from any thread concurrently
// (where the core is not, `repositories` serialises trident's calls); trident never mutates it
// except through Triton's own API.
unsafe impl Send for Server {}
// SAFETY: as above.
unsafe impl Sync for Server {}

/// One row of the model index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ModelIndexEntry {
    /// The model's name.
    pub name: String,
    /// The version, as text; absent, like `state` and `reason`, for a model never loaded.
    #[serde(default)]
    pub version: Option<String>,
    /// `READY`, `LOADING`, `UNLOADING` or `UNAVAILABLE`; see [`crate::engine::ModelState`].
    #[serde(default)]
    pub state: Option<String>,
    /// Why the model is in its state, e.g. `unloaded` or a load error; often empty.
    #[serde(default)]
    pub reason: Option<String>,
}

/// How many responses a model sends per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionPolicy {
    /// Exactly one response per request (`TRITONSERVER_TXN_ONE_TO_ONE`).
    OneToOne,
    /// Any number of responses per request, zero included (`TRITONSERVER_TXN_DECOUPLED`).
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
        // SAFETY: `ServerNew` writes a new server the caller owns; `options` is a complete
        // options object that outlives the call (Triton copies it).
        let handle = unsafe {
            Owned::create(triton, |raw| {
                triton.api.TRITONSERVER_ServerNew(raw, options.as_ptr())
            })
        }?;
        Ok(Server {
            handle,
            repositories: RwLock::new(()),
        })
    }

    /// The loaded core this server runs on.
    pub fn triton(&self) -> &'static Triton {
        self.handle.triton()
    }

    fn api(&self) -> &'static ffi::TritonServerApi {
        &self.handle.triton().api
    }

    /// The server object, for a Triton call; valid while `self` lives.
    pub(super) fn raw(&self) -> *mut ffi::TRITONSERVER_Server {
        self.handle.as_ptr()
    }

    /// Whether the core is live (running, possibly without ready models).
    pub fn is_live(&self) -> Result<bool, EngineError> {
        // SAFETY: the server is valid while `self` lives; `live` is valid for a write.
        out_value(self.api(), |live| unsafe {
            self.api().TRITONSERVER_ServerIsLive(self.raw(), live)
        })
    }

    /// Whether the core is ready (with strict readiness: every loaded model is ready).
    pub fn is_ready(&self) -> Result<bool, EngineError> {
        // SAFETY: as in `is_live`.
        out_value(self.api(), |ready| unsafe {
            self.api().TRITONSERVER_ServerIsReady(self.raw(), ready)
        })
    }

    /// Whether a model (a version, or the latest with `None`) is ready for inference.
    pub fn model_is_ready(&self, name: &str, version: Option<i64>) -> Result<bool, EngineError> {
        let name = to_cstring("model name", name)?;
        // SAFETY: valid server, NUL-terminated name that outlives the call, valid out-pointer.
        out_value(self.api(), |ready| unsafe {
            self.api().TRITONSERVER_ServerModelIsReady(
                self.raw(),
                name.as_ptr(),
                version.unwrap_or(-1),
                ready,
            )
        })
    }

    /// The server metadata document (`name`, `version`, `extensions`).
    pub fn metadata(&self) -> Result<serde_json::Value, EngineError> {
        // SAFETY: `ServerMetadata` writes a new message the caller owns; valid server.
        let message = unsafe {
            Message::create(self.triton(), |message| {
                self.api().TRITONSERVER_ServerMetadata(self.raw(), message)
            })
        }?;
        message.to_json()
    }

    /// A model's metadata document (inputs and outputs with datatypes and shapes).
    pub fn model_metadata(
        &self,
        name: &str,
        version: Option<i64>,
    ) -> Result<serde_json::Value, EngineError> {
        let name = to_cstring("model name", name)?;
        // SAFETY: as in `metadata`; the name outlives the call.
        let message = unsafe {
            Message::create(self.triton(), |message| {
                self.api().TRITONSERVER_ServerModelMetadata(
                    self.raw(),
                    name.as_ptr(),
                    version.unwrap_or(-1),
                    message,
                )
            })
        }?;
        message.to_json()
    }

    /// A model's configuration as JSON (config format version 1).
    pub fn model_config(
        &self,
        name: &str,
        version: Option<i64>,
    ) -> Result<serde_json::Value, EngineError> {
        let name = to_cstring("model name", name)?;
        // SAFETY: as in `model_metadata`.
        let message = unsafe {
            Message::create(self.triton(), |message| {
                self.api().TRITONSERVER_ServerModelConfig(
                    self.raw(),
                    name.as_ptr(),
                    version.unwrap_or(-1),
                    1,
                    message,
                )
            })
        }?;
        message.to_json()
    }

    /// Whether a loaded model answers each request once or is decoupled.
    pub fn model_transaction_policy(
        &self,
        name: &str,
        version: Option<i64>,
    ) -> Result<TransactionPolicy, EngineError> {
        let name = to_cstring("model name", name)?;
        let mut unused = std::ptr::null_mut();
        // SAFETY: valid server, name and out-pointers for the duration of the call.
        let flags: u32 = out_value(self.api(), |flags| unsafe {
            self.api().TRITONSERVER_ServerModelTransactionProperties(
                self.raw(),
                name.as_ptr(),
                version.unwrap_or(-1),
                flags,
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
        let _index = self.reading_repositories();
        // SAFETY: `ServerModelIndex` writes a new message the caller owns; valid server; no
        // repository is registered or unregistered meanwhile (`repositories`).
        let message = unsafe {
            Message::create(self.triton(), |message| {
                self.api()
                    .TRITONSERVER_ServerModelIndex(self.raw(), flags, message)
            })
        }?;
        serde_json::from_value(message.to_json()?).map_err(|e| {
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
        let parameter = string_parameter(self.triton(), "config", config)?;
        let mut parameters = [parameter.as_ptr().cast_const()];
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
        let api = self.api();
        let unload = if dependents {
            api.TRITONSERVER_ServerUnloadModelAndDependents
        } else {
            api.TRITONSERVER_ServerUnloadModel
        };
        // SAFETY: valid server; the name outlives the call.
        check(api, unsafe { unload(self.raw(), name.as_ptr()) })
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
            .map(|(folder, name)| string_parameter(self.triton(), folder, name))
            .collect::<Result<Vec<_>, _>>()?;
        let mut pointers: Vec<*const ffi::TRITONSERVER_Parameter> =
            mappings.iter().map(|p| p.as_ptr().cast_const()).collect();
        let count = u32::try_from(pointers.len())
            .map_err(|_| EngineError::new(ErrorCode::InvalidArg, "too many name mappings"))?;
        let _changing = self.changing_repositories();
        // SAFETY: valid server; `path` and every parameter in `pointers` outlive the call
        // (`mappings` owns them); Triton copies the mapping; no index is read meanwhile.
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
        let _changing = self.changing_repositories();
        // SAFETY: valid server; the path outlives the call; no index is read meanwhile.
        check(self.api(), unsafe {
            self.api()
                .TRITONSERVER_ServerUnregisterModelRepository(self.raw(), path.as_ptr())
        })
    }

    /// Shared hold on the set of repositories, for reading the model index.
    fn reading_repositories(&self) -> RwLockReadGuard<'_, ()> {
        self.repositories
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Exclusive hold on the set of repositories, for changing it.
    fn changing_repositories(&self) -> RwLockWriteGuard<'_, ()> {
        self.repositories
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops the core: no new requests; in-flight ones get up to the exit timeout.
    pub fn stop(&self) -> Result<(), EngineError> {
        // SAFETY: valid server; stopping twice is allowed by Triton.
        check(self.api(), unsafe {
            self.api().TRITONSERVER_ServerStop(self.raw())
        })
    }
}

/// A string `TRITONSERVER_Parameter` (a load override, a repository's name mapping).
fn string_parameter(
    triton: &'static Triton,
    key: &str,
    value: &str,
) -> Result<Owned<ffi::TRITONSERVER_Parameter>, EngineError> {
    let key = to_cstring("parameter name", key)?;
    let value = to_cstring("parameter value", value)?;
    // SAFETY: both strings are NUL-terminated and outlive the call; Triton copies them and
    // returns a new parameter the caller owns, or null.
    unsafe {
        let raw = triton.api.TRITONSERVER_ParameterNew(
            key.as_ptr(),
            ffi::TRITONSERVER_PARAMETER_STRING,
            value.as_ptr().cast(),
        );
        Owned::from_raw(triton, raw)
    }
}

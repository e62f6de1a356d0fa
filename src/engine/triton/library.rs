//! Finds and opens `libtritonserver.so` at run time, once per process, and checks its C API
//! version against the one trident was built against.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::allocator::ResponseAllocator;
use super::error::check;
use super::ffi;
use crate::engine::EngineError;

/// The core library's path inside a Triton home.
const LIBRARY_FILE: &str = "lib/libtritonserver.so";

/// The Triton core loaded into this process. It lives until the process exits: Triton's own
/// threads may call back into code that uses it at any time.
pub struct Triton {
    pub(super) api: ffi::TritonServerApi,
    pub(super) allocator: ResponseAllocator,
    path: PathBuf,
    home: Option<PathBuf>,
    version: ApiVersion,
}

impl fmt::Debug for Triton {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Triton")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Triton {
    /// The library file that was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The Triton installation the library belongs to (`<home>/lib/libtritonserver.so`), whose
    /// `backends/` folder is the default backend directory.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The C API version the loaded core reports.
    pub fn api_version(&self) -> ApiVersion {
        self.version
    }
}

/// A Triton server C API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersion {
    /// Changes when the API breaks compatibility; must match exactly.
    pub major: u32,
    /// Grows as functions are added; a core at a later minor still serves trident.
    pub minor: u32,
}

impl ApiVersion {
    /// The version of the declarations trident was compiled against.
    pub const BUILT_AGAINST: ApiVersion = ApiVersion {
        major: ffi::TRITONSERVER_API_VERSION_MAJOR,
        minor: ffi::TRITONSERVER_API_VERSION_MINOR,
    };

    /// A core can serve us when the major versions match and its minor is at least ours.
    pub fn supports(self, required: ApiVersion) -> bool {
        self.major == required.major && self.minor >= required.minor
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why the Triton core could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No candidate location held a library that opened and had every function trident uses.
    #[error(
        "could not load the Triton core (libtritonserver.so); tried:\n{}\n\
         Install it with scripts/install-triton, or point --triton-home or TRITON_HOME at a Triton \
         installation (a folder with lib/libtritonserver.so)",
        format_attempts(.0)
    )]
    NotFound(Vec<Attempt>),
    /// The library opened but reports a C API version trident cannot use.
    #[error(
        "the Triton core at {path} implements C API {found}, but trident needs {required} \
         (same major version, minor {} or later)", required.minor
    )]
    IncompatibleVersion {
        /// The library file that was opened.
        path: PathBuf,
        /// The version the library reports.
        found: ApiVersion,
        /// The version trident was built against ([`ApiVersion::BUILT_AGAINST`]).
        required: ApiVersion,
    },
    /// The library opened, but reading its API version or creating the response allocator
    /// failed.
    #[error("the Triton core at {path} failed to start: {source}")]
    Broken {
        /// The library file that was opened.
        path: PathBuf,
        /// The error Triton returned.
        source: EngineError,
    },
}

/// One place the loader looked, and why it did not use it.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The library file looked for.
    pub path: PathBuf,
    /// Why the place was on the list: `--triton-home`, `TRITON_HOME`, `default install` or
    /// `scripts/install-triton`.
    pub source: &'static str,
    /// Why it was not used: no such file, or the loader's error.
    pub reason: String,
}

fn format_attempts(attempts: &[Attempt]) -> String {
    attempts
        .iter()
        .map(|a| format!("  {} ({}): {}", a.path.display(), a.source, a.reason))
        .collect::<Vec<_>>()
        .join("\n")
}

static TRITON: OnceLock<Triton> = OnceLock::new();
static LOADING: Mutex<()> = Mutex::new(());

/// Loads the Triton core, or returns the one already loaded.
///
/// Looks, in order, at `explicit` (a library file or a Triton home), `$TRITON_HOME`,
/// `/opt/tritonserver`, and the project's local runtime folder (`triton-runtime/`, filled by
/// `scripts/install-triton`). The first library that opens and has every function trident uses is
/// taken; a core with an incompatible C API version is refused.
pub fn load(explicit: Option<&Path>) -> Result<&'static Triton, LoadError> {
    if let Some(triton) = TRITON.get() {
        return Ok(triton);
    }
    let _serialised = LOADING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(triton) = TRITON.get() {
        return Ok(triton);
    }
    let mut attempts = Vec::new();
    for (path, source) in candidates(explicit) {
        if !path.exists() {
            attempts.push(Attempt {
                path,
                source,
                reason: "no such file".into(),
            });
            continue;
        }
        match open(&path) {
            Ok(api) => {
                for failed in attempts.iter().filter(|a| a.source != "default install") {
                    tracing::warn!(path = %failed.path.display(), source = failed.source,
                        reason = %failed.reason, "skipped a Triton core location");
                }
                let triton = finish(api, path)?;
                return Ok(TRITON.get_or_init(|| triton));
            }
            Err(reason) => attempts.push(Attempt {
                path,
                source,
                reason,
            }),
        }
    }
    Err(LoadError::NotFound(attempts))
}

/// Where to look for the library, with the reason each place is on the list.
fn candidates(explicit: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    let mut list = Vec::new();
    if let Some(path) = explicit {
        if path.is_dir() {
            list.push((path.join(LIBRARY_FILE), "--triton-home"));
        } else {
            list.push((path.to_path_buf(), "--triton-home"));
        }
    }
    if let Some(home) = std::env::var_os("TRITON_HOME").filter(|v| !v.is_empty()) {
        list.push((PathBuf::from(home).join(LIBRARY_FILE), "TRITON_HOME"));
    }
    list.push((
        Path::new("/opt/tritonserver").join(LIBRARY_FILE),
        "default install",
    ));
    list.push((
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("triton-runtime")
            .join(LIBRARY_FILE),
        "scripts/install-triton",
    ));
    list
}

fn open(path: &Path) -> Result<ffi::TritonServerApi, String> {
    // SAFETY: opening the library runs its initialisers; libtritonserver.so is a C++ library with
    // no initialisers that depend on the loading process. Resolving the symbols only reads the
    // library's dynamic symbol table; the signatures come from Triton's documented API.
    unsafe { ffi::TritonServerApi::new(path) }.map_err(|e| e.to_string())
}

fn finish(api: ffi::TritonServerApi, path: PathBuf) -> Result<Triton, LoadError> {
    let (mut major, mut minor) = (0u32, 0u32);
    // SAFETY: both pointers are valid for writes of a u32 for the duration of the call.
    let status = unsafe { api.TRITONSERVER_ApiVersion(&mut major, &mut minor) };
    check(&api, status).map_err(|source| LoadError::Broken {
        path: path.clone(),
        source,
    })?;
    let found = ApiVersion { major, minor };
    if !found.supports(ApiVersion::BUILT_AGAINST) {
        return Err(LoadError::IncompatibleVersion {
            path,
            found,
            required: ApiVersion::BUILT_AGAINST,
        });
    }
    let allocator = ResponseAllocator::new(&api).map_err(|source| LoadError::Broken {
        path: path.clone(),
        source,
    })?;
    let home = path
        .parent()
        .filter(|lib| lib.file_name().is_some_and(|n| n == "lib"))
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    tracing::info!(path = %path.display(), api = %found, "loaded the Triton core");
    Ok(Triton {
        api,
        allocator,
        path,
        home,
        version: found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_rule_is_same_major_and_minor_at_least() {
        let built = ApiVersion {
            major: 1,
            minor: 34,
        };
        assert!(
            ApiVersion {
                major: 1,
                minor: 34
            }
            .supports(built)
        );
        assert!(
            ApiVersion {
                major: 1,
                minor: 40
            }
            .supports(built)
        );
        assert!(
            !ApiVersion {
                major: 1,
                minor: 33
            }
            .supports(built)
        );
        assert!(
            !ApiVersion {
                major: 2,
                minor: 34
            }
            .supports(built)
        );
        assert!(
            !ApiVersion {
                major: 0,
                minor: 99
            }
            .supports(built)
        );
    }

    #[test]
    fn explicit_folder_points_at_its_lib() {
        let dir = std::env::temp_dir();
        let list = candidates(Some(&dir));
        assert_eq!(list[0].0, dir.join(LIBRARY_FILE));
        assert!(
            list.iter()
                .any(|(p, _)| p.ends_with("triton-runtime/lib/libtritonserver.so"))
        );
    }

    #[test]
    fn not_found_lists_every_attempt() {
        let error = LoadError::NotFound(vec![
            Attempt {
                path: "/a/lib/libtritonserver.so".into(),
                source: "TRITON_HOME",
                reason: "no such file".into(),
            },
            Attempt {
                path: "/b/lib/libtritonserver.so".into(),
                source: "default install",
                reason: "undefined symbol".into(),
            },
        ]);
        let text = error.to_string();
        assert!(text.contains("/a/lib/libtritonserver.so (TRITON_HOME): no such file"));
        assert!(text.contains("/b/lib/libtritonserver.so (default install): undefined symbol"));
        assert!(text.contains("scripts/install-triton"));
    }
}

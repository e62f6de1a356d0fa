//! Confinement by the kernel of code trident does not own: every python model's stub process
//! runs in a box of its own, and the serving process cannot be traced or read by them.
//!
//! How a stub is boxed: the python backend runs `<triton home>/backends/python/
//! triton_python_backend_stub`, which `scripts/install-triton` writes as a launcher script.
//! Under trident (the serving process exports [`LAUNCHER_ENV`] and [`ISOLATION_ENV`] before
//! the core starts) the script runs `trident confine-stub <the real stub> <its arguments>`
//! ([`stub::run`]): before any of the model's code, it
//! - drops every capability (bounding, ambient, permitted, effective, inheritable) and sets
//!   `no_new_privs`;
//! - restricts the file system with Landlock ([`stub::rules`]): the image's system folders, the
//!   Triton installation and the Python prefix read-only; the model's own repository (its
//!   artifact or private tree, nothing of another tenant's) read-only; its shared memory region
//!   read-write; a scratch folder of its own (its `TMPDIR`) read-write; nothing else, not
//!   `/proc` of another process;
//! - installs a seccomp filter ([`seccomp`]): no `ptrace`, `process_vm_*`, mounts, namespaces,
//!   BPF, perf, keyrings, modules; signals only to itself (and the liveness probe `kill(pid, 0)`
//!   the stub runs against the serving process).
//!
//! Landlock's own rule on tracing also holds: a boxed process cannot trace or read the memory of
//! a process outside its box, the serving process and other tenants' stubs included. The serving
//! process itself is made not dumpable ([`serving_process_undumpable`]).
//!
//! The serving process has a box of its own ([`serving`]): from its start it, the core, the
//! backends and the stubs write only where the serving process must; and it works in an empty
//! folder ([`work_in`]).
//!
//! Which guarantees hold on which host: `docs/CONFINEMENT.md`.

pub mod seccomp;
pub mod serving;
pub mod stub;

use std::ffi::OsStr;
use std::fmt;
use std::path::Path;

/// The variable that tells the stub launcher script where the trident binary is.
pub const LAUNCHER_ENV: &str = "TRIDENT_STUB_LAUNCHER";
/// The variable that tells the launcher the serving process's own staging folder (its
/// `trident-artifacts-<pid>`): the links of the trees trident makes there are followed, no
/// other ([`stub`]).
pub const TREES_ENV: &str = "TRIDENT_STUB_TREES";
/// The variable that sets (and tells the launcher) how python models are confined.
pub const ISOLATION_ENV: &str = "TRIDENT_PYTHON_ISOLATION";

/// How a box is asked for: python models' stub processes (`TRIDENT_PYTHON_ISOLATION`) and
/// the serving process's writes (`TRIDENT_SERVING_ISOLATION`, [`serving`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Confined, or not run: where the kernel has no Landlock, a python model is refused (and
    /// the serving process does not start). Python models' default under Secure Mode and on
    /// multi-model endpoints.
    Required,
    /// Confined as far as the kernel allows; run unconfined where it has no Landlock (logged).
    /// The serving process's default, and python models' on a single-model endpoint outside
    /// Secure Mode.
    BestEffort,
    /// Not confined (Triton's own behaviour).
    Off,
}

/// The setting of python models' boxes.
pub type PythonIsolation = Isolation;

impl Isolation {
    /// Parses the setting's value; `None` for an unknown one.
    pub fn parse(value: &str) -> Option<PythonIsolation> {
        match value.trim() {
            "required" => Some(PythonIsolation::Required),
            "best-effort" => Some(PythonIsolation::BestEffort),
            "off" => Some(PythonIsolation::Off),
            _ => None,
        }
    }

    /// The setting's value.
    pub fn name(self) -> &'static str {
        match self {
            PythonIsolation::Required => "required",
            PythonIsolation::BestEffort => "best-effort",
            PythonIsolation::Off => "off",
        }
    }

    /// Why a python model cannot load under this setting on this host, if it cannot: `required`
    /// where the kernel has no Landlock or the Triton installation's stub is not trident's
    /// launcher ([`launcher_installed`]).
    pub fn refusal(self, landlock: LandlockSupport, launcher: bool) -> Option<String> {
        if self != PythonIsolation::Required {
            return None;
        }
        let missing = match (landlock.abi(), launcher) {
            (None, _) => format!("this host's kernel has no Landlock ({landlock})"),
            (_, false) => "the Triton installation's python backend stub is not trident's \
                           launcher (scripts/install-triton writes it)"
                .to_owned(),
            (Some(_), true) => return None,
        };
        Some(format!(
            "python models must run confined ({ISOLATION_ENV}=required) and {missing}; set \
             {ISOLATION_ENV}=best-effort to run them unconfined"
        ))
    }
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the kernel offers of Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandlockSupport {
    /// Available, with this ABI version.
    Abi(u32),
    /// Built into the kernel but not enabled at boot.
    NotEnabled,
    /// Not built into the kernel.
    NotImplemented,
}

impl LandlockSupport {
    /// Asks the kernel (`landlock_create_ruleset` with `LANDLOCK_CREATE_RULESET_VERSION`).
    #[allow(unsafe_code)]
    pub fn probe() -> LandlockSupport {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: with a null attribute pointer, a zero size and the VERSION flag the kernel
        // reads and writes no memory of ours; it returns the ABI version or -1 with errno.
        let version = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if version > 0 {
            return LandlockSupport::Abi(u32::try_from(version).unwrap_or(u32::MAX));
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP) => LandlockSupport::NotEnabled,
            _ => LandlockSupport::NotImplemented,
        }
    }

    /// The ABI version, when Landlock is available.
    pub fn abi(self) -> Option<u32> {
        match self {
            LandlockSupport::Abi(abi) => Some(abi),
            _ => None,
        }
    }
}

impl fmt::Display for LandlockSupport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LandlockSupport::Abi(abi) => write!(f, "Landlock ABI {abi}"),
            LandlockSupport::NotEnabled => f.write_str("Landlock not enabled at boot"),
            LandlockSupport::NotImplemented => f.write_str("Landlock not built in"),
        }
    }
}

/// The line `scripts/install-triton` writes into the stub's launcher script.
const LAUNCHER_MARKER: &[u8] = b"# trident-stub-launcher: 1";

/// Whether the python backend in `backends` (`<triton home>/backends`) starts its stubs
/// through trident's launcher script.
pub fn launcher_installed(backends: &Path) -> bool {
    crate::files::read_regular(
        &backends.join("python").join("triton_python_backend_stub"),
        64 << 10,
    )
    .is_ok_and(|script| {
        script
            .split(|&b| b == b'\n')
            .any(|line| line == LAUNCHER_MARKER)
    })
}

/// The path the stub launcher runs this binary by: its own path while that file is still this
/// binary; once the file was replaced on disk (an upgrade in place, a rebuild), a copy of the
/// running binary made in `folder` (the serving process's staging folder). Not
/// `/proc/<pid>/exe`: a process in the serving process's box cannot follow that link of a
/// process outside it (the supervisor), and the serving process itself is not dumpable.
pub fn launcher_binary(folder: &Path) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let identity = |m: std::fs::Metadata| (m.dev(), m.ino());
    let running = std::fs::metadata("/proc/self/exe").map(identity).ok();
    if let Ok(path) = std::env::current_exe()
        && running.is_some()
        && std::fs::metadata(&path).map(identity).ok() == running
    {
        return Ok(path);
    }
    let copy = folder.join("trident-launcher");
    std::fs::copy("/proc/self/exe", &copy)
        .and_then(|_| std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o500)))
        .map_err(|e| {
            format!(
                "this binary was replaced on disk, and a copy for python models' launcher \
                 cannot be made at {}: {e}",
                copy.display()
            )
        })?;
    Ok(copy)
}

/// Exports what the stub launcher needs to the processes the core will start: this binary's
/// path, the isolation setting and this process's staging folder. Called by the serving
/// process before it starts any thread.
#[allow(unsafe_code)]
pub fn export_for_stubs(binary: &Path, isolation: PythonIsolation, staging: &Path) {
    let values: [(&str, &OsStr); 3] = [
        (LAUNCHER_ENV, binary.as_os_str()),
        (ISOLATION_ENV, OsStr::new(isolation.name())),
        (TREES_ENV, staging.as_os_str()),
    ];
    for (name, value) in values {
        // SAFETY: called from `Cli::run` in the serving process before it starts its first
        // thread (the tokio runtime, the core's), so no other thread reads or writes the
        // environment meanwhile.
        unsafe { std::env::set_var(name, value) };
    }
}

/// Makes `folder` the serving process's working folder (an empty, read-only folder of its own,
/// [`crate::artifacts::staging::StagingArea::working_folder`]): a relative path that the core
/// or a backend resolves against the working folder names nothing there. Every path setting
/// was made absolute first ([`crate::config::Config::absolute_paths`]).
pub fn work_in(folder: &Path) -> Result<(), String> {
    std::env::set_current_dir(folder)
        .map_err(|e| format!("cannot work in {}: {e}", folder.display()))
}

/// Makes the serving process not dumpable: no process without `CAP_SYS_PTRACE` may trace it or
/// read its memory, environment or descriptors through `/proc` (its stubs drop that capability).
/// The price: no core dump of the serving process.
pub fn serving_process_undumpable() {
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!(error = %e, "the serving process could not be made undumpable");
    }
}

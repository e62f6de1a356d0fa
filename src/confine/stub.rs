//! `trident confine-stub`: boxes the process, then becomes the python backend's real stub.
//!
//! The python backend starts a stub as `<stub> <model path> <shared memory region> <default
//! size> <growth size> <parent pid> <backend folder> <control handle> <stub name> [...]`, and
//! first once with no arguments to see that it runs (it expects exit code 1). The launcher
//! reads the first two arguments (the model file and the region), boxes itself as
//! [`super`] describes, and `exec`s the real stub with every argument unchanged.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{ISOLATION_ENV, PythonIsolation, seccomp};

/// The Landlock ABI whose rights the box asks for (file system rights through `IoctlDev`);
/// a kernel with an older one enforces what it knows ([`RulesetStatus::PartiallyEnforced`]).
const FS_ABI: ABI = ABI::V5;

/// Folders of the image every stub reads (those that exist): the system and its libraries.
const SYSTEM_FOLDERS: &[&str] = &["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc"];
/// Files of `/proc` and `/sys` about the machine, not about other processes, that Python and
/// native packages read (CPU counts, memory, allocator settings, cgroup limits).
const MACHINE_FILES: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/sys/vm/overcommit_memory",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
];

/// Where the access to one path goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The file or folder (and what is beneath it).
    pub path: PathBuf,
    /// What may be done there.
    pub reach: Reach,
    /// Whether the box fails without it (the model's own files, its region, its scratch).
    pub needed: bool,
}

/// The kinds of access a [`Grant`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Read and execute.
    Read,
    /// Read and write an existing file (no creating, no removing).
    ReadWriteFile,
    /// Everything, beneath a folder.
    Full,
}

/// The arguments of a stub this launcher understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubArgs {
    /// The model's file (`<repository>/<model>/<version>/model.py`).
    pub model_path: PathBuf,
    /// The shared memory region the stub and the backend talk through (in `/dev/shm`).
    pub region: PathBuf,
}

impl StubArgs {
    /// Reads the stub's arguments; `Err` names what is wrong.
    pub fn parse(args: &[OsString]) -> Result<StubArgs, String> {
        let [model_path, region, ..] = args else {
            return Err(format!("expected the stub's arguments, got {}", args.len()));
        };
        // Relative to the working folder the stub shares with the serving process (a repository
        // given as `examples/models`).
        let model_path = std::path::absolute(PathBuf::from(model_path))
            .map_err(|e| format!("the model path {}: {e}", model_path.to_string_lossy()))?;
        let name = region
            .as_bytes()
            .strip_prefix(b"/")
            .unwrap_or(region.as_bytes());
        if name.is_empty() || name.contains(&b'/') || name == b"." || name == b".." {
            return Err(format!(
                "the shared memory region {} is not a plain name",
                region.to_string_lossy()
            ));
        }
        let region = Path::new("/dev/shm").join(std::ffi::OsStr::from_bytes(name));
        Ok(StubArgs { model_path, region })
    }

    /// The model's own folder and, where it is not a folder of the image, the repository that
    /// holds it (a load's artifact or private tree: one tenant's files).
    fn model_folders(&self, triton_home: Option<&Path>) -> Vec<PathBuf> {
        let model = self.model_path.parent().and_then(Path::parent);
        let repository = model.and_then(Path::parent).filter(|repository| {
            repository.components().count() > 2
                && triton_home.is_none_or(|home| !home.starts_with(repository))
        });
        model
            .into_iter()
            .chain(repository)
            .map(Path::to_path_buf)
            .collect()
    }
}

/// Everything the box of a stub with `args` lets it reach, `scratch` being its own folder.
pub fn rules(args: &StubArgs, scratch: &Path, real_stub: &Path) -> Vec<Grant> {
    let read = |path: PathBuf, needed| Grant {
        path,
        reach: Reach::Read,
        needed,
    };
    // <home>/backends/python/<stub>: the Triton installation.
    let triton_home = real_stub
        .canonicalize()
        .ok()
        .and_then(|stub| Some(stub.parent()?.parent()?.parent()?.to_path_buf()));
    let mut grants: Vec<Grant> = SYSTEM_FOLDERS
        .iter()
        .chain(MACHINE_FILES)
        .map(|path| read(PathBuf::from(path), false))
        .collect();
    grants.extend(triton_home.clone().map(|home| read(home, true)));
    grants.extend(python_prefixes().into_iter().map(|p| read(p, false)));
    let folders = args.model_folders(triton_home.as_deref());
    let trees = std::env::var_os(super::TREES_ENV).map(PathBuf::from);
    let linked = linked_targets(&folders, trees.as_deref());
    grants.extend(folders.into_iter().map(|folder| read(folder, true)));
    grants.extend(linked.into_iter().map(|target| read(target, false)));
    grants.push(read(
        PathBuf::from(format!("/proc/{}", std::process::id())),
        true,
    ));
    grants.push(Grant {
        path: PathBuf::from("/dev/null"),
        reach: Reach::ReadWriteFile,
        needed: false,
    });
    grants.push(Grant {
        path: args.region.clone(),
        reach: Reach::ReadWriteFile,
        needed: true,
    });
    grants.push(Grant {
        path: scratch.to_path_buf(),
        reach: Reach::Full,
        needed: true,
    });
    grants
}

/// The most entries of a model folder or repository whose links are followed.
const MAX_LINKED: usize = 1024;

/// Where the links directly in `folders` lead, for folders of a tree trident made (under
/// `trees`, the serving process's own staging folder, where no tenant writes): a linked tree (a model
/// whose configuration trident rewrote, beside the original's other files) links to the
/// artifact's own files, and Landlock judges a file by where it really is. A target is granted
/// only when it is its own canonical path: a link of the tenant's inside the artifact (which
/// the tree's link would lead through) is not followed.
fn linked_targets(folders: &[PathBuf], trees: Option<&Path>) -> Vec<PathBuf> {
    let Some(trees) = trees.and_then(|t| t.canonicalize().ok()) else {
        return Vec::new();
    };
    let made_by_trident = |folder: &Path| {
        folder
            .canonicalize()
            .is_ok_and(|folder| folder.starts_with(&trees))
    };
    folders
        .iter()
        .filter(|folder| made_by_trident(folder))
        .flat_map(|folder| std::fs::read_dir(folder).into_iter().flatten().flatten())
        .take(MAX_LINKED)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|entry| std::fs::read_link(entry.path()).ok())
        .filter(|target| {
            target.is_absolute() && target.canonicalize().ok().as_ref() == Some(target)
        })
        .collect()
}

/// The prefixes of the Pythons on `PATH` (the one the stub embeds, which the launcher script
/// puts first, and an activated execution environment's) and of an activated environment.
fn python_prefixes() -> Vec<PathBuf> {
    // Every python3 on PATH: the one the launcher script puts first, and an activated
    // environment's behind it.
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|folder| folder.join("python3"))
                .filter(|python| python.is_absolute() && python.is_file())
                .take(16)
                .collect()
        })
        .unwrap_or_default();
    let from_python = on_path
        .into_iter()
        .flat_map(|python| [python.clone(), python.canonicalize().unwrap_or(python)])
        .filter_map(|python| Some(python.parent()?.parent()?.to_path_buf()));
    let environments = ["CONDA_PREFIX", "VIRTUAL_ENV", "PYTHONHOME"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    from_python
        .chain(environments)
        .filter(|prefix| prefix.components().count() > 1)
        .collect()
}

/// Runs `trident confine-stub <real stub> <args>`: boxes this process and becomes the stub.
/// Returns only on failure, with the exit code to end with.
pub fn run(real_stub: &Path, args: &[OsString]) -> std::process::ExitCode {
    if args.is_empty() {
        // The python backend's probe: the stub with no arguments answers 1.
        return std::process::ExitCode::from(1);
    }
    let isolation = std::env::var(ISOLATION_ENV)
        .ok()
        .and_then(|value| PythonIsolation::parse(&value))
        .unwrap_or(PythonIsolation::Required);
    let mut command = std::process::Command::new(real_stub);
    command.args(args);
    if isolation == PythonIsolation::Off {
        // Unboxed, but still with a scratch folder of its own: the serving process's box
        // lets nothing but folders be made in the temporary folder itself.
        match scratch_folder() {
            Ok(scratch) => {
                command.env("TMPDIR", scratch);
            }
            Err(why) => tracing::warn!("the python model's process has no scratch folder: {why}"),
        }
    } else {
        match confine(real_stub, args, isolation) {
            Ok(scratch) => {
                command.env("TMPDIR", scratch);
            }
            Err(why) => {
                tracing::error!(
                    "the python model's process is not started: it cannot be confined \
                     ({ISOLATION_ENV}={isolation}): {why}"
                );
                return std::process::ExitCode::from(1);
            }
        }
    }
    let error = command.exec();
    tracing::error!(
        "cannot run the python backend stub {}: {error}",
        real_stub.display()
    );
    std::process::ExitCode::from(1)
}

/// Boxes this process for a stub with `args`; returns its scratch folder.
fn confine(
    real_stub: &Path,
    args: &[OsString],
    isolation: PythonIsolation,
) -> Result<PathBuf, String> {
    let stub_args = StubArgs::parse(args)?;
    let scratch = scratch_folder()?;
    let required = isolation == PythonIsolation::Required;
    drop_capabilities()?;
    let status = restrict_files(&rules(&stub_args, &scratch, real_stub), required)?;
    match status {
        RulesetStatus::FullyEnforced => {}
        RulesetStatus::PartiallyEnforced => tracing::info!(
            "the python model's process is confined by this kernel's Landlock, which lacks some \
             rights of ABI 5 and 6 (docs/CONFINEMENT.md)"
        ),
        RulesetStatus::NotEnforced if required => {
            return Err("this kernel has no Landlock".to_owned());
        }
        RulesetStatus::NotEnforced => tracing::warn!(
            "the python model's process runs without Landlock (this kernel has none): it can \
             read and write what the serving process can"
        ),
    }
    let filter = seccomp::filter(std::process::id())?;
    seccomp::install(&filter)?;
    Ok(scratch)
}

/// Drops every capability this process has and could regain, and sets `no_new_privs`.
fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .unwrap_or(63)
        .min(63);
    for cap in 0..=last {
        // Without CAP_SETPCAP (not root) nothing can be dropped, and nothing is held.
        let _ = rustix::thread::remove_capability_from_bounding_set(
            CapabilitySet::from_bits_retain(1 << cap),
        );
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| format!("cannot drop capabilities: {e}"))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("cannot set no_new_privs: {e}"))
}

/// Restricts this process's file system to `grants` with Landlock.
fn restrict_files(grants: &[Grant], required: bool) -> Result<RulesetStatus, String> {
    let landlock = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))
        .map_err(landlock)?
        .scope(Scope::AbstractUnixSocket)
        .map_err(landlock)?
        .create()
        .map_err(landlock)?;
    for grant in grants {
        let fd = match PathFd::new(&grant.path) {
            Ok(fd) => fd,
            Err(e) if grant.needed => {
                return Err(format!("cannot open {}: {e}", grant.path.display()));
            }
            Err(_) => continue,
        };
        let is_file = !grant.path.is_dir();
        let access: BitFlags<AccessFs> = match grant.reach {
            Reach::Read => AccessFs::from_read(FS_ABI),
            Reach::ReadWriteFile => {
                AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
            }
            Reach::Full => AccessFs::from_all(FS_ABI),
        };
        let access = if is_file {
            access & AccessFs::from_file(FS_ABI)
        } else {
            access
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(landlock)?;
    }
    let status = ruleset.restrict_self().map_err(landlock)?;
    if required && !status.no_new_privs {
        return Err("no_new_privs is not set".to_owned());
    }
    Ok(status.ruleset)
}

/// Where stubs' scratch folders are made: `$TMPDIR/trident-stubs` (the serving process makes
/// it before its own box, which grants it: [`super::serving`]).
pub fn scratch_root() -> PathBuf {
    std::env::temp_dir().join("trident-stubs")
}

/// The folder of the shared scratch space this stub may write (its `TMPDIR`): new, mode 0700,
/// named by this process id; the folders of stubs that ended are removed first.
fn scratch_folder() -> Result<PathBuf, String> {
    let root = scratch_root();
    match std::fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(&root)
                .map_err(|e| format!("cannot read {}: {e}", root.display()))?;
            if !meta.is_dir() || meta.uid() != rustix::process::getuid().as_raw() {
                return Err(format!("{} is not a folder of this user's", root.display()));
            }
        }
        Err(e) => return Err(format!("cannot make {}: {e}", root.display())),
    }
    remove_ended(&root);
    let random: [u8; 8] = rand::random();
    let scratch = root.join(format!("{}-{}", std::process::id(), hex::encode(random)));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&scratch)
        .map_err(|e| format!("cannot make {}: {e}", scratch.display()))?;
    Ok(scratch)
}

/// The most scratch folders one launch looks at when removing those of ended stubs.
const MAX_SWEPT: usize = 4096;

/// Removes the scratch folders under `root` whose stub has ended.
fn remove_ended(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten().take(MAX_SWEPT) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        if rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(items: &[&str]) -> Vec<OsString> {
        items.iter().map(OsString::from).collect()
    }

    #[test]
    fn stub_arguments_are_read_and_odd_ones_refused() {
        let parsed = StubArgs::parse(&args(&["/m/r/add/1/model.py", "/region_1", "1"])).unwrap();
        assert_eq!(parsed.region, Path::new("/dev/shm/region_1"));
        assert_eq!(
            parsed.model_folders(Some(Path::new("/opt/tritonserver"))),
            vec![PathBuf::from("/m/r/add"), PathBuf::from("/m/r")]
        );
        let relative = StubArgs::parse(&args(&["examples/m/1/model.py", "r"])).unwrap();
        assert!(relative.model_path.is_absolute());
        assert!(relative.model_path.ends_with("examples/m/1/model.py"));
        for bad in [
            &["/m/r/a/1/model.py", "../etc/passwd"][..],
            &["/m/r/a/1/model.py", "/"],
            &["/m/r/a/1/model.py", ".."],
            &["/m/r/a/1/model.py"],
        ] {
            assert!(StubArgs::parse(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_repository_that_holds_the_image_or_the_root_is_not_granted() {
        let parsed = StubArgs::parse(&args(&["/opt/tritonserver/backends/x/model.py", "r"]));
        let folders = parsed
            .unwrap()
            .model_folders(Some(Path::new("/opt/tritonserver")));
        assert_eq!(folders, vec![PathBuf::from("/opt/tritonserver/backends")]);
        let shallow = StubArgs::parse(&args(&["/m/1/model.py", "r"])).unwrap();
        assert_eq!(shallow.model_folders(None), vec![PathBuf::from("/m")]);
    }

    #[test]
    fn only_trident_s_own_links_are_followed_and_only_to_where_they_point() {
        let staging = tempfile::tempdir().unwrap();
        let artifact = tempfile::tempdir().unwrap();
        let other_tenant = tempfile::tempdir().unwrap();
        let original = artifact.path().canonicalize().unwrap();
        std::fs::create_dir(original.join("1")).unwrap();
        // The tenant's own link inside its artifact, out to another tenant.
        std::os::unix::fs::symlink(other_tenant.path(), original.join("evil")).unwrap();
        let tree = staging.path().join("0/m");
        std::fs::create_dir_all(&tree).unwrap();
        for name in ["1", "evil"] {
            std::os::unix::fs::symlink(original.join(name), tree.join(name)).unwrap();
        }
        let granted = linked_targets(std::slice::from_ref(&tree), Some(staging.path()));
        assert_eq!(granted, vec![original.join("1")]);
        // A folder that is not one of trident's trees: its links (the tenant's) are not followed.
        assert!(linked_targets(std::slice::from_ref(&original), Some(staging.path())).is_empty());
        assert!(linked_targets(std::slice::from_ref(&tree), None).is_empty());
    }
}

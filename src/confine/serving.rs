//! The serving process's own box: from its start, it and everything it starts (the core, the
//! backends, their stub processes) write only where the serving process must, so that whatever
//! the core or a backend unpacks or writes for an artifact cannot land anywhere else, whatever
//! the archive's or the configuration's tricks.
//!
//! The box is a Landlock ruleset over the write rights only (reading and executing stay as
//! they were: what the serving process may read is the artifact check's business, and a stub's
//! own box narrows reading further). What it grants ([`grants`]):
//! - everything beneath this process's own staging folder (`trident-artifacts-<pid>`), the
//!   stubs' scratch folders (`$TMPDIR/trident-stubs`), `/dev/shm` (the backends' shared
//!   memory), the multi-model repository, the supervisor's state folder, the plugin compile
//!   cache and the folders `TRIDENT_SERVING_WRITABLE` names;
//! - beneath the temporary folder (`TMPDIR` and `/tmp`) making folders and removing entries
//!   only: the python backend makes one at its start (`/tmp/python_env_*`, for environments,
//!   which trident unpacks itself) and removes it at its end (glibc's `remove` unlinks before
//!   it removes a folder); no file can be made or written there, so a Triton installation or
//!   an artifact that happens to lie under `/tmp` cannot be planted in;
//! - writing to existing files only (no creating, removing or renaming) beneath `/dev` (device
//!   nodes: `/dev/null`, a GPU's) and this process's own `/proc` entry;
//! - beneath the models' folders (`--model-repository`, `--models-root`): writing to existing
//!   files and linking them elsewhere, nothing else. Landlock lets a file be hard-linked only
//!   into a place where it gains no rights it lacked, and the staging folder may write its
//!   files; without the same file rights here every private tree would be a copy. Nothing can
//!   be created, removed or renamed in an artifact.
//!
//! Landlock confines the thread that asks and the threads and processes it starts after, so
//! [`confine`] runs in `trident serve` before its first thread.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus,
};

use super::Isolation;

/// The variable that sets how the serving process is confined.
pub const SERVING_ISOLATION_ENV: &str = "TRIDENT_SERVING_ISOLATION";
/// The variable that names more folders (`:`-separated) the serving process may write.
pub const SERVING_WRITABLE_ENV: &str = "TRIDENT_SERVING_WRITABLE";

/// The Landlock ABI whose write rights the box asks for; an older kernel enforces those it
/// knows.
const FS_ABI: ABI = ABI::V5;

/// What may be written beneath one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Everything: make, write, remove, rename, link.
    Anything,
    /// Make folders and remove what is there, nothing else (no file made or written): the
    /// temporary folder itself, where the python backend makes (and at its end removes) the
    /// folder it would unpack environments into.
    Folders,
    /// Write to files that exist; nothing made or removed.
    ExistingFiles,
    /// Write to files that exist and link them elsewhere (Landlock's `Refer`).
    ExistingFilesAndLinks,
}

/// One folder of the box and what may be written beneath it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The folder (and everything beneath it).
    pub path: PathBuf,
    /// What may be written there.
    pub write: Write,
}

/// The folders the serving process needs, as [`crate::config::Config`] names them.
#[derive(Debug, Clone, Default)]
pub struct Needs {
    /// Folders it makes and removes things in: staging, multi-model repository, state,
    /// compile cache, the operator's own.
    pub writable: Vec<PathBuf>,
    /// Folders artifacts are read from (private trees link their files).
    pub models: Vec<PathBuf>,
}

/// What the box grants for `needs`.
pub fn grants(needs: &Needs) -> Vec<Grant> {
    let anything = |path: PathBuf| Grant {
        path,
        write: Write::Anything,
    };
    let mut grants: Vec<Grant> = needs
        .writable
        .iter()
        .cloned()
        .chain([PathBuf::from("/dev/shm")])
        .map(anything)
        .collect();
    grants.extend(
        [std::env::temp_dir(), PathBuf::from("/tmp")]
            .into_iter()
            .map(|path| Grant {
                path,
                write: Write::Folders,
            }),
    );
    grants.extend(["/dev", "/proc/self"].into_iter().map(|path| Grant {
        path: PathBuf::from(path),
        write: Write::ExistingFiles,
    }));
    grants.extend(needs.models.iter().map(|path| Grant {
        path: path.clone(),
        write: Write::ExistingFilesAndLinks,
    }));
    grants
}

/// How the box stands once asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforced {
    /// Every write right of Landlock ABI 5.
    Fully,
    /// The write rights this kernel's Landlock knows (an ABI before 5 lacks some).
    Partly,
    /// Not at all: the kernel has no Landlock, or the setting is `off`.
    Not,
}

impl Enforced {
    /// A label for logs and `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            Enforced::Fully => "full",
            Enforced::Partly => "partial",
            Enforced::Not => "none",
        }
    }
}

/// How the box stood once asked for; `None` before [`confine`] ran (and in other processes).
pub fn enforced() -> Option<Enforced> {
    ENFORCED.get().copied()
}

static ENFORCED: std::sync::OnceLock<Enforced> = std::sync::OnceLock::new();

/// Confines the calling thread (and what it starts after) to `grants`; called before the
/// serving process's first thread. Under [`Isolation::Required`] a kernel without Landlock is
/// an error that names the setting.
pub fn confine(grants: &[Grant], isolation: Isolation) -> Result<Enforced, String> {
    if isolation == Isolation::Off {
        let _ = ENFORCED.set(Enforced::Not);
        return Ok(Enforced::Not);
    }
    let landlock = |e: landlock::RulesetError| format!("Landlock: {e}");
    let handled = write_rights();
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)
        .map_err(landlock)?
        .create()
        .map_err(landlock)?;
    for grant in grants {
        // A folder that is not there (no `/dev/shm` in this container) needs no rule: nothing
        // can be written beneath what does not exist, and what is made later is not granted.
        let Ok(fd) = PathFd::new(&grant.path) else {
            continue;
        };
        let access = match grant.write {
            Write::Anything => handled,
            // glibc's remove() of a folder (the python backend's own clean-up) tries unlink
            // first, which Landlock checks as removing a file before the kernel says EISDIR.
            Write::Folders => AccessFs::MakeDir | AccessFs::RemoveDir | AccessFs::RemoveFile,
            Write::ExistingFiles => AccessFs::WriteFile | AccessFs::Truncate,
            Write::ExistingFilesAndLinks => {
                AccessFs::WriteFile | AccessFs::Truncate | AccessFs::Refer
            }
        };
        let access = if grant.path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(FS_ABI)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(landlock)?;
    }
    let status = ruleset.restrict_self().map_err(landlock)?;
    let enforced = match status.ruleset {
        RulesetStatus::FullyEnforced => Enforced::Fully,
        RulesetStatus::PartiallyEnforced => Enforced::Partly,
        RulesetStatus::NotEnforced => Enforced::Not,
    };
    if isolation == Isolation::Required && enforced == Enforced::Not {
        return Err(format!(
            "the serving process must be confined ({SERVING_ISOLATION_ENV}=required) and this \
             host's kernel has no Landlock; set {SERVING_ISOLATION_ENV}=best-effort to serve \
             unconfined"
        ));
    }
    let _ = ENFORCED.set(enforced);
    Ok(enforced)
}

/// The rights the box handles: every right that writes, and none that reads or executes.
fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_write(FS_ABI) & !AccessFs::IoctlDev
}

/// Makes each folder of `folders` that does not exist yet (mode 0700, parents included), so
/// that the box can grant it; one that cannot be made is logged and left out (what needs it
/// reports its own error when it tries).
pub fn make_folders(folders: &[PathBuf]) {
    use std::os::unix::fs::DirBuilderExt;
    for folder in folders.iter().filter(|folder| !folder.is_dir()) {
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
        {
            tracing::warn!(folder = %folder.display(), error = %e, "cannot make a folder the serving process writes");
        }
    }
}

/// Reads `TRIDENT_SERVING_WRITABLE`'s value: absolute folders that exist, `:`-separated.
pub fn parse_writable(value: &str) -> Result<Vec<PathBuf>, String> {
    value
        .split(':')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let path = Path::new(item);
            if !path.is_absolute() {
                Err(format!(
                    "{SERVING_WRITABLE_ENV} names {item}, which is not an absolute path"
                ))
            } else if !path.is_dir() {
                Err(format!(
                    "{SERVING_WRITABLE_ENV} names {item}, which is not a folder"
                ))
            } else {
                Ok(path.to_path_buf())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only folders may be made in the temporary folder itself; the staging area and the
    /// stubs' scratch folders are the configuration's own grants.
    #[test]
    fn the_models_folders_may_be_linked_from_but_nothing_made_in_them() {
        let needs = Needs {
            writable: vec![PathBuf::from("/srv/staging")],
            models: vec![PathBuf::from("/opt/ml/models")],
        };
        let grants = grants(&needs);
        let of = |path: &str| {
            grants
                .iter()
                .find(|g| g.path == Path::new(path))
                .map(|g| g.write)
        };
        assert_eq!(of("/srv/staging"), Some(Write::Anything));
        assert_eq!(of("/tmp"), Some(Write::Folders));

        assert_eq!(of("/dev/shm"), Some(Write::Anything));
        assert_eq!(of("/dev"), Some(Write::ExistingFiles));
        assert_eq!(of("/opt/ml/models"), Some(Write::ExistingFilesAndLinks));
        assert_eq!(of("/opt"), None);
        assert_eq!(of("/usr"), None);
    }

    #[test]
    fn the_box_handles_writes_only() {
        let rights = write_rights();
        for read in [AccessFs::ReadFile, AccessFs::ReadDir, AccessFs::Execute] {
            assert!(!rights.contains(read), "{read:?}");
        }
        for write in [
            AccessFs::WriteFile,
            AccessFs::MakeReg,
            AccessFs::MakeSym,
            AccessFs::RemoveFile,
            AccessFs::Refer,
            AccessFs::Truncate,
        ] {
            assert!(rights.contains(write), "{write:?}");
        }
        // A GPU's device files are driven by ioctl: not the box's business.
        assert!(!rights.contains(AccessFs::IoctlDev));
    }

    #[test]
    fn extra_folders_must_be_absolute_and_exist() {
        let folder = tempfile::tempdir().unwrap();
        let value = format!(" {} ::", folder.path().display());
        assert_eq!(
            parse_writable(&value).unwrap(),
            vec![folder.path().to_path_buf()]
        );
        let relative = parse_writable("cache").unwrap_err();
        assert!(
            relative.contains("TRIDENT_SERVING_WRITABLE names cache"),
            "{relative}"
        );
        let missing = parse_writable("/no/such/folder").unwrap_err();
        assert!(missing.contains("not a folder"), "{missing}");
    }
}

//! A python model's execution environment (`EXECUTION_ENV_PATH`): a `.tar.gz` that the python
//! backend would unpack into a folder of its own and activate. trident unpacks it instead
//! ([`unpack`]), into the model's private tree, and points the parameter at that folder (the
//! python backend uses a folder as it is): the backend never unpacks anything from an
//! artifact. Every member must land inside that folder: an absolute path, a `..` that climbs
//! out, or a link whose target leaves it would write outside (over the image's own backend
//! libraries, which the next load runs). This holds whatever the settings; where a gate is in
//! force, execution environments are refused anyway.

mod unpack;

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// How the python backend names the model's folder in `EXECUTION_ENV_PATH`.
const MODEL_DIRECTORY: &str = "$$TRITON_MODEL_DIRECTORY";

/// The most members read from one archive.
const MAX_MEMBERS: usize = 200_000;

pub use unpack::{MAX_UNPACKED_BYTES, UNPACKED, UnpackError, point_at_unpacked, unpack};

/// The archive `EXECUTION_ENV_PATH` names for the model in `model_folder`, when it is one.
pub fn archive_path(value: &str, model_folder: &Path) -> Option<PathBuf> {
    let path = match value.strip_prefix(MODEL_DIRECTORY) {
        Some(rest) => model_folder.join(rest.trim_start_matches('/')),
        None => PathBuf::from(value),
    };
    path.is_file().then_some(path)
}

/// Checks that every member of the gzip-compressed tar archive at `path` stays inside the
/// folder it is unpacked in; the error names the first member that does not. Every gzip member
/// is read (tar and libarchive unpack a second one too), and links are held to what the
/// archive itself holds: no member is written through a symbolic link of the archive, and no
/// link's target passes through one (a chain of links each inside on its own can end at `/`).
pub fn check_archive(path: &Path) -> Result<(), String> {
    check_members(&read_members(path)?)
}

/// [`check_archive`]'s rules over `members`.
fn check_members(members: &[Member]) -> Result<(), String> {
    let links: BTreeSet<&Path> = members
        .iter()
        .filter(|m| m.kind == LinkKind::Symbolic)
        .map(|m| m.path.as_path())
        .collect();
    let through_link = |path: &Path| -> Option<PathBuf> {
        path.ancestors()
            .skip(1)
            .find(|a| links.contains(a))
            .map(Path::to_path_buf)
    };
    for member in members {
        if let Some(link) = through_link(&member.path) {
            return Err(format!(
                "has member {} that would be written through its link {}",
                member.path.display(),
                link.display()
            ));
        }
        let Some(target) = &member.target else {
            continue;
        };
        // A hard link names a member; a symbolic link is read from its own folder.
        let base = match member.kind {
            LinkKind::Hard => PathBuf::new(),
            _ => member
                .path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        };
        let leaves = match resolve(&base, target, &links) {
            None => true,
            Some(resolved) => through_link(&resolved).is_some(),
        };
        if leaves {
            return Err(format!(
                "has link {} to {}, which leaves the folder it is unpacked in or passes through \
                 another link",
                member.path.display(),
                target.display()
            ));
        }
    }
    Ok(())
}

/// What a link member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkKind {
    None,
    Hard,
    Symbolic,
}

/// One member of an archive: its path inside the folder, and a link's target.
struct Member {
    path: PathBuf,
    kind: LinkKind,
    target: Option<PathBuf>,
}

/// Every member of the archive at `path`, each path checked to stay inside the folder.
fn read_members(path: &Path) -> Result<Vec<Member>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(file));
    // Past an end-of-archive marker too: what follows is read by an unpacker that ignores it.
    archive.set_ignore_zeros(true);
    let entries = archive
        .entries()
        .map_err(|e| format!("is not a .tar.gz archive: {e}"))?;
    let mut members = Vec::new();
    for (index, member) in entries.enumerate() {
        if index == MAX_MEMBERS {
            return Err(format!("holds more than {MAX_MEMBERS} members"));
        }
        let member = member.map_err(|e| format!("is not a .tar.gz archive: {e}"))?;
        let name = member
            .path()
            .map_err(|e| format!("has a member whose name cannot be read: {e}"))?
            .into_owned();
        let Some(inside) = normalized(Path::new(""), &name) else {
            return Err(format!(
                "has member {} whose path leaves the folder it is unpacked in",
                name.display()
            ));
        };
        let entry_type = member.header().entry_type();
        let kind = if entry_type.is_hard_link() {
            LinkKind::Hard
        } else if entry_type.is_symlink() {
            LinkKind::Symbolic
        } else {
            LinkKind::None
        };
        let target = match member.link_name() {
            Ok(target) => target.map(std::borrow::Cow::into_owned),
            Err(e) => return Err(format!("has a link whose target cannot be read: {e}")),
        };
        members.push(Member {
            path: inside,
            kind,
            target,
        });
    }
    Ok(members)
}

/// `target` read from `base` as the kernel would follow it, where no folder on the way may be
/// one of the archive's symbolic `links` (whose own target a lexical `..` would not see);
/// `None` when it climbs above the folder or passes through a link.
fn resolve(base: &Path, target: &Path, links: &BTreeSet<&Path>) -> Option<PathBuf> {
    let mut out = base.to_path_buf();
    let mut components = target.components().peekable();
    while let Some(component) = components.next() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
        if components.peek().is_some() && links.contains(out.as_path()) {
            return None;
        }
    }
    Some(out)
}

/// `path` read from `base` (both relative to the unpacking folder), its `.` and `..` resolved;
/// `None` when it is absolute or climbs above the folder.
fn normalized(base: &Path, path: &Path) -> Option<PathBuf> {
    resolve(base, path, &BTreeSet::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A .tar.gz of `members`: (name, link target) pairs, files when there is no target.
    pub(super) fn archive(members: &[(&str, Option<&str>, bool)]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let encoder =
            flate2::write::GzEncoder::new(file.reopen().unwrap(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(encoder);
        for (name, target, hard) in members {
            let mut header = tar::Header::new_gnu();
            // The raw name field: `set_path` itself refuses `..` and absolute names.
            let bytes = name.as_bytes();
            header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            header.set_mode(0o755);
            match target {
                Some(target) => {
                    header.set_entry_type(if *hard {
                        tar::EntryType::Link
                    } else {
                        tar::EntryType::Symlink
                    });
                    header.set_size(0);
                    let bytes = target.as_bytes();
                    header.as_old_mut().linkname[..bytes.len()].copy_from_slice(bytes);
                    header.set_cksum();
                    builder.append(&header, &[][..]).unwrap();
                }
                None => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_size(2);
                    header.set_cksum();
                    builder.append(&header, &b"x\n"[..]).unwrap();
                }
            }
        }
        builder.into_inner().unwrap().finish().unwrap();
        file
    }

    #[test]
    fn an_environment_that_stays_in_its_folder_passes() {
        let ok = archive(&[
            ("bin/activate", None, false),
            ("lib/python3.11/site.py", None, false),
            ("bin/python", Some("python3.11"), false),
            ("lib/libz.so", Some("../lib/libz.so.1"), false),
            ("lib/copy", Some("lib/python3.11/site.py"), true),
            ("./share/./x/../y", None, false),
        ]);
        assert_eq!(check_archive(ok.path()), Ok(()));
    }

    #[test]
    fn members_and_links_that_leave_the_folder_are_named() {
        for (members, named) in [
            (
                &[("/opt/tritonserver/backends/x.so", None, false)][..],
                "/opt/tritonserver",
            ),
            (&[("bin/../../escape", None, false)][..], "escape"),
            (
                &[("bin/python", Some("/usr/bin/python3"), false)][..],
                "/usr/bin/python3",
            ),
            (
                &[("lib/evil", Some("../../../../etc/passwd"), false)][..],
                "etc/passwd",
            ),
            (&[("lib/hard", Some("../outside"), true)][..], "outside"),
        ] {
            let file = archive(members);
            let refused = check_archive(file.path()).unwrap_err();
            assert!(refused.contains(named), "{refused}");
        }
        // Links each inside on their own: one passes through another (which points up), and a
        // member is written through a link.
        for members in [
            &[("d/s", Some(".."), false), ("d/t", Some("s/.."), false)][..],
            &[("d/t", Some("s/.."), false), ("d/s", Some(".."), false)][..],
            &[("l", Some("."), false), ("l/escape", None, false)][..],
        ] {
            let file = archive(members);
            let refused = check_archive(file.path()).unwrap_err();
            assert!(refused.contains("link"), "{members:?}: {refused}");
        }
        // A second gzip member, which tar unpacks too.
        let first = archive(&[("bin/activate", None, false)]);
        let second = archive(&[("/etc/cron.d/x", None, false)]);
        let joined = tempfile::NamedTempFile::new().unwrap();
        let mut bytes = std::fs::read(first.path()).unwrap();
        bytes.extend(std::fs::read(second.path()).unwrap());
        std::fs::write(joined.path(), bytes).unwrap();
        let refused = check_archive(joined.path()).unwrap_err();
        assert!(refused.contains("/etc/cron.d"), "{refused}");
        let not_gzip = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(not_gzip.path(), b"plain").unwrap();
        assert!(check_archive(not_gzip.path()).is_err());
    }

    #[test]
    fn an_artifact_whose_environment_escapes_is_refused_in_every_configuration() {
        let root = tempfile::tempdir().unwrap();
        let model = root.path().join("p");
        std::fs::create_dir_all(model.join("1")).unwrap();
        std::fs::write(
            model.join("config.pbtxt"),
            "backend: \"python\"\nparameters { value: { string_value: \"$$TRITON_MODEL_DIRECTORY/env.tar.gz\" } key: \"EXECUTION_ENV_PATH\" }\n",
        )
        .unwrap();
        let policy = crate::artifacts::ArtifactPolicy::default();
        let good = archive(&[("bin/activate", None, false)]);
        std::fs::copy(good.path(), model.join("env.tar.gz")).unwrap();
        assert_eq!(policy.check(root.path()), Ok(()));
        let bad = archive(&[(
            "../../opt/tritonserver/backends/trident/libtriton_trident.so",
            None,
            false,
        )]);
        std::fs::copy(bad.path(), model.join("env.tar.gz")).unwrap();
        let refused = policy.check(root.path()).unwrap_err().to_string();
        assert!(
            refused.contains("env.tar.gz is an execution environment that has member ../../opt"),
            "{refused}"
        );
    }

    #[test]
    fn the_model_directory_variable_is_the_model_s_folder() {
        let folder = tempfile::tempdir().unwrap();
        std::fs::write(folder.path().join("env.tar.gz"), b"x").unwrap();
        assert_eq!(
            archive_path("$$TRITON_MODEL_DIRECTORY/env.tar.gz", folder.path()),
            Some(folder.path().join("env.tar.gz"))
        );
        assert_eq!(
            archive_path("$$TRITON_MODEL_DIRECTORY/none.tar.gz", folder.path()),
            None
        );
    }
}
